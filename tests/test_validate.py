"""``evalledger validate``: every intake check, nothing written, the same messages and exit codes as ingest."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalledger import ledger
from evalledger.stages.intake import ingest_bytes, ingest_path
from evalledger.stages.validate import validate_bytes, validate_path
from evalledger.testing.peak_rss import peak_rss_mb
from postgres_support import fresh_store_url

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "benchmarks" / "samples"
BENCH = json.loads((SAMPLES / "pharmacology.benchmark.json").read_text())


def _head(home: Path) -> tuple[int, str]:
    with ledger.open_ledger(home, readonly=True) as led:
        head = led.head()
    return head.seq, head.hash


def _variants() -> dict[str, bytes]:
    no_question = json.loads(json.dumps(BENCH))
    del no_question["questions"][0]["question"]
    bad_primitive = json.loads(json.dumps(BENCH))
    bad_primitive["questions"][1]["template"]["fields"][0]["verify_with"] = {"type": "NumericTolerance", "mode": "percent"}
    return {
        "missing-question.benchmark.json": json.dumps(no_question).encode(),
        "bad-primitive.benchmark.json": json.dumps(bad_primitive).encode(),
        "not-json.benchmark.json": b'{"format": "evalledger/benchmark@1", "name": ',
        "duplicate-keys.benchmark.json": b'{"format": "evalledger/benchmark@1", "name": "a", "name": "b", "questions": []}',
        "latin1.benchmark.json": '{"name": "caf\u00e9"}'.encode("latin-1"),
        "unknown-question.responses.jsonl": json.dumps({"benchmark": BENCH["name"], "question_id": "q999",
                                                        "model": "m", "text": "x"}).encode() + b"\n",
    }


def test_validate_prints_what_ingest_prints_and_writes_nothing(tmp_path, run_cli):
    home = tmp_path / "h"
    run_cli("init", home=home)
    assert run_cli("ingest", SAMPLES / "pharmacology.benchmark.json", home=home).returncode == 0
    folder = tmp_path / "drafts"
    folder.mkdir()
    for name, raw in _variants().items():
        (folder / name).write_bytes(raw)
    before = _head(home)
    for path in sorted(folder.iterdir()):
        checked = run_cli("validate", path, home=home)
        assert _head(home) == before and path.exists(), path.name  # nothing recorded, nothing moved
        assert checked.returncode == 1, (path.name, checked.stdout)
        ingested = run_cli("ingest", path, home=home)
        assert ingested.returncode == 1
        # the same status word, error count and every error line
        assert checked.stdout.splitlines() == ingested.stdout.splitlines(), path.name
        before = _head(home)


def test_validate_a_good_file_exits_0_and_needs_no_home(tmp_path, run_cli):
    done = run_cli("validate", SAMPLES, home=tmp_path / "no-home-here")
    assert done.returncode == 0, done.stdout
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["valid", "pending", "valid", "valid"]
    assert "(14 questions, 28 responses)" in lines[0]
    assert not (tmp_path / "no-home-here").exists()


def test_validate_with_store_compares_with_that_store_and_binds_no_home(tmp_path, run_cli):
    """``--store URL`` bound the home before validate ran, as for ingest: a validate, which writes
    nothing, left a home with a store.url behind (``./evalledger`` when no --home was given), and
    one against a store holding no ledger yet failed with exit 2 where a new home's file is valid."""
    store, sample = fresh_store_url(), SAMPLES / "pharmacology.benchmark.json"
    (tmp_path / "cwd").mkdir()
    done = run_cli("--store", store, "validate", sample, home=tmp_path / "new")
    assert done.returncode == 0 and done.stdout.startswith("valid    pharmacology"), (done.stdout, done.stderr)
    assert run_cli("--store", store, "ingest", sample, home=tmp_path / "machine").returncode == 0
    with ledger.open_ledger(store, readonly=True) as led:
        head = led.head()
    for args, home in ((["--store", store, "validate"], tmp_path / "new"),
                       (["validate", "--store", store], None),   # run in an empty folder: no ./evalledger made
                       (["validate"], tmp_path / "machine")):     # a home bound to the store reads it too
        done = run_cli(*args, sample, home=home, cwd=tmp_path / "cwd", env={"EVALLEDGER_HOME": ""})
        assert done.returncode == 0 and done.stdout.startswith("known    pharmacology"), (args, done.stdout, done.stderr)
    assert not (tmp_path / "new").exists() and list((tmp_path / "cwd").iterdir()) == []
    with ledger.open_ledger(store, readonly=True) as led:
        assert led.head() == head
    local = ledger.init_home(tmp_path / "local")   # refused as binding refuses it, by name, with nothing written
    for home, said in ((local, f"{local} keeps its events in {local / 'ledger.db'}"),
                       (tmp_path / "machine", f"{tmp_path / 'machine'} is bound to the store {store}")):
        done = run_cli("--store", fresh_store_url(), "validate", sample, home=home)
        assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_validate_names_a_missing_file_as_a_usage_error(tmp_path, run_cli):
    done = run_cli("validate", tmp_path / "nope.json", home=tmp_path)
    assert done.returncode == 2 and "no such file" in done.stderr


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(min_value=0, max_value=4000), junk=st.binary(max_size=8))
def test_validate_and_ingest_agree_on_damaged_files(tmp_path_factory, cut, junk):
    """A sample cut short and given junk: validate's outcome and errors equal ingest's."""
    raw = (SAMPLES / "pharmacology.benchmark.json").read_bytes()
    damaged = raw[:cut] + junk
    home = tmp_path_factory.mktemp("h")
    with ledger.open_ledger(home) as led:
        checked = validate_bytes(led, damaged, "x.benchmark.json")
        ingested = ingest_bytes(led, damaged, "x.benchmark.json")
    expected = {"accepted": "valid"}.get(ingested.status, ingested.status)
    assert checked.status == expected
    assert checked.errors == ingested.errors


def test_validate_applies_the_response_size_limit_as_ingest_does(tmp_path, run_cli):
    """A response over --max-response-chars: ingest rejects the file, so validate must not call
    it valid (it did: validate had no response size check)."""
    home = tmp_path / "h"
    run_cli("init", home=home)
    long = json.loads(json.dumps(BENCH))
    long["responses"][0]["text"] = "x" * 1000
    path = tmp_path / "long.benchmark.json"
    path.write_text(json.dumps(long))
    checked = run_cli("validate", "--max-response-chars", "999", path, home=home)
    assert checked.returncode == 1 and "the response is 1000 characters, over the limit of 999" in checked.stdout
    assert run_cli("validate", "--max-response-chars", "1000", path, home=home).returncode == 0
    ingested = run_cli("ingest", "--max-response-chars", "999", path, home=home)
    assert checked.stdout.splitlines() == ingested.stdout.splitlines()
    assert run_cli("validate", "--max-response-chars", "0", path, home=home).returncode == 2


def _large_inputs(tmp_path: Path) -> dict[str, bytes]:
    """Files for each of the paths a spooled file takes in ingest: a native benchmark, responses
    that fit a registered benchmark, responses for an unregistered one, responses naming an
    unknown question, a JSONL file of bad lines, an over-long response, and a format read whole."""
    long = json.loads(json.dumps(BENCH))
    long["responses"][1]["text"] = "y" * 300
    other = json.loads(json.dumps(BENCH))
    other["name"] = "another-benchmark"
    question_ids = [q["id"] for q in BENCH["questions"]]
    fits = "".join(json.dumps({"benchmark": BENCH["name"], "question_id": q, "model": f"m{i}", "text": "t"}) + "\n"
                   for i, q in enumerate(question_ids * 3))
    return {
        "sample.benchmark.json": (SAMPLES / "pharmacology.benchmark.json").read_bytes(),
        "fits.responses.jsonl": fits.encode(),
        "waits.responses.jsonl": fits.replace(BENCH["name"], "not-registered").encode(),
        "unknown-question.responses.jsonl": fits.replace(question_ids[0], "q999").encode(),
        "bad-lines.responses.jsonl": b'{"question_id": 1}\n{"question_id": "q1", "text": "x\n' * 20,
        "long.benchmark.json": json.dumps(long).encode(),
        "other.benchmark.json": json.dumps(other).encode(),
        "sample.reconstruction.json": (SAMPLES / "polio-vaccine-1955.reconstruction.json").read_bytes(),
        "sample.audit.jsonl": (SAMPLES / "verifyfast-cases.audit.jsonl").read_bytes(),
    }


def _outcome(result) -> tuple:
    return (result.status, result.format, result.benchmark, result.benchmark_name, result.notes, result.warnings,
            result.errors, result.untranslated)


def test_a_large_file_is_validated_in_bounded_memory_with_the_same_outcome(tmp_path):
    """Every file validated through a spool (as a large file is read) gives what the in-memory
    read gives, with a home holding the benchmark and with none; and ingest agrees."""
    home = tmp_path / "h"
    with ledger.open_ledger(home) as led:
        ingest_bytes(led, (SAMPLES / "pharmacology.benchmark.json").read_bytes(), "registered.benchmark.json")
    for name, raw in _large_inputs(tmp_path).items():
        path = tmp_path / name
        path.write_bytes(raw)
        for led in (ledger.open_ledger(home, readonly=True), None):
            small = validate_path(led, path, max_response_chars=200)
            spooled = validate_path(led, path, max_response_chars=200, spool_above=1)
            assert _outcome(spooled) == _outcome(small), (name, led is not None)
            if led is not None:
                led.close()
    with ledger.open_ledger(home) as led:
        for name in ("long.benchmark.json", "fits.responses.jsonl", "bad-lines.responses.jsonl"):
            checked = validate_path(led, tmp_path / name, max_response_chars=200, spool_above=1)
            ingested = ingest_path(led, tmp_path / name, max_response_chars=200, spool_above=1)
            assert checked.status == {"accepted": "valid"}.get(ingested.status, ingested.status), name
            assert checked.errors == ingested.errors
        assert validate_path(led, tmp_path / "fits.responses.jsonl", spool_above=1).status == "known"


def _benchmark_of(questions: int, path: Path) -> Path:
    """The sample benchmark grown to ``questions`` questions, a response each (~1.2 KB a question)."""
    big = {**BENCH, "questions": [{**BENCH["questions"][0], "id": f"q{n}"} for n in range(questions)],
           "responses": [{"question_id": f"q{n}", "model": "m", "text": "A long answer. " * 10}
                         for n in range(questions)]}
    path.write_text(json.dumps(big))
    return path


def test_validating_a_large_benchmark_does_not_hold_it_in_memory(tmp_path):
    """Peak RSS of ``evalledger validate`` on a 2.5 MB and a 10 MB benchmark (both over intake's
    1 MB spool threshold): read whole, the larger took ~55 MB more (its parse holds ~7 times its
    size); read as ingest reads it, about the same as the smaller."""
    peaks = []
    for questions in (2_000, 8_000):
        path = _benchmark_of(questions, tmp_path / f"b{questions}.benchmark.json")
        code, peak, stderr = peak_rss_mb([sys.executable, "-m", "evalledger", "--home", str(tmp_path / "none"),
                                          "validate", str(path)])
        assert code == 0, stderr
        peaks.append(peak)
    assert peaks[1] < peaks[0] + 15, peaks
