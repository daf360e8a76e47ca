"""The search port: ``await search.search(query, case_id=...) -> list[{title, content, url}]``.

Backends: ``local`` (``<home>/corpus/`` with SQLite FTS5, BM25; the default), ``tavily``
(tavily-python, ``TAVILY_API_KEY``), a user callable ``module:function``, and ``replay`` (only
what a ledger recorded). Every search is a ``judge.called`` event with role ``search`` on the
case's stream, and a recorded success is reused by request hash: hashing, finding, replaying
and recording are the recorded-call core's (``stages.judge.recorded_calls``), shared with the
judge port. A failing search never raises into a stage: it gives ``[]`` and is recorded with
``degraded: true`` and the error.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from evalledger.stages.interrupts import reraise_interrupt
from evalledger.stages.judge.recorded_calls import REPLAY, RecordedCalls, open_source, redact, request_hashes
from evalledger.stages.judge.recording import case_stream
from evalledger.stages.search.backends import CallableSearch, SearchFailed, TavilySearch, normalise
from evalledger.stages.search.local import LocalCorpus

ROLE = "search"

__all__ = ["Search", "SearchSettings", "make_search"]


class SearchSettings(BaseModel):
    """Which search answers and how: backend, corpus folder, result count, timeouts, caching."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: str = "local"                 # local | tavily | replay | module:function
    corpus: str | None = None              # local: default <home>/corpus
    max_results: int = Field(3, ge=1)
    search_depth: str = "basic"            # tavily
    api_key_env: str = "TAVILY_API_KEY"    # the NAME of the variable holding the key
    timeout_s: float = Field(30.0, gt=0)
    no_cache: bool = False
    replay_source: str | None = None       # replay: the ledger to answer from
    live: str | None = None                # replay: answer unrecorded searches with this backend


def _backend(settings: SearchSettings, kind: str, led):
    if kind == "local":
        folder = settings.corpus or (Path(led.home) / "corpus" if led is not None and led.home else "corpus")
        return LocalCorpus(folder)
    if kind == "tavily":
        return TavilySearch(settings.api_key_env, settings.search_depth)
    if ":" in kind:
        return CallableSearch(kind)
    raise ValueError(f"unknown search backend {kind!r}: local, tavily, replay or module:function")


class Search:
    """One search port over one backend, recording into ``led`` through the recorded-call core."""

    def __init__(self, settings: SearchSettings, led, backend, source=None, live=None, opened: bool = False):
        self.settings = settings
        self.led = led
        self.backend = backend            # None for replay
        self.records = RecordedCalls(led, source)
        self.source = source
        self.live = live
        self._opened = opened             # the source was opened here: close it with the port

    @property
    def name(self) -> str:
        """The backend's name: local, tavily, a callable's, or replay."""
        return self.backend.name if self.backend is not None else REPLAY

    @property
    def misses(self) -> list[dict[str, Any]]:
        """Replay: the searches the source never recorded (role, case_id, request_hash)."""
        return self.records.misses

    def _identities(self) -> list[tuple[str, str | None]]:
        if self.backend is not None:
            return [(self.backend.name, self.backend.model)]
        live = (self.live.name, self.live.model) if self.live is not None else None
        return self.records.replay_identities(ROLE, live)

    async def search(self, query: str, *, case_id: str, attempt: int = 1,
                     meta: dict[str, Any] | None = None) -> list[dict[str, str]]:
        """Results for ``query`` (at most ``max_results``); ``[]`` when the search failed."""
        results, _ = await self.lookup(query, case_id=case_id, attempt=attempt, meta=meta)
        return results

    async def lookup(self, query: str, *, case_id: str, attempt: int = 1,
                     meta: dict[str, Any] | None = None) -> tuple[list[dict[str, str]], str | None]:
        """``(results, error)``: as ``search``, with why it failed (None when it did not)."""
        messages = [{"role": "user", "content": query}]
        params = {"max_results": self.settings.max_results}
        hashes = request_hashes(ROLE, self._identities(), params, messages)
        request = {"payload": {"query": query}, "messages": messages, "parameters": params}
        if not self.settings.no_cache:
            found = self.records.reusable(hashes, _results_of)
            if found is not None:
                event = found.event
                if event.stream != case_stream(case_id):  # answered for another case: say where from
                    await self._record(case_id, attempt, meta, found.request_hash, request, found.value, None,
                                       None, backend=event.data["backend"], model=event.data.get("model"),
                                       source_event=event.id, source_backend=event.data.get("source_backend"))
                return list(found.value), event.data.get("error")
        if self.backend is None:
            replayed = self.records.replayed(hashes)
            if replayed is not None:
                event = replayed.event
                results = _results_of(event)
                await self._record(case_id, attempt, meta, replayed.request_hash, request, results, None, None,
                                   backend=REPLAY, model=event.data.get("model"), source_event=event.id,
                                   source_backend=event.data.get("source_backend") or event.data.get("backend"))
                return list(results), event.data.get("error")
            if self.live is None:
                self.records.miss(ROLE, case_id, hashes[0])
                await self._record(case_id, attempt, meta, hashes[0], request, [], "replay: this search was "
                                   "never recorded in the source ledger", None, backend=REPLAY)
                return [], "replay: this search was never recorded in the source ledger"
        backend = self.backend or self.live
        hash = hashes[0] if self.backend is not None else hashes[-1]   # live: its own hash comes last
        results, error, latency = await self._run(backend, query)
        await self._record(case_id, attempt, meta, hash, request, results, error, latency,
                           backend=backend.name, model=backend.model)
        return results, error

    async def _run(self, backend, query: str) -> tuple[list[dict[str, str]], str | None, float]:
        """Run a blocking backend in a thread with a timeout; failures become an error text."""
        start = time.perf_counter()
        try:
            raw = await asyncio.wait_for(asyncio.to_thread(backend.search, query, self.settings.max_results),
                                         self.settings.timeout_s)
            return normalise(raw), None, _ms(start)
        except TimeoutError:
            return [], f"search timed out after {self.settings.timeout_s:g} s", _ms(start)
        except Exception as exc:  # a search must degrade, never break the stage
            reraise_interrupt(exc)
            text = str(exc) if isinstance(exc, SearchFailed) else f"{type(exc).__name__}: {exc}"
            return [], redact(text, os.environ.get(self.settings.api_key_env)), _ms(start)

    async def _record(self, case_id, step_attempt, meta, hash, request, results, error, latency, *, backend,
                      model=None, source_event=None, source_backend=None) -> None:
        """Record one search as a ``judge.called`` event with role ``search`` (degraded when it failed)."""
        number = self.records.next_attempt(case_id, ROLE, hash, step_attempt)
        payload = {"role": ROLE, "backend": backend, "model": model, "request_hash": hash, "attempt": number,
                   "error": error, "usage": None, "latency_ms": latency, "request": request,
                   "reply": {"results": results}, "degraded": error is not None,
                   "source_event": source_event, "source_backend": source_backend}
        await self.records.record(case_id, payload, step_attempt, number, meta)

    async def aclose(self) -> None:
        """Close a source ledger this port opened."""
        if self.source is not None and self.source is not self.led and self._opened:
            self.source.close()


def _results_of(event) -> list[dict[str, str]]:
    """The results a recorded search gave."""
    return event.data["reply"]["results"]


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)


def make_search(settings: SearchSettings | None = None, led=None, *, source=None) -> Search:
    """A search port recording into ``led`` (see the module doc for the backends)."""
    settings = settings or SearchSettings()
    if settings.backend != "replay":
        return Search(settings, led, _backend(settings, settings.backend, led))
    src, opened = open_source(source or settings.replay_source, led)
    if src is None:
        raise ValueError("a replayed search needs a ledger to answer from (replay_source, or a recording ledger)")
    live = _backend(settings, settings.live, led) if settings.live else None
    return Search(settings, led, None, source=src, live=live, opened=opened)
