"""The exact weighted choice (the exponential mechanism's draw) has the law it states.

Chi-square tests on seeded random bytes (deterministic) against the exact probabilities, on the
float path and on the decimal path; the two paths give the same index for the same bits; the
float error bound holds against 50-digit arithmetic; and a negative control (weights 5% off)
fails the same test, so a pass means something.
"""

from __future__ import annotations

import decimal
import itertools
import math

import numpy as np
import pytest
from scipy.stats import chisquare

from dpsql._privacy import choice
from dpsql._privacy.dlaplace import RandomBytes
from dpsql._privacy.noise import SecureNoise

N = 60_000


def seeded(seed: int = 3) -> RandomBytes:
    return np.random.Generator(np.random.PCG64(seed)).bytes


def probabilities(log_weights: list[float]) -> np.ndarray:
    """e^(w_i)/Σ e^(w_j), in 50-digit decimal arithmetic, as floats."""
    with decimal.localcontext() as ctx:
        ctx.prec = 50
        top = max(w for w in log_weights if w != -math.inf)
        e = [decimal.Decimal(0) if w == -math.inf else (decimal.Decimal(w) - decimal.Decimal(top)).exp()
             for w in log_weights]
        total = sum(e)
        return np.array([float(x / total) for x in e])


def fit_p(draws: list[int], log_weights: list[float]) -> float:
    """p-value of the chi-square test of ``draws`` against the law of ``log_weights``; indices
    expected fewer than 20 times are pooled into one cell."""
    p = probabilities(log_weights)
    counts = np.bincount(np.asarray(draws), minlength=len(p)).astype(float)
    assert counts[p == 0].sum() == 0, "an index of weight zero was drawn"
    big = p * len(draws) >= 20
    observed = np.append(counts[big], counts[~big].sum())
    expected = np.append(p[big], p[~big].sum()) * len(draws)
    if expected[-1] == 0:
        observed, expected = observed[:-1], expected[:-1]
    return float(chisquare(observed, expected).pvalue)


#: The median's weights: exp(−ε'·|i − n/2|)·G_i with a few sizes, a −inf (an empty region) and tails.
MEDIAN = [-40.0, *(-0.5 * abs(i - 20) + math.log(1 + i % 3) for i in range(41)), -math.inf, -40.0]
CASES = {
    "median": MEDIAN,
    "two": [0.0, -1.0],
    "flat": [0.0] * 7,
    "steep": [-30.0 * i for i in range(5)] + [-0.01],  # one weight dominates, others past e^-30
    "underflow": [0.0, -800.0, -1e300, math.log(0.3)],  # weights below the float range
    "large": [1e6 + x for x in (0.0, -2.0, 0.5, -math.inf, 0.25)],  # scores far from zero
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_choice_has_the_exact_law(case: str) -> None:
    weights = CASES[case]
    source = seeded()
    draws = [choice.weighted(weights, source) for _ in range(N)]
    assert fit_p(draws, weights) > 1e-4


@pytest.mark.parametrize("case", ["median", "two", "large"])
def test_draws_decided_in_decimal_have_the_exact_law(monkeypatch, case: str) -> None:
    """With an error bound so wide that the floats decide nothing, every draw takes the decimal
    path; the law is the same."""
    monkeypatch.setattr(choice, "FACTOR", 2.0**60)
    calls = []
    real = choice._exact
    monkeypatch.setattr(choice, "_exact", lambda *a: calls.append(1) or real(*a))
    weights = CASES[case]
    source = seeded(8)
    draws = [choice.weighted(weights, source) for _ in range(20_000)]
    assert len(calls) == 20_000
    assert fit_p(draws, weights) > 1e-4


def test_the_two_paths_choose_the_same_index_for_the_same_bits() -> None:
    """The float path only certifies what the exact inversion gives: for the same 53 bits of V,
    the decimal path returns the same index (it reads no more bits when the floats were sure)."""
    rng = np.random.Generator(np.random.PCG64(12))
    for weights in [*CASES.values(), list(rng.normal(0, 3, 200))]:
        finite = [w for w in weights if w != -math.inf]
        index = [i for i, w in enumerate(weights) if w != -math.inf]
        for _ in range(400):
            word = rng.bytes(8)
            words = iter([word])
            got = choice.weighted(weights, lambda n: next(words))
            u = int.from_bytes(word, "little") >> (64 - choice.WORD)
            assert got == index[choice._exact(finite, max(finite), u, lambda n: pytest.fail("read more bits"))]


def test_an_interval_that_holds_a_boundary_reads_more_bits() -> None:
    """Weights 1 and 1: the boundary is V = ½. The word just below it gives an interval that
    ends at ½, and the word of ½ one that starts there: no margin certifies either, so the
    decimal path reads 64 more bits and decides."""
    words = iter([(2**52 - 1 << 11).to_bytes(8, "little"), bytes(8)])
    assert choice.weighted([0.0, 0.0], lambda n: next(words)) == 0  # V just below ½: index 0
    words = iter([(2**52 << 11).to_bytes(8, "little"), (2**63).to_bytes(8, "little")])
    assert choice.weighted([0.0, 0.0], lambda n: next(words)) == 1  # V from ½ on: index 1


def test_the_float_error_bound_holds_with_room() -> None:
    """The premise of the float path: the running sums of e^(w − t), as floats, are within a
    quarter of the bound E of their exact values, for weights of every spread."""
    rng = np.random.Generator(np.random.PCG64(21))
    for size, spread in itertools.product([2, 30, 900], [0.1, 5.0, 300.0, 5000.0]):
        w = [float(x) for x in rng.normal(0, spread, size)]
        top = max(w)
        cum = list(itertools.accumulate(math.exp(x - top) for x in w))
        err = (choice.FACTOR * size + 16) * 2.0**-52 * cum[-1] + size * 2.0**-1070
        with decimal.localcontext() as ctx:
            ctx.prec = 60
            exact = list(itertools.accumulate((decimal.Decimal(x) - decimal.Decimal(top)).exp() for x in w))
        worst = max(abs(decimal.Decimal(c) - e) for c, e in zip(cum, exact))
        assert worst <= decimal.Decimal(err) / 4, (size, spread, worst, err)


def test_a_law_slightly_off_is_rejected() -> None:
    """Negative control: draws from weights 5% steeper than the stated ones fail the test."""
    steeper = [1.05 * w for w in MEDIAN]
    source = seeded()
    draws = [choice.weighted(steeper, source) for _ in range(N)]
    assert fit_p(draws, MEDIAN) < 1e-6


def test_bad_weights_are_refused_and_one_weight_reads_nothing() -> None:
    for bad in ([math.nan, 0.0], [math.inf], [-math.inf, -math.inf], []):
        with pytest.raises(ValueError):
            choice.weighted(bad, seeded())
    assert choice.weighted([-math.inf, 3.0], lambda n: pytest.fail("read bits")) == 1


def test_the_release_source_uses_the_exact_choice(monkeypatch) -> None:
    calls = []
    monkeypatch.setattr(choice, "weighted", lambda w, source=None: calls.append(list(w)) or 0)
    assert SecureNoise().choice_weighted([0.0, -1.0]) == 0
    assert calls == [[0.0, -1.0]]
