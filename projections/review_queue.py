"""A deterministic review queue (``evalledger sample``): which judged cases a reviewer looks at next.

Candidates are the template cases with a judge verdict and no reviewer event yet. Each is ranked
by sha256(seed, case id), so the same ledger and seed give the same queue on any machine; with
``stratify`` the n places are shared among the groups in proportion to their sizes (largest
remainder, ties by group name) and each group gives its best-ranked cases.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from typing import Any, Iterable

from evalledger.projections.agreement import reviewer_label
from evalledger.projections.results import original_verdict
from evalledger.projections.store import json_bytes

STRATA = ("verdict", "model", "benchmark")
QUEUE_COLUMNS = ("case_id", "benchmark", "model", "question_id", "judge_verdict", "stratum", "history")


def _rank(seed: int, case_id: str) -> str:
    return hashlib.sha256(f"{seed}\x1f{case_id}".encode("utf-8")).hexdigest()


def _stratum(case: dict, stratify: str | None) -> str:
    if stratify is None:
        return "all"
    value = original_verdict(case) if stratify == "verdict" else case[stratify]
    return str(value)


def allocate(sizes: dict[str, int], n: int) -> dict[str, int]:
    """Share n places among groups in proportion to their sizes (Hamilton's largest remainder)."""
    total = sum(sizes.values())
    if n >= total:
        return dict(sizes)
    quotas = {g: n * size // total for g, size in sizes.items()}
    left = n - sum(quotas.values())
    by_remainder = sorted(sizes, key=lambda g: (-(n * sizes[g] % total), g))
    for group in by_remainder[:left]:
        quotas[group] += 1
    return quotas


def review_queue(cases: Iterable[dict], n: int, stratify: str | None = None, seed: int = 0) -> list[dict[str, Any]]:
    """Up to n unreviewed judged template cases, ranked by seed (see the module docstring)."""
    if n < 0:
        raise ValueError("n must be 0 or more")
    if stratify is not None and stratify not in STRATA:
        raise ValueError(f"stratify must be one of {', '.join(STRATA)}, not {stratify!r}")
    groups: dict[str, list[tuple[str, dict]]] = {}
    for case in cases:
        if case["kind"] != "template" or original_verdict(case) is None or reviewer_label(case) is not None:
            continue
        groups.setdefault(_stratum(case, stratify), []).append((_rank(seed, case["case_id"]), case))
    quotas = allocate({g: len(members) for g, members in groups.items()}, n)
    chosen = []
    for group, members in groups.items():
        for rank, case in sorted(members, key=lambda m: m[0])[:quotas[group]]:
            chosen.append((rank, group, case))
    chosen.sort(key=lambda c: c[0])
    return [{"case_id": case["case_id"], "benchmark": case["benchmark"], "model": case["model"],
             "question_id": case["question_id"], "judge_verdict": original_verdict(case), "stratum": group,
             "history": f"evalledger history {case['case_id']}"} for _, group, case in chosen]


class QueueFileError(ValueError):
    """A review-queue file that cannot be read: the message names the file, the line and why."""


def read_queue(path: str, raw: bytes) -> list[str]:
    """The case ids of a queue ``sample`` wrote (JSON lines, or CSV with a ``case_id`` column), in order."""
    text = raw.decode("utf-8", errors="replace")
    lines = text.splitlines()
    ids: list[str] = []
    if lines and lines[0].lstrip().startswith("{"):
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise QueueFileError(f"{path}: line {number}: not JSON ({exc})") from None
            if not isinstance(row, dict) or not isinstance(row.get("case_id"), str):
                raise QueueFileError(f"{path}: line {number}: no case_id (a queue line is an object with one)")
            ids.append(row["case_id"])
        return list(dict.fromkeys(ids))
    reader = csv.DictReader(io.StringIO(text))
    if "case_id" not in (reader.fieldnames or []):
        raise QueueFileError(f"{path}: line 1: neither a JSON line nor a CSV header with a case_id column")
    for number, row in enumerate(reader, 2):
        if not row.get("case_id"):
            raise QueueFileError(f"{path}: line {number}: empty case_id")
        ids.append(row["case_id"])
    return list(dict.fromkeys(ids))


def queue_bytes(rows: list[dict[str, Any]], as_csv: bool) -> bytes:
    """The queue as JSONL (one object a line, sorted keys) or as CSV with a header row."""
    if not as_csv:
        return b"".join(json_bytes(row) + b"\n" for row in rows)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=QUEUE_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode("utf-8")
