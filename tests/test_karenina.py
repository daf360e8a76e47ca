"""Karenina checkpoints: every fixture ingests, templates are translated from the AST only."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from evalledger import ledger
from evalledger.stages.formats import FileRejected, parse
from evalledger.stages.formats.karenina_ast import Untranslatable
from evalledger.stages.formats.karenina_template import translate_template
from evalledger.stages.intake import ingest_path
from intake_support import KARENINA, events

# fixture -> (questions registered, questions rejected, traits rejected)
FIXTURES = {
    "minimal.jsonld": (1, 0, 0),
    "multi_question.jsonld": (4, 1, 2),
    "notebook_checkpoint.jsonld": (4, 1, 0),
    "with_results.jsonld": (1, 0, 2),
    "with_rubrics.jsonld": (3, 0, 2),
}


def checkpoint(source: str, rating: list | None = None) -> dict:
    """A one-question checkpoint around a template source."""
    item = {"@type": "Question", "text": "Q?", "acceptedAnswer": {"@type": "Answer", "text": "A"},
            "hasPart": {"@type": "SoftwareSourceCode", "text": textwrap.dedent(source), "programmingLanguage": "Python"}}
    if rating is not None:
        item["rating"] = rating
    return {"@type": "DataFeed", "name": "t", "dataFeedElement": [{"@type": "DataFeedItem", "@id": "urn:q1", "item": item}]}


def fields_of(body: str, fields: str) -> list[dict]:
    """Translate a class with the given field lines and verify() body."""
    source = "class Answer(BaseAnswer):\n" + textwrap.indent(textwrap.dedent(fields), "    ") + \
        "\n    def verify(self) -> bool:\n" + textwrap.indent(textwrap.dedent(body), "        ")
    return translate_template(source).fields


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_every_fixture_ingests_and_registers_what_can_be_translated(tmp_path, name):
    registered, rejected_questions, rejected_traits = FIXTURES[name]
    with ledger.open_ledger(tmp_path / "home") as led:
        result = ingest_path(led, KARENINA / name)
        [bench] = events(led, "benchmark.registered")
        assert result.status == "accepted" and result.format == "karenina"
        assert len(bench.data["questions"]) == registered
        assert len(bench.data["rejected_questions"]) == rejected_questions
        assert len(bench.data["rejected_traits"]) == rejected_traits
        assert led.verify().ok


def test_older_pattern_fixtures_translate_to_exact_primitives():
    multi = parse((KARENINA / "multi_question.jsonld").read_bytes(), "m.jsonld").benchmark
    by_id = {q["id"]: q["template"]["fields"] for q in multi.questions}
    assert by_id["urn:karenina:test:mq001"][0] == {
        "name": "temperature", "type": "int", "description": "Temperature in Celsius",
        "ground_truth": 100, "verify_with": {"type": "NumericExact"}}
    assert by_id["urn:karenina:test:mq002"][0]["verify_with"] == {"type": "OrderedMatch", "normalize": ["lowercase"]}
    assert by_id["urn:karenina:test:mq004"][0]["verify_with"] == {"type": "ExactMatch", "normalize": []}
    [problem] = multi.rejected_questions
    assert problem.where == "$.dataFeedElement[2].item.hasPart.text, template line 11"
    assert "str.replace" in problem.reason


def test_an_or_of_single_field_checks_becomes_the_any_of_strategy():
    rubrics = parse((KARENINA / "with_rubrics.jsonld").read_bytes(), "r.jsonld").benchmark
    template = {q["id"]: q["template"] for q in rubrics.questions}["urn:karenina:test:rq002"]
    assert template["strategy"] == {"type": "any_of"}
    assert [(f["name"], f["verify_with"], f["ground_truth"]) for f in template["fields"]] == [
        ("celsius", {"type": "NumericExact"}, 100), ("fahrenheit", {"type": "NumericExact"}, 212)]


def test_untranslatable_constructs_are_named_with_their_line():
    mixed = checkpoint("""
        class Answer(BaseAnswer):
            a: int = Field(description="a")
            b: int = Field(description="b")
            c: int = Field(description="c")
            def verify(self):
                return (self.a == 1 and self.b == 2) or self.c == 3
    """)
    with pytest.raises(FileRejected) as info:  # its only question is rejected, so the file is
        parse(json.dumps(mixed).encode(), "m.jsonld")
    [problem] = info.value.problems
    assert problem.where.endswith("template line 7") and "exactly one field" in problem.reason
    notebook = parse((KARENINA / "notebook_checkpoint.jsonld").read_bytes(), "n.jsonld").benchmark
    assert "always returns False" in notebook.rejected_questions[0].reason


def test_callable_traits_are_rejected_and_regex_and_llm_traits_kept_with_deep_judgment_settings():
    rubrics = parse((KARENINA / "with_rubrics.jsonld").read_bytes(), "r.jsonld").benchmark
    assert all("never executes" in p.reason for p in rubrics.rejected_traits)
    traits = {t["name"]: t for t in rubrics.questions[0]["rubric"]["traits"]}
    assert traits["HasCitations"] == {"name": "HasCitations", "kind": "regex", "pattern": "\\[\\d+\\]",
                                      "description": "Response includes numeric citations like [1], [2]",
                                      "case_sensitive": True, "invert": False, "higher_is_better": True}
    assert traits["Clarity"]["kind"] == "llm" and traits["Clarity"]["max_score"] == 5
    assert traits["Clarity"]["deep_judgment_enabled"] is False
    assert traits["Accuracy"]["score_kind"] == "boolean" and traits["Clarity"]["score_kind"] == "score"


def test_recorded_results_are_kept_for_provenance_but_open_no_case(tmp_path):
    with ledger.open_ledger(tmp_path / "home") as led:
        result = ingest_path(led, KARENINA / "with_results.jsonld")
        [bench] = events(led, "benchmark.registered")
        assert result.cases_opened == 0 and not events(led, "case.opened")
        [recorded] = bench.data["recorded_results"]
        assert recorded["results"]["template_result"] == {"passed": True, "parsed_value": "Paris"}


def test_verified_fields_translate_with_their_literal_parameters_and_synonym_maps():
    source = '''
        from karenina.schemas.entities import BaseAnswer, VerifiedField
        class Answer(BaseAnswer):
            gene: str = VerifiedField(description="Gene name", ground_truth="BCL2",
                verify_with=ExactMatch(normalize=["lowercase", SynonymMap(mapping={"bcl-2": "bcl2"})]))
            approved: str = VerifiedField(description="Approval date", ground_truth="2016-04-11",
                verify_with=DateTolerance(tolerance=30, unit="days"))
            cites: bool = VerifiedField(description="Cites a trial", ground_truth=True,
                verify_with=TraceRegex(pattern=r"NCT\\d{8}"))
    '''
    fields = {f["name"]: f for f in translate_template(textwrap.dedent(source)).fields}
    assert fields["gene"]["verify_with"] == {"type": "ExactMatch", "normalize": [
        "lowercase", {"type": "SynonymMap", "mapping": {"bcl-2": "bcl2"}}]}
    assert fields["approved"]["type"] == "date"
    assert fields["cites"]["verify_with"] == {"type": "TraceRegex", "pattern": "NCT\\d{8}"}


@pytest.mark.parametrize("fields, body, expected", [
    ("x: str = Field(description='d')\n", "return self.x.strip().lower() == 'paris'",
     ({"type": "ExactMatch", "normalize": ["strip", "lowercase"]}, "paris")),
    ("x: str = Field(description='d')\n", "return self.x.upper() == 'BCL2'",
     ({"type": "ExactMatch", "normalize": ["lowercase"]}, "BCL2")),
    ("x: list[str] = Field(description='d')\n", "return set(self.x) == {'a', 'b'}",
     ({"type": "SetContainment", "mode": "exact"}, ["a", "b"])),
    ("x: list[str] = Field(description='d')\n", "return {c.lower() for c in self.x} == set(['a', 'b'])",
     ({"type": "SetContainment", "mode": "exact", "normalize": ["lowercase"]}, ["a", "b"])),
    ("x: float = Field(description='d')\n", "return abs(self.x - 0.72) <= 0.05",
     ({"type": "NumericTolerance", "tolerance": 0.05, "mode": "absolute"}, 0.72)),
    ("x: int = Field(description='d')\n", "return 1 <= self.x <= 5",
     ({"type": "NumericRange", "min": 1, "max": 5}, None)),
    ("x: str = Field(description='d')\n", "return 'apoptosis' in self.x.lower()",
     ({"type": "ContainsAny", "substrings": ["apoptosis"], "normalize": ["lowercase"]}, None)),
    ("x: bool = Field(description='d')\n", "return not self.x",
     ({"type": "BooleanMatch"}, False)),
    ("x: Literal['I', 'II'] = Field(description='d')\n", "return self.x == 'II'",
     ({"type": "LiteralMatch"}, "II")),
])
def test_older_verify_patterns_translate_exactly(fields, body, expected):
    [field] = fields_of(body, fields)
    assert (field["verify_with"], field["ground_truth"]) == expected


def test_local_conditions_joined_by_and_give_one_primitive_per_field():
    fields = fields_of("""
        a_ok = self.a == self.correct["a"]
        b_ok = abs(self.b - self.correct["b"]) <= 0.5
        return a_ok and b_ok
    """, "a: int = Field(description='a')\nb: float = Field(description='b')\n"
         "def model_post_init(self, __context):\n    self.correct = {'a': 3, 'b': 1.5}\n")
    assert [f["verify_with"]["type"] for f in fields] == ["NumericExact", "NumericTolerance"]
    assert [f["ground_truth"] for f in fields] == [3, 1.5]


@pytest.mark.parametrize("fields, body, reason", [
    ("x: str = Field(description='d')\n", "return self.x.lower() == 'Paris'", "can never be true"),
    ("x: int = Field(description='d')\n", "return self.x < 5", "strict"),
    ("x: int = Field(description='d')\n", "return self.x != 5", "negated"),
    ("x: str = Field(description='d')\n", "return self.x.casefold() == 'a'", "no exact equivalent"),
    ("x: str = Field(description='d')\n", "return len(self.x) == 3", "cannot be translated"),
    ("x: int = Field(description='d')\ny: int = Field(description='d')\n", "return self.x == self.y", "two fields"),
    ("x: int = Field(description='d')\n", "return self.x == 1 and self.x == 2", "more than once"),
    ("x: int = Field(description='d')\n", "return self.correct['x'] == self.x", "never assigned"),
    ("x: int = Field(description='d')\n", "if self.x:\n    return True\nreturn False", "only `name = <condition>`"),
    ("x: int = Field(description='d')\n", "return self.helper(self.x)", "unsupported condition"),
])
def test_untranslatable_verify_bodies_are_refused_with_the_construct(fields, body, reason):
    with pytest.raises(Untranslatable) as info:
        fields_of(body, fields)
    assert reason in info.value.reason and info.value.line is not None


def test_a_question_that_cannot_be_translated_does_not_stop_the_others(tmp_path):
    good = checkpoint("""
        class Answer(BaseAnswer):
            n: int = Field(description="n")
            def verify(self):
                return self.n == 4
    """)
    bad = checkpoint("""
        class Answer(BaseAnswer):
            n: int = Field(description="n")
            def verify(self):
                return self.n == 4 or self.n == 5
    """)
    bad["dataFeedElement"][0]["@id"] = "urn:q2"
    good["dataFeedElement"].append(bad["dataFeedElement"][0])
    parsed = parse(json.dumps(good).encode(), "c.jsonld").benchmark
    assert [q["id"] for q in parsed.questions] == ["urn:q1"]
    assert parsed.rejected_questions[0].where == "$.dataFeedElement[1].item.hasPart.text, template line 5"


def side_effect_template(marker) -> str:
    """A template that writes ``marker`` when imported, run or instantiated, and is otherwise fine."""
    return textwrap.dedent(f"""
        open({str(marker)!r}, "w").write("module level ran")
        import os
        from karenina.schemas.entities import BaseAnswer
        from pydantic import Field

        class Answer(BaseAnswer):
            _x = os.system("touch {marker}.system")
            n: int = Field(description="The number", default=open({str(marker)!r}, "a").write("field default ran"))

            def model_post_init(self, __context):
                self.correct = {{"n": 4}}

            def verify(self) -> bool:
                return self.n == self.correct["n"]
    """)


def test_a_template_that_would_write_a_file_is_ingested_without_the_file_appearing(tmp_path):
    # The same template really writes its marker when Python runs it (here in a throwaway process):
    ran = tmp_path / "proof-it-writes"
    subprocess.run([sys.executable, "-c", side_effect_template(ran)], capture_output=True, cwd=tmp_path)
    assert ran.exists()
    # Ingested, it registers and its marker never appears.
    marker = tmp_path / "must-not-exist"
    doc = checkpoint(side_effect_template(marker))
    path = tmp_path / "evil.jsonld"
    path.write_text(json.dumps(doc))
    with ledger.open_ledger(tmp_path / "home") as led:
        result = ingest_path(led, path)
        [bench] = events(led, "benchmark.registered")
    assert result.status == "accepted"
    assert bench.data["questions"][0]["template"]["fields"][0]["verify_with"] == {"type": "NumericExact"}
    assert any("module-level" in note for note in bench.data["questions"][0]["translation"]["notes"])
    assert not marker.exists() and not (tmp_path / "must-not-exist.system").exists()


def test_a_translated_field_that_fails_native_checks_is_named_by_its_source_name():
    doc = checkpoint("""
        class Answer(BaseAnswer):
            x: int = VerifiedField(description="x", ground_truth="four", verify_with=NumericExact())
    """)
    doc["dataFeedElement"].append(checkpoint("""
        class Answer(BaseAnswer):
            x: int = VerifiedField(description="x", ground_truth=4, verify_with=NumericExact())
    """)["dataFeedElement"][0] | {"@id": "urn:q2"})
    [problem] = parse(json.dumps(doc).encode(), "c.jsonld").benchmark.rejected_questions
    assert problem.where == "$.dataFeedElement[0].item.hasPart.text, field 'x': ground_truth"
    assert "'four' does not fit the field type int" in problem.reason


@pytest.mark.parametrize("condition", ["self.x == " + "-" * 200_000 + "1", "not " * 50_000 + "self.x",
                                       "self.x == " + "(" * 300 + "1" + ")" * 300])
def test_pathological_template_source_rejects_the_question_without_crashing(condition):
    source = f"class Answer(BaseAnswer):\n    x: int = Field(description='d')\n    def verify(self):\n        return {condition}\n"
    with pytest.raises(Untranslatable):
        translate_template(source)


@pytest.mark.parametrize("annotation", ["Optional[int]", "int | None", "None | int", "Union[int, None]",
                                        "typing.Optional[int]"])
def test_optional_field_types_translate_to_the_inner_type(annotation):
    [field] = fields_of("return self.n == 3", f"n: {annotation} = Field(description='n')\n")
    assert field["type"] == "int" and field["verify_with"] == {"type": "NumericExact"}


def test_unions_of_real_types_are_refused():
    with pytest.raises(Untranslatable) as info:
        fields_of("return self.n == 3", "n: int | str = Field(description='n')\n")
    assert "unsupported field type" in info.value.reason
