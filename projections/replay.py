"""Replay seeding: a new home whose first event names the source head, then the source's inputs.

``seed_replay`` appends ``replay.started`` and copies the ingestion events (files, benchmarks,
responses, cases) unchanged; the stages then re-run in the new home (the CLI drives them with the
replay judge and the ``--set`` layer). Judge steps and their outputs are not copied: they are
recomputed, the judge answering from the source's recorded calls. Reviewer overrides and notes
are not copied either: they were about the source's verdicts.

``unrecorded_requests`` lists, from the new ledger alone, the judge requests the new
configuration needed that the source never recorded (each became a ``stage.failed``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from evalledger.ledger import NewEvent

COPIED_TYPES = ("file.received", "benchmark.registered", "benchmark.rejected", "responses.registered",
                "case.opened")
_UNRECORDED = re.compile(r"no recorded answer for role '([^']+)', case (\S+), request hash ([0-9a-f]+)")


class NotThisReplay(ValueError):
    """The target has events, and they are not the beginning of this very replay."""


def replay_origin(target):
    """The target's ``replay.started`` when it is the target's first event, else None."""
    first = next(target.read(to_seq=1), None)
    return first if first is not None and first.type == "replay.started" else None


def check_resumable(target, source_label: str, overrides: dict[str, Any], live: str | None):
    """The origin of the replay begun in ``target`` that this one would carry on; None for an empty target.

    A replay recognises itself by its first event: ``replay.started`` with the same source, the
    same ``--set`` layer and the same ``--live``. Anything else raises NotThisReplay saying why.
    """
    if not target.head().seq:
        return None
    origin = replay_origin(target)
    if origin is None:
        raise NotThisReplay("it is a home with events that no replay began; replay makes a new home")
    data = origin.data
    wanted = {"source": ("the source", source_label), "overrides": ("the --set layer", overrides),
              "live": ("--live", live)}
    for key, (what, value) in wanted.items():
        if data.get(key) != value:
            raise NotThisReplay(f"it holds another replay ({what} there: {data.get(key)!r}; here: {value!r}); "
                                "replay into a new folder")
    return origin


def seed_replay(source, target, source_label: str, overrides: dict[str, Any],
                live: str | None) -> tuple[Any, int]:
    """Append the origin event and copy the source's inputs into ``target``; (origin, copied count).

    A target where this very replay began (``check_resumable``) is carried on: the copy goes on up
    to the source head the replay began from (ids are deterministic, so nothing is copied twice),
    provided the source still holds that head.
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
            raise NotThisReplay(f"the source no longer holds the head this replay began from "
                                f"(seq {head_seq} {head_hash}); replay into a new folder")
    upto = origin.data["source_head_seq"]
    copied = 0
    batch: list[NewEvent] = []
    for event in source.read(types=COPIED_TYPES, to_seq=upto):
        batch.append(NewEvent(event.stream, event.type, event.data, key=f"replay:{event.id}",
                              meta={"stage": "replay", "causation": origin.id, "source_event": event.id,
                                    "source_seq": event.seq}))
        if len(batch) >= 1000:
            copied += len(target.append(batch))
            batch = []
    if batch:
        copied += len(target.append(batch))
    return origin, copied


def unrecorded_requests(led) -> list[dict[str, str]]:
    """Judge requests the replay could not answer (role, case, request hash), sorted by case then role.

    A miss fails the stage (``stage.failed``) or, for a step the spec lets degrade (reasoning),
    is kept in the step's ``error``; both carry the replay port's message, which names them.
    """
    found = set()
    for event in led.read():
        raw = event.raw_data
        text = raw.decode("utf-8", "replace") if isinstance(raw, (bytes, bytearray, memoryview)) else str(raw)
        if event.type in ("judge.called", "replay.started") or "no recorded answer" not in text:
            continue
        for role, case_id, request_hash in _UNRECORDED.findall(text):
            found.add((case_id.rstrip(","), role, request_hash, str((event.meta or {}).get("stage"))))
    return [{"case_id": c, "role": r, "request_hash": h, "stage": s} for c, r, h, s in sorted(found)]


def merge_misses(asked: list[dict], recorded: list[dict[str, str]]) -> list[dict[str, str]]:
    """The port's own list of misses (every request asked, even those of a case whose later step
    failed, whose outputs were then never committed) joined with what the ledger says."""
    stages = {(m["case_id"], m["role"], m["request_hash"]): m["stage"] for m in recorded}
    for miss in asked:
        key = (str(miss.get("case_id")), str(miss.get("role")), str(miss.get("request_hash")))
        stages.setdefault(key, stages.get(key, "-"))
    return [{"case_id": c, "role": r, "request_hash": h, "stage": s} for (c, r, h), s in sorted(stages.items())]


def live_calls(led) -> int:
    """Judge calls a replay made live (recorded under a backend other than replay)."""
    return sum(1 for e in led.read(types=["judge.called"]) if e.data.get("backend") != "replay")


UNRECORDED_FILE = "replay-unrecorded.jsonl"


def unrecorded_path(led) -> Path:
    """Where the full list of unrecorded requests goes: in the new home, or beside a ledger file."""
    if led.home is not None:
        return Path(led.home) / UNRECORDED_FILE
    path = Path(led.recorder.path)
    return path.with_name(f"{path.stem}-{UNRECORDED_FILE}")


def write_unrecorded(led, missing: list[dict[str, str]]) -> Path:
    """Write every unrecorded request (case, role, request hash, stage), one JSON object a line,
    sorted as given; returns the file. The terminal shows only the first few of a long list."""
    path = unrecorded_path(led)
    lines = [json.dumps({"case_id": m["case_id"], "role": m["role"], "request_hash": m["request_hash"],
                         "stage": m["stage"]}, sort_keys=True) for m in missing]
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    tmp.replace(path)                        # never a half-written listing beside a finished replay
    return path
