"""``evalledger demo``: a new home with the sample benchmarks, processed end to end, then a summary.

The demo runs what a user would: the samples are dropped into a fresh home's inbox the safe way
(written under a hidden name, then renamed in), the watch daemon processes the inbox once with
the offline judge and the local search, and the summary is read back from the reports the
projections wrote (``reports/aggregate-stats.json``). The home is kept, so every command can be
tried on it afterwards.
"""

from __future__ import annotations

import importlib.resources
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from evalledger import ledger
from evalledger.cli.errors import UsageError
from evalledger.cli.watch import WatchOptions
from evalledger.cli.watch_commands import run_daemon
from evalledger.cli.watch_inbox import is_ignored
from evalledger.cli.watch_log import Log

SAMPLE_SUFFIXES = (".json", ".jsonl", ".jsonld")
# Nothing in a demo may reach the network: the offline judge and the local search index.
DEMO_CONFIG = {"deep_judgment_search_tool": "local", "deep_judgment_rubric_search_tool": "local"}


def packaged_samples() -> Path:
    """The sample benchmarks installed with the package (``evalledger.samples``)."""
    return Path(str(importlib.resources.files("evalledger.samples")))


def find_samples(explicit: str | None = None) -> Path:
    """The sample folder: ``--samples``, else the samples installed with the package."""
    candidates = [Path(explicit)] if explicit else [packaged_samples()]
    for folder in candidates:
        if folder.is_dir() and sample_files(folder):
            return folder
    where = ", ".join(str(c) for c in candidates)
    raise FileNotFoundError(f"no sample benchmarks found (looked in {where}); pass --samples DIR")


def sample_files(folder: Path) -> list[Path]:
    """The benchmark files of a sample folder (its README and hidden files left out)."""
    return sorted(p for p in folder.iterdir()
                  if p.is_file() and p.suffix in SAMPLE_SUFFIXES and not is_ignored(p.name))


def new_home(parent: str | None = None) -> Path:
    """A fresh home in a new temporary directory (under ``parent`` when given)."""
    home = Path(tempfile.mkdtemp(prefix="evalledger-demo-", dir=parent))
    return ledger.init_home(home)


def drop_into_inbox(files: list[Path], inbox: Path) -> None:
    """Copy each file in the safe way: under a hidden temporary name, then an atomic rename."""
    for src in files:
        tmp = inbox / f".{src.name}.part"
        shutil.copyfile(src, tmp)
        os.replace(tmp, inbox / src.name)


def run_demo(samples: str | None = None, parent: str | None = None, log_format: str = "text",
             out=None) -> int:
    """Create the home, process the samples, print the summary and the report paths; the exit code."""
    from evalledger.stages.dispatcher import RunSettings  # loaded when used: keeps --help fast

    out = out or sys.stdout
    folder = find_samples(samples)
    home = new_home(parent)
    print(f"demo home: {home}", file=out, flush=True)
    drop_into_inbox(sample_files(folder), home / "inbox")
    settings = RunSettings(config_layer=DEMO_CONFIG, judge_backend="offline")
    # The files were renamed in by us, complete: no need to wait for them to settle.
    outcome = run_daemon(home, settings, WatchOptions(once=True, settle=0.0, quiet=0.0), Log(log_format))
    stats_path = home / "reports" / "aggregate-stats.json"
    if not stats_path.exists():
        print("no reports were written; see the log lines above", file=out)
        return 1
    stats = json.loads(stats_path.read_text(encoding="utf-8"))
    print(file=out)
    print(summary_table(stats), file=out)
    print(file=out)
    for judge in stats.get("judges", []):
        note = f" ({judge['note']})" if judge.get("note") else ""
        print(f"judge: {judge.get('backend')} / {judge.get('model')}{note}, {judge.get('calls', 0)} calls", file=out)
    print(f"reports: {home / 'reports' / 'index.md'}", file=out)
    for path in sorted(outcome.reports):
        print(f"         {path}", file=out)
    print(f"try:     evalledger --home {home} verify", file=out)
    return 1 if outcome.errors or _report_unjudged_files(outcome, home, out) else 0


def _report_unjudged_files(outcome, home: Path, out) -> int:
    """Say which sample files were rejected or wait for a benchmark; returns how many were rejected.

    The summary table only shows what was judged, so a bad file would otherwise go unmentioned.
    """
    rejected, pending = outcome.ingested.get("rejected", 0), outcome.ingested.get("pending", 0)
    if rejected:
        print(f"rejected: {rejected} file(s); each reason is in {home / 'rejected'}/<file>.error.txt", file=out)
    if pending:
        print(f"pending:  {pending} responses file(s) wait for their benchmark "
              f"(evalledger --home {home} status)", file=out)
    return rejected


def summary_table(stats: dict[str, Any]) -> str:
    """One row per benchmark and model: cases, judged, and the headline figure of its kind."""
    header = ("benchmark", "kind", "model", "cases", "judged", "result")
    rows = [header]
    for bench in sorted(stats.get("benchmarks", {}).values(), key=lambda b: (b.get("kind") or "", b.get("name") or "")):
        for model, figures in sorted((bench.get("models") or {}).items(), key=lambda kv: str(kv[0])):
            shown = model if model not in (None, "", "None") else "-"   # audit cases name no model
            rows.append((bench.get("name") or bench.get("benchmark"), bench.get("kind") or "", shown,
                         str(figures.get("cases", 0)), str(figures.get("judged", 0)),
                         headline(bench, model, figures)))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(header))]
    lines = ["  ".join(str(cell).ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def headline(bench: dict[str, Any], model: str | None, figures: dict[str, Any]) -> str:
    """The figure a reader looks at first: pass rate, claim score, or credit-score agreement."""
    kind = bench.get("kind")
    if kind == "template" and figures.get("pass_rate") is not None:
        return f"pass rate {_pct(figures['pass_rate'])} ({figures.get('passed', 0)}/{figures.get('judged', 0)})"
    if kind == "reconstruction":
        overall = ((bench.get("reconstruction") or {}).get(model) or {}).get("overall") or {}
        if overall.get("average_score") is not None:
            return f"mean claim score {overall['average_score']:.2f}/10"
    if kind == "audit":
        groups = list((bench.get("audit") or {}).values())
        if len(groups) == 1 and groups[0].get("exact_match_rate") is not None:
            g = groups[0]
            return (f"credit score matches expected {_pct(g['exact_match_rate'])}, "
                    f"cross-band {_pct(g.get('cross_band_confusion_rate') or 0)}")
    return ""


def _pct(rate: float) -> str:
    return f"{100 * rate:.1f}%"


def cmd_demo(args) -> int:
    """``evalledger demo``: run the demo; a missing sample folder is a usage error, a missing
    ``--dir`` folder is made."""
    if args.dir is not None:
        try:
            Path(args.dir).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"--dir {args.dir}: cannot be made ({exc.strerror or exc})") from None
    try:
        return run_demo(args.samples, args.dir, args.log_format)
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from None
