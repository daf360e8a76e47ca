"""The listing a replay leaves beside its new home: every judge request the source never recorded.

The replay itself (seeding the new home, re-running the stages, finding what was unrecorded) is
``evalledger.stages.replaying.replay_into``; this module only writes its findings out.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from evalledger import ledger
from evalledger.projections import refresh

UNRECORDED_FILE = "replay-unrecorded.jsonl"


def unrecorded_path(led) -> Path:
    """Where the full list of unrecorded requests goes: in the new home, or beside a ledger file."""
    if led.home is not None:
        return Path(led.home) / UNRECORDED_FILE
    path = led.path
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


def finish_replay(target: ledger.Ledger | str | os.PathLike, missing: list[dict[str, str]],
                  report: bool = True) -> Path | None:
    """After ``replay_into``: write the listing of unrecorded requests (when there are any) and,
    unless ``report`` is False (the caller writes them itself), the new home's reports; returns
    the listing's path, or None."""
    led = ledger.open_ledger(target) if isinstance(target, (str, os.PathLike)) else target
    try:
        listing = write_unrecorded(led, missing) if missing else None
        if report:
            refresh(led)
        return listing
    finally:
        if led is not target:
            led.close()
