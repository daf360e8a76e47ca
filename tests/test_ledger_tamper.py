"""Every kind of damage (edit, deletion, insertion, reordering, truncation) to the SQLite store, the
mirror and a standalone .jsonl ledger makes ``evalledger verify`` exit 1 naming the first bad seq,
the file or table, and why. The SQLite tampering drops the immutability triggers first, as an
attacker with the file would, then edits with raw sqlite3."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from evalledger import ledger
from evalledger.ledger import NewEvent
from evalledger.ledger.envelope import canonical_bytes, canonical_json, chain_hash, line_bytes

FAILED = re.compile(r"^FAILED seq (\d+): (.+?): (.*)$")


def build(path: Path) -> ledger.Head:
    """Six events in three batches over two streams; returns the head."""
    with ledger.open_ledger(path) as led:
        led.append([NewEvent("case:a", "note.added", {"text": f"note {i}"}) for i in (1, 2)])
        led.append([NewEvent("case:b", "note.added", {"text": f"note {i}"}) for i in (3, 4)])
        led.append([NewEvent("case:a", "note.added", {"text": f"note {i}"}) for i in (5, 6)])
        return led.head()


def failures(result) -> list[tuple[int, str, str]]:
    """(seq, source, reason) of each FAILED line verify printed."""
    found = []
    for line in result.stdout.splitlines():
        match = FAILED.match(line)
        if match:
            found.append((int(match.group(1)), match.group(2), match.group(3)))
    return found


def assert_fails(result, seq: int, source: str, reason: str) -> None:
    """verify exited 1 and printed a problem at ``seq`` in ``source`` whose reason matches."""
    assert result.returncode == 1, result.stdout + result.stderr
    hits = [f for f in failures(result) if f[0] == seq and source in f[1] and re.search(reason, f[2])]
    assert hits, f"no problem at seq {seq} in {source} matching {reason!r}:\n{result.stdout}"


def forged_line(seq: int, prev_hash: str, text: str, stream: str = "case:a", version: int = 1) -> bytes:
    """A line an attacker computes: valid on its own (its hash matches its bytes)."""
    data = canonical_json({"author": None, "text": text})
    meta = canonical_json({"recorded_at": "2026-01-01T00:00:00.000000Z"})
    canonical = canonical_bytes(seq, "f" * 32, stream, version, "note.added", 1, data, meta)
    return line_bytes(canonical, prev_hash, chain_hash(prev_hash, canonical))


# --- the SQLite store ------------------------------------------------------------------------------

def tamper_sql(home: Path, *statements: str) -> None:
    conn = sqlite3.connect(home / "ledger.db", isolation_level=None)
    conn.execute("DROP TRIGGER events_refuse_update")
    conn.execute("DROP TRIGGER events_refuse_delete")
    for sql in statements:
        conn.execute(sql)
    conn.close()


STORE = "ledger.db (table events)"


def test_sqlite_edit(home, run_cli):
    build(home)
    tamper_sql(home, "UPDATE events SET data = '{\"author\":null,\"text\":\"edited\"}' WHERE seq = 3")
    result = run_cli("verify", home=home)
    assert_fails(result, 3, STORE, "hash does not match the stored bytes")
    assert failures(result)[0][:2] == (3, str(home / "ledger.db") + " (table events)")
    assert "triggers that refuse UPDATE and DELETE are missing" in result.stdout


def test_sqlite_deletion(home, run_cli):
    build(home)
    tamper_sql(home, "DELETE FROM events WHERE seq = 3")
    assert_fails(run_cli("verify", home=home), 3, STORE, "holds seq 4 where seq 3 should be")


def test_sqlite_insertion(home, run_cli):
    build(home)
    rows = sqlite3.connect(home / "ledger.db").execute("SELECT hash FROM events WHERE seq = 2").fetchone()
    forged = ledger.envelope.event_from_line(forged_line(3, rows[0], "forged", "case:z"))
    tamper_sql(home, "UPDATE events SET seq = seq + 100 WHERE seq >= 3",
               "UPDATE events SET seq = seq - 99 WHERE seq >= 100",
               "INSERT INTO events VALUES (3, '%s', 'case:z', 1, 'note.added', 1, '%s', '%s', '%s', '%s')"
               % (forged.id, forged.raw_data.decode(), forged.raw_meta.decode(), forged.prev_hash, forged.hash))
    result = run_cli("verify", home=home)
    # The forged row is valid on its own: the chain breaks at the event after it, and the mirror
    # (which still holds the real seq 3) disagrees at the inserted seq.
    assert_fails(result, 4, STORE, "prev_hash does not match")
    assert_fails(result, 3, "events.jsonl", "differs from the SQLite store")


def test_sqlite_reordering(home, run_cli):
    build(home)
    tamper_sql(home, "UPDATE events SET seq = 100 WHERE seq = 3", "UPDATE events SET seq = 3 WHERE seq = 4",
               "UPDATE events SET seq = 4 WHERE seq = 100")
    assert_fails(run_cli("verify", home=home), 3, STORE, "prev_hash does not match")


def test_sqlite_truncation_shows_as_the_mirror_being_ahead(home, run_cli):
    build(home)
    tamper_sql(home, "DELETE FROM events WHERE seq >= 5")
    result = run_cli("verify", home=home)
    assert_fails(result, 5, STORE, "ends at seq 4, but the mirror .*events.jsonl goes on.*truncated")
    # A writing command refuses to go on rather than rewrite the mirror.
    note = run_cli("note", "--new-stream", "case:a", "more", home=home)
    assert note.returncode == 2 and "ahead of the SQLite store" in note.stderr


# --- the mirror ------------------------------------------------------------------------------------

def mirror_lines(home: Path) -> list[bytes]:
    return (home / "events.jsonl").read_bytes().splitlines(keepends=True)


def write_mirror(home: Path, lines: list[bytes]) -> None:
    (home / "events.jsonl").write_bytes(b"".join(lines))


def test_mirror_edit(home, run_cli):
    build(home)
    lines = mirror_lines(home)
    lines[2] = lines[2].replace(b"note 3", b"note X")
    write_mirror(home, lines)
    assert_fails(run_cli("verify", home=home), 3, "events.jsonl", "hash does not match")


def test_mirror_deletion(home, run_cli):
    build(home)
    lines = mirror_lines(home)
    write_mirror(home, lines[:2] + lines[3:])
    assert_fails(run_cli("verify", home=home), 3, "events.jsonl", "holds seq 4 where seq 3 should be")


def test_mirror_insertion(home, run_cli):
    build(home)
    lines = mirror_lines(home)
    prev = ledger.envelope.event_from_line(lines[1]).hash
    write_mirror(home, lines[:2] + [forged_line(3, prev, "forged", "case:z")] + lines[2:])
    assert_fails(run_cli("verify", home=home), 3, "events.jsonl", "differs from the SQLite store")


def test_mirror_reordering(home, run_cli):
    build(home)
    lines = mirror_lines(home)
    lines[2], lines[3] = lines[3], lines[2]
    write_mirror(home, lines)
    assert_fails(run_cli("verify", home=home), 3, "events.jsonl", "holds seq 4 where seq 3 should be")


def test_mirror_truncated_by_whole_lines_is_reported_then_completed_by_repair(home, run_cli):
    build(home)
    write_mirror(home, mirror_lines(home)[:4])
    before = (home / "events.jsonl").read_bytes()
    result = run_cli("verify", home=home)
    assert_fails(result, 5, "events.jsonl", "ends at seq 4.*truncated mirror or a crash between commit and "
                                            "mirror write.*--repair")
    assert (home / "events.jsonl").read_bytes() == before  # verify reports, never repairs
    repaired = run_cli("verify", "--repair", home=home)
    assert repaired.returncode == 0, repaired.stderr
    assert mirror_lines(home) == [e.line() for e in ledger.open_ledger(home, readonly=True).read()]


def test_mirror_cut_mid_line(home, run_cli):
    build(home)
    data = (home / "events.jsonl").read_bytes()
    (home / "events.jsonl").write_bytes(data[:-40])
    assert_fails(run_cli("verify", home=home), 6, "events.jsonl", "ends in the middle of a line")
    assert run_cli("verify", "--repair", home=home).returncode == 0


def test_a_mirror_that_disagrees_is_never_rewritten(home, run_cli):
    build(home)
    lines = mirror_lines(home)
    lines[-1] = lines[-1].replace(b"note 6", b"note X")
    write_mirror(home, lines)
    damaged = (home / "events.jsonl").read_bytes()
    note = run_cli("note", "--new-stream", "case:a", "more", home=home)
    assert note.returncode == 2 and "differs from the SQLite store at seq 6" in note.stderr
    assert (home / "events.jsonl").read_bytes() == damaged
    assert_fails(run_cli("verify", "--repair", home=home), 6, "events.jsonl", "hash does not match")


# --- a standalone .jsonl ledger -------------------------------------------------------------------

@pytest.fixture
def jsonl(tmp_path) -> tuple[Path, ledger.Head]:
    path = tmp_path / "ledger.jsonl"
    return path, build(path)


def rewrite(path: Path, change) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(change(lines)))


def test_jsonl_edit(jsonl, run_cli):
    path, _ = jsonl
    rewrite(path, lambda ls: ls[:2] + [ls[2].replace(b"note 3", b"note X")] + ls[3:])
    assert_fails(run_cli("verify", home=path), 3, "ledger.jsonl", "hash does not match")


def test_jsonl_deletion(jsonl, run_cli):
    path, _ = jsonl
    rewrite(path, lambda ls: ls[:2] + ls[3:])
    assert_fails(run_cli("verify", home=path), 3, "ledger.jsonl", "holds seq 4 where seq 3 should be")


def test_jsonl_insertion(jsonl, run_cli):
    path, _ = jsonl
    lines = path.read_bytes().splitlines(keepends=True)
    prev = ledger.envelope.event_from_line(lines[2]).hash
    rewrite(path, lambda ls: ls[:3] + [forged_line(3, prev, "forged")] + ls[3:])
    assert_fails(run_cli("verify", home=path), 4, "ledger.jsonl", "holds seq 3 where seq 4 should be.*inserted")


def test_jsonl_reordering(jsonl, run_cli):
    path, _ = jsonl
    rewrite(path, lambda ls: ls[:2] + [ls[3], ls[2]] + ls[4:])
    assert_fails(run_cli("verify", home=path), 3, "ledger.jsonl", "holds seq 4 where seq 3 should be")


def test_jsonl_truncation_is_caught_by_the_published_head(jsonl, run_cli):
    path, head = jsonl
    rewrite(path, lambda ls: ls[:4])
    plain = run_cli("verify", home=path)
    assert plain.returncode == 0 and plain.stdout.startswith("head 4:")  # a shorter chain is still a chain
    result = run_cli("verify", "--expect-head", f"{head.seq}:{head.hash}", home=path)
    assert_fails(result, 5, "ledger.jsonl", "ends at seq 4, but head 6 was published.*truncated")


def test_jsonl_cut_mid_line(jsonl, run_cli):
    path, _ = jsonl
    path.write_bytes(path.read_bytes()[:-10])
    assert_fails(run_cli("verify", home=path), 6, "ledger.jsonl", "ends in the middle of a line")


def test_rewritten_history_is_caught_by_the_published_head(jsonl, run_cli, tmp_path):
    path, head = jsonl
    # The attacker edits seq 2 and recomputes every hash after it: the chain is valid again.
    events = list(ledger.open_ledger(path, readonly=True).read())
    prev, out = ledger.envelope.GENESIS_HASH, []
    for event in events:
        data = canonical_json({"author": None, "text": "rewritten"}) if event.seq == 2 else event.raw_data
        canonical = canonical_bytes(event.seq, event.id, event.stream, event.version, event.type,
                                    event.schema, data, event.raw_meta)
        hash = chain_hash(prev, canonical)
        out.append(line_bytes(canonical, prev, hash))
        prev = hash
    path.write_bytes(b"".join(out))
    assert run_cli("verify", home=path).returncode == 0
    result = run_cli("verify", "--expect-head", f"{head.seq}:{head.hash}", home=path)
    assert_fails(result, 6, "ledger.jsonl", "published head says .*rewritten")
    ok = run_cli("verify", "--expect-head", f"{head.seq}:{head.hash}", home=tmp_path / "other.jsonl")
    assert ok.returncode == 2  # no such ledger: a usage error, not a finding


def test_expect_head_accepts_a_prefix_of_a_grown_ledger(jsonl, run_cli):
    path, head = jsonl
    with ledger.open_ledger(path) as led:
        led.append(NewEvent("case:c", "note.added", {"text": "later"}))
    result = run_cli("verify", "--expect-head", f"{head.seq}:{head.hash}", home=path)
    assert result.returncode == 0 and "is a prefix of this ledger" in result.stdout
    assert run_cli("verify", "--expect-head", "6:nothex", home=path).returncode == 2
