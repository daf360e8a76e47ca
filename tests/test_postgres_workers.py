"""Many ``evalledger run`` workers (real processes, each with its own home as on its own machine)
sharing one PostgreSQL store: leases split the cases, SIGKILLed workers' cases go to others, and
the outcome equals a single worker's.

Needs a server: EVALLEDGER_TEST_PG (``eval "$(bash .ci/start-postgres)"``).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from evalledger import ledger
from evalledger.ledger.leases import Leases
from evalledger.ledger.postgres import connect, split_store_url
from evalledger.stages.intake import ingest_path
from evalledger.testing.schema_instances import random_instance
from evalledger.testing.stand_in import StandIn, StandInThread, requested_schema
from postgres_support import fresh_store_url, postgres_home

REPO = Path(__file__).resolve().parents[1]
SAMPLES = [REPO / "benchmarks" / "samples" / name
           for name in ("pharmacology.benchmark.json", "pharmacology.gamma.responses.jsonl")]
TERMINAL = ("case.judged", "claim.scored", "credit.scored")
GENERATED_CASES = 80   # a generated benchmark: 40 questions, answered by two models
# The issue asks 2,000 cases and >= 10 kills: with the group commit 4 workers judge them in about
# 20 s on a quiet 2-core machine (the whole test, single-worker comparison included, ~55 s).
GENERATED_BENCHMARKS = 25   # + the 42 sample cases: 2,042 cases (the issue asks 2,000)
KILLS = 10


def request_seeded_reply(body: dict) -> object:
    """A schema instance chosen by the request itself: the same request always gets the same reply,
    whichever worker sends it and in whatever order (so runs can be compared)."""
    seed = hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).hexdigest()
    schema = requested_schema(body)
    return random_instance(schema, random.Random(seed)) if schema else {}


def worker(home: Path, store: str, base_url: str, lease: float = 1.5, concurrency: int = 4,
           *extra: str) -> subprocess.Popen:
    """One ``evalledger run`` process on its own home bound to ``store`` (``extra``: more run options)."""
    env = {"OPENAI_BASE_URL": base_url, "OPENAI_MODEL": "stand-in", "OPENAI_API_KEY": "test-key"}
    return subprocess.Popen([sys.executable, "-m", "evalledger", "--home", str(home), "--store", store, "run",
                             "--judge", "openai", "--quiet", "--concurrency", str(concurrency),
                             "--lease-seconds", str(lease), *extra],
                            env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def generated_benchmark(i: int) -> bytes:
    """A template benchmark of GENERATED_CASES cases whose responses all differ (so no two cases
    send the same judge request: which of two twins pays for it depends on timing)."""
    questions, responses = [], []
    for q in range(GENERATED_CASES // 2):
        answer = 1000 * i + q
        questions.append({"id": f"q{q}", "question": f"What is {answer} written as digits?",
                          "template": {"fields": [{"name": "value", "type": "int", "description": "The number",
                                                   "ground_truth": answer, "verify_with": {"type": "NumericExact"}}]}})
        for model in ("model-a", "model-b"):
            given = answer + (q % 3 == 0)
            responses.append({"question_id": f"q{q}", "model": model, "text": f"{model} says {given}."})
    return json.dumps({"format": "evalledger/benchmark@1", "name": f"generated-{i}", "questions": questions,
                       "responses": responses}).encode()


def ingested_store(tmp_path: Path, name: str, generated: int = 0) -> tuple[str, Path]:
    """A fresh store with the pharmacology samples (42 cases) and ``generated`` benchmarks of
    ``GENERATED_CASES`` cases each ingested (through the intake API) by a home of its own."""
    store = fresh_store_url()
    home = postgres_home(tmp_path / name, store)
    files = list(SAMPLES)
    for i in range(generated):
        files.append(tmp_path / f"{name}-generated-{i}.json")
        files[-1].write_bytes(generated_benchmark(i))
    with ledger.open_ledger(home) as led:
        for path in files:
            assert ingest_path(led, path).status == "accepted", path
    return store, home


def outcomes(home: Path) -> Counter:
    """How many terminal events each case has."""
    with ledger.open_ledger(home, readonly=True) as led:
        return Counter(e.data["case_id"] for e in led.read(types=list(TERMINAL)))


def rebuilt(*homes: Path) -> None:
    """``evalledger rebuild`` on every home at once (each its own process)."""
    procs = [subprocess.Popen([sys.executable, "-m", "evalledger", "--home", str(home), "rebuild"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for home in homes]
    for proc in procs:
        assert proc.wait(timeout=120) == 0, proc.stdout.read()


def reports(home: Path) -> dict:
    """The home's reports (rebuilt), with the head line (which differs) taken out."""
    out: dict = {}
    for path in sorted((home / "reports").rglob("*")):
        if not path.is_file():
            continue
        name = str(path.relative_to(home / "reports"))
        if path.suffix == ".json":
            stats = json.loads(path.read_text())
            stats.pop("ledger_head")
            out[name] = stats
        else:
            out[name] = [line for line in path.read_text().splitlines() if "Built from ledger head" not in line]
    return out


def lease_holders(store: str) -> dict[int, str]:
    """Process id -> run id of the workers holding unexpired leases (a lease's owner is host:pid:run)."""
    url, schema = split_store_url(store)
    conn = connect(url)
    try:
        if conn.execute("SELECT to_regclass(%s)", (f"{schema}.claims",)).fetchone()[0] is None:
            return {}
        rows = conn.execute(f"SELECT DISTINCT owner FROM {schema}.claims WHERE expires_at > now()").fetchall()
    finally:
        conn.close()
    return {int(owner.split(":")[1]): owner.split(":")[2] for (owner,) in rows if owner.count(":") >= 2}


def runs_with_outcomes(home: Path) -> set[str]:
    """The runs that committed at least one case's outcome."""
    with ledger.open_ledger(home, readonly=True) as led:
        return {e.meta.get("run") for e in led.read(types=list(TERMINAL))}


def judged_count(home: Path) -> int:
    """How many terminal events the store holds now."""
    with ledger.open_ledger(home, readonly=True) as led:
        return sum(1 for _ in led.read(types=list(TERMINAL)))


def unjudged(home: Path, cases: set[str], exits: list[tuple[int, str]], late: int) -> str:
    """What a failure message needs: the events of the cases left without an outcome (a
    ``stage.failed`` says why), how every worker ended, and how many were still running when the
    loop's deadline passed (``late``)."""
    lines = [f"{len(cases)} case(s) without an outcome; {late} worker(s) still running at the loop's deadline"]
    with ledger.open_ledger(home, readonly=True) as led:
        for case_id in sorted(cases):
            for event in led.read(stream=f"case:{case_id}"):
                lines.append(f"  {case_id} seq {event.seq} {event.type} run={event.meta.get('run')} "
                             f"{event.data.get('reason', '')}")
    lines += [f"worker exit {code}: {output.strip()[-600:]}" for code, output in exits]
    return "\n".join(lines)


def add_generated(home: Path, folder: Path, i: int) -> None:
    """Ingest generated benchmark ``i`` into the store through ``home`` (more work for the workers)."""
    path = folder / f"more-generated-{i}.json"
    path.write_bytes(generated_benchmark(i))
    with ledger.open_ledger(home) as led:
        assert ingest_path(led, path).status == "accepted", path


def test_four_workers_with_random_sigkills_judge_every_case_exactly_once(tmp_path):
    with StandInThread(StandIn(delay=0.05, reply_fn=request_seeded_reply)) as server:
        store, home = ingested_store(tmp_path, "team", GENERATED_BENCHMARKS)
        generated = GENERATED_BENCHMARKS
        rng = random.Random(18)
        homes = [tmp_path / f"machine{n}" for n in range(4)]
        running = {n: worker(homes[n], store, server.base_url) for n in range(4)}
        kills, judged_at_kills = 0, []
        exits: list[tuple[int, str]] = []   # every worker that ended: (exit code, output)
        deadline = time.monotonic() + 150
        while running and time.monotonic() < deadline:
            time.sleep(rng.uniform(0.2, 0.6))
            for n, proc in list(running.items()):
                if proc.poll() is not None:
                    output = proc.stdout.read()
                    exits.append((proc.returncode, output))
                    assert proc.returncode in (0, 1, -signal.SIGKILL), output
                    del running[n]
                    if kills < KILLS:   # kills are still owed: the machine starts another run
                        running[n] = worker(homes[n], store, server.base_url)
            # Faster workers could finish before every kill landed: while kills are owed and little
            # work is left, another benchmark arrives (the single-worker run below gets it too).
            if kills < KILLS and judged_count(home) > 42 + generated * GENERATED_CASES - 40:
                add_generated(home, tmp_path, generated)
                generated += 1
            # The victim holds leases and has committed outcomes in this run: it is in the middle
            # of judging (killing a worker still starting up tests little).
            holders, productive = lease_holders(store), runs_with_outcomes(home)
            busy = sorted(n for n, proc in running.items() if holders.get(proc.pid) in productive)
            if kills < KILLS and busy:
                victim = rng.choice(busy)
                running[victim].send_signal(signal.SIGKILL)
                running[victim].wait()
                kills += 1
                judged_at_kills.append(judged_count(home))
                running[victim] = worker(homes[victim], store, server.base_url)   # the machine restarts it
        late = len(running)   # not 0 when the loop's deadline passed (a slow machine): these end on their own
        for proc in running.values():
            proc.wait(timeout=120)
            exits.append((proc.returncode, proc.stdout.read()))
            assert proc.returncode in (0, 1), exits[-1]
        with ledger.open_ledger(home, readonly=True) as led:
            opened = {e.data["case_id"] for e in led.read(types=["case.opened"])}
        assert kills == KILLS
        assert judged_at_kills[-1] < len(opened)   # every kill hit workers with cases left to judge
        with ledger.open_ledger(home, readonly=True) as led:
            runs = {e.meta.get("run") for e in led.read(types=list(TERMINAL))}
            report = led.verify()
        assert len(opened) == 42 + generated * GENERATED_CASES
        assert len(runs) >= KILLS + 1   # every killed run committed outcomes, and so did others
        assert report.ok, report.problems
        judged = outcomes(home)
        assert set(judged) == opened and set(judged.values()) == {1}, unjudged(home, opened - set(judged), exits, late)

        # A last worker finds nothing left; meanwhile the same cases are judged by one worker alone,
        # in a store of their own (replies depend on the request only, so this judge needs no delay).
        with StandInThread(StandIn(reply_fn=request_seeded_reply)) as quick:
            final = worker(homes[0], store, server.base_url)
            single_store, single_home = ingested_store(tmp_path, "alone", generated)
            alone = worker(tmp_path / "alone-machine", single_store, quick.base_url, 30, 8)
            assert alone.wait(timeout=180) in (0, 1), alone.stdout.read()
            assert final.wait(timeout=120) == 0, final.stdout.read()
        assert "nothing pending" in final.stdout.read()
        assert outcomes(home) == judged
    rebuilt(home, single_home)
    assert reports(home) == reports(single_home)   # the same reports, apart from the head


def test_leases_are_exclusive_expire_without_heartbeat_and_skip_locked_rows(tmp_path):
    store = fresh_store_url()
    postgres_home(tmp_path / "h", store)
    url, schema = split_store_url(store)
    a = Leases(lambda: connect(url), schema, "a", seconds=0.6)
    b = Leases(lambda: connect(url), schema, "b", seconds=0.6)
    try:
        works = [f"template:{n}" for n in range(10)]
        got_a = a.claim(works, 4)
        got_b = b.claim(works, 100)
        assert len(got_a) == 4 and len(got_b) == 6 and not set(got_a) & set(got_b)
        assert b.claim(works, 100) == []
        time.sleep(1.5)           # a heartbeats every 0.2 s: its leases hold
        assert b.claim(works, 100) == []
        a._stop.set()
        a._beat.join()            # a dies (no more heartbeats): its leases lapse
        time.sleep(1.0)
        assert sorted(b.claim(works, 100)) == sorted(got_a)
        b.release(got_b[0])
        assert a.claim(works, 100) == [got_b[0]]
    finally:
        a.close()
        b.close()


def test_a_sqlite_home_has_no_leases(tmp_path):
    with ledger.open_ledger(tmp_path / "h") as led:
        assert led.leases("me", 30) is None


@pytest.fixture(autouse=True)
def _server_needed():
    from postgres_support import pg_url
    pg_url()


def test_a_judge_call_one_worker_recorded_is_reused_by_another(tmp_path):
    """Machine A judges a response; machine B, another home on the same store, judges another
    model's identical response: the request is the same, so B answers it from A's recorded call
    (a ``judge.called`` naming A's event) and the judge server hears nothing more."""
    with StandInThread(StandIn(reply_fn=request_seeded_reply)) as server:
        store = fresh_store_url()
        first = tmp_path / "first.json"
        first.write_bytes(generated_benchmark(7))
        home = postgres_home(tmp_path / "shell", store)
        with ledger.open_ledger(home) as led:
            assert ingest_path(led, first).status == "accepted"
        a = worker(tmp_path / "machine-a", store, server.base_url)
        assert a.wait(timeout=120) in (0, 1), a.stdout.read()
        asked = len(server.requests)
        assert asked > 0
        doc = json.loads(generated_benchmark(7))
        again = tmp_path / "again.jsonl"   # model-c says exactly what model-a said, question by question
        again.write_text("".join(json.dumps({"benchmark": doc["name"], "question_id": r["question_id"],
                                             "model": "model-c", "text": r["text"]})
                                 + "\n" for r in doc["responses"] if r["model"] == "model-a"))
        with ledger.open_ledger(home) as led:
            assert ingest_path(led, again).status == "accepted"
        b = worker(tmp_path / "machine-b", store, server.base_url)
        assert b.wait(timeout=120) in (0, 1), b.stdout.read()
    with ledger.open_ledger(home, readonly=True) as led:
        opened = {e.data["case_id"]: e.data["model"] for e in led.read(types=["case.opened"])}
        calls = [e for e in led.read(types=["judge.called"]) if opened.get(e.stream[5:]) == "model-c"]
        judged = [e for e in led.read(types=["case.judged"]) if opened.get(e.data["case_id"]) == "model-c"]
    assert len(judged) == len(doc["questions"])
    assert calls and all(e.data.get("source_event") for e in calls)
    assert len(server.requests) == asked       # machine B sent nothing: every call was A's, reused
