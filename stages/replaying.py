"""Replay a source ledger into a new home under a changed configuration (``replay_into``).

The new home's first event, ``replay.started``, names the source head; then the ingestion
events (files, benchmarks, responses, cases) are copied unchanged and the stages re-run with
the replay judge, which answers from the source's recorded calls. Judge steps and their outputs
are not copied: they are recomputed. Reviewer overrides and notes are not copied either: they
were about the source's verdicts.

A request the new configuration needs that the source never recorded fails its case with a
``stage.failed`` that names it (``unrecorded``, ``role``, ``request_hash``), unless a live
backend answers it; ``unrecorded_requests`` lists them from the new ledger alone.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalledger import ledger
from evalledger.ledger import Event, NewEvent
from evalledger.stages.config import ConfigError
from evalledger.stages.dispatcher import RunSettings, RunSummary, run_until_idle
from evalledger.stages.judge import JudgeError, JudgeSettings, live_backend, make_judge

COPIED_TYPES = ("file.received", "benchmark.registered", "benchmark.rejected", "responses.registered",
                "case.opened")
# Ledgers written before stage.failed carried the request: their reason text is the only record.
_OLD_UNRECORDED = re.compile(r"no recorded answer for role '([^']+)', case (\S+), request hash ([0-9a-f]+)")


class ReplayRefused(ValueError):
    """A replay that cannot start: the target is not empty, or the live judge cannot be set up."""


@dataclass
class ReplayResult:
    """What ``replay_into`` did: the origin event, inputs copied, the run, and what was unrecorded."""

    origin: Event
    copied: int
    summary: RunSummary
    missing: list[dict[str, str]] = field(default_factory=list)   # {case_id, role, request_hash, stage}
    live_calls: int = 0


def replay_into(source: ledger.Ledger | str | Path, target: ledger.Ledger | str | Path, *,
                overrides: dict[str, Any] | None = None, live: str | None = None,
                progress: Any = None) -> ReplayResult:
    """Re-run the stages of ``source`` into the new, empty home ``target`` from the recorded judge calls.

    ``overrides``: a config layer applied over every case's config (``stages.config.run_layer``).
    ``live``: None (answer from the record only), ``"offline"``, ``"openai"``, or ``"auto"`` (the
    backend the source's runs used) to make the calls the source never recorded. ``progress``:
    an object with ``update(counters)``, as ``run_until_idle`` takes. Paths are opened here (the
    source read-only); Ledgers passed in stay open. Raises ReplayRefused before anything is
    written when the target has events or files, or the live judge cannot be set up.

        >>> result = replay_into("evalledger", "replayed", overrides={"fuzzy_threshold": 0.9})
        >>> result.summary.judged, result.missing
    """
    if isinstance(target, (str, Path)) and Path(target).exists() and (
            not Path(target).is_dir() or any(Path(target).iterdir())):
        raise ReplayRefused(f"{target} is not empty; replay makes a new home")
    opened_source = isinstance(source, (str, Path))
    src = ledger.open_ledger(source, readonly=True) if opened_source else source
    try:
        live = resolve_live(src, live)
        label = str(Path(src.home if src.home is not None else src.path).resolve())
        settings = JudgeSettings(backend="replay", replay_source=label, live=live)
        if live is not None:
            try:
                live_backend(settings, live)     # refuses a live judge that could never work, before any write
            except (ConfigError, ValueError, JudgeError) as exc:
                raise ReplayRefused(f"--live {live}: {exc}") from None
        led = ledger.open_ledger(target) if isinstance(target, (str, Path)) else target
        try:
            return _replay(src, led, label, settings, overrides or {}, progress)
        finally:
            if isinstance(target, (str, Path)):
                led.close()
    finally:
        if opened_source:
            src.close()


def _replay(source: ledger.Ledger, led: ledger.Ledger, label: str, settings: JudgeSettings,
            overrides: dict[str, Any], progress: Any) -> ReplayResult:
    """Seed ``led``, run the stages with the replay judge, collect what the source lacked."""
    origin, copied = seed_replay(source, led, label, overrides, settings.live)
    judge = make_judge(settings, led, source=source)
    try:
        summary = run_until_idle(led, RunSettings(config_layer=overrides, judge=judge), progress)
    finally:
        asyncio.run(judge.aclose())
    missing = merge_misses(judge.unrecorded, unrecorded_requests(led))
    return ReplayResult(origin, copied, summary, missing, live_calls(led))


def resolve_live(source: ledger.Ledger, wanted: str | None) -> str | None:
    """The live backend for a replay: as named, or (``"auto"``) the backend the source's runs used."""
    if wanted in (None, "offline", "openai"):
        return wanted
    backends = set()
    for event in source.read(types=["run.started"]):
        judge = event.data.get("judge") or {}
        if judge.get("backend") in ("offline", "openai"):
            backends.add(judge["backend"])
    return "openai" if "openai" in backends else "offline"


def seed_replay(source: ledger.Ledger, target: ledger.Ledger, source_label: str, overrides: dict[str, Any],
                live: str | None) -> tuple[Event, int]:
    """Append the origin event and copy the source's inputs into ``target``; (origin, copied count)."""
    if target.head().seq:
        raise ReplayRefused("replay goes into an empty home; this one has events")
    head = source.head()
    [origin] = target.append(NewEvent(
        f"replay:{head.hash[:16]}", "replay.started",
        {"source": source_label, "source_head_seq": head.seq, "source_head_hash": head.hash,
         "overrides": overrides, "live": live}, key="origin", meta={"stage": "replay"}))
    copied = 0
    batch: list[NewEvent] = []
    for event in source.read(types=COPIED_TYPES, to_seq=head.seq):
        # event.data is at the current schema: an old event is copied upcast, and stored as current
        batch.append(NewEvent(event.stream, event.type, event.data, key=f"replay:{event.id}",
                              meta={"stage": "replay", "causation": origin.id, "source_event": event.id,
                                    "source_seq": event.seq}))
        if len(batch) >= 1000:
            copied += len(target.append(batch))
            batch = []
    if batch:
        copied += len(target.append(batch))
    return origin, copied


def unrecorded_requests(led: ledger.Ledger) -> list[dict[str, str]]:
    """Judge requests a replay could not answer (case, role, request hash, stage), sorted by case then role.

    Read from the ``stage.failed`` events' own fields; events written before they had them are
    read from their reason text, the only record they have.
    """
    found = set()
    for event in led.read(types=["stage.failed"]):
        failed = event.payload()
        stage = str((event.meta or {}).get("stage"))
        if failed.role is not None:
            if failed.unrecorded and failed.request_hash:
                found.add((str(failed.case_id), failed.role, failed.request_hash, stage))
            continue
        for role, case_id, request_hash in _OLD_UNRECORDED.findall(failed.reason):
            found.add((case_id.rstrip(","), role, request_hash, stage))
    return [{"case_id": c, "role": r, "request_hash": h, "stage": s} for c, r, h, s in sorted(found)]


def merge_misses(asked: list[dict[str, Any]], recorded: list[dict[str, str]]) -> list[dict[str, str]]:
    """The port's own list of misses (every request asked, even those of a case whose later step
    failed, whose outputs were then never committed) joined with what the ledger says."""
    stages = {(m["case_id"], m["role"], m["request_hash"]): m["stage"] for m in recorded}
    for miss in asked:
        key = (str(miss.get("case_id")), str(miss.get("role")), str(miss.get("request_hash")))
        stages.setdefault(key, stages.get(key, "-"))
    return [{"case_id": c, "role": r, "request_hash": h, "stage": s} for (c, r, h), s in sorted(stages.items())]


def live_calls(led: ledger.Ledger) -> int:
    """Judge calls a replay made live (recorded under a backend other than replay)."""
    return sum(1 for e in led.read(types=["judge.called"]) if e.data.get("backend") != "replay")
