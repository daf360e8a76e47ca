"""Native benchmark (``evalledger/benchmark@1``) and responses (``evalledger/responses@1``, JSONL).

Pydantic models check the shape; ``check_benchmark`` then checks what a schema cannot: unique ids
and names, ground truths that fit their field type, and every ``verify_with`` through the
primitives' own loader.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Iterator, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from evalledger.stages.formats.checks import check_config, check_expected, check_loadable, check_primitive, is_trace
from evalledger.stages.formats.errors import FileRejected, Problem, Problems, from_validation_error, join_path
from evalledger.stages.formats.model import ParsedBenchmark, ParsedFile, ParsedResponse
from evalledger.stages.primitives.patterns import backtracking_risk

BENCHMARK_FORMAT = "evalledger/benchmark@1"
RESPONSES_FORMAT = "evalledger/responses@1"

Text = Annotated[str, StringConstraints(min_length=1, max_length=1_000_000)]
Name = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^\S(.*\S)?$")]
Score = Annotated[int, Field(ge=-1000, le=1000)]
FIELD_TYPES = ("bool", "int", "float", "str", "list[str]", "literal", "date")
# Primitives that carry their expected values as parameters and ignore ground_truth.
IGNORES_GROUND_TRUTH = frozenset({"ContainsAny", "ContainsAll", "RegexMatch", "NumericRange", "DateRange"})


class Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False)


class TemplateField(Strict):
    name: Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")]
    type: Literal["bool", "int", "float", "str", "list[str]", "literal", "date"]
    description: Text
    ground_truth: Any = None
    values: list[Text] | None = None
    verify_with: dict[str, Any]
    weight: Annotated[float, Field(ge=0, le=1e6)] = 1.0


class Template(Strict):
    fields: Annotated[list[TemplateField], Field(min_length=1)]
    strategy: str | dict[str, Any] | None = None  # checked by the stages' own VerdictRule loader


class DeepJudgmentTraitSettings(Strict):
    """Per-trait deep judgment settings (spec/deep-judgment-rubrics.md, ``use_checkpoint`` mode)."""

    deep_judgment_enabled: bool = False
    deep_judgment_excerpt_enabled: bool = True
    deep_judgment_max_excerpts: Annotated[int, Field(ge=1, le=100)] | None = None
    deep_judgment_fuzzy_match_threshold: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    deep_judgment_excerpt_retry_attempts: Annotated[int, Field(ge=0, le=20)] | None = None
    deep_judgment_search_enabled: bool = False


class LLMTrait(DeepJudgmentTraitSettings):
    name: Name
    kind: Literal["llm"]
    description: Text
    min_score: Score = 1
    max_score: Score = 5
    score_kind: Literal["score", "boolean"] = "score"
    higher_is_better: bool = True


class RegexTrait(Strict):
    name: Name
    kind: Literal["regex"]
    description: str = ""
    pattern: Text
    case_sensitive: bool = True
    invert: bool = False
    higher_is_better: bool = True


class MetricTrait(Strict):
    name: Name
    kind: Literal["metric"]
    description: str = ""
    evaluation_mode: Literal["tp_only", "full_matrix"] = "tp_only"
    metrics: Annotated[list[Literal["precision", "recall", "specificity", "accuracy", "f1"]], Field(min_length=1)]
    tp_instructions: Annotated[list[Text], Field(min_length=1)]
    tn_instructions: list[Text] = []


Trait = Annotated[Union[LLMTrait, RegexTrait, MetricTrait], Field(discriminator="kind")]


class Rubric(Strict):
    traits: Annotated[list[Trait], Field(min_length=1)]


class Question(Strict):
    id: Name
    question: Text
    template: Template | None = None
    rubric: Rubric | None = None


class Response(Strict):
    question_id: Name
    model: Name
    text: Annotated[str, StringConstraints(max_length=1_000_000)]


class Benchmark(Strict):
    format: Literal["evalledger/benchmark@1"]
    name: Name
    description: str = ""
    config: dict[str, Any] = {}
    questions: Annotated[list[Question], Field(min_length=1, max_length=100_000)]
    responses: list[Response] = []


class ResponsesFile(Strict):
    format: Literal["evalledger/responses@1"]
    benchmark: Name
    responses: Annotated[list[Response], Field(min_length=1)]


class ResponseLine(Response):
    benchmark: Name


def _validate(model: type[BaseModel], doc: Any, where: str = "$") -> Any:
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        raise FileRejected(from_validation_error(exc, where, doc)) from None


def valid_lines(model: type[BaseModel], rows: list[tuple[int, Any]], problems: Problems) -> Iterator[tuple[int, Any]]:
    """(line number, validated line) for each JSONL row that fits ``model``; the others' errors go
    to ``problems`` (every line is checked, so a file's errors are reported all at once)."""
    for number, row in rows:
        try:
            yield number, _validate(model, row, f"line {number}: $")
        except FileRejected as exc:
            problems.extend(exc.problems)


class _BenchmarkShell(Benchmark):
    """``Benchmark`` with its questions and responses left unchecked: ``_itemwise`` checks them
    one at a time."""

    questions: Annotated[list[Any], Field(min_length=1, max_length=100_000)]
    responses: list[Any] = []


def _itemwise(doc: dict) -> tuple[Benchmark, list[dict], list[ParsedResponse]]:
    """``doc`` validated as a ``Benchmark`` one question and one response at a time: (the benchmark
    without its questions and responses, the question dicts, the responses), or FileRejected
    with every problem, in the order a whole-document validation gives them.

    A whole-document model costs several times the file on top of the parsed document; checked
    item by item, each item's model is dropped once converted, and each item of the document too
    (nothing reads the document after this: it is emptied), so a large file is held about once.
    """
    problems: list[Problem] = []
    try:
        bench = _BenchmarkShell.model_validate(doc)
    except ValidationError as exc:
        problems = from_validation_error(exc, "$", doc)
        bench = None
    items = doc.get("questions"), doc.get("responses")
    questions: list[dict] = []
    responses: list[ParsedResponse] = []
    for key, model, out in (("questions", Question, questions), ("responses", Response, responses)):
        given = items[0] if key == "questions" else items[1]
        if not isinstance(given, list) or any(p.where == f"$.{key}" for p in problems):
            continue
        for index, item in enumerate(given):
            where = f"$.{key}[{index}]"
            try:
                valid = model.model_validate(item)
            except ValidationError as exc:
                problems += from_validation_error(exc, where, item)
                continue
            out.append(valid.model_dump(mode="json") if key == "questions"
                       else ParsedResponse(valid.question_id, valid.model, valid.text, where))
            given[index] = None
    doc.clear()
    if problems or bench is None:
        raise FileRejected(problems)
    return bench, questions, responses


def read_benchmark(doc: dict) -> ParsedFile:
    """A native benchmark file: the benchmark and the responses it carries (may be none)."""
    config = doc.get("config")
    try:
        bench, questions, responses = _itemwise(doc)
    except FileRejected as exc:  # report a bad config along with the shape errors
        raise FileRejected(exc.problems + (check_config(config) if isinstance(config, dict) else [])) from None
    problems = Problems()
    problems.extend(check_config(bench.config))
    problems.extend(check_questions(questions))
    parsed = ParsedBenchmark("template", bench.name, dict(bench.config), questions,
                             extra={"description": bench.description} if bench.description else {})
    problems.extend(check_responses(responses, parsed))
    problems.raise_if_any()
    return ParsedFile("benchmark", parsed, responses)


def check_questions(questions: list[dict], base: str = "$.questions") -> list[Problem]:
    """Unique ids, a template or rubric each, and every field and trait consistent."""
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for index, q in enumerate(questions):
        where = f"{base}[{index}]"
        if q["id"] in seen:
            problems.append(Problem(f"{where}.id", f"duplicate question id {q['id']!r} "
                                                   f"(first at {base}[{seen[q['id']]}])"))
        seen.setdefault(q["id"], index)
        problems.extend(check_question(q, where))
    return problems


def check_question(q: dict, where: str) -> list[Problem]:
    """One question on its own (its id's uniqueness aside): a template or rubric, each consistent."""
    problems: list[Problem] = []
    if q.get("template") is None and q.get("rubric") is None:
        problems.append(Problem(where, "a question needs a template, a rubric, or both"))
    if q.get("template"):
        problems.extend(check_template(q["template"], f"{where}.template"))
    if q.get("rubric"):
        problems.extend(check_rubric(q["rubric"], f"{where}.rubric"))
    return problems


def check_template(template: dict, where: str) -> list[Problem]:
    """Unique field names; each field's ground truth, values and primitive agree."""
    problems: list[Problem] = []
    names: set[str] = set()
    for index, fld in enumerate(template["fields"]):
        place = f"{where}.fields[{index}]"
        if fld["name"] in names:
            problems.append(Problem(f"{place}.name", f"duplicate field name {fld['name']!r}"))
        names.add(fld["name"])
        problems.extend(check_field(fld, place))
    if not problems:
        problems.extend(check_loadable(template, where))
    return problems


def check_field(fld: dict, where: str) -> list[Problem]:
    """One template field: literal values, the primitive spec, and the ground truth's type."""
    problems: list[Problem] = []
    if fld["type"] == "literal" and not fld.get("values"):
        problems.append(Problem(f"{where}.values", "a literal field lists its allowed values"))
    if fld["type"] != "literal" and fld.get("values") is not None:
        problems.append(Problem(f"{where}.values", "only a literal field takes values"))
    spec = fld.get("verify_with")
    primitive, spec_problems = check_primitive(spec, f"{where}.verify_with")
    problems.extend(spec_problems)
    if spec_problems:
        return problems
    if spec.get("type") in ("RegexMatch", "TraceRegex"):
        risk = backtracking_risk(spec["pattern"], spec.get("flags") or ())
        if risk:
            return problems + [Problem(f"{where}.verify_with.pattern", f"{spec['pattern']!r} is refused: {risk}")]
    gt = fld.get("ground_truth")
    if is_trace(spec):
        if fld["type"] != "bool":
            problems.append(Problem(f"{where}.type", f"a {spec['type']} field must have type bool "
                                                     "(the check's outcome is compared with ground_truth)"))
    elif gt is None and spec.get("type") not in IGNORES_GROUND_TRUTH:
        problems.append(Problem(f"{where}.ground_truth", f"{spec.get('type')} compares with ground_truth; "
                                                         "it is required"))
        return problems
    if gt is not None:
        reason = ground_truth_problem(fld, gt)
        if reason:
            problems.append(Problem(f"{where}.ground_truth", reason))
            return problems
    if primitive is not None and (gt is not None or is_trace(spec)):
        problems.extend(check_expected(primitive, gt, f"{where}.ground_truth"))
    return problems


def ground_truth_problem(fld: dict, gt: Any) -> str | None:
    """Why ``gt`` does not fit the field's type, or None when it does."""
    kind = fld["type"]
    ok = {
        "bool": isinstance(gt, bool),
        "int": isinstance(gt, int) and not isinstance(gt, bool),
        "float": isinstance(gt, (int, float)) and not isinstance(gt, bool),
        "str": isinstance(gt, str),
        "date": isinstance(gt, str),
        "list[str]": isinstance(gt, list) and all(isinstance(x, str) for x in gt),
        "literal": isinstance(gt, str) and gt in (fld.get("values") or []),
    }[kind]
    if ok:
        return None
    if kind == "literal":
        return f"ground truth {gt!r} is not one of the field's values {fld.get('values')}"
    return f"ground truth {gt!r} does not fit the field type {kind}"


def check_rubric(rubric: dict, where: str) -> list[Problem]:
    """Unique trait names, score ranges in order, regex patterns that compile."""
    problems: list[Problem] = []
    names: set[str] = set()
    for index, trait in enumerate(rubric["traits"]):
        place = f"{where}.traits[{index}]"
        if trait["name"] in names:
            problems.append(Problem(f"{place}.name", f"duplicate trait name {trait['name']!r}"))
        names.add(trait["name"])
        if trait["kind"] == "llm" and trait["min_score"] >= trait["max_score"]:
            problems.append(Problem(f"{place}.max_score", "max_score must be greater than min_score"))
        if trait["kind"] == "regex":
            reason = regex_trait_problem(trait["pattern"], trait.get("case_sensitive", True))
            if reason:
                problems.append(Problem(f"{place}.pattern", reason))
    return problems


def regex_trait_problem(pattern: str, case_sensitive: bool = True) -> str | None:
    """Why a regex trait's pattern cannot be registered (not valid for ``re``, or known to
    backtrack catastrophically), or None."""
    try:
        re.compile(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        return f"not a valid regular expression: {exc}"
    risk = backtracking_risk(pattern, () if case_sensitive else ("IGNORECASE",))
    return f"{pattern!r} is refused: {risk}" if risk else None


def check_responses(responses: list[ParsedResponse], bench: ParsedBenchmark) -> list[Problem]:
    """Every response names a question of ``bench``, and no model answers a question twice."""
    problems: list[Problem] = []
    ids = {q["id"] for q in bench.questions}
    first: dict[tuple[str, str | None], str] = {}
    for r in responses:
        if r.question_id not in ids:
            problems.append(Problem(join_path(r.where, ["question_id"]),
                                    f"unknown question id {r.question_id!r} in benchmark {bench.name!r}"))
        key = (r.question_id, r.model)
        if key in first:
            problems.append(repeated(r, first[key]))
        first.setdefault(key, r.where)
    return problems


def read_responses(doc: dict) -> ParsedFile:
    """A responses JSON file; question ids are checked once the benchmark is known."""
    parsed = _validate(ResponsesFile, doc)
    responses = [ParsedResponse(r.question_id, r.model, r.text, f"$.responses[{i}]")
                 for i, r in enumerate(parsed.responses)]
    _check_duplicates(responses)
    return ParsedFile("responses", None, responses, benchmark_ref=parsed.benchmark)


def read_responses_lines(rows: list[tuple[int, Any]]) -> ParsedFile:
    """A responses JSONL file: every line names the same benchmark."""
    problems = Problems()
    responses: list[ParsedResponse] = []
    refs: dict[str, int] = {}
    for number, row in rows:
        response = response_line(number, row, refs, problems)
        if response is not None:
            responses.append(response)
    if not rows:
        problems.add("line 1", "no response line: a responses JSONL file has one JSON object per line")
    problems.raise_if_any()
    _check_duplicates(responses)
    return ParsedFile("responses", None, responses, benchmark_ref=next(iter(refs)))


def response_line(number: int, row: Any, refs: dict[str, int], problems: Problems) -> ParsedResponse | None:
    """Line ``number`` (its JSON value ``row``) of a responses JSONL file checked: its response, or
    None when it does not validate; its problems go to ``problems``. ``refs`` holds the benchmark
    the first valid line names (and that line's number): every later line must name it too."""
    try:
        line = _validate(ResponseLine, row, f"line {number}: $")
    except FileRejected as exc:
        problems.extend(exc.problems)
        return None
    refs.setdefault(line.benchmark, number)
    first = next(iter(refs))
    if line.benchmark != first:
        problems.add(f"line {number}: $.benchmark", f"names benchmark {line.benchmark!r}, but line "
                                                   f"{refs[first]} names {first!r}; one file, one benchmark")
    return ParsedResponse(line.question_id, line.model, line.text, f"line {number}")


def _check_duplicates(responses: list[ParsedResponse]) -> None:
    first: dict[tuple[str, str | None], str] = {}
    problems = Problems()
    for r in responses:
        key = (r.question_id, r.model)
        if key in first:
            problems.extend([repeated(r, first[key])])
        first.setdefault(key, r.where)
    problems.raise_if_any()


def repeated(response: ParsedResponse, first: str) -> Problem:
    """The problem of a response whose model answered its question before, at ``first``."""
    return Problem(response.where, f"model {response.model!r} already answered question "
                                   f"{response.question_id!r} at {first}")
