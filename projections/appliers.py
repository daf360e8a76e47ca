"""The fold: apply one event at a time to the read-model states (cases, benchmarks, runs).

States are plain JSON-ready dicts keyed by ids, so they can be stored as rows and folded further
later (incremental update) with exactly the result a fold from seq 1 gives. Nothing here depends
on global seq order across cases: inside one case the stream ``version`` decides "latest wins",
and everything keyed by event id is rendered sorted, so two interleavings of the same per-case
histories give the same states.
"""

from __future__ import annotations

import hashlib
from itertools import compress
from typing import Any, Callable

import orjson

# Event types the read models fold; anything else is skipped (the history command reads the ledger).
CASE_TYPES = (
    "case.opened", "judge.called", "excerpt.extracted", "excerpt.retried", "excerpt.missing",
    "risk.assessed", "reasoning.generated", "answer.parsed", "field.verified", "case.auto_failed",
    "case.judged", "trait.scored", "trait.auto_failed", "claim.scored", "facts.decomposed",
    "facts.checked", "logic.checked", "credit.scored", "stage.failed", "verdict.overridden",
    "verdict.confirmed", "abstention.detected", "repeat.judged", "case.repeated",
)
BENCHMARK_TYPES = ("benchmark.registered", "benchmark.rejected")
RUN_TYPES = ("run.started", "run.completed")
CHECKPOINT_TYPES = ("checkpoint.signed",)
FOLDED_TYPES = CASE_TYPES + BENCHMARK_TYPES + RUN_TYPES + CHECKPOINT_TYPES
# The one key of ``proj_checkpoints``: reports name the latest checkpoint only.
LATEST_CHECKPOINT = "latest"


# Keys stored even when empty (ids); every other key is left out of a stored state while it holds
# its empty default, and ``restore_case`` puts the default back.
ALWAYS_STORED = frozenset(("case_id", "benchmark", "kind", "question_id", "model"))


def sparse_case(case: dict[str, Any]) -> dict[str, Any]:
    """The state as stored: empty defaults left out (a third of a small case's bytes)."""
    stored = dict(compress(case.items(), case.values()))   # the items with a value, picked in C
    for key in ALWAYS_STORED:
        if key not in stored and key in case:
            stored[key] = case[key]
    return stored


def restore_case(stored: dict[str, Any]) -> dict[str, Any]:
    """A stored (sparse) state with every key back."""
    case = new_case(stored["case_id"])
    case.update(stored)
    return case


def new_case(case_id: str) -> dict[str, Any]:
    """An empty case state: every key present, so rendering never guesses (fresh containers)."""
    return {
        "case_id": case_id, "opened": False, "benchmark": None, "kind": None, "question_id": None,
        "model": None, "profile": None, "question": {}, "config": {}, "config_hashes": [],
        "judged": None, "auto_fail_reasons": [], "fields": {}, "excerpts": {}, "excerpt_retries": {},
        "missing_excerpts": {}, "risk": {}, "reasoning": None, "parsed": None, "traits": {},
        "traits_auto_failed": [], "claims": {}, "decomposed": None, "facts_errors": None,
        "logic_errors": None, "credit": None, "calls": {}, "failures": {}, "overrides": [],
        "confirmations": [], "abstention": None, "judged_at": None, "repeats": {}, "response": None,
        "response_chars": 0,
    }


def case_id_of(stream: str, data: Any) -> str | None:
    """The case an event belongs to: its payload's ``case_id``, else a ``case:<id>`` stream."""
    if isinstance(data, dict):
        case_id = data.get("case_id")
        if isinstance(case_id, str):
            return case_id
    if stream.startswith("case:"):
        return stream[5:]
    return None


def _question_summary(kind: str | None, question: Any) -> dict[str, Any]:
    """The part of ``case.opened.question`` the reports need (claims, audit expectations, text)."""
    if not isinstance(question, dict):
        return {}
    if kind == "reconstruction":
        claims = [{"id": str(c.get("id")), "text": c.get("text"), "type": c.get("type"),
                   "importance": c.get("importance")}
                  for c in question.get("original_claims") or [] if isinstance(c, dict)]
        summary = {"doc_id": question.get("doc_id"), "original_claims": claims}
        if question.get("collection") is not None:
            summary["collection"] = str(question["collection"])
        return summary
    if kind == "audit":
        return {key: question.get(key) for key in ("id", "tag", "difficulty", "description",
                                                   "expected_credit_score", "expected_from")}
    fields = (question.get("template") or {}).get("fields") or []
    return {"question": question.get("question"),
            "fields": sorted(str(f.get("name")) for f in fields if isinstance(f, dict))}


def _latest(slot: dict | None, version: int) -> bool:
    """True when an event at stream ``version`` should replace ``slot`` (later in its stream wins)."""
    return slot is None or slot.get("v", 0) <= version


def _set_versioned(table: dict, key: str, value: dict, version: int) -> None:
    if _latest(table.get(key), version):
        table[key] = {**value, "v": version}


def _usage_tokens(usage: Any) -> tuple[int, int, int]:
    """(input, output, total) tokens from a judge call's ``usage`` in OpenAI or Anthropic naming."""
    if not isinstance(usage, dict):
        return 0, 0, 0
    inp = usage.get("prompt_tokens", usage.get("input_tokens")) or 0
    out = usage.get("completion_tokens", usage.get("output_tokens")) or 0
    total = usage.get("total_tokens") or (inp + out)
    return int(inp), int(out), int(total)


def _call_cost(data: dict) -> float | None:
    """A judge call's cost in USD, wherever the port put it (``cost``, ``cost_usd``, ``usage.cost``).

    None (unknown) for a call a live model answered whose model has no price; 0.0 for what costs
    nothing: the offline judge, a replayed or reused answer, an attempt the server billed no tokens for.
    """
    for value in (data.get("cost"), data.get("cost_usd"), (data.get("usage") or {}).get("cost")):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, dict):
            inner = value.get("usd", value.get("total"))
            if isinstance(inner, (int, float)):
                return float(inner)
    paid = data.get("backend") == "openai" and not data.get("source_event")
    if paid and (data.get("usage") or data.get("error") is None):
        return None
    return 0.0


# --- per-type appliers ------------------------------------------------------------------------------

# How much of a text response a case state keeps for its case page (the excerpt shown there is
# cut from it): bounded, so a 1 MB response does not make a 1 MB state.
RESPONSE_KEPT = 4000


def _opened(case, d, key, version):
    case.update(opened=True, benchmark=d.get("benchmark"), kind=d.get("kind"),
                question_id=str(d.get("question_id")), model=d.get("model"),
                question=_question_summary(d.get("kind"), d.get("question")), profile=d.get("profile"),
                config=d.get("config") if isinstance(d.get("config"), dict) else {})
    response = d.get("response")
    if isinstance(response, str) and response:   # a reconstruction's answers are shown on its document page
        case.update(response=response[:RESPONSE_KEPT], response_chars=len(response))


# A judge call is stored as a list in this field order (a third of a case's state otherwise);
# ``call_fields`` gives it back as a dict.
CALL_FIELDS = ("role", "backend", "model", "attempt", "error", "source_backend", "input_tokens",
               "output_tokens", "tokens", "cost", "subject", "targets", "order")


def call_fields(stored: list) -> dict[str, Any]:
    """A stored judge call as a dict keyed by CALL_FIELDS."""
    return dict(zip(CALL_FIELDS, stored))


# The deep-judgment roles: whose evidence a call served (template or rubric) and for which fields
# or traits, read from its request, so results can count deep-judgment calls per subject and trait.
DEEP_ROLES = frozenset(("extract_excerpts", "assess_risk", "reason", "parse", "score_trait"))


def call_target(role: Any, request: Any) -> tuple[str | None, list[str]]:
    """(subject, names) a deep-judgment call served; (None, []) for other roles."""
    if role not in DEEP_ROLES or not isinstance(request, dict):
        return None, []
    return payload_target(role, request.get("payload"))


def payload_target(role: Any, payload: Any) -> tuple[str | None, list[str]]:
    """(subject, names) a deep-judgment call of ``role`` served, read from its request's payload."""
    if not isinstance(payload, dict):
        return None, []
    if role == "score_trait":
        trait = payload.get("trait")
        return "rubric", [str(trait.get("name"))] if isinstance(trait, dict) else []
    if role == "parse":
        return "template", [str(f.get("name")) for f in payload.get("fields") or [] if isinstance(f, dict)]
    subject = payload.get("subject") if payload.get("subject") in ("template", "rubric") else "template"
    if role == "assess_risk":
        names = {str(e.get("attribute")) for e in payload.get("evidence") or [] if isinstance(e, dict)}
        names |= {str(payload["attribute"])} if payload.get("attribute") else set()
        return subject, sorted(n for n in names if n)
    return subject, [str(a.get("name")) for a in payload.get("attributes") or [] if isinstance(a, dict)]


# Every key of a judge.called payload that the fold routes by (``case_id``) or ``_judge_called``
# (with ``call_target`` and ``_call_cost``) reads, besides ``request.payload``: a fold resolves blob references in these parts only, so a
# call's prompt and reply (most of its bytes, kept in the blob store) are never fetched for it.
# A key read there must be listed here (tests/test_projection_blob_reads.py checks the two agree).
JUDGE_CALL_READS = ("case_id", "role", "backend", "model", "attempt", "error", "source_backend", "usage", "cost",
                    "cost_usd", "source_event", "order")
# The read parts ``judge_call_entry`` takes as they are stored when they are not containers (a
# reference is a dict); ``usage`` and ``cost`` are looked at apart.
# (``cost_usd`` and ``source_event`` are read for a cost that is not a number alone, ``case_id`` by the fold.)
_SMALL_READS = ("backend", "model", "attempt", "error", "source_backend", "order")


def judge_call_reads(d: dict, join: Callable[[Any], Any], open_ref: Callable[[Any], Any]) -> dict:
    """A stored ``judge.called`` payload (decoded, the caller's own) with the parts ``_judge_called``
    reads resolved in place: ``join`` resolves a value whole, ``open_ref`` one reference a level
    deep. The request is opened only for a deep-judgment role, and then only its ``payload`` is
    joined; the prompt and reply keep their references."""
    if len(d) == 1 and ("$blob" in d or "$lit" in d):   # the whole payload a reference or escaped
        return join(d)  # type: ignore[no-any-return]
    get = d.get
    for name in JUDGE_CALL_READS:
        value = get(name)
        if value.__class__ is dict or value.__class__ is list:   # a reference is a dict
            d[name] = _joined(value, join)
    if d.get("role") in DEEP_ROLES:
        request = open_ref(get("request"))
        if request.__class__ is dict:
            if len(request) == 1 and "$lit" in request:   # a request that looks like a reference
                request = join(request)
            d["request"] = {"payload": _joined(request.get("payload"), join)}
    return d


def _joined(value: Any, join: Callable[[Any], Any]) -> Any:
    """``value`` with its blob references resolved; found by encoding it (one C
    call) rather than by walking it, since most parts hold none. A reference is a dict, so a
    container holding no container (token counts) and not one itself holds none."""
    if value.__class__ is dict:
        if len(value) == 1 and ("$blob" in value or "$lit" in value):
            return join(value)
        inner = value.values()
    elif value.__class__ is list:
        inner = value
    else:
        return value   # a string, number or null holds no reference
    for item in inner:
        if item.__class__ is dict or item.__class__ is list:
            break
    else:
        return value
    try:
        if b'"$' not in orjson.dumps(value):
            return value
    except orjson.JSONEncodeError:   # an integer beyond 64 bits: walk it
        pass
    return join(value)


def _judge_called(case, d, key, version):
    case["calls"][key] = judge_call_entry(d)


_NUMBER = (int, float)
_NO_TARGET: tuple[None, list[str]] = (None, [])


def judge_call_entry(d: dict, join: Callable[[Any], Any] | None = None,
                     open_ref: Callable[[Any], Any] | None = None) -> list:
    """A judge call's stored entry (``CALL_FIELDS`` order) from its payload.

    ``join`` (with ``open_ref``) given: ``d`` is the payload as stored, blob references in place
    (the rebuild's hot path); only what the entry reads is resolved. Most calls hold references in
    their prompt and reply alone: then only ``usage`` (a dict) and, for a deep-judgment role, the
    request's payload are looked at; any other read part that is a container (a reference is a
    dict), or a cost that is not a number, takes ``judge_call_reads`` first. Without ``join``,
    ``d`` is already resolved. One pass over the payload: this runs for a third of all events.
    """
    get = d.get
    small = tuple(map(get, _SMALL_READS))   # in C: no Python loop over the names
    role, cost = get("role"), get("cost")
    if join is not None and (len(d) == 1 or cost.__class__ not in _NUMBER or role.__class__ is not str
                             or not _CONTAINERS.isdisjoint(map(type, small))):
        d = judge_call_reads(d, join, open_ref)   # type: ignore[arg-type]
        get, join = d.get, None
        small, role, cost = tuple(map(get, _SMALL_READS)), get("role"), get("cost")
    usage = get("usage")
    if usage.__class__ is dict:
        if join is not None and (len(usage) == 1 or not _CONTAINERS.isdisjoint(map(type, usage.values()))):
            usage = _joined(usage, join)   # a reference, or holding containers: most hold numbers alone
        inp = usage.get("prompt_tokens", usage.get("input_tokens")) or 0
        out = usage.get("completion_tokens", usage.get("output_tokens")) or 0
        tokens = (int(inp), int(out), int(usage.get("total_tokens") or (inp + out)))
    else:
        tokens = (0, 0, 0)
    subject, targets = _NO_TARGET
    if role in DEEP_ROLES:
        request = get("request")
        if not isinstance(request, dict):
            payload = None
        else:
            if join is not None and len(request) == 1:   # a reference, or a request that looks like one
                request = open_ref(request)   # type: ignore[misc]
                if request.__class__ is dict and len(request) == 1 and "$lit" in request:
                    request = join(request)   # type: ignore[misc]
            payload = request.get("payload") if request.__class__ is dict else None
            if join is not None:
                payload = _joined(payload, join)
        subject, targets = payload_target(role, payload)
    return [role, *small[:5], *tokens, float(cost) if cost.__class__ in _NUMBER else _call_cost(d),
            subject, targets, small[5]]


# A blob reference is a dict: a part holding neither kind of container holds none.
_CONTAINERS = frozenset((dict, list))


def subject_of(d: dict) -> str:
    """Whose evidence an excerpt or risk event is: ``template`` (a field) or ``rubric`` (a trait).

    Evidence is kept per subject, so a template field and a rubric trait of the same name never
    share one list.
    """
    subject = d.get("subject")
    return subject if isinstance(subject, str) and subject else "template"


def _excerpt(case, d, key, version):
    per_attr = case["excerpts"].setdefault(subject_of(d), {}).setdefault(str(d.get("attribute")), {})
    per_attr[key] = {"text": d.get("text"), "similarity": d.get("similarity"),
                       "confidence": d.get("confidence"), "attempt": d.get("attempt"), "v": version}


def _retried(case, d, key, version):
    per_attr = case["excerpt_retries"].setdefault(subject_of(d), {}).setdefault(str(d.get("attribute")), {})
    per_attr[key] = {"attempt": d.get("attempt"), "failed": d.get("failed") or []}


def _missing(case, d, key, version):
    attr, subject = str(d.get("attribute")), subject_of(d)
    missing = case["missing_excerpts"]
    if attr not in missing.get(subject, []):
        case["missing_excerpts"] = {**missing, subject: sorted([*missing.get(subject, []), attr])}


def _risk(case, d, key, version):
    _set_versioned(case["risk"].setdefault(subject_of(d), {}), str(d.get("attribute")),
                   _without(d, "case_id", "attribute", "subject"), version)


def _without(d: dict, *keys: str) -> dict:
    return {k: v for k, v in d.items() if k not in keys}


def _reasoning(case, d, key, version):
    if _latest(case["reasoning"], version):
        case["reasoning"] = {**_without(d, "case_id"), "v": version}


def _parsed(case, d, key, version):
    if _latest(case["parsed"], version):
        case["parsed"] = {**_without(d, "case_id"), "v": version}


def _field(case, d, key, version):
    name = str(d.get("field"))
    fields = case["fields"]
    if _latest(fields.get(name), version):
        fields[name] = {"primitive": d.get("primitive"), "extracted": d.get("extracted"),
                        "expected": d.get("expected"), "passed": d.get("passed"), "v": version}
        if d.get("auto_failed"):  # not verified because the case auto-failed, whatever the primitive said
            fields[name].update(auto_failed=True, primitive_passed=d.get("primitive_passed"))


def _auto_failed(case, d, key, version):
    case["auto_fail_reasons"] = sorted(set(case["auto_fail_reasons"]) | set(map(str, d.get("reasons") or [])))


def _judged(case, d, key, version):
    if _latest(case["judged"], version):
        case["judged"] = {"verdict": d.get("verdict"), "auto_failed": bool(d.get("auto_failed")),
                          "reasons": list(d.get("reasons") or []), "v": version}
        if d.get("deep_judgment"):
            case["judged"]["deep_judgment"] = True


def _abstention(case, d, key, version):
    if _latest(case["abstention"], version):
        case["abstention"] = {"evidence": d.get("evidence"), "reasoning": d.get("reasoning"),
                              "skipped_auto_fail": list(d.get("skipped_auto_fail") or []), "v": version}


def _trait(case, d, key, version):
    value = {"mode": d.get("mode"), "score": d.get("score"), "reasoning": d.get("reasoning")}
    if d.get("degraded"):  # a deep trait step that failed (the trait metadata leaves it out of its stages)
        value["degraded"] = list(d["degraded"])
    _set_versioned(case["traits"], str(d.get("trait")), value, version)


def _trait_auto_failed(case, d, key, version):
    trait = str(d.get("trait"))
    if trait not in case["traits_auto_failed"]:
        case["traits_auto_failed"] = sorted([*case["traits_auto_failed"], trait])


def _claim(case, d, key, version):
    claim_id = str(d.get("claim_id"))
    claims = case["claims"]
    if _latest(claims.get(claim_id), version):
        claims[claim_id] = {
            "score": d.get("score"), "justification": d.get("justification"),
            "evidence_refs": list(d.get("evidence_refs") or []), "claim_text": d.get("claim_text"),
            "claim_type": d.get("claim_type"), "importance": d.get("importance"),
            "band": d.get("band"), "bands": d.get("bands"), "v": version}


def _decomposed(case, d, key, version):
    if _latest(case["decomposed"], version):
        case["decomposed"] = {**_without(d, "case_id"), "v": version}


def _checked(slot: str):
    def apply(case, d, key, version):
        if _latest(case[slot], version):
            case[slot] = {"errors": list(d.get("errors") or []), "inferences": list(d.get("inferences") or []),
                          "counted": d.get("counted"), "dropped": d.get("dropped") or 0, "v": version}
    return apply


def _credit(case, d, key, version):
    if _latest(case["credit"], version):
        case["credit"] = {"high": d.get("high"), "low": d.get("low"),
                          "credit_score": d.get("credit_score"), "zone": d.get("zone"),
                          "expected_credit_score": d.get("expected_credit_score"),
                          "expected_zone": d.get("expected_zone"), "v": version}


def _stage_failed(case, d, key, version):
    case["failures"][key] = {"stage": d.get("stage"), "reason": d.get("reason"), "v": version}


def _repeat(case, d, key, version):
    """One repeat's results, by repeat index (``repeats.runs``); a later event of the same repeat wins."""
    runs = case["repeats"].setdefault("runs", {})
    _set_versioned(runs, str(d.get("repeat")), _without(d, "case_id", "repeat"), version)


def _repeated(case, d, key, version):
    """The rule's decision over a case's repeats (``repeats.decision``)."""
    if _latest(case["repeats"].get("decision"), version):
        case["repeats"]["decision"] = {**_without(d, "case_id"), "v": version}


def _review(slot: str):
    """An applier keeping every reviewer event of one kind (override or confirmation), in stream order."""
    def apply(case, d, key, version):
        entry = {"verdict": d.get("verdict"), "reason": d.get("reason"), "author": d.get("author"),
                 "v": version, "id": key}
        if entry not in case[slot]:
            case[slot] = sorted([*case[slot], entry], key=lambda o: (o["v"], o["id"]))
    return apply


CASE_APPLIERS: dict[str, Callable] = {
    "case.opened": _opened, "judge.called": _judge_called, "excerpt.extracted": _excerpt,
    "excerpt.retried": _retried, "excerpt.missing": _missing, "risk.assessed": _risk,
    "reasoning.generated": _reasoning, "answer.parsed": _parsed, "field.verified": _field,
    "case.auto_failed": _auto_failed, "case.judged": _judged, "trait.scored": _trait,
    "trait.auto_failed": _trait_auto_failed, "claim.scored": _claim, "facts.decomposed": _decomposed,
    "facts.checked": _checked("facts_errors"), "logic.checked": _checked("logic_errors"),
    "credit.scored": _credit, "stage.failed": _stage_failed, "verdict.overridden": _review("overrides"),
    "verdict.confirmed": _review("confirmations"), "abstention.detected": _abstention,
    "repeat.judged": _repeat, "case.repeated": _repeated,
}


def apply_case_event(case: dict, etype: str, data: Any, key: str, version: int,
                     config_hash: str | None) -> None:
    """Fold one case event (type, payload, its slot key, stream version, meta config_hash) in place."""
    CASE_APPLIERS[etype](case, data if isinstance(data, dict) else {}, key, version)
    if config_hash and etype != "case.opened" and config_hash not in case["config_hashes"]:
        case["config_hashes"] = sorted([*case["config_hashes"], config_hash])


def note_recorded_at(case: dict, recorded_at: str) -> None:
    """Keep the latest ``meta.recorded_at`` of the case's judged events (claim.scored): when it was
    judged. ISO timestamps of one clock compare as text."""
    if recorded_at > (case.get("judged_at") or ""):
        case["judged_at"] = recorded_at


def apply_benchmark_event(states: dict, etype: str, d: dict) -> None:
    """Fold ``benchmark.registered`` / ``benchmark.rejected`` into the benchmark states."""
    if etype == "benchmark.registered":
        states[str(d.get("benchmark"))] = {
            "benchmark": d.get("benchmark"), "name": d.get("name"), "kind": d.get("kind"),
            "config": d.get("config") or {}, "question_count": d.get("question_count") or len(d.get("questions") or []),
            "source": d.get("source"), "rejected_questions": d.get("rejected_questions") or [],
            **{k: d[k] for k in ("version", "previous", "changes") if d.get(k)}}
    else:
        key = "rejected:" + str(d.get("file"))
        states[key] = {"benchmark": None, "rejected_file": d.get("file"), "errors": d.get("errors") or []}


def apply_run_event(states: dict, etype: str, d: dict) -> None:
    """Fold ``run.started`` / ``run.completed``: the judge and the effective configs of each run."""
    run = str(d.get("run"))
    state = states.setdefault(run, {"run": run, "started": None, "completed": None})
    state["started" if etype == "run.started" else "completed"] = _without(d, "run")


def checkpoint_state(d: dict) -> dict[str, Any]:
    """What a report states of a ``checkpoint.signed``: seq, chain head, root, key id, the note and
    its sha256 (the note's own bytes, so a copy in ``checkpoints.jsonl`` is found by its hash)."""
    note = str(d.get("note") or "")
    return {"seq": d.get("size"), "head": d.get("head"), "root": d.get("root"), "key": d.get("key"),
            "note": note, "note_sha256": hashlib.sha256(note.encode("utf-8")).hexdigest()}


def _checkpoint_rank(state: dict[str, Any]) -> tuple[int, str]:
    """The order of checkpoints: by size, then by note hash (two signed at one head: either, fixed)."""
    size = state.get("seq")
    return (size if isinstance(size, int) else -1, str(state.get("note_sha256")))


def apply_checkpoint_event(states: dict, d: dict) -> None:
    """Fold ``checkpoint.signed``: keep the latest checkpoint (the largest size).

    A maximum, not "the last event wins", so any order of folding (an update, a rebuild, two
    checkpoint commands racing) keeps the same one.
    """
    state = checkpoint_state(d)
    current = states.get(LATEST_CHECKPOINT)
    if current is None or _checkpoint_rank(state) > _checkpoint_rank(current):
        states[LATEST_CHECKPOINT] = state
