"""Arbitrary instances of a strict JSON schema: what a grammar-constrained judge may emit.

One generator, two sources of choices: ``random_instance(schema, rng)`` draws from a
``random.Random`` (the stand-in's schema-instance server), and ``instances(schema)`` is a
hypothesis strategy (property tests, with shrinking). Both cover the strict subset evalledger
emits (objects, arrays with minItems/maxItems, enums, const, anyOf, type lists, integers and
numbers with bounds, strings with format ``date``, booleans, null, ``$ref`` into ``$defs``).
Strings are drawn to be awkward: empty, unicode, quotes, braces, JSON-looking text.
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Any, Protocol

AWKWARD = ["", " ", "none", "null", "{}", "\"quoted\"", "[c1]", "é中文🙂", "line\nbreak", "x" * 300,
           "a, so b", "NaN", "0"]


class Chooser(Protocol):
    """Where the generator's choices come from."""

    def integer(self, low: int, high: int) -> int:
        """An integer in [low, high]."""

    def choice(self, options: list[Any]) -> Any:
        """One of ``options``."""

    def number(self, low: float | None, high: float | None) -> float:
        """A finite float within the bounds given."""

    def text(self) -> str:
        """Any string."""


def generate(schema: dict[str, Any], chooser: Chooser, defs: dict[str, Any] | None = None) -> Any:
    """An instance of ``schema`` made from ``chooser``'s choices."""
    defs = defs if defs is not None else schema.get("$defs", {})
    if "$ref" in schema:
        return generate(defs[schema["$ref"].rsplit("/", 1)[-1]], chooser, defs)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return chooser.choice(list(schema["enum"]))
    if "anyOf" in schema:
        return generate(chooser.choice(list(schema["anyOf"])), chooser, defs)
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = chooser.choice(kind)
    if kind == "object":
        props = schema.get("properties", {})
        return {name: generate(props[name], chooser, defs) for name in props}
    if kind == "array":
        low = schema.get("minItems", 0)
        high = schema.get("maxItems", low + 4)
        return [generate(schema["items"], chooser, defs) for _ in range(chooser.integer(low, high))]
    if kind == "integer":
        return chooser.integer(schema.get("minimum", -10**6), schema.get("maximum", 10**6))
    if kind == "number":
        return chooser.number(schema.get("minimum"), schema.get("maximum"))
    if kind == "boolean":
        return chooser.choice([True, False])
    if kind == "null":
        return None
    if schema.get("format") == "date":
        return (dt.date(1900, 1, 1) + dt.timedelta(days=chooser.integer(0, 80000))).isoformat()
    return chooser.text()


class RandomChooser:
    """Choices from a ``random.Random``: reproducible with a seed."""

    def __init__(self, rng: random.Random):
        """Draw from ``rng``."""
        self.rng = rng

    def integer(self, low: int, high: int) -> int:
        """An integer in [low, high]."""
        return self.rng.randint(low, high)

    def choice(self, options: list[Any]) -> Any:
        """One of ``options``."""
        return self.rng.choice(options)

    def number(self, low: float | None, high: float | None) -> float:
        """A finite float within the bounds given."""
        low = -1e6 if low is None else low
        return self.rng.uniform(low, low + 2e6 if high is None else high)

    def text(self) -> str:
        """An awkward string, or a random one."""
        if self.rng.random() < 0.6:
            return self.rng.choice(AWKWARD)
        return "".join(chr(self.rng.randint(32, 0x2FFF)) for _ in range(self.rng.randint(0, 40)))


def random_instance(schema: dict[str, Any], rng: random.Random | None = None) -> Any:
    """An arbitrary instance of ``schema`` drawn from ``rng``."""
    return generate(schema, RandomChooser(rng or random.Random()))


class _DrawChooser:
    """Choices drawn from hypothesis (so failures shrink); hypothesis is a test dependency only."""

    def __init__(self, draw):
        from hypothesis import strategies
        self.draw, self.st = draw, strategies

    def integer(self, low: int, high: int) -> int:
        return self.draw(self.st.integers(low, high))

    def choice(self, options: list[Any]) -> Any:
        return self.draw(self.st.sampled_from(options))

    def number(self, low: float | None, high: float | None) -> float:
        return self.draw(self.st.floats(low, high, allow_nan=False, allow_infinity=False))

    def text(self) -> str:
        return self.draw(self.st.one_of(self.st.sampled_from(AWKWARD), self.st.text(max_size=60)))


def instances(schema: dict[str, Any]):
    """A hypothesis strategy of instances of ``schema``."""
    from hypothesis import strategies
    return strategies.composite(lambda draw: generate(schema, _DrawChooser(draw)))()
