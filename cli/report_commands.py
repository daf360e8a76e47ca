"""Report commands: report, rebuild, history, override, confirm, replay, diff (the logic is in projections/)."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from evalledger import projections
from evalledger.cli.ledger_commands import case_or_usage_error, open_existing
from evalledger.cli.progress import Progress
from evalledger.ledger import NewEvent
from evalledger.ledger.persistence import is_disk_full
from evalledger.projections.history import case_history, format_history
from evalledger.projections.replay import finish_replay
from evalledger.projections.report_files import INCOMPLETE
from evalledger.projections.report_rows import ReportRowsError
from evalledger.projections.store import ReadModelStore, json_bytes, reports_dir
from evalledger.projections.wording import with_article

UNRECORDED_SHOWN = 20   # unrecorded requests printed by replay; the rest are in the listing file


def _usage(message: str):
    from evalledger.cli.errors import UsageError
    return UsageError(message)


def _print_json(value) -> None:
    sys.stdout.buffer.write(json_bytes(value, indent=True) + b"\n")


def _built(led, paths: list[Path], verb: str) -> None:
    store = ReadModelStore(led)
    try:
        seq, hash = store.position()
    finally:
        store.close()
    print(f"{verb} {len(paths)} report files in {reports_dir(led)} from seq {seq} {hash}")


def cmd_report(args) -> int:
    """``evalledger report``: update the read models and write the reports."""
    with open_existing(args) as led:
        try:
            paths = projections.refresh(led)
        except projections.ReadModelsAltered as exc:
            print(f"evalledger report: refused: {exc}", file=sys.stderr)
            return 1
        except ReportRowsError as exc:
            return _render_failed("report", led, exc)
        except OSError as exc:
            if not _report_file_refused(led, exc):
                raise
            return _render_failed("report", led, exc)
        _built(led, paths, "updated")
    return 0


def cmd_rebuild(args) -> int:
    """``evalledger rebuild``: fold the read models from scratch and write the reports."""
    with open_existing(args) as led:
        try:
            paths = projections.rebuild(led)
        except ReportRowsError as exc:
            return _render_failed("rebuild", led, exc)
        except OSError as exc:
            if not _report_file_refused(led, exc):
                raise
            return _render_failed("rebuild", led, exc)
        _built(led, paths, "rebuilt")
    return 0


def _render_failed(command: str, led, exc: Exception) -> int:
    """Say why the render stopped and what state the reports folder is in; exit code 1."""
    folder = reports_dir(led)
    state = (f"{folder / INCOMPLETE} says the folder is incomplete" if (folder / INCOMPLETE).exists()
             else f"{folder} was left as the earlier render wrote it")
    if isinstance(exc, OSError) and not isinstance(exc, ReportRowsError):   # a report file refused
        if is_disk_full(exc):
            print(f"evalledger {command}: error: {exc.filename}: the disk is full ({exc.strerror}); the read "
                  f"models are saved, {state}; free space and run the command again", file=sys.stderr)
        else:   # a folder in a file's way, say
            print(f"evalledger {command}: error: {exc.filename}: {exc.strerror or exc}; the read models are "
                  f"saved, {state}", file=sys.stderr)
    else:
        print(f"evalledger {command}: error: {exc}; the read models are saved, {state}", file=sys.stderr)
    return 1


def _report_file_refused(led, exc: OSError) -> bool:
    """True for an error met writing a file of the reports folder (a full disk, a folder where a
    file goes; the read models are saved by then), said with the folder's state: other errors keep
    the general handling of cli/main.py."""
    folder = str(reports_dir(led)) + "/"
    return isinstance(exc.filename, str) and exc.filename.startswith(folder)


def cmd_history(args) -> int:
    """``evalledger history``: print one case's events in order."""
    with open_existing(args, readonly=True) as led:
        history = case_history(led, case_or_usage_error(led, args.case))
    if args.json:
        _print_json(history)
    else:
        sys.stdout.write(format_history(history))
    return 0


def cmd_override(args) -> int:
    """``evalledger override``: record a reviewer's verdict for a case."""
    if not args.reason.strip() or not args.author.strip():
        raise _usage("--reason and --author must not be empty")
    with open_existing(args) as led:
        case_id = case_or_usage_error(led, args.case)
        event = record_override(led, case_id, args.verdict, args.reason, args.author)
    print(f"seq {event.seq} verdict.overridden case {case_id} -> {args.verdict} by {args.author} {event.hash}")
    print("run 'evalledger report' to update the reports")
    return 0


def record_override(led, case_id: str, verdict: str, reason: str, author: str):
    """Append the verdict.overridden event of a reviewer's verdict (the CLI's and the viewer's path)."""
    _check_overridable(led, case_id)
    [event] = led.append(NewEvent(f"case:{case_id}", "verdict.overridden",
                                  {"case_id": case_id, "verdict": verdict, "reason": reason, "author": author},
                                  meta={"stage": "review"}))
    return event


def _check_overridable(led, case_id: str) -> None:
    """Refuse a case with no pass/fail verdict: reconstruction cases are scored per claim and audit
    cases get a credit score, so a verdict override there would be counted nowhere and mislead."""
    opened = next(led.read(stream=f"case:{case_id}", types=["case.opened"]), None)
    if opened is None:                       # a stream with notes only: nothing was ever judged
        raise _usage(f"no case {case_id!r} in this ledger (its stream has no case.opened)")
    kind = opened.data.get("kind")
    if kind != "template":
        raise _usage(f"case {case_id} is {with_article(str(kind))} case, which has no pass/fail verdict; "
                     "override applies to the verdicts of template cases")


def cmd_confirm(args) -> int:
    """Record that a reviewer checked the judge's verdict and agrees (verdict.confirmed)."""
    if not args.author.strip():
        raise _usage("--author must not be empty")
    with open_existing(args) as led:
        case_id = case_or_usage_error(led, args.case)
        _check_overridable(led, case_id)
        judged = list(led.read(stream=f"case:{case_id}", types=["case.judged"]))
        if not judged:
            raise _usage(f"case {case_id} has no judge verdict yet (no case.judged): there is nothing to "
                         "confirm; 'evalledger override' records a reviewer's own verdict")
        verdict = judged[-1].data.get("verdict")
        [event] = led.append(NewEvent(f"case:{case_id}", "verdict.confirmed",
                                      {"case_id": case_id, "verdict": verdict, "reason": args.reason,
                                       "author": args.author}, meta={"stage": "review"}))
    print(f"seq {event.seq} verdict.confirmed case {case_id} = {verdict} by {args.author} {event.hash}")
    print("run 'evalledger report' to update the reports")
    return 0


def cmd_replay(args) -> int:
    """Re-run the stages into a new home from the source's recorded judge calls (docs/reports.md)."""
    from evalledger.stages.config import ConfigError, run_layer
    from evalledger.stages.judge import JudgeError
    from evalledger.stages.repeats import replay_hint
    from evalledger.stages.replaying import replay_into

    try:
        layer = run_layer(None, args.sets)
    except ConfigError as exc:
        raise _usage(str(exc)) from None
    target = Path(args.into)
    progress = None if args.quiet else Progress(sys.stderr)
    with open_existing(args) as source:
        try:
            result = replay_into(source, target, overrides=layer, live=args.live, progress=progress)
        except (ConfigError, ValueError, JudgeError) as exc:   # ReplayRefused is a ValueError
            raise _usage(str(exc)) from None
        hint = replay_hint(source, layer) if result.missing else None
    origin, summary, missing = result.origin, result.summary, result.missing
    print(f"replay of seq {origin.data['source_head_seq']} {origin.data['source_head_hash']} "
          f"into {target}: " + ("carrying on the replay begun there; " if result.resumed else "")
          + f"{result.copied} input events copied")
    listing = finish_replay(target, missing, report=False)
    # A failed report (its error on stderr) still leaves a complete replay: say what it did and
    # what it could not answer, or the user learns of unrecorded requests only at the next replay.
    reported = report_in_child(target)
    print(f"{summary.cases} case(s) re-run: {summary.judged} judged, {summary.failed} failed; "
          f"{result.live_calls} live judge call(s)")
    if missing:
        _print_unrecorded(missing, listing)
    if hint:
        print(f"note: {hint}")
    if result.unapplied:
        shown = ", ".join(result.unapplied[:10]) + (f" and {len(result.unapplied) - 10} more"
                                                    if len(result.unapplied) > 10 else "")
        print(f"note: the source's runs layered settings over their cases' configs that this replay did not: "
              f"{shown}; verdicts may differ for that reason alone: give the same --set to replay them "
              "(runs that used different settings cannot all be reproduced by one replay)")
    return 1 if missing or not reported else 0


def report_in_child(target: Path) -> bool:
    """Write the replayed home's reports as ``evalledger report`` does, in a child process; False
    (its error already on stderr) when it failed.

    Why a child: the replay leaves this process's heap larger by what its stages allocated (the
    allocator keeps most of it), and a report rendered on top of that peaked higher the more
    cases were replayed (134 -> 189 MB from 10,000 to 100,000). A fresh process starts from
    nothing, so the replay's peak is the larger of the replay's own and `report`'s, both flat.
    """
    import subprocess
    done = subprocess.run([sys.executable, "-m", "evalledger", "--home", str(target), "report"],
                          stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        print(f"evalledger replay: error: writing the reports of {target} failed (exit {done.returncode}); "
              f"the replay itself is complete: run 'evalledger --home {target} report'", file=sys.stderr)
    return done.returncode == 0


def _print_unrecorded(missing: list[dict], listing: Path) -> None:
    """The unrecorded requests by role, the first few of them, and where the full list is.

    A replay under a config that changes every case (deep judgment switched on) misses thousands
    of requests: a line each would bury the summary, so the full list goes to a file.
    """
    by_role = Counter(m["role"] for m in missing)
    print(f"{len(missing)} judge request(s) the new configuration needs were never recorded in the source: "
          + ", ".join(f"{role} {count}" for role, count in sorted(by_role.items())))
    for miss in missing[:UNRECORDED_SHOWN]:
        print(f"  not recorded in the source: case {miss['case_id']} role {miss['role']} "
              f"request {miss['request_hash']} ({miss['stage']})")
    if len(missing) > UNRECORDED_SHOWN:
        print(f"  ... and {len(missing) - UNRECORDED_SHOWN} more (see the listing file)")
    print(f"full list (one JSON object a line): {listing}")
    print("'--live' makes those calls")


def cmd_diff(args) -> int:
    """Print what differs between two homes (docs/reports.md); exit 1 when anything does."""
    from evalledger.projections.diff import NotALedger, diff_homes, format_diff

    try:
        result = diff_homes(args.home_a, args.home_b)
    except NotALedger as exc:
        raise _usage(str(exc)) from None
    if args.json:
        _print_json(result)
    else:
        sys.stdout.write(format_diff(result, args.home_a, args.home_b))
    return 1 if result["changed_cases"] or result["metric_changes"] else 0
