"""What-ifs from the recorded facts: the per-case inputs a swept setting acts on, extracted once,
then each case's outcome at every point decided by the stages' own functions. No judge is asked
and nothing is written.

A case is answered from its facts only when the point's effective config differs from the one
that judged it in the swept key alone (its events carry one ``config_hash``, and the config the
runs declared under that hash, with the key put back at the point, hashes to it again). Then:

- ``audit.*`` formula and zone keys: ``credit.scored`` is recomputed from the recorded counts of
  high and low errors by ``stages.audit.credit_fields`` (the requests never carry these keys);
- ``claim_bands.*``: each recorded claim score is banded again by ``stages.reconstruction.band_fields``
  (the ``score_claims`` request never carries the bands);
- ``deep_judgment_fuzzy_match_threshold``: every quote the judge offered in its recorded first
  extraction reply (``judge.called``) is scored once by ``stages.fuzzy``; when ``fuzzy.passes``
  decides every quote as at the recorded threshold and no retry was asked, every later request is
  the recorded one, so the recorded verdict stands;
- ``deep_judgment_rubric_fuzzy_match_threshold_default``: a case without rubric excerpts keeps
  its recorded outcome.

Every other case (not finished in the source, judged under another config, a quote that changes
side, a retry, whose feedback quotes the threshold, a rubric extraction) is named for a real
replay (``replaying.replay_into(..., cases=...)``), so each point equals ``replay --set``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import orjson

from evalledger import ledger
from evalledger.stages.audit import credit_fields
from evalledger.stages.config import ConfigError, VerificationConfig, effective_config, merge_layers
from evalledger.stages.excerpts import offered_quotes
from evalledger.stages.fuzzy import passes, similarity
from evalledger.stages.judge.registry import role
from evalledger.stages.judge.roles import ExtractExcerptsRequest
from evalledger.stages.reconstruction import band_fields

AUDIT_KEYS = frozenset(("audit.high_severe_min", "audit.low_boundary_min", "audit.zone_bad_max",
                        "audit.zone_mid_max"))
BAND_KEYS = frozenset(("claim_bands.fully_min", "claim_bands.partially_min"))
TEMPLATE_THRESHOLD = "deep_judgment_fuzzy_match_threshold"
RUBRIC_THRESHOLD = "deep_judgment_rubric_fuzzy_match_threshold_default"
SUBJECT_OF = {TEMPLATE_THRESHOLD: "template", RUBRIC_THRESHOLD: "rubric"}
FACT_KEYS = AUDIT_KEYS | BAND_KEYS | set(SUBJECT_OF)

# What the headline metrics read of a case state (projections.whatif.headline_metrics).
KEPT = ("case_id", "benchmark", "kind", "question_id", "model", "profile", "config", "question", "judged",
        "claims", "credit", "failures")
# The credit.scored fields the read models keep (projections.appliers._credit).
CREDIT_KEPT = ("high", "low", "credit_score", "zone", "expected_credit_score", "expected_zone")


@dataclass
class Extraction:
    """A case's recorded excerpt extraction for one subject: the exact scores of the quotes the
    judge offered in its first reply, whether a retry was asked, whether a step had no usable reply."""

    scores: list[float]
    retried: bool = False
    unusable: bool = False


def excerpt_facts(led: ledger.Ledger, subject: str) -> dict[str, Extraction]:
    """Per case id, its ``subject`` extraction, from one pass over the ``judge.called`` events."""
    replies: dict[str, dict[int, set[bytes]]] = {}
    requests: dict[str, dict[str, Any]] = {}
    failed: dict[str, set[int]] = {}
    for row in led.scan(1, led.head().seq, ("judge.called",)):
        raw = row.data
        if isinstance(raw, (bytes, str)):
            if b'"role":"extract_excerpts"' not in (raw if isinstance(raw, bytes) else raw.encode()):
                continue          # most calls are other roles: skip them before decoding
            data = orjson.loads(raw)
        else:
            data = raw
        if data.get("role") != "extract_excerpts":
            continue
        payload = ((data.get("request") or {}).get("payload")) or {}
        if (payload.get("subject") or "template") != subject:
            continue
        case_id, step = str(data.get("case_id")), int(data.get("step_attempt") or 1)
        if data.get("error") is None and data.get("reply") is not None and not data.get("stored_cut"):
            replies.setdefault(case_id, {}).setdefault(step, set()).add(orjson.dumps(
                data["reply"], option=orjson.OPT_SORT_KEYS))
            if step == 1:
                requests[case_id] = payload
        else:
            failed.setdefault(case_id, set()).add(step)
    out = {}
    for case_id in sorted(set(replies) | set(failed)):
        steps = replies.get(case_id, {})
        first = steps.get(1, set())
        unusable = len(first) != 1 or any(s not in steps for s in failed.get(case_id, set()))
        retried = any(s > 1 for s in set(steps) | failed.get(case_id, set()))
        scores = [] if unusable else first_scores(requests[case_id], orjson.loads(next(iter(first))))
        out[case_id] = Extraction(scores if scores is not None else [], retried, unusable or scores is None)
    return out


def first_scores(payload: dict[str, Any], reply: Any) -> list[float] | None:
    """The exact fuzzy score of every quote the stage checked in a first extraction reply (the
    quotes ``excerpts.offered_quotes`` keeps, per attribute asked); None when the reply does not validate."""
    try:
        request = ExtractExcerptsRequest.model_validate(payload)
        parsed = role("extract_excerpts").validate_reply(request, reply)
    except ValueError:
        return None
    return [similarity(quote.text, request.response)
            for attribute in request.attributes
            for quote in offered_quotes(parsed.excerpts.get(attribute.name, []), request.max_excerpts)]


def point_layer(key: str, value: Any) -> dict[str, Any]:
    """The config layer that sets dotted ``key`` to ``value``."""
    layer: dict[str, Any] = {}
    node = layer
    parts = key.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
    return layer


def value_at(config: Any, key: str) -> Any:
    """The value of dotted ``key`` in a config's JSON (None when absent)."""
    for part in key.split("."):
        if not isinstance(config, dict):
            return None
        config = config.get(part)
    return config


def slim(state: dict[str, Any]) -> dict[str, Any]:
    """The parts of a source case state a replay would give too: reviewer events are not copied."""
    return {**{k: state.get(k) for k in KEPT}, "overrides": [], "confirmations": []}


class FactSweep:
    """One sweep of ``key`` answered from recorded facts: ``point(value)`` gives the case states it
    decided and the case ids only a replay can answer.

    ``cases``: (case state as the read models fold it, finished in the source); ``configs``: the
    effective configs the runs declared, by config hash; ``extractions``: ``excerpt_facts`` for a
    threshold key.
    """

    def __init__(self, key: str, fixed: dict[str, Any], cases: Iterable[tuple[dict[str, Any], bool]],
                 configs: dict[str, Any], extractions: dict[str, Extraction] | None = None):
        if key not in FACT_KEYS:
            raise ValueError(f"{key} is not answered from recorded facts")
        self.key, self.fixed, self.extractions = key, fixed, extractions or {}
        self._configs: dict[tuple[str, Any], VerificationConfig | None] = {}
        self._hashes: dict[tuple[str, Any], str | None] = {}
        self.cases: list[tuple[dict[str, Any], str, Any]] = []    # (state, its config's JSON, recorded value)
        self.always_replayed: list[str] = []
        for state, finished in cases:
            recorded = self._recorded_value(state, configs) if finished else None
            if recorded is None:
                self.always_replayed.append(str(state["case_id"]))
            else:
                self.cases.append((slim(state), recorded[0], recorded[1]))

    def _config(self, config_json: str, value: Any) -> VerificationConfig | None:
        """The effective config of a case config at ``value`` of the key, under the fixed layer (cached)."""
        slot = (config_json, value)
        if slot not in self._configs:
            try:
                layer = merge_layers(self.fixed, point_layer(self.key, value))
                self._configs[slot] = effective_config(orjson.loads(config_json), layer)
            except ConfigError:
                self._configs[slot] = None
        return self._configs[slot]

    def _recorded_value(self, state: dict[str, Any], configs: dict[str, Any]) -> tuple[str, Any] | None:
        """(config JSON, the key's value that judged the case) when the case was judged under one
        config that equals the point's but for the key; None when only a replay can tell."""
        hashes = state.get("config_hashes") or []
        if len(hashes) != 1 or hashes[0] not in configs:
            return None
        value = value_at(configs[hashes[0]], self.key)
        config_json = orjson.dumps(state.get("config") or {}, option=orjson.OPT_SORT_KEYS).decode()
        if value is None or self._hash(config_json, value) != hashes[0]:
            return None
        return config_json, value

    def _hash(self, config_json: str, value: Any) -> str | None:
        """The config hash of ``_config`` (cached: every case of a benchmark shares it)."""
        slot = (config_json, value)
        if slot not in self._hashes:
            config = self._config(config_json, value)
            self._hashes[slot] = None if config is None else config.hash()
        return self._hashes[slot]

    def point(self, value: Any) -> tuple[list[dict[str, Any]], list[str]]:
        """(the case states decided from the facts at ``value``, the case ids to replay), sorted by id."""
        decided, replay = [], list(self.always_replayed)
        for state, config_json, recorded in self.cases:
            outcome = self._outcome(state, config_json, recorded, value)
            if outcome is None:
                replay.append(str(state["case_id"]))
            else:
                decided.append(outcome)
        return decided, sorted(replay)

    def _outcome(self, state: dict[str, Any], config_json: str, recorded: Any, value: Any) -> dict[str, Any] | None:
        """The case's state at ``value``, or None when a replay must answer it."""
        if self.key in AUDIT_KEYS:
            return self._audited(state, config_json, value)
        if self.key in BAND_KEYS:
            return self._banded(state, config_json, value)
        if value == recorded:
            return state
        extraction = self.extractions.get(str(state["case_id"]))
        if extraction is None:
            return state                      # no excerpts of this subject: the threshold decides nothing
        if self.key == RUBRIC_THRESHOLD or extraction.retried or extraction.unusable:
            return None
        same = all(passes(s, value) == passes(s, recorded) for s in extraction.scores)
        return state if same else None

    def _audited(self, state: dict[str, Any], config_json: str, value: Any) -> dict[str, Any] | None:
        """An audit case with its credit score and zones recomputed from the recorded error counts."""
        credit = state["credit"]
        if state["kind"] != "audit" or credit is None:
            return state
        config = self._config(config_json, value)
        if config is None or not all(isinstance(credit.get(k), int) for k in ("high", "low")):
            return None
        fields = credit_fields(credit["high"], credit["low"], credit.get("expected_credit_score"), config.audit)
        return {**state, "credit": {**credit, **{k: fields[k] for k in CREDIT_KEPT}}}

    def _banded(self, state: dict[str, Any], config_json: str, value: Any) -> dict[str, Any] | None:
        """A reconstruction case with every recorded claim score banded again."""
        if state["kind"] != "reconstruction" or not state["claims"]:
            return state
        config = self._config(config_json, value)
        if config is None:
            return None
        return {**state, "claims": {cid: {**claim, **band_fields(claim["score"], config.claim_bands)}
                                    for cid, claim in state["claims"].items()}}
