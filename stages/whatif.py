"""What-ifs from the events alone: which settings a sweep may change, the sweep's points, and the
replay of a point (recorded calls only, no live judge, no new home kept).

Only settings whose effect is deterministic given the recorded calls can be swept: they change
what code computes from the judge's replies (fuzzy thresholds decide from recorded excerpt
similarities, zone bounds and credit formula parameters from recorded findings, claim bands from
recorded claim scores). A setting that changes what is asked of the judge, or that nothing reads,
is refused with the reason before anything runs. ``stages.whatif_facts`` answers each point from
the recorded facts and names the cases only a replay can answer; ``replay_points`` replays whole
points (a point meeting a request the source never recorded reports it, as ``evalledger replay`` does).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Callable, Iterator

from evalledger import ledger
from evalledger.stages.config import ConfigError, effective_config, merge_layers, parse_set
from evalledger.stages.replaying import replay_into
from evalledger.stages.whatif_facts import point_layer

MAX_POINTS = 200

# Settings a sweep may change: each only changes a deterministic step over recorded replies.
SWEEPABLE = {
    "deep_judgment_fuzzy_match_threshold": "excerpt similarity is recorded; the threshold only decides which pass",
    "deep_judgment_rubric_fuzzy_match_threshold_default": "as above, for rubric trait excerpts",
    "audit.high_severe_min": "recorded findings; the credit formula is code",
    "audit.low_boundary_min": "recorded findings; the credit formula is code",
    "audit.zone_bad_max": "the zone of a credit score is code",
    "audit.zone_mid_max": "the zone of a credit score is code",
    "claim_bands.fully_min": "claim scores are recorded; the band of a score is code",
    "claim_bands.partially_min": "claim scores are recorded; the band of a score is code",
}
# Settings a sweep refuses, and why (they change the requests, so they need new judge calls).
NEEDS_CALLS = {
    "deep_judgment_max_excerpts_per_attribute": "more (or fewer) excerpts change the extraction request, "
                                                "which needs new extract_excerpts calls",
    "deep_judgment_rubric_max_excerpts_default": "the excerpt count is part of the rubric extraction request: "
                                                 "new calls",
    "deep_judgment_excerpt_retry_attempts": "more retries need retry calls the judge never answered",
    "deep_judgment_rubric_excerpt_retry_attempts_default": "more retries need retry calls the judge never answered",
    "deep_judgment_enabled": "switching deep judgment changes every request (excerpts, reasoning, parse)",
    "deep_judgment_rubric_mode": "another rubric mode asks other trait requests",
    "deep_judgment_search_enabled": "search results enter the requests",
    "deep_judgment_rubric_search_enabled": "search results enter the requests",
    "audit.max_facts": "the number of facts is part of the decompose request",
    "audit.max_errors_per_phase": "the error limit is part of the check requests",
    "audit.numeric_deviation_threshold": "the tolerance is given to the judge in the check requests",
    "semantic_embedder": "another embedder is another model: its similarities were never recorded",
}

# Settings a what-if holds fixed at the source's values and never sweeps: another value asks other
# requests (each repeat's seed is in its requests' hashes).
FIXED_ONLY = {
    "judge_repeats": "each repeat's requests carry its seed: another count needs new calls",
    "repeat_rule": "held at the source's rule",
    "repeat_tie": "held at the source's tie setting",
    "repeat_temperature": "the temperature is part of every repeat's requests",
}

# Settings no stage or report reads: every point would give the same results (none today).
NO_EFFECT: dict[str, str] = {}


class WhatIfRefused(ValueError):
    """A sweep that cannot be answered from the recorded calls, or that is malformed."""


@dataclass
class WhatIfPoint:
    """One point of a sweep: its config layer and the replayed ledger (open while iterating)."""

    value: Any
    layer: dict[str, Any]
    led: ledger.Ledger
    missing: list[dict[str, str]]


def _decimal(text: str, where: str) -> Decimal:
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        raise WhatIfRefused(f"{where}: {text!r} is not a number") from None
    if not value.is_finite():
        raise WhatIfRefused(f"{where}: {text!r} is not a finite number")
    return value


def _plain(value: Decimal) -> int | float:
    """A point as JSON will show it: an int when whole, else the float of its exact decimal text."""
    return int(value) if value == value.to_integral_value() else float(value)


def sweep_values(text: str, where: str = "--set") -> list[int | float]:
    """The points of ``START:STOP:STEP`` (STOP included when reached), ``V1,V2,...`` or one value.

    Decimal arithmetic, so 0.70:0.95:0.05 gives exactly 0.7, 0.75, ..., 0.95.
    """
    if ":" in text:
        parts = text.split(":")
        if len(parts) != 3:
            raise WhatIfRefused(f"{where}: a range is START:STOP:STEP, not {text!r}")
        start, stop, step = (_decimal(p, where) for p in parts)
        if step <= 0:
            raise WhatIfRefused(f"{where}: the step must be positive, not {parts[2]!r}")
        if stop < start:
            raise WhatIfRefused(f"{where}: STOP {parts[1]!r} is below START {parts[0]!r}")
        count = int((stop - start) / step) + 1
        if count > MAX_POINTS:
            raise WhatIfRefused(f"{where}: {count} points; at most {MAX_POINTS}")
        return [_plain(start + i * step) for i in range(count)]
    values = [_plain(_decimal(p, where)) for p in text.split(",")]
    if len(values) > MAX_POINTS:
        raise WhatIfRefused(f"{where}: {len(values)} points; at most {MAX_POINTS}")
    return values


def parse_sweep(sets: list[str]) -> tuple[str, list[Any], dict[str, Any]]:
    """(the swept key, its points, the fixed layer) from ``--set`` arguments; exactly one may sweep.

    A key that needs new judge calls, or that no sweep supports, is refused naming the reason.
    """
    swept: list[tuple[str, list[Any]]] = []
    fixed: list[str] = []
    for item in sets:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise WhatIfRefused(f"--set {item!r}: expected KEY=VALUE or KEY=START:STOP:STEP")
        if key in NEEDS_CALLS:
            raise WhatIfRefused(f"--set {key}: cannot be answered from the recorded calls: {NEEDS_CALLS[key]}; "
                                "use 'evalledger replay --live' or a new run")
        if key in NO_EFFECT:
            raise WhatIfRefused(f"--set {key}: nothing to sweep: {NO_EFFECT[key]}")
        if key in FIXED_ONLY and (":" in value or "," in value):
            raise WhatIfRefused(f"--set {key}: cannot be swept: {FIXED_ONLY[key]}")
        if key not in SWEEPABLE and key not in FIXED_ONLY:
            raise WhatIfRefused(f"--set {key}: not a setting a what-if can sweep; these can: "
                                + ", ".join(sorted(SWEEPABLE)))
        if ":" in value or "," in value:
            swept.append((key, sweep_values(value, f"--set {key}")))
        else:
            fixed.append(f"{key}={value}")
    if len(swept) != 1:
        raise WhatIfRefused("give exactly one --set KEY=START:STOP:STEP (or KEY=V1,V2,...) to sweep; "
                            f"{len(swept)} given")
    key, values = swept[0]
    try:
        layer = parse_set(fixed)
        for value in values:
            effective_config(None, merge_layers(layer, point_layer(key, value)), where="--set", sep=" ")
    except ConfigError as exc:
        raise WhatIfRefused(str(exc)) from None
    return key, values, layer


def replay_points(source: ledger.Ledger, key: str, values: list[Any], fixed: dict[str, Any] | None = None,
                  on_point: Callable[[int, int], None] | None = None) -> Iterator[WhatIfPoint]:
    """Replay ``source`` at each point into a temporary SQLite ledger file (deleted after the point).

    Yields each point with its open ledger; nothing touches the network (no live judge).
    """
    for index, value in enumerate(values):
        if on_point is not None:
            on_point(index, len(values))
        layer = merge_layers(fixed or {}, point_layer(key, value))
        with tempfile.TemporaryDirectory(prefix="evalledger-whatif-") as tmp:
            path = Path(tmp) / "point.db"   # SQLite in WAL mode: no fsync per batch, unlike JSONL
            led = ledger.open_ledger(path)
            try:
                result = replay_into(source, led, overrides=layer, live=None)
                yield WhatIfPoint(value, layer, led, result.missing)
            finally:
                led.close()
