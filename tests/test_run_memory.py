"""What a run keeps per case (issue 15, flat memory): a reference per pending case rather than its
``case.opened`` event, the events read a page at a time as cases start, and a call index that does
not keep a seq for every event the run appends. Real homes, the offline judge."""

from __future__ import annotations

import gc
import json
import tracemalloc

from evalledger import ledger
from evalledger.ledger import NewEvent
from evalledger.stages.dispatcher import RunSettings, find_pending, run_until_idle
from evalledger.stages.intake import ingest_path
from evalledger.stages.judge.recorded_calls import known_index
from evalledger.stages.judge.spill_map import SpillMap
from evalledger.stages.pending import CaseRef, opened_events, scan_pending, watermarks_of
from evalledger.testing.arithmetic import arithmetic_benchmark


def judged_home(tmp_path, cases: int):
    """A home with ``cases`` arithmetic cases ingested (not judged yet)."""
    source = tmp_path / "bench.json"
    source.write_text(json.dumps(arithmetic_benchmark(cases // 2, "paged")))
    home = tmp_path / "home"
    with ledger.open_ledger(home) as led:
        ingest_path(led, source)
    return home


def test_a_run_keeps_a_reference_per_pending_case_and_reads_the_events_a_page_at_a_time(tmp_path):
    home = judged_home(tmp_path, 14)
    with ledger.open_ledger(home) as led:
        events = [opened for _, opened, _ in find_pending(led).cases]
        kept = scan_pending(led, False, None, True, None, lambda opened: CaseRef(opened.seq, opened.id,
                                                                                  opened.data["case_id"]))
        assert [ref for _, ref, _ in kept.cases] == [CaseRef(e.seq, e.id, e.data["case_id"]) for e in events]
        assert list(kept.configs.values()) == [{"deep_judgment_enabled": True}]   # one per distinct config
        # pages of 3 cases: every case once, in seq order, with its whole event
        paged = [opened for _, opened, _ in opened_events(led, kept.cases, page=3)]
        assert [(e.seq, e.data) for e in paged] == [(e.seq, e.data) for e in events]
        # a page that skips cases between its first and last seq (judged already) still finds its own
        assert [e.seq for _, e, _ in opened_events(led, kept.cases[::3], page=2)] == [e.seq for e in events[::3]]


def test_a_run_judges_every_case_once_and_its_call_index_keeps_no_seq_per_event(tmp_path):
    home = judged_home(tmp_path, 40)
    with ledger.open_ledger(home) as led:
        summary = run_until_idle(led, RunSettings(judge_backend="offline", max_cases_in_flight=4))
        assert (summary.cases, summary.judged, summary.failed) == (40, 40, 0)
        index = known_index(led)
        # the run's own events moved the index's position on instead of piling up one seq each
        assert index is not None and index.own_seqs == set()
        assert led.head().seq - index.last_seq <= 1   # at most run.completed, appended after the cases
        head = led.head()
        assert run_until_idle(led, RunSettings(judge_backend="offline")).cases == 0
        assert led.head() == head
        assert led.verify().ok


def test_a_runs_call_index_keeps_a_bounded_number_of_entries_in_memory_and_reuses_the_rest(tmp_path, monkeypatch):
    from evalledger.stages.judge import spill_map

    monkeypatch.setattr(spill_map, "SPILL_AT", 8)
    home = judged_home(tmp_path, 14)
    with ledger.open_ledger(home) as led:
        assert run_until_idle(led, RunSettings(judge_backend="offline", max_cases_in_flight=4)).cases == 14
        index = known_index(led)
        calls = [e for e in led.read(types=["judge.called"])]
        successes = {e.data["request_hash"] for e in calls if e.data.get("error") is None}
        assert len(index.successes.recent) < 8 and len(index.attempts.recent) < 8   # the rest in the file
        assert index.successes.keys() == successes
        spilled = next(h for h in successes if h not in index.successes.recent)
        found = index.success(spilled)
        assert found is not None and found.id in {e.id for e in calls}
        assert run_until_idle(led, RunSettings(judge_backend="offline")).cases == 0
        assert len(list(led.read(types=["judge.called"]))) == len(calls)   # nothing called twice


def test_a_spill_map_reads_back_what_it_wrote_to_its_file():
    from evalledger.stages.judge.spill_map import SpillMap

    m = SpillMap(limit=3)
    for i in range(10):
        m[("case:c", "judge", f"h{i}", 1)] = i
    m[("case:c", "judge", "h0", 1)] = 99   # a newer value overrides the spilled one
    assert len(m.recent) < 3 and m.get(("case:c", "judge", "h4", 1)) == 4
    assert m.get(("case:c", "judge", "h0", 1)) == 99 and ("x", "y", "z", 1) not in m
    assert sorted(m.values()) == [1, 2, 3, 4, 5, 6, 7, 8, 9, 99] and len(m) == 10
    m.close()


def test_the_spill_filter_never_forgets_a_spilled_key_and_turns_most_unknown_keys_away():
    from evalledger.stages.judge.spill_map import KeyFilter, SpillMap

    m = SpillMap(limit=50)
    keys = [("case:c%d" % i, "parse", f"{i:064x}", 1) for i in range(2_000)]   # spilled 40 times
    for i, key in enumerate(keys):
        m[key] = i
    assert m._filter is not None and m._filter.capacity >= m._spilled   # grown (rebuilt from the file) as it filled
    assert all(m.get(key) == i for i, key in enumerate(keys))           # no false negative
    unknown = [("case:x%d" % i, "parse", f"{i:064x}", 1) for i in range(2_000)]
    assert all(m.get(key) is None for key in unknown)
    assert sum(m._filter.might_hold(key) for key in unknown) < 40      # ~1 in 200 expected
    small = KeyFilter(10)
    small.add("only")
    assert small.might_hold("only") and not small.might_hold("other")
    m.close()


def test_a_call_index_looks_again_only_when_catching_up_read_something(tmp_path):
    from evalledger.ledger import NewEvent
    from evalledger.stages.judge.recording import index_for

    home = judged_home(tmp_path, 2)
    with ledger.open_ledger(home) as led:
        run_until_idle(led, RunSettings(judge_backend="offline"))
        index = index_for(led)
        assert index.catch_up() is False                    # nothing new: the head alone tells
        assert index.success("f" * 64) is None
        call = next(led.read(types=["judge.called"]))
        with ledger.open_ledger(home) as other:             # another writer records a new success
            data = {**call.data, "request_hash": "e" * 64, "case_id": "zz"}
            other.append(NewEvent("case:zz", "judge.called", data, key="judge:x:e:1:1"))
        found = index.success("e" * 64)                     # read on the miss, then found
        assert found is not None and found.stream == "case:zz"
        assert index.catch_up() is False


def kept_by_a_scan(tmp_path, cases: int) -> int:
    """Bytes a run's scan keeps (its pending cases and their watermarks) over ``cases`` new cases."""
    (tmp_path / f"n{cases}").mkdir()
    home = judged_home(tmp_path / f"n{cases}", cases)
    with ledger.open_ledger(home) as led:
        tracemalloc.start()
        try:
            pending = scan_pending(led, False, None, True, None, None)
            marks = watermarks_of(led, pending)
            gc.collect()   # kept, not garbage a collection would free (it varied 10-72 bytes a case)
            kept, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert len(pending.cases) == cases and len(marks.open["template"]) == cases
    return kept


def test_a_runs_scan_keeps_a_few_bytes_per_pending_case(tmp_path):
    # A (stage, CaseRef, failures) tuple and a set and heap entry cost ~400 bytes a case: 40 MB of
    # a 100,000-case run's peak. Now an 8-byte key and a 9-byte watermark entry (plus slack).
    small, large = kept_by_a_scan(tmp_path, 400), kept_by_a_scan(tmp_path, 1200)
    assert (large - small) / 800 < 48, f"{(large - small) / 800:.0f} bytes kept per pending case"


def test_a_runs_pending_cases_come_in_seq_order_with_their_stage_and_failures(tmp_path):
    home = judged_home(tmp_path, 12)
    with ledger.open_ledger(home) as led:
        events = [opened for _, opened, _ in find_pending(led).cases]
        led.append(NewEvent(f"case:{events[3].data['case_id']}", "stage.failed",
                            {"case_id": events[3].data["case_id"], "stage": "template", "reason": "x", "failure": 1},
                            key="template:failed:1"))
        compact = scan_pending(led, True, None, True, None, None)
        assert [(s.name, seq, f) for s, seq, f in compact.cases] == [
            ("template", e.seq, 1 if i == 3 else 0) for i, e in enumerate(events)]
        assert [e.seq for _, e, _ in opened_events(led, compact.cases, page=5)] == [e.seq for e in events]
        assert len(scan_pending(led, False, None, True, None, None).cases) == 11   # the failed one is not retried


def test_a_ledgers_write_caches_stay_bounded_however_many_streams_a_run_writes(tmp_path):
    # The stream versions and the known blob keys: one entry per case stream and per answer, which
    # reached 100,000 entries (~30 MB) in a 100,000-case run before they were cleared.
    from evalledger.ledger import blobs

    with ledger.open_ledger(tmp_path / "home") as led:
        for at in range(0, 12_000, 1_000):
            led.append([NewEvent(f"case:c{i}", "judge.called",
                                 {"role": "parse", "backend": "offline", "model": "m", "request_hash": f"{i:064x}",
                                  "attempt": 1, "raw_response": f"answer {i} " + "x" * blobs.MIN_STRING},
                                 key=f"c{i}") for i in range(at, at + 1_000)])
        recorder = led.recorder
        # cleared once past 10,000: the last batch's 1,000 are what is left (12,000 were kept before)
        assert len(recorder._versions) <= 11_000 and len(recorder._known_blobs) <= 11_000
        assert led.verify().ok


def test_a_reader_in_another_thread_during_the_first_spill_never_sees_a_half_made_map():
    """The first spill counted the file's keys before it built their filter: a get() from another
    thread between the two raised AttributeError ('NoneType' ... 'might_hold'), which CI saw as a
    PostgreSQL worker's case failing. Readers spin while maps fill and spill for the first time."""
    import threading
    import time
    errors: list[BaseException] = []
    stop = threading.Event()
    current: list[SpillMap] = [SpillMap(limit=50)]

    def read() -> None:
        while not stop.is_set():
            try:
                current[0].get(("absent", 1))
            except BaseException as exc:  # noqa: BLE001 - any of them is the finding
                errors.append(exc)
                return
            time.sleep(0)   # hand the GIL back: a reader that never does starves the filling thread (277 s in CI)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for round_ in range(300):
            fresh = SpillMap(limit=50)
            current[0] = fresh
            for i in range(120):
                fresh[(round_, i)] = i
            if errors:
                break
    finally:
        stop.set()
        reader.join()
    assert errors == []
