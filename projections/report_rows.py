"""The per-case rows of the benchmark reports, spilled to a temporary SQLite file while rendering.

A benchmark's ``report.md`` has a row per question (side by side) and per case to look at, and
its case pages list every case; rendering them once needed every case's result row and link in
memory. ``ReportRows`` writes one small row per case (in case-id order) to a temporary file and
reads them back a page at a time (``case_pages.CASES_PER_PAGE``, read when used), ordered by
SQL: the page plan of each group, the side-by-side table in natural question order, and the
cases to look at. Each case's link is computed from its place in its group, so no case-id ->
link map is held either. The file is SQLite's private temporary database: nobody else sees it,
and it is gone when the connection closes or the process dies.
"""

from __future__ import annotations

import os
import re
import sqlite3
import unicodedata
from contextlib import contextmanager
from typing import Any, Iterator

from evalledger.projections import case_pages
from evalledger.projections.benchmark_md import (
    attention_header,
    attention_reason,
    case_link,
    outcome_label,
)
from evalledger.projections.case_pages import anchor, page_names
from evalledger.projections.markdown import Markdown, cell, table, text
from evalledger.projections.results import PairCounts, group_label
from evalledger.projections.store import json_bytes

BATCH = 200   # rows written per statement (held until then)
CACHE_KIB = 4096   # the pages kept in memory; the rest go to the temporary file
SCHEMA = """
CREATE TABLE rows (n INTEGER PRIMARY KEY, bench TEXT NOT NULL, grp TEXT NOT NULL, pos INTEGER NOT NULL,
                   case_id TEXT NOT NULL, question TEXT NOT NULL, qkey BLOB NOT NULL, outcome TEXT NOT NULL,
                   attention TEXT, qid, passed INTEGER NOT NULL, finished INTEGER NOT NULL);
"""


class ReportRowsError(OSError):
    """The report rows' temporary file could not be written (its folder full, or none usable)."""


def temporary_folder() -> str:
    """The folder SQLite puts its private temporary files in on this machine: the first writable
    folder of ``SQLITE_TMPDIR``, ``TMPDIR``, /var/tmp, /usr/tmp, /tmp and the working folder
    (SQLite's own search order), to name it when writing there fails."""
    for folder in (os.environ.get("SQLITE_TMPDIR"), os.environ.get("TMPDIR"), "/var/tmp", "/usr/tmp", "/tmp", "."):
        if folder and os.path.isdir(folder) and os.access(folder, os.W_OK | os.X_OK):
            return folder
    return "."


@contextmanager
def _temporary_writes() -> Iterator[None]:
    """Turn a failure of the temporary file (a full folder, none writable) into a
    ``ReportRowsError`` that names the folder, the reason and what to do."""
    try:
        yield
    except sqlite3.Error as exc:
        raise ReportRowsError(
            f"could not write the report rows' temporary file in {temporary_folder()} "
            f"(SQLite's temporary folder: SQLITE_TMPDIR, else TMPDIR, else /var/tmp or /tmp): {exc}; free space "
            "there or point TMPDIR at a folder with room, and run the command again") from exc


def sort_key(question: str) -> bytes:
    """``natural_key(question)`` as bytes that sort the same way byte by byte (so SQL can order
    the side-by-side table): digit runs as their length then digits, text as UTF-8 with NUL
    escaped, each part ended by a terminator below every character."""
    out = bytearray()
    for i, part in enumerate(re.split(r"(\d+)", question)):   # the parts ``natural_key`` compares
        out.append(1 if i % 2 else 2)
        if i % 2:
            digits = _plain_digits(part).encode()
            out += len(digits).to_bytes(4, "big") + digits
        else:
            out += part.encode("utf-8", "surrogatepass").replace(b"\x00", b"\x00\xff") + b"\x00\x00"
    return bytes(out)


def _plain_digits(run: str) -> str:
    """A run of decimal digits (any script) as ASCII digits without leading zeros: ``str(int(run))``
    for a run of any length (``str`` of an int refuses more than 4,300 digits)."""
    ascii_run = run if run.isascii() else "".join(str(unicodedata.decimal(ch)) for ch in run)
    return ascii_run.lstrip("0") or "0"


class ReportRows:
    """Every case's report row, in a temporary SQLite file: ``add`` in case-id order, then read."""

    def __init__(self) -> None:
        with _temporary_writes():
            # "": SQLite's own private temporary file, removed as soon as it is opened (even a killed
            # reporter leaves none); pages beyond the cache go to it, not to memory.
            self.conn = sqlite3.connect("", isolation_level=None)
            for pragma in ("journal_mode = OFF", "synchronous = OFF", f"cache_size = -{CACHE_KIB}", "temp_store = FILE"):
                self.conn.execute(f"PRAGMA {pragma}")
            self.conn.executescript(SCHEMA)
            self.conn.execute("BEGIN")
            self.pending: list[tuple] = []
            self.counts: dict[str, dict[str, int]] = {}   # benchmark -> group -> cases, groups by first case

    def add(self, result: dict) -> None:
        """Keep one case's row (``case_result``), in case-id order."""
        bench, group = str(result["benchmark"]), group_label(result)
        groups = self.counts.setdefault(bench, {})
        pos = groups.get(group, 0)
        groups[group] = pos + 1
        question = str(result["question_id"])
        why = attention_reason(result)
        tail = None if why is None else " | ".join(cell(v) for v in (result["question_id"], group, why))
        qid = result["question_id"]   # as it is: the comparison pairs questions by their id's value
        self.pending.append((bench, group, pos, result["case_id"], question, sort_key(question),
                             outcome_label(result), tail,
                             qid if qid is None or isinstance(qid, (str, int, float)) else json_bytes(qid).decode(),
                             int(result["verdict"] == "pass"), int(result["status"] == "judged")))
        if len(self.pending) >= BATCH:
            self._flush()

    def _flush(self) -> None:
        """Write the rows kept so far."""
        with _temporary_writes():
            self.conn.executemany("INSERT INTO rows (bench, grp, pos, case_id, question, qkey, outcome, attention, qid,"
                                  " passed, finished) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", self.pending)
            self.pending = []

    def finish(self) -> None:
        """Every row written; index them for reading."""
        with _temporary_writes():
            self._flush()
            self.conn.execute("COMMIT")
            self.conn.execute("CREATE INDEX rows_group ON rows (bench, grp, n)")
            self.conn.execute("CREATE INDEX rows_question ON rows (bench, question, n)")
            self.conn.execute("CREATE INDEX rows_attention ON rows (bench, n) WHERE attention IS NOT NULL")

    def groups(self, bench: str) -> list[str]:
        """The benchmark's groups (model, or model [profile]), in the order of their first case."""
        return list(self.counts.get(bench, {}))

    def page_plan(self, bench: str, group_names: dict[str, str]) -> Iterator[tuple[str, list[str], int, list[str]]]:
        """``case_pages.page_plan`` of one benchmark: (group, page names, page number - 1, case ids)."""
        with _temporary_writes():
            for group, count in self.counts.get(bench, {}).items():
                names = page_names(group_names[group], -(-count // case_pages.CASES_PER_PAGE))
                ids = (row[0] for row in self.conn.execute(
                    "SELECT case_id FROM rows WHERE bench = ? AND grp = ? ORDER BY n", (bench, group)))
                for number in range(len(names)):
                    yield group, names, number, [case_id for _, case_id in zip(range(case_pages.CASES_PER_PAGE), ids)]

    def paired_counts(self, bench: str, a: str, b: str) -> PairCounts | None:
        """``results.paired_counts`` of two groups of one benchmark, counted in SQL: per question a
        group passes only if all its cases pass, and finished only if all finished."""
        with _temporary_writes():
            per_question = ("SELECT qid, MIN(passed) AS p, MIN(finished) AS f FROM rows"
                            " WHERE bench = ? AND grp = ? GROUP BY qid")
            n, both, a_only, b_only, unfinished = self.conn.execute(
                f"SELECT COUNT(*), SUM(a.p AND b.p), SUM(a.p AND NOT b.p), SUM(b.p AND NOT a.p),"
                f" SUM(NOT (a.f AND b.f)) FROM ({per_question}) AS a JOIN ({per_question}) AS b ON a.qid IS b.qid",
                (bench, a, bench, b)).fetchone()
            return (n, both, a_only, b_only, unfinished) if n else None

    def link(self, group_names: dict[str, str], group: str, pos: int, case_id: str) -> str:
        """The link to a case's section: its page (from its place in its group) and anchor."""
        page = pos // case_pages.CASES_PER_PAGE
        return f"{page_names(group_names[group], page + 1)[page]}#{anchor(case_id)}"

    def side_by_side(self, bench: str, models: list[str], group_names: dict[str, str]) -> Iterator[str]:
        """``benchmark_md.side_by_side``'s lines for one benchmark, a question at a time: questions
        in natural order (equal keys: in the order of their first case), outcomes in case-id order."""
        with _temporary_writes():
            yield from ["### Side by side", ""] + table(["question", *(text(m) for m in models)], [])[:2]
            rows = self.conn.execute(
                "SELECT question, grp, pos, case_id, outcome, MIN(n) OVER (PARTITION BY question) AS first"
                " FROM rows WHERE bench = ? ORDER BY qkey, first, n", (bench,))
            current: str | None = None
            outcomes: dict[str, list[Markdown]] = {}
            for question, group, pos, case_id, outcome, _ in rows:
                if question != current:
                    if current is not None:
                        yield _side_row(current, models, outcomes)
                    current, outcomes = question, {}
                target = self.link(group_names, group, pos, case_id)
                outcomes.setdefault(group, []).append(case_link(outcome, case_id, {case_id: target}))
            if current is not None:
                yield _side_row(current, models, outcomes)
            yield ""

    def attention(self, bench: str, group_names: dict[str, str]) -> Iterator[str]:
        """``benchmark_md.attention_section``'s lines for one benchmark (none when no case needs it)."""
        with _temporary_writes():
            rows = self.conn.execute("SELECT case_id, grp, pos, attention FROM rows"
                                     " WHERE bench = ? AND attention IS NOT NULL ORDER BY n", (bench,))
            first = True
            for case_id, group, pos, tail in rows:
                if first:
                    yield from attention_header()
                    first = False
                target = self.link(group_names, group, pos, case_id)
                yield f"| {cell(case_link(case_id, case_id, {case_id: target}))} | {tail} |"
            if not first:
                yield ""

    def close(self) -> None:
        """Close the temporary file (SQLite deletes it)."""
        self.conn.close()


def _side_row(question: str, models: list[str], outcomes: dict[str, list[Any]]) -> str:
    """One question's row of the side-by-side table."""
    row: list[Any] = [question]
    for model in models:
        found = outcomes.get(model)
        row.append(Markdown("; ".join(found)) if found else "-")
    return table([], [row])[2]
