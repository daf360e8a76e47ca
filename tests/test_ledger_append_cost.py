"""What keeps an append cheap without changing what it stores: the write-ahead log checkpointed
every 10,000 pages, and the versions of a batch's uncached streams read in one query. Real homes."""

from __future__ import annotations

import sqlite3

from evalledger import ledger
from evalledger.ledger import NewEvent
from evalledger.ledger.sqlite_schema import WAL_AUTOCHECKPOINT

PAGE = 4096


def note(stream: str, text: str, key: str) -> NewEvent:
    """A note event with an idempotency key."""
    return NewEvent(stream, "note.added", {"text": text}, key=key)


def test_the_log_is_checkpointed_only_past_ten_thousand_pages_and_removed_at_close(tmp_path):
    # More than SQLite's default 1,000 pages of log, fewer than the ledger's 10,000: no checkpoint
    # has copied them into ledger.db yet, every event reads back, and closing leaves no log behind.
    home = tmp_path / "home"
    text = "x" * 3000
    with ledger.open_ledger(home) as led:
        for at in range(0, 1600, 100):
            led.append([note(f"case:{i % 50}", f"{text} {i}", f"k{i}") for i in range(at, at + 100)])
        wal = (home / "ledger.db-wal").stat().st_size
        assert 1_000 * PAGE < wal < WAL_AUTOCHECKPOINT * (PAGE + 24) + 32
        conn = sqlite3.connect(f"file:{home / 'ledger.db'}?mode=ro", uri=True)
        assert conn.execute("SELECT count(*) FROM events").fetchone() == (1600,)
        conn.close()
    assert not (home / "ledger.db-wal").exists()
    with ledger.open_ledger(home, readonly=True) as led:
        assert led.head().seq == 1600
        assert led.verify().ok


def test_a_batch_on_streams_another_writer_made_gets_their_next_versions(tmp_path):
    # A new writer knows no stream's version: a batch over 1,200 streams (two lookups of 500 and
    # one of 200) that one writer made, plus new streams, continues each stream where it was.
    home = tmp_path / "home"
    with ledger.open_ledger(home) as first:
        first.append([note(f"case:s{i}", "one", f"a{i}") for i in range(1200)])
        first.append([note(f"case:s{i}", "two", f"b{i}") for i in range(0, 1200, 3)])
    with ledger.open_ledger(home) as second:
        stored = second.append([note(f"case:s{i}", "next", f"c{i}") for i in range(1200)]
                               + [note(f"case:new{i}", "first", f"d{i}") for i in range(3)])
        want = [3 if i % 3 == 0 else 2 for i in range(1200)] + [1, 1, 1]
        assert [e.version for e in stored] == want
        assert second.stream_version("case:s3") == 3 and second.stream_version("case:new0") == 1
        assert second.verify().ok
