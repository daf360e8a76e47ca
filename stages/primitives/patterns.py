"""Regular expressions from benchmark files: matched with a time limit, screened at intake.

A pattern is written by whoever wrote the benchmark file, and some patterns backtrack for ever
(``(a+)+$`` against ``"a" * 41 + "b"``). Two defences:

- Every match runs in the ``regex`` module with ``timeout=MATCH_TIMEOUT_SECONDS``. A pattern that
  runs out of time raises ``PatternTimeout`` (a ``CheckError``): the check fails, with the reason
  recorded in its event, and the run goes on. Patterns are validated with ``re`` first, so only
  what ``re`` accepts is ever run, and ``regex`` runs it in its ``re``-compatible mode (VERSION0),
  with flags passed by name (``re.ASCII`` and ``regex.ASCII`` are different numbers). Where the
  two still read a pattern differently it is made to mean what ``re`` means: a brace ``re`` takes
  literally is escaped (``regex`` reads ``{e<=1}`` as fuzzy matching), and a pattern ``re`` warns
  about (``[[:alpha:]]``, ``[a--b]``: nested sets, set operations) is refused.
- ``backtracking_risk`` names the patterns known to backtrack catastrophically, so intake can
  reject them with their place before any run: a repeated group whose body is an unbounded
  repeat with nothing that must separate the iterations (``(a+)+``, ``(a*)*``, ``(\\w+\\s?)+``,
  ``(x+x+)+``), and a repeated group of literal alternatives that can spell the same text in two
  ways (``(a|a)+``, ``(a|aa)+``, ``(a|b|ab)*``, ``(a{1,3})+``). Overlapping character classes
  (``(\\d|[0-5])+``) are not recognised; the time limit covers them.
"""

from __future__ import annotations

import re
import re._parser as sre_parse  # the parser of the re module: the same tree re compiles
import warnings
from collections.abc import Iterable
from typing import Any

import regex

from evalledger.stages.primitives.base import CheckError

MATCH_TIMEOUT_SECONDS = 1.0

# Flag names a benchmark may use, as regex-module flags (the values differ from re's for ASCII).
_REGEX_FLAGS = {"IGNORECASE": regex.IGNORECASE, "I": regex.IGNORECASE, "MULTILINE": regex.MULTILINE,
                "M": regex.MULTILINE, "DOTALL": regex.DOTALL, "S": regex.DOTALL, "VERBOSE": regex.VERBOSE,
                "X": regex.VERBOSE, "ASCII": regex.ASCII, "A": regex.ASCII, "UNICODE": regex.UNICODE,
                "U": regex.UNICODE}
_RE_FLAGS = {name: getattr(re, name) for name in _REGEX_FLAGS}

# A repeat with more iterations than this counts as unbounded for the screen.
_MANY = 20
# Literal alternatives are enumerated up to this many strings of at most this length.
_MAX_WORDS = 64
_MAX_WORD = 24


class PatternTimeout(CheckError):
    """A benchmark pattern that did not finish within the time limit on one text."""

    def __init__(self, pattern: str, size: int, seconds: float):
        super().__init__(f"the pattern {pattern!r} did not finish within {seconds:g} s on a text of {size} "
                         "characters (catastrophic backtracking); the check fails")


def compile_benchmark_pattern(pattern: str, flag_names: Iterable[str] = ()) -> regex.Pattern:
    """Compile a pattern ``re`` accepts (re.error otherwise) with the regex module, for matching
    with a time limit."""
    names = tuple(flag_names)
    re_flags = regex_flags = 0
    for name in names:
        re_flags |= _RE_FLAGS[name]
        regex_flags |= _REGEX_FLAGS[name]
    with warnings.catch_warnings():
        # re warns where a future Python (and the regex module today) reads a pattern differently:
        # [[:alpha:]] is a POSIX class to regex, a set of characters to re
        warnings.simplefilter("error", FutureWarning)
        try:
            sre_parse.parse(pattern, re_flags)
        except FutureWarning as warning:
            raise re.error(f"{warning}; escape the [ or the doubled operator so the meaning is "
                           "unambiguous") from None
    re.compile(pattern, re_flags)  # only what re accepts: regex takes more syntax (\p{L}, (?V1))
    return regex.compile(_literal_braces(pattern), regex_flags | regex.VERSION0)


_QUANTIFIER = re.compile(r"\{\d*(?:,\d*)?\}")


def _literal_braces(pattern: str) -> str:
    """The pattern with every ``{`` that re reads as a literal escaped: regex would read
    ``a{e<=1}`` as fuzzy matching, re as the text ``a{e<=1}``."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            out.append(pattern[i:i + 2])
            i += 2
        elif char == "[":
            end = _class_end(pattern, i)
            out.append(pattern[i:end])
            i = end
        elif char == "{":
            quantifier = _QUANTIFIER.match(pattern, i)
            out.append(quantifier.group() if quantifier and quantifier.group() != "{}" else "\\{")
            i = quantifier.end() if quantifier and quantifier.group() != "{}" else i + 1
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _class_end(pattern: str, start: int) -> int:
    """The index after the character class that opens at ``start`` (a ``]`` first is literal)."""
    i = start + 1
    if pattern.startswith("^", i):
        i += 1
    if pattern.startswith("]", i):
        i += 1
    while i < len(pattern) and pattern[i] != "]":
        i += 2 if pattern[i] == "\\" else 1
    return i + 1


def search(compiled: regex.Pattern, text: str, *, timeout: float = MATCH_TIMEOUT_SECONDS) -> bool:
    """True when the pattern is found in ``text``; PatternTimeout when it runs out of time."""
    try:
        return compiled.search(text, timeout=timeout) is not None
    except TimeoutError:
        raise PatternTimeout(compiled.pattern, len(text), timeout) from None


def count_at_least(compiled: regex.Pattern, text: str, needed: int, *,
                   timeout: float = MATCH_TIMEOUT_SECONDS) -> bool:
    """True when the pattern has at least ``needed`` non-overlapping matches in ``text`` (the
    time limit covers the whole count)."""
    found = 0
    try:
        for _ in compiled.finditer(text, timeout=timeout):
            found += 1
            if found >= needed:
                return True
    except TimeoutError:
        raise PatternTimeout(compiled.pattern, len(text), timeout) from None
    return False


# --- the static screen ------------------------------------------------------------------------------

def backtracking_risk(pattern: str, flag_names: Iterable[str] = ()) -> str | None:
    """Why ``pattern`` is known to backtrack catastrophically, or None. Patterns ``re`` cannot
    compile are left to the syntax check (None)."""
    flags = 0
    for name in flag_names:
        flags |= _RE_FLAGS.get(name, 0)
    try:
        tree = sre_parse.parse(pattern, flags)
    except (re.error, RecursionError, OverflowError):
        return None
    try:
        return _risk_in(list(tree), tree.state)
    except RecursionError:
        return "the pattern is nested too deeply to be checked"


def _risk_in(items: list[tuple[Any, Any]], state: Any) -> str | None:
    """The first risky repeat in a parsed sequence, searching every nested part."""
    for op, av in items:
        if op in (sre_parse.MAX_REPEAT, sre_parse.MIN_REPEAT):
            low, high, body = av
            if high > _MANY or high == sre_parse.MAXREPEAT:
                reason = _risky_repeat(list(body), state)
                if reason:
                    return reason
            found = _risk_in(list(body), state)
        elif op is sre_parse.SUBPATTERN:
            found = _risk_in(list(av[3]), state)
        elif op is sre_parse.BRANCH:
            found = next((r for r in (_risk_in(list(alt), state) for alt in av[1]) if r), None)
        elif op in (sre_parse.ASSERT, sre_parse.ASSERT_NOT):
            found = _risk_in(list(av[1]), state)
        elif op is sre_parse.GROUPREF_EXISTS:
            found = _risk_in(list(av[1]), state) or (_risk_in(list(av[2]), state) if av[2] else None)
        else:       # literals, classes, anchors; possessive repeats and atomic groups never backtrack
            found = None
        if found:
            return found
    return None


def _risky_repeat(body: list[tuple[Any, Any]], state: Any) -> str | None:
    """Why repeating ``body`` many times is catastrophic, or None."""
    parts = _flatten(body)
    inner = [p for p in parts if _unbounded_repeat(p)]
    if inner and all(_unbounded_repeat(p) or _min_width(p, state) == 0 for p in parts):
        return ("nested quantifiers: a repeated group whose body is itself an unbounded repeat, with "
                "nothing that must come between the iterations, can split a text in exponentially many "
                "ways (like (a+)+ or (a*)*); use a single quantifier (a+)")
    words = _words(parts)
    if words is not None and state.flags & re.IGNORECASE:
        words = [w.casefold() for w in words]
    if words is not None:
        words = [w for w in words if w]   # an empty iteration ends the loop: no second spelling
    if words is not None and len(words) > 1:
        ambiguity = _ambiguous(words)
        if ambiguity:
            return (f"a repeated group of alternatives that can spell the same text in two ways "
                    f"({ambiguity}), like (a|a)+ or (a|aa)+; make the alternatives exclude each other")
    return None


def _flatten(items: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """The sequence with plain groups opened (a group does not change what is matched)."""
    out: list[tuple[Any, Any]] = []
    for op, av in items:
        if op is sre_parse.SUBPATTERN:
            out.extend(_flatten(list(av[3])))
        else:
            out.append((op, av))
    return out


def _unbounded_repeat(item: tuple[Any, Any]) -> bool:
    """A greedy or lazy repeat that may match many times (possessive ones never give back)."""
    op, av = item
    return op in (sre_parse.MAX_REPEAT, sre_parse.MIN_REPEAT) and (av[1] > _MANY or av[1] == sre_parse.MAXREPEAT)


def _min_width(item: tuple[Any, Any], state: Any) -> int:
    """The fewest characters one parsed item matches."""
    return sre_parse.SubPattern(state, [item]).getwidth()[0]


def _words(items: list[tuple[Any, Any]]) -> list[str] | None:
    """Every string a sequence of literals, literal alternatives and small repeats matches, with
    repeats (the same string reached two ways appears twice); None when it is not that small."""
    words = [""]
    for op, av in items:
        if op is sre_parse.LITERAL:
            choices = [chr(av)]
        elif op is sre_parse.IN and all(kind is sre_parse.LITERAL for kind, _ in av):
            choices = [chr(code) for _, code in av]
        elif op is sre_parse.BRANCH:
            choices = []
            for alternative in av[1]:
                found = _words(_flatten(list(alternative)))
                if found is None:
                    return None
                choices += found
        elif op in (sre_parse.MAX_REPEAT, sre_parse.MIN_REPEAT) and av[1] <= 4:
            inner = _words(_flatten(list(av[2])))
            if inner is None:
                return None
            choices = [w for count in range(av[0], av[1] + 1) for w in _power(inner, count)]
        elif op is sre_parse.SUBPATTERN:
            choices = _words(_flatten(list(av[3])))
            if choices is None:
                return None
        else:
            return None
        words = [w + c for w in words for c in choices]
        if len(words) > _MAX_WORDS or any(len(w) > _MAX_WORD for w in words):
            return None
    return words


def _power(words: list[str], count: int) -> list[str]:
    """Every concatenation of ``count`` words."""
    out = [""]
    for _ in range(count):
        out = [a + b for a in out for b in words]
        if len(out) > _MAX_WORDS:
            return out
    return out


def _ambiguous(words: list[str]) -> str | None:
    """A text two different sequences of ``words`` spell, described, or None when every text has
    at most one (a word listed twice, else the Sardinas-Patterson test)."""
    seen: set[str] = set()
    for word in words:
        if word in seen:
            return f"{word!r} is matched by two alternatives"
        seen.add(word)
    code = set(words)
    dangling = {b[len(a):] for a in code for b in code if a != b and b.startswith(a)}
    explored: set[str] = set()
    while dangling:
        if dangling & code:
            return f"for example {_example(code)!r} splits in two ways"
        explored |= dangling
        following = set()
        for rest in dangling:
            for word in code:
                if word.startswith(rest):
                    following.add(word[len(rest):])
                if rest.startswith(word):
                    following.add(rest[len(word):])
        dangling = {d for d in following if d and d not in explored}
    return None


def _example(code: set[str]) -> str:
    """A short text with two spellings over ``code`` (breadth-first over concatenations)."""
    spellings: dict[str, tuple[str, ...]] = {}
    frontier: list[tuple[str, ...]] = [(w,) for w in sorted(code, key=len)]
    for _ in range(4):
        following = []
        for parts in frontier:
            text = "".join(parts)
            if text in spellings and spellings[text] != parts:
                return text
            spellings.setdefault(text, parts)
            following += [parts + (w,) for w in code]
        frontier = following[:2000]
    return min(spellings, key=len)
