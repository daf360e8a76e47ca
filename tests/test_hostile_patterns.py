"""ReDoS: benchmark patterns run with a time limit (a timeout is a failed, explained check, never a
hang), and the patterns known to backtrack catastrophically are refused at intake with their place."""

from __future__ import annotations

import copy
import json
import multiprocessing
import re
import time

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from evalledger import ledger
from evalledger.stages.primitives import from_spec
from evalledger.stages.primitives.patterns import (
    MATCH_TIMEOUT_SECONDS,
    PatternTimeout,
    backtracking_risk,
    compile_benchmark_pattern,
    search,
)
from intake_support import KARENINA, events

# Not caught by the static screen (overlapping character classes), so only the time limit stops it.
SLOW = r"(\d|[0-5])+$"
SLOW_TEXT = "1" * 44 + "b"
# A run may take this long: one time limit per check, plus start-up, on a loaded machine.
BOUND_SECONDS = 60


def benchmark(field_pattern: str, trait_pattern: str, text: str, *, ground_truth: bool = False) -> dict:
    """One question with a TraceRegex field and a regex trait, and one response."""
    return {"format": "evalledger/benchmark@1", "name": "redos", "questions": [{
        "id": "q1", "question": "Write many digits.",
        "template": {"fields": [{"name": "digits", "type": "bool", "description": "digits",
                                 "ground_truth": ground_truth,
                                 "verify_with": {"type": "TraceRegex", "pattern": field_pattern}}]},
        "rubric": {"traits": [{"name": "shape", "kind": "regex", "pattern": trait_pattern, "invert": True}]}}],
        "responses": [{"question_id": "q1", "model": "m", "text": text}]}


def case_events(home) -> dict[str, list[dict]]:
    with ledger.open_ledger(home, readonly=True) as led:
        out: dict[str, list[dict]] = {}
        for event in led.read(types=["field.verified", "trait.scored", "case.judged", "stage.failed"]):
            out.setdefault(event.type, []).append(event.data)
        return out


def assert_failed_and_explained(home) -> None:
    found = case_events(home)
    assert "stage.failed" not in found
    [field] = found["field.verified"]
    assert field["passed"] is False and "did not finish within" in field["reason"]
    [trait] = found["trait.scored"]
    assert trait["score"] is False and trait["matched"] is None and "did not finish within" in trait["error"]
    [judged] = found["case.judged"]
    assert judged["verdict"] == "fail" and any("did not finish within" in r for r in judged["reasons"])


def test_the_issue_patterns_are_refused_at_intake_with_their_place(home, run_cli, tmp_path):
    path = tmp_path / "issue.json"
    path.write_text(json.dumps(benchmark("(a|aa)+$", "(a+)+$", "a" * 41 + "b")))
    done = run_cli("ingest", path, home=home, timeout=BOUND_SECONDS)
    assert done.returncode == 1
    assert "issue.json: $.questions[0].template.fields[0].verify_with.pattern: '(a|aa)+$' is refused" in done.stdout
    assert "issue.json: $.questions[0].rubric.traits[0].pattern: '(a+)+$' is refused: nested quantifiers" \
        in done.stdout
    assert events(ledger.open_ledger(home), "benchmark.rejected")


def test_run_finishes_in_bounded_time_with_the_checks_failed_and_explained(home, run_cli, tmp_path):
    path = tmp_path / "slow.json"
    path.write_text(json.dumps(benchmark(SLOW, SLOW, SLOW_TEXT)))
    assert run_cli("ingest", path, home=home).returncode == 0
    started = time.monotonic()
    done = run_cli("run", home=home, timeout=BOUND_SECONDS)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < BOUND_SECONDS
    assert_failed_and_explained(home)


def test_watch_finishes_in_bounded_time_with_the_checks_failed_and_explained(home, run_cli):
    (home / "inbox" / "slow.json").write_text(json.dumps(benchmark(SLOW, SLOW, SLOW_TEXT)))
    done = run_cli("watch", "--once", home=home, timeout=BOUND_SECONDS)
    assert done.returncode == 0, done.stderr
    assert list((home / "inbox").iterdir()) == []
    assert_failed_and_explained(home)


def test_a_karenina_regex_trait_that_backtracks_is_rejected_and_the_question_kept(home, run_cli, tmp_path):
    doc = json.loads((KARENINA / "minimal.jsonld").read_text())
    doc["rating"] = [{"@type": "Rating", "name": "evil", "additionalType": "karenina:GlobalRegexTrait",
                      "additionalProperty": [{"@type": "PropertyValue", "name": "pattern", "value": "(a*)*$"}]}]
    path = tmp_path / "evil.jsonld"
    path.write_text(json.dumps(doc))
    done = run_cli("ingest", path, home=home)
    assert done.returncode == 0, done.stdout
    [registered] = events(ledger.open_ledger(home), "benchmark.registered")
    assert len(registered.data["questions"]) == 1
    [rejected] = registered.data["rejected_traits"]
    assert rejected["where"] == "$.rating[0]" and "nested quantifiers" in rejected["reason"]


def test_a_karenina_template_field_pattern_that_backtracks_names_the_field(home, run_cli, tmp_path):
    doc = json.loads((KARENINA / "minimal.jsonld").read_text())
    bad = copy.deepcopy(doc["dataFeedElement"][0])
    bad["@id"] = "urn:test:evil"
    bad["item"]["hasPart"]["text"] = (
        "from karenina.schemas.entities import BaseAnswer\nclass Answer(BaseAnswer):\n"
        "    tag: str = VerifiedField(description='t', verify_with=RegexMatch(pattern='(a|a)+$'))\n")
    doc["dataFeedElement"].append(bad)
    path = tmp_path / "evil.jsonld"
    path.write_text(json.dumps(doc))
    done = run_cli("ingest", path, home=home)
    assert done.returncode == 0
    [registered] = events(ledger.open_ledger(home), "benchmark.registered")
    [rejected] = registered.data["rejected_questions"]
    assert rejected["where"].endswith("hasPart.text, field 'tag': verify_with.pattern")
    assert "matched by two alternatives" in rejected["reason"]


@pytest.mark.parametrize("pattern", [
    "(a+)+$", "(a*)*", "(a|a)+", "(a|aa)+$", r"(\w+\s?)+$", "(x+x+)+y", "(a|b|ab)*", "(?:a{1,3})+",
    r"^(\d+,?)+$", "(?i)(ab|AB)+", "x(?:(a+))*", "(?=(a+)+)",
])
def test_the_screen_names_catastrophic_patterns(pattern):
    assert backtracking_risk(pattern)


@pytest.mark.parametrize("pattern", [
    r"\d+(\.\d+)*", "(ab|a)+", "(foo|bar)+", r"\[\d+\]", "(?i)maybe|perhaps", "(a|b)+", "(ab?)+",
    "(?:https?://)+", "(a++)+", "(?>a+)+", r"^[A-Z][a-z]+( [A-Z][a-z]+)*$", r"(\d{1,3},)*\d{3}",
])
def test_the_screen_lets_ordinary_patterns_through(pattern):
    assert backtracking_risk(pattern) is None


def test_a_timeout_fails_a_trace_field_whatever_its_ground_truth():
    from evalledger.stages.verification import TemplateSpec
    for truth in (True, False):
        spec = TemplateSpec.from_dict({"fields": [{"name": "f", "verify_with": {"type": "TraceRegex", "pattern": SLOW},
                                                   "ground_truth": truth}]})
        results, verdict = spec.verify({}, SLOW_TEXT)
        assert results[0].passed is False and "did not finish" in results[0].reason and not verdict.passed


def test_regex_match_explains_a_timeout():
    primitive = from_spec({"type": "RegexMatch", "pattern": SLOW})
    assert primitive.check(SLOW_TEXT, None) is False
    assert "did not finish within" in primitive.explain(SLOW_TEXT, None)
    started = time.monotonic()
    with pytest.raises(PatternTimeout):
        search(compile_benchmark_pattern(SLOW), SLOW_TEXT, timeout=0.2)
    assert time.monotonic() - started < 5 * MATCH_TIMEOUT_SECONDS


def test_flags_are_passed_by_name_not_by_value():
    """re.ASCII is 256 and regex.ASCII 128: passing the number would change the meaning."""
    compiled = compile_benchmark_pattern(r"^\w+$", ("ASCII",))
    assert search(compiled, "abc") and not search(compiled, "é")
    assert search(compile_benchmark_pattern(r"^\w+$"), "é")
    assert search(compile_benchmark_pattern("ABC", ("IGNORECASE",)), "xabcx")


def test_syntax_only_the_regex_module_knows_is_refused():
    for pattern in (r"\p{L}+", "(?V1)a", r"\m", "(?|a|b)", "[[:alpha:]]", "[a--b]"):
        with pytest.raises(re.error):
            compile_benchmark_pattern(pattern)


def test_braces_re_reads_as_text_are_text_not_fuzzy_matching():
    compiled = compile_benchmark_pattern("(?:abc){e<=1}")
    assert not search(compiled, "abd") and search(compiled, "xabc{e<=1}")
    assert search(compile_benchmark_pattern('{"a": [12]}'), 'x{"a": 1}')
    assert search(compile_benchmark_pattern("a{2}"), "aa") and not search(compile_benchmark_pattern("^a{2}$"), "a")


# A small grammar of patterns re accepts: literals, classes, groups, alternation, quantifiers, anchors.
ATOMS = st.sampled_from(["a", "b", "ab", ".", r"\d", r"\w", r"\s", "[ab]", "[^a]", r"\b", "^", "$", "é", "A",
                         "{", "}", "{e<=1}", "[{]", r"\{", "[]a]", "{}"])
QUANTIFIERS = st.sampled_from(["", "", "?", "*", "+", "{2}", "{1,3}", "{,2}", "{2,}", "*?", "+?", "++"])


@st.composite
def patterns(draw, depth=2):
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        if depth and draw(st.booleans()):
            inner = draw(patterns(depth - 1))
            alt = draw(patterns(depth - 1)) if draw(st.booleans()) else None
            atom = f"({inner}|{alt})" if alt else f"(?:{inner})"
        else:
            atom = draw(ATOMS)
        quantifier = draw(QUANTIFIERS)
        if atom in (r"\b", "^", "$"):
            quantifier = ""
        parts.append(atom + quantifier)
    return "".join(parts)


def _re_answer(pattern: str, flag_value: int, text: str) -> tuple | None:
    """re's search span and groups and its finditer spans (None: re itself fails on the pattern, or
    takes over a second: a backtracking engine as slow as that is no fair yardstick for ours, which
    stops at its own time limit)."""
    started = time.monotonic()
    try:
        expected = re.compile(pattern, flag_value)
        want = expected.search(text)
        spans = [m.span() for m in expected.finditer(text)]
    except SystemError:  # CPython's own re fails on some patterns ('span of capturing group is wrong')
        return None
    if time.monotonic() - started > 1:
        return None
    return (want.span(), want.groups()) if want is not None else None, spans


class ReReference:
    """re's answers computed in a child process given ``REFERENCE_SECONDS`` each: CPython's re has
    no time limit, and some generated patterns backtrack for ever on ten characters (one held a
    CI worker past 20 minutes), so an answer re cannot give in time is no reference."""

    def __init__(self) -> None:
        self.pool = multiprocessing.get_context("spawn").Pool(1)

    def __call__(self, pattern: str, flag_value: int, text: str) -> tuple | None:
        try:
            return self.pool.apply_async(_re_answer, (pattern, flag_value, text)).get(REFERENCE_SECONDS)
        except multiprocessing.TimeoutError:
            self.pool.terminate()   # the child is stuck in re's C loop: only a signal stops it
            self.pool = multiprocessing.get_context("spawn").Pool(1)
            return TIMED_OUT


REFERENCE_SECONDS = 3
TIMED_OUT = ("timed out",)


@pytest.fixture(scope="module")
def re_reference():
    reference = ReReference()
    yield reference
    reference.pool.terminate()


@settings(max_examples=400, deadline=None)
@given(patterns(), st.text(alphabet="abAé1 _\n{}e<=", max_size=12),
       st.sampled_from([(), ("IGNORECASE",), ("MULTILINE",), ("DOTALL",), ("ASCII",)]))
def test_matches_are_the_same_as_re_for_the_patterns_we_accept(re_reference, pattern, text, flags):
    flag_value = 0
    for name in flags:
        flag_value |= getattr(re, name)
    try:
        ours = compile_benchmark_pattern(pattern, flags)
    except re.error:
        assume(False)
    answer = re_reference(pattern, flag_value, text)
    assume(answer is not None and answer is not TIMED_OUT)   # no reference answer to compare with
    want, want_all = answer
    got = ours.search(text, timeout=5)
    assert (want is None) == (got is None)
    if want is not None:
        assert want == (got.span(), got.groups())
    assert want_all == [m.span() for m in ours.finditer(text, timeout=5)]


def test_the_reference_gives_up_on_a_pattern_re_backtracks_on_for_ever(re_reference):
    # The pattern and text that held a CI worker: re alone would not return.
    pattern = (r"((?:\{?\{*?é*)+(?:[^a]{,2})*?[ab]{,2}|[^a]+?({{2}|[{]*?[]a]*?)?){2,}"
               r"({+a+(?:[{]+?)*|a+?(é{,2}\b|{}*){2,})")
    started = time.monotonic()
    assert re_reference(pattern, re.MULTILINE, "=e{1\n<é1A") is TIMED_OUT
    assert re_reference("a(b)", 0, "xab") == (((1, 3), ("b",)), [(1, 3)])
    assert time.monotonic() - started < REFERENCE_SECONDS + 30


def test_a_running_daemon_judges_the_slow_patterns_keeps_ingesting_and_stops_on_the_first_sigterm(home, tmp_path):
    """The issue's daemon symptoms: it stopped ingesting, ignored the first SIGTERM, and wedged
    again after a restart. Here it judges, takes the next file, and exits on one SIGTERM."""
    import signal

    from watch_support import benchmark_file, drop_by_rename, start_watch, wait_for
    slow = benchmark(SLOW, SLOW, SLOW_TEXT)
    slow["responses"] += [{"question_id": "q1", "model": f"m{i}", "text": SLOW_TEXT + str(i)} for i in range(3)]
    log = tmp_path / "watch.log"
    proc = start_watch(home, "--log-format", "json", "--rescan-seconds", "1", log_path=log)
    try:
        drop_by_rename(home / "inbox", "slow.json", json.dumps(slow).encode())
        drop_by_rename(home / "inbox", "next.json", benchmark_file(1, questions=1))
        assert wait_for(lambda: len(case_events(home).get("case.judged", [])) == 6, BOUND_SECONDS)
        assert list((home / "inbox").iterdir()) == []
        assert proc.poll() is None
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0 and time.monotonic() - started < 30
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    found = case_events(home)
    slow_fields = [f for f in found["field.verified"] if f["field"] == "digits"]
    assert len(slow_fields) == 4 and all("did not finish within" in f["reason"] for f in slow_fields)
