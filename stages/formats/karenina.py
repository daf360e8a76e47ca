"""Karenina checkpoints (JSON-LD ``DataFeed``) into native benchmarks, without executing anything.

Per question: the ``hasPart`` template source is translated by ``karenina_template`` (AST only),
``rating`` traits by ``karenina_traits``; global ``rating`` traits apply to every question. A
question whose template cannot be translated is rejected with the construct and its line, and the
rest of the checkpoint registers (a file with no question left is rejected as a whole).
Recorded results (``custom_verification_results``) carry no response text, so they open no cases;
they are kept on ``benchmark.registered`` as ``recorded_results`` for provenance.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError

from evalledger.stages.formats.errors import FileRejected, Problem, Problems, from_validation_error
from evalledger.stages.formats.ids import question_id_from_text
from evalledger.stages.formats.karenina_ast import Untranslatable
from evalledger.stages.formats.karenina_template import translate_template
from evalledger.stages.formats.karenina_traits import properties, read_traits
from evalledger.stages.formats.model import ParsedBenchmark, ParsedFile
from evalledger.stages.formats.native import Template, check_rubric, check_template

DEFAULT_NAME = "karenina-checkpoint"


def read_checkpoint(doc: dict) -> ParsedFile:
    """Every question translated or rejected on its own; file-level problems reject the file."""
    problems = Problems()
    elements = doc.get("dataFeedElement")
    if not isinstance(elements, list) or not elements:
        raise FileRejected([Problem("$.dataFeedElement", "a Karenina checkpoint lists its questions in "
                                                         "dataFeedElement (a non-empty list)")])
    name = doc.get("name") if isinstance(doc.get("name"), str) and doc["name"].strip() else DEFAULT_NAME
    global_traits, rejected_traits = read_traits(doc.get("rating"), "$.rating")
    questions: list[dict] = []
    rejected: list[Problem] = []
    recorded: list[dict] = []
    seen: dict[str, str] = {}
    for index, element in enumerate(elements):
        where = f"$.dataFeedElement[{index}]"
        try:
            question, traits_rejected, results = _question(element, where, global_traits)
        except FileRejected as exc:
            rejected.extend(exc.problems)
            continue
        if question["id"] in seen:
            problems.add(f"{where}.@id", f"duplicate question id {question['id']!r} (first at {seen[question['id']]})")
            continue
        seen[question["id"]] = where
        rejected_traits.extend(traits_rejected)
        questions.append(question)
        if results is not None:
            recorded.append({"question_id": question["id"], "results": results})
    problems.raise_if_any()
    if not questions:
        raise FileRejected(rejected or [Problem("$.dataFeedElement", "no question could be registered")])
    extra: dict[str, Any] = {"karenina_id": doc.get("@id")}
    if isinstance(doc.get("description"), str):
        extra["description"] = doc["description"]
    if recorded:
        extra["recorded_results"] = recorded
    bench = ParsedBenchmark("template", name, {}, questions, rejected, rejected_traits, extra)
    return ParsedFile("karenina", bench, [])


def _question(element: Any, where: str, global_traits: list[dict]) -> tuple[dict, list[Problem], Any]:
    """One DataFeedItem as a native question, the traits it could not keep, its recorded results."""
    item = element.get("item") if isinstance(element, dict) else None
    if not isinstance(item, dict):
        raise FileRejected([Problem(f"{where}.item", "each dataFeedElement holds an item (a Question)")])
    text = item.get("text")
    if not isinstance(text, str) or not text.strip():
        raise FileRejected([Problem(f"{where}.item.text", "the question text is missing or empty")])
    qid = _question_id(element, item, text)
    template, notes = _template(item.get("hasPart"), f"{where}.item.hasPart")
    own_traits, traits_rejected = read_traits(item.get("rating"), f"{where}.item.rating")
    traits = _combine(global_traits, own_traits, f"{where}.item.rating", traits_rejected)
    if template is None and not traits:
        raise FileRejected([Problem(where, "the question has neither a template nor a usable rubric trait")])
    question: dict[str, Any] = {"id": qid, "question": text, "template": template,
                                "rubric": {"traits": traits} if traits else None}
    problems = _native_shape(template, f"{where}.item.hasPart")
    problems += check_template(template, f"{where}.item.hasPart") if template and not problems else []
    problems = _in_source_terms(problems, template, f"{where}.item.hasPart")
    problems += check_rubric(question["rubric"], f"{where}.item.rating") if traits else []
    if problems:
        raise FileRejected(problems)
    props = properties(item.get("additionalProperty"))
    answer = item.get("acceptedAnswer")
    if isinstance(answer, dict) and isinstance(answer.get("text"), str):
        question["raw_answer"] = answer["text"]
    if isinstance(props.get("finished"), bool):
        question["finished"] = props["finished"]
    if isinstance(item.get("keywords"), list):
        question["keywords"] = [k for k in item["keywords"] if isinstance(k, str)]
    question["translation"] = {"from": "karenina", "notes": notes}
    return question, traits_rejected, props.get("custom_verification_results")


def _native_shape(template: dict | None, where: str) -> list[Problem]:
    """A translated template must be a valid native template (same model as native files)."""
    if template is None:
        return []
    try:
        Template.model_validate(template)
    except ValidationError as exc:
        return from_validation_error(exc, where, template)
    return []


def _in_source_terms(problems: list[Problem], template: dict | None, base: str) -> list[Problem]:
    """Name a translated field by its name in the template source, not by a path that exists only
    in the translation (``hasPart.fields[0].ground_truth`` -> ``hasPart.text, field 'x': ground_truth``)."""
    if not template:
        return problems
    out = []
    for problem in problems:
        match = re.match(re.escape(base) + r"\.fields\[(\d+)\]\.?(.*)$", problem.where)
        if match and int(match.group(1)) < len(template["fields"]):
            name = template["fields"][int(match.group(1))]["name"]
            rest = f": {match.group(2)}" if match.group(2) else ""
            out.append(Problem(f"{base}.text, field {name!r}{rest}", f"question not registered: {problem.reason}"))
        else:
            out.append(problem)
    return out


def _question_id(element: dict, item: dict, text: str) -> str:
    """The DataFeedItem's @id, else the Question's @id, else derived from the question text."""
    for candidate in (element.get("@id"), item.get("@id")):
        if isinstance(candidate, str) and candidate.strip():
            return candidate.strip()
    return question_id_from_text(text)


def _template(part: Any, where: str) -> tuple[dict | None, list[str]]:
    """The translated template of ``hasPart`` (None when the question has none)."""
    if part is None:
        return None, []
    source = part.get("text") if isinstance(part, dict) else None
    if not isinstance(source, str) or not source.strip():
        raise FileRejected([Problem(f"{where}.text", "hasPart holds no template source")])
    language = part.get("programmingLanguage", "Python")
    if language != "Python":
        raise FileRejected([Problem(f"{where}.programmingLanguage", f"templates are Python, not {language!r}")])
    try:
        translation = translate_template(source)
    except Untranslatable as exc:
        place = f"{where}.text, template line {exc.line}" if exc.line else f"{where}.text"
        raise FileRejected([Problem(place, f"question not registered: {exc.reason}")]) from None
    return translation.template(), translation.notes


def _combine(global_traits: list[dict], own: list[dict], where: str, rejected: list[Problem]) -> list[dict]:
    """Global traits then the question's own; a name used twice keeps the question's own trait."""
    own_names = {t["name"] for t in own}
    for trait in global_traits:
        if trait["name"] in own_names:
            rejected.append(Problem(where, f"trait {trait['name']!r} is both global and question-specific; "
                                           "the question-specific one is used"))
    return [t for t in global_traits if t["name"] not in own_names] + own
