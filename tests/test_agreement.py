"""Agreement with reviewers (confirm, override, sample, agreement, reports/agreement.md) and between
the judges of two homes (agreement --against), through the CLI and the Python API."""

from __future__ import annotations

import csv
import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.contingency_tables import mcnemar

from evalledger import ledger, projections
from evalledger.projections.review_queue import allocate
from evalledger.testing import synthetic as syn

# (question, model, judge verdict): 12 judged template cases over two benchmarks and two models.
JUDGED = [(f"q{i}", model, "pass" if (i + len(model)) % 3 else "fail") for i in range(6) for model in ("A", "BB")]


def judged_home(path, verdicts=JUDGED, bench="tmpl", traits=None):
    """A home with judged template cases (synthetic events, as the stages append them)."""
    led = ledger.open_ledger(ledger.init_home(path))
    led.append([syn.benchmark(bench, "template", questions=6), syn.run_started("r1")])
    ids = {}
    for question, model, verdict in verdicts:
        case_id, events = syn.template_case(bench, question, model, verdict,
                                            fields={"n": verdict == "pass", "m": question != "q0"})
        for name, score in (traits or {}).get((question, model), {}).items():
            events.append(syn.trait(case_id, name, score))
        led.append(events)
        ids[(question, model)] = case_id
    led.close()
    return path, ids


def agreement_json(run_cli, home, *extra):
    done = run_cli("agreement", "--json", *extra, home=home)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_confirm_and_override_are_reviewer_labels_with_kappa_and_disagreements(tmp_path, run_cli):
    home, ids = judged_home(tmp_path / "home")
    reviews = {("q0", "A"): "fail", ("q1", "A"): "pass", ("q2", "BB"): "pass", ("q3", "A"): "fail",
               ("q4", "BB"): "fail", ("q5", "A"): "pass"}
    judge = {(q, m): v for q, m, v in JUDGED}
    for key, verdict in reviews.items():
        if verdict == judge[key]:
            done = run_cli("confirm", ids[key][:10], "--author", "ana", home=home)
            assert "verdict.confirmed" in done.stdout
        else:
            done = run_cli("override", ids[key], "--verdict", verdict, "--reason", "read it", "--author", "bo",
                           home=home)
        assert done.returncode == 0, done.stderr
    doc = agreement_json(run_cli, home)
    a = [judge[k] for k in sorted(reviews)]
    b = [reviews[k] for k in sorted(reviews)]
    assert doc["reviewed"] == 6 and doc["reviewed_not_judged"] == 0
    assert doc["overall"]["cohen_kappa"] == pytest.approx(cohen_kappa_score(a, b), abs=1e-4)
    agree = sum(x == y for x, y in zip(a, b, strict=True)) / 6
    assert doc["overall"]["percent_agreement"] == pytest.approx(agree, abs=1e-4)
    cells = doc["overall"]["confusion"]
    assert cells["a_pass_b_fail"] == sum(x == "pass" and y == "fail" for x, y in zip(a, b, strict=True))
    assert sum(cells.values()) == 6
    expected_disagreements = sorted(ids[k] for k in reviews if reviews[k] != judge[k])
    assert sorted(d["case_id"] for d in doc["disagreements"]) == expected_disagreements
    assert all(d["author"] == "bo" and d["reason"] == "read it" for d in doc["disagreements"])
    # The report file says the same, with the history command of each disagreement.
    assert run_cli("report", home=home).returncode == 0
    text = (home / "reports" / "agreement.md").read_text()
    for case_id in expected_disagreements:
        assert f"`evalledger history {case_id}`" in text
    assert f"{doc['overall']['cohen_kappa']:.4f}" in text
    text_out = run_cli("agreement", home=home).stdout
    assert "Cohen's kappa" in text_out and expected_disagreements[0] in text_out


def test_a_confirmation_after_an_override_puts_the_judge_verdict_back(tmp_path, run_cli):
    home, ids = judged_home(tmp_path / "home", verdicts=[("q0", "A", "pass")])
    case_id = ids[("q0", "A")]
    assert run_cli("override", case_id, "--verdict", "fail", "--reason", "r", "--author", "bo", home=home).returncode == 0
    assert agreement_json(run_cli, home)["disagreements"][0]["reviewer"] == "fail"
    assert run_cli("confirm", case_id, "--author", "ana", "--reason", "bo misread", home=home).returncode == 0
    doc = agreement_json(run_cli, home)
    assert doc["disagreements"] == [] and doc["overall"]["confusion"]["both_pass"] == 1
    assert run_cli("report", home=home).returncode == 0
    [row] = [json.loads(x) for x in (home / "reports" / "evaluations.jsonl").read_text().splitlines()]
    assert row["verdict"] == "pass" and row["override"] is None
    history = run_cli("history", case_id, home=home).stdout
    assert "verdict.confirmed" in history and "author='ana'" in history
    # every count of overridden cases agrees: the override a confirmation undid is in none of them
    # (the aggregates counted every case that ever had one: 1 here, against the report's own list)
    stats = json.loads((home / "reports" / "aggregate-stats.json").read_text())
    counts = [m["overridden"] for b in stats["benchmarks"].values() for m in b["models"].values()]
    assert counts == [0], counts
    from evalledger.cli.viewer.state import HomeView
    view = HomeView(home)
    try:
        with view.reading():
            assert view.cases({"verdict": "overridden"}, "case", False, 1)["total"] == 0
    finally:
        view.close()


def test_confirm_refuses_what_it_cannot_confirm(tmp_path, run_cli):
    home, ids = judged_home(tmp_path / "home", verdicts=[("q0", "A", None)])
    done = run_cli("confirm", ids[("q0", "A")], "--author", "ana", home=home)
    assert done.returncode == 2 and "has no judge verdict yet" in done.stderr
    done = run_cli("confirm", "ffffffffffff", "--author", "ana", home=home)
    assert done.returncode == 2 and "no case 'ffffffffffff'" in done.stderr
    done = run_cli("confirm", ids[("q0", "A")], "--author", " ", home=home)
    assert done.returncode == 2 and "--author must not be empty" in done.stderr
    with ledger.open_ledger(home) as led:
        assert not list(led.read(types=["verdict.confirmed"]))


def test_nothing_reviewed_gives_na_not_zero(tmp_path, run_cli):
    home, _ = judged_home(tmp_path / "home")
    doc = agreement_json(run_cli, home)
    assert doc["reviewed"] == 0 and doc["overall"]["cohen_kappa"] is None and doc["overall"]["kappa_ci95"] is None
    assert run_cli("report", home=home).returncode == 0
    assert "| all reviewed cases | 0 | n/a | n/a | n/a |" in (home / "reports" / "agreement.md").read_text()


def test_agreement_report_is_byte_identical_on_rebuild(tmp_path, run_cli):
    home, ids = judged_home(tmp_path / "home")
    run_cli("report", home=home)
    for key in [("q0", "A"), ("q3", "BB")]:
        run_cli("override", ids[key], "--verdict", "fail", "--reason", "x|y\n<b>", "--author", "a", home=home)
    assert run_cli("report", home=home).returncode == 0
    updated = (home / "reports" / "agreement.md").read_bytes()
    assert run_cli("rebuild", home=home).returncode == 0
    assert (home / "reports" / "agreement.md").read_bytes() == updated
    assert b"x\\|y &lt;b&gt;" in updated              # a reviewer's text cannot break the table


def test_sample_is_deterministic_stratified_and_skips_reviewed_cases(tmp_path, run_cli):
    home, ids = judged_home(tmp_path / "home")
    first = run_cli("sample", "--n", "5", "--seed", "3", home=home)
    again = run_cli("sample", "--n", "5", "--seed", "3", home=home)
    assert first.returncode == 0 and first.stdout == again.stdout
    rows = [json.loads(line) for line in first.stdout.splitlines()]
    assert len(rows) == 5 and len({r["case_id"] for r in rows}) == 5
    assert all(r["history"] == f"evalledger history {r['case_id']}" for r in rows)
    other = run_cli("sample", "--n", "5", "--seed", "4", home=home).stdout
    assert other != first.stdout
    # Stratified by verdict: places in proportion to the verdicts' shares.
    passes = sum(v == "pass" for _, _, v in JUDGED)
    out = tmp_path / "queue.csv"
    done = run_cli("sample", "--n", "6", "--stratify", "verdict", "--out", out, home=home)
    assert done.returncode == 0 and "6 case(s) to review written to" in done.stdout
    table = list(csv.DictReader(io.StringIO(out.read_text())))
    quotas = allocate({"pass": passes, "fail": len(JUDGED) - passes}, 6)
    assert sum(r["judge_verdict"] == "pass" for r in table) == quotas["pass"]
    assert all(r["stratum"] == r["judge_verdict"] for r in table)
    # A reviewed case leaves the queue.
    run_cli("confirm", rows[0]["case_id"], "--author", "ana", home=home)
    everything = run_cli("sample", "--n", "100", home=home).stdout.splitlines()
    assert len(everything) == len(JUDGED) - 1
    assert rows[0]["case_id"] not in run_cli("sample", "--n", "100", home=home).stdout
    bad = run_cli("sample", "--n", "-1", home=home)
    assert bad.returncode == 2 and "--n must be 0 or more" in bad.stderr
    bad = run_cli("sample", "--n", "2", "--out", tmp_path, home=home)
    assert bad.returncode == 2 and "is a folder" in bad.stderr


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 40), min_size=1), st.integers(0, 200))
def test_allocation_is_proportional_and_complete(sizes, n):
    quotas = allocate(sizes, n)
    total = sum(sizes.values())
    assert sum(quotas.values()) == min(n, total)
    for group, size in sizes.items():
        assert 0 <= quotas[group] <= size
        if n < total:
            assert abs(quotas[group] - n * size / total) < 1


def test_judge_against_judge_on_two_homes(tmp_path, run_cli):
    flips = {("q0", "A"), ("q2", "BB"), ("q4", "A")}
    other = [(q, m, ("fail" if v == "pass" else "pass") if (q, m) in flips else v) for q, m, v in JUDGED]
    scores_a = {(q, m): {"clarity": i % 5 + 1, "polite": i % 2 == 0} for i, (q, m, _) in enumerate(JUDGED)}
    scores_b = {(q, m): {"clarity": min(5, i % 5 + 1 + (i % 3 == 0)), "polite": i % 2 == 0 or i == 3}
                for i, (q, m, _) in enumerate(JUDGED)}
    home_a, ids = judged_home(tmp_path / "a", traits=scores_a)
    home_b, _ = judged_home(tmp_path / "b", verdicts=other, traits=scores_b)
    doc = agreement_json(run_cli, home_a, "--against", home_b)
    keys = [(q, m) for q, m, _ in JUDGED]
    a = [v for _, _, v in JUDGED]
    b = [v for _, _, v in other]
    v = doc["verdicts"]
    assert doc["cases_in_both"] == len(JUDGED) and v["n"] == len(JUDGED)
    assert v["cohen_kappa"] == pytest.approx(cohen_kappa_score(a, b), abs=1e-4)
    only_a = sum(x == "pass" and y == "fail" for x, y in zip(a, b, strict=True))
    only_b = sum(x == "fail" and y == "pass" for x, y in zip(a, b, strict=True))
    assert (v["confusion"]["a_pass_b_fail"], v["confusion"]["a_fail_b_pass"]) == (only_a, only_b)
    assert v["mcnemar_p"] == pytest.approx(mcnemar([[0, only_a], [only_b, 0]], exact=True).pvalue, abs=1e-4)
    assert sorted(d["case_id"] for d in doc["disagreements"]) == sorted(ids[k] for k in flips)
    clarity = doc["traits"]["clarity"]
    ca = [scores_a[k]["clarity"] for k in keys]
    cb = [scores_b[k]["clarity"] for k in keys]
    assert clarity["kind"] == "integer"
    assert clarity["weighted_kappa_quadratic"] == pytest.approx(
        cohen_kappa_score(ca, cb, labels=[1, 2, 3, 4, 5], weights="quadratic"), abs=1e-4)
    assert clarity["weighted_kappa_linear"] == pytest.approx(
        cohen_kappa_score(ca, cb, labels=[1, 2, 3, 4, 5], weights="linear"), abs=1e-4)
    assert clarity["mean_abs_difference"] == pytest.approx(sum(abs(x - y) for x, y in zip(ca, cb, strict=True)) / len(ca), abs=1e-4)
    polite = doc["traits"]["polite"]
    assert polite["kind"] == "boolean" and polite["cohen_kappa"] == pytest.approx(
        cohen_kappa_score([scores_a[k]["polite"] for k in keys], [scores_b[k]["polite"] for k in keys]), abs=1e-4)
    assert set(doc["fields"]) == {"n", "m"} and doc["fields"]["m"]["percent_agreement"] == 1.0
    text = run_cli("agreement", "--against", home_b, home=home_a)
    assert text.returncode == 0 and "McNemar exact p" in text.stdout and "trait clarity" in text.stdout
    missing = run_cli("agreement", "--against", tmp_path / "nowhere", home=home_a)
    assert missing.returncode == 2 and "no evalledger home here" in missing.stderr


def test_claim_scores_compared_by_mean_absolute_difference(tmp_path):
    from evalledger.projections.judge_agreement import judge_agreement
    states = []
    for offset, name in ((0, "a"), (2, "b")):
        led = ledger.open_ledger(ledger.init_home(tmp_path / name))
        case_id, first = syn.opened("rec", "reconstruction", "D1", "A",
                                    {"doc_id": "D1", "original_claims": [{"id": "c1"}, {"id": "c2"}]})
        led.append([syn.benchmark("rec", "reconstruction"), first, syn.claim(case_id, "c1", 4 + offset),
                    syn.claim(case_id, "c2", 9 - offset // 2)])
        projections.update(led)
        from evalledger.projections.store import ReadModelStore
        store = ReadModelStore(led)
        states.append(list(store.iter_cases()))
        store.close()
        led.close()
    doc = judge_agreement(*states)
    assert doc["claims"] == {"n": 2, "mean_abs_difference": 1.5}     # |4-6| = 2, |9-8| = 1
    assert doc["verdicts"]["n"] == 0 and doc["verdicts"]["cohen_kappa"] is None


def test_reviewer_agreement_is_grouped_by_profile_when_cases_name_one(tmp_path):
    from evalledger.projections.agreement import reviewer_agreement
    from evalledger.projections.store import ReadModelStore
    led = ledger.open_ledger(ledger.init_home(tmp_path / "home"))
    led.append([syn.benchmark("tmpl", "template")])
    for i, (profile, judge, reviewer) in enumerate([("strict", "pass", "pass"), ("strict", "fail", "pass"),
                                                    ("lenient", "pass", "pass"), ("lenient", "fail", "fail"),
                                                    (None, "pass", "fail")]):
        case_id, first = syn.opened("tmpl", "template", f"q{i}", "A", {"id": f"q{i}"},
                                    config={"profile": profile} if profile else None)
        review = (syn.overridden(case_id, reviewer, "checked", "ana") if reviewer != judge else
                  ledger.NewEvent(f"case:{case_id}", "verdict.confirmed",
                                  {"case_id": case_id, "verdict": judge, "author": "ana"}))
        led.append([first, syn.judged(case_id, judge), review])
    projections.update(led)
    store = ReadModelStore(led)
    doc = reviewer_agreement(store.iter_cases())
    store.close()
    led.close()
    assert doc["reviewed"] == 5
    assert {p: s["n"] for p, s in doc["by_profile"].items()} == {"lenient": 2, "strict": 2}
    assert doc["by_profile"]["lenient"]["percent_agreement"] == 1.0
    assert doc["by_profile"]["strict"]["confusion"]["a_fail_b_pass"] == 1
    assert doc["overall"]["n"] == 5 and len(doc["disagreements"]) == 2
