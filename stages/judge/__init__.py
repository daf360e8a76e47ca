"""The judge port: one typed interface per role, three backends, every call recorded.

    from evalledger.stages.judge import make_judge, JudgeSettings
    judge = make_judge(JudgeSettings(backend="offline"), led)
    reply = await judge.call("parse", request, case_id=case_id, attempt=1)
    await judge.aclose()

Backends: ``offline`` (deterministic heuristics, the default), ``openai`` (any OpenAI-compatible
chat-completions server), ``replay`` (answers only from recorded ``judge.called`` events).
See docs/judge.md.
"""

from __future__ import annotations

from evalledger.stages.judge.calls import JudgeCallFailed, JudgeError, JudgeUnavailable, UnrecordedRequest
from evalledger.stages.judge.port import Judge
from evalledger.stages.judge.recording import request_hash
from evalledger.stages.judge.registry import ROLE_NAMES, role
from evalledger.stages.judge.settings import OFFLINE_MODEL, JudgeSettings, Price

__all__ = ["Judge", "JudgeCallFailed", "JudgeError", "JudgeSettings", "JudgeUnavailable", "OFFLINE_MODEL", "Price",
           "ROLE_NAMES", "UnrecordedRequest", "live_backend", "make_judge", "request_hash", "role"]


def live_backend(settings: JudgeSettings, kind: str):
    """A backend that answers by computing or calling: ``offline`` or ``openai``."""
    if kind == "offline":
        from evalledger.stages.judge.offline import OfflineBackend
        return OfflineBackend()
    if kind == "openai":
        from evalledger.stages.judge.openai_backend import OpenAIBackend
        return OpenAIBackend(settings)
    raise ValueError(f"unknown live judge backend {kind!r}; choose offline or openai")


def make_judge(settings: JudgeSettings | None = None, led=None, *, source=None) -> Judge:
    """A judge port recording into ``led``.

    ``source`` (replay only): the ledger to answer from, a Ledger or a path; default
    ``settings.replay_source``, else ``led`` itself. With ``settings.live`` set, a request the
    source never recorded is answered by that live backend instead of raising UnrecordedRequest.
    """
    settings = settings or JudgeSettings()
    if settings.backend != "replay":
        return Judge(settings, led, live_backend(settings, settings.backend))
    from evalledger.stages.judge.replay import ReplayBackend
    live = live_backend(settings, settings.live) if settings.live else None
    return Judge(settings, led, ReplayBackend(settings, led, source or settings.replay_source, live))
