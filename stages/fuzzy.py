"""Fuzzy excerpt validation, one rule for templates and rubrics (DESIGN.md).

Both texts are normalised (Unicode NFC, typographic quotes and dashes folded to ASCII,
whitespace runs collapsed to one space, stripped). The score is the length of the longest
common substring of the normalised texts divided by the length of the normalised excerpt
(0.0 for an empty excerpt); an excerpt passes iff score >= threshold. The score equals
difflib.SequenceMatcher(None, excerpt, response, autojunk=False).find_longest_match(...).size
/ len(excerpt) exactly; Karenina's default autojunk scores verbatim quotes of long responses
near 0, which this rule must not.

How the longest common substring is found, exactly and fast (n = response, m = excerpt):
1. A verbatim excerpt (`excerpt in response`, a C-level search) scores 1.0 at once.
2. Otherwise substring tests run in C (`str.__contains__`) in a search that only ever grows
   the best length found so far, skipping whole blocks of start positions with one test of
   the text those windows share. For a quote with a few edits that is tens of tests.
3. A `ResponseIndex` keeps a budget of such tests, roughly the cost of building a suffix
   automaton of the response. Once the budget is spent (many or adversarial excerpts), it
   builds the automaton (O(n), pure Python, flat lists) and answers every later excerpt in
   O(m). Total work per response is therefore O(n) plus O(m) per excerpt. (Responses over
   MAX_AUTOMATON_CHARS are only scanned, to bound memory.)
Indexes of the last few responses are cached, since every excerpt of a case is checked
against the same response.
"""

from __future__ import annotations

import math
import threading
import unicodedata
from collections import OrderedDict
from typing import NamedTuple

# Typographic quotes and dashes folded to their ASCII counterparts.
_SINGLE_QUOTES = "\u2018\u2019\u201a\u201b\u2032\u2035\u2039\u203a\uff07"  # ‘ ’ ‚ ‛ ′ ‵ ‹ › ＇
_DOUBLE_QUOTES = "\u201c\u201d\u201e\u201f\u2033\u2036\u00ab\u00bb\uff02"  # “ ” „ ‟ ″ ‶ « » ＂
_DASHES = "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63\uff0d"  # ‐ ‑ ‒ – — ― − ﹘ ﹣ －
_FOLD = str.maketrans(
    {**{c: "'" for c in _SINGLE_QUOTES}, **{c: '"' for c in _DOUBLE_QUOTES},
     **{c: "-" for c in _DASHES}}
)

# Substring tests a ResponseIndex may spend before it builds the automaton instead. One test
# scans the response in C; a build costs about a microsecond of Python per response character.
# At 50 KB a test takes 5-20 us and a build ~60 ms, at 500 B ~0.3 us and ~0.6 ms: 2000 tests
# cost about one build at every size, so scanning first never costs more than twice the best.
SCAN_BUDGET = 2000

CACHE_SIZE = 4  # responses whose index is kept (a 50 KB automaton holds ~75k small dicts)

# Above this many characters the automaton would cost hundreds of MB (about 300 bytes per
# character), so such a response is only ever scanned: still exact, just slower per excerpt.
MAX_AUTOMATON_CHARS = 250_000


class ExcerptCheck(NamedTuple):
    """Outcome of validating one excerpt: `passed` iff `score >= threshold`."""

    passed: bool
    score: float


def normalize(text: str) -> str:
    """NFC, typographic quotes and dashes to ASCII, whitespace runs to one space, stripped."""
    return " ".join(unicodedata.normalize("NFC", text).translate(_FOLD).split())


def similarity(excerpt: str, response: str) -> float:
    """Longest common substring of the normalised texts / length of the normalised excerpt."""
    return index_for(response).similarity(excerpt)


def passes(score: float, threshold: float) -> bool:
    """The rule: an excerpt scoring ``score`` passes at ``threshold`` iff score >= threshold
    (shared by ``validate`` and the what-if, which decides recorded scores at other thresholds)."""
    return score >= threshold


def validate(excerpt: str, response: str, threshold: float) -> ExcerptCheck:
    """Score `excerpt` against `response`; it passes iff the score is >= `threshold`."""
    return index_for(response).validate(excerpt, threshold)


class _OutOfBudget(Exception):
    """The scanning search ran out of its test budget; the automaton takes over."""


class ResponseIndex:
    """A normalised response, ready to score any number of excerpts against it."""

    def __init__(self, response: str, *, scan_budget: int = SCAN_BUDGET) -> None:
        self.text = normalize(response)
        # A response too large for an automaton scans without limit.
        self.scan_budget = scan_budget if len(self.text) <= MAX_AUTOMATON_CHARS else math.inf
        self._automaton: _Automaton | None = None
        self._lock = threading.Lock()

    @property
    def automaton_built(self) -> bool:
        """True once the suffix automaton has been built."""
        return self._automaton is not None

    def build_automaton(self) -> None:
        """Build the suffix automaton now (it is otherwise built when scanning stops paying)."""
        with self._lock:
            if self._automaton is None:
                self._automaton = _Automaton(self.text)

    def longest_common_substring(self, excerpt: str) -> int:
        """Length of the longest common substring of an already normalised excerpt and the text."""
        if not excerpt:
            return 0
        if excerpt in self.text:
            return len(excerpt)
        if self._automaton is None:
            try:
                return self._scan(excerpt)
            except _OutOfBudget:
                self.build_automaton()
        assert self._automaton is not None
        return self._automaton.longest_match(excerpt)

    def similarity(self, excerpt: str) -> float:
        """The fuzzy score of `excerpt` (normalised here) against this response."""
        normalised = normalize(excerpt)
        if not normalised:
            return 0.0
        return self.longest_common_substring(normalised) / len(normalised)

    def validate(self, excerpt: str, threshold: float) -> ExcerptCheck:
        """Score `excerpt`; it passes iff the score is >= `threshold` (a number in [0, 1])."""
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) \
                or math.isnan(threshold) or not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be a number in [0, 1], got {threshold!r}")
        score = self.similarity(excerpt)
        return ExcerptCheck(passes(score, threshold), score)

    def _scan(self, excerpt: str) -> int:
        """Longest common substring by C-level substring tests (see the module docstring);
        raises _OutOfBudget when the response's test budget runs out."""
        search = _ScanSearch(excerpt, self.text)
        try:
            return search.run(self.scan_budget)
        finally:
            with self._lock:
                self.scan_budget = max(0, self.scan_budget - search.tests)


class _ScanSearch:
    """Exact longest common substring using only `window in text` tests.

    Invariant: `best` is the length of a common substring, and no window of length best + 1
    starting before `i` occurs in the text. A block of start positions [lo, hi] whose windows
    of length L all contain excerpt[hi:lo + L] is skipped in one test when that shared core
    is absent; otherwise it is split in two. Substrings of a present string are present, so
    the lengths found by galloping and bisection are exact.
    """

    def __init__(self, excerpt: str, text: str) -> None:
        self.excerpt = excerpt
        self.text = text
        self.tests = 0
        self.limit: float = 0

    def _present(self, start: int, stop: int) -> bool:
        """Is excerpt[start:stop] in the text? Counts against the budget."""
        self.tests += 1
        if self.tests > self.limit:
            raise _OutOfBudget
        return self.excerpt[start:stop] in self.text

    def run(self, limit: float) -> int:
        """The longest common substring length; raises _OutOfBudget after `limit` tests."""
        self.limit = limit
        m = len(self.excerpt)
        best, i = 0, 0
        while i <= m - (best + 1):
            length = best + 1
            hi = min(i + max(length // 2, 1), m - length)
            hit = self._first_hit(i, hi, length)
            if hit is None:
                i = hi + 1
                continue
            best = self._extend(hit, length)
            i = hit + 1
        return best

    def _first_hit(self, lo: int, hi: int, length: int) -> int | None:
        """Smallest start in [lo, hi] whose window of `length` occurs in the text, or None."""
        if hi - lo < 2:
            for start in range(lo, hi + 1):
                if self._present(start, start + length):
                    return start
            return None
        if hi < lo + length and not self._present(hi, lo + length):
            return None  # the shared core is absent, so is every window of the block
        mid = (lo + hi) // 2
        found = self._first_hit(lo, mid, length)
        return found if found is not None else self._first_hit(mid + 1, hi, length)

    def _extend(self, start: int, length: int) -> int:
        """Longest window at `start` that occurs, knowing one of `length` does."""
        good, step, room = length, 1, len(self.excerpt) - start
        while good < room:
            trial = min(good + step, room)
            if not self._present(start, start + trial):
                bad = trial
                while bad - good > 1:
                    mid = (good + bad) // 2
                    if self._present(start, start + mid):
                        good = mid
                    else:
                        bad = mid
                return good
            good, step = trial, step * 2
        return good


class _Automaton:
    """Suffix automaton of a text: flat lists of suffix links, lengths and transition dicts.

    Built online in O(n); `longest_match(p)` walks p through it in O(len(p)), following
    suffix links on a mismatch, and returns the longest substring of p that occurs in the text.
    """

    def __init__(self, text: str) -> None:
        self.link, self.length, self.trans = _build_automaton(text)

    def longest_match(self, pattern: str) -> int:
        """Length of the longest substring of `pattern` that is a substring of the text."""
        link, length, trans = self.link, self.length, self.trans
        state = current = best = 0
        for ch in pattern:
            nxt = trans[state].get(ch)
            while nxt is None and state:
                state = link[state]
                current = length[state]
                nxt = trans[state].get(ch)
            if nxt is None:
                state = current = 0
                continue
            state = nxt
            current += 1
            if current > best:
                best = current
        return best


def _build_automaton(text: str) -> tuple[list[int], list[int], list[dict[str, int]]]:
    """The standard online suffix automaton construction, tuned for CPython.

    Lists are preallocated (at most 2n states); the new state's predecessor `last` never has
    a transition on the new character, so its update needs no lookup.
    """
    size = 2 * len(text) + 2
    link = [0] * size
    length = [0] * size
    trans: list[dict[str, int]] = [{}] * size  # placeholders; each used slot gets its own dict
    trans[0] = last_trans = {}
    link[0] = -1
    cur_trans: dict[str, int]
    last = last_len = 0
    count = 1
    for ch in text:
        cur = count
        count += 1
        last_len += 1
        length[cur] = last_len
        trans[cur] = cur_trans = {}
        last_trans[ch] = cur
        p = link[last]
        while p != -1:
            edges = trans[p]
            q = edges.get(ch, -1)
            if q != -1:
                break
            edges[ch] = cur
            p = link[p]
        if p == -1:
            link[cur] = 0
        elif length[p] + 1 == length[q]:
            link[cur] = q
        else:
            clone = count
            count += 1
            length[clone] = length[p] + 1
            link[clone] = link[q]
            trans[clone] = trans[q].copy()
            while p != -1:
                edges = trans[p]
                if edges.get(ch) != q:
                    break
                edges[ch] = clone
                p = link[p]
            link[q] = link[cur] = clone
        last, last_trans = cur, cur_trans
    return link[:count], length[:count], trans[:count]


_cache: OrderedDict[str, ResponseIndex] = OrderedDict()
_cache_lock = threading.Lock()


def index_for(response: str) -> ResponseIndex:
    """The ResponseIndex of `response`, reused for the last CACHE_SIZE responses."""
    with _cache_lock:
        index = _cache.get(response)
        if index is not None:
            _cache.move_to_end(response)
            return index
    index = ResponseIndex(response)
    with _cache_lock:
        _cache[response] = index
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return index


def clear_cache() -> None:
    """Forget every cached response index."""
    with _cache_lock:
        _cache.clear()
