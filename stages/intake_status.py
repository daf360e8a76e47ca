"""Case states and the intake status summary, derived from the ledger alone.

``case_states(led)`` (each case's state) and ``state_counts(led)`` (how many cases of each
benchmark are in each state) are the one place that says what state a case is in; stages,
projections and the CLI reuse them:

- ``judged``: a ``case.judged`` (template) or ``credit.scored`` (audit) event names the case, or
  (reconstruction) every original claim of the case has a ``claim.scored`` event;
- ``failed``: not judged, and a ``stage.failed`` event names the case;
- ``opened``: otherwise.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from evalledger.ledger import Ledger
from evalledger.ledger.persistence import is_disk_full

CASE_STATES = ("opened", "judged", "failed")
_STATE_EVENTS = ["case.opened", "case.judged", "credit.scored", "claim.scored", "stage.failed"]


def case_states(led: Ledger, events=None) -> dict[str, str]:
    """``{case_id: "opened" | "judged" | "failed"}`` for every opened case, in the order they
    opened, in one pass.

    ``events`` may be given (any iterable of events in seq order) to fold without reading the ledger.
    """
    read = (lambda: led.read(types=_STATE_EVENTS)) if events is None else (lambda: events)
    with _folded_facts(led, read, again=events is None) as db:
        return dict(db.execute(f"SELECT case_id, {_STATE} FROM opened AS o ORDER BY o.rowid"))


def state_counts(led: Ledger, upto: int | None = None) -> dict[str, dict[str, int]]:
    """Per benchmark, how many of its cases are in each state, as of seq ``upto`` (the head when
    None). Nothing per case is held in memory: a status of 200,000 cases held every case.opened
    event (1.2 GB), and a dict of every case id still grew with them."""
    counts: dict[str, dict[str, int]] = {}
    with _folded_facts(led, lambda: led.read(types=_STATE_EVENTS, to_seq=upto)) as db:
        for benchmark, state, count in db.execute(f"SELECT benchmark, {_STATE}, count(*) FROM opened AS o "
                                                  "GROUP BY 1, 2"):
            counts.setdefault(benchmark, dict.fromkeys(CASE_STATES, 0))[state] = count
    return counts


# The facts a case's state is decided from, a row each (``_note_state_fact``), in a temporary file.
_FACTS_SCHEMA = """
CREATE TABLE opened (case_id TEXT PRIMARY KEY, benchmark TEXT);
CREATE TABLE judged (case_id TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE failed (case_id TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE needed (case_id TEXT, claim TEXT, PRIMARY KEY (case_id, claim)) WITHOUT ROWID;
CREATE TABLE scored (case_id TEXT, claim TEXT, PRIMARY KEY (case_id, claim)) WITHOUT ROWID;
"""
# The rules of the module docstring, for the opened case ``o``: the one place they are written.
_STATE = """
CASE WHEN o.case_id IN (SELECT case_id FROM judged)
       OR (EXISTS (SELECT 1 FROM needed AS n WHERE n.case_id = o.case_id)
           AND NOT EXISTS (SELECT 1 FROM needed AS n WHERE n.case_id = o.case_id AND NOT EXISTS
                           (SELECT 1 FROM scored AS s WHERE s.case_id = n.case_id AND s.claim = n.claim)))
     THEN 'judged'
     WHEN o.case_id IN (SELECT case_id FROM failed) THEN 'failed' ELSE 'opened' END
"""
_BATCH = 5_000


@contextmanager
def _folded_facts(led: Ledger, read: Callable[[], Iterable], again: bool = True) -> Iterator[sqlite3.Connection]:
    """A connection to a temporary SQLite file holding the facts of the events ``read()`` gives
    (in seq order), taken one event at a time; the file is removed when the body is left.

    The file goes in a spill folder of ``led``'s home (``_home_spill``). When the home's disk is
    full (a run telling what it committed before the disk filled), the events are read again into
    the system's temporary folder: the account of a full home is the one place that must not fail
    for want of room there (unless not ``again``: events given once cannot be read twice)."""
    home = _home_spill(led)
    if home is not None:
        with home as folder:
            try:
                db = _fold_into(folder, read())
            except (sqlite3.Error, OSError) as exc:
                if not again or not is_disk_full(exc):
                    raise
            else:
                try:
                    yield db
                finally:
                    db.close()
                return
    with tempfile.TemporaryDirectory(prefix="evalledger-states-") as folder:
        db = _fold_into(folder, read())
        try:
            yield db
        finally:
            db.close()


def _fold_into(folder: str, events: Iterable) -> sqlite3.Connection:
    """A new facts file in ``folder`` holding the facts of ``events``, open (closed again on an error)."""
    db = sqlite3.connect(os.path.join(folder, "states.db"), isolation_level=None)
    try:
        for pragma in ("journal_mode = OFF", "synchronous = OFF", "cache_size = -4000"):
            db.execute(f"PRAGMA {pragma}")
        db.executescript(_FACTS_SCHEMA)
        rows: dict[str, list[tuple]] = {table: [] for table in ("opened", "judged", "failed", "needed", "scored")}
        db.execute("BEGIN")
        for event in events:
            _note_state_fact(event, rows)
            if sum(map(len, rows.values())) >= _BATCH:
                _insert_facts(db, rows)
        _insert_facts(db, rows)
        db.execute("COMMIT")
    except BaseException:
        db.close()
        raise
    return db


def _home_spill(led: Ledger) -> tempfile.TemporaryDirectory[str] | None:
    """A private folder for the facts file in the home, removed when left: a spill folder beside
    intake's (``intake.spill_folder``: the home's disk, not the system's temporary folder, often a
    small tmpfs, which a big home's facts could fill); one a killed process left there is removed
    first (``intake_spool.remove_leftovers``). None for a ledger without a home, or a home that
    cannot be written (a reading command on a read-only copy): those spill to the system's folder."""
    from evalledger.stages.intake import spill_folder
    from evalledger.stages.intake_spool import remove_leftovers
    if led.home is None:
        return None
    try:
        folder = spill_folder(led)
    except OSError:   # read-only: nothing of this home can be written
        return None
    remove_leftovers(Path(folder.name).parent)
    return folder


def _note_state_fact(event, rows: dict[str, list[tuple]]) -> None:
    """Add what ``event`` says of its case's state to ``rows`` (a claim id as JSON: it may be null)."""
    data = event.data
    cid = data.get("case_id")
    if event.type == "case.opened":
        rows["opened"].append((cid, data.get("benchmark")))
        if data.get("kind") == "reconstruction":
            claims = (data.get("question") or {}).get("original_claims") or []
            rows["needed"] += [(cid, json.dumps(c.get("id"))) for c in claims]
    elif event.type in ("case.judged", "credit.scored"):
        rows["judged"].append((cid,))
    elif event.type == "claim.scored":
        rows["scored"].append((cid, json.dumps(data.get("claim_id"))))
    elif event.type == "stage.failed" and cid:
        rows["failed"].append((cid,))


def _insert_facts(db: sqlite3.Connection, rows: dict[str, list[tuple]]) -> None:
    """Store and clear the facts gathered in ``rows`` (a fact seen twice counts once)."""
    for table, facts in rows.items():
        if facts:
            db.executemany(f"INSERT OR IGNORE INTO {table} VALUES ({', '.join('?' * len(facts[0]))})", facts)
            facts.clear()


@dataclass
class Status:
    """What ``evalledger status`` shows."""

    benchmarks: list[dict] = field(default_factory=list)
    cases: dict[str, int] = field(default_factory=dict)
    pending: list[dict] = field(default_factory=list)
    rejected: list[dict] = field(default_factory=list)
    head: dict[str, Any] = field(default_factory=dict)
    reconciled: list[dict] = field(default_factory=list)   # run.reconciled: work tracking had passed over

    def as_dict(self) -> dict[str, Any]:
        """The status as plain data (``status --json``)."""
        return {"benchmarks": self.benchmarks, "cases": self.cases, "pending": self.pending,
                "rejected": self.rejected, "head": self.head, "reconciled": self.reconciled}


def status(led: Ledger) -> Status:
    """Benchmarks (with their cases by state), pending responses, rejected files, the ledger head."""
    from evalledger.stages.intake import pending_responses
    head = led.head()
    per_benchmark = state_counts(led, head.seq)   # one pass up to one consistent head
    out = Status(head={"seq": head.seq, "hash": head.hash})
    for event in led.read(types=["benchmark.registered"]):
        data = event.data
        out.benchmarks.append({
            "benchmark": data["benchmark"], "name": data["name"], "kind": data["kind"],
            "format": data.get("format"), "questions": data.get("question_count") or len(data.get("questions") or []),
            "rejected_questions": len(data.get("rejected_questions") or []),
            "rejected_traits": len(data.get("rejected_traits") or []),
            "cases": per_benchmark.get(data["benchmark"], dict.fromkeys(CASE_STATES, 0)),
            "seq": event.seq})
    out.cases = {state: sum(counts[state] for counts in per_benchmark.values()) for state in CASE_STATES}
    out.pending = [{"file": e.data["file"], "sha256": e.data["sha256"], "benchmark": e.data["benchmark"],
                    "responses": e.data.get("count", 0), "seq": e.seq} for e in pending_responses(led)]
    out.rejected = _rejected_files(led)
    out.reconciled = [{"run": e.data["run"], "stage": e.data["stage"], "cases": len(e.data.get("cases") or []),
                       "tracking_position": e.data["tracking_position"], "lowered_to": e.data["lowered_to"],
                       "seq": e.seq}
                      for e in led.read(types=["run.reconciled"], to_seq=head.seq)]
    return out


def _rejected_files(led: Ledger) -> list[dict]:
    """Rejected files not accepted since, and pending responses that did not fit their benchmark."""
    accepted = {e.data["sha256"] for e in led.read(types=["file.received"])}
    latest: dict[str, Any] = {}
    for event in led.read(types=["benchmark.rejected"]):
        sha = event.data.get("sha256") or event.stream.removeprefix("file:")
        if sha not in accepted:
            latest[sha] = event
    out = [{"file": e.data["file"], "sha256": sha, "errors": len(e.data["errors"]),
            "first_error": e.data["errors"][0] if e.data["errors"] else None, "seq": e.seq}
           for sha, e in latest.items()]
    for event in led.read(types=["responses.registered"]):
        if event.data.get("rejected"):
            errors = event.data.get("errors") or []
            out.append({"file": event.data.get("file"), "sha256": event.data.get("sha256"), "errors": len(errors),
                        "first_error": errors[0] if errors else None, "seq": event.seq})
    return sorted(out, key=lambda r: r["seq"])
