"""Prompts of the VerifyFast audit roles (verifyfast-audit.md): decompose, check facts, check logic.

The judge only detects errors, each with a level (contradiction / unsupported) and a severity
(high / low); the credit score is computed by code from the counts, never asked of the model.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

LEVELS = """ERROR LEVELS:
- contradiction: directly conflicts with the context (opposite numbers, reversed direction) -> report
- unsupported: not mentioned in the context and cannot reasonably be inferred from it -> report
- reasonable_inference: can be derived from the context's data -> NOT an error; you may list it with
  level reasonable_inference and no severity, it is recorded and never counted"""

FACT_SEVERITY = """SEVERITY (facts):
- high: opposite direction from the context, or a numerical deviation >{pct}% with opposite direction, or a
  fabricated specific number; enough to change the core conclusion
- low: numerical deviation <={pct}% with consistent direction, unsupported qualitative evaluation,
  overgeneralisation"""

LOGIC_SEVERITY = """SEVERITY (logic):
- high: causal direction completely reversed, or sycophancy distorting the factual direction; enough to
  change the core conclusion
- low: overgeneralisation, missing intermediate steps with the right conclusion direction, concept
  substitution that does not change the conclusion direction"""

ERRORS_SHAPE = ('Answer with JSON: {"errors": [{"level": "contradiction|unsupported", "severity": '
                '"high|low", "detail": "what is wrong and why", "claim": "the fact or chain concerned"}]} '
                '({"errors": []} when there is none). Return ONLY the JSON object.')


def _error_limit(req) -> str:
    """The max_errors_per_phase rule as the judge is told it."""
    return (f"Report at most {req.max_errors} errors, the most severe first: only the first "
            f"{req.max_errors} (high before low, then in your order) count toward the score.")


def _indented(chains: list[dict[str, Any]]) -> str:
    """``json.dumps(chains, indent=2, ensure_ascii=False)``, byte for byte (the prompt is hashed and
    recorded), by orjson: with ``indent`` json encodes in Python, a twentieth of a call's CPU.
    The chains hold strings only, which both write alike; a lone surrogate, which orjson refuses,
    goes to json."""
    try:
        return orjson.dumps(chains, option=orjson.OPT_INDENT_2).decode()
    except TypeError:
        return json.dumps(chains, indent=2, ensure_ascii=False)


def _pair(req) -> str:
    return f"<context_input>\n{req.context_input}\n</context_input>\n\n<model_output>\n{req.model_output}\n</model_output>"


def decompose_messages(req) -> list[dict[str, str]]:
    """decompose: at most max_facts atomic facts and the reasoning chains of the model output."""
    system = (
        "You decompose a model's output into what can be audited against its context.\n"
        f"1. Atomic facts: at most {req.max_facts} single, checkable claims the output states (numbers, "
        "directions, entities), in the output's own words.\n"
        "2. Reasoning chains: each deduction the output makes, as its premises and its conclusion.\n"
        'Answer with JSON: {"facts": ["..."], "reasoning_chains": [{"premises": ["..."], '
        '"conclusion": "..."}]}. Return ONLY the JSON object.')
    return [{"role": "system", "content": system}, {"role": "user", "content": _pair(req)}]


def facts_messages(req) -> list[dict[str, str]]:
    """check_facts: each atomic fact against the context."""
    pct = round(req.numeric_deviation_threshold * 100)
    system = ("You check facts from a model's output against the context it was given.\n\n" + LEVELS
              + "\n\n" + FACT_SEVERITY.format(pct=pct) + "\n\n" + _error_limit(req) + "\n" + ERRORS_SHAPE)
    facts = "\n".join(f"{i}. {f}" for i, f in enumerate(req.facts, 1))
    return [{"role": "system", "content": system},
            {"role": "user", "content": _pair(req) + f"\n\nFACTS TO CHECK:\n{facts or '(none)'}"}]


def logic_messages(req) -> list[dict[str, str]]:
    """check_logic: each reasoning chain for reversed causality, sycophancy, overgeneralisation."""
    system = ("You check the reasoning of a model's output against the context it was given.\n\n" + LEVELS
              + "\n\n" + LOGIC_SEVERITY + "\n\n" + _error_limit(req) + "\n" + ERRORS_SHAPE)
    chains = _indented([c.model_dump() for c in req.reasoning_chains])
    return [{"role": "system", "content": system},
            {"role": "user", "content": _pair(req) + f"\n\nREASONING CHAINS TO CHECK:\n{chains}"}]
