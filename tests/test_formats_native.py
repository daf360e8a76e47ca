"""Native benchmark and responses files: what is accepted, and every error with its place."""

from __future__ import annotations

import copy
import json

import pytest

from evalledger.stages.formats import FileRejected, parse
from intake_support import BENCHMARK, benchmark


def reasons(doc) -> dict[str, str]:
    """{where: reason} of every problem of a document, which must be rejected."""
    with pytest.raises(FileRejected) as info:
        parse(json.dumps(doc).encode(), "bench.json")
    return {p.where: p.reason for p in info.value.problems}


def test_the_formats_example_is_read_as_a_template_benchmark_with_its_response():
    parsed = parse(json.dumps(BENCHMARK).encode(), "bench.json")
    assert parsed.format == "benchmark"
    assert parsed.benchmark.kind == "template" and parsed.benchmark.name == "chromosomes"
    [question] = parsed.benchmark.questions
    assert question["template"]["fields"][0]["verify_with"] == {"type": "NumericExact"}
    assert [(r.question_id, r.model) for r in parsed.responses] == [("q1", "model-a")]


def test_every_error_of_a_file_is_reported_at_once_with_its_json_path():
    doc = benchmark()
    doc["questions"][0]["template"]["fields"][0]["type"] = "integer"
    doc["questions"][0]["rubric"]["traits"][0]["min_score"] = "1"
    doc["questions"].append({"id": "q2"})
    found = reasons(doc)
    assert "$.questions[0].template.fields[0].type" in found
    assert "$.questions[0].rubric.traits[0].min_score" in found
    assert found["$.questions[1].question"] == "required key is missing"


def test_duplicate_question_ids_are_rejected_naming_both_places():
    doc = benchmark()
    doc["questions"].append(copy.deepcopy(doc["questions"][0]))
    found = reasons(doc)
    assert "duplicate question id 'q1'" in found["$.questions[1].id"]
    assert "$.questions[0]" in found["$.questions[1].id"]


def test_unknown_primitive_and_bad_parameters_go_through_the_primitives_loader():
    doc = benchmark()
    fields = doc["questions"][0]["template"]["fields"]
    fields[0]["verify_with"] = {"type": "NumericExactly"}
    fields[1]["verify_with"] = {"type": "TraceRegex", "pattern": "([unclosed"}
    found = reasons(doc)
    assert "unknown primitive type 'NumericExactly'" in found["$.questions[0].template.fields[0].verify_with"]
    assert "TraceRegex" in found["$.questions[0].template.fields[1].verify_with"]


def test_ground_truth_must_fit_the_field_type_and_the_primitive():
    doc = benchmark()
    fields = doc["questions"][0]["template"]["fields"]
    fields[0]["ground_truth"] = "23"
    fields[1]["type"] = "str"
    found = reasons(doc)
    assert "does not fit the field type int" in found["$.questions[0].template.fields[0].ground_truth"]
    assert "must have type bool" in found["$.questions[0].template.fields[1].type"]


def test_literal_fields_need_values_and_a_ground_truth_among_them():
    doc = benchmark()
    doc["questions"][0]["template"]["fields"] = [
        {"name": "phase", "type": "literal", "description": "Trial phase", "values": ["I", "II", "III"],
         "ground_truth": "IV", "verify_with": {"type": "LiteralMatch"}}]
    assert "not one of the field's values" in reasons(doc)["$.questions[0].template.fields[0].ground_truth"]


def test_unknown_config_keys_are_rejected_and_known_ones_type_checked():
    found = reasons(benchmark(config={"deep_judgment_enabld": True, "deep_judgment_fuzzy_match_threshold": 1.5}))
    assert "not a VerificationConfig field; docs/stages.md lists them); did you mean 'deep_judgment_enabled'?" \
        in found["$.config.deep_judgment_enabld"]
    assert "$.config.deep_judgment_fuzzy_match_threshold" in found


def test_responses_must_name_questions_of_the_benchmark_and_not_repeat_a_model():
    doc = benchmark(responses=[{"question_id": "q9", "model": "m", "text": "x"},
                               {"question_id": "q1", "model": "m", "text": "a"},
                               {"question_id": "q1", "model": "m", "text": "b"}])
    found = reasons(doc)
    assert "unknown question id 'q9'" in found["$.responses[0].question_id"]
    assert "already answered question 'q1' at $.responses[1]" in found["$.responses[2]"]


def test_a_question_needs_a_template_or_a_rubric_and_regex_traits_must_compile():
    doc = benchmark()
    doc["questions"][0]["template"] = None
    doc["questions"][0]["rubric"]["traits"][1]["pattern"] = "(unclosed"
    doc["questions"].append({"id": "q2", "question": "Bare?"})
    found = reasons(doc)
    assert "not a valid regular expression" in found["$.questions[0].rubric.traits[1].pattern"]
    assert "needs a template, a rubric, or both" in found["$.questions[1]"]


def test_responses_file_names_its_benchmark_and_is_read_without_it():
    doc = {"format": "evalledger/responses@1", "benchmark": "chromosomes",
           "responses": [{"question_id": "q1", "model": "model-b", "text": "23 pairs"}]}
    parsed = parse(json.dumps(doc).encode(), "r.json")
    assert parsed.format == "responses" and parsed.benchmark_ref == "chromosomes"
    assert parsed.benchmark is None and parsed.responses[0].model == "model-b"


def test_unknown_format_is_named():
    found = reasons({"format": "evalledger/benchmark@2", "name": "x"})
    assert "unknown format 'evalledger/benchmark@2'" in found["$.format"]
    assert "not a recognised format" in reasons({"hello": "world"})["$"]


def test_a_bad_config_is_reported_together_with_shape_errors():
    doc = benchmark(config={"deep_judgment_enabld": True})
    del doc["questions"][0]["question"]
    found = reasons(doc)
    assert "$.questions[0].question" in found and "$.config.deep_judgment_enabld" in found


def test_a_missing_format_key_is_named_with_the_value_to_add():
    doc = benchmark()
    del doc["format"]
    assert 'starts with "format": "evalledger/benchmark@1"' in reasons(doc)["$.format"]
    found = reasons({"benchmark": "chromosomes", "responses": [{"question_id": "q1", "model": "m", "text": "t"}]})
    assert '"evalledger/responses@1"' in found["$.format"]


def test_metric_traits_are_native_and_checked():
    doc = benchmark()
    doc["questions"][0]["rubric"]["traits"].append(
        {"name": "findings", "kind": "metric", "metrics": ["precision", "recall"],
         "tp_instructions": ["mentions diploidy"], "evaluation_mode": "tp_only"})
    [question] = parse(json.dumps(doc).encode(), "b.json").benchmark.questions
    assert question["rubric"]["traits"][2]["metrics"] == ["precision", "recall"]
    doc["questions"][0]["rubric"]["traits"][2]["metrics"] = ["auc"]
    assert "$.questions[0].rubric.traits[2].metrics[0]" in reasons(doc)
