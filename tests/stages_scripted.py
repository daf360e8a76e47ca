"""A scripted judge for the chat-completions stand-in: replies computed from the request body.

Replies depend only on what was asked (role, prompt), never on the order of requests, so a run
interrupted at any moment and resumed gets the same answers as an uninterrupted one.
"""

from __future__ import annotations

import re
from typing import Any, Callable

Handler = Callable[[dict[str, Any], str], Any]


def role_of(body: dict[str, Any]) -> str:
    """The judge role: the name of the requested JSON schema."""
    return body["response_format"]["json_schema"]["name"]


def user_text(body: dict[str, Any]) -> str:
    """The first user message (the request; later ones are re-ask feedback)."""
    return next(m["content"] for m in body["messages"] if m["role"] == "user")


def response_of(body: dict[str, Any]) -> str:
    """The response under judgment, as the excerpt, reason and parse prompts quote it."""
    text = user_text(body)
    found = re.search(r"<response_to_analyze>\n(.*?)\n</response_to_analyze>", text, re.S) \
        or re.search(r"\*\*RESPONSE TO PARSE:\*\*\n(.*?)\n\n", text, re.S)
    return found.group(1) if found else ""


def pairs_sentence(response: str) -> str:
    """The sentence of the response that gives the number of pairs ('' when none)."""
    found = re.search(r"[^.]*\d+ pairs[^.]*\.?", response)
    return found.group(0).strip() if found else ""


def template_judge(*, paraphrase_first: bool = False, always_paraphrase: bool = False) -> Handler:
    """A judge for the chromosome template: quotes, reasons and parses the pairs sentence."""

    def handle(body: dict[str, Any], role: str) -> Any:
        response = response_of(body)
        sentence = pairs_sentence(response)
        if role == "extract_excerpts":
            retry = "previous excerpts" in user_text(body)
            if always_paraphrase or (paraphrase_first and not retry):
                text = "humans possess twenty-three chromosome couples in every somatic cell"
            else:
                text = sentence
            return {"excerpts": {"pair_count": [{"text": text, "confidence": "high" if text else "none"}]}}
        if role == "reason":
            return {"reasoning": {"pair_count": f"The response says: {sentence or 'nothing'}"}}
        if role == "parse":
            number = re.search(r"(\d+) pairs", response)
            return {"pair_count": int(number.group(1)) if number else None}
        if role == "score_trait":
            return {"score": 4, "reasoning": "clear enough"}
        raise AssertionError(f"unexpected role {role}")

    return handle


def dispatch(handler: Handler) -> Callable[[dict[str, Any]], Any]:
    """The stand-in's reply_fn for ``handler(body, role)``."""
    return lambda body: handler(body, role_of(body))


def claims_reply(body: dict[str, Any]) -> Any:
    """Every claim of the prompt scored by how many of its words the rest of the prompt repeats."""
    text = user_text(body)
    claims = re.findall(r"^\[(\w+)\] (.+)$", text, re.M)
    out = []
    for claim_id, claim in claims:
        words = [w for w in re.findall(r"[a-z]+", claim.lower()) if len(w) > 3]
        rest = text.replace(claim, "").lower()
        score = round(10 * sum(w in rest for w in words) / max(len(words), 1))
        out.append({"claim_id": claim_id, "score": score, "justification": f"{score}/10 of its words recur.",
                    "evidence_refs": ["synthesis"] if score else []})
    return {"evaluations": out}


def audit_reply(body: dict[str, Any], role: str) -> Any:
    """Decompose into sentences; a fact that says 'fell' contradicts the context (high), a 'so' is a leap (low)."""
    output = re.search(r"<model_output>\n(.*?)\n</model_output>", user_text(body), re.S).group(1)
    if role == "decompose":
        return {"facts": [s.strip() for s in re.split(r"(?<=\.)\s+", output) if s.strip()][:5],
                "reasoning_chains": [{"premises": [output.split(", so ")[0]], "conclusion": output.split(", so ")[1]}]
                if ", so " in output else []}
    if role == "check_facts":
        return {"errors": [{"level": "contradiction", "severity": "high", "detail": "direction reversed"}]
                if "fell" in output else []}
    if role == "check_logic":
        return {"errors": [{"level": "unsupported", "severity": "low", "detail": "a leap"}] if ", so " in output else []}
    raise AssertionError(role)


def every_path_judge() -> Callable[[dict[str, Any]], Any]:
    """One reply_fn for template (with an excerpt retry), rubric, reconstruction and audit requests."""
    template = template_judge(paraphrase_first=True)

    def reply(body: dict[str, Any]) -> Any:
        role = role_of(body)
        if role == "score_claims":
            return claims_reply(body)
        if role in ("decompose", "check_facts", "check_logic"):
            return audit_reply(body, role)
        return template(body, role)

    return reply
