"""The dispatcher: finds pending work in the ledger and runs the stages until idle, exactly once.

Stages subscribe to ``case.opened`` of their kind (template, reconstruction, audit). A case is
pending for a stage when its ``case.opened`` is in the ledger and the stage's terminal output is
not (``case.judged``, ``claim.scored``, ``credit.scored``), nor a ``stage.failed`` (unless
``retry_failed``); ``stages.pending`` finds them. Work is derived from the ledger, never from
memory, so a restarted dispatcher finds the same pending cases whatever was in flight when it died.

A case's steps run in order inside its handler, except steps that do not depend on each other,
which run at once (``CaseWork.together``); cases run concurrently. The judge's ``--concurrency``
bounds the judge calls in flight (the openai backend's limit); the dispatcher keeps enough cases
in flight to keep those calls busy (``_Run.cases_in_flight``: twice the concurrency, at least 16),
each case a task only while it runs, so memory does not grow with the number of pending cases. A handler's outputs, with the free judge calls it made (offline, replayed:
held by the port for this commit), are committed in ONE append together with the stage's
tracking position; the cases that finish together share that append (``stages.case_commits``).
Ids are deterministic (``stages.casework``), so redoing a case after a crash appends nothing
twice, and the port records paid calls the moment they end and reuses every recorded judge
reply, so nothing is paid twice. The tracking position only lets a scan start late; it is a low watermark (every case at or
below it is finished), so correctness never depends on it: a case leaves the watermark's open set
only once its commit has returned, so a run abandoned mid-append (a signal raised inside it) never
moves the position past an unfinished case. And a full reconcile that ignores tracking runs at a
process's first pass on a ledger and every ``run_turns.RECONCILE_EVERY`` passes after it; a case it finds
below a tracking position is recorded (``run.reconciled``, shown by ``status``) and run.

A case whose handler raises gets ``stage.failed`` with the reason; every other case goes on.
An infrastructure error is not a verdict: when the judge raises ``JudgeUnavailable`` (server
unreachable, credentials refused, failing after retries), the run stops at once, cancelling
the cases in flight (a judge request already sent ends and is recorded first: the openai
backend's ``_through_a_stop``); they and every case not started stay pending (no ``stage.failed``), the
summary and ``run.completed`` say why (``stopped``, ``stop = "judge_unavailable"``), and the
next run finishes them. A spent budget (``--max-calls``/``--max-cost``, ``stages.judge.budget``)
stops the run the same way but gently: calls already admitted finish, no new case starts, and
``stop = "budget"`` marks it as the intended, clean stop it is.
"""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, Callable, Iterable

import orjson

from evalledger.ledger import Event, LedgerError, NewEvent
from evalledger.stages.case_commits import CaseCommits, Watermarks
from evalledger.stages.casework import STAGE_VERSIONS, CaseWork, Counters
from evalledger.stages.config import VerificationConfig, effective_config
from evalledger.stages.gc_pacing import fewer_collections
from evalledger.stages.interrupts import reraise_interrupt
from evalledger.stages.judge import JudgeCallFailed, JudgeUnavailable, UnrecordedRequest
from evalledger.stages.judge.budget import Budget, BudgetExhausted
from evalledger.stages.judge.recorded_calls import CaseCalls, appending, collecting, note_appended
from evalledger.stages.pending import (  # noqa: F401  (STAGES, Stage, find_pending: the dispatcher's API)
    STAGES,
    Pending,
    Stage,
    below_tracking,
    case_ref,
    find_pending,
    opened_events,
    scan_pending,
    seq_of,
    watermarks_of,
)
from evalledger.stages.repeats import judge_case
from evalledger.stages.run_settings import RunSettings, RunSummary  # noqa: F401  (the dispatcher's API)
from evalledger.stages.run_turns import home_lock, next_pass_is_full, process_lock

MIN_CASES_IN_FLIGHT = 16   # cases in flight at the least (the offline judge: CPU bound, 16 is plenty)
CASES_PER_CALL = 2         # cases in flight per judge call allowed in flight (see _Run.cases_in_flight)
DEFAULT_CONCURRENCY = 8    # a judge without settings (a test's object): JudgeSettings' default

MAX_CACHED_CONFIGS = 1024   # distinct benchmark configs a run keeps worked out (_Run._config_of)


class _Run:
    """One run: its id, judge, counters and progress; processes scans until nothing is pending."""

    def __init__(self, led, settings: RunSettings, progress, should_stop: Callable[[], bool] | None = None):
        self.led = led
        self.should_stop = should_stop or (lambda: False)   # asked before each new case starts
        self.settings = settings
        self.progress = progress
        self.run_config = settings.run_config()
        self.id = uuid.uuid4().hex[:16]
        self.counters = Counters()
        self.summary = RunSummary(run_id=self.id)
        self.judge = settings.judge
        self._own_judge = self.judge is None
        self.search = settings.search
        self.search_ports: dict[str, Any] = {}
        self.total = 0
        self.configs: dict[str, Any] = {}
        self.stopped: str | None = None      # set by _stop: the judge server cannot answer
        self._tasks: list[asyncio.Task] = []
        self.leases: Any = None   # set when workers on other machines share the store
        self.plan = settings.profiles
        # Always kept: without caps it only counts the run's model calls and what they cost.
        self.budget = Budget(settings.max_calls, settings.max_cost)
        self.replay_judges: dict[str, Any] = {}
        self.commits: CaseCommits | None = None   # set per scan by _process
        self._run_hash = self.run_config.hash()
        self._case_configs: dict[bytes, tuple[VerificationConfig, str]] = {}   # see _config_of

    def _select(self):
        """Which cases this run judges: its profiles', all of them under replay, else those without one."""
        if self.plan is not None:
            return self.plan.selects
        if getattr(self.settings.judge, "name", None) == "replay":
            return lambda opened: True
        return None

    def judge_of(self, opened: Event):
        """The judge of a case: its profile's (a replay restricted to the profile's judge model), else the run's."""
        profile = opened.data.get("profile")
        if not profile:
            return self.judge
        if self.plan is not None:
            return self.plan.judge_for(profile, self.led, self.run_config, self.settings.no_cache, self.budget)
        judged_by = opened.data.get("judged_by") or {}
        if getattr(self.judge, "name", None) != "replay" or not judged_by.get("model"):
            return self.judge
        from evalledger.stages.profiles import replay_judge_for
        return replay_judge_for(self.judge, judged_by, self.replay_judges, self.led)

    def _make_judge(self):
        """The judge port: the CLI's choice, else the config's (which defaults to offline)."""
        from evalledger.stages.judge import make_judge
        return make_judge(self.settings.judge_settings(), self.led)

    def search_port(self, tool: str):
        """The search port for ``tool``, built on first use (most runs never search).

        ``settings.search`` when given; under the replay judge, searches are replayed from the
        same source ledger (a replay makes no live call of any kind).
        """
        if self.search is not None:
            return self.search
        if tool not in self.search_ports:
            from evalledger.stages.search import SearchSettings, make_search
            if getattr(self.judge, "name", None) == "replay":
                source = getattr(getattr(self.judge, "backend", None), "source", None)
                port = make_search(SearchSettings(backend="replay"), self.led, source=source)
            else:
                port = make_search(SearchSettings(backend=tool, no_cache=self.settings.no_cache), self.led)
            self.search_ports[tool] = port
        return self.search_ports[tool]

    def _judge_identity(self) -> dict[str, Any]:
        return {"backend": getattr(self.judge, "name", None), "model": getattr(self.judge, "model", None)}

    def _append_run_event(self, type: str, data: dict[str, Any]) -> None:
        self.led.append(NewEvent(f"run:{self.id}", type, {"run": self.id, **data}, key=type,
                                 meta={"run": self.id, "stage": "dispatcher",
                                       "config_hash": self.run_config.hash()}))

    async def execute(self, full: bool = True) -> RunSummary:
        """Scan, process, scan again until a scan finds nothing; write run.started/completed.

        ``full``: the first scan ignores the tracking positions (a full reconcile).
        """
        if self.should_stop():   # asked to stop before the pass began: start nothing, write nothing
            return self.summary
        if self.plan is not None:
            try:
                failures = await self.plan.open_cases(self.led, self.id, self.run_config,
                                                      self.settings.no_cache, self.budget)
            except JudgeUnavailable as exc:   # an answering model's server: the run stops, as for the judge
                failures = []
                self._stop(exc)
            self.summary.failures.extend(
                {"case_id": f["case_id"], "stage": f"answer ({f['profile']}, question {f['question_id']})",
                 "reason": f["reason"]} for f in failures)
        pending = scan_pending(self.led, self.settings.retry_failed, None, full, self._select(), None)
        if full:
            self._reconcile(pending)
        if not pending.cases and not self._stopped():
            watermarks_of(self.led, pending).settle()
            await self._close_plan()
            return self.summary
        if self.judge is None and (self.plan is None or not self.plan.profiles):
            self.judge = self._make_judge()
        if hasattr(self.judge, "budget"):   # a judge port (not a test's stand-in object)
            self.judge.budget = self.budget
        extra = self.plan.describe() if self.plan is not None else {}
        self._append_run_event("run.started", {**extra,
            "judge": self._judge_identity(), "config": self.run_config.to_json(),
            "configs": _configs_of(pending.configs.values(), self.settings.config_layer),
            "config_layer": self.settings.config_layer, "retry_failed": self.settings.retry_failed,
            "no_cache": self.settings.no_cache, "pending": len(pending.cases)})
        self.leases = self.led.leases(f"{socket.gethostname()}:{os.getpid()}:{self.id}",
                                      self.settings.lease_seconds)
        try:
            retry_failed = self.settings.retry_failed
            while pending.cases and not self._stopped():
                if not await self._process(pending):
                    # every pending case is leased to another worker: wait for them (or their leases)
                    await asyncio.sleep(min(1.0, self.settings.lease_seconds / 4))
                retry_failed = False  # failures of this run are not retried within it
                pending = scan_pending(self.led, retry_failed, None, False, self._select(), None)
            if self._stopped():
                self._record_stop()
            else:
                watermarks_of(self.led, pending).settle()
        finally:
            if self.leases is not None:
                self.leases.close()
            if self._own_judge and hasattr(self.judge, "aclose"):
                await self.judge.aclose()
            for port in self.replay_judges.values():
                await port.aclose()
            await self._close_plan()
            for port in self.search_ports.values():
                await port.aclose()
        s = self.summary
        s.judge_calls, s.retries = self.counters.judge_calls, self.counters.retries
        stop: dict[str, Any] = {}
        if s.stopped is not None:
            stop = {"stopped": s.stopped, "stop": s.stop, "pending": s.pending, "left_pending": s.left_pending}
        s.model_calls, s.cost_usd = self.budget.calls, self.budget.cost_usd()
        stop.update(model_calls=s.model_calls, cost_usd=s.cost_usd)
        self._append_run_event("run.completed", {"cases": s.cases, "judged": s.judged, "failed": s.failed,
                                                 "judge_calls": s.judge_calls, "retries": s.retries,
                                                 "judge": self._judge_identity(), "configs": self.configs,
                                                 **stop})
        if self.progress is not None:
            self.progress.finish(self.counters)
        return s

    def _reconcile(self, pending: Pending) -> None:
        """After a full scan: set back each tracking position that passed a pending case or the
        head (forged, or written by an older evalledger), recording each as ``run.reconciled``.

        The position goes back before any case runs, so that should this run die too, the cases
        are found by any later scan, reconcile or not.
        """
        # Under --retry-failed the scan also holds failed cases, which tracking rightly passed.
        stuck = {} if self.settings.retry_failed else below_tracking(self.led, pending)
        for stage in STAGES:
            cases = stuck.get(stage.name, [])
            position = self.led.tracking_position(stage.tracking)
            if not cases and position <= pending.upto:
                continue
            lowered = min(seq_of(e) for e in cases) - 1 if cases else pending.upto
            case_ids = [opened.data.get("case_id") for _, opened, _ in opened_events(self.led, ((stage, e, 0) for e in cases))]
            self.led.append(NewEvent(f"run:{self.id}", "run.reconciled", {
                "run": self.id, "stage": stage.name, "tracking_position": position, "lowered_to": lowered,
                "cases": case_ids}, key=f"run.reconciled:{stage.name}",
                meta={"run": self.id, "stage": "dispatcher", "config_hash": self.run_config.hash()}),
                tracking=(stage.tracking, lowered))

    def cases_in_flight(self) -> int:
        """How many cases run at once: ``max_cases_in_flight`` when set, else enough to keep the
        judge's calls in flight busy (``CASES_PER_CALL`` per call ``--concurrency`` allows, at least
        ``MIN_CASES_IN_FLIGHT``): a case has one call out in its sequential steps and spends some
        time committing, so fewer cases than calls would leave the judge's slots idle."""
        if self.settings.max_cases_in_flight is not None:
            return self.settings.max_cases_in_flight
        return max(MIN_CASES_IN_FLIGHT, CASES_PER_CALL * self._call_concurrency())

    def _call_concurrency(self) -> int:
        """The judge calls this run may have in flight: its judge's ``concurrency`` (the profiles'
        judges' together under profiles)."""
        if self.plan is not None and getattr(self.plan, "profiles", None):
            return self.plan.call_concurrency(self.run_config)
        concurrency = getattr(getattr(self.judge, "settings", None), "concurrency", None)
        return concurrency if isinstance(concurrency, int) and concurrency >= 1 else DEFAULT_CONCURRENCY

    async def _process(self, pending: Pending) -> int:
        """Run every pending case of one scan, concurrently, committed as they finish; returns
        how many this run processed (with leases: only the cases it could claim)."""
        marks = watermarks_of(self.led, pending)
        commits = self.commits = CaseCommits(self.led, marks, self._fold, off_loop=self._judges_a_server(),
                                             appending=partial(appending, self.led))
        try:
            return await self._process_cases(pending, marks, commits)
        finally:
            commits.close()   # every case handed over is committed (or refused) before the scan ends

    def _judges_a_server(self) -> bool:
        """Whether the run's judge calls a server (its event loop must stay free to read replies)."""
        return bool(getattr(getattr(self.judge, "backend", None), "network", False))

    async def _process_cases(self, pending: Pending, marks: Watermarks, commits: CaseCommits) -> int:
        """``_process`` once its commits are set up."""
        if self.leases is not None:
            return await self._process_leased(pending, marks)
        self.total += len(pending.cases)
        if self.progress is not None:
            self.progress.start(self.total, self.counters)
        todo = opened_events(self.led, pending.cases)

        async def worker() -> None:
            # One case after another, in seq order across the workers; a task per case in flight
            # only, so a scan of a million cases holds as many tasks as there are workers.
            for stage, opened, failures in todo:
                if self._stopped():   # a stopped run starts no new case: it stays pending
                    return
                await self._case(stage, opened, failures, marks)

        width = min(self.cases_in_flight(), len(pending.cases))
        self._tasks = [asyncio.create_task(worker()) for _ in range(width)]
        results = await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        for result in results:   # a stop cancels cases in flight; anything else is a real error
            if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
                raise result
        commits.close()   # the commits of cases a stop cancelled may still be under way
        marks.settle()
        return len(pending.cases)

    async def _process_leased(self, pending: Pending, marks: Watermarks) -> int:
        """Claim pending cases a few at a time (as many as may be in flight), run each, release its
        lease once its outputs are committed, claim more; stop when nothing more can be claimed.

        The watermarks count every case of the scan, claimed or not, so a stage's tracking
        position never passes a case another worker still holds.
        """
        items = {f"{stage.name}:{opened.data.get('case_id')}": (stage, case_ref(opened), failures)
                 for stage, opened, failures in opened_events(self.led, pending.cases)}
        waiting = list(items)
        running: set[asyncio.Task[None]] = set()
        done = 0

        async def one(work: str) -> None:
            stage, ref, failures = items[work]
            try:
                opened = self.led.get(ref.id)
                if not self._finished_elsewhere(stage, opened, failures):
                    await self._case(stage, opened, failures, marks)
            finally:
                self.leases.release(work)

        while True:
            room = self.cases_in_flight() - len(running)
            if self._stopped():   # the judge server cannot answer or the budget is spent: claim nothing more
                waiting = []
            claimed = self.leases.claim(waiting, room) if room > 0 and waiting else []
            if claimed:
                taken = set(claimed)
                waiting = [w for w in waiting if w not in taken]
                self.total += len(claimed)
                if self.progress is not None:
                    self.progress.start(self.total, self.counters)
                running.update(asyncio.create_task(one(work)) for work in claimed)
                self._tasks = list(running)   # a stop cancels these too
            if not running:
                return done
            finished, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for task in finished:
                if task.cancelled():       # cancelled by a stop: left pending, its lease released
                    continue
                task.result()  # _case records a failing case itself; anything else is a bug: raise it
            done += len(finished)

    def _finished_elsewhere(self, stage: Stage, opened: Event, failures: int) -> bool:
        """True when another worker committed this case's outcome (its terminal event, or one more
        ``stage.failed`` than our scan counted) after our scan found it pending."""
        for event in self.led.read(stream=opened.stream, types=[stage.terminal, "stage.failed"]):
            if event.type == stage.terminal:
                return True
            if event.data.get("stage") == stage.name and (event.data.get("failure") or 0) > failures:
                return True
        return False

    def _stop(self, exc: JudgeUnavailable) -> None:
        """Stop the run: no case starts any more, the cases in flight are cancelled (left pending).

        A judge request already on the wire is not cut off: it ends and is recorded before its case
        gives way, so ``gather`` over the cases waits at most a request timeout for it."""
        if self.stopped is not None:
            return
        self.stopped = str(exc)
        current = asyncio.current_task()
        for task in self._tasks:
            if task is not current:
                task.cancel()

    async def _case(self, stage: Stage, opened: Event, failures: int, marks: Watermarks) -> None:
        """Process one case; commit its outputs (with its held judge calls and the tracking record),
        or ``stage.failed``, through the run's group commit."""
        with collecting(opened.data.get("case_id")) as calls:
            stored = await self._judge_case(stage, opened, failures, calls)
            if stored is None:   # left pending
                return
            self.counters.retries += calls.retries(stored, self.id)
        self.counters.cases_done += 1
        if self.progress is not None:
            self.progress.update(self.counters)

    async def _judge_case(self, stage: Stage, opened: Event, failures: int, calls: CaseCalls) -> list[Event] | None:
        """Run the stage's handler on one case and commit what it did; the stored events, or None
        when the case stays pending (a stop, a spent budget)."""
        self.summary.cases += 1
        config_hash = self._run_hash
        held: list[NewEvent] = []
        try:
            config, config_hash = self._config_of(opened)
            work = CaseWork(opened, stage.name, config, config_hash, self.id, self.judge_of(opened),
                            self.search_port, self.counters)
            await judge_case(stage.handler, work)   # once, or judge_repeats times (stages.repeats)
            if self.budget.refused(opened.data.get("case_id")):
                # A step swallowed the refusal (reasoning degrades on a failed call): not a result.
                raise BudgetExhausted(self.budget.stopped)
            if not any(e.type == stage.terminal for e in work.outputs):
                # Without its terminal event the case would stay pending for ever.
                raise RuntimeError(f"the {stage.name} stage produced no {stage.terminal} for this case")
            held = calls.take()
            stored = await self._commit(stage, opened.seq, held + work.outputs)
            self.summary.judged += 1
            return stored
        except LedgerError:
            raise   # the store refused (a full disk): not this case's fault, so no stage.failed; it stays pending
        except JudgeUnavailable as exc:   # not a verdict: the case stays pending, the run stops
            self.summary.cases -= 1
            self._keep_calls(calls)
            self._stop(exc)
            return None
        except asyncio.CancelledError:    # another case stopped the run: this one stays pending
            self.summary.cases -= 1
            self._keep_calls(calls)
            raise
        except BudgetExhausted:           # a spent budget: the case stays pending for the next run
            self.summary.cases -= 1
            self._keep_calls(calls)
            return None
        except Exception as exc:  # isolate the case: record why, let every other case go on
            reraise_interrupt(exc)        # our own stop, which Python wrapped: not the case's failure
            reason = f"{type(exc).__name__}: {exc}"
            case_id = opened.data.get("case_id")
            failed = NewEvent(f"case:{case_id}", "stage.failed",
                              {"case_id": case_id, "stage": stage.name, "reason": reason,
                               "failure": failures + 1, **judge_cause(exc)},
                              key=f"{stage.name}:{case_id}:failed:{failures + 1}",
                              meta={"run": self.id, "causation": opened.id, "stage": stage.name,
                                    "stage_version": STAGE_VERSIONS[stage.name], "config_hash": config_hash})
            held += calls.take()
            try:   # the calls the case made are kept with its failure ...
                stored = await self._commit(stage, opened.seq, held + [failed])
            except LedgerError:
                raise
            except Exception:   # ... unless one of them is what the ledger refused
                stored = await self._commit(stage, opened.seq, [failed])
            self.summary.failed += 1
            self.counters.failures += 1
            self.summary.failures.append({"case_id": case_id, "stage": stage.name, "reason": reason})
            return stored

    def _config_of(self, opened: Event) -> tuple[VerificationConfig, str]:
        """A case's effective config and its hash (noted in ``configs``), worked out once per distinct
        benchmark config: a scan's cases mostly share one, and working it out for every case cost
        a tenth of a judge call's CPU."""
        raw = opened.payload().config   # the case's payload is validated for every case, as before
        key = _config_key(raw)
        known = self._case_configs.get(key) if key is not None else None
        if known is None:
            config = effective_config(raw, self.settings.config_layer)
            known = (config, config.hash())
            self.configs[known[1]] = config.to_json()
            if key is not None and len(self._case_configs) < MAX_CACHED_CONFIGS:
                self._case_configs[key] = known
        return known

    async def _commit(self, stage: Stage, seq: int, events: list[NewEvent]) -> list[Event]:
        """Commit one case's events through the scan's group commit (``_process`` sets it up)."""
        assert self.commits is not None, "a case is committed only inside _process"
        return await self.commits.commit(stage, seq, events)

    def _keep_calls(self, calls: CaseCalls) -> None:
        """Commit the judge calls a case left pending had made (free ones, held for its commit):
        the next run reuses them, as it would have had they been committed one by one."""
        held = calls.take()
        if held:
            self._fold(self.led.append(held))

    def _fold(self, stored: list[Event]) -> None:
        """Tell the ledger's call index what the run appended (it then need not read it back)."""
        note_appended(self.led, stored)

    def _stopped(self) -> bool:
        """True once the run must start no new case: the judge cannot answer, the budget is spent,
        or the caller asked it to stop."""
        return self.stopped is not None or self.budget.stopped is not None or self.should_stop()

    def _record_stop(self) -> None:
        """Put why the run stopped, and how many cases it left pending, in the summary.

        An unavailable judge outranks a spent budget, which outranks a requested stop: the first is
        the stop the user must act on.
        """
        s = self.summary
        if self.stopped is not None:
            s.stopped, s.stop = self.stopped, "judge_unavailable"
        elif self.budget.stopped is not None:
            s.stopped, s.stop = self.budget.stopped, "budget"
        else:
            s.stopped, s.stop = "a stop was requested; the cases in flight finished", "requested"
        s.pending = s.left_pending = len(scan_pending(self.led, False, None, False, self._select(), None).cases)

    async def _close_plan(self) -> None:
        if self.plan is not None:
            await self.plan.aclose()


def _configs_of(given: Iterable[Any], layer: dict[str, Any]) -> dict[str, Any]:
    """config_hash -> effective config for the pending cases' distinct configs ``given``
    (``Pending.configs``; an invalid config is skipped)."""
    out: dict[str, Any] = {}
    for case_config in given:
        try:
            config = effective_config(case_config, layer)
        except ValueError:
            continue
        out.setdefault(config.hash(), config.to_json())
    return out


def _config_key(raw: Any) -> bytes | None:
    """A benchmark config's canonical JSON, to know the configs already worked out (None when it
    is not plain JSON, an integer beyond 64 bits say: then it is worked out every time)."""
    try:
        return orjson.dumps(raw, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return None


def judge_cause(exc: BaseException) -> dict[str, Any]:
    """The ``stage.failed`` fields naming the judge call that failed a case (none for other errors)."""
    if isinstance(exc, (JudgeCallFailed, UnrecordedRequest)):
        return {"role": exc.role, "request_hash": exc.request_hash,
                "unrecorded": isinstance(exc, UnrecordedRequest)}
    return {}


async def run_until_idle_async(led, settings: RunSettings | None = None, progress=None,
                               should_stop: Callable[[], bool] | None = None) -> RunSummary:
    """``run_until_idle`` for callers that already run an event loop."""
    lock = process_lock(led)
    if not lock.acquire(blocking=False):
        return RunSummary(busy=True)
    try:
        with home_lock(led), fewer_collections():
            full = next_pass_is_full(led)
            return await _Run(led, settings or RunSettings(), progress, should_stop).execute(full)
    finally:
        lock.release()


def run_until_idle(led, settings: RunSettings | None = None, progress=None,
                   should_stop: Callable[[], bool] | None = None) -> RunSummary:
    """Process everything pending until idle, then return what was done (see module docstring).

    ``should_stop`` (thread-safe, e.g. ``threading.Event.is_set``) is asked before each case
    starts: once it returns True no new case starts, the cases in flight finish and commit, and
    the summary says ``stop = "requested"``; the cases not started stay pending for the next run.

    Reentrant-safe: a call while another runs in this process returns at once with ``busy``;
    across processes, runs on one home take turns (a lock file beside the ledger). Cheap when
    nothing is pending: one scan from each stage's tracking position, except for a process's
    first pass on a ledger and every ``run_turns.RECONCILE_EVERY``-th, which scan it whole.
    """
    coroutine = run_until_idle_async(led, settings, progress, should_stop)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="dispatcher") as pool:
        return pool.submit(asyncio.run, coroutine).result()   # re-raises what the run raised
