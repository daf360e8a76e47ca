"""``evalledger verify``: gather every check's findings into one result, then print it as text or JSON.

The result is a plain dict (documented in docs/ledger.md, "verify"); findings go to standard
output in both forms, and the exit code says whether verify failed (1) or not (0). Warnings
(missing immutability triggers, an unreadable tracking sidecar) never fail it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson

from evalledger import ledger
from evalledger.cli.errors import UsageError
from evalledger.cli.given_files import regular_file
from evalledger.cli.ledger_commands import open_existing
from evalledger.ledger.persistence import LedgerDamaged


def head_text(seq: int, hash: str) -> str:
    """A head as ``SEQ:HASH``: the form ``--expect-head`` takes."""
    return f"{seq}:{hash}"


def finding(level: str, check: str, message: str, seq: int | None = None, source: str | None = None) -> dict:
    """One finding of the result: ``level`` "error" (fails verify) or "warning"."""
    return {"level": level, "check": check, "seq": seq, "source": source, "message": message}


def expected_head(value: str | None) -> tuple[str | None, str | None]:
    """``--expect-head`` as (single SEQ:HASH, published-heads FILE): a whole pasted ``head N:HASH``
    line is taken too; UsageError when it is neither a head nor a file."""
    from evalledger.ledger.published import looks_like_head
    if value is None:
        return None, None
    single = value.strip().removeprefix("head ").strip()
    if looks_like_head(single):
        return single, None
    if not Path(value).is_file():
        raise UsageError(f"--expect-head: {value!r} is neither SEQ:HASH nor a file of published heads")
    return None, value


def verify_result(args) -> dict[str, Any]:
    """Run every check verify's options ask for; the result dict (``ok`` false on any error finding)."""
    from evalledger.ledger.published import read_heads
    if getattr(args, "pubkey", None) and not getattr(args, "against", None):
        raise UsageError("--pubkey checks the signatures of the checkpoints --against names; give --against "
                         "CHECKPOINTS too (the ledger's own checkpoints are checked by their chain, not a key)")
    single, heads_file = expected_head(args.expect_head)
    published = read_heads(heads_file) if heads_file else None
    result: dict[str, Any] = {"ok": False, "head": None, "counts": {"events": None, "errors": 0, "warnings": 0},
                              "expect_head": single, "published_heads": None, "read_models": None,
                              "checkpoints": [], "merkle_root": None, "findings": []}
    findings = result["findings"]
    try:
        if args.repair:
            open_existing(args).close()  # a writable open completes the mirror and cuts torn tails
        with open_existing(args, readonly=True) as led:
            report = led.verify(expect_head=single)
            heads = _check_published(led, report, published) if published else []
    except LedgerDamaged as exc:  # a store that cannot even be opened is the worst verify finding
        findings.append(finding("error", "store", str(exc)))
        return _counted(result)
    result["head"] = {"seq": report.head.seq, "hash": report.head.hash,
                      "text": head_text(report.head.seq, report.head.hash)}
    result["counts"]["events"] = report.count
    findings.extend(finding("error", "chain", p.reason, p.seq, p.source) for p in report.problems)
    findings.extend(finding("warning", "store", w) for w in report.warnings)
    if heads:
        result["published_heads"] = _published_summary(heads)
        failing = [h for h in heads if not h.holds]
        if failing:
            first = failing[0]
            findings.append(finding("error", "published_heads", f"first published head that does not hold: seq "
                                    f"{first.head.seq} {first.head.hash} ({first.where}): {first.reason}",
                                    first.head.seq, first.where))
    if args.projections:
        result["read_models"] = _verify_projections(args, findings)
    if report.ok:   # consistency proofs mean something only over a chain that verifies
        result["checkpoints"], result["merkle_root"] = check_checkpoints(args, findings)
    return _counted(result)


def _counted(result: dict[str, Any]) -> dict[str, Any]:
    """Fill in ``ok`` and the finding counts."""
    levels = [f["level"] for f in result["findings"]]
    result["counts"]["errors"], result["counts"]["warnings"] = levels.count("error"), levels.count("warning")
    result["ok"] = "error" not in levels
    return result


#: how verify names the checkpoints the ledger holds (covered by its own chain: no key is needed)
OWN_CHECKPOINTS = "the ledger's own checkpoints"


def check_checkpoints(args, findings: list[dict]) -> tuple[list[dict], str | None]:
    """The Merkle part of verify: the ledger extends its own checkpoints and those of ``--against``.

    Returns one entry per checked source and the ledger's Merkle root (None when no checkpoint was
    checked); a checkpoint the ledger no longer extends is an error finding.
    """
    from evalledger.ledger import checkpoint as cps
    from evalledger.ledger import signed_note
    with open_existing(args, readonly=True) as led:
        sources = [(OWN_CHECKPOINTS, [{"note": e.data["note"], "seq": e.data["size"]}
                                                       for e in led.read(types=["checkpoint.signed"])], None)]
        if args.against:
            try:
                rows = cps.read_checkpoints(regular_file(args.against))
            except (OSError, cps.CheckpointError) as exc:
                raise UsageError(f"{exc}") from None
            key = None
            if args.pubkey:
                try:
                    key = signed_note.load_key(regular_file(args.pubkey))
                except (OSError, signed_note.NoteError) as exc:
                    raise UsageError(f"--pubkey {args.pubkey}: {exc}") from None
            if isinstance(key, signed_note.Signer):
                key = key.verifier
            if not rows:   # a witness's empty copy proves nothing: said, not passed over
                findings.append(finding("error", "checkpoints", f"checkpoints: {args.against}: holds no "
                                        "checkpoint, so nothing was checked against it", None, str(args.against)))
            sources.append((str(args.against), rows, key))
        checked, root = [], None
        for name, rows, key in sources:
            if not rows:
                continue
            result = cps.check_consistency(led, rows, key)
            root = result.root or root
            checked.append({"source": name, "checked": result.checked, "holds": result.holds,
                            "broken": result.broken, "reason": result.reason,
                            "signatures": None if name == OWN_CHECKPOINTS else
                            "checked" if key is not None else "not checked"})
            if result.broken is not None:
                latest = f"the latest that holds is at seq {result.holds[-1]}" if result.holds else "none holds"
                meaning = {"unreadable": "it cannot be read, or its signature does not check with that key",
                           "other ledger": "these checkpoints were signed for another ledger"}.get(
                    result.kind or "", f"history was rewritten at or before seq {result.broken}")
                findings.append(finding("error", "checkpoints", f"checkpoints: {name}: {result.reason}; {meaning}; "
                                        f"{latest}", result.broken, name))
    return checked, root


def _check_published(led, report, published):
    """The published heads checked against the verified ledger."""
    from evalledger.ledger.published import check_heads
    first_problem = min((p.seq for p in report.problems if p.seq), default=None)
    return check_heads(led, published, first_problem)


def _published_summary(heads) -> dict[str, Any]:
    """How many published heads were checked, the latest that holds and the first that does not."""
    def one(h):
        return {"seq": h.head.seq, "hash": h.head.hash, "where": h.where, "reason": h.reason or None}
    holding = [h for h in heads if h.holds]
    failing = [h for h in heads if not h.holds]
    return {"checked": len(heads), "latest_holding": one(holding[-1]) if holding else None,
            "first_failing": one(failing[0]) if failing else None}


def _verify_projections(args, findings: list[dict]) -> dict[str, Any]:
    """Fold the events afresh and compare with the stored read models; each difference is an error."""
    from evalledger.projections.check import compare_read_models
    with open_existing(args) as led:
        problems = compare_read_models(led)
    findings.extend(finding("error", "read_models", f"read models: {p}") for p in problems)
    return {"match": not problems, "differences": len(problems)}


def text_lines(result: dict[str, Any]) -> list[str]:
    """The text form: FAILED/WARNING lines first, then the head and what held."""
    lines = [f"{'FAILED' if f['level'] == 'error' else 'WARNING'} {_described(f)}" for f in result["findings"]]
    if result["head"] is None:
        return lines
    lines.append(f"head {result['head']['text']}")
    if result["expect_head"] and result["ok"]:
        lines.append(f"published head {result['expect_head']} is a prefix of this ledger")
    published = result["published_heads"]
    if published:
        latest = published["latest_holding"]
        lines.append(f"latest published head that still holds: seq {latest['seq']} {latest['hash']} "
                     f"({latest['where']})" if latest else "no published head still holds")
        if not published["first_failing"]:
            lines.append(f"all {published['checked']} published heads hold")
    if result["read_models"] and result["read_models"]["match"]:
        lines.append("read models match the events folded afresh")
    for source in result["checkpoints"]:
        if source["broken"] is None:
            signed = {"checked": ", each signature checked with --pubkey",
                      "not checked": "; their signatures were NOT checked (give --pubkey KEY): anyone "
                                     "could have written them"}.get(source.get("signatures", ""), "")
            lines.append(f"checkpoints: {source['source']}: the ledger extends all {source['checked']} (RFC 6962 "
                         f"consistency proofs), the latest at seq {source['holds'][-1]}{signed}")
    return lines


def _described(item: dict[str, Any]) -> str:
    """A finding as verify has always worded it (a chain problem as ``seq N: SOURCE: why``)."""
    if item["check"] == "chain":
        return str(ledger.Problem(item["seq"], item["source"], item["message"]))
    return item["message"]


def cmd_verify(args) -> int:
    """Verify read-only (report, never repair) unless --repair; findings on stdout, exit 1 on any error."""
    result = verify_result(args)
    if args.json:
        sys.stdout.buffer.write(orjson.dumps(result, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        for line in text_lines(result):
            print(line)
    return 0 if result["ok"] else 1
