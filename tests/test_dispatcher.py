"""The dispatcher: pending work derived from the ledger, exactly-once commits, failure isolation,
retries of failed cases, reentrancy, concurrency across cases and the progress display."""

from __future__ import annotations

import io
import time

from evalledger import ledger
from evalledger.cli.main import main
from evalledger.cli.progress import Progress
from evalledger.stages.casework import CaseWork
from evalledger.stages.config import effective_config
from evalledger.stages.dispatcher import RunSettings, find_pending, run_until_idle
from evalledger.stages.intake import ingest_path
from evalledger.stages.judge import JudgeSettings, make_judge
from evalledger.stages.template import judge_template
from evalledger.testing.stand_in import StandIn, StandInThread, Status
from stages_scripted import dispatch, template_judge
from stages_support import RESPONSE, data, home_with, outputs, template_benchmark, write_json

TWO = [{"question_id": "q1", "model": "model-a", "text": RESPONSE},
       {"question_id": "q1", "model": "model-b", "text": RESPONSE.replace("23 pairs", "24 pairs")}]


def test_a_second_run_finds_nothing_and_appends_nothing(tmp_path):
    home = home_with(tmp_path, ("b.json", template_benchmark(responses=TWO)))
    with ledger.open_ledger(home) as led:
        first = run_until_idle(led)
        head = led.head()
        again = run_until_idle(led)
        assert (first.cases, first.judged, again.cases) == (2, 2, 0)
        assert led.head() == head                      # not even run.started
        assert led.tracking_position("stage:template") == head.seq     # settled up to the last scan


def test_pending_work_comes_from_the_ledger_not_from_the_tracking_position(tmp_path):
    home = home_with(tmp_path, ("b.json", template_benchmark(responses=TWO)))
    with ledger.open_ledger(home) as led:
        run_until_idle(led)
        before = outputs(home)
        led.append([], tracking=("stage:template", 0))   # a stale position: scan everything again
        assert find_pending(led).cases == []
        assert run_until_idle(led).cases == 0
        assert outputs(home) == before
        assert led.tracking_position("stage:template") > 0


def test_doing_a_case_again_appends_nothing_new(tmp_path):
    """What a crash between a case's judge calls and its commit amounts to: the case is redone."""
    home = home_with(tmp_path, ("b.json", template_benchmark(config={"deep_judgment_enabled": True})))
    with ledger.open_ledger(home) as led:
        [opened] = led.read(types=["case.opened"])
        config = effective_config(opened.data["config"])

        def work(run_id):
            judge = make_judge(JudgeSettings(backend="offline"), led)
            return CaseWork(opened, "template", config, config.hash(), run_id, judge)

        import asyncio
        first = work("run-1")
        asyncio.run(judge_template(first))
        stored = led.append(first.outputs)
        head = led.head()
        second = work("run-2")                         # a later run, after the crash
        asyncio.run(judge_template(second))
        again = led.append(second.outputs)
        assert [e.id for e in again] == [e.id for e in stored]
        assert led.head() == head                      # nothing new, not even judge calls (reused)


class FailingFor:
    """A judge that fails every call of one case (an outage for that case only)."""

    def __init__(self, inner, case_id):
        self.inner, self.case_id = inner, case_id
        self.name, self.model = inner.name, inner.model

    async def call(self, role, request, *, case_id, attempt=1, meta=None):
        if case_id == self.case_id:
            raise RuntimeError("judge unreachable for this case")
        return await self.inner.call(role, request, case_id=case_id, attempt=attempt, meta=meta)


def test_a_failing_case_gets_stage_failed_and_the_others_go_on_then_retry_failed(tmp_path):
    home = home_with(tmp_path, ("b.json", template_benchmark(responses=TWO)))
    with ledger.open_ledger(home) as led:
        bad = [e.data["case_id"] for e in led.read(types=["case.opened"])][1]
        judge = FailingFor(make_judge(JudgeSettings(backend="offline"), led), bad)
        summary = run_until_idle(led, RunSettings(judge=judge))
        assert (summary.judged, summary.failed) == (1, 1)
        [failed] = data(home, "stage.failed")
        assert failed["case_id"] == bad and failed["stage"] == "template"
        assert "judge unreachable" in failed["reason"]
        assert [d["case_id"] for d in data(home, "case.judged")] != [bad]
        assert run_until_idle(led).cases == 0           # a failed case waits for --retry-failed
        retried = run_until_idle(led, RunSettings(retry_failed=True))
        assert (retried.cases, retried.judged) == (1, 1)
        assert {d["case_id"] for d in data(home, "case.judged")} == {e.data["case_id"] for e in
                                                                     led.read(types=["case.opened"])}
        assert len(data(home, "stage.failed")) == 1
        assert run_until_idle(led, RunSettings(retry_failed=True)).cases == 0


def test_cli_exit_code_and_retry_failed(tmp_path, capsys, monkeypatch):
    home = home_with(tmp_path, ("b.json", template_benchmark()))
    # a judge that refuses every request (400, not retried): the case fails, the run says why
    with StandInThread(StandIn().script(*[Status(400)] * 8)) as stand_in:
        monkeypatch.setenv("OPENAI_BASE_URL", stand_in.base_url)
        assert main(["--home", str(home), "run", "--quiet", "--judge", "openai", "--model", "m"]) == 1
    out = capsys.readouterr().out
    assert "1 failed" in out and "failed template case" in out
    [failed] = data(home, "stage.failed")
    assert "400" in failed["reason"]
    assert main(["--home", str(home), "run", "--quiet"]) == 0
    assert "nothing pending" in capsys.readouterr().out
    assert main(["--home", str(home), "run", "--quiet", "--retry-failed"]) == 0
    [judged] = data(home, "case.judged")
    assert judged["case_id"] == failed["case_id"]
    assert main(["--home", str(home), "run", "--set", "no_such_key=1"]) == 2


def test_new_cases_arriving_during_a_run_are_processed_before_it_ends(tmp_path):
    home = home_with(tmp_path, ("b.json", template_benchmark()))
    more = write_json(tmp_path / "more.json", {"format": "evalledger/responses@1", "benchmark": "chromosomes",
                                               "responses": [TWO[1]]})

    class Dropper(Progress):
        def update(self, counters):
            super().update(counters)
            if counters.cases_done == 1:
                assert ingest_path(led, more).status == "accepted"

    with ledger.open_ledger(home) as led:
        summary = run_until_idle(led, RunSettings(), Dropper(io.StringIO()))
        assert (summary.cases, summary.judged) == (2, 2)
        assert len(data(home, "run.started")) == 1


def test_a_call_while_running_returns_busy_at_once(tmp_path):
    home = home_with(tmp_path, ("b.json", template_benchmark()))
    inner = []

    class Reenter(Progress):
        def update(self, counters):
            inner.append(run_until_idle(led))

    with ledger.open_ledger(home) as led:
        summary = run_until_idle(led, RunSettings(), Reenter(io.StringIO()))
    assert summary.judged == 1 and inner and inner[0].busy and inner[0].cases == 0


def test_judge_calls_run_concurrently_across_cases(tmp_path):
    responses = [{"question_id": "q1", "model": f"m{i}", "text": RESPONSE.replace("23", str(20 + i))}
                 for i in range(6)]
    home = home_with(tmp_path, ("b.json", template_benchmark(responses=responses)))
    with StandInThread(StandIn(delay=0.4, reply_fn=dispatch(template_judge()))) as stand_in, \
            ledger.open_ledger(home) as led:
        began = time.monotonic()
        summary = run_until_idle(led, RunSettings(judge_backend="openai", judge_model="m",
                                                  judge_options={"base_url": stand_in.base_url}))
        elapsed = time.monotonic() - began
    assert summary.judged == 6 and len(stand_in.requests) == 6
    assert elapsed < 6 * 0.4 * 0.6, elapsed            # one parse call per case, in parallel
    verdicts = {d["case_id"]: d["verdict"] for d in data(home, "case.judged")}
    assert sorted(verdicts.values()) == ["fail"] * 5 + ["pass"]


def test_progress_on_a_terminal_and_as_plain_lines():
    from evalledger.stages.casework import Counters
    tty, plain = io.StringIO(), io.StringIO()
    for stream, is_tty in ((tty, True), (plain, False)):
        progress = Progress(stream, tty=is_tty)
        progress.start(4, Counters())
        progress.update(Counters(judge_calls=5, retries=1, failures=1, cases_done=2))
        progress.finish(Counters(judge_calls=9, retries=1, failures=1, cases_done=4))
    assert "\r[############............] cases 2/4 | judge calls 5 | retries 1 | failures 1" in tty.getvalue()
    assert tty.getvalue().endswith("\n") and "ETA" in tty.getvalue()
    lines = plain.getvalue().splitlines()
    assert lines[0].startswith("cases 0/4") and "ETA --:--" in lines[0]
    assert lines[1].startswith("cases 2/4 | judge calls 5 | retries 1 | failures 1 | elapsed")
    assert lines[-1].startswith("cases 4/4 | judge calls 9")
    assert "\r" not in plain.getvalue()


def test_warnings_print_above_the_bar_on_a_terminal_and_the_bar_is_redrawn():
    import logging

    from evalledger.stages.casework import Counters
    stream = io.StringIO()
    progress = Progress(stream, tty=True)
    progress.start(4, Counters())
    progress.update(Counters(judge_calls=1, cases_done=1))
    logging.getLogger("evalledger.judge").warning("judge parse for case c1, attempt 1: invalid reply")
    progress.finish(Counters(judge_calls=2, cases_done=4))
    text = stream.getvalue()
    # the warning clears the bar's line, stands on a line of its own, and the bar comes back
    assert "\r\x1b[Kjudge parse for case c1, attempt 1: invalid reply\n\r[######" in text
    # after the run the handler is gone: later warnings are not written to this stream
    logging.getLogger("evalledger.judge").warning("after the run")
    assert "after the run" not in stream.getvalue()


def test_an_openai_judge_without_a_model_is_a_usage_error(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_MODEL", raising=False)
    home = home_with(tmp_path, ("b.json", template_benchmark()))
    assert main(["--home", str(home), "run", "--judge", "openai"]) == 2
    assert "model" in capsys.readouterr().err
    assert data(home, "run.started") == [] and data(home, "stage.failed") == []


def test_run_until_idle_called_from_inside_an_event_loop(tmp_path):
    import asyncio
    home = home_with(tmp_path, ("b.json", template_benchmark()))

    async def daemon_like():
        with ledger.open_ledger(home) as led:
            return run_until_idle(led)

    assert asyncio.run(daemon_like()).judged == 1


def test_plain_progress_lines_come_at_each_tenth_not_per_case():
    from evalledger.stages.casework import Counters
    plain = io.StringIO()
    progress = Progress(plain, tty=False, every_s=3600)
    progress.start(100, Counters())
    for done in range(1, 101):
        progress.update(Counters(judge_calls=done, cases_done=done))
    progress.finish(Counters(judge_calls=100, cases_done=100))
    lines = plain.getvalue().splitlines()
    assert [line.split(" |")[0] for line in lines] == ["cases 0/100"] + [f"cases {n}/100" for n in range(10, 101, 10)]


def test_a_case_that_ends_without_its_terminal_event_fails_instead_of_staying_pending(tmp_path):
    home = tmp_path / "home"
    with ledger.open_ledger(home) as led:
        led.append(ledger.NewEvent("case:d0c", "case.opened", {
            "case_id": "d0c", "benchmark": "b", "kind": "reconstruction", "question_id": "doc", "model": None,
            "question": {"doc_id": "doc", "original_claims": [], "target_document": ""},
            "response": {"answers": [], "synthesis": ""}, "config": {}}, key="open"))
        with StandInThread(StandIn(reply_fn=lambda body: {"evaluations": []})) as stand_in:
            summary = run_until_idle(led, RunSettings(judge_backend="openai", judge_model="m",
                                                      judge_options={"base_url": stand_in.base_url}))
        assert (summary.cases, summary.failed) == (1, 1)
        [failed] = data(home, "stage.failed")
        assert "no claim.scored" in failed["reason"]
        assert run_until_idle(led).cases == 0


def test_should_stop_is_asked_before_each_case_and_the_rest_stays_pending(tmp_path):
    six = [{"question_id": "q1", "model": f"model-{i}", "text": RESPONSE} for i in range(6)]
    home = home_with(tmp_path, ("b.json", template_benchmark(responses=six)))

    class Counting:   # counts the cases that finished, as the daemon's progress does
        done = 0

        def start(self, *args): pass

        def update(self, counters): Counting.done = counters.cases_done

        def finish(self, counters): pass

    one_at_a_time = RunSettings(max_cases_in_flight=1)
    with ledger.open_ledger(home) as led:
        head = led.head()
        nothing = run_until_idle(led, one_at_a_time, should_stop=lambda: True)
        assert (nothing.cases, led.head()) == (0, head)   # asked before the pass: not even run.started
        stopped = run_until_idle(led, one_at_a_time, Counting(), should_stop=lambda: Counting.done >= 2)
        assert (stopped.cases, stopped.judged, stopped.stop, stopped.pending) == (2, 2, "requested", 4)
        [completed] = [e.data for e in led.read(types=["run.completed"])]
        assert completed["stop"] == "requested" and completed["left_pending"] == 4
        rest = run_until_idle(led)
        assert (rest.cases, rest.judged, rest.stop) == (4, 4, None)
        judged = [e.data["case_id"] for e in led.read(types=["case.judged"])]
        assert len(judged) == len(set(judged)) == 6
