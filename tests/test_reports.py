"""Reports: byte-identical rebuild, incremental update equals rebuild, independence from the
interleaving of concurrent cases, the files' contract, and the CLI."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from evalledger import ledger, projections
from evalledger.cli.main import main
from evalledger.testing import synthetic as syn

CLAIMS = [{"id": "c1", "text": "A", "type": "policy", "importance": 3},
          {"id": "c2", "text": "B", "type": "fact", "importance": 1}]


def case_histories() -> list[list]:
    """Per-case event lists (each in its own stream order) for every kind, plus benchmark events."""
    cases = []
    for i in range(6):
        for model, verdict in (("A", "pass" if i % 2 else "fail"), ("B", "pass" if i < 4 else None)):
            case_id, events = syn.template_case("tmpl", f"q{i}", model, verdict, fields={"n": verdict == "pass"})
            events.append(syn.trait(case_id, "clarity", i % 5 + 1))
            if verdict is None:
                events.append(syn.stage_failed(case_id, "template", "judge gave up"))
            cases.append(events)
    for doc in ("D1", "D2"):
        case_id, first = syn.opened("rec", "reconstruction", doc, "A",
                                    {"doc_id": doc, "original_claims": CLAIMS, "target_document": ""})
        cases.append([first, syn.judge_call(case_id, "score_claims"), syn.claim(case_id, "c1", 9 if doc == "D1" else 3),
                      syn.claim(case_id, "c2", 6)])
    for i, (expected, actual) in enumerate([(5, 5), (2, 4), (3, 3), (1, 2)]):
        case_id, first = syn.opened("aud", "audit", str(i), "A", {"id": i, "tag": "t", "expected_credit_score": expected})
        cases.append([first, syn.judge_call(case_id, "check_facts"), syn.credit(case_id, actual)])
    return cases


def header_events() -> list:
    return [syn.benchmark("tmpl", "template", questions=6), syn.benchmark("rec", "reconstruction"),
            syn.benchmark("aud", "audit"), syn.run_started("r1")]


def interleave(cases: list[list], seed: int) -> list:
    """One global order that keeps each case's own order (as concurrent cases finishing would)."""
    rng = random.Random(seed)
    queues = [list(c) for c in cases]
    out = []
    while any(queues):
        queue = rng.choice([q for q in queues if q])
        out.append(queue.pop(0))
    return out


def build(home: Path, seed: int) -> ledger.Ledger:
    led = ledger.open_ledger(home)
    led.append(header_events())
    for event in interleave(case_histories(), seed):
        led.append(event)
    return led


def read_tree(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def without_head(files: dict[str, bytes], head: ledger.Head, led: ledger.Ledger | None = None) -> dict[str, bytes]:
    """The files with the head line / head fields blanked, and with ``led`` given the times its
    events were recorded (a reconstruction's timestamp): the only parts allowed to differ."""
    times = sorted({e.meta["recorded_at"] for e in led.read(types=["claim.scored"])}) if led else []
    out = {}
    for name, body in files.items():
        body = body.replace(head.hash.encode(), b"HEAD")
        for time in times:
            body = body.replace(time.encode(), b"TIME")
        out[name] = body
    return out


def test_rebuild_is_byte_identical_to_incremental_updates(tmp_path):
    led = ledger.open_ledger(tmp_path / "home")
    led.append(header_events())
    ordered = interleave(case_histories(), seed=1)
    for start in range(0, len(ordered), 17):                 # report after every few events
        led.append(ordered[start:start + 17])
        projections.refresh(led)
    updated = read_tree(led.home / "reports")
    projections.rebuild(led)
    assert read_tree(led.home / "reports") == updated
    projections.rebuild(led)                                  # and rebuilding again changes nothing
    assert read_tree(led.home / "reports") == updated
    assert {"index.md", "aggregate-stats.json", "aggregate-report.md", "evaluations.jsonl",
            "tmpl/report.md", "rec/report.md", "aud/report.md", "rec/documents/D1.json",
            "rec/documents/D1.md"} <= set(updated)


def test_incremental_update_folds_only_the_new_events(tmp_path):
    led = build(tmp_path / "home", seed=3)
    first = projections.update(led)
    assert first.events > 0 and first.position == (led.head().seq, led.head().hash)
    assert projections.update(led).events == 0                # nothing new: nothing folded
    case_id = syn.case_id_for("tmpl", "q0", "A")
    led.append(syn.overridden(case_id, "pass", "checked by hand", "ana"))
    second = projections.update(led)
    assert (second.events, second.cases) == (1, 1)


def test_reports_do_not_depend_on_the_interleaving(tmp_path):
    one, two = build(tmp_path / "one", seed=11), build(tmp_path / "two", seed=12)
    assert one.head().hash != two.head().hash                 # really two different orders
    projections.refresh(one)
    projections.refresh(two)
    files_one = without_head(read_tree(one.home / "reports"), one.head(), one)
    files_two = without_head(read_tree(two.home / "reports"), two.head(), two)
    assert files_one == files_two


def test_every_report_states_head_judge_and_config(tmp_path):
    led = build(tmp_path / "home", seed=5)
    projections.refresh(led)
    head = led.head()
    reports = led.home / "reports"
    for name in ("index.md", "aggregate-report.md", "tmpl/report.md", "rec/documents/D1.md"):
        text = (reports / name).read_text()
        assert f"seq {head.seq}, hash `{head.hash}`" in text, name
        assert "offline / heuristic (offline heuristic baseline, not a language model)" in text, name
        assert "`cfg-1`" in text, name
    stats = json.loads((reports / "aggregate-stats.json").read_text())
    assert stats["ledger_head"] == {"seq": head.seq, "hash": head.hash}
    doc = json.loads((reports / "rec" / "documents" / "D1.json").read_text())
    assert doc["built_from"] == {"seq": head.seq, "hash": head.hash}


def test_evaluations_jsonl_has_every_case_sorted_with_its_status(tmp_path):
    led = build(tmp_path / "home", seed=2)
    projections.refresh(led)
    lines = [json.loads(x) for x in (led.home / "reports" / "evaluations.jsonl").read_text().splitlines()]
    assert len(lines) == 12 + 2 + 4
    assert [x["case_id"] for x in lines] == sorted(x["case_id"] for x in lines)
    statuses = {x["status"] for x in lines if x["benchmark"] == "tmpl" and x["model"] == "B"}
    assert statuses == {"judged", "failed"}
    failed = [x for x in lines if x["status"] == "failed"]
    assert len(failed) == 2 and failed[0]["failures"] == [{"stage": "template", "reason": "judge gave up"}]
    assert failed[0]["verdict"] is None


def test_pictures_are_well_formed_svg(tmp_path):
    led = build(tmp_path / "home", seed=4)
    projections.refresh(led)
    reports = led.home / "reports"
    svgs = sorted(reports.rglob("*.svg"))
    assert [str(p.relative_to(reports)) for p in svgs] == [
        "aud/zones-A.svg", "rec/claim-scores-A.svg", "tmpl/pass-rates.svg"]
    for path in svgs:
        root = ET.fromstring(path.read_text())
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
    matrix = ET.fromstring((reports / "aud" / "zones-A.svg").read_text())
    texts = [t.text for t in matrix.iter("{http://www.w3.org/2000/svg}text")]
    assert texts.count("1") == 4 and "zones-A.svg" in (reports / "aud" / "report.md").read_text()
    bars = ET.fromstring((reports / "tmpl" / "pass-rates.svg").read_text())
    labels = [t.text for t in bars.iter("{http://www.w3.org/2000/svg}text")]
    assert "50.0%" in labels and "66.7%" in labels        # A passes 3/6, B 4/6 (2 failed cases count)
    assert "(pass-rates.svg)" in (reports / "tmpl" / "report.md").read_text()


def test_stale_report_files_are_removed(tmp_path):
    led = ledger.open_ledger(tmp_path / "home")
    led.append(syn.benchmark("old", "template"))
    projections.refresh(led)
    assert (led.home / "reports" / "old" / "report.md").exists()
    renamed = syn.benchmark("old", "template", name="renamed")
    led.append(ledger.NewEvent(renamed.stream, renamed.type, renamed.data, key="registered-again"))
    projections.refresh(led)
    assert (led.home / "reports" / "renamed" / "report.md").exists()
    assert not (led.home / "reports" / "old").exists()       # the folder the old name had is gone


def test_a_jsonl_ledger_keeps_its_read_models_beside_it(tmp_path):
    path = tmp_path / "events.jsonl"
    with ledger.open_ledger(path) as led:
        led.append(header_events() + interleave(case_histories(), seed=9))
        written = projections.refresh(led)
    assert (tmp_path / "events.projections.db").exists()
    assert all(str(p).startswith(str(tmp_path / "events-reports")) for p in written)


def test_cli_report_and_rebuild(tmp_path):
    home = tmp_path / "home"
    build(home, seed=6).close()
    run = [sys.executable, "-m", "evalledger", "--home", str(home)]
    out = subprocess.run(run + ["report"], capture_output=True, text=True, check=True).stdout
    assert out.startswith("updated ") and f"in {home / 'reports'}" in out
    before = read_tree(home / "reports")
    out = subprocess.run(run + ["rebuild"], capture_output=True, text=True, check=True).stdout
    assert out.startswith("rebuilt ")
    assert read_tree(home / "reports") == before
    assert main(["--home", str(tmp_path / "nowhere"), "report"]) == 2


def test_a_fold_that_lost_a_race_is_not_saved(tmp_path):
    import pytest

    from evalledger.projections.store import ReadModelStore, StaleFold
    led = build(tmp_path / "home", seed=8)
    store = ReadModelStore(led)
    projections.update(led)
    moved = store.position()
    with pytest.raises(StaleFold):
        store.save([syn_case_state()], {}, {}, (1, "0" * 64), folded_from=0)
    assert store.position() == moved                          # nothing written
    store.close()


def syn_case_state() -> dict:
    from evalledger.projections.appliers import new_case
    return {**new_case("x"), "benchmark": "b", "model": "m", "kind": "template", "question_id": "q"}


def test_concurrent_reports_converge_to_the_rebuild(tmp_path):
    import threading
    home = tmp_path / "home"
    writer = ledger.open_ledger(home)
    writer.append(header_events())
    ordered = interleave(case_histories(), seed=21)
    errors = []

    def reporter():
        try:
            with ledger.open_ledger(home) as led:
                for _ in range(6):
                    projections.refresh(led)
        except Exception as exc:  # pragma: no cover - the assertion below shows it
            errors.append(exc)

    threads = [threading.Thread(target=reporter) for _ in range(2)]
    for t in threads:
        t.start()
    for start in range(0, len(ordered), 9):
        writer.append(ordered[start:start + 9])
    for t in threads:
        t.join()
    assert not errors
    projections.refresh(writer)
    updated = read_tree(home / "reports")
    projections.rebuild(writer)
    assert read_tree(home / "reports") == updated


def test_read_models_of_another_fold_version_are_refolded(tmp_path):
    from evalledger.projections.store import ReadModelStore
    led = build(tmp_path / "home", seed=13)
    projections.refresh(led)
    expected = read_tree(led.home / "reports")
    store = ReadModelStore(led)
    store.conn.execute("UPDATE proj_position SET name = 'projections/v0'")
    store.conn.execute("UPDATE proj_cases SET state = json_set(state, '$.model', 'stale')")
    store.close()
    assert projections.update(led).events == led.head().seq      # refolded from seq 1
    projections.refresh(led)
    assert read_tree(led.home / "reports") == expected


def test_a_ledger_file_reports_beside_itself_as_docs_reports_md_says(tmp_path, run_cli):
    """A bare .jsonl ledger has no home folder: its read models and reports go beside the file."""
    path = tmp_path / "l.jsonl"
    case_id, events = syn.template_case("tmpl", "q1", "A", "pass", fields={"n": True})
    with ledger.open_ledger(path) as led:
        led.append([syn.benchmark("tmpl", "template"), *events])
    done = run_cli("report", home=path)
    assert done.returncode == 0, done.stderr
    reports = tmp_path / "l-reports"
    assert (reports / "index.md").is_file() and str(reports) in done.stdout
    assert (tmp_path / "l.projections.db").is_file()
    assert not (tmp_path / "reports").exists()
    docs = (Path(__file__).resolve().parents[1] / "docs" / "reports.md").read_text()
    assert "`<stem>-reports/`" in docs and "`<stem>.projections.db`" in docs


@pytest.mark.parametrize("longer", [True, False])
def test_read_models_of_another_ledger_under_the_same_name_are_refolded(tmp_path, run_cli, longer):
    """A .jsonl ledger's read models stay beside it when the file is replaced. A fold went on from
    the seq they named: another ledger copied over it (a backup restored, the wrong file copied)
    had its events after that seq added to the first one's cases, and one shorter than it was
    taken as already folded; the reports showed cases of a ledger no longer there. The position's
    hash names its ledger: the models are folded from seq 1 again, with a warning."""
    ledgers = {}
    for name, seed, cases in (("short", 3, case_histories()[:5]), ("long", 4, case_histories())):
        with ledger.open_ledger(tmp_path / f"{name}.jsonl") as led:
            led.append(header_events() + interleave(cases, seed))
        done = run_cli("report", home=tmp_path / f"{name}.jsonl")
        assert done.returncode == 0, done.stderr
        ledgers[name] = read_tree(tmp_path / f"{name}-reports")
    target, source = ("short", "long") if longer else ("long", "short")
    (tmp_path / f"{source}.jsonl").replace(tmp_path / f"{target}.jsonl")
    done = run_cli("report", home=tmp_path / f"{target}.jsonl")
    assert done.returncode == 0, done.stderr
    assert "folded from another ledger" in done.stderr and f"{target}.projections.db" in done.stderr
    assert read_tree(tmp_path / f"{target}-reports") == ledgers[source]   # as if folded there
    done = run_cli("report", home=tmp_path / f"{target}.jsonl")
    assert done.returncode == 0 and "another ledger" not in done.stderr, done.stderr   # once


def test_a_reporter_killed_between_write_and_rename_leaves_no_temporary_behind(tmp_path):
    """A SIGKILL between writing a report's temporary file and renaming it left the file for ever."""
    import os
    import subprocess
    import sys

    from evalledger.projections.reports import write_files
    out = tmp_path / "reports"
    (out / "bench").mkdir(parents=True)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    leftover = out / "bench" / f".report.md.{dead}.140000.tmp"
    leftover.write_text("half a report")
    mine = out / f".index.md.{os.getpid()}.1.tmp"   # a live reporter's (this process): kept
    mine.write_text("being written")
    write_files(out, {"bench/report.md": b"# report\n"})
    assert not leftover.exists() and mine.exists()
    assert (out / "bench" / "report.md").read_bytes() == b"# report\n"
