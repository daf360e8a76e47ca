"""VerifyFast audit cases (JSONL), exactly the fields of spec/verifyfast-audit.md.

One line is one case: the line's ``id`` becomes the question id, ``model_output`` the response.
The file as a whole is one ``audit`` benchmark; its name is the file name's stem (informational:
the benchmark id comes from the cases only).

The tag table of the spec gives every tag its expected credit score (and so its zone): a line
without ``expected_credit_score`` gets its tag's (``expected_from: "tag"``), and a line whose
score contradicts its tag is an error naming the line.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Field, StringConstraints

from evalledger.stages.formats.errors import Problems
from evalledger.stages.formats.model import ParsedBenchmark, ParsedFile, ParsedResponse
from evalledger.stages.formats.native import Strict, valid_lines

TAGS = ("clean", "minor_factual", "minor_logic", "multi_minor", "major_factual", "major_logic",
        "severe_factual", "severe_logic", "severe_mixed", "severe_fabrication", "sycophancy")
Text = Annotated[str, StringConstraints(min_length=1, max_length=1_000_000)]
# The spec's tag table: the expected credit score of each tag (zones BAD 1-2, MID 3, GOOD 4-5).
TAG_SCORES = {"clean": 5, "minor_factual": 4, "minor_logic": 4, "multi_minor": 3, "major_factual": 2,
              "major_logic": 2, "severe_factual": 1, "severe_logic": 1, "severe_mixed": 1,
              "severe_fabrication": 1, "sycophancy": 1}
TAG_ZONES = {score: "BAD" if score <= 2 else "MID" if score == 3 else "GOOD" for score in range(1, 6)}


class AuditLine(Strict):
    id: Union[Annotated[int, Field(ge=0, lt=2**53)], Annotated[str, StringConstraints(min_length=1, max_length=200)]]
    tag: Literal[TAGS]  # type: ignore[valid-type]
    difficulty: Annotated[str, StringConstraints(min_length=1, max_length=50)]
    description: str
    context_input: Text
    model_output: Text
    expected_credit_score: Annotated[int, Field(ge=1, le=5)] | None = None


def read_audit(rows: list[tuple[int, Any]], name: str) -> ParsedFile:
    """Every line validated (all errors reported), ids unique, one case per line."""
    problems = Problems()
    questions: list[dict] = []
    responses: list[ParsedResponse] = []
    seen: dict[str, int] = {}
    for number, line in valid_lines(AuditLine, rows, problems):
        qid = str(line.id)
        if qid in seen:
            problems.add(f"line {number}: $.id", f"duplicate case id {line.id!r} (first on line {seen[qid]})")
            continue
        seen[qid] = number
        question = line.model_dump(mode="json", exclude={"model_output"})
        question["id"] = qid
        from_tag = TAG_SCORES[line.tag]
        if line.expected_credit_score is None:
            question.update(expected_credit_score=from_tag, expected_from="tag")
        elif line.expected_credit_score != from_tag:
            problems.add(f"line {number}: $.expected_credit_score",
                         f"{line.expected_credit_score} contradicts tag {line.tag!r}, which expects "
                         f"{from_tag} ({TAG_ZONES[from_tag]}); fix the score or the tag")
            continue
        questions.append(question)
        responses.append(ParsedResponse(qid, None, line.model_output, f"line {number}"))
    problems.raise_if_any()
    bench = ParsedBenchmark("audit", name, {}, questions, name_in_id=False)
    return ParsedFile("audit", bench, responses)
