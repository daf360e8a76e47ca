"""A replay source's index of recorded answers (``SourceIndex``): the same answers as the in-memory
``CallIndex`` kept, from a temporary file, with memory that does not grow with the source.

Real SQLite homes; the calls are recorded with the recording helpers the judge port uses.
"""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

from evalledger import ledger
from evalledger.stages.judge import recording
from evalledger.stages.judge.source_index import SourceIndex, source_index_for


def call(case: str, hash: str, attempt: int = 1, error: str | None = None, reply: str = "4",
         backend: str = "offline") -> ledger.NewEvent:
    """One recorded attempt of a judge call with a prompt long enough to be stored as a blob."""
    payload = {"role": "parse", "backend": backend, "model": "m", "request_hash": hash, "attempt": attempt,
               "error": error, "request": {"messages": [{"role": "user", "content": f"prompt {case} " * 60}]},
               "reply": None if error else {"values": {"result": reply}, "text": f"{reply} " * 200}}
    return recording.call_event(case, payload, 1, attempt)


def source_home(folder: Path, calls: int) -> Path:
    """A home recording ``calls`` successes (one request hash each), in batches."""
    ledger.init_home(folder)
    with ledger.open_ledger(folder) as led:
        for start in range(0, calls, 500):
            led.append([call(f"c{n}", f"{n:064x}") for n in range(start, min(calls, start + 500))])
    return folder


def held_by_index(home: Path, make) -> int:
    """Bytes of Python memory an index built by ``make(led)`` over ``home`` still holds once built."""
    with ledger.open_ledger(home, readonly=True) as led:
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            index = make(led)
            gc.collect()
            held = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        del index
        return held


def test_the_source_index_gives_the_answers_the_call_index_kept(tmp_path):
    home = tmp_path / "home"
    ledger.init_home(home)
    with ledger.open_ledger(home) as led:
        led.append([call("c1", "a" * 64, error="timeout"),            # a failure is never an answer
                    call("c1", "a" * 64, attempt=2, reply="first"),   # the first success is
                    call("c2", "a" * 64, reply="later"),
                    call("c3", "b" * 64, backend="openai")])
    with ledger.open_ledger(home, readonly=True) as led:
        kept = recording.CallIndex(led, keep_answers=True)
        kept.catch_up()
        index = SourceIndex(led)
        try:
            for hash in ("a" * 64, "b" * 64):
                mine, theirs = index.success(hash), kept.success(hash)
                assert (mine.id, mine.stream, mine.backend, mine.model) == (theirs.id, theirs.stream,
                                                                            theirs.backend, theirs.model)
                assert mine.answer == theirs.answer and "request" not in mine.answer.data
            assert index.success("a" * 64).answer.data["reply"]["values"] == {"result": "first"}
            assert index.success("c" * 64) is None
            assert index.seen_identities("parse") == kept.seen_identities("parse") == [("offline", "m"),
                                                                                       ("openai", "m")]
        finally:
            index.close()


def test_the_source_index_sees_calls_appended_after_it_was_built(tmp_path):
    home = tmp_path / "home"
    ledger.init_home(home)
    with ledger.open_ledger(home) as led:
        led.append([call("c1", "a" * 64)])
        index = source_index_for(led)
        assert index is source_index_for(led)   # one per source, shared by its ports
        assert index.success("b" * 64) is None
        led.append([call("c2", "b" * 64, reply="new")])
        assert index.success("b" * 64).answer.data["reply"]["values"] == {"result": "new"}


def test_the_source_index_holds_no_memory_per_recorded_call(tmp_path):
    # The in-memory index a replay used to build held every call's answer: its memory grew with the
    # source (a gigabyte at 100,000 cases). The source index's does not.
    small, large = source_home(tmp_path / "small", 300), source_home(tmp_path / "large", 3000)

    def built(led):
        index = SourceIndex(led)
        index.catch_up()
        return index

    def in_memory(led):
        index = recording.CallIndex(led, keep_answers=True)
        index.catch_up()
        return index

    assert held_by_index(large, in_memory) > 2_000_000       # what it would cost: ~1 KB a call
    assert held_by_index(large, built) < 200_000
    assert held_by_index(large, built) < held_by_index(small, built) + 100_000


def test_verify_remembers_a_bounded_number_of_checked_blobs():
    from evalledger.ledger.verify_blobs import RecentKeys
    recent = RecentKeys(most=3)
    for key in "abc":
        recent.add(key)
    recent.add("d")                  # a, b, c set aside
    assert "a" in recent             # found aside: remembered again
    for key in "efg":
        recent.add(key)              # d, a, e set aside; b and c are forgotten
    assert "a" in recent and "b" not in recent and "c" not in recent
    big = RecentKeys()
    for n in range(100_000):
        big.add(f"{n:064x}")
    assert big.remembered() <= 2 * big.most < 100_000


def test_a_read_of_large_events_holds_a_bounded_page_of_them(tmp_path):
    # A big benchmark's registration parts are large events: a page of 256 of them held tens of
    # megabytes at once (verify's peak at 100,000 cases). Pages now hold about 2 MB of payload.
    from evalledger.ledger import paging
    from evalledger.ledger import sqlite as store
    home = tmp_path / "home"
    ledger.init_home(home)
    with ledger.open_ledger(home) as led:
        led.append([ledger.NewEvent(f"big:{n}", "note.added", {"text": f"{n} " + "x" * 200_000},
                                    key=str(n)) for n in range(40)])
        led.append([ledger.NewEvent(f"small:{n}", "note.added", {"text": f"s{n}"}, key=str(n)) for n in range(600)])
        recorder = led.recorder
        pages = list(recorder._pages("", [], 1, None))
        sizes = [sum(len(row[6]) for row in page) for page in pages]
        assert sizes[0] <= paging.FIRST_PAGE * 200_100                   # a short first page
        assert max(sizes[1:]) <= paging.PAGE_BYTES + 200_100            # then about 2 MB a page
        assert [row[0] for page in pages for row in page] == list(range(1, 641))
        assert max(len(page) for page in pages) == store._PAGE   # small events: full pages again
        assert len(list(led.read())) == 640
