"""whatif answered from the recorded facts: for every sweepable setting, each point of the sweep
(``cli.whatif_sweep.sweep``) equals a real replay at that value (``replay_points``, the replay of
``evalledger replay --set``), and the cases the facts decide are not replayed."""

from __future__ import annotations

import pytest

from evalledger import ledger, projections
from evalledger.cli.whatif_sweep import sweep
from evalledger.projections.aggregate import configs_by_hash
from evalledger.projections.results import is_finished
from evalledger.projections.store import ReadModelStore
from evalledger.projections.whatif import point_metrics
from evalledger.stages.whatif import SWEEPABLE, replay_points
from evalledger.stages.whatif_facts import SUBJECT_OF, FactSweep, excerpt_facts
from stages_scripted import audit_reply, claims_reply, response_of, role_of, template_judge
from stages_support import AUDIT_LINES, RESPONSE, reconstruction_file, template_benchmark
from test_whatif import PARAPHRASE, judged_source, near_copy_judge

# A third audit line with one low error only (a credit of 4 by default, 3 expected).
AUDIT = AUDIT_LINES + [{"id": 3, "tag": "multi_minor", "difficulty": "easy", "description": "a leap",
                        "context_input": "Revenue rose 12% to $5.6 billion in 2023.",
                        "model_output": "Revenue rose 12% in 2023, so the company is thriving.",
                        "expected_credit_score": 3}]
# Settings whose sweep here moves a headline metric (the others only move what no headline shows).
MOVING = ("deep_judgment_fuzzy_match_threshold", "audit.high_severe_min", "audit.low_boundary_min",
          "audit.zone_mid_max", "claim_bands.fully_min")
# Two points per key at least, one of them away from the recorded value; the template threshold
# was 0.3 when judged: 0.1 keeps every decision (answered from facts), 0.5 rejects the near copy.
POINTS = {
    "deep_judgment_fuzzy_match_threshold": [0.1, 0.3, 0.5],
    "deep_judgment_rubric_fuzzy_match_threshold_default": [0.3, 0.9],
    "audit.high_severe_min": [1, 3],
    "audit.low_boundary_min": [1, 2],
    "audit.zone_bad_max": [1, 3],
    "audit.zone_mid_max": [3, 4],
    "claim_bands.fully_min": [4, 8],
    "claim_bands.partially_min": [2, 7],
}


RETRIED = "Human somatic cells are diploid, with 46 chromosomes in 23 pairs [2]."


def every_kind_judge():
    """Template (a near copy among the excerpts; a paraphrase first for RETRIED, so it is asked
    again), rubric, reconstruction and audit replies."""
    template, retried = near_copy_judge(), template_judge(paraphrase_first=True)

    def reply(body):
        role = role_of(body)
        if role == "score_claims":
            return claims_reply(body)
        if role in ("decompose", "check_facts", "check_logic"):
            return audit_reply(body, role)
        if "[2]" in response_of(body):
            return retried(body, role)
        return template(body)

    return reply


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """One judged home with template (deep, with a deep rubric trait), reconstruction and audit cases."""
    tmp = tmp_path_factory.mktemp("whatif-facts")
    rubric = {"traits": [{"name": "pair_count", "kind": "llm", "description": "Does it state the number of pairs?",
                          "min_score": 1, "max_score": 5}]}
    responses = [{"question_id": "q1", "model": "exact", "text": RESPONSE},
                 {"question_id": "q1", "model": "paraphrase", "text": PARAPHRASE}]
    deep = template_benchmark(config={"deep_judgment_enabled": True, "deep_judgment_excerpt_retry_attempts": 0,
                                      "deep_judgment_rubric_excerpt_retry_attempts_default": 0,
                                      "deep_judgment_fuzzy_match_threshold": 0.3,
                                      "deep_judgment_rubric_fuzzy_match_threshold_default": 0.3,
                                      "deep_judgment_rubric_mode": "enable_all"},
                              responses=responses, rubric=rubric)
    retrying = template_benchmark(name="retrying", config={
        "deep_judgment_enabled": True, "deep_judgment_excerpt_retry_attempts": 1,
        "deep_judgment_fuzzy_match_threshold": 0.3},
        responses=[{"question_id": "q1", "model": "retried", "text": RETRIED}])
    return judged_source(tmp, every_kind_judge(), ("b.json", deep), ("r.json", retrying), ("a.jsonl", AUDIT),
                         ("doc.reconstruction.json", reconstruction_file()))


def test_the_points_cover_every_sweepable_setting():
    assert set(POINTS) == set(SWEEPABLE)


@pytest.mark.parametrize("key", sorted(POINTS))
def test_each_point_equals_a_replay_at_that_value(source, key):
    values = POINTS[key]
    with ledger.open_ledger(source) as led:
        fast = sweep(led, key, values)
        replayed = [(p.value, point_metrics(p.led), len(p.missing)) for p in replay_points(led, key, values)]
    assert fast == replayed
    if key in MOVING:
        assert len({repr(metrics) for _, metrics, _ in fast}) > 1, fast


def facts_of(source, key):
    """The FactSweep of ``key`` over the source home, as ``sweep`` builds it."""
    with ledger.open_ledger(source) as led:
        projections.update(led)
        store = ReadModelStore(led)
        try:
            extractions = excerpt_facts(led, SUBJECT_OF[key]) if key in SUBJECT_OF else None
            return FactSweep(key, {}, [(s, is_finished(s)) for s in store.iter_cases()],
                             configs_by_hash(store.load_keyed("proj_runs")), extractions), \
                {s["model"]: s["case_id"] for s in store.iter_cases()}
        finally:
            store.close()


@pytest.mark.parametrize("key", sorted(k for k in POINTS if k not in SUBJECT_OF))
def test_formula_zone_and_band_keys_replay_nothing(source, key):
    facts, _ = facts_of(source, key)
    for value in POINTS[key]:
        decided, to_replay = facts.point(value)
        assert to_replay == [] and len(decided) == 7


def test_a_threshold_replays_only_the_cases_whose_excerpts_change_side(source):
    facts, ids = facts_of(source, "deep_judgment_fuzzy_match_threshold")
    # The near copy (0.46) still passes at 0.1: recorded verdict. The retried extraction's feedback
    # states the threshold, so any other threshold asks another retry: replayed.
    assert facts.point(0.1)[1] == [ids["retried"]]
    assert facts.point(0.3)[1] == []
    assert facts.point(0.5)[1] == sorted([ids["paraphrase"], ids["retried"]])   # the near copy changes side
    rubric, _ = facts_of(source, "deep_judgment_rubric_fuzzy_match_threshold_default")
    assert rubric.point(0.3)[1] == []
    assert rubric.point(0.9)[1] == sorted([ids["exact"], ids["paraphrase"]])


def test_a_fixed_setting_that_changes_the_config_sends_those_cases_to_a_replay(source):
    with ledger.open_ledger(source) as led:
        projections.update(led)
        store = ReadModelStore(led)
        try:
            facts = FactSweep("audit.high_severe_min", {"audit.max_facts": 2},
                              [(s, is_finished(s)) for s in store.iter_cases()],
                              configs_by_hash(store.load_keyed("proj_runs")))
        finally:
            store.close()
    decided, to_replay = facts.point(1)
    assert decided == [] and len(to_replay) == 7           # judged under another config: never guessed
