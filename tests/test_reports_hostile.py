"""An adversarial review of the streamed report renderer (issue 15, flat ``report`` memory): inputs
its author did not write. Question ids that the natural order could not read (digits that are not
decimal, digit runs past Python's 4,300-digit ``int`` limit), and a temporary folder with no room
for the spilled report rows. The reports must still equal those of the renderer that held every
case in memory (tests/reference_reports.py), or the command must fail saying what it could not
write, leaving no reports folder that looks complete."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from disk_support import mounted_tmpfs
from evalledger import ledger
from evalledger.projections.benchmark_md import natural_key
from evalledger.projections.report_rows import ReportRows, ReportRowsError, sort_key
from evalledger.projections.reports import INCOMPLETE, MANIFEST, write_reports
from evalledger.projections.store import ReadModelStore
from evalledger.testing.arithmetic import arithmetic_benchmark
from reports_support import reference_files


def _folder_files(reports: Path) -> dict[str, bytes]:
    """The files ``evalledger report`` wrote (the manifest aside)."""
    return {p.relative_to(reports).as_posix(): p.read_bytes()
            for p in sorted(reports.rglob("*")) if p.is_file() and p.name != MANIFEST}


def _home_with_ids(tmp_path: Path, run_cli, ids: list[str]) -> Path:
    """A home whose one benchmark's questions carry ``ids``, judged by the offline judge via the CLI."""
    bench = arithmetic_benchmark(len(ids), "hostile")
    renamed = {q["id"]: new for q, new in zip(bench["questions"], ids)}
    for q in bench["questions"]:
        q["id"] = renamed[q["id"]]
    for r in bench["responses"]:
        r["question_id"] = renamed[r["question_id"]]
    source = tmp_path / "hostile.benchmark.json"
    source.write_text(json.dumps(bench))
    home = tmp_path / "home"
    assert run_cli("init", home=home).returncode == 0
    ingest = run_cli("ingest", source, home=home)
    assert ingest.returncode == 0 and "accepted" in ingest.stdout, ingest.stdout + ingest.stderr
    assert run_cli("run", "--quiet", home=home).returncode in (0, 1)
    return home


def test_question_ids_with_digits_that_are_not_decimal_are_reported(tmp_path, run_cli):
    """"²" and "①" are digits to ``str.isdigit`` but not to ``int``: the natural order once tried
    ``int("²")`` and ``evalledger report`` died with a ValueError on such an id."""
    ids = ["q1²", "²", "①", "x²y", "q٣", "q3", "q10", "q2", "Q1"]
    home = _home_with_ids(tmp_path, run_cli, ids)
    report = run_cli("report", home=home)
    assert report.returncode == 0, report.stderr
    assert "Traceback" not in report.stderr
    expected = reference_files(home)
    assert _folder_files(home / "reports") == expected
    side = expected["hostile/report.md"].decode().split("### Side by side")[1].split("###")[0]
    rows = [line.split(" | ")[0][2:] for line in side.splitlines()[4:] if line.startswith("| ")]
    # "q3" and "q٣" are the same number: they keep the order of their first cases (case ids)
    assert rows[:3] + rows[5:] == ["Q1", "q1²", "q2", "q10", "x²y", "²", "①"]
    assert sorted(rows[3:5]) == ["q3", "q٣"]


def test_the_order_key_matches_the_natural_order_on_generated_ids():
    """``sort_key`` (bytes SQL orders) against ``natural_key`` over generated ids: digits of other
    scripts, leading zeros, case, NUL, markup, non-decimal digits and digit runs of 5,000 digits."""
    rng = random.Random(1515)
    alphabet = ["0", "1", "2", "9", "00", "٣", "۰", "𝟘", "²", "①", "a", "A", "é", "E\u0301", "\x00", "|", "*",
                "[", "\n", " ", ".", "-", "q", "\U0001f600"]
    ids = ["", "1" * 5000, "1" * 4999 + "2", "0" * 4500 + "7", "q" + "9" * 4400, "q" + "9" * 4401, "7", "q07"]
    ids += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8))) for _ in range(400)]
    assert sorted(ids, key=sort_key) == sorted(ids, key=natural_key)
    for a in ids[:120]:
        for b in ids[:120]:
            assert (sort_key(a) == sort_key(b)) == (natural_key(a) == natural_key(b)), (a, b)
            assert (sort_key(a) < sort_key(b)) == (natural_key(a) < natural_key(b)), (a, b)


@pytest.fixture
def full_folder(tmp_path):
    """A 16 KB tmpfs, filled: a temporary folder with no room left (root only: mount)."""
    with mounted_tmpfs(tmp_path / "tmp-full", "16k") as disk:
        with open(disk / "filler", "wb") as fh:
            try:
                fh.write(b"\0" * (1 << 20))
            except OSError:
                pass
        yield disk


# The CLI with the report rows' page cache cut to 8 KiB, so a home of a hundred cases spills its
# rows to the temporary file as a large one does (the real CLI otherwise, in its own process).
_SMALL_CACHE_CLI = ("import sys; from evalledger.projections import report_rows; report_rows.CACHE_KIB = 8; "
                    "from evalledger.cli.main import main; sys.exit(main(sys.argv[1:]))")


def test_a_full_temporary_folder_fails_the_report_clearly_and_marks_the_folder_incomplete(tmp_path, run_cli,
                                                                                          full_folder):
    home = _home_with_ids(tmp_path, run_cli, [f"q{i}" for i in range(60)])
    assert run_cli("report", home=home).returncode == 0          # an earlier, complete render
    reports = home / "reports"
    earlier = (reports / MANIFEST).read_text().splitlines()
    with ledger.open_ledger(home, readonly=True) as led:
        case = sorted(e.data["case_id"] for e in led.read(types=["case.judged"]))[0]
    assert run_cli("override", case, "--verdict", "fail", "--reason", "checked", "--author", "ann",
                   home=home).returncode == 0

    failed = subprocess.run([sys.executable, "-c", _SMALL_CACHE_CLI, "--home", str(home), "report"],
                            capture_output=True, text=True, timeout=120,
                            env={**os.environ, "TMPDIR": str(full_folder), "SQLITE_TMPDIR": str(full_folder)})
    assert failed.returncode == 1, failed.stderr
    assert "Traceback" not in failed.stderr
    [line] = failed.stderr.strip().splitlines()
    assert line.startswith("evalledger report: error: could not write the report rows' temporary file in "
                           f"{full_folder} ")
    assert "database or disk is full" in line and "TMPDIR" in line
    # The folder now mixes two renders: it says so, and its manifest lists every file of both.
    assert str(reports / INCOMPLETE) in line
    assert "failed part way" in (reports / INCOMPLETE).read_text()
    assert set(earlier) <= set((reports / MANIFEST).read_text().splitlines())

    again = run_cli("report", home=home)                          # with room: complete again
    assert again.returncode == 0, again.stderr
    assert not (reports / INCOMPLETE).exists()
    assert _folder_files(reports) == reference_files(home)


def test_a_render_that_fails_before_writing_anything_leaves_the_earlier_folder_unmarked(tmp_path, run_cli,
                                                                                        monkeypatch):
    home = _home_with_ids(tmp_path, run_cli, ["q1", "q2"])
    assert run_cli("report", home=home).returncode == 0
    reports = home / "reports"
    before = _folder_files(reports)

    def refuse(self, result):
        raise ReportRowsError("no room for the rows")

    monkeypatch.setattr(ReportRows, "add", refuse)
    _write_reports_raising(home, reports, ReportRowsError, readonly=True)
    assert _folder_files(reports) == before and not (reports / INCOMPLETE).exists()


def _write_reports_raising(home: Path, reports: Path, error: type[BaseException], readonly: bool = False) -> None:
    """``write_reports`` of ``home``'s read models into ``reports``, which must raise ``error``."""
    with ledger.open_ledger(home, readonly=readonly) as led:
        store = ReadModelStore(led)
        try:
            with pytest.raises(error):
                write_reports(store, reports)
        finally:
            store.close()


def _outcome(total, values) -> tuple[str, str]:
    """("ok", repr of ``total(values)``) or ("error", the exception's type name)."""
    try:
        return "ok", repr(total(values))
    except (OverflowError, ValueError) as exc:
        return "error", type(exc).__name__


def test_exact_sum_equals_fsum_where_sums_overflow_or_meet_inf_and_nan():
    """Costs and rubric scores are summed case by case (ExactSum) where the in-memory renderer
    called ``math.fsum`` over them in case-id order: the same values in the same order must give
    the same float, or the same error. A partial sum past the largest float once went on as nan
    (fsum raises OverflowError) and an inf kept the partials fsum drops."""
    import itertools
    import math

    from evalledger.projections.aggregate_stream import ExactSum

    pool = [0.0, -0.0, 1e308, -1e308, 1.7976931348623157e308, 5e-324, -5e-324, 1e-300, 1.0, -1.0, 1e16, 0.1,
            math.inf, -math.inf, math.nan, 2 ** 53, 3]
    rng = random.Random(15)
    orders = list(itertools.product(pool, repeat=3))
    orders += [tuple(rng.choice(pool) for _ in range(rng.randint(4, 6))) for _ in range(4000)]

    def exact(values):
        total = ExactSum()
        for v in values:
            total.add(v)
        return total.value()

    for values in orders:
        assert _outcome(exact, values) == _outcome(math.fsum, values), values


def _manifest_temporary(reports: Path) -> Path:
    """Where this process and thread write the manifest before renaming it into place."""
    import threading
    return reports / f".{MANIFEST}.{os.getpid()}.{threading.get_ident()}.tmp"


@pytest.mark.parametrize("change", ["a report changed", "a stale file only"])
def test_a_manifest_that_cannot_be_written_after_the_files_leaves_the_folder_marked_incomplete(
        tmp_path, run_cli, change):
    """The manifest is the render's last write; when it failed (here: a folder stands where its
    temporary goes), the files were already rewritten or removed and the folder looked whole: the
    render dropped a stale file with no note at all, or left the 'is rewriting' note, its manifest
    not listing the new files."""
    home = _home_with_ids(tmp_path, run_cli, ["q1", "q2"])
    assert run_cli("report", home=home).returncode == 0
    reports = home / "reports"
    earlier = (reports / MANIFEST).read_text().splitlines()
    if change == "a report changed":
        (reports / "index.md").write_text("an earlier render's index\n")
    else:   # a file an earlier render wrote that this one does not produce
        (reports / "old-benchmark" / "report.md").parent.mkdir()
        (reports / "old-benchmark" / "report.md").write_text("gone since\n")
        (reports / MANIFEST).write_text("".join(f"{rel}\n" for rel in earlier + ["old-benchmark/report.md"]))
    _manifest_temporary(reports).mkdir()
    _write_reports_raising(home, reports, OSError)
    note = (reports / INCOMPLETE).read_text()
    assert "failed part way" in note and MANIFEST in note, note
    _manifest_temporary(reports).rmdir()
    again = run_cli("report", home=home)                          # the cause gone: complete again
    assert again.returncode == 0, again.stderr
    assert not (reports / INCOMPLETE).exists() and not (reports / "old-benchmark").exists()
    assert _folder_files(reports) == reference_files(home)


def test_a_folder_where_the_manifest_goes_stops_report_naming_it_and_the_folder_is_left_as_it_was(
        tmp_path, run_cli):
    home = _home_with_ids(tmp_path, run_cli, ["q1", "q2"])
    assert run_cli("report", home=home).returncode == 0
    reports = home / "reports"
    (reports / MANIFEST).unlink()
    (reports / MANIFEST).mkdir()
    before = _folder_files(reports)
    done = run_cli("report", home=home)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr == (f"evalledger report: error: {reports / MANIFEST}: Is a directory; the read models are "
                           f"saved, {reports} was left as the earlier render wrote it\n")
    assert _folder_files(reports) == before and not (reports / INCOMPLETE).exists()
