"""A rebuild reads its deep-judgment calls' request blobs a page at a time, and decodes their payload alone.

A deep-judgment call's read-model entry names the fields or traits it served, read from its
request's ``payload``; the request is one blob. The fold reads a page of rows ahead and fetches
those blobs in one query (``Ledger.preload``), then opens each asking for its last key only
(``Ledger.open(ref, last="payload")``, ``blobs.decode_last``). Real SQLite homes judged by the
offline judge; the SQL reaching the store is counted with SQLite's own trace hook.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalledger import ledger, projections
from evalledger.ledger.blobs import decode_last
from evalledger.ledger.envelope import canonical_json
from evalledger.projections import catch_up
from evalledger.projections.store import ReadModelStore
from evalledger.stages.dispatcher import RunSettings, run_until_idle
from evalledger.stages.intake import ingest_path
from evalledger.testing.arithmetic import arithmetic_benchmark
from test_projection_blob_reads import read_model_rows

QUESTIONS = 6   # 12 cases, 3 deep-judgment calls each


@pytest.fixture(scope="module")
def judged(tmp_path_factory) -> Path:
    """A home judged by the offline judge (deep judgment: every call's request is one blob)."""
    root = tmp_path_factory.mktemp("request-pages")
    source = root / "arith.json"
    source.write_text(json.dumps(arithmetic_benchmark(QUESTIONS, "arith")))
    with ledger.open_ledger(root / "home") as led:
        ingest_path(led, source)
        assert run_until_idle(led, RunSettings(judge_backend="offline")).judged == 2 * QUESTIONS
        projections.update(led)
    return root / "home"


def blob_queries(led: ledger.Ledger, run) -> list[str]:
    """The SQL statements on the table ``blobs`` that reach the store while ``run()`` runs."""
    seen: list[str] = []
    conn = led.recorder.conn
    conn.set_trace_callback(lambda sql: seen.append(sql) if "FROM blobs" in sql else None)
    try:
        run()
    finally:
        conn.set_trace_callback(None)
    return seen


def deep_requests(led: ledger.Ledger) -> int:
    """How many judge calls of the ledger are deep-judgment calls whose request is one blob."""
    rows = list(led.scan(1, led.head().seq, ["judge.called"], resolve=False, plain=True))
    return len(catch_up.request_keys(rows))


@pytest.mark.parametrize("page", [catch_up.PAGE, 7])
def test_a_rebuild_reads_a_pages_request_blobs_in_one_query(judged, monkeypatch, page):
    # One lookup a call was 8% of a judged home's rebuild. A page of 7 rows: many pages, and a
    # page whose calls' requests straddle its end; the read models are the same rows either way.
    before = read_model_rows(judged)
    monkeypatch.setattr(catch_up, "PAGE", page)
    with ledger.open_ledger(judged) as led:
        deep, events = deep_requests(led), led.head().seq
        assert deep == 6 * QUESTIONS
        queries = blob_queries(led, lambda: projections.rebuild(led))
    pages = -(-events // page)
    assert len(queries) <= min(deep, pages) and all(" IN (" in sql for sql in queries), queries
    assert read_model_rows(judged) == before


@pytest.mark.parametrize("damage", ["altered", "missing"])
def test_a_request_blob_that_was_altered_or_lost_still_stops_the_rebuild_naming_it(judged, tmp_path, damage):
    # A preloaded blob is checked when it is opened, as a blob read alone is: never folded wrong.
    conn = sqlite3.connect(judged / "ledger.db")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    home = Path(shutil.copytree(judged, tmp_path / "home", ignore=shutil.ignore_patterns("ledger.db-wal", "ledger.db-shm")))
    with ledger.open_ledger(home, readonly=True) as led:
        rows = list(led.scan(1, led.head().seq, ["judge.called"], resolve=False, plain=True))
        key = catch_up.request_keys(rows)[-1]
    conn = sqlite3.connect(home / "ledger.db")
    conn.execute("DROP TRIGGER blobs_refuse_update")
    conn.execute("DROP TRIGGER blobs_refuse_delete")
    if damage == "altered":
        conn.execute("UPDATE blobs SET data = ? WHERE key = ?", (zlib.compress(b'{"payload":{}}'), bytes.fromhex(key)))
    else:
        conn.execute("DELETE FROM blobs WHERE key = ?", (bytes.fromhex(key),))
    conn.commit()
    conn.close()
    done = subprocess.run([sys.executable, "-m", "evalledger", "--home", str(home), "rebuild"],
                          capture_output=True, text=True, timeout=120)
    reason = "does not hash to its key" if damage == "altered" else "is missing"
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert f"sha256:{key}" in done.stderr and reason in done.stderr, done.stderr


@pytest.mark.parametrize("text, fast", [
    (b'{"messages":[{"content":"x","role":"user"}],"payload":{"fields":[{"name":"n"}]}}', True),
    (b'{"payload":[1,2]}', True),                                         # the one key
    (b'{"payload":{"a":1},"zz":2}', False),                               # not the last key
    (b'{"a":{"b":1,"payload":2}}', False),                                # only a nested one
    (b'{"a":{"payload":2},"payload":{"payload":3}}', True),               # nested ones, not after a comma
    (b'{"a":1,"payload":{"b":1,"payload":3}}', False),                    # the last found is nested
    (b'{"a":"say ,\\"payload\\":{}","payload":5}', True),                 # one inside a string
    (b'{"a":"x\\",\\"payload\\":1}"}', False),                            # only one inside a string
    (b'{"$lit":{"messages":[],"payload":{"n":1}}}', False),               # escaped: one level deeper
    (b'{"messages":[],"payload":123456789012345678901234567890}', True),  # an integer past 64 bits
    (b'["payload",1]', False),
    (b'"payload"', False),
])
def test_the_last_key_is_decoded_alone_only_when_it_is_the_objects_last(text, fast):
    whole = json.loads(text)
    got = decode_last(text, "payload")
    assert got == ({"payload": whole["payload"]} if fast else whole)


_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-10 ** 30, max_value=10 ** 30) | st.text(max_size=12)
    | st.sampled_from([',"payload":', '"payload":{}', '{"payload":1}', "\\", '"']),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["payload", "messages", "a", "$lit", "zz"]), inner, max_size=4),
    max_leaves=20)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.sampled_from(["payload", "messages", "parameters", "zz", "$lit", "a"]), _VALUES, max_size=5))
def test_what_the_last_key_holds_is_what_the_whole_decode_holds(data):
    text = canonical_json(data)
    got = decode_last(text, "payload")
    assert got == data or got == {"payload": data["payload"]}
    assert got.get("payload") == data.get("payload")
    if data and max(data) == "payload" and b'"payload":' not in canonical_json(data["payload"]):
        assert got == {"payload": data["payload"]}   # the last key, none nested in it: decoded alone


def test_an_incremental_update_loads_the_cases_it_touches_in_one_query(tmp_path):
    # The fold's case preload (``_Folder.preload``) was shadowed by the blob preload for a while:
    # an update then looked each touched case up alone, one query a case.
    source = tmp_path / "second.json"
    source.write_text(json.dumps(arithmetic_benchmark(QUESTIONS, "second")))
    with ledger.open_ledger(tmp_path / "home") as led:
        ingest_path(led, tmp_path / "second.json")
        projections.update(led)                      # the cases opened, folded
        assert run_until_idle(led, RunSettings(judge_backend="offline")).judged == 2 * QUESTIONS
        store = ReadModelStore(led)
        seen: list[str] = []
        store.conn.set_trace_callback(lambda sql: seen.append(sql) if "SELECT case_id, state FROM proj_cases" in sql else None)
        try:
            result = catch_up.update(led, store)     # the run's events: 12 cases touched
        finally:
            store.conn.set_trace_callback(None)
            store.close()
    assert result.events > 2 * QUESTIONS and len(seen) == 1 and " IN (" in seen[0], seen
