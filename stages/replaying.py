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
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Collection, Iterator

from evalledger import ledger
from evalledger.ledger import Event, NewEvent, stored_payload
from evalledger.ledger.home import HOME_FOLDERS
from evalledger.stages.config import ConfigError
from evalledger.stages.dispatcher import RunSettings, RunSummary, run_until_idle
from evalledger.stages.judge import JudgeError, JudgeSettings, live_backend, make_judge

COPY_BATCH = 1000   # inputs copied a transaction (the parts of a registration may add to it)
COPIED_TYPES = ("file.received", "benchmark.registered", "benchmark.questions_added", "benchmark.rejected",
                "responses.registered", "responses.cases_added", "responses.pending_added", "case.opened")
PART_TYPES = ("benchmark.questions_added", "responses.cases_added", "responses.pending_added")   # parts, appended with their record
# Ledgers written before stage.failed carried the request: their reason text is the only record.
_OLD_UNRECORDED = re.compile(r"no recorded answer for role '([^']+)', case (\S+), request hash ([0-9a-f]+)")


class ReplayRefused(ValueError):
    """A replay that cannot start: the target holds something other than this very replay begun
    there, the source no longer holds the head it began from, or the live judge cannot be set up."""


@dataclass
class ReplayResult:
    """What ``replay_into`` did: the origin event, inputs copied, the run, and what was unrecorded."""

    origin: Event
    copied: int
    summary: RunSummary
    missing: list[dict[str, str]] = field(default_factory=list)   # {case_id, role, request_hash, stage}
    live_calls: int = 0
    resumed: bool = False   # the target held this very replay, interrupted: it was carried on
    unapplied: list[str] = field(default_factory=list)   # the source runs' --set layers this replay did not apply


def replay_into(source: ledger.Ledger | str | Path, target: ledger.Ledger | str | Path, *,
                overrides: dict[str, Any] | None = None, live: str | None = None,
                progress: Any = None, cases: Collection[str] | None = None) -> ReplayResult:
    """Re-run the stages of ``source`` into the new, empty home ``target`` from the recorded judge calls.

    A ``target`` holding this very replay, interrupted (same source, overrides and live), is
    carried on: inputs are copied up to the source head it began from, nothing twice, and only
    the cases not yet judged are run (``ReplayResult.resumed``).

    ``overrides``: a config layer applied over every case's config (``stages.config.run_layer``).
    ``live``: None (answer from the record only), ``"offline"``, ``"openai"``, or ``"auto"`` (the
    backend the source's runs used) to make the calls the source never recorded. ``progress``:
    an object with ``update(counters)``, as ``run_until_idle`` takes. ``cases``: replay only these
    case ids (the others' openings are not copied; the what-if replays the cases its recorded
    facts cannot answer this way, into a temporary ledger). Paths are opened here (the
    source read-only); Ledgers passed in stay open. Raises ReplayRefused before anything is
    written when the target holds anything else, or the live judge cannot be set up.

        >>> result = replay_into("evalledger", "replayed", overrides={"fuzzy_threshold": 0.9})
        >>> result.summary.judged, result.missing
    """
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
        if isinstance(target, (str, Path)):
            if src.home is not None and Path(target).resolve().is_relative_to(Path(src.home).resolve()) \
                    and Path(target).resolve() != Path(src.home).resolve():
                # its files would be the source's: an inbox ingests them, a rescan moves them away
                raise ReplayRefused(f"{target} is inside the source home {src.home}; give a folder outside it")
            check_target(Path(target), label, overrides or {}, live)
        # a new target keeps its mirror as the source does (a compressed source gives a compressed replay)
        led = ledger.open_ledger(target, mirror=_new_mirror(src, Path(target))) \
            if isinstance(target, (str, Path)) else target
        try:
            return _replay(src, led, label, settings, overrides or {}, progress, cases)
        finally:
            if isinstance(target, (str, Path)):
                led.close()
    finally:
        if opened_source:
            src.close()


def _new_mirror(src: ledger.Ledger, target: Path) -> str:
    """The mirror a replay target gets: the source's form when the target is new, else the one it has."""
    return ledger.mirror_form(src) if not (target / "ledger.db").exists() else "jsonl"


def _replay(source: ledger.Ledger, led: ledger.Ledger, label: str, settings: JudgeSettings,
            overrides: dict[str, Any], progress: Any, cases: Collection[str] | None = None) -> ReplayResult:
    """Seed ``led``, run the stages with the replay judge, collect what the source lacked."""
    resumed = led.head().seq > 0
    origin, copied = seed_replay(source, led, label, overrides, settings.live, cases)
    judge = make_judge(settings, led, source=source)
    try:
        summary = run_until_idle(led, RunSettings(config_layer=overrides, judge=judge), progress)
    finally:
        asyncio.run(judge.aclose())
    missing = merge_misses(judge.unrecorded, unrecorded_requests(led))
    # Without a live backend nothing can be asked live (a resumed replay had none either: same --live).
    live = live_calls(led) if settings.live is not None else 0
    return ReplayResult(origin, copied, summary, missing, live, resumed, unapplied_settings(source, overrides))


def unapplied_settings(source: ledger.Ledger, overrides: dict[str, Any]) -> list[str]:
    """The settings the source's runs layered over their cases' configs (``run --set``, ``--repeats``,
    recorded as each ``run.started``'s ``config_layer``) that this replay's ``overrides`` do not
    set the same: its cases may judge differently for that reason alone. ``KEY=VALUE`` each, sorted."""
    unapplied = set()
    for event in source.read(types=["run.started"]):
        layer = event.data.get("config_layer") or {}
        for key, value in (layer.items() if isinstance(layer, dict) else ()):
            if key not in overrides or overrides[key] != value:
                unapplied.add(f"{key}={json.dumps(value, sort_keys=True)}")
    return sorted(unapplied)


def check_target(target: Path, source_label: str, overrides: dict[str, Any], live: str | None) -> None:
    """Raise ReplayRefused for a target that is neither new, nor empty, nor a home this replay began.

    Checked on a read-only open, before anything is written: a refusal changes nothing there.
    """
    if not target.exists():
        return
    if not target.is_dir() or (any(target.iterdir()) and not ledger.is_home(target)):
        raise ReplayRefused(f"{target} is not empty; replay makes a new home")
    if not ledger.is_home(target):
        return
    with ledger.open_ledger(target, readonly=True) as led:
        if not led.head().seq:
            if any((target / name).is_dir() and any((target / name).iterdir()) for name in HOME_FOLDERS):
                raise ReplayRefused(f"{target} is not empty; replay makes a new home")
            return                           # interrupted before its first event: a new home still
        try:
            check_resumable(led, source_label, overrides, live)
        except ReplayRefused as exc:
            raise ReplayRefused(f"{target}: {exc}") from None


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


def replay_origin(target: ledger.Ledger) -> Event | None:
    """The target's ``replay.started`` when it is the target's first event, else None."""
    first = next(target.read(to_seq=1), None)
    return first if first is not None and first.type == "replay.started" else None


def check_resumable(target: ledger.Ledger, source_label: str, overrides: dict[str, Any],
                    live: str | None) -> Event | None:
    """The origin of the replay begun in ``target`` that this one would carry on; None for an empty target.

    A replay recognises itself by its first event: ``replay.started`` with the same source, the
    same ``--set`` layer and the same ``--live``. Anything else raises ReplayRefused saying why.
    """
    if not target.head().seq:
        return None
    origin = replay_origin(target)
    if origin is None:
        raise ReplayRefused("it is a home with events that no replay began; replay makes a new home")
    data = origin.data
    wanted = {"source": ("the source", source_label), "overrides": ("the --set layer", overrides),
              "live": ("--live", live)}
    for key, (what, value) in wanted.items():
        if data.get(key) != value:
            raise ReplayRefused(f"it holds another replay ({what} there: {data.get(key)!r}; here: {value!r}); "
                                "replay into a new folder")
    return origin


def seed_replay(source: ledger.Ledger, target: ledger.Ledger, source_label: str, overrides: dict[str, Any],
                live: str | None, cases: Collection[str] | None = None) -> tuple[Event, int]:
    """Append the origin event and copy the source's inputs into ``target``; (origin, copied count).

    A target where this very replay began (``check_resumable``) is carried on: the copy goes on up
    to the source head the replay began from (ids are deterministic, so nothing is copied twice),
    provided the source still holds that head. ``cases``: copy only these cases' openings.
    """
    origin = check_resumable(target, source_label, overrides, live)
    if origin is None:
        head = source.head()
        [origin] = target.append(NewEvent(
            f"replay:{head.hash[:16]}", "replay.started",
            {"source": source_label, "source_head_seq": head.seq, "source_head_hash": head.hash,
             "overrides": overrides, "live": live}, key="origin", meta={"stage": "replay"}))
    else:
        head_seq, head_hash = origin.data["source_head_seq"], origin.data["source_head_hash"]
        at = next(source.read(from_seq=head_seq, to_seq=head_seq), None) if head_seq else None
        if head_seq and (at is None or at.hash != head_hash):
            raise ReplayRefused(f"the source no longer holds the head this replay began from "
                                f"(seq {head_seq} {head_hash}); replay into a new folder")
    upto = origin.data["source_head_seq"]
    wanted = None if cases is None else set(cases)
    copied = [0]

    def count(event: Event, new: bool) -> None:
        copied[0] += 1   # every input the target holds, new or copied by an earlier try (a resumed replay)

    for transaction in _transactions(_copies(source, origin, upto, wanted)):
        target.append_many(transaction, seen=count)
    return origin, copied[0]


def _copies(source: ledger.Ledger, origin: Event, upto: int, wanted: set[str] | None) -> Iterator[NewEvent]:
    """The source's inputs up to seq ``upto`` as events to append, each copied as its stored bytes
    (its hash checked; an old event is copied upcast, stored as current). ``wanted``: only these
    cases' openings."""
    for event in source.read(types=COPIED_TYPES, to_seq=upto):
        if wanted is not None and event.type == "case.opened" and event.data.get("case_id") not in wanted:
            continue
        yield NewEvent(event.stream, event.type, stored_payload(event, source.label), key=f"replay:{event.id}",
                       meta={"stage": "replay", "causation": origin.id, "source_event": event.id,
                             "source_seq": event.seq})


def _transactions(events: Iterator[NewEvent]) -> Iterator[Iterator[NewEvent]]:
    """``events`` cut into transactions of about COPY_BATCH events, each to be consumed whole before
    the next is asked for. A registration's parts follow it in the source and stay in its
    transaction (all or nothing, as intake stored them); ``append_many`` holds one chunk of it at a
    time, so a 100,000-case registration is not held whole, as a list of its parts was."""
    pending = next(events, None)

    def one() -> Iterator[NewEvent]:
        nonlocal pending
        taken = 0
        while pending is not None and (taken < COPY_BATCH or pending.type in PART_TYPES):
            yield pending
            taken += 1
            pending = next(events, None)

    while pending is not None:
        yield one()


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
