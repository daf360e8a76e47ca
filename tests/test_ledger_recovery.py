"""The crash states a writer can leave behind, made exactly: each is reported by a read-only
verify and recovered by the next writable open (or the next append), losing nothing."""

from __future__ import annotations

import os

import pytest

from evalledger import ledger
from evalledger.ledger import NewEvent
from evalledger.ledger.jsonl import pending_path


def notes(*texts: str, stream: str = "case:a") -> list[NewEvent]:
    return [NewEvent(stream, "note.added", {"text": t}) for t in texts]


def lines_of(path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def sqlite_lines(home) -> list[bytes]:
    with ledger.open_ledger(home, readonly=True) as led:
        return [e.line() for e in led.read()]


# --- the mirror of a home ---------------------------------------------------------------------------

def test_a_commit_without_its_mirror_write_is_completed_by_the_next_append(home):
    """Another process committed and died before writing the mirror: simulated by appending through
    the bare ledger.db, which has no mirror."""
    live = ledger.open_ledger(home)
    live.append(notes("1"))
    with ledger.open_ledger(home / "ledger.db") as bare:
        bare.append(notes("2", "3"))
    assert len(lines_of(home / "events.jsonl")) == 1
    report = ledger.open_ledger(home, readonly=True).verify()
    assert [p.seq for p in report.problems] == [2] and "crash between commit and mirror write" in str(report.problems[0])
    live.append(notes("4"))
    assert lines_of(home / "events.jsonl") == sqlite_lines(home) and len(sqlite_lines(home)) == 4
    live.close()


def test_a_mirror_behind_is_completed_on_open(home):
    with ledger.open_ledger(home) as led:
        led.append(notes("1", "2", "3"))
    (home / "events.jsonl").write_bytes(b"".join(lines_of(home / "events.jsonl")[:1]))
    ledger.open_ledger(home).close()
    assert lines_of(home / "events.jsonl") == sqlite_lines(home)


def test_a_torn_mirror_line_that_is_a_prefix_is_completed(home):
    with ledger.open_ledger(home) as led:
        led.append(notes("1", "2"))
    data = (home / "events.jsonl").read_bytes()
    (home / "events.jsonl").write_bytes(data[:-30])
    ledger.open_ledger(home).close()
    assert (home / "events.jsonl").read_bytes() == data


def test_torn_bytes_that_are_not_the_next_event_stop_appends(home):
    with ledger.open_ledger(home) as led:
        led.append(notes("1"))
    with open(home / "events.jsonl", "ab") as fh:
        fh.write(b'{"data":{"something else')
    with ledger.open_ledger(home) as led:
        with pytest.raises(ledger.LedgerError, match="not part of seq 2; not rewritten"):
            led.append(notes("2"))
    assert (home / "events.jsonl").read_bytes().endswith(b"something else")


def test_a_failed_mirror_write_keeps_the_commit_and_stops_later_appends(home, monkeypatch):
    led = ledger.open_ledger(home)
    led.append(notes("1"))

    def broken_write(fd, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ledger.mirror.os, "write", broken_write)
    [event] = led.append(notes("2"))  # committed: returned, not raised
    assert event.seq == 2 and led.head().seq == 2
    with pytest.raises(ledger.LedgerError, match="No space left on device"):
        led.append(notes("3"))        # the disk still refuses the mirror: later appends stop
    assert led.head().seq == 2
    monkeypatch.undo()
    [event] = led.append(notes("3"))  # space again: the same process completes the mirror and goes on
    assert event.seq == 3 and lines_of(home / "events.jsonl") == sqlite_lines(home)
    led.close()
    ledger.open_ledger(home).close()
    assert lines_of(home / "events.jsonl") == sqlite_lines(home)


# --- a standalone .jsonl ------------------------------------------------------------------------------

def test_an_interrupted_batch_is_rolled_forward_from_its_pending_file(tmp_path):
    path = tmp_path / "ledger.jsonl"
    with ledger.open_ledger(path) as led:
        led.append(notes("1", "2"))
        led.append(notes("3", "4", "5"))
    whole = lines_of(path)
    # The writer had decided the batch (pending file renamed into place) and was killed after
    # writing one and a half of its three lines.
    pending = pending_path(str(path))
    with open(pending, "wb") as fh:
        fh.write(b"%d\n" % len(b"".join(whole[:2])) + b"".join(whole[2:]))
    path.write_bytes(b"".join(whole[:3]) + whole[3][:50])
    with ledger.open_ledger(path, readonly=True) as led:
        report = led.verify()
        assert [e.seq for e in led.read()] == [1, 2, 3]  # readers never see the torn line
    assert not report.ok and any(p.source == pending for p in report.problems)
    with ledger.open_ledger(path) as led:
        assert led.verify().ok and led.head().seq == 5
    assert lines_of(path) == whole and not os.path.exists(pending)


def test_a_torn_last_line_is_ignored_by_readers_and_cut_by_the_next_writer(tmp_path):
    path = tmp_path / "ledger.jsonl"
    with ledger.open_ledger(path) as led:
        led.append(notes("1"))
        led.append(notes("2"))
    data = path.read_bytes()
    path.write_bytes(data[:-20])
    with ledger.open_ledger(path, readonly=True) as led:
        assert led.head().seq == 1 and [e.seq for e in led.read()] == [1]
        assert not led.verify().ok
    with ledger.open_ledger(path) as led:
        [event] = led.append(notes("again"))
        assert event.seq == 2 and led.verify().ok


def test_a_line_that_breaks_the_index_is_named(tmp_path):
    path = tmp_path / "ledger.jsonl"
    with ledger.open_ledger(path) as led:
        led.append(notes("1", "2"))
    lines = lines_of(path)
    path.write_bytes(lines[0] + lines[0])  # seq 1 twice
    with ledger.open_ledger(path) as led:
        with pytest.raises(ledger.LedgerError, match=r"ledger.jsonl: the line of seq 2 \(byte \d+\) holds seq 1"):
            led.append(notes("3"))
