"""Ledger commands: init, note, log, verify, export, import."""

from __future__ import annotations

import sys

import orjson

from evalledger import ledger
from evalledger.ledger import NewEvent
from evalledger.ledger.importer import ImportRefused
from evalledger.ledger.persistence import LedgerDamaged
from evalledger.cli.errors import UsageError
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
    return ledger.open_ledger(path)


def cmd_init(args) -> int:
    """Create the home; on an existing home, say so (missing folders are put back, nothing else changes)."""
    path = home_of(args)
    existed = ledger.is_home(path)
    home = ledger.init_home(path)
    if existed:
        with ledger.open_ledger(home, readonly=True) as led:
            head = led.head()
        print(f"{home} already exists as an evalledger home (head seq {head.seq}); nothing changed")
    else:
        print(f"initialised {home}")
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


def cmd_note(args) -> int:
    """Append a note.added event to a case (id or prefix) or an existing stream."""
    with open_existing(args) as led:
        stream = note_stream(led, args.stream, args.new_stream)
        [event] = led.append(NewEvent(stream, "note.added", {"text": args.text, "author": args.author}))
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
    try:
        if args.repair:
            open_existing(args).close()  # a writable open completes the mirror and cuts torn tails
        with open_existing(args, readonly=True) as led:
            report = led.verify(expect_head=args.expect_head)
    except LedgerDamaged as exc:  # a store that cannot even be opened is the worst verify finding
        print(f"FAILED {exc}", file=sys.stderr)
        return 1
    for problem in report.problems:
        print(f"FAILED {problem}", file=sys.stderr)
    for warning in report.warnings:
        print(f"WARNING {warning}", file=sys.stderr)
    print(f"seq {report.head.seq} {report.head.hash}")
    if report.ok and args.expect_head:
        print(f"published head {args.expect_head} is a prefix of this ledger")
    return 0 if report.ok and check_checkpoints(args) else 1


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


def cmd_export(args) -> int:
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

    p = sub.add_parser("verify", help="recompute the hash chain over the stored bytes")
    p.add_argument("--expect-head", default=None, metavar="SEQ:HASH",
                   help="also check that a head published earlier is still a prefix")
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
