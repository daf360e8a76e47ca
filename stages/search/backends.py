"""Search backends besides the local corpus: Tavily, and a user callable named ``module:function``.

Each is a blocking ``search(query, max_results) -> list[{title, content, url}]`` that raises on
failure; the search port runs it in a thread, records it, and turns a failure into empty,
``degraded`` results.
"""

from __future__ import annotations

import importlib
import os
from typing import Any, Callable


class SearchFailed(Exception):
    """A search that could not be made (no key, client error, bad callable)."""


class TavilySearch:
    """Web search through tavily-python: ``TavilyClient``, basic depth, ``TAVILY_API_KEY``."""

    name = "tavily"
    model = "tavily-basic"

    def __init__(self, api_key_env: str = "TAVILY_API_KEY", search_depth: str = "basic",
                 client_factory: Callable[[str], Any] | None = None):
        self.api_key_env = api_key_env
        self.search_depth = search_depth
        self._factory = client_factory
        self._client = None

    def _get_client(self):
        if self._client is None:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise SearchFailed(f"{self.api_key_env} is not set: tavily search is unavailable")
            if self._factory is not None:
                self._client = self._factory(key)
            else:
                from tavily import TavilyClient
                self._client = TavilyClient(api_key=key)
        return self._client

    def search(self, query: str, max_results: int = 3) -> list[dict[str, Any]]:
        answer = self._get_client().search(query, max_results=max_results, search_depth=self.search_depth)
        results = answer.get("results", []) if isinstance(answer, dict) else answer
        return list(results or [])[:max_results]


class CallableSearch:
    """A user function named ``module:function``: ``(query: str)`` returning a list of
    ``{title, content, url}`` results, a result string, or a list of result strings (the spec's
    ``str | list[str]`` signature; each string becomes one result's content)."""

    name = "callable"

    def __init__(self, spec: str):
        module, sep, function = spec.partition(":")
        if not sep or not module or not function:
            raise ValueError(f"a search callable is named 'module:function', not {spec!r}")
        self.model = spec
        self._spec = spec
        self._function: Callable[[str], Any] | None = None

    def _get_function(self) -> Callable[[str], Any]:
        if self._function is None:
            module, _, name = self._spec.partition(":")
            try:
                target: Any = importlib.import_module(module)
                for part in name.split("."):
                    target = getattr(target, part)
            except (ImportError, AttributeError) as exc:
                raise SearchFailed(f"cannot load search callable {self._spec}: {exc}") from exc
            if not callable(target):
                raise SearchFailed(f"{self._spec} is not callable")
            self._function = target
        return self._function

    def search(self, query: str, max_results: int = 3) -> list[dict[str, Any]]:
        results = self._get_function()(query)
        if isinstance(results, str):
            results = [results] if results.strip() else []
        if not isinstance(results, list):
            raise SearchFailed(f"{self._spec} returned {type(results).__name__}, not a result string or a list of results")
        return results[:max_results]


def normalise(results: list[Any]) -> list[dict[str, str]]:
    """Results as ``{title, content, url}`` strings (a plain string is a result's content; an empty
    one is no result); raises SearchFailed on a result of another shape."""
    out = []
    for item in results:
        if isinstance(item, str):
            if item.strip():
                out.append({"title": "", "content": item, "url": ""})
            continue
        if not isinstance(item, dict):
            raise SearchFailed(f"a search result must be a mapping with title, content, url; got {item!r:.80}")
        out.append({key: str(item.get(key) or "") for key in ("title", "content", "url")})
    return out
