"""Content-derived ids: the same inputs give the same ids on any machine.

- benchmark id: 16 hex digits of sha256 over the canonical JSON of
  ``{"kind", "name", "config", "questions"}`` (the normalised benchmark, responses excluded;
  ``name`` is "" for an audit file, whose name is only its file name);
- case id: 16 hex digits of sha256 over the canonical JSON of
  ``[benchmark id, question id, model (or null), response]`` where ``response`` is the response
  text (template, audit) or the reconstruction object;
- Karenina question id: the ``DataFeedItem``'s ``@id`` (else the Question's ``@id``), else
  ``q-`` + 12 hex digits of sha256 over the question text.

Canonical JSON is ``ledger.canonical_json``: sorted keys, no whitespace, UTF-8.
"""

from __future__ import annotations

import hashlib
from typing import Any

from evalledger.ledger import canonical_json


def digest16(value: Any) -> str:
    """16 hex digits of sha256 over the canonical JSON of ``value``."""
    return hashlib.sha256(canonical_json(value)).hexdigest()[:16]


def benchmark_id(kind: str, name: str, config: dict, questions: list[dict]) -> str:
    """The id of a benchmark, from its normalised content (not its file name or bytes)."""
    return digest16({"kind": kind, "name": name, "config": config, "questions": questions})


def case_id(benchmark: str, question_id: str, model: str | None, response: Any) -> str:
    """The id of a case: one response of one model to one question of one benchmark."""
    return digest16([benchmark, question_id, model, response])


def question_id_from_text(text: str) -> str:
    """A question id for a question that carries none: ``q-`` + 12 hex digits of its text's sha256."""
    return "q-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
