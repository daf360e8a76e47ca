"""Reconstruction documents (``evalledger/reconstruction@1``), as in spec/reconstruction-judge.md.

The document (claims and target text) is the benchmark, named by its ``doc_id``; the
reconstruction is the response, by the optional ``model`` (null when not given).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from evalledger.stages.formats.errors import Problems
from evalledger.stages.formats.model import ParsedBenchmark, ParsedFile, ParsedResponse
from evalledger.stages.formats.native import Name, Strict, Text, _validate


class Claim(Strict):
    id: Name
    text: Text
    type: Annotated[str, StringConstraints(min_length=1, max_length=100)]
    importance: Annotated[int, Field(ge=0, le=10)]


class Answer(Strict):
    id: Name
    question: str
    answer: str


class Reconstruction(Strict):
    answers: list[Answer]
    synthesis: str


class Document(Strict):
    format: Literal["evalledger/reconstruction@1"] = "evalledger/reconstruction@1"
    doc_id: Name
    model: Name | None = None
    original_claims: Annotated[list[Claim], Field(min_length=1)]
    target_document: Text
    reconstruction: Reconstruction


def read_reconstruction(doc: Any) -> ParsedFile:
    """Validate the document; claim ids and answer ids are unique."""
    parsed = _validate(Document, doc)
    problems = Problems()
    _unique([c.id for c in parsed.original_claims], "$.original_claims", "claim", problems)
    _unique([a.id for a in parsed.reconstruction.answers], "$.reconstruction.answers", "answer", problems)
    problems.raise_if_any()
    question = {"id": parsed.doc_id, "doc_id": parsed.doc_id,
                "original_claims": [c.model_dump(mode="json") for c in parsed.original_claims],
                "target_document": parsed.target_document}
    bench = ParsedBenchmark("reconstruction", parsed.doc_id, {}, [question])
    response = parsed.reconstruction.model_dump(mode="json")
    return ParsedFile("reconstruction", bench, [ParsedResponse(parsed.doc_id, parsed.model, response, "$.reconstruction")])


def _unique(ids: list[str], where: str, what: str, problems: Problems) -> None:
    first: dict[str, int] = {}
    for index, value in enumerate(ids):
        if value in first:
            problems.add(f"{where}[{index}].id", f"duplicate {what} id {value!r} (first at {where}[{first[value]}])")
        first.setdefault(value, index)
