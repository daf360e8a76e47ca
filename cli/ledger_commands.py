"""Ledger commands: init, note, log, verify, export, import."""

from __future__ import annotations

import sys

import orjson

from evalledger import ledger
from evalledger.cli.errors import UsageError
from evalledger.ledger import NewEvent
from evalledger.ledger.importer import ImportRefused
from evalledger.ledger.persistence import LedgerDamaged
from evalledger.projections.history import CaseNotFound, resolve_case


def home_of(args) -> str:
    """The home directory (or ledger file) the command works on."""
    return args.home or ledger.default_home()


def open_existing(args, readonly: bool = False) -> ledger.Ledger:
    """Open the ledger named by --home, refusing to create one where none exists."""
    path = home_of(args)
    return ledger.open_ledger(path, readonly=True) if readonly else _open_checked(path)


def _open_checked(path: str) -> ledger.Ledger:
    if not path.endswith((".jsonl", ".db")) and not ledger.is_home(path):
        raise ledger.LedgerError(f"{path}: no evalledger home here (run 'evalledger --home {path} init')")
    refuse_read_only(path)
    return ledger.open_ledger(path)


def refuse_read_only(path: str) -> None:
    """Raise LedgerError, naming the reason, when the home (or ledger file's folder) cannot be written.

    A writing command would otherwise fail deep inside SQLite ("unable to open database file").
    Reading commands (status, log, export, history, verify) open read-only and work there.
    """
    import os
    from pathlib import Path
    where = Path(path) if Path(path).is_dir() else Path(path).parent
    try:
        read_only_mount = bool(os.statvfs(where).f_flag & os.ST_RDONLY)
    except OSError:
        return
    if read_only_mount or not os.access(where, os.W_OK):
        why = "on a read-only file system" if read_only_mount else "not writable by this user"
        raise ledger.LedgerError(f"{path} is {why}: this command writes to the ledger, its read models or "
                                 "reports/; status, log, export, history and verify read it as it is")


def cmd_init(args) -> int:
    """Create the home; on an existing home, say so (missing folders are put back, nothing else changes)."""
    path = home_of(args)
    existed = ledger.is_home(path)
    home = ledger.init_home(path, store=getattr(args, "store", None))
    if existed:
        with ledger.open_ledger(home, readonly=True) as led:
            head = led.head()
        print(f"{home} already exists as an evalledger home (head seq {head.seq}); nothing changed")
    else:
        store = ledger.store_of(home)
        print(f"initialised {home}" + (f" (events in {store})" if store else ""))
    return 0


def note_stream(led: ledger.Ledger, wanted: str, new_stream: bool) -> str:
    """The stream a note goes to: a case id, a unique prefix of one, or an existing stream.

    A stream that does not exist yet is refused unless ``new_stream``: a typo must not start a
    stream nobody will read.
    """
    if led.stream_version(wanted):
        return wanted
    kind, sep, _ = wanted.partition(":")
    if not sep or kind == "case":
        try:
            return "case:" + resolve_case(led, wanted)
        except CaseNotFound as exc:
            if not new_stream:
                raise UsageError(f"{exc}; give --new-stream to start a stream named {wanted!r}") from None
    elif not new_stream:
        raise UsageError(f"no stream {wanted!r} in this ledger; give --new-stream to start it")
    return wanted if sep else f"case:{wanted}"


def add_note(led: ledger.Ledger, stream: str, text: str, author: str | None) -> ledger.Event:
    """Append the note.added event of a note (the CLI's and the viewer's path)."""
    [event] = led.append(NewEvent(stream, "note.added", {"text": text, "author": author}))
    return event


def cmd_note(args) -> int:
    """Append a note.added event to a case (id or prefix) or an existing stream."""
    with open_existing(args) as led:
        event = add_note(led, note_stream(led, args.stream, args.new_stream), args.text, args.author)
    print(f"seq {event.seq} {event.type} {event.stream} {event.hash}")
    return 0


def format_event(event: ledger.Event) -> str:
    """One readable line for an event: seq, time, type, stream, then the payload."""
    when = event.meta.get("recorded_at", "")
    stage = event.meta.get("stage")
    data = orjson.dumps(event.data, option=orjson.OPT_SORT_KEYS).decode()
    if len(data) > 160:
        data = data[:157] + "..."
    return f"{event.seq:>6}  {when}  {event.type:<20} {event.stream}{'  [' + stage + ']' if stage else ''}  {data}"


def cmd_log(args) -> int:
    """``evalledger log``: list events, readable or as JSONL envelopes."""
    unknown = sorted(set(args.type or ()) - set(ledger.known_types()))
    if unknown:  # a misspelt type would otherwise list nothing and look like an empty ledger
        raise ledger.LedgerError(f"unknown event type {', '.join(map(repr, unknown))}; "
                                 f"known types: {', '.join(ledger.known_types())}")
    with open_existing(args, readonly=True) as led:
        out = sys.stdout.buffer
        for event in led.read(from_seq=args.from_seq, types=args.type, stream=args.stream):
            if args.json:
                out.write(event.line())
            else:
                out.write(format_event(event).encode() + b"\n")
    return 0


def cmd_verify(args) -> int:
    """Verify read-only (report, never repair) unless --repair; exit 1 on any problem."""
    from evalledger.ledger.published import looks_like_head, read_heads
    single, published = args.expect_head, None
    if single is not None and not looks_like_head(single):
        from pathlib import Path
        if not Path(single).is_file():
            raise ledger.LedgerError(f"--expect-head: {single!r} is neither SEQ:HASH nor a file of published heads")
        single, published = None, read_heads(args.expect_head)
    try:
        if args.repair:
            open_existing(args).close()  # a writable open completes the mirror and cuts torn tails
        with open_existing(args, readonly=True) as led:
            report = led.verify(expect_head=single)
            heads = _check_published(led, report, published) if published else []
    except LedgerDamaged as exc:  # a store that cannot even be opened is the worst verify finding
        print(f"FAILED {exc}", file=sys.stderr)
        return 1
    for problem in report.problems:
        print(f"FAILED {problem}", file=sys.stderr)
    for warning in report.warnings:
        print(f"WARNING {warning}", file=sys.stderr)
    print(f"seq {report.head.seq} {report.head.hash}")
    if report.ok and single:
        print(f"published head {single} is a prefix of this ledger")
    ok = report.ok and all(h.holds for h in heads)
    if heads:
        _print_published(heads)
    if args.projections:
        ok = _verify_projections(args) and ok
    if report.ok:   # consistency proofs mean something only over a chain that verifies
        ok = check_checkpoints(args) and ok
    return 0 if ok else 1


def check_checkpoints(args) -> bool:
    """The Merkle part of verify: the ledger extends its own checkpoints and those of ``--against``."""
    from evalledger.ledger import checkpoint as cps
    from evalledger.ledger import signed_note
    with open_existing(args, readonly=True) as led:
        sources = [("the ledger's own checkpoints", [{"note": e.data["note"], "seq": e.data["size"]}
                                                       for e in led.read(types=["checkpoint.signed"])], None)]
        if args.against:
            try:
                rows = cps.read_checkpoints(args.against)
                key = signed_note.load_key(args.pubkey) if args.pubkey else None
            except (OSError, cps.CheckpointError, signed_note.NoteError) as exc:
                raise UsageError(f"{exc}") from None
            if isinstance(key, signed_note.Signer):
                key = key.verifier
            sources.append((str(args.against), rows, key))
        ok = True
        for name, rows, key in sources:
            if not rows:
                continue
            result = cps.check_consistency(led, rows, key)
            if result.broken is None:
                print(f"checkpoints: {name}: the ledger extends all {result.checked} (RFC 6962 consistency "
                      f"proofs), the latest at seq {result.holds[-1]}")
                continue
            ok = False
            latest = f"the latest that holds is at seq {result.holds[-1]}" if result.holds else "none holds"
            print(f"FAILED checkpoints: {name}: {result.reason}; history was rewritten at or before seq "
                  f"{result.broken}; {latest}")
    return ok


def _check_published(led, report, published):
    """The published heads checked against the verified ledger."""
    from evalledger.ledger.published import check_heads
    first_problem = min((p.seq for p in report.problems if p.seq), default=None)
    return check_heads(led, published, first_problem)


def _print_published(heads) -> None:
    """The latest published head that holds, and the first that does not (with why)."""
    holding = [h for h in heads if h.holds]
    failing = [h for h in heads if not h.holds]
    if holding:
        latest = holding[-1]
        print(f"latest published head that still holds: seq {latest.head.seq} {latest.head.hash} ({latest.where})")
    else:
        print("no published head still holds")
    if not failing:
        print(f"all {len(heads)} published heads hold")
        return
    first = failing[0]
    print(f"FAILED first published head that does not hold: seq {first.head.seq} {first.head.hash} "
          f"({first.where}): {first.reason}", file=sys.stderr)
    print(f"first published head that does not hold: seq {first.head.seq} {first.head.hash} ({first.where})")


def _verify_projections(args) -> bool:
    """Fold the events afresh and compare with the stored read models; True when they match."""
    from evalledger.projections.check import compare_read_models
    with open_existing(args) as led:
        problems = compare_read_models(led)
    for problem in problems:
        print(f"FAILED read models: {problem}", file=sys.stderr)
    if not problems:
        print("read models match the events folded afresh")
    return not problems


def cmd_export(args) -> int:
    """``evalledger export``: write the ledger as canonical JSONL."""
    with open_existing(args, readonly=True) as led:
        if args.out:
            count = led.export(args.out)
            print(f"exported {count} events to {args.out}", file=sys.stderr)
        else:
            led.export(sys.stdout.buffer)
    return 0


def cmd_import(args) -> int:
    """Import into an empty (or new) home; a file that fails verification is refused with exit 1."""
    from pathlib import Path
    if not Path(args.file).is_file():  # checked first: a typo must not leave a new, empty home behind
        raise ledger.LedgerError(f"{args.file}: no such file" if not Path(args.file).exists()
                                 else f"{args.file}: not a file")
    with ledger.open_ledger(home_of(args)) as led:
        try:
            count = led.import_file(args.file)
        except ImportRefused as exc:
            print(f"evalledger import: {exc}", file=sys.stderr)
            return 1
        except FileNotFoundError:
            raise ledger.LedgerError(f"{args.file}: no such file") from None
        head = led.head()
    print(f"imported {count} events; seq {head.seq} {head.hash}")
    return 0


def register(sub) -> None:
    """Add the ledger commands (init, note, log, verify, export, import) to the parser."""
    p = sub.add_parser("init", help="create a home (inbox, processed, rejected, reports, ledger)")
    p.set_defaults(func=cmd_init)

    p = sub.add_parser("note", help="append a note.added event to a stream")
    p.add_argument("stream", help="a case id or unique prefix, or a stream such as benchmark:<id>")
    p.add_argument("text")
    p.add_argument("--author", default=None)
    p.add_argument("--new-stream", action="store_true",
                   help="allow a stream that does not exist yet (refused otherwise, to catch typos)")
    p.set_defaults(func=cmd_note)

    p = sub.add_parser("log", help="list events, readable or as JSONL envelopes")
    p.add_argument("--type", action="append", default=None, help="only this event type (repeatable)")
    p.add_argument("--stream", default=None, help="only this stream")
    p.add_argument("--from", dest="from_seq", type=int, default=1, help="start at this seq")
    p.add_argument("--json", action="store_true", help="one JSON envelope a line")
    p.set_defaults(func=cmd_log)

    p = sub.add_parser("verify", help="recompute the hash chain over the stored bytes",
                       epilog="more:\n  evalledger verify --expect-head published-heads.txt --projections\n"
                              "  evalledger verify --against checkpoints.jsonl --pubkey witness.pub")
    p.add_argument("--expect-head", default=None, metavar="SEQ:HASH|FILE",
                   help="also check that a head published earlier is still a prefix; or FILE, a list of "
                        "published heads (SEQ:HASH or {\"seq\":..,\"hash\":..} a line): names the latest "
                        "that holds and the first that does not")
    p.add_argument("--projections", action="store_true",
                   help="also fold the events afresh and compare with the stored read models (proj_* tables)")
    p.add_argument("--repair", action="store_true",
                   help="first complete a mirror that is behind SQLite and cut a torn last line "
                        "(what any writing command does); without it verify changes nothing")
    p.add_argument("--against", default=None, metavar="CHECKPOINTS",
                   help="prove the ledger extends every checkpoint of this file (checkpoints.jsonl or a "
                        "witness's copy); names the first it no longer extends")
    p.add_argument("--pubkey", default=None, metavar="KEY",
                   help="with --against: also check each checkpoint's signature with this verifier key")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("export", help="write the ledger as canonical JSONL")
    p.add_argument("--out", default=None, help="file to write (default: standard output)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("import", help="import an exported JSONL ledger into an empty home")
    p.add_argument("file")
    p.set_defaults(func=cmd_import)
