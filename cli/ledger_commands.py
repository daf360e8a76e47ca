"""Ledger commands: init, note, log, verify, export, import, migrate."""

from __future__ import annotations

import sys

import orjson

from evalledger import ledger
from evalledger.cli.errors import UsageError
from evalledger.cli.out_file import stdout_bytes
from evalledger.ledger import NewEvent
from evalledger.ledger.importer import ImportRefused
from evalledger.projections.history import CaseNotFound, resolve_case


def home_of(args) -> str:
    """The home directory (or ledger file) the command works on."""
    return args.home or ledger.default_home()


def case_or_usage_error(led: ledger.Ledger, wanted: str) -> str:
    """The case id ``wanted`` names (a whole id or a unique prefix), or a usage error saying why not."""
    try:
        return resolve_case(led, wanted)
    except CaseNotFound as exc:
        raise UsageError(str(exc)) from None


def open_existing(args, readonly: bool = False) -> ledger.Ledger:
    """Open the ledger named by --home, refusing to create one where none exists."""
    path = home_of(args)
    return ledger.open_ledger(path, readonly=True) if readonly else _open_checked(path)


def _open_checked(path: str) -> ledger.Ledger:
    if not path.endswith((".jsonl", ".db")) and not ledger.is_home(path):
        # a home whose ledger.db is gone but whose mirror holds events: the read-only open says so
        ledger.open_ledger(path, readonly=True).close()
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
    home = ledger.init_home(path, store=getattr(args, "store", None), mirror=getattr(args, "mirror", "jsonl"),
                             rows=getattr(args, "rows", "text"))
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


def cmd_export(args) -> int:
    """``evalledger export``: write the ledger as canonical JSONL."""
    with open_existing(args, readonly=True) as led:
        if args.out:
            count = led.export(args.out)
            print(f"exported {count} events to {args.out}", file=sys.stderr)
        else:
            with stdout_bytes("the export") as out:
                led.export(out)
    return 0


def cmd_migrate(args) -> int:
    """``evalledger migrate --to NEW``: copy the home into a new home with the blob store, recording it."""
    from evalledger.ledger.migrate import migrate_home
    done = migrate_home(home_of(args), args.to, getattr(args, "mirror", "jsonl"), getattr(args, "rows", "text"))
    print(f"migrated {done.events} events (head seq {done.source_head.seq} {done.source_head.hash}) from "
          f"{home_of(args)} to {args.to}; recorded as {done.recorded.type} at seq {done.recorded.seq}; "
          f"{home_of(args)} is left as it was")
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
