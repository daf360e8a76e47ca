"""What the viewer knows about its home: the open ledger, the read models, the case index, and the
cached overview and comparison, each refreshed only when the ledger head moves.

One ``HomeView`` per served (or exported) home. Its methods are synchronous and run on the
server's event-loop thread (sqlite connections stay on one thread); each is cheap when nothing
changed: a head lookup. A request reads inside ``reading()``: the read models folded to the head
and held in one snapshot for the whole request, so a ``rebuild`` in another process (which drops
and refolds them) is never seen half done.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from evalledger import ledger, projections
from evalledger.cli.viewer import case_data, index
from evalledger.ledger import LedgerError
from evalledger.ledger.envelope import decode_json
from evalledger.projections.aggregate import build_aggregates
from evalledger.projections.appliers import restore_case
from evalledger.projections.case_result import case_result
from evalledger.projections.history import CaseNotFound, case_history
from evalledger.projections.store import ReadModelStore, reports_dir, rollback_if_open

COUNTS_KEPT = 256            # filter combinations whose case count is kept (per ledger head)


class HomeUnavailable(Exception):
    """The home's ledger cannot be read now (gone, damaged, or not a ledger any more); the message
    names the file and the reason. Pages answer 503 with it; the next request tries again."""


def file_identity(led) -> tuple[int, int, bool] | None:
    """(device, inode, empty) of the file ``led`` reads its events from; None for a server store
    (whose location names no local file: its ``path`` is where the read models are kept, if
    anywhere). ``empty``: an empty file, which a store reads as a ledger of no events."""
    if not str(led.location).startswith(str(led.path)):
        return None
    return _identity(os.stat(led.path))


def _identity(st: os.stat_result) -> tuple[int, int, bool]:
    return st.st_dev, st.st_ino, st.st_size == 0


class HomeView:
    """The viewer's handle on one home (read-only except for review writes, which open their own)."""

    def __init__(self, home: str | Path, compare: str | Path | None = None, queue: list[str] | None = None):
        self.home = str(home)
        self.compare_home = str(compare) if compare else None
        self.queue = list(queue or [])      # case ids of a review queue (``view --queue``), in order
        self._open()
        self.refresh()

    def _open(self) -> None:
        """Open the ledger (read-only), the index and the read models; forget every cached page
        figure (a reopened home may hold another ledger at the same seq)."""
        led = ledger.open_ledger(self.home, readonly=True)
        conn = None
        try:
            self.identity = file_identity(led)
            conn = index.connect(index.index_path(led))
            index.set_queue(conn, self.queue)
            # An empty ledger.db (a killed ``init`` leaves one) is read as a ledger of no events;
            # read models written into it made it "an SQLite file without the table events: not
            # an evalledger store" to every read-only command after. They are kept in memory.
            empty = self.identity is not None and self.identity[2] and led.read_models_path() == led.path
            self.models = ReadModelStore(led, path=":memory:" if empty else None, any_thread=True)
        except BaseException:
            if conn is not None:
                conn.close()
            led.close()
            raise
        self.led, self.index = led, conn
        self.stale = False             # a read failed: reopen before the next one
        # (seq, hash) of the head the models and index were last brought to: a seq alone cannot
        # tell another ledger restored under the same name at the same length
        self.seen_head: tuple[int, str] = (-1, "")
        self._overview: tuple[tuple[int, str], Any] | None = None   # each cache keyed by the head it was made at
        self._diff: tuple[tuple[tuple[int, str], tuple[int, str]], dict] | None = None
        self._choices: tuple[tuple[int, str], dict] | None = None
        self._counts: dict[tuple, int] = {}

    def close(self) -> None:
        """Close the ledger and the index."""
        self.index.close()
        self.models.close()
        self.led.close()

    def _current(self) -> None:
        """Make sure the view reads the home's ledger as it is now: the file it opened, still there.

        Deleted, or its home removed: ``HomeUnavailable`` (the open file would still be read, and
        pages would show a ledger that no longer exists). Another file under its name (a backup
        restored, another home's copied in, the home brought back) or a read that failed: opened
        again, and ``HomeUnavailable`` naming the file and the reason when that fails.
        """
        if self.identity is not None:
            try:
                now = os.stat(self.led.path)
            except OSError as exc:
                self.stale = True
                raise HomeUnavailable(f"{self.led.path}: the ledger is gone ({exc.strerror}): deleted or moved, or "
                                      "its home removed, while the viewer ran; pages show it again once it is "
                                      "back") from None
            if _identity(now) != self.identity:            # another file, or an empty one written since
                self.stale = True
        if not self.stale:
            return
        with contextlib.suppress(sqlite3.Error, LedgerError, OSError):
            self.close()
        try:
            self._open()
        except (sqlite3.Error, LedgerError, OSError) as exc:
            raise HomeUnavailable(f"{exc}" if isinstance(exc, LedgerError) else
                                  f"{self.led.path}: cannot be opened ({exc})") from None

    def _failed(self, exc: Exception) -> HomeUnavailable:
        """What a page says when reading the ledger failed midway (``exc``): the file changed
        under the viewer (truncated, overwritten). Opening it again names what is wrong with it
        now; if it opens, the page is to be asked again."""
        self.stale = True
        try:
            self._current()
        except HomeUnavailable as unavailable:
            return unavailable
        return HomeUnavailable(f"{self.led.path}: changed while this page was read ({exc}); it was opened "
                               "again: reload the page")

    def head(self) -> tuple[int, str]:
        """The ledger's head (seq, hash) right now (events other processes appended included)."""
        seq, hash = self.led.head()
        return seq, hash

    def head_token(self) -> str:
        """The seen head as the live pages are told it (``seq hash``): a page redraws when it changes."""
        return "%d %s" % self.seen_head

    def refresh(self) -> bool:
        """Fold new events into the read models and the index; True when the head moved (or the
        ledger was replaced by another, at any seq)."""
        before = self.seen_head
        with self.reading():
            pass
        return self.seen_head != before

    @contextmanager
    def reading(self) -> Iterator[None]:
        """The body (one request) reads the read models folded to the head, inside one snapshot
        (``projections.current``), with the index synced from that same snapshot. When the head has
        not moved since the last request and the models are still where it left them (no rebuild
        dropped them since), the snapshot alone: a page pays no fold's look at the ledger."""
        self._current()
        try:
            if self._unchanged():
                try:
                    yield
                finally:
                    rollback_if_open(self.models.conn)   # the snapshot ``_unchanged`` began
                return
            with projections.current(self.led, self.models) as models:
                index.sync(self.led, self.index, models.conn)
                seq, hash = models.position()
                self.seen_head = (seq, hash)
                yield
        except (sqlite3.DatabaseError, LedgerError) as exc:
            raise self._failed(exc) from None

    def _unchanged(self) -> bool:
        """True, with a snapshot of the read models begun, when the ledger's head is the one this
        view last folded and synced to and the snapshot holds the models at it (else no snapshot)."""
        if self.head() != self.seen_head:
            return False
        self.models.conn.execute("BEGIN")
        if tuple(self.models.position()) == self.seen_head:
            return True
        self.models.conn.execute("ROLLBACK")
        return False

    # --- pages' data --------------------------------------------------------------------------------
    def overview(self) -> tuple[dict, dict]:
        """The aggregates (as in aggregate-stats.json) and the runs, each with its judge ``usage``
        (calls, tokens, cost: ``index.run_usage``), cached per head."""
        if self._overview is None or self._overview[0] != self.seen_head:
            store = self.models   # inside the request's snapshot (``reading``)
            runs = with_usage(store.load_keyed("proj_runs"), index.run_usage(self.index))
            aggregates = self._written_aggregates(store.position())
            if aggregates is None:
                aggregates = build_aggregates(store.position(), list(store.iter_cases()),
                                              store.load_keyed("proj_benchmarks"), runs)
            self._overview = (self.seen_head, (aggregates, runs))
        return self._overview[1]

    def _written_aggregates(self, position: tuple[int, str]) -> dict | None:
        """``reports/aggregate-stats.json`` when it was built from exactly this position (the same
        document the fold would give, without loading every case), else None."""
        path = reports_dir(self.led) / "aggregate-stats.json"
        try:
            written = decode_json(path.read_bytes())
        except (OSError, ValueError):
            return None
        head = written.get("ledger_head") if isinstance(written, dict) else None
        if head != {"seq": position[0], "hash": position[1]}:
            return None
        return written

    def choices(self) -> dict:
        """Benchmarks and models for the filter form, cached per head."""
        if self._choices is None or self._choices[0] != self.seen_head:
            self._choices = (self.seen_head, index.choices(self.index))
        return self._choices[1]

    def cases(self, filters: dict, sort: str, descending: bool, page: int) -> dict:
        """One page of the case table."""
        if filters.get("changed"):
            if self.compare_home:
                self.diff()                                 # keeps view_changed current
            return index.query_cases(self.index, filters, sort, descending, page)
        return index.query_cases(self.index, filters, sort, descending, page, total=self._count(filters))

    def _count(self, filters: dict) -> int:
        """The number of cases matching ``filters``, counted once per ledger head: paging through a
        table (or sorting it) asks the same count again, and at 100,000 cases counting costs more
        than fetching a page."""
        key = (self.seen_head, tuple(sorted(filters.items())))
        total = self._counts.get(key)
        if total is None:
            if len(self._counts) >= COUNTS_KEPT or any(k[0] != self.seen_head for k in self._counts):
                self._counts.clear()
            total = self._counts[key] = index.count_cases(self.index, filters)
        return total

    def case(self, case_id: str) -> tuple[dict, dict | None]:
        """The case's history (from the ledger) and its result (from the read models)."""
        if not case_id.isalnum() or len(case_id) > 128:
            raise CaseNotFound(f"no case {case_id!r} in this ledger")
        row = self.models.conn.execute("SELECT state FROM proj_cases WHERE case_id = ?", (case_id,)).fetchone()
        state = restore_case(decode_json(row[0])) if row else None
        # The read models are folded up to the head this view has seen: their state gives the
        # deep-judgment fields, so the history does not fold the case's events again.
        history = case_history(self.led, case_id, state if self._folded_to_head() else None)
        return history, case_result(state) if state is not None else None

    def case_document(self, case_id: str) -> str:
        """The case page's data (``case_data.case_document``): the case's events as stored, read
        from the ledger by stream, and its result as the index keeps it."""
        if not case_id.isalnum() or len(case_id) > 128:
            raise CaseNotFound(f"no case {case_id!r} in this ledger")
        events = list(self.led.read(stream=f"case:{case_id}"))
        if not events:
            raise CaseNotFound(f"no case {case_id!r} in this ledger")
        caused_by = case_data.causes(events)
        outside = {}
        for cause in case_data.outside_causes(events, caused_by):
            found = self.led.get(cause)
            outside[cause] = found.seq if found is not None else None
        return case_data.case_document(case_id, events, caused_by, index.case_result_json(self.index, case_id),
                                       outside)

    def _folded_to_head(self) -> bool:
        """True when the read models are at the ledger's head (no append since the last refresh)."""
        return self.seen_head == self.head()

    def verify(self):
        """``led.verify()`` now (on demand: it reads every event)."""
        self._current()
        try:
            return self.led.verify()
        except (sqlite3.DatabaseError, LedgerError) as exc:
            raise self._failed(exc) from None

    def diff(self) -> dict | None:
        """The comparison with the ``--compare`` home, cached per pair of heads."""
        if not self.compare_home:
            return None
        from evalledger.projections.diff import diff_models
        with ledger.open_ledger(self.compare_home, readonly=True) as other:
            key = (self.seen_head, tuple(other.head()))
            if self._diff is None or self._diff[0] != key:
                # this home's models inside the request's snapshot (``reading``), the other's in one of theirs
                with projections.current(other) as theirs:
                    result = diff_models(self.led, self.models, other, theirs)
                index.set_changed(self.index, [c["case_id"] for c in result["changed_cases"]])
                self._diff = (key, result)
        return self._diff[1]

    def all_case_ids(self) -> list[str]:
        """Every indexed case id, sorted (the export walks them)."""
        return [r[0] for r in self.index.execute("SELECT case_id FROM view_cases ORDER BY case_id")]


def with_usage(runs: dict[str, dict], usage: dict[str, dict]) -> dict[str, dict]:
    """``runs`` (proj_runs states) each with its ``usage`` (zero calls when it made none); a run
    known only by its judge calls (calls recorded outside any run: ``index.NO_RUN``) gets a row too."""
    none = {"calls": 0, "input_tokens": 0, "output_tokens": 0, "tokens": 0, "cost": 0.0, "unpriced_calls": 0}
    out = {run_id: {**run, "usage": usage.get(run_id, none)} for run_id, run in runs.items()}
    for run_id, sums in usage.items():
        out.setdefault(run_id, {"run": run_id, "started": None, "completed": None, "usage": sums})
    return out
