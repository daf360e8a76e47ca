"""What every reader returns: a normalised benchmark and/or responses, independent of the format."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evalledger.stages.formats.errors import Problem


@dataclass
class ParsedBenchmark:
    """A benchmark in native shape, ready for ``benchmark.registered``.

    ``questions`` are the normalised question dicts (each with ``id``) exactly as ``case.opened``
    carries them; ``rejected_questions``/``rejected_traits`` are the parts of a Karenina checkpoint
    that could not be translated (the rest registers); ``extra`` is kept for provenance only.
    """

    kind: str
    name: str
    config: dict
    questions: list[dict]
    rejected_questions: list[Problem] = field(default_factory=list)
    rejected_traits: list[Problem] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    # False when the name is not content (an audit file is named after its file name), so the
    # same cases under another file name are the same benchmark.
    name_in_id: bool = True

    def question(self, question_id: str) -> dict | None:
        for q in self.questions:
            if q["id"] == question_id:
                return q
        return None


@dataclass
class ParsedResponse:
    """One model's response to one question; ``where`` is its place in the file."""

    question_id: str
    model: str | None
    response: Any
    where: str


@dataclass
class ParsedFile:
    """A validated file. ``format`` is one of FORMAT_NAMES; ``benchmark_ref`` is the benchmark a
    responses file names (a benchmark id or name)."""

    format: str
    benchmark: ParsedBenchmark | None = None
    responses: list[ParsedResponse] = field(default_factory=list)
    benchmark_ref: str | None = None


FORMAT_NAMES = ("benchmark", "responses", "reconstruction", "audit", "karenina")
