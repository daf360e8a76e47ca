"""What a run is given and what it did: ``RunSettings`` (the config layer, the judge, the flags of
``evalledger run``) and ``RunSummary`` (the counts ``run_until_idle`` returns). Both are
re-exported by ``stages.dispatcher``, which runs with them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from evalledger.ledger.leases import DEFAULT_LEASE_SECONDS
from evalledger.stages.config import VerificationConfig, effective_config


class RunSettings(BaseModel):
    """What a run needs besides the ledger: the run's config layer, the judge, and flags.

    ``config_layer`` is the ``--config`` file merged with ``--set`` (``stages.config.run_layer``);
    each case's effective config is defaults <- its benchmark's config <- this layer. The judge is
    ``judge`` when given (``evalledger replay`` hands in a replay port), else built from
    ``judge_backend``/``judge_model`` (the CLI's ``--judge``/``--model``), else from the config.
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True, extra="forbid")

    config_layer: dict[str, Any] = Field(default_factory=dict)
    judge_backend: str | None = None
    judge_model: str | None = None
    judge_options: dict[str, Any] = Field(default_factory=dict)   # more JudgeSettings keys
    retry_failed: bool = False
    no_cache: bool = False
    # None: enough cases to keep the judge's --concurrency calls busy (_Run.cases_in_flight)
    max_cases_in_flight: int | None = Field(None, ge=1)
    lease_seconds: float = Field(DEFAULT_LEASE_SECONDS, gt=0)   # a shared store's case leases
    judge: Any = None
    search: Any = None
    # Profiles (stages.profiles.ProfilePlan): this run judges only their cases, each with its own judge;
    # or answering models alone (AnsweringPlan): they answer questions, the run's judge judges.
    profiles: Any = None
    max_calls: int | None = Field(None, ge=0)     # budget caps: reached, the run stops, cases stay pending
    max_cost: float | None = Field(None, ge=0)

    def run_config(self) -> VerificationConfig:
        """The run-level config (defaults <- config layer): it chooses the judge and is recorded."""
        return effective_config(None, self.config_layer)

    def judge_settings(self):
        """The JudgeSettings of the judge a run builds: the CLI's choice, else the config's."""
        from evalledger.stages.judge import JudgeSettings, Price
        run_config = self.run_config()
        prices = {name: Price(**price.model_dump()) for name, price in run_config.prices.items()}
        options = {"response_format": run_config.judge_response_format,
                   **run_config.judge_options.settings_keys(), **self.judge_options}
        return JudgeSettings(backend=self.judge_backend or run_config.judge_backend,
                             model=self.judge_model or run_config.judge_model,
                             no_cache=self.no_cache, prices=prices, **options)

    def check_judge(self) -> None:
        """Raise now (JudgeError, ValueError) when the judge cannot be set up: no model, no key.

        A run builds its judge only once it has work, and the watch daemon runs for days: both
        call this first, so a bad judge option is a usage error and not a failure found later.
        """
        if self.profiles is not None:
            self.profiles.check(self.run_config())
            if self.profiles.profiles:   # profiles bring their judges; answering models alone do not
                return
        if self.judge is not None:
            return
        settings = self.judge_settings()
        if settings.backend != "replay":   # the replay judge answers from the ledger it runs on
            from evalledger.stages.judge import live_backend
            live_backend(settings, settings.backend)


@dataclass
class RunSummary:
    """What ``run_until_idle`` did."""

    run_id: str | None = None
    cases: int = 0
    judged: int = 0
    failed: int = 0
    judge_calls: int = 0
    retries: int = 0
    busy: bool = False                       # another run_until_idle of this process was running
    # A run stops early for one of two reasons, told apart by ``stop``: "judge_unavailable" (the
    # judge server cannot answer: exit 3) or "budget" (a --max-calls/--max-cost cap: a clean stop).
    # A third, "requested": the caller asked the run to stop (the watch daemon on SIGTERM); the
    # cases in flight finish and commit, no new case starts.
    stopped: str | None = None               # why the run stopped early; its cases are left pending
    stop: str | None = None                  # "judge_unavailable", "budget" or "requested" when it stopped
    pending: int = 0                         # cases left pending by a stopped run
    left_pending: int = 0                    # the same number (the budget's name for it)
    model_calls: int = 0                     # calls sent to a model (reused and replayed answers are free)
    cost_usd: float | None = 0.0             # what they cost; None when a model was unpriced
    failures: list[dict[str, str]] = field(default_factory=list)


