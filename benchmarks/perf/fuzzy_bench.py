"""Performance figures for fuzzy excerpt matching and primitive checks, with pass/fail targets.

Run:  python benchmarks/perf/fuzzy_bench.py            (50 KB response, 20 excerpts)
      python benchmarks/perf/fuzzy_bench.py --small    (20 KB response, fewer checks; for CI)

1. Fuzzy matching: one long LLM-like response, 20 excerpts of ~200 characters, half verbatim,
   half with 1-3 small edits. Each excerpt is scored by difflib.SequenceMatcher with
   autojunk=False (the reference) and by stages.fuzzy.ResponseIndex, side by side; the scores
   must be identical. Our per-excerpt time includes the index construction amortised over the
   excerpts (and any automaton built during a query, in that query). Target: median per
   excerpt at least 100x faster than difflib. The automaton-only path (built up front,
   build time amortised the same way) is printed for information.
2. Primitive checks per second for ExactMatch and NumericTolerance. Target: >= 200,000 each.

Exit status 0 when every target is met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import difflib
import random
import statistics
import sys
import time

from evalledger.stages.fuzzy import ResponseIndex, normalize
from evalledger.stages.primitives import ExactMatch, NumericTolerance

SPEEDUP_TARGET = 100.0
CHECKS_TARGET = 200_000

_WORDS = (
    "the of and to in a is that for it as was with be by on not this are or from at which but "
    "have an they were their has would when if so will more can about what up out them into "
    "than could only other its some new time these two may first then do any like now over such "
    "our even most made after also did many before must through back years where much way well "
    "down should because each just those people how too little state good very make world still "
    "own see work long here get both between life being under never day same another know while "
    "last might great old year off come since against go came right used take three however "
    "patients trial response treatment dose study results protein inhibitor cells clinical "
    "analysis survival randomized phase approved therapy mechanism apoptosis expression tumor "
    "median months confidence interval hazard ratio primary endpoint data evidence reported"
).split()


def make_response(size: int, seed: int = 7) -> str:
    """A deterministic LLM-like answer: Zipf-weighted words, sentences, paragraphs, and a few
    typographic quotes and dashes (so normalisation has work to do)."""
    rng = random.Random(seed)
    weights = [1 / (rank + 1) ** 0.9 for rank in range(len(_WORDS))]
    paragraphs, length = [], 0
    while length < size:
        sentences = []
        for _ in range(rng.randint(3, 7)):
            words = rng.choices(_WORDS, weights, k=rng.randint(8, 24))
            if rng.random() < 0.2:
                words.insert(rng.randrange(len(words)), f"\u201c{rng.choice(_WORDS)}\u201d")
            if rng.random() < 0.2:
                words.insert(rng.randrange(len(words)), "\u2014")
            sentences.append(" ".join(words).capitalize() + rng.choice(".....;:!?"))
        paragraph = " ".join(sentences)
        paragraphs.append(paragraph)
        length += len(paragraph) + 2
    return "\n\n".join(paragraphs)[:size]


def make_excerpts(response: str, count: int, seed: int = 11) -> list[str]:
    """`count` excerpts of ~200 characters: even ones verbatim, odd ones with 1-3 small edits."""
    rng = random.Random(seed)
    excerpts = []
    for k in range(count):
        start = rng.randrange(0, len(response) - 220)
        chars = list(response[start : start + rng.randint(180, 220)])
        if k % 2:
            for _ in range(rng.randint(1, 3)):
                at = rng.randrange(len(chars))
                edit = rng.choice(("substitute", "delete", "insert", "case"))
                if edit == "substitute":
                    chars[at] = rng.choice("xyz,;")
                elif edit == "delete":
                    del chars[at]
                elif edit == "insert":
                    chars.insert(at, rng.choice("qk '"))
                else:
                    chars[at] = chars[at].swapcase()
        excerpts.append("".join(chars))
    return excerpts


def difflib_scores(excerpts: list[str], response: str) -> tuple[list[float], list[float]]:
    """Reference scores and per-excerpt seconds (difflib on the normalised texts)."""
    text = normalize(response)
    scores, seconds = [], []
    for excerpt in excerpts:
        part = normalize(excerpt)
        began = time.perf_counter()
        matcher = difflib.SequenceMatcher(None, part, text, autojunk=False)
        size = matcher.find_longest_match(0, len(part), 0, len(text)).size
        seconds.append(time.perf_counter() - began)
        scores.append(size / len(part) if part else 0.0)
    return scores, seconds


def index_scores(excerpts: list[str], response: str, *, automaton: bool) -> tuple[list[float], list[float], float]:
    """Our scores, per-excerpt seconds, and the index construction seconds."""
    began = time.perf_counter()
    index = ResponseIndex(response)
    if automaton:
        index.build_automaton()
    build = time.perf_counter() - began
    scores, seconds = [], []
    for excerpt in excerpts:
        began = time.perf_counter()
        scores.append(index.similarity(excerpt))
        seconds.append(time.perf_counter() - began)
    return scores, seconds, build


def checks_per_second(check, args: tuple, count: int) -> float:
    """How many calls of check(*args) run per second (best of three runs)."""
    best = float("inf")
    for _ in range(3):
        began = time.perf_counter()
        for _ in range(count):
            check(*args)
        best = min(best, time.perf_counter() - began)
    return count / best


def report(label: str, value: float, target: float, unit: str) -> bool:
    """Print one figure with its target and PASS/FAIL; return whether it passed."""
    ok = value >= target
    print(f"  {label:<52} {value:>12,.1f} {unit:<10} target >= {target:,.0f}  {'PASS' if ok else 'FAIL'}")
    return ok


def main(argv: list[str] | None = None) -> int:
    """Run both benchmarks and return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", action="store_true", help="20 KB response, fewer checks (CI)")
    parser.add_argument("--size", type=int, help="response size in characters (default 50000)")
    parser.add_argument("--excerpts", type=int, default=20)
    options = parser.parse_args(argv)
    size = options.size or (20_000 if options.small else 50_000)
    check_count = 50_000 if options.small else 200_000

    response = make_response(size)
    excerpts = make_excerpts(response, options.excerpts)
    print(f"fuzzy matching: {len(response):,} character response, {len(excerpts)} excerpts "
          f"({sum(len(e) for e in excerpts) // len(excerpts)} characters on average)")

    reference, difflib_seconds = difflib_scores(excerpts, response)
    ours, our_seconds, build = index_scores(excerpts, response, automaton=False)
    automaton, automaton_seconds, automaton_build = index_scores(excerpts, response, automaton=True)
    assert ours == reference, "ResponseIndex scores differ from difflib"
    assert automaton == reference, "automaton scores differ from difflib"

    amortised = [s + build / len(excerpts) for s in our_seconds]
    automaton_amortised = [s + automaton_build / len(excerpts) for s in automaton_seconds]
    difflib_median = statistics.median(difflib_seconds)
    print(f"  scores identical to difflib (autojunk=False) for all {len(excerpts)} excerpts")
    print(f"  difflib median per excerpt:          {difflib_median * 1e3:9.3f} ms")
    print(f"  index construction (normalise):      {build * 1e3:9.3f} ms  "
          f"(amortised {build / len(excerpts) * 1e3:.3f} ms per excerpt)")
    print(f"  ours median per excerpt, amortised:  {statistics.median(amortised) * 1e3:9.3f} ms  "
          f"(mean {statistics.fmean(amortised) * 1e3:.3f} ms, max {max(amortised) * 1e3:.3f} ms)")
    print(f"  (info) automaton build:              {automaton_build * 1e3:9.3f} ms; median per excerpt "
          f"with it amortised {statistics.median(automaton_amortised) * 1e3:.3f} ms, "
          f"{difflib_median / statistics.median(automaton_amortised):.0f}x difflib")
    results = [
        report("median speed-up vs difflib (build amortised)",
               difflib_median / statistics.median(amortised), SPEEDUP_TARGET, "x"),
    ]
    print(f"  (info) mean speed-up: {statistics.fmean(difflib_seconds) / statistics.fmean(amortised):.0f}x")
    for kind, parity in (("verbatim", 0), ("edited", 1)):
        ours_kind = statistics.median(amortised[parity::2])
        theirs_kind = statistics.median(difflib_seconds[parity::2])
        print(f"  (info) {kind} excerpts only: median {ours_kind * 1e3:.3f} ms vs "
              f"{theirs_kind * 1e3:.3f} ms, {theirs_kind / ours_kind:.0f}x")

    print(f"primitive checks ({check_count:,} calls, best of 3):")
    exact = ExactMatch()
    tolerance = NumericTolerance(tolerance=0.05, mode="absolute")
    results.append(report("ExactMatch.check(' Bcl2 ', 'BCL2')",
                          checks_per_second(exact.check, (" Bcl2 ", "BCL2"), check_count),
                          CHECKS_TARGET, "checks/s"))
    results.append(report("NumericTolerance.check(0.77, 0.72)",
                          checks_per_second(tolerance.check, (0.77, 0.72), check_count),
                          CHECKS_TARGET, "checks/s"))
    print("all targets met" if all(results) else "TARGET MISSED")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
