"""What passes between the judge port and its backends: a pending call, one attempt, the errors.

A backend gets a ``PendingCall`` and yields every attempt it makes (success or failure) the
moment the attempt ends; the port records each one before the backend goes on. The last attempt
yielded is the success (its ``reply`` the validated reply model), or, after yielding its last
failure, the backend raises ``JudgeCallFailed`` (``JudgeUnavailable`` when the server cannot
answer at all). A backend never records anything itself. The port sends back into the generator
None once an attempt is recorded, or, when the ledger refused the reply an attempt carries, the
reason: a backend that can ask again yields that attempt again as an invalid reply and goes on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, AsyncGenerator, Protocol

from evalledger.stages.judge.registry import RoleSpec
from evalledger.stages.judge.roles import Model


class JudgeError(Exception):
    """Base of the judge port's errors."""


class JudgeCallFailed(JudgeError):
    """A call that failed after its bounded attempts (every attempt is recorded)."""

    def __init__(self, role: str, case_id: str, request_hash: str, reason: str, attempts: int):
        super().__init__(f"judge role {role!r} for case {case_id} (request {request_hash[:16]}) failed "
                         f"after {attempts} attempt(s): {reason}")
        self.role, self.case_id, self.request_hash, self.reason, self.attempts = (
            role, case_id, request_hash, reason, attempts)


# The attribute (True) on the exception of a call that ended before any attempt went out (the
# breaker refused it, or its case was cancelled while it waited): no call was made.
UNSENT = "judge_call_unsent"


class JudgeUnavailable(JudgeError):
    """The judge server cannot answer at all (unreachable, credentials refused, failing after
    retries, the breaker open). Not a verdict on any case: the run stops and its cases stay pending."""

    def __init__(self, url: str, reason: str):
        super().__init__(f"the judge server at {url} cannot answer: {reason}")
        self.url, self.reason = url, reason


class UnrecordedRequest(JudgeError):
    """Replay was asked a request that the source ledger never recorded."""

    def __init__(self, role: str, case_id: str, request_hash: str, source: str):
        super().__init__(f"replay: no recorded answer for role {role!r}, case {case_id}, request hash "
                         f"{request_hash} in {source}")
        self.role, self.case_id, self.request_hash, self.source = role, case_id, request_hash, source


@dataclass
class Attempt:
    """One attempt as it will be recorded: the reply (or the error) and what it cost."""

    number: int
    reply: Any = None
    error: str | None = None
    usage: dict[str, Any] | None = None
    latency_ms: float | None = None
    cost: float | None = None
    raw_reply: str | None = None
    sent: list[dict[str, Any]] | None = None     # the messages sent, when they differ from the request's
    http_status: int | None = None
    source_event: str | None = None              # answered from this recorded event (replay, reuse)
    source_backend: str | None = None
    backend: str | None = None                   # overrides the port's backend name (replay)
    model: str | None = None
    request_hash: str | None = None              # overrides the call's hash (replay matched another)
    response_format: str | None = None           # openai: the response-format mode the attempt was sent in
    concurrency: int | None = None               # openai: the calls allowed in flight when it was sent (AIMD)


@dataclass
class PendingCall:
    """A call the port is about to make: the role, the typed request, its messages and hash."""

    spec: RoleSpec
    request: Model
    messages: list[dict[str, str]]
    parameters: dict[str, Any]
    request_hash: str
    case_id: str
    step_attempt: int
    first_attempt: int
    candidates: list[str] = field(default_factory=list)   # replay: every hash this request may be recorded under
    # True once an attempt went out (the backend marks it as it sends; the port as one is
    # yielded): a call that ends before that asked nothing, and is not counted as made.
    sent: bool = False

    @property
    def role(self) -> str:
        return self.spec.name


class Backend(Protocol):
    """A judge backend: names itself, and answers a pending call with the attempts it made."""

    name: str
    model: str | None
    network: bool

    def identities(self, role: str) -> list[tuple[str, str | None]]:
        """The (backend, model) pairs a request of ``role`` is hashed under, the first being its own."""

    def attempts(self, call: PendingCall) -> AsyncGenerator[Attempt, str | None]:
        """Each attempt as it ends, the success last; raises JudgeCallFailed (or UnrecordedRequest,
        JudgeUnavailable) after the last failure. The port sends back None once an attempt is
        recorded, or why the ledger refused the reply it carries."""

    async def aclose(self) -> None:
        """Release connections."""
