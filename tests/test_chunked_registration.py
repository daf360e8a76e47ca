"""A large benchmark registers as bounded-size events, atomically, and folds as one benchmark."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from evalledger import ledger
from evalledger.projections.store import ReadModelStore
from evalledger.stages import intake_events as ev
from evalledger.stages.formats import parse
from evalledger.stages.intake import find_benchmark, registered_benchmarks

QUESTIONS = 2300


def _questions(count: int, padding: int = 0, changed: str | None = None) -> list[dict]:
    """``count`` template questions q0..; ``padding`` extra characters each; ``changed`` gets truth 99."""
    return [{"id": f"q{i}", "question": f"What is {i} plus one?" + " " * padding, "template": {"fields": [
        {"name": "value", "type": "int", "description": "The sum",
         "ground_truth": 99 if f"q{i}" == changed else i + 1,
         "verify_with": {"type": "NumericTolerance", "tolerance": 0, "mode": "absolute"}}]}}
        for i in range(count)]


def _write_benchmark(path: Path, count: int, padding: int = 0, changed: str | None = None) -> Path:
    path.write_text(json.dumps({"format": "evalledger/benchmark@1", "name": "big-sums",
                                "questions": _questions(count, padding, changed)}))
    return path


def _registration(led: ledger.Ledger) -> list[ledger.Event]:
    return list(led.read(types=["benchmark.registered", "benchmark.questions_added"]))


def test_a_large_benchmark_registers_as_parts_that_fold_to_one_benchmark(tmp_path, run_cli):
    home = tmp_path / "h"
    run_cli("init", home=home)
    source = _write_benchmark(tmp_path / "big.benchmark.json", QUESTIONS)
    assert run_cli("ingest", source, home=home).returncode == 0
    answers = tmp_path / "a.responses.jsonl"     # answers questions of the first and the last part
    answers.write_text("".join(json.dumps({"benchmark": "big-sums", "question_id": q, "model": "m",
                                           "text": f"It is {n}."}) + "\n"
                               for q, n in (("q0", 1), ("q1500", 1501), ("q2299", 2300))))
    ingested = run_cli("ingest", answers, home=home)
    assert ingested.returncode == 0, ingested.stdout + ingested.stderr
    assert run_cli("run", home=home).returncode == 0
    assert run_cli("report", home=home).returncode == 0
    status = run_cli("status", "--json", home=home)

    with ledger.open_ledger(home, readonly=True) as led:
        events = _registration(led)
        assert [e.type for e in events] == ["benchmark.registered"] + ["benchmark.questions_added"] * 2
        assert [e.seq for e in events] == list(range(events[0].seq, events[0].seq + 3))   # one batch
        assert [len(e.data["questions"]) for e in events] == [1000, 1000, 300]
        assert events[0].data["question_count"] == QUESTIONS and events[0].data["question_parts"] == 3
        [whole] = [e.data for e in registered_benchmarks(led)]
        assert [q["id"] for q in whole["questions"]] == [f"q{i}" for i in range(QUESTIONS)]
        assert "question_parts" not in whole
        assert find_benchmark(led, "big-sums") == whole
        judged = {e.data["case_id"]: e.data["verdict"] for e in led.read(types=["case.judged"])}
        assert len(judged) == 3 and set(judged.values()) == {"pass"}
        assert led.verify().ok
        store = ReadModelStore(led)
        try:
            [bench] = store.load_keyed("proj_benchmarks").values()
        finally:
            store.close()
    assert bench["question_count"] == QUESTIONS
    assert json.loads(status.stdout)["benchmarks"][0]["questions"] == QUESTIONS

    # a second version changed in its last part: the changes come from every part of both
    v2 = _write_benchmark(tmp_path / "big2.benchmark.json", QUESTIONS, changed="q2200")
    done = run_cli("ingest", v2, home=home)
    assert done.returncode == 0 and "version 2 of 'big-sums': 1 changed (q2200)" in done.stdout
    rebound = run_cli("rebind", "big-sums", home=home)     # every answered question is in some part of v2
    assert rebound.returncode == 0 and "3 new case(s)" in rebound.stdout, rebound.stdout + rebound.stderr

    # a replay copies the parts with their registration
    replayed = run_cli("replay", "--into", tmp_path / "r", home=home)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    with ledger.open_ledger(tmp_path / "r", readonly=True) as led:
        assert [len(e.data["questions"]) for e in registered_benchmarks(led)] == [QUESTIONS, QUESTIONS]


def test_parts_stay_under_the_byte_bound(tmp_path):
    questions = _questions(800, padding=3000)    # about 3 KB a question: the byte bound cuts first
    parsed_events = ev.registration_events(NewEventFor(questions))
    sizes = [len(json.dumps(e.data["questions"])) for e in parsed_events]
    assert len(parsed_events) == 3 and max(sizes) <= ev.PART_BYTES
    assert sum(len(e.data["questions"]) for e in parsed_events) == 800


def NewEventFor(questions: list[dict]) -> ledger.NewEvent:  # noqa: N802 (reads as a constructor)
    """The one-event registration of a benchmark with these questions, as intake builds it."""
    raw = json.dumps({"format": "evalledger/benchmark@1", "name": "big-sums", "questions": questions}).encode()
    parsed = parse(raw, "big.benchmark.json")
    return ev.registered(parsed.benchmark, {"file": "big.benchmark.json", "sha256": "0" * 64}, parsed.format,
                         ev.file_event_id("0" * 64))[1]


def test_an_old_home_with_one_big_event_folds_to_the_same_benchmark(tmp_path, run_cli):
    questions = _questions(QUESTIONS)
    old, new = tmp_path / "old", tmp_path / "new"
    for home in (old, new):
        run_cli("init", home=home)
    with ledger.open_ledger(old) as led:      # written as before parts existed: one event holds all
        led.append([NewEventFor(questions)])
    with ledger.open_ledger(new) as led:
        led.append(ev.registration_events(NewEventFor(questions)))
    states = []
    for home in (old, new):
        assert run_cli("report", home=home).returncode == 0
        with ledger.open_ledger(home, readonly=True) as led:
            store = ReadModelStore(led)
            states.append(([e.data for e in registered_benchmarks(led)], store.load_keyed("proj_benchmarks")))
            store.close()
    assert len(_types_of(new)) == 3 and len(_types_of(old)) == 1
    assert states[0] == states[1]


def _types_of(home: Path) -> list[str]:
    with ledger.open_ledger(home, readonly=True) as led:
        return [e.type for e in _registration(led)]


def test_a_crash_during_registration_leaves_all_parts_or_none(tmp_path):
    """SIGKILL an ingest of a many-part benchmark at growing delays: every home it leaves holds
    either no registration or the registration with all its parts, and verifies."""
    source = _write_benchmark(tmp_path / "big.benchmark.json", 3500, padding=300)
    script = ("import sys; from evalledger import ledger; from evalledger.stages.intake import ingest_path\n"
              "with ledger.open_ledger(sys.argv[1]) as led: ingest_path(led, sys.argv[2])\n")
    outcomes = set()
    delay = 0.3
    for attempt in range(8):
        home = ledger.init_home(tmp_path / f"h{attempt}")
        child = subprocess.Popen([sys.executable, "-c", script, str(home), str(source)],
                                 env={**os.environ, "PYTHONHASHSEED": "0"})
        time.sleep(delay)
        finished = child.poll() is not None
        if not finished:
            child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
        with ledger.open_ledger(home) as led:
            events = _registration(led)
            assert led.verify().ok
        if events:
            assert len(events) == events[0].data["question_parts"] and events[0].data["question_parts"] > 2
        outcomes.add("whole" if events else "none")
        if finished:
            break
        delay *= 1.8
    assert "whole" in outcomes


def _replay_peak(tmp_path: Path, name: str, count: int) -> int:
    """tracemalloc's peak while a home holding one benchmark of ``count`` questions is replayed."""
    import tracemalloc

    from evalledger.stages.intake import ingest_path
    from evalledger.stages.replaying import replay_into
    home = ledger.init_home(tmp_path / name)
    with ledger.open_ledger(home) as led:
        assert ingest_path(led, _write_benchmark(tmp_path / f"{name}.json", count, padding=200)).status == "accepted"
    tracemalloc.start()
    try:
        replay_into(home, tmp_path / f"{name}-replayed")
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_replay_copies_a_large_registration_in_one_transaction_without_holding_it_whole(tmp_path):
    small, large = _replay_peak(tmp_path, "small", 12000), _replay_peak(tmp_path, "large", 36000)
    # Holding every part (as one list of events) made the peak grow with the benchmark: 3x here.
    # Now a chunk of ~4 MB is held (the small registration is 5.4 MB of parts, the large 16 MB).
    assert large < 1.6 * small, f"replay peak {small / 1e6:.1f} MB -> {large / 1e6:.1f} MB for 3x the questions"
    with ledger.open_ledger(tmp_path / "large", readonly=True) as src, \
            ledger.open_ledger(tmp_path / "large-replayed", readonly=True) as dst:
        copied = _registration(dst)
        assert [e.seq for e in copied] == list(range(copied[0].seq, copied[0].seq + len(copied)))   # one batch
        assert [ledger.canonical_json(e.data) for e in copied] == [ledger.canonical_json(e.data)
                                                                  for e in _registration(src)]
