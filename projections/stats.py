"""Statistics in pure Python, deterministic to the bit: rounding, Wilson interval, McNemar's exact
test, and a seeded paired bootstrap.

Only IEEE-exact operations (+, -, *, /, sqrt) and integer arithmetic are used where a result
reaches a report, so the same inputs give the same bytes on any machine.
"""

from __future__ import annotations

import hashlib
import math
import random
from bisect import bisect_right
from fractions import Fraction

Z95 = 1.959963984540054  # the 97.5th percentile of the standard normal
BOOTSTRAP_RESAMPLES = 2000
DIGITS = 4
EXACT_LIMIT = 4000  # McNemar with exact integers up to this many discordant pairs


def rnd(value: float | Fraction | None, digits: int = DIGITS) -> float | None:
    """Round for a report: fixed digits, -0.0 folded to 0.0, None kept."""
    if value is None:
        return None
    out = round(float(value), digits)
    return 0.0 if out == 0 else out


def ratio(num: float, den: float) -> float | None:
    """num / den, or None when the denominator is 0 (shown as "n/a", never as 0%)."""
    return None if not den else num / den


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson score interval for a binomial proportion; None when n == 0.

    centre = (p + z^2/2n) / (1 + z^2/n), half = z * sqrt(p(1-p)/n + z^2/4n^2) / (1 + z^2/n).
    """
    if n == 0:
        return None
    p = successes / n
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for discordant counts b and c.

    Under H0 the b of n = b + c discordant pairs follow Binomial(n, 1/2):
    p = min(1, 2 * sum_{k=0}^{min(b,c)} C(n, k) / 2^n); p = 1 when n == 0.
    """
    n = b + c
    if n == 0:
        return 1.0
    low = min(b, c)
    if n <= EXACT_LIMIT:
        tail = sum(math.comb(n, k) for k in range(low + 1))
        return float(min(Fraction(1), Fraction(2 * tail, 2 ** n)))
    # Large n: the tail relative to its largest term by the ratio recurrence, scaled by that term.
    log_top = math.lgamma(n + 1) - math.lgamma(low + 1) - math.lgamma(n - low + 1) - n * math.log(2)
    total, term, k = 1.0, 1.0, low
    while k > 0 and term > 1e-17:
        term = term * k / (n - k + 1)
        total += term
        k -= 1
    return min(1.0, 2 * math.exp(log_top) * total)


def seed_for(*parts: str) -> int:
    """A bootstrap seed derived from names (sha256), so a comparison always draws the same samples."""
    return int.from_bytes(hashlib.sha256("\x1f".join(parts).encode("utf-8")).digest()[:8], "big")


class _Binomial:
    """Inverse-CDF sampler of Binomial(n, p), the pmf built by the ratio recurrence (no libm)."""

    def __init__(self, n: int, p: float):
        self.n = n
        if p <= 0 or p >= 1 or n == 0:
            self.fixed = 0 if p <= 0 or n == 0 else n
            return
        self.fixed = None
        mode = min(n, int((n + 1) * p))
        odds = p / (1 - p)
        weights = {mode: 1.0}
        w, k = 1.0, mode
        while k < n:                                   # upwards: pmf(k+1) = pmf(k) (n-k)/(k+1) p/q
            w = w * (n - k) / (k + 1) * odds
            k += 1
            if w < 1e-17:
                break
            weights[k] = w
        w, k = 1.0, mode
        while k > 0:                                   # downwards: pmf(k-1) = pmf(k) k/(n-k+1) q/p
            w = w * k / (n - k + 1) / odds
            k -= 1
            if w < 1e-17:
                break
            weights[k] = w
        self.values = sorted(weights)
        total = math.fsum(weights.values())
        acc, cdf = 0.0, []
        for value in self.values:
            acc += weights[value] / total
            cdf.append(acc)
        self.cdf = cdf

    def draw(self, rng: random.Random) -> int:
        if self.fixed is not None:
            return self.fixed
        index = bisect_right(self.cdf, rng.random())
        return self.values[min(index, len(self.values) - 1)]


def paired_bootstrap_interval(b: int, c: int, n: int, seed: int,
                              resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[float, float] | None:
    """95% percentile bootstrap interval of the paired difference in pass rate (B - A).

    Each of the n pairs has d = +1 (only B passed, c pairs), -1 (only A passed, b pairs) or 0.
    Resampling n pairs with replacement draws the discordant count m ~ Bin(n, (b+c)/n), then
    the B-only count x ~ Bin(m, c/(b+c)); the resampled difference is (2x - m) / n. The
    interval is the 2.5th and 97.5th percentiles (sorted draws at floor(0.025 R), ceil(0.975 R) - 1).
    """
    if n == 0:
        return None
    rng = random.Random(seed)
    discordant = _Binomial(n, (b + c) / n)
    given: dict[int, _Binomial] = {}
    share = c / (b + c) if b + c else 0.0
    diffs = []
    for _ in range(resamples):
        m = discordant.draw(rng)
        sampler = given.get(m)
        if sampler is None:
            sampler = given[m] = _Binomial(m, share)
        x = sampler.draw(rng)
        diffs.append((2 * x - m) / n)
    diffs.sort()
    return diffs[int(0.025 * resamples)], diffs[math.ceil(0.975 * resamples) - 1]
