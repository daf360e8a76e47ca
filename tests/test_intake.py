"""ingest_path and the intake commands: exactly once, whole or nothing, pending responses, filing."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evalledger import ledger
from evalledger.cli.main import main
from evalledger.stages.formats.ids import case_id
from evalledger.stages.intake import ingest_path
from evalledger.stages.intake_status import case_states, status
from intake_support import SAMPLES, benchmark, events, response_lines, types, write_json


@pytest.fixture
def home(tmp_path) -> Path:
    return ledger.init_home(tmp_path / "home")


@pytest.fixture
def led(home):
    with ledger.open_ledger(home) as opened:
        yield opened


def test_a_benchmark_file_is_one_batch_whose_case_ids_come_from_content(led, tmp_path):
    path = write_json(tmp_path / "bench.json", benchmark())
    result = ingest_path(led, path)
    assert result.status == "accepted" and result.cases_opened == 1
    assert types(led) == ["file.received", "benchmark.registered", "responses.registered", "case.opened"]
    [opened] = events(led, "case.opened")
    text = benchmark()["responses"][0]["text"]
    assert opened.data["case_id"] == case_id(result.benchmark, "q1", "model-a", text)
    assert opened.data["case_id"] == hashlib.sha256(ledger.canonical_json(
        [result.benchmark, "q1", "model-a", text])).hexdigest()[:16]
    assert opened.stream == f"case:{opened.data['case_id']}"
    assert opened.data["question"]["template"]["fields"][0]["name"] == "pair_count"
    assert opened.data["config"] == benchmark()["config"] and opened.data["response"] == text
    assert len({e.seq for e in led.read()}) == 4 and led.verify().ok


def test_the_same_bytes_twice_append_nothing(led, tmp_path):
    path = write_json(tmp_path / "bench.json", benchmark())
    first = ingest_path(led, path)
    head = led.head()
    again = ingest_path(led, path)
    assert again.status == "known" and again.benchmark == first.benchmark and led.head() == head


def test_the_same_benchmark_reformatted_registers_once_and_opens_no_new_case(led, tmp_path):
    ingest_path(led, write_json(tmp_path / "a.json", benchmark()))
    compact = tmp_path / "b.json"
    compact.write_text(json.dumps(benchmark(), separators=(",", ":")))
    result = ingest_path(led, compact)
    assert result.status == "accepted" and result.cases_opened == 0
    assert len(events(led, "benchmark.registered")) == 1 and len(events(led, "case.opened")) == 1


def test_ids_are_the_same_in_two_independent_ledgers(tmp_path):
    ids = []
    for name in ("one", "two"):
        with ledger.open_ledger(tmp_path / name) as led:
            ingest_path(led, SAMPLES / "pharmacology.benchmark.json")
            ids.append(sorted(e.data["case_id"] for e in events(led, "case.opened")))
    assert ids[0] == ids[1] and len(ids[0]) == 28


def test_responses_before_their_benchmark_wait_and_open_with_it(led, tmp_path):
    responses = tmp_path / "late.jsonl"
    responses.write_text(response_lines("chromosomes", [("q1", "model-b", "23 pairs"), ("q1", "model-c", "46")]))
    held = ingest_path(led, responses)
    assert held.status == "pending" and not events(led, "case.opened")
    assert [p["file"] for p in status(led).pending] == ["late.jsonl"]
    before = led.head().seq
    result = ingest_path(led, write_json(tmp_path / "bench.json", benchmark()))
    assert result.cases_opened == 3 and status(led).pending == []
    assert {e.data["model"] for e in events(led, "case.opened")} == {"model-a", "model-b", "model-c"}
    batch = [e for e in led.read(from_seq=before + 1)]
    assert [e.seq for e in batch] == list(range(before + 1, before + 1 + len(batch)))
    assert ingest_path(led, responses).status == "known"


def test_pending_responses_naming_unknown_questions_open_nothing_and_show_as_rejected(led, tmp_path):
    responses = tmp_path / "late.jsonl"
    responses.write_text(response_lines("chromosomes", [("q1", "model-b", "23"), ("q7", "model-b", "?")]))
    ingest_path(led, responses)
    ingest_path(led, write_json(tmp_path / "bench.json", benchmark(responses=[])))
    assert not events(led, "case.opened")
    [rejected] = status(led).rejected
    assert rejected["file"] == "late.jsonl" and "unknown question id 'q7'" in rejected["first_error"]["reason"]


def test_responses_for_a_registered_benchmark_with_an_unknown_question_are_rejected_whole(led, tmp_path):
    ingest_path(led, write_json(tmp_path / "bench.json", benchmark()))
    head = led.head().seq
    path = tmp_path / "r.jsonl"
    path.write_text(response_lines("chromosomes", [("q1", "model-b", "23"), ("q2", "model-b", "x")]))
    result = ingest_path(led, path)
    bench_id = events(led, "benchmark.registered")[0].data["benchmark"]
    assert result.status == "rejected"
    assert result.errors == [{"where": "line 2: $.question_id",
                              "reason": f"unknown question id 'q2' in benchmark 'chromosomes' ({bench_id})"}]
    assert [e.type for e in led.read(from_seq=head + 1)] == ["benchmark.rejected"]


def test_responses_may_name_the_benchmark_by_id(led, tmp_path):
    first = ingest_path(led, write_json(tmp_path / "bench.json", benchmark()))
    path = tmp_path / "r.json"
    write_json(path, {"format": "evalledger/responses@1", "benchmark": first.benchmark,
                      "responses": [{"question_id": "q1", "model": "model-z", "text": "23"}]})
    assert ingest_path(led, path).cases_opened == 1


def test_inbox_files_are_filed_after_commit_and_rejected_ones_get_their_errors(home, led):
    good = write_json(home / "inbox" / "bench.json", benchmark())
    sha = hashlib.sha256(good.read_bytes()).hexdigest()
    assert ingest_path(led, good, from_inbox=True).moved_to == home / "processed" / f"{sha}.json"
    assert not good.exists() and (home / "processed" / f"{sha}.json").exists()
    bad = home / "inbox" / "bad.json"
    bad.write_text('{"format": "evalledger/benchmark@1", "name": ')
    result = ingest_path(led, bad, from_inbox=True)
    assert not bad.exists() and (home / "rejected" / "bad.json").exists()
    note = (home / "rejected" / "bad.json.error.txt").read_text()
    assert note.splitlines()[1:] == result.error_lines()
    [event] = events(led, "benchmark.rejected")
    assert event.data["errors"] == result.errors and event.data["file"] == "bad.json"


def test_a_file_left_in_the_inbox_by_a_crash_is_a_no_op_that_gets_filed(home, led):
    path = write_json(home / "inbox" / "bench.json", benchmark())
    ingest_path(led, path)  # committed, but "crashed" before moving it
    head = led.head()
    result = ingest_path(led, path, from_inbox=True)
    assert result.status == "known" and led.head() == head and not path.exists()


def test_files_named_on_the_command_line_stay_and_are_copied_for_provenance(home, led, tmp_path):
    path = write_json(tmp_path / "bench.json", benchmark())
    result = ingest_path(led, path)
    assert path.exists() and result.moved_to.read_bytes() == path.read_bytes()


def test_files_over_the_size_limit_are_rejected_unread(led, tmp_path):
    path = write_json(tmp_path / "bench.json", benchmark())
    result = ingest_path(led, path, max_bytes=100)
    assert result.status == "rejected" and "over the limit of 100 bytes" in result.errors[0]["reason"]
    assert types(led) == ["benchmark.rejected"]
    assert ingest_path(led, path).status == "accepted"


def test_a_rejected_file_dropped_again_adds_nothing(led, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("{}")
    ingest_path(led, path)
    head = led.head()
    assert ingest_path(led, path).status == "rejected" and led.head() == head


def test_case_states_follow_the_stage_events(led, tmp_path):
    ingest_path(led, SAMPLES / "pharmacology.benchmark.json")
    ingest_path(led, SAMPLES / "polio-vaccine-1955.reconstruction.json")
    template, failing, *_ = [e.data for e in events(led, "case.opened") if e.data["kind"] == "template"]
    [recon] = [e.data for e in events(led, "case.opened") if e.data["kind"] == "reconstruction"]
    led.append([ledger.NewEvent(f"case:{template['case_id']}", "case.judged",
                                {"case_id": template["case_id"], "verdict": "pass", "auto_failed": False, "reasons": []}),
                ledger.NewEvent(f"case:{failing['case_id']}", "stage.failed",
                                {"case_id": failing["case_id"], "stage": "template", "reason": "judge down"})])
    claims = recon["question"]["original_claims"]
    for claim in claims[:-1]:
        led.append(ledger.NewEvent(f"case:{recon['case_id']}", "claim.scored",
                                   {"case_id": recon["case_id"], "claim_id": claim["id"], "score": 5,
                                    "justification": "j", "evidence_refs": []}))
    states = case_states(led)
    assert states[template["case_id"]] == "judged" and states[failing["case_id"]] == "failed"
    assert states[recon["case_id"]] == "opened"
    led.append(ledger.NewEvent(f"case:{recon['case_id']}", "claim.scored",
                               {"case_id": recon["case_id"], "claim_id": claims[-1]["id"], "score": 9,
                                "justification": "j", "evidence_refs": []}))
    assert case_states(led)[recon["case_id"]] == "judged"


# --- the command line ------------------------------------------------------------------------------

def run(home: Path, *args: str, capsys) -> tuple[int, str]:
    code = main(["--home", str(home), *args])
    return code, capsys.readouterr().out


def test_cli_ingest_prints_one_line_per_file_and_exits_1_on_any_rejection(home, tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "tag": "nope"}\n')
    code, out = run(home, "ingest", str(SAMPLES / "pharmacology.benchmark.json"), str(bad), capsys=capsys)
    lines = out.splitlines()
    assert code == 1 and lines[0].startswith("accepted pharmacology.benchmark.json")
    assert lines[1].startswith("rejected bad.jsonl") and "bad.jsonl: line 1: $.tag" in out
    code, out = run(home, "ingest", str(SAMPLES / "pharmacology.benchmark.json"), capsys=capsys)
    assert code == 0 and out.startswith("known")


def test_cli_ingest_without_files_takes_the_inbox_in_any_order(home, capsys):
    for sample in SAMPLES.glob("*.json*"):
        (home / "inbox" / sample.name).write_bytes(sample.read_bytes())
    (home / "inbox" / ".partial.json").write_text("{")
    code, out = run(home, "ingest", capsys=capsys)
    assert code == 0 and len(out.splitlines()) == 4
    assert sorted(p.name for p in (home / "inbox").iterdir()) == [".partial.json"]
    code, out = run(home, "status", capsys=capsys)
    assert "pending responses: 0" in out and "cases: 69 opened, 0 judged, 0 failed" in out
    assert "pharmacology-essentials" in out and "ledger head: seq" in out


def test_cli_status_lists_pending_and_rejected_files_as_json(home, tmp_path, capsys):
    late = tmp_path / "late.jsonl"
    late.write_text(response_lines("not-yet", [("q1", "m", "t")]))
    bad = tmp_path / "bad.json"
    bad.write_text("")
    run(home, "ingest", str(late), str(bad), capsys=capsys)
    code, out = run(home, "status", "--json", capsys=capsys)
    report = json.loads(out)
    assert code == 0 and report["pending"][0]["benchmark"] == "not-yet"
    assert report["rejected"][0]["first_error"] == {"where": "$", "reason": "the file is empty"}


def test_cli_ingest_of_a_missing_file_is_a_usage_error_and_ingests_nothing(home, capsys):
    code = main(["--home", str(home), "ingest", str(SAMPLES / "pharmacology.benchmark.json"), "/no/such/file"])
    assert code == 2
    with ledger.open_ledger(home) as led:
        assert led.head().seq == 0


def test_the_installed_command_ingests_and_verifies(home):
    env = {**os.environ, "EVALLEDGER_HOME": str(home)}
    exe = [sys.executable, "-m", "evalledger"]
    done = subprocess.run([*exe, "ingest", str(SAMPLES / "verifyfast-cases.audit.jsonl")],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 0 and "26 new cases" in done.stdout
    assert subprocess.run([*exe, "verify"], capture_output=True, env=env).returncode == 0


def test_cli_ingest_of_a_folder_takes_its_json_files_only(home, capsys):
    code, out = run(home, "ingest", str(SAMPLES), capsys=capsys)
    assert code == 0 and "README" not in out
    assert [line.split()[0] for line in out.splitlines()] == ["accepted"] * 4


def test_known_pending_responses_show_the_benchmark_that_resolved_them(led, tmp_path):
    responses = tmp_path / "late.jsonl"
    responses.write_text(response_lines("chromosomes", [("q1", "model-b", "23 pairs")]))
    ingest_path(led, responses)
    assert "(still waiting for its benchmark)" in ingest_path(led, responses).notes
    registered = ingest_path(led, write_json(tmp_path / "bench.json", benchmark()))
    again = ingest_path(led, responses)
    assert again.status == "known" and again.benchmark == registered.benchmark


def test_text_responses_cannot_answer_a_reconstruction(led, tmp_path):
    ingest_path(led, SAMPLES / "polio-vaccine-1955.reconstruction.json")
    path = tmp_path / "r.jsonl"
    path.write_text(response_lines("1955-francis-report-summary", [("1955-francis-report-summary", "m", "text")]))
    result = ingest_path(led, path)
    assert result.status == "rejected" and "reconstruction files, not text" in result.errors[0]["reason"]


def test_the_same_audit_cases_under_another_file_name_are_the_same_benchmark(led, tmp_path):
    copy_path = tmp_path / "renamed-cases.jsonl"
    copy_path.write_bytes((SAMPLES / "verifyfast-cases.audit.jsonl").read_bytes() + b"\n")
    first = ingest_path(led, SAMPLES / "verifyfast-cases.audit.jsonl")
    again = ingest_path(led, copy_path)
    assert again.status == "accepted" and again.benchmark == first.benchmark and again.cases_opened == 0
    assert again.benchmark_name == "verifyfast-cases.audit"


def test_a_jsonl_ledger_ingests_without_filing_anything(tmp_path):
    path = write_json(tmp_path / "bench.json", benchmark())
    with ledger.open_ledger(tmp_path / "ledger.jsonl") as led:
        result = ingest_path(led, path, from_inbox=True)
        assert result.status == "accepted" and result.moved_to is None and path.exists()
        assert types(led)[0] == "file.received" and led.verify().ok
