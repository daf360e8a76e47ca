"""Second processes racing the first, on every store form: a default home, a ``--mirror gzip --rows
compact`` home, and (where the command takes one) a PostgreSQL store.

Real CLI subprocesses started together with small seeded delays: ``ingest`` of two benchmarks that
share questions racing two ``run``s; ``run`` racing ``verify`` and ``report``; ``watch --once``
racing ``ingest``. Then two writers appending judge calls that share their prompts (so both insert
the same blob keys at once) through the Python API, in threads and in processes; and readers
verifying while a writer holds a transaction open. Afterwards the ledger must verify, hold no event
twice (by id, by stream and version), judge every case exactly once (as a home judged by one
process does), and keep a mirror holding exactly the table's events in seq order with every blob
line they need; readers never crash.

Run as a script, this file is the writer process of the Python API races:
``python test_qa_store_forms_races.py HOME CALLS.json WORKER COUNT [--slow SECONDS]``.
"""

from __future__ import annotations

import gzip
import json
import random
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from evalledger import ledger
from evalledger.ledger import NewEvent

HERE = Path(__file__).resolve()
FORMS = ["default", "gzip-compact", "postgres"]
# One seed a form (the delays differ from form to form), so the suite stays seconds a test.
SEEDS = {"default": 3, "gzip-compact": 11, "postgres": 29}
QUESTIONS = (3, 4)   # benchmark "a" has q0-q2, "b" q0-q3: the first three questions are the same text


# --- homes and benchmarks ---------------------------------------------------------------------------
def make_home(form: str, path: Path) -> Path:
    """An empty home of ``form``, made as a user would (``init``; PostgreSQL through ``--store``)."""
    if form == "postgres":
        from postgres_support import fresh_store_url
        made = cli("init", home=path, env={"EVALLEDGER_STORE": fresh_store_url()})
    elif form == "gzip-compact":
        made = cli("init", "--mirror", "gzip", "--rows", "compact", home=path)
    else:
        made = cli("init", home=path)
    assert made.returncode == 0, made.stdout + made.stderr
    return path


def benchmark_files(folder: Path) -> list[Path]:
    """Two arithmetic benchmarks (different names) whose first questions are the same text."""
    from evalledger.testing.arithmetic import arithmetic_benchmark
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for name, questions in zip("ab", QUESTIONS):
        path = folder / f"{name}.benchmark.json"
        path.write_text(json.dumps(arithmetic_benchmark(questions, f"race-{name}")))
        files.append(path)
    return files


def cli(*args: object, home: Path | None = None, env: dict | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess:
    """``evalledger`` in a subprocess (the conftest helper, imported late so the script form needs no pytest)."""
    from conftest import cli as run
    return run(*[str(a) for a in args], home=home, env=env, timeout=timeout)


# --- racing ---------------------------------------------------------------------------------------
def race(home: Path, seed: int, *commands: tuple[str, ...]) -> list[tuple[tuple[str, ...], int, str, str]]:
    """Start every command as ``evalledger --home HOME ...`` at once, each after a small delay drawn
    from ``seed``; wait for all; (command, exit code, stdout, stderr) of each."""
    rng = random.Random(seed)
    delays = sorted((rng.uniform(0, 0.3), i) for i in range(len(commands)))
    procs: dict[int, subprocess.Popen] = {}
    started = time.monotonic()
    for delay, i in delays:
        time.sleep(max(0.0, started + delay - time.monotonic()))
        procs[i] = subprocess.Popen([sys.executable, "-m", "evalledger", "--home", str(home), *commands[i]],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    done = []
    for i, command in enumerate(commands):
        out, err = procs[i].communicate(timeout=180)
        done.append((command, procs[i].returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")))
    return done


def assert_no_crash(results: list[tuple[tuple[str, ...], int, str, str]]) -> None:
    """Every process exited 0 (a reader may instead say the home is busy), none printed a traceback."""
    for command, code, out, err in results:
        assert "Traceback" not in out + err, f"{command} crashed:\n{out}\n{err}"
        assert code == 0 or "busy" in (out + err).lower(), f"{command} exited {code}:\n{out}\n{err}"


# --- what the ledger must hold afterwards -----------------------------------------------------------
def all_events(home: Path) -> list[ledger.Event]:
    with ledger.open_ledger(home, readonly=True) as led:
        return list(led.read())


def judged_counts(events: list[ledger.Event]) -> Counter:
    """(type, stream) -> how many, for the judge's calls and the cases' verdicts."""
    return Counter((e.type, e.stream) for e in events if e.type in ("judge.called", "case.judged"))


def assert_sound(home: Path, form: str) -> list[ledger.Event]:
    """``verify`` passes; seq is gapless; no id and no (stream, version) twice; the mirror holds the
    table's events in seq order, each blob line before the first event that uses it."""
    checked = cli("verify", home=home)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    events = all_events(home)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert len({e.id for e in events}) == len(events), "an event id is stored twice"
    assert len({(e.stream, e.version) for e in events}) == len(events), "a stream version is stored twice"
    if form != "postgres":
        assert_mirror(home, form, events)
    return events


def assert_mirror(home: Path, form: str, events: list[ledger.Event]) -> None:
    """The plain or compressed mirror's event lines are the table's, in order; each blob an event
    refers to has a line before it (in ``events.jsonl.blobs`` or inside the compressed file)."""
    if form == "gzip-compact":
        lines = gzip.decompress((home / "events.jsonl.gz").read_bytes()).splitlines(keepends=True)
    else:
        lines = (home / "events.jsonl.blobs").read_bytes().splitlines(keepends=True)
        lines += (home / "events.jsonl").read_bytes().splitlines(keepends=True)
    blobs_seen: set[str] = set()
    event_lines = []
    for line in lines:
        record = json.loads(line)
        if "blob" in record and "seq" not in record:
            blobs_seen.add(record["blob"])
            continue
        for key in blob_refs(record["data"]):
            assert key in blobs_seen, f"seq {record['seq']} refers to blob {key} that no line before it holds"
        event_lines.append(line)
    assert event_lines == [e.line() for e in events]


def blob_refs(value: object) -> list[str]:
    """The blob keys a stored payload refers to (``{"$blob": "sha256:<key>"}``)."""
    if isinstance(value, dict):
        if set(value) == {"$blob"}:
            return [str(value["$blob"]).removeprefix("sha256:")]
        return [key for part in value.values() for key in blob_refs(part)]
    if isinstance(value, list):
        return [key for part in value for key in blob_refs(part)]
    return []


@pytest.fixture(scope="module")
def judged_home(tmp_path_factory) -> Path:
    """A default home holding both benchmarks, ingested then judged by one process each."""
    root = tmp_path_factory.mktemp("reference")
    home = make_home("default", root / "home")
    for args in (("ingest", *benchmark_files(root / "files")), ("run", "--judge", "offline")):
        done = cli(*args, home=home)
        assert done.returncode == 0, done.stdout + done.stderr
    return home


@pytest.fixture(scope="module")
def reference(judged_home) -> Counter:
    """Judge calls and verdicts per case of the home judged with nobody racing it."""
    counts = judged_counts(all_events(judged_home))
    assert counts and all(n >= 1 for n in counts.values())
    return counts


@pytest.fixture(scope="module")
def calls_file(judged_home) -> Path:
    """The payloads of the judged home's ``judge.called`` events, in a JSON file (their prompts repeat)."""
    with ledger.open_ledger(judged_home, readonly=True) as led:
        calls = [e.data for e in led.read(types=["judge.called"])]
    path = judged_home.parent / "calls.json"
    path.write_text(json.dumps(calls))
    return path


def finish_and_count(home: Path, form: str) -> Counter:
    """Judge what the race left unjudged (a run that started before an ingest), check the home is
    sound, and count judge calls and verdicts per case."""
    done = cli("run", "--judge", "offline", home=home)
    assert done.returncode == 0, done.stdout + done.stderr
    return judged_counts(assert_sound(home, form))


# --- 1. CLI processes racing ------------------------------------------------------------------------
@pytest.mark.parametrize("form", FORMS)
def test_two_ingests_and_two_runs_at_once_judge_every_case_once(form, tmp_path, reference):
    home = make_home(form, tmp_path / "home")
    a, b = benchmark_files(tmp_path / "files")
    results = race(home, SEEDS[form], ("ingest", a), ("ingest", b), ("run", "--judge", "offline", "--quiet"),
                   ("run", "--judge", "offline", "--quiet"))
    assert_no_crash(results)
    assert finish_and_count(home, form) == reference


@pytest.mark.parametrize("form", FORMS)
def test_verify_and_report_while_a_run_appends(form, tmp_path, reference):
    home = make_home(form, tmp_path / "home")
    done = cli("ingest", *benchmark_files(tmp_path / "files"), home=home)
    assert done.returncode == 0, done.stdout + done.stderr
    results = race(home, SEEDS[form], ("run", "--judge", "offline", "--quiet"), ("verify",), ("report",), ("verify",))
    assert_no_crash(results)
    for command, _, out, err in results:
        assert "FAILED" not in out + err, f"{command} reported damage that is not there:\n{out}\n{err}"
    assert finish_and_count(home, form) == reference


@pytest.mark.parametrize("form", FORMS)
def test_watch_once_and_ingest_at_once(form, tmp_path, reference):
    home = make_home(form, tmp_path / "home")
    a, b = benchmark_files(tmp_path / "files")
    (home / "inbox" / a.name).write_bytes(a.read_bytes())
    results = race(home, SEEDS[form], ("watch", "--once", "--judge", "offline"), ("ingest", b))
    assert_no_crash(results)
    assert finish_and_count(home, form) == reference


def test_reports_and_rebuilds_at_once_never_crash_and_leave_the_reports_of_the_head(tmp_path, judged_home):
    # A rebuild dropped the read models one table at a time while another process rendered: the
    # other saw "no such table: proj_cases", or a case its first pass listed was gone by the time
    # its page was rendered (KeyError), in about one round in five. The read models are the same
    # tables in every SQLite home form.
    home = shutil.copytree(judged_home, tmp_path / "home")
    for seed in range(3):
        assert_no_crash(race(home, seed, ("report",), ("rebuild",), ("rebuild",), ("report",)))
    alone = tmp_path / "alone"
    shutil.copytree(home, alone, ignore=shutil.ignore_patterns("reports"))
    assert cli("rebuild", home=alone).returncode == 0
    assert report_files(home) == report_files(alone)


def report_files(home: Path) -> dict[str, bytes]:
    """Every file under the home's reports folder, by relative path."""
    root = home / "reports"
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# --- 2. Python API writers sharing blobs --------------------------------------------------------------
def write_calls(home: Path | str, calls: list[dict], worker: str, count: int, slow: float = 0.0) -> None:
    """Append ``count`` batches of judge calls on streams of ``worker``: every batch holds the same
    payloads (the same blobs) as every other writer's. ``slow``: one append_many whose generator
    sleeps between chunks, holding its transaction open that long."""
    with ledger.open_ledger(home) as led:
        if slow:
            def chunks():
                for i, data in enumerate(calls):
                    if i:
                        time.sleep(slow / len(calls))
                    yield NewEvent(f"case:{worker}-slow", "judge.called", data, key=f"{worker}:slow:{i}")
            led.append_many(chunks(), chunk_events=1)
            return
        for batch in range(count):
            led.append([NewEvent(f"case:{worker}-{batch}", "judge.called", data, key=f"{worker}:{batch}:{i}")
                        for i, data in enumerate(calls)])


@pytest.mark.parametrize("form", FORMS)
def test_writers_in_threads_and_processes_insert_the_same_blobs_at_once(form, tmp_path, calls_file):
    calls = json.loads(calls_file.read_text())[:6]
    home = make_home(form, tmp_path / "home")
    procs = [subprocess.Popen([sys.executable, str(HERE), str(home), str(calls_file), f"p{n}", "5"],
                              stderr=subprocess.PIPE, cwd=HERE.parent) for n in range(2)]
    errors: list[BaseException] = []

    def thread_writer(name: str) -> None:
        try:
            write_calls(home, calls, name, 5)
        except BaseException as exc:   # reported by the test, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=thread_writer, args=(f"t{n}",)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    for proc in procs:
        assert proc.wait(timeout=120) == 0, proc.stderr.read().decode()
    assert not errors, errors
    events = assert_sound(home, form)
    assert len(events) == 4 * 5 * len(calls)
    assert any(blob_refs(json.loads(e.raw_data)) for e in events), "the calls were not stored with blobs"


# --- 3. readers while a writer is mid-transaction ------------------------------------------------------
@pytest.mark.parametrize("form", FORMS)
def test_verify_and_report_while_a_writer_holds_its_transaction_open(form, tmp_path, calls_file):
    home = make_home(form, tmp_path / "home")
    write_calls(home, json.loads(calls_file.read_text())[:4], "before", 3)
    slow = subprocess.Popen([sys.executable, str(HERE), str(home), str(calls_file), "slow", "1", "--slow", "1.5"],
                            stderr=subprocess.PIPE, cwd=HERE.parent)
    fast = subprocess.Popen([sys.executable, str(HERE), str(home), str(calls_file), "fast", "20"],
                            stderr=subprocess.PIPE, cwd=HERE.parent)
    checks: list[object] = []
    reads: list[int] = []
    reader = threading.Thread(target=read_chains, args=(home, lambda: slow.poll() is not None
                                                        and fast.poll() is not None, reads))
    reader.start()
    while slow.poll() is None or fast.poll() is None or not checks:
        results = race(home, len(checks), ("verify",), ("report",))
        assert_no_crash(results)
        for command, _, out, err in results:
            assert "FAILED" not in out + err, f"{command} reported damage that is not there:\n{out}\n{err}"
        checks.append(results)
    reader.join(timeout=60)
    for proc in (slow, fast):
        assert proc.wait(timeout=60) == 0, proc.stderr.read().decode()
    assert reads and -1 not in reads, f"the in-process reader saw a broken chain after {reads[:-1][-1:]} events"
    assert_sound(home, form)


def read_chains(home: Path, done, reads: list[int]) -> None:
    """Until ``done()``: read every event through the Python API (no lock) and check that the seqs run
    from 1 without a gap and each prev_hash is the hash before it, as a compact row's prev_hash is
    read from the row before it; append the count read each time, -1 (and stop) on a broken chain."""
    with ledger.open_ledger(home, readonly=True) as led:
        while not done() or not reads:
            before = "0" * 64   # the first event's prev_hash
            count = 0
            for count, event in enumerate(led.read(), start=1):
                if event.seq != count or event.prev_hash != before:
                    reads.append(-1)
                    return
                before = event.hash
            reads.append(count)


def main(argv: list[str]) -> int:
    """The writer process: HOME CALLS.json WORKER COUNT [--slow SECONDS]."""
    home, calls_file, worker, count = argv[0], argv[1], argv[2], int(argv[3])
    slow = float(argv[argv.index("--slow") + 1]) if "--slow" in argv else 0.0
    calls = json.loads(Path(calls_file).read_text())
    write_calls(home, calls if slow else calls[:6], worker, count, slow)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
