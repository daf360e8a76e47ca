"""Intake commands: ``ingest FILE...`` and ``status``. No domain logic: it lives in stages.intake."""

from __future__ import annotations

import errno
import os
import stat
import sys
from pathlib import Path

import orjson

from evalledger import ledger
from evalledger.cli.errors import UsageError
from evalledger.cli.ledger_commands import case_or_usage_error, open_existing
from evalledger.cli.out_file import write_out
from evalledger.cli.watch_inbox import is_ignored, scan_inbox
from evalledger.stages.intake import (
    MAX_RESPONSE_CHARS_LIMIT,
    IngestResult,
    case_source,
    ingest_path,
)
from evalledger.stages.intake_files import put_back_taken
from evalledger.stages.intake_status import CASE_STATES, status
from evalledger.stages.printable import escape_unprintable, shown_name

# A folder named on the command line may hold other things (a README); only these are taken.
INPUT_SUFFIXES = (".json", ".jsonl", ".jsonld")


def _missing(name: str) -> str:
    """``name`` as a missing file is listed: a symlink (which ``ls`` shows) says where it leads, or
    that it loops, rather than leave "no such file" beside a name the user can see."""
    why = _broken_link(Path(name))
    return f"{name} ({why})" if why else name


def _broken_link(path: Path) -> str | None:
    """Why a symlink leads to no file (it loops, or to where it leads); None when ``path`` is no symlink."""
    if not path.is_symlink():
        return None
    try:
        path.resolve(strict=True)
    except RuntimeError:   # Python 3.11 reports a loop this way; 3.13 raises OSError ELOOP
        return "a symlink loop"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symlink loop"
    return f"a symlink to {os.readlink(path)}, which does not exist"


def _home(args) -> str:
    return args.home or ledger.default_home()


def inbox_files(inbox: Path, skipped: list[tuple[Path, str]] | None = None) -> list[Path]:
    """The files waiting in an inbox, oldest name first; hidden and partial files are left alone.

    An entry that is neither a regular file nor a folder (a FIFO, a socket, a device, a symlink
    leading nowhere) is never opened: a FIFO's read would wait for a writer for ever. It goes into
    ``skipped`` as (path, what it is), so the caller can say it was passed over and why."""
    if not inbox.is_dir():
        return []
    files = []
    for p in sorted(inbox.iterdir()):
        if is_ignored(p.name):   # the names the watch daemon ignores too
            continue
        if p.is_file():
            files.append(p)
        elif skipped is not None and not p.is_dir():
            skipped.append((p, _not_a_file(p)))
    return files


def _not_a_file(path: Path) -> str:
    """What an entry that is neither a regular file nor a folder is, as a reason to pass it over
    (a stat only: nothing is opened)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return _broken_link(path) or "gone before it could be read"
    for test, kind in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return f"{kind}, not a regular file: not read"
    return "not a regular file: not read"


def special_entries(inbox: Path) -> list[tuple[Path, str]]:
    """The entries of the inbox and of its folders that ``scan_inbox`` passes over for being no
    regular file, folder or symlink (a FIFO, a socket, a device), with what each is, by path;
    ignored names and symlinks are left alone, as the daemon leaves them (docs/watch.md)."""
    found: list[tuple[Path, str]] = []
    folders = [inbox]
    while folders:
        folder = folders.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:   # no inbox yet, or a folder gone meanwhile: nothing to say
            continue
        for entry in entries:
            if is_ignored(entry.name) or entry.is_symlink() or entry.is_file(follow_symlinks=False):
                continue
            if entry.is_dir(follow_symlinks=False):
                if folder == inbox:   # one level down, as scan_inbox reads
                    folders.append(Path(entry.path))
                continue
            found.append((Path(entry.path), _not_a_file(Path(entry.path))))
    return sorted(found)


def print_skipped(skipped: list[tuple[Path, str]]) -> None:
    """One line for each entry of a folder passed over (``inbox_files``), naming it and why."""
    for path, why in skipped:
        print(f"skipped  {shown_name(str(path))}  {why}")


def _targets(args, home: Path, led: ledger.Ledger) -> list[tuple[Path, bool, str | None]]:
    """(path, from_inbox, collection) for every file to ingest; raises UsageError for paths that
    do not exist. Files of a folder named on the command line get the folder's name as their
    reconstruction collection (the inbox itself names none)."""
    from evalledger.cli.errors import UsageError
    inbox = (home / "inbox").resolve()
    if not args.files:  # exactly the files the watch daemon would take (no symlinks, no folders)
        put_back_taken(home, led)
        print_skipped(special_entries(inbox))
        return [(p, True, None) for p in scan_inbox(inbox)]
    out: list[tuple[Path, bool, str | None]] = []
    missing = [_missing(f) for f in args.files if not Path(f).exists()]
    if missing:
        raise UsageError(f"no such file: {', '.join(missing)}")
    skipped: list[tuple[Path, str]] = []
    for name in args.files:
        path = Path(name)
        inputs = [f for f in inbox_files(path, skipped) if f.suffix.lower() in INPUT_SUFFIXES] \
            if path.is_dir() else [path]
        folder = path.resolve().name if path.is_dir() and path.resolve() != inbox else None
        for file in inputs:
            out.append((file, file.resolve().parent == inbox, folder))
    print_skipped(skipped)
    return out


def cmd_ingest(args) -> int:
    """Ingest files (or the whole inbox); one line per file; exit 1 when any was rejected."""
    if args.max_bytes < 1:  # every file would be rejected, and rejections stay in the ledger
        raise UsageError(f"--max-bytes must be at least 1, got {args.max_bytes}")
    check_max_response_chars(args.max_response_chars)
    home = Path(_home(args))
    with open_existing(args) as led:  # a mistyped --home must not start a second, empty ledger
        targets = _targets(args, home, led)
        results, unreadable = [], 0
        for path, from_inbox, collection in targets:
            if not path.is_file():  # a FIFO would block the read forever; a device is no benchmark
                print(f"unreadable {shown_name(str(path))}  not a regular file")
                unreadable += 1
                continue
            try:
                result = ingest_path(led, path, from_inbox=from_inbox, max_bytes=args.max_bytes,
                                     max_response_chars=args.max_response_chars, collection=collection)
            except ledger.DiskFull as exc:   # nothing of this file is in; the files above are as listed
                print(f"stopped  {shown_name(path.name)}  not ingested: {exc}")
                return 1
            except FileNotFoundError:
                print(f"skipped  {shown_name(path.name)}  (gone before it could be read; another process took it)")
                continue
            except OSError as exc:  # a permission or I/O problem: no content, so nothing is recorded
                print(f"unreadable {shown_name(str(path))}  {escape_unprintable(str(exc.strerror or exc))}")
                unreadable += 1
                continue
            results.append(result)
            _print_result(result)
    if not targets:
        where = ", ".join(args.files) if args.files else str(home / "inbox")
        print(f"nothing to ingest in {where}")
    return 1 if unreadable or any(r.status == "rejected" or r.filing_error for r in results) else 0


def cmd_validate(args) -> int:
    """Check files as ingest would, writing nothing; exit 1 when any would be rejected."""
    from evalledger.cli.errors import UsageError
    from evalledger.stages.validate import validate_path
    if args.max_bytes < 1:
        raise UsageError(f"--max-bytes must be at least 1, got {args.max_bytes}")
    check_max_response_chars(args.max_response_chars)
    missing = [_missing(f) for f in args.files if not Path(f).exists()]
    if missing:
        raise UsageError(f"no such file: {', '.join(missing)}")
    led = _ledger_to_validate_against(args)
    bad = 0
    try:
        for name in args.files:
            path = Path(name)
            skipped: list[tuple[Path, str]] = []
            files = [f for f in inbox_files(path, skipped) if f.suffix.lower() in INPUT_SUFFIXES] \
                if path.is_dir() else [path]
            print_skipped(skipped)
            for file in files:
                if not file.is_file():
                    print(f"unreadable {file}  not a regular file")
                    bad += 1
                    continue
                result = validate_path(led, file, max_bytes=args.max_bytes,
                                       max_response_chars=args.max_response_chars)
                bad += result.status == "rejected"
                _print_result(result)
    finally:
        if led is not None:
            led.close()
    return 1 if bad else 0


def _ledger_to_validate_against(args) -> ledger.Ledger | None:
    """The ledger whose benchmarks and files ``validate`` compares with, opened read-only; None
    when there is none yet (a file is then checked alone, as ingest into a new ledger checks it).

    With ``--store`` it is that PostgreSQL store, opened without binding the home to it (validate
    writes nothing: binding left a home with a ``store.url`` behind, ``./evalledger`` when no
    ``--home`` was given), after refusing what binding would refuse (a home holding its own
    ledger.db, or bound to another store); a store whose schema holds no ledger yet is none."""
    home = _home(args)
    if getattr(args, "store", None):
        ledger.check_store_binding(home, args.store)
        try:
            return ledger.open_ledger(args.store, readonly=True)
        except ledger.EmptyStore:
            return None
    if ledger.is_home(home) or home.endswith((".jsonl", ".db")) and Path(home).exists():
        return ledger.open_ledger(home, readonly=True)
    return None


def check_max_response_chars(value: int) -> None:
    """UsageError unless 1 <= value <= MAX_RESPONSE_CHARS_LIMIT (the formats' own bound)."""
    from evalledger.cli.errors import UsageError
    if not 1 <= value <= MAX_RESPONSE_CHARS_LIMIT:
        raise UsageError(f"--max-response-chars must be between 1 and {MAX_RESPONSE_CHARS_LIMIT}, got {value}")


def cmd_rebind(args) -> int:
    """Open the responses of a benchmark's earlier versions as cases of its latest version."""
    from evalledger.cli.errors import UsageError
    from evalledger.cli.ledger_commands import open_existing
    from evalledger.stages.versions import RebindError, rebind
    with open_existing(args) as led:
        try:
            result = rebind(led, args.name)
        except RebindError as exc:
            raise UsageError(str(exc)) from None
    print(f"rebind {result.name!r} to version {result.version} ({result.latest}): {result.opened} new case(s), "
          f"{result.already} already there, from {len(result.sources)} earlier version(s)")
    for line in result.dropped:
        print(f"  not rebound: {line}")
    if result.opened:
        print("  judge them with: evalledger run")
    return 0


def _print_result(result: IngestResult) -> None:
    print(result.line())
    for line in result.error_lines():
        print(f"    {line}")


def cmd_status(args) -> int:
    """Benchmarks, cases by state, pending responses, rejected files and the ledger head."""
    with ledger.open_ledger(_home(args), readonly=True) as led:
        report = status(led)
    if args.json:
        sys.stdout.buffer.write(orjson.dumps(report.as_dict(), option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2))
        sys.stdout.write("\n")
        return 0
    for line in render_status(report):
        print(line)
    return 0


def render_status(report) -> list[str]:
    """The status as readable lines."""
    lines = [f"benchmarks: {len(report.benchmarks)}"]
    for b in report.benchmarks:
        counts = ", ".join(f"{b['cases'][s]} {s}" for s in CASE_STATES)
        extra = ""
        if b["rejected_questions"] or b["rejected_traits"]:
            extra = (f"  ({_count(b['rejected_questions'], 'question')}, "
                     f"{_count(b['rejected_traits'], 'trait')} not translated)")
        lines.append(f"  {b['benchmark']}  {escape_unprintable(b['name'])}  kind: {b['kind']}, file format: {b['format']}  "
                     f"{_count(b['questions'], 'question')}  cases: {counts}{extra}")
    lines.append("cases: " + ", ".join(f"{report.cases.get(s, 0)} {s}" for s in CASE_STATES))
    lines.append(f"pending responses: {len(report.pending)}")
    for p in report.pending:
        lines.append(f"  {shown_name(p['file'])}  {p['responses']} responses wait for benchmark {p['benchmark']!r}  "
                     f"(sha256 {p['sha256'][:12]})")
    lines.append(f"rejected files: {len(report.rejected)}")
    for r in report.rejected:
        first = r["first_error"]
        why = escape_unprintable(f"{first['where']}: {first['reason']}") if first else ""
        lines.append(f"  {shown_name(r['file'])}  {r['errors']} error{'s' if r['errors'] != 1 else ''}  {why}")
    for r in report.reconciled:
        if r["cases"]:
            lines.append(f"reconciled: {_count(r['cases'], 'case')} of stage {r['stage']} had been passed over by "
                         f"its tracking position (seq {r['tracking_position']}); run {r['run']} took them up "
                         f"(seq {r['seq']})")
        else:
            lines.append(f"reconciled: the tracking position of stage {r['stage']} (seq {r['tracking_position']}) "
                         f"was past the ledger head; run {r['run']} set it back to seq {r['lowered_to']} "
                         f"(seq {r['seq']})")
    lines.append(f"ledger head: seq {report.head['seq']} {report.head['hash']}")
    return lines


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def cmd_source(args) -> int:
    """``evalledger source``: write the bytes of the file a case came from; exit 1 when they are kept
    nowhere this home can reach (a home of its own ingested before, its processed/ emptied)."""
    with open_existing(args, readonly=True) as led:
        case_id = case_or_usage_error(led, args.case)
        try:
            name, sha, raw = case_source(led, case_id)
        except LookupError as exc:
            raise UsageError(str(exc).strip("'\"")) from None
    if raw is None:
        print(f"evalledger source: the bytes of {shown_name(name)} (sha256 {sha}) are neither in the store nor in "
              "this home's processed/ folder (nor, for a replay, in the home it replayed)", file=sys.stderr)
        return 1
    if args.out is None:
        sys.stdout.buffer.write(raw)
        sys.stdout.flush()
        return 0
    write_out(args.out, raw)
    return 0

