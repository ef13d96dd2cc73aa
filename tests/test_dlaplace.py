"""The array sampler of discrete Laplace noise (CKS20 on whole arrays) has the exact law.

Each law is checked by a chi-square goodness-of-fit test on seeded random bytes (so the tests are
deterministic), against the exact probabilities; the negative controls show the same test
rejects a law that is slightly off, so a pass means something.
"""

from __future__ import annotations

import decimal
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import chisquare

from dpsql._privacy import dlaplace
from dpsql._privacy.noise import SecureNoise, grid_exponent, laplace_scale

N = 200_000


def seeded(seed: int = 7) -> dlaplace.RandomBytes:
    return np.random.Generator(np.random.PCG64(seed)).bytes


def pmf(scale: float, y: np.ndarray) -> np.ndarray:
    """P[Y = y] = (1 − q)/(1 + q)·q^|y|, q = e^(−1/scale)."""
    q = math.exp(-1.0 / scale)
    return (1 - q) / (1 + q) * q ** np.abs(y)


def fit_p(draws: np.ndarray, scale: float, cut: int | None = None) -> float:
    """p-value of the chi-square test of ``draws`` against the discrete Laplace law of ``scale``,
    with |y| > cut pooled into one tail cell on each side."""
    draws = np.asarray(draws, dtype=np.int64)
    if cut is None:  # cells with an expected count of at least about 20
        cut = max(1, int(scale * math.log(len(draws) / 40)))
    ys = np.arange(-cut, cut + 1)
    observed = [np.count_nonzero(draws < -cut)] + [np.count_nonzero(draws == y) for y in ys]
    observed.append(np.count_nonzero(draws > cut))
    inner = pmf(scale, ys)
    tail = (1.0 - inner.sum()) / 2
    expected = np.concatenate(([tail], inner, [tail])) * len(draws)
    return float(chisquare(observed, expected).pvalue)


def one_by_one(scale: Fraction, n: int, source: dlaplace.RandomBytes) -> np.ndarray:
    """``n`` draws of the single-value sampler (``SecureNoise.laplace`` of one value)."""
    return np.array([dlaplace.one(scale, source) for _ in range(n)], dtype=np.int64)


SAMPLERS = {"inversion": dlaplace.discrete_laplace, "cks20": dlaplace.cks20, "one": one_by_one}


@pytest.mark.parametrize("sampler", list(SAMPLERS))
@pytest.mark.parametrize("scale", [Fraction(1), Fraction(3, 2), Fraction(1, 3), Fraction(7), Fraction(40, 3)])
def test_discrete_laplace_has_the_exact_law(scale: Fraction, sampler: str) -> None:
    draws = SAMPLERS[sampler](scale, N, seeded())
    assert draws.dtype == np.int64 and draws.shape == (N,)
    assert fit_p(draws, float(scale)) > 1e-4


@pytest.mark.parametrize("sampler", list(SAMPLERS))
@pytest.mark.parametrize("wrong", [Fraction(11, 10), Fraction(9, 10)])
def test_the_fit_rejects_a_scale_off_by_ten_percent(wrong: Fraction, sampler: str) -> None:
    """Negative control: the test above has the power to see a 10% error in the scale."""
    draws = SAMPLERS[sampler](wrong, N, seeded())
    assert fit_p(draws, 1.0) < 1e-6


def test_the_fit_rejects_a_sampler_that_keeps_negative_zero(monkeypatch) -> None:
    """Negative control: without Algorithm 2's rejection of (B = 1, Y = 0), zero is drawn twice as
    often; the fit sees it."""
    real = dlaplace._attempts

    def keeps_negative_zero(num, den, m, bits):
        returns, values, wide = real(num, den, m, bits)
        return returns | (values == 0), values, wide  # a negative zero is an attempt that ran

    monkeypatch.setattr(dlaplace, "_attempts", keeps_negative_zero)
    draws = dlaplace.cks20(Fraction(1), N, seeded())
    assert fit_p(draws, 1.0) < 1e-6
    monkeypatch.setattr(dlaplace, "_returned", lambda g, negative: np.arange(g.size))
    draws = dlaplace.discrete_laplace(Fraction(1), N, seeded())  # the same rejection, by inversion
    assert fit_p(draws, 1.0) < 1e-6


@pytest.mark.parametrize("sampler", list(SAMPLERS))
def test_a_grid_scale_has_the_exact_law(sampler: str) -> None:
    """The scales of float releases have a numerator of up to 53 bits: the law at such a scale
    (about 2^31 units of the grid) in the cells of |y| by scale."""
    scale = Fraction(laplace_scale(1.0, 0.7)) / Fraction(2) ** grid_exponent(laplace_scale(1.0, 0.7))
    assert scale.numerator > 2**32 and scale < dlaplace.INVERSION_MAX  # 64-bit words for U; inversion
    draws = SAMPLERS[sampler](scale, N, seeded())
    b = float(scale)
    edges = np.array([0.0, 0.25, 0.5, 1.0, 2.0, 4.0, np.inf]) * b  # P[|Y| in [a, c)] ≈ e^(-a/b) − e^(-c/b)
    counts, _ = np.histogram(np.abs(draws).astype(float), bins=edges)
    expected = -np.diff(np.exp(-edges / b)) * N
    assert chisquare(counts, expected).pvalue > 1e-4
    assert abs(np.count_nonzero(draws > 0) / N - 0.5) < 0.01


def test_building_blocks() -> None:
    bits = dlaplace._Bits(seeded(3))
    k = np.array([1, 2, 3, 7] * 50_000, dtype=np.uint32)
    hits = dlaplace._one_in(k, bits)
    for value in (1, 2, 3, 7):
        assert abs(hits[k == value].mean() - 1 / value) < 0.01
    below = dlaplace._below(5, 100_000, bits)
    assert set(np.unique(below)) == {0, 1, 2, 3, 4}
    assert chisquare(np.bincount(below)).pvalue > 1e-4
    for u in (0, 3, 10):
        got = dlaplace._bernoulli_exp_fraction(np.full(100_000, u), 10, bits).mean()
        assert abs(got - math.exp(-u / 10)) < 0.01, u
    v = dlaplace._geometric_exp_one(100_000, bits)
    assert abs(v.mean() - math.exp(-1) / (1 - math.exp(-1))) < 0.02  # mean of Geometric(1 − 1/e)


def test_lanes_past_int64_finish_exactly_in_python_integers(monkeypatch) -> None:
    """Lanes whose X = U + t·V would pass int64 finish in Python integers; forcing the limit down
    sends about e^-3 of the lanes there, and the law is unchanged."""
    monkeypatch.setattr(dlaplace, "INT64_MAX", 7)  # t = 2: V <= 2 in int64, V >= 3 in Python
    draws = dlaplace.cks20(Fraction(2), N, seeded())
    assert draws.dtype == object
    assert fit_p(np.array(draws.tolist()), 2.0) > 1e-4


def test_a_denominator_past_int64_gives_zero() -> None:
    assert not dlaplace.discrete_laplace(Fraction(1, 2**70), 1000, seeded()).any()
    assert not dlaplace.cks20(Fraction(1, 2**70), 1000, seeded()).any()


def test_scales_that_do_not_fit_are_refused() -> None:
    assert not dlaplace.fits(Fraction(2**62))
    with pytest.raises(ValueError, match="numerator"):
        dlaplace.discrete_laplace(Fraction(2**62), 3, seeded())


def test_place_is_the_exact_grid_point_rounded_once() -> None:
    k = -3
    z = np.array([0, 5, -7, 2**60], dtype=np.int64)
    values = [1.06, -2.5, 1e300, 3.0]
    got = dlaplace.place(values, z, k)
    for v, d, g in zip(values, z.tolist(), got):
        assert g == float((round(Fraction(v) / Fraction(2) ** k) + d) * Fraction(2) ** k)
    assert dlaplace.place([1.7976931348623157e308], np.array([2**62], dtype=np.int64), 1000) == [math.inf]


def test_add_int_handles_huge_integers() -> None:
    out = dlaplace.add_int([2**70, 5], Fraction(1), seeded())
    assert abs(out[0] - 2**70) < 100 and isinstance(out[0], int)
    assert all(isinstance(v, int) for v in out)


def test_secure_columns_come_from_the_array_sampler(monkeypatch) -> None:
    """SecureNoise.add_many draws Laplace columns with dlaplace (and OpenDP for one value), on
    the grid of the scale; the secure bytes give the right spread."""
    calls = []
    real = dlaplace.discrete_laplace
    monkeypatch.setattr(dlaplace, "discrete_laplace", lambda *a, **kw: calls.append(a[1]) or real(*a, **kw))
    noise = SecureNoise()
    scale = laplace_scale(1.0, 1.0)
    k = grid_exponent(scale)
    out = np.array(noise.add_many("laplace", [10.0] * 40_000, scale))
    assert sum(calls) == 40_000
    assert np.all(np.ldexp(out, -k) == np.rint(np.ldexp(out, -k)))  # on the grid 2^k
    # Var = 2b²: with 40,000 draws the sample variance is within 5% of it with overwhelming
    # probability (its standard error is about 1.6%)
    assert abs(out.var() / (2 * scale**2) - 1) < 0.08
    ints = noise.add_many("laplace_int", [3] * 10_000, 2.0)
    assert all(isinstance(v, int) for v in ints) and abs(np.mean(ints) - 3) < 0.2


# -- inversion: the float path only certifies floors; the decimal path decides the rest ----------


def test_the_float_ends_are_within_a_16th_of_the_margin() -> None:
    """The margin's premise: x = −b·ln v at both ends of a lane's interval, as numpy and ``math``
    compute it, is within 2^−50 (relative) of the exact value, on words from every region (tiny,
    around ½, near 1, and uniform), checked against 50-digit decimal logarithms."""
    rng = np.random.Generator(np.random.PCG64(11))
    top = 2**dlaplace.WORD
    words = np.concatenate([
        rng.integers(0, top, 3000),
        rng.integers(1, 2**20, 500),  # V near 2^-53·small
        top // 2 + rng.integers(-2**20, 2**20, 500),  # around ½
        top - 1 - rng.integers(0, 2**20, 500),  # V near 1
    ]).astype(np.int64)
    b = Fraction(2**31 + 12345, 1)
    x_end, x_start = dlaplace._ends(words, float(b))  # numpy's log
    scalar = [dlaplace._one_ends(w, float(b)) for w in words.tolist()]  # math.log
    worst = 0.0
    with decimal.localcontext() as ctx:
        ctx.prec = 50
        for w, e, s_, (e1, s1) in zip(words.tolist(), x_end.tolist(), x_start.tolist(), scalar):
            for v, got in ((w + 1, e), (w, s_), (w + 1, e1), (w, s1)):
                if v == 0:
                    assert got == math.inf
                    continue
                exact = -(decimal.Decimal(v) / decimal.Decimal(top)).ln() * decimal.Decimal(b.numerator)
                if exact == 0:
                    assert got == 0
                    continue
                worst = max(worst, float(abs((decimal.Decimal(got) - exact) / exact)))
    assert worst < dlaplace.MARGIN / 16, worst


@pytest.mark.parametrize("scale", [Fraction(3, 2), Fraction(40, 3)])
def test_lanes_decided_in_decimal_have_the_exact_law(monkeypatch, scale: Fraction) -> None:
    """With a margin so wide that the floats decide almost nothing, nearly every lane takes the
    decimal path (more bits and digits until the floor is certain); the law is the same, and
    values past the int64 limit come back as Python integers."""
    monkeypatch.setattr(dlaplace, "MARGIN", 0.5)
    monkeypatch.setattr(dlaplace, "INT64_MAX", int(3 * scale))
    calls = []
    real = dlaplace._exact_magnitude
    monkeypatch.setattr(dlaplace, "_exact_magnitude", lambda *a: calls.append(1) or real(*a))
    n = 20_000
    draws = dlaplace.discrete_laplace(scale, n, seeded(5))
    assert len(calls) > n // 2
    assert draws.dtype == object and max(abs(v) for v in draws.tolist()) > 3 * scale
    assert fit_p(np.array(draws.tolist(), dtype=np.int64), float(scale)) > 1e-4


def test_the_decimal_path_reads_more_bits_when_it_must() -> None:
    """A word whose interval holds the boundary e^(−g/b) (here w = 0: V below 2^−53, where the
    logarithm is unbounded) is decided after more bits; the floor is then certain."""
    words = iter([np.uint64(2**62).tobytes()])  # the next 64 bits of V: V in (2^-55, 2^-55 + 2^-117]
    bits = dlaplace._Bits(lambda n: next(words))
    g = dlaplace._exact_magnitude(0, Fraction(1), bits)
    assert g == math.floor(55 * math.log(2))  # and the source is not read again: one word was enough


def test_one_value_decided_in_decimal_has_the_exact_law(monkeypatch) -> None:
    """The single-value sampler's lanes that the floats cannot decide go to the same decimal path."""
    monkeypatch.setattr(dlaplace, "MARGIN", 0.5)
    calls = []
    real = dlaplace._exact_magnitude
    monkeypatch.setattr(dlaplace, "_exact_magnitude", lambda *a: calls.append(1) or real(*a))
    draws = one_by_one(Fraction(40, 3), 20_000, seeded(9))
    assert len(calls) > 10_000
    assert fit_p(draws, 40 / 3) > 1e-4


def test_place_one_is_place() -> None:
    """One value's grid point is the column's, for ordinary, huge and tiny values and noise."""
    rng = np.random.Generator(np.random.PCG64(4))
    cases = [(float(v), int(z), int(k)) for v, z, k in zip(
        rng.normal(0, 1e6, 300), rng.integers(-2**40, 2**40, 300), rng.integers(-60, 20, 300))]
    cases += [(1.7976931348623157e308, 2**25, 1000), (-1.7976931348623157e308, -2**25, 1000), (1e308, 2**60, 900), (-1e308, -5, 1000), (5e-324, 3, -1074), (2.0**60, 2**53, 0), (0.5, 0, 0), (1.5, 0, 0)]
    for v, z, k in cases:
        assert dlaplace.place_one(v, z, k) == dlaplace.place([v], np.array([z], dtype=np.int64), k)[0], (v, z, k)
