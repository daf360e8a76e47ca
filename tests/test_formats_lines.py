"""Responses JSONL, VerifyFast audit JSONL and reconstruction documents."""

from __future__ import annotations

import json

import pytest

from evalledger.stages.formats import FileRejected, parse
from evalledger.stages.formats.audit import TAGS
from intake_support import SAMPLES, response_lines


def audit_line(**changes) -> dict:
    line = {"id": 1, "tag": "clean", "difficulty": "easy", "description": "d",
            "context_input": "Revenue rose 6%.", "model_output": "Revenue rose 6%.", "expected_credit_score": 5}
    line.update(changes)
    return line


def jsonl(rows) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def problems_of(raw: bytes, name: str = "in.jsonl") -> dict[str, str]:
    with pytest.raises(FileRejected) as info:
        parse(raw, name)
    return {p.where: p.reason for p in info.value.problems}


def test_sample_audit_file_covers_all_eleven_tags_with_expected_scores():
    parsed = parse((SAMPLES / "verifyfast-cases.audit.jsonl").read_bytes(), "verifyfast-cases.audit.jsonl")
    tags = {q["tag"] for q in parsed.benchmark.questions}
    assert parsed.format == "audit" and tags == set(TAGS) and len(parsed.responses) >= 22
    assert all(q["expected_credit_score"] in range(1, 6) for q in parsed.benchmark.questions)
    assert parsed.responses[0].question_id == "1" and parsed.responses[0].model is None


def test_audit_errors_name_the_line_and_field_for_every_bad_line():
    rows = [audit_line(id=1), audit_line(id=2, tag="minor"), audit_line(id=3, expected_credit_score=9),
            audit_line(id=1), audit_line(id=5, extra="x")]
    found = problems_of(jsonl(rows))
    assert "line 2: $.tag" in found and "line 3: $.expected_credit_score" in found
    assert "duplicate case id 1 (first on line 1)" in found["line 4: $.id"]
    assert found["line 5: $.extra"] == "unknown key (not part of this format)"


def test_a_broken_line_in_jsonl_is_reported_with_the_other_errors():
    raw = jsonl([audit_line(id=1)]) + b'{"id": 2, "tag": \n' + jsonl([audit_line(id=3, tag="nope")])
    found = problems_of(raw)
    assert any(w.startswith("line 2, column") for w in found) and "line 3: $.tag" in found


def test_a_single_audit_line_is_still_an_audit_file():
    parsed = parse(jsonl([audit_line()]), "one.jsonl")
    assert parsed.format == "audit" and len(parsed.benchmark.questions) == 1


def test_response_lines_must_all_name_the_same_benchmark():
    raw = response_lines("a", [("q1", "m", "x")]) + response_lines("b", [("q2", "m", "y")])
    found = problems_of(raw.encode())
    assert "one file, one benchmark" in found["line 2: $.benchmark"]


def test_response_lines_reject_a_model_answering_twice():
    raw = response_lines("a", [("q1", "m", "x"), ("q1", "m", "y")])
    assert "already answered question 'q1' at line 1" in problems_of(raw.encode())["line 2"]


def test_sample_reconstruction_has_claims_of_several_types_and_importances():
    parsed = parse((SAMPLES / "polio-vaccine-1955.reconstruction.json").read_bytes(), "r.json")
    [question] = parsed.benchmark.questions
    claims = question["original_claims"]
    assert parsed.format == "reconstruction" and parsed.benchmark.kind == "reconstruction"
    assert len(claims) >= 8 and len({c["type"] for c in claims}) >= 4 and len({c["importance"] for c in claims}) >= 3
    assert question["id"] == question["doc_id"] == parsed.responses[0].question_id
    assert set(parsed.responses[0].response) == {"answers", "synthesis"}


def test_reconstruction_errors_name_places():
    doc = json.loads((SAMPLES / "polio-vaccine-1955.reconstruction.json").read_text())
    doc["original_claims"][1]["id"] = "c1"
    doc["original_claims"][2]["importance"] = "high"
    del doc["reconstruction"]["synthesis"]
    found = problems_of(json.dumps(doc).encode(), "r.json")
    assert "$.original_claims[2].importance" in found
    assert found["$.reconstruction.synthesis"] == "required key is missing"
    doc = json.loads((SAMPLES / "polio-vaccine-1955.reconstruction.json").read_text())
    doc["original_claims"][1]["id"] = "c1"
    assert "duplicate claim id 'c1'" in problems_of(json.dumps(doc).encode(), "r.json")["$.original_claims[1].id"]
