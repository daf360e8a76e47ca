"""A large set of responses is recorded as bounded-size events, atomically; a home holding the one
big ``responses.registered`` that came before parts still reads, reports and replays the same."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from evalledger import ledger
from evalledger.stages import intake_events as ev
from evalledger.stages.formats import parse
from evalledger.stages.intake import find_benchmark, ingest_path
from evalledger.stages.replaying import seed_replay
from intake_support import write_sums_benchmark

QUESTIONS = 50
RESPONSES = ev.PART_CASES * 2 + 7     # three parts: 10,000 + 10,000 + 7
RECORD_TYPES = ["responses.registered", "responses.cases_added"]


def _write_benchmark(path: Path) -> Path:
    """A native benchmark of QUESTIONS questions and no responses."""
    return write_sums_benchmark(path, "many-answers", QUESTIONS)


def _write_responses(path: Path, count: int) -> Path:
    """A JSONL responses file of ``count`` responses to it (each question by count / QUESTIONS models)."""
    path.write_text("".join(json.dumps({"benchmark": "many-answers", "question_id": f"q{i % QUESTIONS}",
                                        "model": f"m{i // QUESTIONS}", "text": f"It is {i % QUESTIONS + 1}."}) + "\n"
                            for i in range(count)))
    return path


def _records(home: Path) -> list[ledger.Event]:
    with ledger.open_ledger(home, readonly=True) as led:
        return list(led.read(types=RECORD_TYPES))


def _opened(home: Path) -> list[dict]:
    with ledger.open_ledger(home, readonly=True) as led:
        return [e.data for e in led.read(types=["case.opened"])]


def test_a_large_responses_file_is_recorded_in_parts_within_its_batch(tmp_path, run_cli):
    home = tmp_path / "h"
    run_cli("init", home=home)
    assert run_cli("ingest", _write_benchmark(tmp_path / "b.benchmark.json"), home=home).returncode == 0
    done = run_cli("ingest", _write_responses(tmp_path / "r.responses.jsonl", RESPONSES), home=home)
    assert done.returncode == 0, done.stdout + done.stderr
    records = _records(home)
    assert [e.type for e in records] == ["responses.registered"] + ["responses.cases_added"] * 2
    assert [len(e.data["cases"]) for e in records] == [ev.PART_CASES, ev.PART_CASES, 7]
    assert records[0].data["count"] == RESPONSES and records[0].data["case_parts"] == 3
    assert [e.data["part"] for e in records[1:]] == [1, 2]
    assert [e.seq for e in records] == list(range(records[0].seq, records[0].seq + 3))    # one batch
    whole = ev.whole_responses(records[0].data, (e.data for e in records[1:]))
    assert whole["cases"] == [d["case_id"] for d in _opened(home)] and "case_parts" not in whole
    assert max(len(e.raw_data) for e in records) < 250_000       # bounded, whatever the file's size

    # ingesting the same bytes again appends nothing; a replay copies the parts with their record
    again = run_cli("ingest", tmp_path / "r.responses.jsonl", home=home)
    assert again.returncode == 0 and len(_records(home)) == 3
    assert [e.data for e in _records(_replay_inputs(home))] == [e.data for e in records]


def test_a_small_responses_file_keeps_its_single_event():
    bench = {"benchmark": "b" * 16, "name": "n"}
    source = {"file": "r.jsonl", "sha256": "0" * 64}
    ids = [f"{i:016x}" for i in range(ev.PART_CASES)]
    [one] = ev.responses_parts(bench, source, iter(ids), len(ids), "cause")
    assert one == ev.responses_opened(bench, source, ids, "cause")
    head, part = ev.responses_parts(bench, source, iter([*ids, "x" * 16]), len(ids) + 1, "cause")
    assert head.data["cases"] == ids and head.data["count"] == len(ids) + 1 and part.data["cases"] == ["x" * 16]
    assert part.key == f"responses:{'0' * 64}:cases:1" and part.stream == head.stream


def test_an_old_home_with_one_big_record_reads_reports_and_replays_the_same(tmp_path, run_cli, monkeypatch):
    """The old shape appended through the public API (intake's events, the record in one event)
    against the same file ingested now: same cases, same status, same report, same replay.
    Parts of 20 cases, not 10,000 (the readers do not depend on the size): reports of 10,003 cases
    in two homes took this test 90 s."""
    part = 20
    benchmark = _write_benchmark(tmp_path / "b.benchmark.json")
    responses = _write_responses(tmp_path / "r.responses.jsonl", part + 3)
    old, new = tmp_path / "old", tmp_path / "new"
    for home in (old, new):
        run_cli("init", home=home)
        assert run_cli("ingest", benchmark, home=home).returncode == 0
    monkeypatch.setattr(ev, "PART_CASES", part)
    with ledger.open_ledger(new) as led:
        assert ingest_path(led, responses).status == "accepted"
    monkeypatch.undo()
    raw = responses.read_bytes()
    sha = hashlib.sha256(raw).hexdigest()
    parsed = parse(raw, responses.name)
    source = {"file": responses.name, "sha256": sha}
    with ledger.open_ledger(old) as led:     # as intake wrote it before parts existed
        bench = find_benchmark(led, "many-answers")
        assert bench is not None
        received = ev.file_received(responses.name, sha, len(raw), parsed.format, "accepted",
                                    bench["benchmark"], bench["name"])
        ids = ev.case_ids(bench, parsed.responses)
        led.append([received, ev.responses_opened(bench, source, ids, received.id),
                    *ev.case_events(bench, parsed.responses, source, received.id, ids)])
    [old_record] = _records(old)
    assert len(old_record.data["cases"]) == part + 3 and "case_parts" not in old_record.data
    new_records = _records(new)
    assert len(new_records) == 2
    assert ev.whole_responses(new_records[0].data, [new_records[1].data]) == old_record.data
    assert _opened(old) == _opened(new)

    outputs = []
    for home in (old, new):
        status = run_cli("status", "--json", home=home)
        assert status.returncode == 0
        assert run_cli("report", home=home).returncode == 0
        assert run_cli("rebuild", home=home).returncode == 0
        outputs.append((_status_view(status.stdout), _reports(home), _opened(_replay_inputs(home))))
    assert outputs[0] == outputs[1]
    assert len(outputs[0][2]) == part + 3


def _replay_inputs(home: Path) -> Path:
    """A new home holding what a replay of ``home`` copies before it judges (its inputs)."""
    target = ledger.init_home(home.with_name(home.name + "-replay"))
    with ledger.open_ledger(home, readonly=True) as source, ledger.open_ledger(target) as led:
        seed_replay(source, led, str(home), {}, None)
    return target


def _status_view(text: str) -> dict:
    """``status --json`` without what tells the two ledgers apart (seqs, hashes, times)."""
    status = json.loads(text)
    return {k: v for k, v in status.items() if k in ("benchmarks", "cases", "files", "pending")}


def _reports(home: Path) -> dict[str, bytes]:
    """The report files of ``home`` by relative path, with the ledger head they name (its seq and
    hash: the old home holds one event fewer) put as ``HEAD``."""
    with ledger.open_ledger(home, readonly=True) as led:
        head = led.head()
    folder = home / "reports"
    return {str(p.relative_to(folder)): p.read_bytes().replace(head.hash.encode(), b"HEAD")
            .replace(f"seq {head.seq},".encode(), b"seq HEAD,").replace(f'"seq": {head.seq}'.encode(), b'"seq": HEAD')
            for p in sorted(folder.rglob("*")) if p.is_file()}
