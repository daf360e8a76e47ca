"""The agreement statistics against hand-worked tables and against independent implementations
(scikit-learn's cohen_kappa_score, statsmodels' fleiss_kappa and mcnemar), used only here."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from evalledger.projections.agreement_stats import (
    category_counts,
    cohen_kappa,
    confusion_2x2,
    confusion_table,
    fleiss_kappa,
    kappa_bootstrap_interval,
    mcnemar_exact,
    percent_agreement,
    weighted_kappa,
)

# Fleiss (1971) as worked on Wikipedia: 10 subjects, 14 raters, 5 categories; P̄ = 0.378,
# P_e = 0.213, kappa = 0.210.
FLEISS_TABLE = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
                [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]


def test_cohen_kappa_by_hand():
    # n = 50, p_o = 35/50 = 0.7, rows 25/25, columns 30/20: p_e = (25·30 + 25·20)/2500 = 0.5
    table = [[20, 5], [10, 15]]
    assert percent_agreement(table) == 0.7
    assert cohen_kappa(table) == pytest.approx(0.4, abs=1e-15)


def test_kappa_undefined_is_none_not_zero():
    assert cohen_kappa([[0, 0], [0, 0]]) is None
    assert cohen_kappa([[7, 0], [0, 0]]) is None          # p_e = 1: every pair in one cell
    assert percent_agreement([[0, 0], [0, 0]]) is None
    assert weighted_kappa([[3, 0, 0], [0, 0, 0], [0, 0, 0]]) is None
    assert fleiss_kappa([]) is None and fleiss_kappa([[1, 0], [0, 1]]) is None   # one rater


def test_weighted_kappa_by_hand():
    # rows 2,2,1; columns 1,2,2; n = 5. Linear: Σw·o = 2, Σw·r·c = 22 -> 1 - 10/22 = 6/11.
    # Quadratic: Σw·o = 2, Σw·r·c = 20 + 6 + 6 = 32 -> 1 - 10/32 = 11/16.
    table = [[1, 1, 0], [0, 1, 1], [0, 0, 1]]
    assert weighted_kappa(table, "linear") == pytest.approx(6 / 11, abs=1e-15)
    assert weighted_kappa(table, "quadratic") == pytest.approx(11 / 16, abs=1e-15)
    with pytest.raises(ValueError, match="linear"):
        weighted_kappa(table, "cubic")


def test_fleiss_kappa_by_hand():
    assert round(fleiss_kappa(FLEISS_TABLE), 3) == 0.210
    assert fleiss_kappa(FLEISS_TABLE) == pytest.approx(sm_fleiss_kappa(np.array(FLEISS_TABLE)), abs=1e-12)
    with pytest.raises(ValueError, match="same number"):
        fleiss_kappa([[1, 1], [2, 1]])


def test_confusion_tables():
    pairs = [("pass", "pass"), ("pass", "fail"), ("fail", "fail"), ("fail", "fail"), ("fail", "pass")]
    assert confusion_2x2(pairs) == {"both_pass": 1, "a_pass_b_fail": 1, "a_fail_b_pass": 1, "both_fail": 2}
    assert confusion_table(pairs, ("pass", "fail")) == [[1, 1], [1, 2]]
    with pytest.raises(ValueError, match="outside"):
        confusion_table([("pass", "maybe")], ("pass", "fail"))
    assert category_counts([["a", "b", "a"], ["b", "b", "b"]], ("a", "b")) == [[2, 1], [0, 3]]


def test_mcnemar_matches_statsmodels_exact():
    for b, c in [(0, 0), (1, 0), (3, 9), (10, 10), (25, 40), (0, 17)]:
        expected = mcnemar([[5, b], [c, 5]], exact=True).pvalue
        assert mcnemar_exact(b, c) == pytest.approx(min(1.0, expected), rel=1e-12)


pair_lists = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=60)


@settings(max_examples=150, deadline=None)
@given(pair_lists)
def test_kappas_agree_with_scikit_learn(pairs):
    table = confusion_table(pairs, range(4))
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for ours, weights in ((cohen_kappa(table), None), (weighted_kappa(table, "linear"), "linear"),
                              (weighted_kappa(table, "quadratic"), "quadratic")):
            theirs = cohen_kappa_score(a, b, labels=[0, 1, 2, 3], weights=weights)
            if ours is None:
                assert math.isnan(theirs) or theirs in (0.0, 1.0)
            else:
                assert ours == pytest.approx(theirs, abs=1e-9)
    assert percent_agreement(table) == pytest.approx(np.mean(np.array(a) == np.array(b)), abs=1e-12)


@settings(max_examples=100, deadline=None)
@given(st.integers(2, 6).flatmap(lambda m: st.lists(
    st.lists(st.integers(0, 2), min_size=m, max_size=m), min_size=1, max_size=30)))
def test_fleiss_agrees_with_statsmodels(ratings):
    counts = category_counts(ratings, (0, 1, 2))
    ours = fleiss_kappa(counts)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = sm_fleiss_kappa(np.array(counts))
    if ours is None:
        assert not np.isfinite(theirs)
    else:
        assert ours == pytest.approx(theirs, abs=1e-9)


def _numpy_bootstrap(table, seed, resamples=2000):
    """A plain index bootstrap with numpy and scikit-learn: a different generator and method."""
    k = len(table)
    a = np.repeat(np.arange(k * k) // k, [table[i][j] for i in range(k) for j in range(k)])
    b = np.repeat(np.arange(k * k) % k, [table[i][j] for i in range(k) for j in range(k)])
    rng = np.random.default_rng(seed)
    kappas = []
    for _ in range(resamples):
        idx = rng.integers(0, len(a), len(a))
        kappas.append(cohen_kappa_score(a[idx], b[idx], labels=list(range(k))))
    return np.percentile(kappas, [2.5, 97.5])


def test_bootstrap_interval_matches_a_plain_bootstrap_and_is_seeded():
    table = [[60, 15], [25, 100]]
    ours = kappa_bootstrap_interval(table, seed=7)
    low, high = _numpy_bootstrap(table, seed=1)
    assert ours[0] < cohen_kappa(table) < ours[1]
    assert ours[0] == pytest.approx(low, abs=0.03) and ours[1] == pytest.approx(high, abs=0.03)
    assert kappa_bootstrap_interval(table, seed=7) == ours          # same seed, same bytes
    assert kappa_bootstrap_interval(table, seed=8) != ours
    assert kappa_bootstrap_interval([[0, 0], [0, 0]], seed=1) is None
    assert kappa_bootstrap_interval([[9, 0], [0, 0]], seed=1) is None   # kappa never defined


def test_perfect_agreement_interval_is_a_point():
    assert kappa_bootstrap_interval([[30, 0], [0, 20]], seed=3) == (1.0, 1.0)
