"""Trust commands: sample (a review queue), agreement (judge vs reviewers, or judge vs judge) and
whatif (a config sweep answered from the recorded judge calls).

The logic is in projections/ (review_queue, agreement, judge_agreement, whatif) and
stages/whatif.py; these commands bring the read models up to date, call it and print the result.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path

from evalledger import ledger, projections
from evalledger.cli.errors import UsageError
from evalledger.cli.ledger_commands import open_existing
from evalledger.cli.out_file import write_out
from evalledger.projections.agreement import format_agreement, reviewer_agreement
from evalledger.projections.judge_agreement import format_judge_agreement, judge_agreement, profile_pairs
from evalledger.projections.reports import slug
from evalledger.projections.review_queue import queue_bytes, review_queue
from evalledger.projections.store import json_bytes, reports_dir


@contextmanager
def current_cases(led):
    """The ledger's case states, sorted by id, after folding the events not folded yet, read inside
    one snapshot (``projections.current``: never a state another process's rebuild left half done)."""
    with projections.current(led) as store:
        yield store.iter_cases()


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
    write_out(out, data)
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


def profile_origins(led) -> dict[str, str]:
    """Profile case id -> what it judges: the case it was opened from, or, for a response a profile's
    answering model gave, the question and the response (two profiles answering alike pair up)."""
    from evalledger.stages.formats.ids import digest16

    origins = {}
    for event in led.read(types=["case.opened"]):
        d = event.data
        if d.get("profile") is None:
            continue
        origins[d["case_id"]] = d.get("origin_case") or digest16(
            ["answered", d.get("benchmark"), str(d.get("question_id")), d.get("model"), d.get("response")])
    return origins


def _agreement_of_profiles(args) -> int:
    """Print how far the judges of two profiles in this home agree (--profiles A,B)."""
    names = [n.strip() for n in args.profiles.split(",") if n.strip()]
    if len(names) != 2 or names[0] == names[1]:
        raise UsageError(f"--profiles {args.profiles}: give two different profiles, as A,B")
    with open_existing(args) as led:
        origins = profile_origins(led)
        with current_cases(led) as cases:
            everything = list(cases)
    found = {c.get("profile") for c in everything}
    for name in names:
        if name not in found:
            known = ", ".join(sorted(p for p in found if p)) or "none"
            raise UsageError(f"--profiles: no case was opened under profile {name!r} (profiles here: {known})")
    a, b = profile_pairs(everything, origins, names[0], names[1])
    doc = judge_agreement(a, b)
    if args.json:
        sys.stdout.buffer.write(json_bytes(doc, indent=True) + b"\n")
    else:
        sys.stdout.write(format_judge_agreement(doc, f"profile {names[0]}", f"profile {names[1]}"))
    return 0


def cmd_agreement(args) -> int:
    """Print the judge's agreement with reviewers, or with the judge of another home (--against),
    or between two profiles' judges in this home (--profiles A,B)."""
    if args.profiles is not None:
        if args.against is not None:
            raise UsageError("--profiles and --against: give one (two profiles here, or another home)")
        return _agreement_of_profiles(args)
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
    from evalledger.cli.whatif_sweep import sweep
    from evalledger.projections.whatif import curves, format_curves, line_chart
    from evalledger.stages.whatif import WhatIfRefused, parse_sweep

    try:
        key, values, fixed = parse_sweep(args.sets)
    except WhatIfRefused as exc:
        raise UsageError(str(exc)) from None
    progress = None if args.quiet else (lambda i, n: print(f"point {i + 1}/{n}", file=sys.stderr, flush=True))
    with open_existing(args) as led:
        points = sweep(led, key, values, fixed, on_point=progress)
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
