"""Which rubric traits get deep judgment, and with which settings (deep-judgment-rubrics.md, "The Four Modes").

``resolve_trait(config, question_id, trait)`` returns a ``TraitPlan`` for an LLM trait that is
judged deeply, or None for standard single-pass judgment:

- ``disabled``: None for every trait.
- ``enable_all``: every LLM trait; excerpts iff ``deep_judgment_rubric_global_excerpts``.
- ``use_checkpoint``: the trait's own ``deep_judgment_*`` keys (as loaded from the checkpoint).
- ``custom``: ``deep_judgment_rubric_config["question_specific"][question_id][trait]``, else
  ``["global"][trait]``, else None (first match wins; an entry with ``enabled: false`` is None).

A per-trait value of None falls back to the rubric defaults (``*_default``: 7 excerpts, 0.80, 2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from evalledger.stages.config import DeepJudgmentTraitConfig, VerificationConfig
from evalledger.stages.excerpts import ExcerptSettings


@dataclass(frozen=True)
class TraitPlan:
    """How one trait is judged deeply, and where that decision came from (recorded in trait.scored)."""

    excerpt_enabled: bool
    excerpts: ExcerptSettings
    search_enabled: bool
    source: str

    def to_json(self) -> dict[str, Any]:
        return {"excerpt_enabled": self.excerpt_enabled, "max_excerpts": self.excerpts.max_excerpts,
                "fuzzy_match_threshold": self.excerpts.threshold,
                "excerpt_retry_attempts": self.excerpts.retry_attempts,
                "search_enabled": self.search_enabled, "source": self.source}


def _plan(config: VerificationConfig, entry: DeepJudgmentTraitConfig, source: str) -> TraitPlan | None:
    """A plan from one trait entry, filling unset values from the rubric defaults."""
    if not entry.enabled:
        return None
    pick = lambda value, default: default if value is None else value  # noqa: E731
    settings = ExcerptSettings(
        max_excerpts=pick(entry.max_excerpts, config.deep_judgment_rubric_max_excerpts_default),
        threshold=pick(entry.fuzzy_match_threshold, config.deep_judgment_rubric_fuzzy_match_threshold_default),
        retry_attempts=pick(entry.excerpt_retry_attempts, config.deep_judgment_rubric_excerpt_retry_attempts_default))
    return TraitPlan(entry.excerpt_enabled, settings, entry.search_enabled, source)


def _checkpoint_entry(trait: Mapping[str, Any]) -> DeepJudgmentTraitConfig:
    """The trait's own settings, as Karenina's LLMRubricTrait fields name them."""
    return DeepJudgmentTraitConfig(
        enabled=bool(trait.get("deep_judgment_enabled", False)),
        excerpt_enabled=bool(trait.get("deep_judgment_excerpt_enabled", True)),
        max_excerpts=trait.get("deep_judgment_max_excerpts"),
        fuzzy_match_threshold=trait.get("deep_judgment_fuzzy_match_threshold"),
        excerpt_retry_attempts=trait.get("deep_judgment_excerpt_retry_attempts"),
        search_enabled=bool(trait.get("deep_judgment_search_enabled", False)))


def resolve_trait(config: VerificationConfig, question_id: str, trait: Mapping[str, Any]) -> TraitPlan | None:
    """The deep-judgment plan of an LLM trait under the configured mode, or None (standard)."""
    mode = config.deep_judgment_rubric_mode
    name = trait["name"]
    if mode == "disabled":
        return None
    if mode == "enable_all":
        entry = DeepJudgmentTraitConfig(excerpt_enabled=config.deep_judgment_rubric_global_excerpts,
                                        search_enabled=config.deep_judgment_rubric_search_enabled)
        return _plan(config, entry, "enable_all")
    if mode == "use_checkpoint":
        return _plan(config, _checkpoint_entry(trait), "use_checkpoint")
    custom = config.deep_judgment_rubric_config
    if custom is None:
        return None
    specific = custom.question_specific.get(question_id, {})
    if name in specific:
        return _plan(config, specific[name], f"custom:question_specific:{question_id}")
    if name in custom.global_:
        return _plan(config, custom.global_[name], "custom:global")
    return None
