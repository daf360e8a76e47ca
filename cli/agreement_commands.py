"""Trust commands: sample (a review queue), agreement (judge vs reviewers, or judge vs judge) and
whatif (a config sweep answered from the recorded judge calls).

The logic is in projections/ (review_queue, agreement, judge_agreement, whatif) and
stages/whatif.py; these commands bring the read models up to date, call it and print the result.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path

from evalledger import ledger, projections
from evalledger.cli.errors import UsageError
from evalledger.cli.ledger_commands import open_existing
from evalledger.projections.agreement import format_agreement, reviewer_agreement
from evalledger.projections.judge_agreement import format_judge_agreement, judge_agreement
from evalledger.projections.reports import slug
from evalledger.projections.review_queue import queue_bytes, review_queue
from evalledger.projections.store import ReadModelStore, json_bytes, reports_dir


@contextmanager
def current_cases(led):
    """The ledger's case states, sorted by id, after folding the events not folded yet."""
    projections.update(led)
    store = ReadModelStore(led)
    try:
        yield store.iter_cases()
    finally:
        store.close()


def cmd_sample(args) -> int:
    """Write a deterministic review queue of judged, unreviewed template cases."""
    if args.n < 0:
        raise UsageError(f"--n must be 0 or more, not {args.n}")
    with open_existing(args) as led, current_cases(led) as cases:
        rows = review_queue(cases, args.n, stratify=args.stratify, seed=args.seed)
    as_csv = bool(args.out) and args.out.lower().endswith(".csv")
    data = queue_bytes(rows, as_csv)
    if args.out is None:
        sys.stdout.buffer.write(data)
        return 0
    out = Path(args.out)
    if out.is_dir():
        raise UsageError(f"--out {out}: is a folder; name a file (.jsonl or .csv)")
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, out)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UsageError(f"--out {out}: cannot write ({exc.strerror or exc})") from None
    print(f"{len(rows)} case(s) to review written to {out}"
          + (f" (stratified by {args.stratify})" if args.stratify else "")
          + "; record each with 'evalledger confirm CASE --author NAME' or 'evalledger override'")
    return 0


def _open_other(path: str):
    """The ledger of --against, refused with a usage error when there is none."""
    if not ledger.is_home(path) and not str(path).endswith((".jsonl", ".db")):
        raise UsageError(f"--against {path}: no evalledger home here")
    if not Path(path).exists():
        raise UsageError(f"--against {path}: no such file or folder")
    return ledger.open_ledger(path)


def cmd_agreement(args) -> int:
    """Print the judge's agreement with reviewers, or with the judge of another home (--against)."""
    if args.against is None:
        with open_existing(args) as led, current_cases(led) as cases:
            doc = reviewer_agreement(cases)
        if args.json:
            sys.stdout.buffer.write(json_bytes(doc, indent=True) + b"\n")
        else:
            sys.stdout.write("\n".join(format_agreement(doc)) + "\n")
        return 0
    with open_existing(args) as led, _open_other(args.against) as other:
        with current_cases(led) as cases_a, current_cases(other) as cases_b:
            doc = judge_agreement(list(cases_a), cases_b)
        label_a = str(led.label)
    if args.json:
        sys.stdout.buffer.write(json_bytes(doc, indent=True) + b"\n")
    else:
        sys.stdout.write(format_judge_agreement(doc, label_a, args.against))
    return 0


def cmd_whatif(args) -> int:
    """Sweep one setting over the recorded judge calls; print the curve per model, write its chart."""
    from evalledger.projections.whatif import curves, format_curves, line_chart, point_metrics
    from evalledger.stages.whatif import WhatIfRefused, parse_sweep, replay_points

    try:
        key, values, fixed = parse_sweep(args.sets)
    except WhatIfRefused as exc:
        raise UsageError(str(exc)) from None
    progress = None if args.quiet else (lambda i, n: print(f"point {i + 1}/{n}", file=sys.stderr, flush=True))
    with open_existing(args) as led:
        points = [(p.value, point_metrics(p.led), len(p.missing))
                  for p in replay_points(led, key, values, fixed, on_point=progress)]
        chart = Path(args.chart) if args.chart else reports_dir(led) / f"whatif-{slug(key)}.svg"
    doc = curves(key, points)
    chart.parent.mkdir(parents=True, exist_ok=True)
    chart.write_text(line_chart(doc), encoding="utf-8")
    if args.json:
        sys.stdout.buffer.write(json_bytes(doc, indent=True) + b"\n")
    else:
        sys.stdout.write(format_curves(doc))
        print(f"chart: {chart}")
    unrecorded = sum(p[2] for p in points)
    if unrecorded:
        print(f"{unrecorded} judge request(s) at some points were never recorded: those cases fail there, as "
              "in 'evalledger replay --set'; 'evalledger replay --into DIR --set KEY=VALUE' lists them",
              file=sys.stderr)
    return 1 if unrecorded else 0
