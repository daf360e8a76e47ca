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
from evalledger.testing.schema_instances import random_instance
from evalledger.testing.stand_in import StandIn, StandInThread, requested_schema
from postgres_support import fresh_store_url, postgres_home

REPO = Path(__file__).resolve().parents[1]
SAMPLES = [REPO / "benchmarks" / "samples" / name
           for name in ("pharmacology.benchmark.json", "pharmacology.gamma.responses.jsonl")]
TERMINAL = ("case.judged", "claim.scored", "credit.scored")


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


def ingested_store(tmp_path: Path, name: str) -> tuple[str, Path]:
    """A fresh store with the pharmacology samples ingested through a home of its own."""
    store = fresh_store_url()
    home = postgres_home(tmp_path / name, store)
    result = subprocess.run([sys.executable, "-m", "evalledger", "--home", str(home), "ingest", *map(str, SAMPLES)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return store, home


def outcomes(home: Path) -> Counter:
    """How many terminal events each case has."""
    with ledger.open_ledger(home, readonly=True) as led:
        return Counter(e.data["case_id"] for e in led.read(types=list(TERMINAL)))


def reports(run_cli, home: Path) -> dict:
    """The home's reports rebuilt from the store, with the head line (which differs) taken out."""
    result = run_cli("rebuild", home=home)
    assert result.returncode == 0, result.stderr
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


def test_four_workers_with_random_sigkills_judge_every_case_exactly_once(run_cli, tmp_path):
    with StandInThread(StandIn(delay=0.05, reply_fn=request_seeded_reply)) as server:
        store, home = ingested_store(tmp_path, "team")
        rng = random.Random(18)
        homes = [tmp_path / f"machine{n}" for n in range(4)]
        running = {n: worker(homes[n], store, server.base_url) for n in range(4)}
        kills = 0
        deadline = time.monotonic() + 150
        while running and time.monotonic() < deadline:
            time.sleep(rng.uniform(0.3, 0.9))
            for n, proc in list(running.items()):
                if proc.poll() is not None:
                    output = proc.stdout.read()
                    assert proc.returncode in (0, 1, -signal.SIGKILL), output
                    del running[n]
            if kills < 6 and running:
                victim = rng.choice(sorted(running))
                running[victim].send_signal(signal.SIGKILL)
                running[victim].wait()
                kills += 1
                running[victim] = worker(homes[victim], store, server.base_url)   # the machine restarts it
        for proc in running.values():
            proc.wait(timeout=120)
        assert kills == 6
        # a last worker finds nothing left, or finishes what the last kill left
        final = worker(homes[0], store, server.base_url)
        assert final.wait(timeout=120) in (0, 1), final.stdout.read()

        with ledger.open_ledger(home, readonly=True) as led:
            opened = {e.data["case_id"] for e in led.read(types=["case.opened"])}
            runs = {e.meta.get("run") for e in led.read(types=list(TERMINAL))}
            report = led.verify()
        assert len(runs) >= 3   # the cases were spread over several workers' runs
        assert report.ok, report.problems
        judged = outcomes(home)
        assert set(judged) == opened and set(judged.values()) == {1}, judged

        # the same cases judged by one worker alone give the same reports
        single_store, single_home = ingested_store(tmp_path, "alone")
        alone = worker(tmp_path / "alone-machine", single_store, server.base_url)
        assert alone.wait(timeout=180) in (0, 1), alone.stdout.read()
    assert reports(run_cli, home) == reports(run_cli, single_home)


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
