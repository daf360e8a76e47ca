"""Prompts of the deep-judgment roles (templates and rubrics): excerpts, risk, reasoning, parse, trait.

They follow the prompt strategies of deep-judgment-templates.md and deep-judgment-rubrics.md
(and the recorded Karenina prompts in shared/fixtures): verbatim excerpts with a confidence,
retry feedback naming each failed quote with its score and the threshold, JSON-only answers.
Each builder returns ``[{"role": "system", ...}, {"role": "user", ...}]``.
"""

from __future__ import annotations

import json

import orjson

JSON_ONLY = ("Return ONLY the JSON object - no explanations, no markdown fences, no text before or "
             "after it.")


def _attribute_lines(attributes) -> str:
    lines = []
    for a in attributes:
        kind = f" ({a.type}{': one of ' + ', '.join(map(str, a.values)) if a.values else ''})" if a.type else ""
        lines.append(f"- {a.name}{kind}: {a.description or '(no description)'}")
    return "\n".join(lines)


def _evidence_json(evidence: dict) -> str:
    """``json.dumps(evidence, indent=2, ensure_ascii=False, sort_keys=True)``, byte for byte (the
    prompt is hashed and recorded), by orjson: with ``indent`` json encodes in pure Python, and
    the reason and parse prompts of every deep-judged case paid for it (3% of a run's CPU). The
    evidence holds strings only (names, excerpts, reasoning, risk levels), which both write alike;
    what orjson refuses (a lone surrogate) goes to json."""
    try:
        return orjson.dumps(evidence, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return json.dumps(evidence, indent=2, ensure_ascii=False, sort_keys=True)


def _qa(question: str, response: str) -> str:
    return (f"<original_question>\n{question}\n</original_question>\n\n"
            f"<response_to_analyze>\n{response}\n</response_to_analyze>")


def excerpt_messages(req) -> list[dict[str, str]]:
    """extract_excerpts: up to max_excerpts verbatim quotes per attribute (template field or trait)."""
    what = "rubric traits" if req.subject == "rubric" else "template attributes"
    system = (
        f"You are an expert excerpt extractor for deep judgment of {what}. Your role is to find "
        "verbatim evidence in responses.\n\n"
        "For each attribute below, the description says what evidence to look for:\n\n"
        f"{_attribute_lines(req.attributes)}\n\n"
        f"For each attribute find up to {req.max_excerpts} exact quotes from the response:\n"
        '- "high" confidence: a direct, explicit statement matching the description\n'
        '- "medium" confidence: implied information or indirect evidence\n'
        '- "low" confidence: weak or ambiguous evidence\n'
        'If no excerpt exists, give ONE entry with empty text, confidence "none" and a short '
        "explanation.\n\n"
        "Excerpts MUST be exact text spans of the response: copy them, never paraphrase, never "
        "take text from this prompt. Cover every attribute.\n\n"
        'Answer with JSON: {"excerpts": {"attribute_name": [{"text": "exact quote", '
        '"confidence": "high|medium|low|none", "explanation": null}]}}\n' + JSON_ONLY)
    user = _qa(req.question, req.response)
    if req.feedback:
        lines = [f'- {f.attribute}: "{f.text}" scored {f.similarity:.2f} against the response, below '
                 f"the threshold {f.threshold:.2f}" for f in req.feedback]
        user += ("\n\nYour previous excerpts below were not found verbatim in the response. Quote the "
                 "response exactly this time (or give an empty excerpt with confidence \"none\"):\n"
                 + "\n".join(lines))
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def risk_messages(req) -> list[dict[str, str]]:
    """assess_risk: each excerpt against its search results -> none/low/medium/high risk."""
    system = (
        "You assess the hallucination risk of excerpts from a model's answer by checking them "
        "against web search results.\n\n"
        "For each excerpt give a risk:\n"
        '- "none": the search results confirm it\n'
        '- "low": mostly supported, minor details unconfirmed\n'
        '- "medium": not confirmed by the results, or only partly\n'
        '- "high": the results contradict it\n'
        "Judge only from the search results given; no results means you cannot confirm it.\n\n"
        'Answer with JSON: {"risks": [{"excerpt": "...", "risk": "none|low|medium|high", '
        '"justification": "one sentence"}]}\n' + JSON_ONLY)
    parts = [f"ATTRIBUTE: {req.attribute}" + (f" ({req.description})" if req.description else "")] \
        if req.attribute else ["Give one risk per excerpt, in the order given."]
    for i, item in enumerate(req.evidence, 1):
        results = "\n".join(f"  [{j}] {r.title} ({r.url}): {r.content}" for j, r in enumerate(item.results, 1))
        head = f"EXCERPT {i}" + (f" (attribute {item.attribute})" if item.attribute and not req.attribute else "")
        query = f"\nSEARCH QUERY: {item.query}" if item.query else ""
        parts.append(f"{head}: {item.excerpt}{query}\nSEARCH RESULTS:\n{results or '  (none)'}")
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(parts)}]


def abstention_messages(req) -> list[dict[str, str]]:
    """detect_abstention: does the response refuse or evade the question instead of answering it?"""
    system = (
        "You decide whether a model's response abstains: it refuses to answer, says it cannot or "
        "will not answer, or evades the question (only hedges, deflects, or says it does not know) "
        "instead of giving an answer. A response that answers, even briefly, uncertainly or wrongly, "
        "does not abstain.\n\n"
        'Answer with JSON: {"abstention": {"abstained": true|false, "evidence": "the exact words of the '
        'response that refuse or evade (empty when it does not abstain)", "reasoning": "one sentence"}}\n'
        + JSON_ONLY)
    user = f"QUESTION:\n{req.question}\n\n<response_to_analyze>\n{req.response}\n</response_to_analyze>"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def reason_messages(req) -> list[dict[str, str]]:
    """reason: per attribute, how the excerpts support or refute a value (or a trait's score)."""
    target = "score each trait" if req.subject == "rubric" else "determine each attribute's value"
    system = (
        "You explain, attribute by attribute, how the evidence in a response supports or refutes "
        f"what is needed to {target}. Use the excerpts given as your evidence; where there are none, "
        "reason from the response itself and say so. Note any hallucination risk given.\n\n"
        "Attributes:\n" + _attribute_lines(req.attributes) + "\n\n"
        'Answer with JSON: {"reasoning": {"attribute_name": "2-4 sentences"}}\n' + JSON_ONLY)
    evidence = {a.name: {"excerpts": req.excerpts.get(a.name, []),
                         **({"hallucination_risk": req.risks[a.name]} if a.name in req.risks else {})}
                for a in req.attributes}
    user = (_qa(req.question, req.response) + "\n\n<evidence>\n" +
            _evidence_json(evidence) + "\n</evidence>")
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def parse_messages(req) -> list[dict[str, str]]:
    """parse: the response (with reasoning and excerpts when deep judgment ran) into the template."""
    from evalledger.stages.judge.template_schema import template_schema_text

    system = (
        "You are an evaluator that extracts structured information from responses.\n\n"
        "Extract from the final answer each field of the JSON schema below, following each field's "
        "description. Extract only what is actually stated; use null for information that is not "
        "present. Use the correct data type for each field.\n" + JSON_ONLY)
    schema = template_schema_text(req.fields)
    user = (f"**ORIGINAL QUESTION:**\n{req.question}\n\n**RESPONSE TO PARSE:**\n{req.response}\n\n")
    if req.reasoning or req.excerpts:
        evidence = {"reasoning": req.reasoning, "excerpts": req.excerpts}
        user += ("**EVIDENCE (from deep judgment):**\n" +
                 _evidence_json(evidence) + "\n\n")
    user += f"**JSON SCHEMA (your response MUST conform to this):**\n```json\n{schema}\n```\n\n**YOUR JSON RESPONSE:**"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def trait_messages(req) -> list[dict[str, str]]:
    """score_trait: one rubric trait, standard (from the answer) or deep (from reasoning and excerpts)."""
    t = req.trait
    if t.kind == "boolean":
        guide, shape = "Answer true if the answer meets the criteria, false otherwise.", "true or false"
    else:
        guide = (f"Score from {t.min_score} (does not meet the criteria at all) to {t.max_score} "
                 "(fully meets or exceeds them).")
        shape = f"an integer from {t.min_score} to {t.max_score}"
    system = (
        f"You are a rigorous rubric evaluator assessing the trait: **{t.name}**\n\n"
        f"**Criteria:** {t.description or '(no description)'}\n\n{guide}\n"
        "- Ground your score in evidence visible in the answer text; do not infer beyond what is stated.\n"
        "- Consider both supporting and contradicting evidence before concluding.\n"
        "- Be consistent: similar answers should receive similar scores.\n\n"
        f'Answer with JSON: {{"score": {shape}, "reasoning": "one or two sentences"}}\n' + JSON_ONLY)
    user = f"**QUESTION:**\n{req.question}\n\n**ANSWER TO EVALUATE:**\n{req.response}\n"
    if req.excerpts:
        user += "\n**EXCERPTS (verbatim evidence):**\n" + "\n".join(f"- {e}" for e in req.excerpts) + "\n"
    if req.reasoning:
        user += f"\n**REASONING SO FAR:**\n{req.reasoning}\n"
    user += f"\n**TRAIT:** {t.name}\n**YOUR JSON RESPONSE:**"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]
