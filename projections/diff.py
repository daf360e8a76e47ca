"""Compare two homes: which verdicts, scores and metrics changed, and the events that explain it.

Cases are matched by case id (content-derived, so a replayed home has the same ids). For each
changed case the ``case:<id>`` streams of both ledgers are compared event by event on what the
event says (type and payload; judge calls on role, request hash, reply and error, since a replay
records the same answer under the replay backend), giving the events only one side has.
Metrics are compared leaf by leaf over the two aggregate documents.
"""

from __future__ import annotations

import os
from typing import Any

from evalledger import ledger
from evalledger.projections.aggregate import build_aggregates
from evalledger.projections.case_result import case_result
from evalledger.projections.catch_up import update
from evalledger.projections.store import ReadModelStore, json_bytes

SKIPPED_METRIC_ROOTS = ("ledger_head", "checkpoint", "configs", "judges", "config_hashes")
# Leaves about what judging cost rather than what it found: a replay answers from the record, so
# its own usage differs even when every result is the same.
USAGE_LEAVES = ("input_tokens", "output_tokens", "tokens", "cost", "unpriced_calls", "judge_calls",
                "judge_retries", "judge_errors", "excerpt_retries")


def _canon(value: Any) -> str:
    return json_bytes(value).decode("utf-8")


def case_changes(a: dict | None, b: dict | None) -> list[dict[str, Any]]:
    """What differs between two results of one case: verdict, status, fields, traits, claims, credit."""
    if a is None or b is None:
        return [{"what": "case", "a": "present" if a else "absent", "b": "present" if b else "absent"}]
    out = []
    for key in ("status", "verdict", "original_verdict", "auto_failed", "auto_fail_reasons", "missing_excerpts"):
        if a[key] != b[key]:
            out.append({"what": key, "a": a[key], "b": b[key]})
    for name in sorted(set(a["fields"]) | set(b["fields"])):
        fa, fb = a["fields"].get(name) or {}, b["fields"].get(name) or {}
        for key in ("passed", "extracted"):
            if fa.get(key) != fb.get(key):
                out.append({"what": f"field {name} {key}", "a": fa.get(key), "b": fb.get(key)})
    for name in sorted(set(a["traits"]) | set(b["traits"])):
        sa, sb = (a["traits"].get(name) or {}).get("score"), (b["traits"].get(name) or {}).get("score")
        if sa != sb:
            out.append({"what": f"trait {name} score", "a": sa, "b": sb})
    ca = {c["claim_id"]: c["score"] for c in _claims(a)}
    cb = {c["claim_id"]: c["score"] for c in _claims(b)}
    for claim in sorted(set(ca) | set(cb)):
        if ca.get(claim) != cb.get(claim):
            out.append({"what": f"claim {claim} score", "a": ca.get(claim), "b": cb.get(claim)})
    credit_a = ((a.get("audit") or {}).get("credit") or {})
    credit_b = ((b.get("audit") or {}).get("credit") or {})
    for key in ("credit_score", "zone", "high", "low"):
        if credit_a.get(key) != credit_b.get(key):
            out.append({"what": f"credit {key}", "a": credit_a.get(key), "b": credit_b.get(key)})
    return out


def _claims(result: dict) -> list[dict]:
    """The scored claims of a result (reconstruction cases; none for the other kinds)."""
    return result.get("claims", [])


def _event_key(event) -> str:
    """What an event says, without where and when it was written."""
    data = event.data if isinstance(event.data, dict) else {}
    if event.type == "judge.called":
        data = {k: data.get(k) for k in ("role", "request_hash", "reply", "error")}
    return event.type + " " + _canon(data)


def event_differences(led_a, led_b, case_id: str) -> dict[str, list[str]]:
    """The events of the case's stream that only one ledger has (as ``type payload`` text)."""
    a = [_event_key(e) for e in led_a.read(stream=f"case:{case_id}")]
    b = [_event_key(e) for e in led_b.read(stream=f"case:{case_id}")]
    only_a, only_b = list(a), list(b)
    for key in b:
        if key in only_a:
            only_a.remove(key)
    for key in a:
        if key in only_b:
            only_b.remove(key)
    return {"only_in_a": sorted(only_a), "only_in_b": sorted(only_b)}


def _leaves(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key in sorted(value):
            if not prefix and key in SKIPPED_METRIC_ROOTS:
                continue
            out.update(_leaves(value[key], f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        out = {}
        for i, item in enumerate(value):
            label = item.get("doc_id") or (f"{item.get('model_a')}~{item.get('model_b')}"
                                           if "model_a" in item else str(i))
            out.update(_leaves(item, f"{prefix}[{label}]"))
        return out
    return {prefix: value}


def metric_changes(agg_a: dict, agg_b: dict) -> list[dict[str, Any]]:
    """Every aggregate leaf whose value differs (or exists on one side only)."""
    la, lb = _leaves(agg_a), _leaves(agg_b)
    return [{"metric": k, "a": la.get(k), "b": lb.get(k), "usage": k.rsplit(".", 1)[-1] in USAGE_LEAVES}
            for k in sorted(set(la) | set(lb)) if la.get(k) != lb.get(k)]


def diff_models(led_a, store_a, led_b, store_b) -> dict[str, Any]:
    """The whole comparison of two homes whose read models are up to date."""
    cases_a = {c["case_id"]: c for c in store_a.iter_cases()}
    cases_b = {c["case_id"]: c for c in store_b.iter_cases()}
    changed = []
    for case_id in sorted(set(cases_a) | set(cases_b)):
        ra = case_result(cases_a[case_id]) if case_id in cases_a else None
        rb = case_result(cases_b[case_id]) if case_id in cases_b else None
        changes = case_changes(ra, rb)
        if changes:
            ref = ra or rb
            changed.append({"case_id": case_id, "benchmark": ref["benchmark"], "model": ref["model"],
                            "question_id": ref["question_id"], "changes": changes,
                            "config_hashes": {"a": (ra or {}).get("config_hashes"),
                                              "b": (rb or {}).get("config_hashes")},
                            "events": event_differences(led_a, led_b, case_id)})
    agg_a = build_aggregates(store_a.position(), list(cases_a.values()), store_a.load_keyed("proj_benchmarks"),
                             store_a.load_keyed("proj_runs"))
    agg_b = build_aggregates(store_b.position(), list(cases_b.values()), store_b.load_keyed("proj_benchmarks"),
                             store_b.load_keyed("proj_runs"))
    return {"a": {"ledger_head": agg_a["ledger_head"], "config_hashes": agg_a["config_hashes"]},
            "b": {"ledger_head": agg_b["ledger_head"], "config_hashes": agg_b["config_hashes"]},
            "cases_compared": len(set(cases_a) | set(cases_b)), "changed_cases": changed,
            "metric_changes": metric_changes(agg_a, agg_b)}


class NotALedger(ValueError):
    """A path given to ``diff_homes`` that is neither a home nor a ledger file."""


def diff_homes(a: ledger.Ledger | str | os.PathLike, b: ledger.Ledger | str | os.PathLike) -> dict[str, Any]:
    """Which verdicts, scores and metrics differ between two homes (or ledger files), and why.

    Brings both homes' read models up to date first (a fold writes only the ``proj_*`` tables);
    paths are opened here and closed again, Ledgers passed in stay open. Returns the document
    ``evalledger diff --json`` prints: ``changed_cases`` (with the events only one side has) and
    ``metric_changes``. Raises NotALedger for a path that holds no ledger.

        >>> diff = diff_homes("evalledger", "replayed")
        >>> [c["case_id"] for c in diff["changed_cases"]]
    """
    opened: list[ledger.Ledger] = []
    stores: list[ReadModelStore] = []
    try:
        leds = []
        for home in (a, b):
            if isinstance(home, ledger.Ledger):
                leds.append(home)
                continue
            if not ledger.is_home(home) and not str(home).endswith((".jsonl", ".db")):
                raise NotALedger(f"{home}: no evalledger home here")
            opened.append(ledger.open_ledger(home))
            leds.append(opened[-1])
        for led in leds:
            stores.append(ReadModelStore(led))
            update(led, stores[-1])
        return diff_models(leds[0], stores[0], leds[1], stores[1])
    finally:
        for store in stores:
            store.close()
        for led in opened:
            led.close()


def format_diff(diff: dict[str, Any], label_a: str, label_b: str, max_events: int = 12) -> str:
    """The comparison as text: changed cases with their reasons, then changed metrics."""
    ha, hb = diff["a"]["ledger_head"], diff["b"]["ledger_head"]
    lines = [f"A: {label_a} (seq {ha['seq']} {ha['hash']}), config {', '.join(diff['a']['config_hashes']) or '-'}",
             f"B: {label_b} (seq {hb['seq']} {hb['hash']}), config {', '.join(diff['b']['config_hashes']) or '-'}",
             f"{len(diff['changed_cases'])} of {diff['cases_compared']} cases changed", ""]
    for case in diff["changed_cases"]:
        lines.append(f"case {case['case_id']} ({case['benchmark']} / {case['model']} / {case['question_id']})")
        for change in case["changes"]:
            lines.append(f"  {change['what']}: {_canon(change['a'])} -> {_canon(change['b'])}")
        for side, label in (("only_in_a", "only in A"), ("only_in_b", "only in B")):
            events = case["events"][side]
            for text in events[:max_events]:
                lines.append(f"  because {label}: {text[:200]}")
            if len(events) > max_events:
                lines.append(f"  ... and {len(events) - max_events} more events only in {label[-1]}")
    for usage, title in ((False, "metrics changed"), (True, "usage figures changed (tokens, cost, calls)")):
        rows = [m for m in diff["metric_changes"] if m["usage"] is usage]
        lines += ["", f"{len(rows)} {title}"]
        lines += [f"  {m['metric']}: {_canon(m['a'])} -> {_canon(m['b'])}" for m in rows]
    return "\n".join(lines) + "\n"
