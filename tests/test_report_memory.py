"""What rendering the reports keeps per case (issue 15, flat memory for ``report`` and ``rebuild``):
nothing. Aggregates are tallied case by case, each case's report row goes to a temporary file
and comes back a page at a time, and every ``report.md`` is written as a stream. Real homes,
judged by the offline judge, reports written to a real folder."""

from __future__ import annotations

import json
import tracemalloc

from evalledger import ledger, projections
from evalledger.projections import case_pages
from evalledger.projections.aggregate_stream import ExactSum
from evalledger.projections.report_rows import sort_key
from evalledger.projections.reports import render_into, write_reports
from evalledger.projections.store import ReadModelStore
from evalledger.stages.dispatcher import RunSettings, run_until_idle
from evalledger.stages.intake import ingest_path
from evalledger.testing.arithmetic import arithmetic_benchmark
from reports_support import StreamsNoted

PAGE = 25   # cases per page: the page in hand is the same size at both sizes


def _judged_home(tmp_path, name: str, cases: int):
    """A home of ``cases`` arithmetic cases, judged by the offline judge, read models folded."""
    source = tmp_path / f"{name}.json"
    source.write_text(json.dumps(arithmetic_benchmark(cases // 2, name)))
    home = tmp_path / name
    with ledger.open_ledger(home) as led:
        ingest_path(led, source)
        assert run_until_idle(led, RunSettings(judge_backend="offline")).judged == cases
        projections.update(led)
    return home


def _traced_peak(home, out) -> int:
    """Bytes traced at the peak of writing every report of ``home`` into ``out``."""
    with ledger.open_ledger(home, readonly=True) as led:
        store = ReadModelStore(led)
        try:
            tracemalloc.start()
            try:
                write_reports(store, out)
                return tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
        finally:
            store.close()


def test_rendering_the_reports_keeps_nothing_per_case(tmp_path, monkeypatch):
    monkeypatch.setattr(case_pages, "CASES_PER_PAGE", PAGE)
    small, large = 300, 900
    peaks = {n: _traced_peak(_judged_home(tmp_path, f"b{n}", n), tmp_path / f"reports-{n}") for n in (small, large)}
    grown = (peaks[large] - peaks[small]) / (large - small)
    # Holding a dict, a row and a link per case (and report.md whole) grew by about 2.3 KB a case here.
    assert grown < 300, f"traced peak {peaks[small]} -> {peaks[large]} bytes: {grown:.0f} bytes per added case"
    report = (tmp_path / f"reports-{large}" / f"b{large}" / "report.md").read_text()
    assert report.count("| q") >= large // 2          # a row per question, written as a stream
    assert "cases/wrong/2.md#case-" in report          # links to cases past the first page


def test_exact_sum_equals_fsum_whatever_the_order():
    import math
    import random

    rng = random.Random(15)
    for _ in range(200):
        values = [rng.choice([rng.uniform(-1, 1) * 10 ** rng.randint(-12, 12), 0.1, 1e16, -1e16, 3])
                  for _ in range(rng.randint(0, 300))]
        total = ExactSum()
        for v in values:
            total.add(v)
        assert total.value() == math.fsum(values) == math.fsum(sorted(values))
        assert total.count == len(values) and len(total.partials) < 40


def test_the_side_by_side_order_key_sorts_as_the_natural_order_does():
    from evalledger.projections.benchmark_md import natural_key

    ids = ["q10", "q2", "q02", "q", "", "q1a", "q1", "a\x00", "a", "ab", "é1", "z9", "10", "9", "2b", "2a", "q1.5",
           "q1.10", "Q1", "q٣", "q3"]
    assert sorted(ids, key=sort_key) == sorted(ids, key=natural_key)
    assert all((sort_key(a) == sort_key(b)) == (natural_key(a) == natural_key(b)) for a in ids for b in ids)





def test_question_ids_that_sort_alike_keep_the_in_memory_renderers_order(tmp_path):
    """Ids equal in natural order ("q2", "q02") keep their first case's order, as the renderer that
    held every case sorted them; hostile characters are escaped the same way."""
    import reference_reports

    bench = arithmetic_benchmark(8, "ids")
    ids = ["q10", "q2", "q02", "Q1", "q1.5", "a|b", "x y", "q\u0663"]
    renamed = dict(zip((q["id"] for q in bench["questions"]), ids))
    for q in bench["questions"]:
        q["id"] = renamed[q["id"]]
    for r in bench["responses"]:
        r["question_id"] = renamed[r["question_id"]]
    source = tmp_path / "ids.json"
    source.write_text(json.dumps(bench))
    with ledger.open_ledger(tmp_path / "home") as led:
        assert ingest_path(led, source).status == "accepted"
        run_until_idle(led, RunSettings(judge_backend="offline"))
        projections.update(led)
        store, sink = ReadModelStore(led), StreamsNoted()
        try:
            expected = reference_reports.render_files(store)
            render_into(store, sink)
        finally:
            store.close()
        assert projections.render(led) == expected == dict(sorted(sink.files.items()))
    assert sink.streamed == ["evaluations.jsonl", "ids/report.md"]   # its rows came back from SQL
    side = expected["ids/report.md"].decode().split("### Side by side")[1].split("###")[0]
    assert side.count("\n| ") == 1 + len(ids)          # the header and a row per question
