"""The exact ordered history of one case, read straight from the ledger (not from a read model).

Every event of the ``case:<id>`` stream, in seq order, with its time, type, stage, hash and
causation; each step lists the judge calls behind it. A call is tied to a step by what the call
was asked for: its role produces that step's event type, and, where the request names it, the
same attribute, trait or excerpt attempt. Deterministic steps (field.verified, case.judged,
credit.scored ...) have no calls: they were computed, and say so.
"""

from __future__ import annotations

from typing import Any

ROLE_STEPS = {
    "extract_excerpts": ("excerpt.extracted", "excerpt.retried", "excerpt.missing"),
    "assess_risk": ("risk.assessed",), "search": ("risk.assessed",),
    "reason": ("reasoning.generated",), "parse": ("answer.parsed",),
    "score_trait": ("trait.scored", "trait.auto_failed"), "score_claims": ("claim.scored",),
    "decompose": ("facts.decomposed",), "check_facts": ("facts.checked",), "check_logic": ("logic.checked",),
    "detect_abstention": ("abstention.detected",),
}
COMPUTED = ("field.verified", "case.auto_failed", "case.judged", "credit.scored")


class CaseNotFound(LookupError):
    """No case (or more than one) matches what was asked."""


def resolve_case(led, wanted: str) -> str:
    """The case id named by ``wanted``: a full id, a unique prefix, or ``case:<id>``."""
    wanted = wanted[5:] if wanted.startswith("case:") else wanted
    if led.stream_version(f"case:{wanted}"):
        return wanted
    matches = sorted({e.data.get("case_id") for e in led.read(types=["case.opened"])
                      if str(e.data.get("case_id", "")).startswith(wanted)})
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise CaseNotFound(f"no case {wanted!r} in this ledger")
    raise CaseNotFound(f"{wanted!r} matches {len(matches)} cases: {', '.join(matches[:10])}")


def _payload(call) -> dict[str, Any]:
    request = call.data.get("request") or {}
    payload = request.get("payload") if isinstance(request, dict) else None
    return payload if isinstance(payload, dict) else {}


def _names(payload: dict, key: str) -> set[str]:
    items = payload.get(key) or []
    return {str(i.get("name")) for i in items if isinstance(i, dict)}


def call_backs_step(call, step) -> bool:
    """True when judge call ``call`` was made for step event ``step`` (see module docstring)."""
    role = call.data.get("role")
    if step.type not in ROLE_STEPS.get(role, ()):
        return False
    payload, data = _payload(call), step.data
    if role == "extract_excerpts":
        attrs = _names(payload, "attributes")
        if attrs and str(data.get("attribute")) not in attrs:
            return False
        if payload.get("subject") and data.get("subject") and payload["subject"] != data["subject"]:
            return False
        step_attempt = call.data.get("step_attempt")
        if step.type != "excerpt.missing" and step_attempt is not None and data.get("attempt") is not None:
            return step_attempt == data["attempt"]
        return True
    if role in ("assess_risk", "search"):
        named = payload.get("attribute")
        return named is None or named == data.get("attribute")
    if role == "score_trait":
        trait = payload.get("trait")
        return not isinstance(trait, dict) or trait.get("name") == data.get("trait")
    return True


def _call_row(call) -> dict[str, Any]:
    usage = call.data.get("usage") or {}
    tokens = usage.get("total_tokens") or ((usage.get("prompt_tokens") or 0) + (usage.get("completion_tokens") or 0))
    return {"seq": call.seq, "id": call.id, "role": call.data.get("role"), "backend": call.data.get("backend"),
            "model": call.data.get("model"), "attempt": call.data.get("attempt"),
            "step_attempt": call.data.get("step_attempt"), "tokens": tokens,
            "error": call.data.get("error"), "request_hash": call.data.get("request_hash"),
            "source_event": call.data.get("source_event")}


def _deep_fields(case_id: str, events: list) -> dict[str, Any]:
    """The deep-judgment result fields, from the case's events folded as the reports fold them."""
    from evalledger.projections.appliers import CASE_APPLIERS, apply_case_event, new_case
    from evalledger.projections.deep_results import deep_judgment_results
    case = new_case(case_id)
    for event in events:
        if event.type in CASE_APPLIERS:
            apply_case_event(case, event.type, event.data, str(event.version), event.version, None)
    return deep_judgment_results(case)


def _deep_results(state: dict[str, Any]) -> dict[str, Any]:
    from evalledger.projections.deep_results import deep_judgment_results
    return deep_judgment_results(state)


def case_history(led, case_id: str, state: dict[str, Any] | None = None) -> dict[str, Any]:
    """The case's events in seq order, each with its judge calls (JSON-ready).

    ``state``: the case's read-model state (``restore_case``) when the caller has it at the
    ledger's position; the deep-judgment fields are then read from it instead of folding the
    case's events a second time.
    """
    events = list(led.read(stream=f"case:{case_id}"))
    if not events:
        raise CaseNotFound(f"no case {case_id!r} in this ledger")
    seqs = {e.id: e.seq for e in events}
    calls = [e for e in events if e.type == "judge.called"]
    opened = next((e for e in events if e.type == "case.opened"), None)
    rows = []
    for event in events:
        causation = (event.meta or {}).get("causation")
        if causation and causation not in seqs:           # caused from another stream (a file, a run)
            cause = led.get(causation)
            seqs[causation] = cause.seq if cause is not None else None
        row = {"seq": event.seq, "recorded_at": (event.meta or {}).get("recorded_at"), "type": event.type,
               "stage": (event.meta or {}).get("stage"), "id": event.id, "hash": event.hash,
               "prev_hash": event.prev_hash, "causation": causation, "causation_seq": seqs.get(causation),
               "config_hash": (event.meta or {}).get("config_hash"), "data": event.data,
               # the rest of the envelope, as docs/reports.md promises: a copied input's meta names
               # its source event, which is how a replayed case leads back to its source
               "stream": event.stream, "version": event.version, "schema": event.schema, "meta": event.meta}
        if event.type != "judge.called":
            row["judge_calls"] = [_call_row(c) for c in calls if call_backs_step(c, event)]
            row["computed"] = event.type in COMPUTED
        rows.append(row)
    # The opening's payload was validated when it was appended: read its fields as stored rather
    # than validating it again (a pydantic model per case page).
    head = opened.data if opened is not None and isinstance(opened.data, dict) else {}
    deep = _deep_fields(case_id, events) if state is None else _deep_results(state)
    return {**deep,
            "case_id": case_id, "benchmark": head.get("benchmark"), "model": head.get("model"),
            "question_id": head.get("question_id"), "kind": head.get("kind"),
            "events": rows}


def _summary(row: dict) -> str:
    d = row["data"] if isinstance(row["data"], dict) else {}
    keys = {"excerpt.extracted": ("attribute", "similarity", "attempt"), "excerpt.retried": ("attribute", "attempt"),
            "excerpt.missing": ("attribute",), "field.verified": ("field", "extracted", "expected", "passed"),
            "case.judged": ("verdict", "auto_failed", "reasons"), "trait.scored": ("trait", "mode", "score"),
            "claim.scored": ("claim_id", "score"), "credit.scored": ("high", "low", "credit_score", "zone"),
            "stage.failed": ("stage", "reason"), "verdict.overridden": ("verdict", "author", "reason"),
            "verdict.confirmed": ("verdict", "author", "reason"),
            "case.auto_failed": ("reasons",), "judge.called": ("role", "model", "attempt", "error"),
            "case.opened": ("benchmark", "question_id", "model"), "note.added": ("author",),
            "abstention.detected": ("evidence",),
            "repeat.judged": ("repeat", "sampling", "verdict", "traits", "claims", "credit_score"),
            "case.repeated": ("rule", "tie", "verdicts", "flips", "verdict")}.get(row["type"], ())
    return " ".join(f"{k}={d.get(k)!r}" for k in keys if k in d)


def _text(value: Any, limit: int = 240) -> str:
    """A value from a file or a judge as one safe line: control characters escaped, cut at ``limit``."""
    text = value if isinstance(value, str) else repr(value)
    text = "".join(c if c.isprintable() or c == " " else c.encode("unicode_escape").decode() for c in text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _details(row: dict) -> list[str]:
    """What the one-line summary leaves out: quotes, notes, parsed values, reasoning, facts, errors."""
    d = row["data"] if isinstance(row["data"], dict) else {}
    kind = row["type"]
    if kind == "note.added":
        return [f"note by {_text(d.get('author') or 'anonymous')}: {_text(d.get('text'), 2000)}"]
    if kind == "excerpt.extracted":
        return [f"quote: {_text(d.get('text'))}"]
    if kind in ("excerpt.retried", "excerpt.missing"):
        return [f"failed quote (similarity {f.get('similarity')}): {_text(f.get('text'))}"
                for f in d.get("failed") or [] if isinstance(f, dict)]
    if kind == "risk.assessed":
        return [f"risk {e.get('risk')}: {_text(e.get('text'), 120)} - {_text(e.get('justification'), 160)}"
                for e in d.get("excerpts") or [] if isinstance(e, dict)]
    if kind == "reasoning.generated":
        lines = [f"reasoning {_text(k, 60)}: {_text(v)}" for k, v in sorted((d.get("reasoning") or {}).items())]
        return lines + ([f"error: {_text(d['error'])}"] if d.get("error") else [])
    if kind == "answer.parsed":
        return [f"parsed {_text(k, 60)} = {_text(v)}" for k, v in sorted((d.get("values") or {}).items())]
    if kind == "claim.scored":
        return [f"justification: {_text(d.get('justification'))}"]
    if kind == "facts.decomposed":
        return [f"fact {i}: {_text(f)}" for i, f in enumerate(d.get("facts") or [], 1)]
    if kind in ("facts.checked", "logic.checked"):
        errors = [e for e in d.get("errors") or [] if isinstance(e, dict)]
        # a reasonable inference has no severity (it is recorded, never counted as an error)
        return [" ".join(filter(None, (e.get("severity"), e.get("level")))) + f": {_text(e.get('detail'))}"
                for e in errors] or ["no errors"]
    if kind == "stage.failed":
        return [f"reason: {_text(d.get('reason'), 1000)}"]
    return []


def format_history(history: dict[str, Any]) -> str:
    """The history as text: one line per event, its judge calls indented under it."""
    model = history["model"] if history["model"] is not None else "(no model)"
    lines = [f"case {history['case_id']}  benchmark {history['benchmark']}  model {model}  "
             f"question {history['question_id']}  kind {history['kind']}",
             f"{'seq':>7}  {'recorded_at':<27} {'type':<20} {'stage':<15} {'hash':<12}  causation"]
    for row in history["events"]:
        cause = f"seq {row['causation_seq']}" if row["causation_seq"] else (row["causation"] or "-")
        lines.append(f"{row['seq']:>7}  {row['recorded_at'] or '':<27} {row['type']:<20} "
                     f"{row['stage'] or '-':<15} {row['hash'][:12]}  {cause}  {_summary(row)}")
        lines += [f"{'':>9}{line}" for line in _details(row)]
        for call in row.get("judge_calls", []):
            lines.append(f"{'':>9}judge seq {call['seq']}: {call['role']} {call['backend']}/{call['model']} "
                         f"attempt {call['attempt']} tokens {call['tokens']}"
                         + (f" error {call['error']}" if call["error"] else ""))
        if row.get("computed"):
            lines.append(f"{'':>9}computed by code, no judge call")
    lines += _deep_lines(history)
    return "\n".join(lines) + "\n"


def _deep_lines(history: dict[str, Any]) -> list[str]:
    """The deep-judgment result fields as text (template cases that used deep judgment)."""
    template, rubric = history.get("deep_judgment"), history.get("deep_judgment_rubric")
    lines = []
    if template and template["deep_judgment_performed"]:
        lines.append("deep judgment: stages " + (", ".join(template["deep_judgment_stages_completed"]) or "none")
                     + f"; {template['deep_judgment_model_calls']} model calls; "
                     f"{template['deep_judgment_excerpt_retry_count']} excerpt retries; without excerpts: "
                     + (_text(", ".join(template["attributes_without_excerpts"])) or "none"))
    if rubric and rubric["deep_judgment_rubric_performed"]:
        lines.append(f"rubric deep judgment: {rubric['total_traits_evaluated']} traits, "
                     f"{rubric['total_deep_judgment_model_calls']} model calls, "
                     f"{rubric['total_excerpt_retries']} excerpt retries; without valid excerpts: "
                     + (_text(", ".join(rubric["traits_without_valid_excerpts"])) or "none"))
        for name, meta in rubric["trait_metadata"].items():
            lines.append(f"  trait {_text(name, 60)}: stages {', '.join(meta['stages_completed']) or 'none'}; "
                         f"{meta['model_calls']} calls; retries {meta['excerpt_retry_count']}")
    return lines
