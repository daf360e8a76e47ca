"""Projection metrics against hand-computed examples, folded from events appended to a real ledger."""

from __future__ import annotations

import json

import pytest

from evalledger import ledger, projections
from evalledger.projections.stats import mcnemar_exact, paired_bootstrap_interval, wilson_interval
from evalledger.testing import synthetic as syn


@pytest.fixture
def led(tmp_path):
    with ledger.open_ledger(tmp_path / "home") as opened:
        yield opened


def stats_of(led) -> dict:
    projections.refresh(led)
    return json.loads((led.home / "reports" / "aggregate-stats.json").read_text())


# --- statistics units -----------------------------------------------------------------------------

def test_wilson_interval_matches_the_textbook_value():
    low, high = wilson_interval(14, 20)
    assert (round(low, 4), round(high, 4)) == (0.4810, 0.8545)
    assert wilson_interval(0, 0) is None
    assert wilson_interval(0, 10)[0] == 0.0


def test_mcnemar_exact_is_the_two_sided_binomial_tail():
    assert mcnemar_exact(1, 5) == 14 / 64          # 2 * (C(6,0) + C(6,1)) / 2^6
    assert mcnemar_exact(0, 6) == 2 / 64
    assert mcnemar_exact(3, 3) == 1.0
    assert mcnemar_exact(0, 0) == 1.0


def test_paired_bootstrap_is_seeded_and_brackets_the_estimate():
    first = paired_bootstrap_interval(2, 8, 40, seed=7)
    assert first == paired_bootstrap_interval(2, 8, 40, seed=7)
    assert first[0] <= (8 - 2) / 40 <= first[1]
    assert paired_bootstrap_interval(0, 0, 10, seed=1) == (0.0, 0.0)


# --- audit: the VerifyFast baseline table (v3, kimi-full, n=20) -----------------------------------

# (expected, actual): BAD row 8 BAD + 1 GOOD (#13: 2 -> 4); MID row 4 GOOD (one 3 -> 5);
# GOOD row 6 GOOD + 1 MID. 10 exact, 18 within +-1.
BASELINE = ([(1, 1)] * 3 + [(2, 2)] * 3 + [(1, 2), (2, 1)] + [(2, 4)]
            + [(3, 4)] * 3 + [(3, 5)]
            + [(4, 4)] * 2 + [(5, 5)] * 2 + [(4, 5), (5, 4)] + [(4, 3)])
TAGS = {1: "severe_factual", 2: "major_factual", 3: "multi_minor", 4: "minor_logic", 5: "clean"}


def test_verifyfast_baseline_table(led):
    events = []
    for i, (expected, actual) in enumerate(BASELINE, start=1):
        case_id, first = syn.opened("vf20", "audit", str(i), "kimi-k2",
                                    {"id": i, "tag": TAGS[expected], "expected_credit_score": expected},
                                    config={"profile": "kimi-full"})
        events += [first, syn.credit(case_id, actual)]
    led.append(events)
    group = stats_of(led)["benchmarks"]["vf20"]["audit"]["kimi-k2 [kimi-full]"]
    assert group["matrix"] == {"BAD": {"BAD": 8, "MID": 0, "GOOD": 1},
                               "MID": {"BAD": 0, "MID": 0, "GOOD": 4},
                               "GOOD": {"BAD": 0, "MID": 1, "GOOD": 6}}
    assert group["compared"] == 20
    assert group["zone_accuracy"] == 0.7
    assert group["cross_band_confusion_rate"] == 0.05
    assert group["exact_match_rate"] == 0.5
    assert group["within_one_rate"] == 0.9
    assert group["target_met"] is False            # 5% is not below the 5% target
    assert group["per_tag"]["multi_minor"] == {"compared": 4, "exact_matches": 0, "zone_accuracy": 0.0,
                                               "cross_band": 0, "mean_expected": 3.0, "mean_actual": 4.25}
    report = (led.home / "reports" / "aggregate-report.md").read_text()
    assert "cross-band confusion | 1/20 = 5.0%" in report and "| NOT met |" in report


def test_audit_case_without_credit_is_counted_not_dropped(led):
    done, first = syn.opened("vf", "audit", "1", "m", {"id": 1, "tag": "clean", "expected_credit_score": 5})
    stuck, second = syn.opened("vf", "audit", "2", "m", {"id": 2, "tag": "clean", "expected_credit_score": 5})
    led.append([first, syn.credit(done, 5), second, syn.stage_failed(stuck, "audit", "judge timed out")])
    data = stats_of(led)["benchmarks"]["vf"]
    assert data["audit"]["m"]["compared"] == 1 and data["audit"]["m"]["not_scored_cases"] == [stuck]
    assert data["audit"]["m"]["target_met"] is True
    assert data["models"]["m"]["failed"] == 1 and data["models"]["m"]["cases"] == 2


# --- reconstruction: calculated_metrics and AggregateStats with weights ---------------------------

CLAIMS_1 = [{"id": "c1", "text": "A", "type": "policy", "importance": 3},
            {"id": "c2", "text": "B", "type": "fact", "importance": 1},
            {"id": "c3", "text": "C", "type": "fact", "importance": 2}]
CLAIMS_2 = [{"id": "c1", "text": "D", "type": "fact", "importance": 3},
            {"id": "c2", "text": "E", "type": "policy", "importance": 1}]


def _reconstruction(led):
    d1, open1 = syn.opened("recon", "reconstruction", "DOC1", "m",
                           {"doc_id": "DOC1", "original_claims": CLAIMS_1, "target_document": "..."})
    d2, open2 = syn.opened("recon", "reconstruction", "DOC2", "m",
                           {"doc_id": "DOC2", "original_claims": CLAIMS_2, "target_document": "..."})
    led.append([syn.benchmark("recon", "reconstruction"), open1, open2,
                syn.claim(d1, "c1", 9, ["q1"]), syn.claim(d2, "c1", 8), syn.claim(d1, "c2", 5),
                syn.claim(d1, "c3", 2), syn.claim(d2, "c2", 10)])
    return d1, d2


def test_reconstruction_calculated_metrics_per_document(led):
    _reconstruction(led)
    projections.refresh(led)
    doc = json.loads((led.home / "reports" / "recon" / "documents" / "DOC1.json").read_text())
    assert doc["calculated_metrics"] == {
        "total_claims": 3, "average_score": 5.3333, "weighted_average_score": 6.0,   # (27+5+4)/6
        "fully_reconstructed": 1, "partially_reconstructed": 1, "not_reconstructed": 1,
        "by_type": {"fact": {"count": 2, "average_score": 3.5}, "policy": {"count": 1, "average_score": 9.0}},
        "by_importance": {"1": {"count": 1, "average_score": 5.0}, "2": {"count": 1, "average_score": 2.0},
                          "3": {"count": 1, "average_score": 9.0}}}
    assert doc["claim_evaluations"][0]["evidence_refs"] == ["q1"]
    assert (led.home / "reports" / "recon" / "documents" / "DOC1.md").exists()


def test_reconstruction_aggregate_stats(led):
    _reconstruction(led)
    agg = stats_of(led)["benchmarks"]["recon"]["reconstruction"]["m"]
    assert agg == {
        "total_documents": 2, "total_claims": 5, "claim_bands": [{"fully_min": 8, "partially_min": 4}],
        "overall": {"average_score": 6.8, "weighted_average_score": 7.0,          # 70 / 10
                    "pct_fully_reconstructed": 60.0, "pct_partially_reconstructed": 20.0,
                    "pct_not_reconstructed": 20.0},
        "by_claim_type": {"fact": {"count": 3, "average_score": 5.0, "pct_reconstructed": 33.33},
                          "policy": {"count": 2, "average_score": 9.5, "pct_reconstructed": 100.0}},
        "by_importance": {"1": {"count": 2, "average_score": 7.5, "pct_reconstructed": 50.0},
                          "2": {"count": 1, "average_score": 2.0, "pct_reconstructed": 0.0},
                          "3": {"count": 2, "average_score": 8.5, "pct_reconstructed": 100.0}},
        "by_document": [{"doc_id": "DOC1", "claim_count": 3, "average_score": 5.3333},
                        {"doc_id": "DOC2", "claim_count": 2, "average_score": 9.0}]}


# --- per benchmark x model --------------------------------------------------------------------------

def test_failed_and_pending_cases_stay_in_the_denominator(led):
    events = []
    for q, verdict in (("q1", "pass"), ("q2", "pass"), ("q3", "fail")):
        events += syn.template_case("b", q, "A", verdict, fields={"n": verdict == "pass"})[1]
    failed_id, failed_events = syn.template_case("b", "q4", "A", None)
    events += failed_events + [syn.stage_failed(failed_id, "template", "parse gave up")]
    events += syn.template_case("b", "q5", "A", None)[1]                  # still pending
    led.append(events)
    summary = stats_of(led)["benchmarks"]["b"]["models"]["A"]
    assert (summary["cases"], summary["judged"], summary["failed"], summary["pending"]) == (5, 3, 1, 1)
    assert summary["passed"] == 2 and summary["pass_rate"] == 0.4       # 2 / 5, not 2 / 3
    assert summary["judge_calls"] == 10 and summary["tokens"] == 1200 and summary["cost"] == 0.01
    assert summary["per_field"]["n"] == {"verified": 3, "passed": 2, "failed": 1, "undecided": 0,
                                         "pass_rate": 0.6667}


def test_override_is_honoured_and_shown_next_to_the_original(led):
    case_id, events = syn.template_case("b", "q1", "A", "fail")
    led.append(events + [syn.overridden(case_id, "pass", "regex too strict", "ana")])
    summary = stats_of(led)["benchmarks"]["b"]["models"]["A"]
    assert summary["passed"] == 1 and summary["overridden"] == 1
    line = json.loads((led.home / "reports" / "evaluations.jsonl").read_text().splitlines()[0])
    assert line["verdict"] == "pass" and line["original_verdict"] == "fail"
    assert line["override"] == {"verdict": "pass", "reason": "regex too strict", "author": "ana"}
    assert [(c["role"], c["backend"], c["attempt"], c["tokens"]) for c in line["judge"]["calls"]] == [
        ("parse", "offline", 1, 120)] * 2
    report = (led.home / "reports" / "b" / "report.md").read_text()
    assert "pass (overridden by ana: regex too strict; original fail)" in report


def test_model_comparison_is_paired_with_mcnemar_and_bootstrap(led):
    events = []
    # 10 questions: both pass q0-q2, only B passes q3-q8, only A passes q9.
    for i in range(10):
        a = "pass" if i < 3 or i == 9 else "fail"
        b = "pass" if i < 9 else "fail"
        events += syn.template_case("b", f"q{i}", "A", a)[1] + syn.template_case("b", f"q{i}", "B", b)[1]
    led.append(events)
    [row] = stats_of(led)["benchmarks"]["b"]["comparisons"]
    assert (row["model_a"], row["model_b"], row["pairs"]) == ("A", "B", 10)
    assert (row["both_pass"], row["a_only"], row["b_only"], row["neither"]) == (3, 1, 6, 0)
    assert row["difference"] == 0.5
    assert row["mcnemar_p"] == round(2 * (1 + 7) / 128, 6)                    # 0.125
    low, high = row["difference_ci95"]
    assert low <= 0.5 <= high and -1 <= low and high <= 1
    assert "B passes more than A (not significant at 5%" in row["verdict"]


def test_traits_and_judge_backend_are_reported(led):
    case_id, events = syn.template_case("b", "q1", "A", "pass")
    led.append(events + [syn.trait(case_id, "clarity", 4), syn.trait(case_id, "no_hedging", True),
                         syn.run_started("r1")])
    data = stats_of(led)
    assert data["benchmarks"]["b"]["models"]["A"]["per_trait"] == {
        "clarity": {"scored": 1, "auto_failed": 0, "mean_score": 4.0, "true_rate": None},
        "no_hedging": {"scored": 1, "auto_failed": 0, "mean_score": None, "true_rate": 1.0}}
    assert data["judges"] == [{"backend": "offline", "model": "heuristic", "calls": 2,
                               "note": "offline heuristic baseline, not a language model"}]
    assert data["config_hashes"] == ["cfg-1"]
    index = (led.home / "reports" / "index.md").read_text()
    assert "offline heuristic baseline" in index and f"seq {led.head().seq}" in index


def test_a_replayed_offline_judge_is_still_named_a_heuristic_baseline(led):
    case_id, first = syn.opened("b", "template", "q1", "A")
    call = syn.judge_call(case_id, "parse", backend="replay", model="offline-heuristics-1")
    call = ledger.NewEvent(call.stream, call.type, {**call.data, "source_backend": "offline"}, key=call.key)
    led.append([first, call, syn.judged(case_id, "pass")])
    assert stats_of(led)["judges"] == [{"backend": "replay of offline", "model": "offline-heuristics-1",
                                        "calls": 1, "note": "offline heuristic baseline, not a language model"}]


def test_integers_beyond_64_bits_are_folded_exactly(led):
    big = 2 ** 70 + 1
    case_id, events = syn.template_case("b", "q1", "A", "pass")
    led.append(events + [syn.field(case_id, "huge", True, extracted=big, expected=big)])
    projections.refresh(led)
    line = json.loads((led.home / "reports" / "evaluations.jsonl").read_text().splitlines()[0])
    assert line["fields"]["huge"]["extracted"] == big
