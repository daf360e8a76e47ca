"""Judge settings: which backend answers, how hard it tries, what it costs. No secrets in here.

The API key is never a setting: the openai backend reads it from the environment variable named
by ``api_key_env`` when it starts, so settings can be hashed, logged and recorded safely.
"""

from __future__ import annotations

import os
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

OFFLINE_MODEL = "offline-heuristics-1"
DEFAULT_BASE_URL = "https://api.openai.com/v1"

# Provider settings and their documented bounds (docs/judge.md), shared with the config's
# ``judge_options`` table so a bad value is refused where it was written.
Temperature = Annotated[float, Field(ge=0.0, le=2.0)]
TokenLimit = Annotated[int, Field(ge=1, le=1_000_000)]
TimeoutSeconds = Annotated[float, Field(gt=0, le=3600)]
ReplyBytes = Annotated[int, Field(ge=1024, le=64 * 1024 * 1024)]
BreakerFailures = Annotated[int, Field(ge=1, le=1000)]
RetryAfterSeconds = Annotated[float, Field(ge=0, le=3600)]
DEFAULT_MAX_REPLY_BYTES = 1024 * 1024


class Price(BaseModel):
    """What a model costs, in USD per million tokens."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    input_per_million: float = Field(ge=0)
    output_per_million: float = Field(ge=0)

    def cost(self, usage: dict[str, Any] | None) -> float | None:
        """The cost of one call from its token usage (None when the usage is unknown)."""
        if not usage:
            return None
        prompt = usage.get("prompt_tokens") or 0
        completion = usage.get("completion_tokens") or 0
        return round((prompt * self.input_per_million + completion * self.output_per_million) / 1e6, 8)


class JudgeSettings(BaseModel):
    """How the judge port answers: backend, model, concurrency, retries, timeouts, prices, caching."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: Literal["offline", "openai", "replay"] = "offline"
    model: str | None = None                 # openai: required (or OPENAI_MODEL); offline: fixed name
    base_url: str | None = None              # default: OPENAI_BASE_URL, else the public API
    api_key_env: str = "OPENAI_API_KEY"      # the NAME of the variable holding the key
    concurrency: int = Field(8, ge=1)        # calls in flight at once (one shared connection pool)
    # A PostgreSQL store: calls in flight to this endpoint across all its workers, written into the
    # store (0 removes it); None follows the budget already there (shared_limit.py).
    shared_concurrency: int | None = Field(None, ge=0, le=10_000)
    max_attempts: int = Field(5, ge=1)       # per call: attempts on 429, 5xx, timeouts, dropped connections
    max_invalid_replies: int = Field(2, ge=0)  # re-asks with the validation error as feedback
    timeout_s: TimeoutSeconds = 60.0         # per request, the whole reply included
    backoff_base_s: float = Field(0.5, ge=0)
    backoff_max_s: float = Field(30.0, ge=0)
    retry_after_max_s: RetryAfterSeconds = 120.0   # a longer Retry-After is cut to this
    temperature: Temperature | None = 0.0     # None: not sent (reasoning models refuse it)
    max_tokens: TokenLimit | None = None
    max_completion_tokens: TokenLimit | None = None   # the newer name; reasoning models need it
    max_reply_bytes: ReplyBytes = DEFAULT_MAX_REPLY_BYTES   # a longer body is an invalid reply
    breaker_failures: BreakerFailures = 8    # consecutive infrastructure failures that stop the run
    # how the reply schema travels (response_format.py): json_schema (strict), json_object, prompt
    response_format: Literal["json_schema", "json_object", "prompt"] = "json_schema"
    prices: dict[str, Price] = Field(default_factory=dict)  # model -> price
    no_cache: bool = False                   # do not reuse recorded successes
    replay_source: str | None = None         # replay: the ledger to answer from (default: the recording one)
    live: Literal["openai", "offline"] | None = None  # replay: answer an unrecorded request live
    record: bool = True                      # False: call without appending judge.called (benchmarks only)

    @field_validator("response_format", mode="before")
    @classmethod
    def _format_flag(cls, value: Any) -> Any:
        """The old boolean setting: true sent json_schema, false put the schema in the prompt."""
        if isinstance(value, bool):
            return "json_schema" if value else "prompt"
        return value

    def resolved_base_url(self) -> str:
        """The chat-completions base URL: setting, else OPENAI_BASE_URL, else the public API."""
        return (self.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")

    def parameters(self) -> dict[str, Any]:
        """The sampling parameters that shape an answer (hashed into every request)."""
        params: dict[str, Any] = {}
        if self.temperature is not None:
            params["temperature"] = self.temperature
        if self.max_tokens is not None:
            params["max_tokens"] = self.max_tokens
        if self.max_completion_tokens is not None:
            params["max_completion_tokens"] = self.max_completion_tokens
        return params

    def token_limit(self) -> int | None:
        """The reply's token cap as sent (``max_completion_tokens`` wins), None when unset."""
        return self.max_completion_tokens or self.max_tokens

    def price_of(self, model: str | None) -> Price | None:
        """The price entry of ``model``, when the table has one."""
        return self.prices.get(model) if model else None
