"""Profiles in a run: each profile's cases, its judge, and its answering model.

A profile (``stages.models_file``) pairs an answering model (``run``) with a judge (``verify``).
A run with ``--profile NAME`` (or ``--profiles a,b``) judges under each profile separately, so
the same response judged by two profiles gives two results side by side:

- every case without a profile (a response dropped in) gets a **profile case** per profile: the
  same question and response, ``case_id`` derived from (the original case, the profile, its
  judge), with ``profile``, ``judged_by`` and ``origin_case`` in ``case.opened`` and the profile's
  audit overrides merged into the case's ``config``;
- with a ``run`` model, every template question that has no response is **answered**
  (``stages.answering``) and the answer opens a profile case like a dropped-in response;
- the profile's cases are judged by its ``verify`` model; cases of other profiles, and cases
  without one, wait for a run that names them (a run without profiles judges only the latter).

Nothing here is kept in memory between runs: the cases are found from the ledger each time, and
their ids are deterministic, so a rerun opens nothing twice.
"""

from __future__ import annotations

import asyncio
from itertools import islice
from typing import Any, Iterable, Iterator

from evalledger.ledger import NewEvent
from evalledger.stages.answering import (
    OpenedCases,
    PlainAnswerer,
    answer_questions,
    opened_cases,
    profile_config,
    profile_fields,
    unanswered_questions,
)
from evalledger.stages.config import VerificationConfig
from evalledger.stages.formats.ids import digest16
from evalledger.stages.judge.budget import BudgetExhausted
from evalledger.stages.models_file import NamedModel, Profile

STAGE_META = {"stage": "profiles", "stage_version": "1"}


def judge_settings_for(model: NamedModel, run_config: VerificationConfig, no_cache: bool = False):
    """The openai JudgeSettings of a named model (its key's variable name, never the key)."""
    from evalledger.stages.judge import JudgeSettings, Price
    prices = {name: Price(**price.model_dump()) for name, price in run_config.prices.items()}
    options = {"response_format": run_config.judge_response_format, **model.parameters}
    return JudgeSettings(backend="openai", model=model.model, base_url=model.base_url,
                         api_key_env=model.api_key_env, prices=prices, no_cache=no_cache, **options)


def profile_case_id(origin_case: str, profile: Profile) -> str:
    """The id of ``origin_case`` judged under ``profile`` (a changed judge gives a new case)."""
    return digest16([origin_case, "profile", profile.name, profile.verify.identity()])


def profile_case(origin: dict[str, Any], profile: Profile, meta: dict[str, Any]) -> NewEvent:
    """The ``case.opened`` of an original case's data judged under ``profile``."""
    cid = profile_case_id(origin["case_id"], profile)
    data = {**origin, "case_id": cid, "origin_case": origin["case_id"], **profile_fields(profile),
            "config": profile_config(origin.get("config"), profile)}
    return NewEvent(f"case:{cid}", "case.opened", data, key=cid, meta=meta)


def _profile_cases(led, upto: int, profile: Profile, meta: dict[str, Any], known: set[str]) -> Iterator[NewEvent]:
    """The profile cases of ``profile`` not opened yet, for the cases without a profile up to seq
    ``upto``, read an event at a time."""
    for event in led.read(types=["case.opened"], to_seq=upto):
        origin = event.data
        if not origin.get("profile") and profile_case_id(origin["case_id"], profile) not in known:
            yield profile_case(origin, profile, meta)


def replay_judge_for(replay, judged_by: dict[str, Any], cache: dict[str, Any], led):
    """A replay port answering only from a profile's judge: its model and sampling parameters.

    Two profiles may send the very same messages; the request hash then differs only by model
    and parameters, so the replay must hash as that judge did (built once per judge, in ``cache``).
    """
    from evalledger.stages.judge import JudgeSettings, make_judge
    parameters = judged_by.get("parameters") or {}
    key = digest16([judged_by["model"], parameters])
    if key not in cache:
        update = {"model": judged_by["model"],
                  **{k: v for k, v in parameters.items() if k in JudgeSettings.model_fields}}
        cache[key] = make_judge(replay.settings.model_copy(update=update), led, source=replay.backend.source)
        cache[key].budget = replay.budget
    return cache[key]


class ProfilePlan:
    """The profiles of one run: opens their cases and gives each its judge."""

    def __init__(self, profiles: Iterable[Profile]):
        self.profiles = {p.name: p for p in profiles}
        self.judges: dict[str, Any] = {}
        self.answerers: dict[str, Any] = {}

    @property
    def names(self) -> list[str]:
        """The profile names, in the order given."""
        return list(self.profiles)

    def selects(self, opened: dict[str, Any]) -> bool:
        """True for a case this run judges: one of its profiles'."""
        return opened.get("profile") in self.profiles

    def describe(self) -> dict[str, Any]:
        """What ``run.started`` records of the plan: the profiles' names, models and audit overrides (no keys)."""
        return {"profiles": {name: {"run": p.run.identity() if p.run else None, "verify": p.verify.identity(),
                                    "audit": p.audit} for name, p in self.profiles.items()}}

    def check(self, run_config: VerificationConfig) -> None:
        """Raise (JudgeError, ValueError) now when a profile's model cannot be set up (no key for the public API)."""
        from evalledger.stages.judge import live_backend
        for profile in self.profiles.values():
            for model in filter(None, (profile.verify, profile.run)):
                settings = judge_settings_for(model, run_config)
                live_backend(settings, "openai")

    def unpriced(self, run_config: VerificationConfig) -> list[str]:
        """Provider model names of this plan that the price table lacks."""
        models = {m.model for p in self.profiles.values() for m in (p.verify, p.run) if m is not None}
        return sorted(m for m in models if m not in run_config.prices)

    def call_concurrency(self, run_config: VerificationConfig) -> int:
        """The judge calls this plan's profiles may have in flight together (each verify model's
        ``concurrency``, summed: each profile's judge has a limit of its own)."""
        return sum(judge_settings_for(p.verify, run_config).concurrency for p in self.profiles.values())

    def judge_for(self, profile_name: str, led, run_config: VerificationConfig, no_cache: bool, budget):
        """The judge port of a profile (its verify model), built on first use."""
        if profile_name not in self.judges:
            from evalledger.stages.judge import make_judge
            judge = make_judge(judge_settings_for(self.profiles[profile_name].verify, run_config, no_cache), led)
            judge.budget = budget
            self.judges[profile_name] = judge
        return self.judges[profile_name]

    def _answerer(self, model: NamedModel, led, run_config, no_cache, budget):
        if model.name not in self.answerers:
            from evalledger.stages.judge import make_judge
            port = make_judge(judge_settings_for(model, run_config, no_cache), led)
            port.budget = budget
            self.answerers[model.name] = port
        return self.answerers[model.name]

    async def open_cases(self, led, run_id: str, run_config: VerificationConfig, no_cache: bool,
                         budget) -> list[dict[str, str]]:
        """Open every profile case not yet in the ledger, answering questions first; the failures.

        Returns ``[{question_id, profile, case_id, reason}]`` for questions whose answer failed (they are
        asked again by the next run). Stops quietly when the budget is spent.
        """
        meta = {"run": run_id, **STAGE_META}
        opened = opened_cases(led)
        upto = led.head().seq   # the cases opened before: not the profile cases appended below
        for profile in self.profiles.values():
            batch = _profile_cases(led, upto, profile, meta, opened.known)
            while chunk := list(islice(batch, 1000)):   # 1,000 a transaction, made as they go in
                led.append(chunk)
        answerers = [p for p in self.profiles.values() if p.run is not None]
        return await self._answer(led, opened, answerers, meta, run_config, no_cache, budget)

    async def _answer(self, led, opened: OpenedCases, answerers, meta, run_config, no_cache, budget):
        """Answer the unanswered questions for each answerer (a profile, or a PlainAnswerer); the failures."""
        failures: list[dict[str, str]] = []
        for answerer in answerers:
            if budget is not None and budget.stopped:
                break
            questions = unanswered_questions(led, opened, answerer)
            if not questions:
                continue
            port = self._answerer(answerer.run, led, run_config, no_cache, budget)
            tagged = {**meta, "profile": answerer.name} if answerer.name else meta
            try:
                failures += await answer_questions(led, port, questions, answerer, tagged)
            except BudgetExhausted:
                pass   # budget.stopped says why; the questions are answered by the next run
        return failures

    async def aclose(self) -> None:
        """Close every port this plan built."""
        ports = list(self.judges.values()) + list(self.answerers.values())
        self.judges, self.answerers = {}, {}
        await asyncio.gather(*(port.aclose() for port in ports))


class AnsweringPlan(ProfilePlan):
    """Answering models of a run without profiles (the models file's ``answering``).

    Questions without responses are answered by each model, opening cases that belong to no
    profile; the run's own judge judges them with every other case without a profile.
    """

    def __init__(self, models: Iterable[NamedModel]):
        super().__init__([])
        self.models = list(models)

    def selects(self, opened: dict[str, Any]) -> bool:
        """True for a case without a profile (the cases a run without profiles judges)."""
        return not opened.get("profile")

    def describe(self) -> dict[str, Any]:
        """What ``run.started`` records: the answering models (no keys)."""
        return {"answering": [m.identity() for m in self.models]}

    def check(self, run_config: VerificationConfig) -> None:
        """Raise now when an answering model cannot be set up."""
        from evalledger.stages.judge import live_backend
        for model in self.models:
            live_backend(judge_settings_for(model, run_config), "openai")

    def unpriced(self, run_config: VerificationConfig) -> list[str]:
        """Provider model names of the answering models that the price table lacks."""
        return sorted({m.model for m in self.models} - set(run_config.prices))

    async def open_cases(self, led, run_id: str, run_config: VerificationConfig, no_cache: bool,
                         budget) -> list[dict[str, str]]:
        """Answer every question without a response with each answering model; the failures."""
        answerers = [PlainAnswerer(model) for model in self.models]
        return await self._answer(led, opened_cases(led), answerers, {"run": run_id, **STAGE_META},
                                  run_config, no_cache, budget)
