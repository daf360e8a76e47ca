"""A run paces Python's cyclic collector for its many allocations, and gives the thresholds back.

The collector walked every live object ten times in a 10,000-case run (a tenth of its CPU); while
a run judges, the first threshold is raised so the full collections all but stop. The thresholds
are process-wide: they must be restored when the last run in the process ends, however it ends.
"""

from __future__ import annotations

import gc
import threading

import pytest

from evalledger import ledger
from evalledger.stages.dispatcher import RunSettings, run_until_idle
from evalledger.stages.gc_pacing import RUN_THRESHOLDS, fewer_collections
from stages_support import home_with, template_benchmark


@pytest.fixture
def default_thresholds():
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield (700, 10, 10)
    gc.set_threshold(*before)


def test_a_run_judges_with_the_collector_paced_and_restores_the_thresholds(tmp_path, default_thresholds):
    home = home_with(tmp_path, ("b.json", template_benchmark(responses=[
        {"question_id": "q1", "model": m, "text": "46 chromosomes in 23 pairs [1]."} for m in ("a", "b")])))
    seen = []

    def should_stop():   # asked before each case starts: what the collector is paced by meanwhile
        seen.append(gc.get_threshold())
        return False

    with ledger.open_ledger(home) as led:
        summary = run_until_idle(led, RunSettings(judge_backend="offline"), should_stop=should_stop)
    assert summary.judged == 2
    assert seen and set(seen) == {RUN_THRESHOLDS}
    assert gc.get_threshold() == default_thresholds


def test_a_run_that_fails_still_restores_the_thresholds(tmp_path, default_thresholds):
    home = home_with(tmp_path, ("b.json", template_benchmark()))

    def should_stop():
        raise RuntimeError("stopped by the test")

    with ledger.open_ledger(home) as led, pytest.raises(RuntimeError, match="stopped by the test"):
        run_until_idle(led, RunSettings(judge_backend="offline"), should_stop=should_stop)
    assert gc.get_threshold() == default_thresholds


def test_overlapping_users_restore_the_thresholds_only_when_the_last_one_ends(default_thresholds):
    first_in, release = threading.Event(), threading.Event()
    during: list[tuple[int, int, int]] = []

    def long_run():
        with fewer_collections():
            first_in.set()
            release.wait(10)
            during.append(gc.get_threshold())

    worker = threading.Thread(target=long_run)
    worker.start()
    first_in.wait(10)
    with fewer_collections():   # a second run starts while the first is in progress, ends first
        pass
    assert gc.get_threshold() == RUN_THRESHOLDS   # the first run is still going
    release.set()
    worker.join(10)
    assert during == [RUN_THRESHOLDS]
    assert gc.get_threshold() == default_thresholds
