"""A translated template decides exactly as the Python it came from.

The predicates below are written by hand in the test (the template source itself is never run);
hypothesis feeds both the same values and they must agree.
"""

from __future__ import annotations

import textwrap

from hypothesis import given, settings
from hypothesis import strategies as st

from evalledger.stages.formats.karenina_template import translate_template
from evalledger.stages.primitives import from_spec
from evalledger.stages.verification import TemplateSpec

ASCII_TEXT = st.text(alphabet="abcABC pPaArRiIsS-.\t", max_size=10)


def translated(fields: str, body: str, correct: dict | None = None):
    """The (primitive, ground truth) of the single field of a small template."""
    post_init = f"    def model_post_init(self, __context):\n        self.correct = {correct!r}\n" if correct else ""
    source = ("class Answer(BaseAnswer):\n" + textwrap.indent(fields, "    ") + post_init +
              "    def verify(self) -> bool:\n" + textwrap.indent(body, "        "))
    [field] = translate_template(source).fields
    return from_spec(field["verify_with"]), field["ground_truth"]


def _check(primitive, value, gt):
    return primitive.check(value, gt)


settings_ = settings(max_examples=150, deadline=None)


@settings_
@given(st.one_of(ASCII_TEXT, st.sampled_from(["Paris", " paris ", "PARIS", "Pari s", "paris\t"])))
def test_strip_lower_equality(value):
    primitive, gt = translated("capital: str = Field(description='c')\n",
                               "return self.capital.strip().lower() == self.correct['capital'].lower()\n",
                               {"capital": "Paris"})
    assert _check(primitive, value, gt) == (value.strip().lower() == "paris")


@settings_
@given(st.one_of(ASCII_TEXT, st.sampled_from(["bcl2", "BCL2", "Bcl2", "bcl-2"])))
def test_upper_equality_on_ascii_text(value):
    primitive, gt = translated("gene: str = Field(description='g')\n", "return self.gene.upper() == 'BCL2'\n")
    assert _check(primitive, value, gt) == (value.upper() == "BCL2")


@settings_
@given(st.lists(st.sampled_from(["red", "Red", "GREEN", "green", "blue", "Blue ", "pink"]), max_size=4))
def test_lowercased_list_equality(value):
    primitive, gt = translated("colors: list[str] = Field(description='c')\n",
                               "return [c.lower() for c in self.colors] == self.correct['colors']\n",
                               {"colors": ["red", "green", "blue"]})
    assert _check(primitive, value, gt) == ([c.lower() for c in value] == ["red", "green", "blue"])


@settings_
@given(st.lists(st.sampled_from(["a", "b", "c", "A"]), max_size=5))
def test_set_equality(value):
    primitive, gt = translated("items: list[str] = Field(description='i')\n", "return set(self.items) == {'a', 'b'}\n")
    assert _check(primitive, value, gt) == (set(value) == {"a", "b"})


@settings_
@given(st.floats(min_value=0.0, max_value=2.0, allow_nan=False))
def test_absolute_tolerance(value):
    primitive, gt = translated("hr: float = Field(description='h')\n", "return abs(self.hr - 0.72) <= 0.05\n")
    assert _check(primitive, value, gt) == (abs(value - 0.72) <= 0.05)


@settings_
@given(st.one_of(st.integers(min_value=-3, max_value=9), st.floats(min_value=-3, max_value=9, allow_nan=False)))
def test_inclusive_range(value):
    primitive, gt = translated("n: float = Field(description='n')\n", "return 1 <= self.n and self.n <= 5\n")
    assert _check(primitive, value, gt) == (1 <= value <= 5)


@settings_
@given(st.one_of(ASCII_TEXT, st.sampled_from(["Anti-apoptotic protein", "ANTI-APOPTOTIC", "apoptotic"])))
def test_substring_after_lower(value):
    primitive, gt = translated("fn: str = Field(description='f')\n", "return 'anti-apoptotic' in self.fn.lower()\n")
    assert _check(primitive, value, gt) == ("anti-apoptotic" in value.lower())


@settings_
@given(st.lists(st.sampled_from(["II", "VII", "ix", "X"]), max_size=4))
def test_element_of_a_list_field(value):
    primitive, gt = translated("factors: list[str] = Field(description='f')\n", "return 'VII' in self.factors\n")
    assert _check(primitive, value, gt) == ("VII" in value)


@settings_
@given(st.one_of(st.integers(min_value=-5, max_value=200), st.sampled_from([100, 100.0])))
def test_numeric_equality(value):
    primitive, gt = translated("t: int = Field(description='t')\n", "return self.t == self.correct['t']\n", {"t": 100})
    assert _check(primitive, value, gt) == (value == 100)


@settings_
@given(st.one_of(st.none(), st.integers(min_value=95, max_value=105)),
       st.one_of(st.none(), st.integers(min_value=208, max_value=215)))
def test_an_or_of_fields_decides_like_the_any_of_strategy(celsius, fahrenheit):
    source = ("class Answer(BaseAnswer):\n    celsius: int = Field(description='c')\n"
              "    fahrenheit: int = Field(description='f')\n    def verify(self) -> bool:\n"
              "        return self.celsius == 100 or self.fahrenheit == 212\n")
    template = TemplateSpec.from_dict(translate_template(source).template())
    _, verdict = template.verify({"celsius": celsius, "fahrenheit": fahrenheit}, "")
    assert verdict.passed == (celsius == 100 or fahrenheit == 212)
