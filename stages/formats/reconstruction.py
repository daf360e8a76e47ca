"""Reconstruction documents (``evalledger/reconstruction@1``), as in spec/reconstruction-judge.md.

The document (claims and target text) is the benchmark, named by its ``doc_id``; the
reconstruction is the response, by the optional ``model`` (null when not given). A JSONL file
holds several documents, one per line: they form one benchmark named after the file, one
question per document. A document may name the ``collection`` it belongs to (the reports
aggregate a collection's documents together); without one it belongs to the home's default
collection, or to the folder it was ingested with.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from evalledger.stages.formats.errors import Problems
from evalledger.stages.formats.model import ParsedBenchmark, ParsedFile, ParsedResponse
from evalledger.stages.formats.native import Name, Strict, Text, _validate, valid_lines


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
    collection: Name | None = None
    original_claims: Annotated[list[Claim], Field(min_length=1)]
    target_document: Text
    reconstruction: Reconstruction


def read_reconstruction(doc: Any) -> ParsedFile:
    """Validate the document; claim ids and answer ids are unique."""
    parsed = _validate(Document, doc)
    problems = Problems()
    question = _question(parsed, "$", problems)
    problems.raise_if_any()
    bench = ParsedBenchmark("reconstruction", parsed.doc_id, {}, [question])
    response = parsed.reconstruction.model_dump(mode="json")
    return ParsedFile("reconstruction", bench, [ParsedResponse(parsed.doc_id, parsed.model, response, "$.reconstruction")])


def read_reconstruction_lines(rows: list[tuple[int, Any]], name: str) -> ParsedFile:
    """A JSONL file of documents, one per line (every line checked, doc ids unique): one
    benchmark named ``name`` with a question per document."""
    problems = Problems()
    questions: list[dict] = []
    responses: list[ParsedResponse] = []
    seen: dict[str, int] = {}
    for number, parsed in valid_lines(Document, rows, problems):
        if parsed.doc_id in seen:
            problems.add(f"line {number}: $.doc_id",
                         f"duplicate doc_id {parsed.doc_id!r} (first on line {seen[parsed.doc_id]})")
            continue
        seen[parsed.doc_id] = number
        questions.append(_question(parsed, f"line {number}: $", problems))
        responses.append(ParsedResponse(parsed.doc_id, parsed.model, parsed.reconstruction.model_dump(mode="json"),
                                        f"line {number}: $.reconstruction"))
    problems.raise_if_any()
    return ParsedFile("reconstruction", ParsedBenchmark("reconstruction", name, {}, questions), responses)


def _question(parsed: Document, where: str, problems: Problems) -> dict[str, Any]:
    """The document as a question (claim and answer ids checked unique; its collection when named)."""
    _unique([c.id for c in parsed.original_claims], f"{where}.original_claims", "claim", problems)
    _unique([a.id for a in parsed.reconstruction.answers], f"{where}.reconstruction.answers", "answer", problems)
    question = {"id": parsed.doc_id, "doc_id": parsed.doc_id,
                "original_claims": [c.model_dump(mode="json") for c in parsed.original_claims],
                "target_document": parsed.target_document}
    if parsed.collection is not None:
        question["collection"] = parsed.collection
    return question


def _unique(ids: list[str], where: str, what: str, problems: Problems) -> None:
    first: dict[str, int] = {}
    for index, value in enumerate(ids):
        if value in first:
            problems.add(f"{where}[{index}].id", f"duplicate {what} id {value!r} (first at {where}[{first[value]}])")
        first.setdefault(value, index)
