"""Fuzzy excerpt validation: normalisation, exact equality with difflib, both search paths, cache."""

from __future__ import annotations

import difflib
import random

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from evalledger.stages import fuzzy
from evalledger.stages.fuzzy import ExcerptCheck, ResponseIndex, index_for, normalize, similarity, validate


def difflib_score(excerpt: str, response: str) -> float:
    """The reference: difflib's longest match without autojunk, over the excerpt's length."""
    if not excerpt:
        return 0.0
    matcher = difflib.SequenceMatcher(None, excerpt, response, autojunk=False)
    return matcher.find_longest_match(0, len(excerpt), 0, len(response)).size / len(excerpt)


def long_response(size: int, seed: int = 5) -> str:
    """A deterministic response of `size` characters made of common words."""
    rng = random.Random(seed)
    words = ("the of and to in a is that for it as was with be by on not this are or from at "
             "patients trial dose response protein cells results study inhibitor").split()
    text = " ".join(rng.choice(words) for _ in range(size // 3))
    return text[:size].strip()


# --- normalisation -------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("raw", "normalised"),
    [
        ("\u201cIt\u2019s\u201d \u2018fine\u2019", "\"It's\" 'fine'"),
        ("\u201e\u201f \u00abquoted\u00bb \u2032 \u2033", "\"\" \"quoted\" ' \""),
        ("a\u2010b\u2011c\u2012d\u2013e\u2014f\u2015g\u2212h", "a-b-c-d-e-f-g-h"),
        ("  many \t\n\u00a0 spaces  ", "many spaces"),
        ("cafe\u0301", "caf\u00e9"),  # NFC composes e + combining acute
        ("", ""),
    ],
)
def test_normalize(raw: str, normalised: str) -> None:
    assert normalize(raw) == normalised


@settings(max_examples=500, database=None, deadline=None)
@given(st.text(max_size=40))
def test_normalize_is_idempotent(text: str) -> None:
    assert normalize(normalize(text)) == normalize(text)


# --- the score -----------------------------------------------------------------------------------

def test_empty_or_blank_excerpt_scores_zero() -> None:
    assert similarity("", "anything") == 0.0 and similarity(" \n ", "anything") == 0.0


def test_verbatim_and_typographic_variants_score_one() -> None:
    response = "The drug\u2014venetoclax\u2014is \u201cselective\u201d.\n\nIt\u2019s approved."
    assert similarity("venetoclax-is \"selective\". It's", response) == 1.0
    assert similarity("It\u2019s   approved.", response) == 1.0


def test_partial_excerpt_score() -> None:
    assert similarity("hello world", "say hello there") == pytest.approx(6 / 11)  # "hello "
    assert similarity("abc", "xyz") == 0.0


def test_validate_passes_at_the_threshold() -> None:
    check = validate("hello world", "say hello there", 6 / 11)
    assert check == ExcerptCheck(True, 6 / 11)
    passed, score = validate("hello world", "say hello there", 0.8)
    assert not passed and score == 6 / 11
    for bad in (-0.1, 1.5, float("nan"), True):
        with pytest.raises(ValueError, match="threshold"):
            validate("a", "a", bad)


def test_verbatim_excerpts_of_a_long_response_score_one_unlike_autojunk() -> None:
    response = long_response(50_000)
    index = ResponseIndex(response)
    rng = random.Random(1)
    for _ in range(20):
        start = rng.randrange(0, len(response) - 300)
        excerpt = response[start : start + 200].strip()
        assert index.similarity(excerpt) == 1.0
    # Karenina's difflib with the default autojunk scores such a quote far below 1:
    excerpt = response[20_000:20_200].strip()
    junky = difflib.SequenceMatcher(None, excerpt, response)
    assert junky.find_longest_match(0, len(excerpt), 0, len(response)).size / len(excerpt) < 0.5


def test_edited_excerpts_of_a_long_response_equal_difflib() -> None:
    response = long_response(20_000, seed=9)
    excerpt = normalize(response[5_000:5_080] + "#" + response[5_081:5_150] + "%%" + response[5_150:5_200])
    expected = difflib_score(excerpt, response)
    assert 0.3 < expected < 1.0
    assert ResponseIndex(response).similarity(excerpt) == expected
    with_automaton = ResponseIndex(response)
    with_automaton.build_automaton()
    assert with_automaton.similarity(excerpt) == expected


# --- the property: exactly difflib's score, on both search paths -----------------------------

ALPHABETS = st.sampled_from(["ab", "abc", "ab ", "abcd ", "aab"])


@st.composite
def normalised_pairs(draw: st.DrawFn) -> tuple[str, str]:
    """(excerpt, response) over a small alphabet, so long matches happen, already normalised."""
    alphabet = draw(ALPHABETS)
    response = normalize(draw(st.text(alphabet, max_size=60)))
    if response and draw(st.booleans()):
        # Often an edited slice of the response, as real excerpts are.
        start = draw(st.integers(0, len(response) - 1))
        excerpt = list(response[start : start + draw(st.integers(1, 25))])
        for _ in range(draw(st.integers(0, 3))):
            excerpt.insert(draw(st.integers(0, len(excerpt))), draw(st.sampled_from(alphabet)))
        candidate = "".join(excerpt)
    else:
        candidate = draw(st.text(alphabet, max_size=25))
    return normalize(candidate), response


@settings(max_examples=3000, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(normalised_pairs(), st.sampled_from(["scan", "automaton", "tiny-budget"]))
def test_similarity_equals_difflib_exactly(pair: tuple[str, str], path: str) -> None:
    excerpt, response = pair
    budget = {"scan": fuzzy.SCAN_BUDGET, "automaton": 0, "tiny-budget": 3}[path]
    index = ResponseIndex(response, scan_budget=budget)
    assert index.text == response
    assert index.similarity(excerpt) == difflib_score(excerpt, response)


@settings(max_examples=25, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.sampled_from(["abc ", "ab"]))
def test_similarity_equals_difflib_on_longer_responses(seed: int, alphabet: str) -> None:
    rng = random.Random(seed)
    response = normalize("".join(rng.choice(alphabet) for _ in range(rng.randint(500, 3000))))
    assume(len(response) > 300)
    start = rng.randrange(0, len(response) - 200)
    chars = list(response[start : start + rng.randint(50, 200)])
    for _ in range(rng.randint(0, 4)):
        chars[rng.randrange(len(chars))] = rng.choice("abcx")
    excerpt = normalize("".join(chars))
    expected = difflib_score(excerpt, response)
    assert ResponseIndex(response).similarity(excerpt) == expected
    assert ResponseIndex(response, scan_budget=0).similarity(excerpt) == expected


def test_budget_switches_to_the_automaton_and_stays_exact() -> None:
    response = long_response(3_000, seed=2)
    index = ResponseIndex(response, scan_budget=50)
    rng = random.Random(4)
    for _ in range(30):
        excerpt = "".join(rng.choice("abcdefghij xyz") for _ in range(60))  # unrelated: many tests
        assert index.similarity(excerpt) == difflib_score(normalize(excerpt), index.text)
    assert index.automaton_built and index.scan_budget == 0


def test_huge_responses_are_only_scanned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fuzzy, "MAX_AUTOMATON_CHARS", 100)
    response = long_response(1_000, seed=3)
    index = ResponseIndex(response, scan_budget=0)
    excerpt = normalize(response[100:160] + "#" + response[161:200])
    assert index.similarity(excerpt) == difflib_score(excerpt, index.text)
    assert not index.automaton_built


def test_index_build_is_lazy() -> None:
    index = ResponseIndex("some response text")
    assert index.similarity("response text") == 1.0
    assert index.similarity("response tent") == 11 / 13  # "response te"
    assert not index.automaton_built


# --- the cache -----------------------------------------------------------------------------------

def test_index_cache_reuses_and_evicts() -> None:
    fuzzy.clear_cache()
    first = index_for("response one")
    assert index_for("response one") is first
    for k in range(fuzzy.CACHE_SIZE):
        index_for(f"other response {k}")
    assert index_for("response one") is not first
    fuzzy.clear_cache()
