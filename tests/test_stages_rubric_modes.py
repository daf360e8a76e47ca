"""The rubric deep-judgment mode resolution of deep-judgment-rubrics.md, case by case."""

from __future__ import annotations

import pytest

from evalledger.stages.config import effective_config
from evalledger.stages.rubric_modes import resolve_trait

TRAIT = {"name": "safety_check", "kind": "llm", "description": "safe?", "min_score": 1, "max_score": 5}
CUSTOM = {
    "global": {
        "safety_check": {"enabled": True, "excerpt_enabled": True, "max_excerpts": 5, "search_enabled": True},
        "clarity_score": {"enabled": True, "excerpt_enabled": False},
        "tone": {"enabled": False},
    },
    "question_specific": {
        "question-abc-123": {
            "safety_check": {"enabled": True, "excerpt_enabled": True, "fuzzy_match_threshold": 0.90},
            "tone": {"enabled": True},
        },
    },
}


def plan(config: dict, trait: dict = TRAIT, question: str = "q-other"):
    return resolve_trait(effective_config(config), question, trait)


def test_disabled_is_the_default_and_resolves_every_trait_to_standard():
    assert plan({}) is None
    assert plan({"deep_judgment_rubric_mode": "disabled", "deep_judgment_rubric_config": CUSTOM}) is None


def test_enable_all_uses_the_rubric_defaults_and_global_excerpt_switch():
    p = plan({"deep_judgment_rubric_mode": "enable_all"})
    assert (p.excerpt_enabled, p.excerpts.max_excerpts, p.excerpts.threshold, p.excerpts.retry_attempts) \
        == (True, 7, 0.80, 2)
    assert p.search_enabled is False and p.source == "enable_all"
    p = plan({"deep_judgment_rubric_mode": "enable_all", "deep_judgment_rubric_global_excerpts": False,
              "deep_judgment_rubric_max_excerpts_default": 4, "deep_judgment_rubric_search_enabled": True})
    assert (p.excerpt_enabled, p.excerpts.max_excerpts, p.search_enabled) == (False, 4, True)


@pytest.mark.parametrize("trait_keys, expected", [
    ({}, None),                                               # LLMRubricTrait default: deep judgment off
    ({"deep_judgment_enabled": False, "deep_judgment_max_excerpts": 9}, None),
    ({"deep_judgment_enabled": True}, (True, 7, 0.80, 2, False)),   # None -> the global defaults
    ({"deep_judgment_enabled": True, "deep_judgment_excerpt_enabled": False, "deep_judgment_max_excerpts": 3,
      "deep_judgment_fuzzy_match_threshold": 0.95, "deep_judgment_excerpt_retry_attempts": 0,
      "deep_judgment_search_enabled": True}, (False, 3, 0.95, 0, True)),
    ({"deep_judgment_enabled": True, "deep_judgment_max_excerpts": None,
      "deep_judgment_fuzzy_match_threshold": None}, (True, 7, 0.80, 2, False)),
])
def test_use_checkpoint_reads_the_trait_and_falls_back_to_globals(trait_keys, expected):
    p = plan({"deep_judgment_rubric_mode": "use_checkpoint"}, {**TRAIT, **trait_keys})
    got = None if p is None else (p.excerpt_enabled, p.excerpts.max_excerpts, p.excerpts.threshold,
                                  p.excerpts.retry_attempts, p.search_enabled)
    assert got == expected


@pytest.mark.parametrize("question, trait, expected", [
    # 1. question-specific wins over global (its own values; unset ones from the rubric defaults, not global)
    ("question-abc-123", "safety_check", (True, 7, 0.90, 2, False, "custom:question_specific:question-abc-123")),
    # 2. no question-specific entry: the global entry
    ("q-other", "safety_check", (True, 5, 0.80, 2, True, "custom:global")),
    ("question-abc-123", "clarity_score", (False, 7, 0.80, 2, False, "custom:global")),
    # 3. nowhere: disabled
    ("question-abc-123", "completeness", None),
    ("q-other", "completeness", None),
    # an entry with enabled false disables, and question-specific can enable what global disables
    ("q-other", "tone", None),
    ("question-abc-123", "tone", (True, 7, 0.80, 2, False, "custom:question_specific:question-abc-123")),
])
def test_custom_resolution_order_question_specific_then_global_then_disabled(question, trait, expected):
    p = plan({"deep_judgment_rubric_mode": "custom", "deep_judgment_rubric_config": CUSTOM},
             {**TRAIT, "name": trait}, question)
    got = None if p is None else (p.excerpt_enabled, p.excerpts.max_excerpts, p.excerpts.threshold,
                                  p.excerpts.retry_attempts, p.search_enabled, p.source)
    assert got == expected


def test_custom_mode_without_a_config_is_disabled():
    assert plan({"deep_judgment_rubric_mode": "custom"}) is None
