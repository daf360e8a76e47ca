"""Agreement statistics: confusion tables, percent agreement, Cohen's kappa, weighted kappa,
Fleiss' kappa, a seeded bootstrap interval for kappa, and McNemar (``stats.mcnemar_exact``).

Every kappa is computed from integer counts with exact rational arithmetic (``Fraction``) and
turned into a float once at the end, so the same counts give the same bytes on any machine.
A statistic that is undefined for its input (no items, or chance agreement of 1) is None,
shown as "n/a", never as 0. The formulas are in docs/reports.md ("Agreement").
"""

from __future__ import annotations

import math
import random
from fractions import Fraction
from typing import Hashable, Iterable, Sequence

from evalledger.projections.stats import BOOTSTRAP_RESAMPLES, _Binomial, mcnemar_exact

__all__ = [
    "confusion_table", "confusion_2x2", "percent_agreement", "cohen_kappa", "weighted_kappa",
    "fleiss_kappa", "kappa_bootstrap_interval", "mcnemar_exact", "category_counts",
]

Table = list[list[int]]


def confusion_table(pairs: Iterable[tuple[Hashable, Hashable]], categories: Sequence[Hashable]) -> Table:
    """The k x k table of (rater A, rater B) pairs: rows A's category, columns B's, in ``categories`` order.

    A pair naming a category not in ``categories`` raises ValueError (a silent drop would bias kappa).
    """
    index = {c: i for i, c in enumerate(categories)}
    table = [[0] * len(categories) for _ in categories]
    for a, b in pairs:
        if a not in index or b not in index:
            raise ValueError(f"pair {(a, b)!r} names a category outside {list(categories)!r}")
        table[index[a]][index[b]] += 1
    return table


def confusion_2x2(pairs: Iterable[tuple[str, str]]) -> dict[str, int]:
    """The pass/fail 2x2 table of (A, B) verdict pairs as named cells.

    ``both_pass``, ``a_pass_b_fail``, ``a_fail_b_pass``, ``both_fail`` (A is the judge, B the
    reviewer or the other judge, by the caller's convention).
    """
    [[pp, pf], [fp, ff]] = confusion_table(pairs, ("pass", "fail"))
    return {"both_pass": pp, "a_pass_b_fail": pf, "a_fail_b_pass": fp, "both_fail": ff}


def table_of_2x2(cells: dict[str, int]) -> Table:
    """The named 2x2 cells back as a table (rows A pass/fail, columns B pass/fail)."""
    return [[cells["both_pass"], cells["a_pass_b_fail"]], [cells["a_fail_b_pass"], cells["both_fail"]]]


def _total(table: Table) -> int:
    return sum(sum(row) for row in table)


def percent_agreement(table: Table) -> float | None:
    """Observed agreement p_o = sum of the diagonal / n; None when n == 0."""
    n = _total(table)
    if n == 0:
        return None
    return float(Fraction(sum(table[i][i] for i in range(len(table))), n))


def _kappa_fraction(table: Table) -> Fraction | None:
    """Cohen's kappa as an exact fraction: (n·diag - Σ r_i c_i) / (n² - Σ r_i c_i)."""
    n = _total(table)
    k = len(table)
    rows = [sum(table[i]) for i in range(k)]
    cols = [sum(table[i][j] for i in range(k)) for j in range(k)]
    chance = sum(rows[i] * cols[i] for i in range(k))
    denominator = n * n - chance
    if n == 0 or denominator == 0:
        return None
    return Fraction(n * sum(table[i][i] for i in range(k)) - chance, denominator)


def cohen_kappa(table: Table) -> float | None:
    """Cohen's kappa (p_o - p_e) / (1 - p_e) of a k x k table; None when n == 0 or p_e == 1."""
    kappa = _kappa_fraction(table)
    return None if kappa is None else float(kappa)


def weighted_kappa(table: Table, weights: str = "linear") -> float | None:
    """Weighted kappa of a k x k table of ordered categories, ``linear`` or ``quadratic`` weights.

    Disagreement weight w_ij = |i - j| (linear) or (i - j)² (quadratic);
    kappa_w = 1 - n·Σ w_ij o_ij / Σ w_ij r_i c_j. None when n == 0 or the expected disagreement is 0.
    """
    if weights not in ("linear", "quadratic"):
        raise ValueError(f"weights must be 'linear' or 'quadratic', not {weights!r}")
    power = 1 if weights == "linear" else 2
    k = len(table)
    n = _total(table)
    rows = [sum(table[i]) for i in range(k)]
    cols = [sum(table[i][j] for i in range(k)) for j in range(k)]
    observed = sum(abs(i - j) ** power * table[i][j] for i in range(k) for j in range(k))
    expected = sum(abs(i - j) ** power * rows[i] * cols[j] for i in range(k) for j in range(k))
    if n == 0 or expected == 0:
        return None
    return float(1 - Fraction(n * observed, expected))


def category_counts(ratings: Iterable[Sequence[Hashable]], categories: Sequence[Hashable]) -> Table:
    """Fleiss' input: per subject, how many raters chose each category (``categories`` order)."""
    index = {c: i for i, c in enumerate(categories)}
    counts = []
    for subject in ratings:
        row = [0] * len(categories)
        for rating in subject:
            if rating not in index:
                raise ValueError(f"rating {rating!r} is outside {list(categories)!r}")
            row[index[rating]] += 1
        counts.append(row)
    return counts


def fleiss_kappa(counts: Table) -> float | None:
    """Fleiss' kappa of N subjects each rated by the same m >= 2 raters (rows: counts per category).

    P_i = (Σ_j n_ij² - m) / (m(m - 1)), P̄ = mean P_i, p_j = Σ_i n_ij / (N m), P_e = Σ p_j²,
    kappa = (P̄ - P_e) / (1 - P_e). None when there are no subjects, fewer than two raters, or
    P_e == 1; rows with different totals raise ValueError.
    """
    if not counts:
        return None
    m = sum(counts[0])
    if any(sum(row) != m for row in counts):
        raise ValueError("every subject must have the same number of ratings for Fleiss' kappa")
    if m < 2:
        return None
    subjects = len(counts)
    p_bar = Fraction(sum(sum(x * x for x in row) - m for row in counts), subjects * m * (m - 1))
    totals = [sum(row[j] for row in counts) for j in range(len(counts[0]))]
    p_e = Fraction(sum(t * t for t in totals), (subjects * m) ** 2)
    if p_e == 1:
        return None
    return float((p_bar - p_e) / (1 - p_e))


def _multinomial(n: int, shares: list[float], rng: random.Random,
                 samplers: dict[tuple[int, int], _Binomial]) -> list[int]:
    """One multinomial draw of n items over cells with ``shares``, as a chain of binomials."""
    out, left, rest = [], n, 1.0
    for index, share in enumerate(shares[:-1]):
        if left == 0 or rest <= 0:
            out.append(0)
            continue
        p = min(1.0, share / rest)
        sampler = samplers.get((index, left))      # p depends on the cell only, so cache by (cell, n)
        if sampler is None:
            sampler = samplers[(index, left)] = _Binomial(left, p)
        drawn = sampler.draw(rng)
        out.append(drawn)
        left -= drawn
        rest -= share
    out.append(left)
    return out


def kappa_bootstrap_interval(table: Table, seed: int,
                             resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[float, float] | None:
    """95% percentile bootstrap interval of Cohen's kappa: resample the n pairs with replacement.

    A resample of n pairs is a multinomial draw of the cell counts with the observed shares (drawn
    as a chain of binomials, ``random.Random(seed)``). Resamples whose kappa is undefined (every
    pair in cells of one row and one column) are left out; the interval is the sorted defined
    draws at floor(0.025·R') and ceil(0.975·R') - 1. None when n == 0 or fewer than half the
    resamples give a kappa.
    """
    n = _total(table)
    if n == 0:
        return None
    k = len(table)
    flat = [table[i][j] for i in range(k) for j in range(k)]
    shares = [x / n for x in flat]
    rng = random.Random(seed)
    samplers: dict[tuple[int, int], _Binomial] = {}
    draws = []
    for _ in range(resamples):
        cells = _multinomial(n, shares, rng, samplers)
        kappa = _kappa_fraction([cells[i * k:(i + 1) * k] for i in range(k)])
        if kappa is not None:
            draws.append(float(kappa))
    if len(draws) * 2 < resamples:
        return None
    draws.sort()
    return draws[int(0.025 * len(draws))], draws[math.ceil(0.975 * len(draws)) - 1]
