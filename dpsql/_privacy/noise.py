"""Noise for dpsql releases: calibration formulas and samplers (see docs/noise.md).

Releases use exact samplers on a grid 2^k fixed by the noise scale alone (Mironov 2012): the
discrete Laplace of ``dpsql._privacy.dlaplace`` (by inversion with certified floating point up to
a scale of 2^32 grid units, else CKS20's Algorithm 2; one value or whole columns), and OpenDP's
discrete Gaussian (Canonne, Kamath, Steinke 2020, "CKS20") and Laplace past that scale; the
calibrations include the grid's slack. The exponential mechanism's choice is the exact inversion
of ``dpsql._privacy.choice``. ``SeededNoise`` is insecure, for tests only.
"""

from __future__ import annotations

import functools
import math
import secrets
from collections.abc import Callable, Sequence
from fractions import Fraction
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

from dpsql._privacy import choice
from dpsql._privacy.choice import finite_scores
from dpsql._privacy.gaussian import log_delta_unit, unit_sigma
from dpsql._privacy.parallel import map_chunks

if TYPE_CHECKING:
    import numpy as _np
    import opendp.prelude as dp

    #: values of many groups, as :meth:`NoiseSource.add_many` takes and returns them: a list, or
    #: a numpy column (int64 or float64)
    Column = Sequence[float] | _np.ndarray

__all__ = ["GRID_BITS", "grid_exponent", "grid_points", "snap", "laplace_scale",
           "gaussian_sigma_zcdp", "gaussian_sigma_approx", "gaussian_delta", "laplace_ci",
           "gaussian_ci", "NoiseSource", "SecureNoise", "SeededNoise", "default_noise"]

GRID_BITS = 30  # a float release lies on the grid 2^k, k = floor(log2(scale)) - GRID_BITS



@functools.lru_cache(maxsize=1)
def _opendp():  # noqa: ANN202 - the opendp.prelude module
    """OpenDP, imported on the first draw (importing it takes about 0.2 s)."""
    import opendp.prelude as dp

    dp.enable_features("contrib")
    return dp


#: Integer noise of a larger scale is drawn by the exact algorithms in Python integers: OpenDP's
#: 64-bit integer measurements saturate at ±(2^63 − 1), which a scale of 2^60 reaches often.
_SATURATES = 2.0**52

_CAUCHY4_BOUND = (math.sqrt(2.0) + 1.0) / 2.0  # max of (1 + z²)/(1 + z⁴), at z² = √2 - 1


def _num(name: str, x: float, positive: bool = True) -> float:
    """``x`` as a float; refuses NaN, infinities and (if ``positive``) x <= 0."""
    x = float(x)
    if not math.isfinite(x) or (positive and x <= 0.0):
        kind = "positive finite" if positive else "finite"
        raise ValueError(f"{name} must be a {kind} number, got {x!r}")
    return x


def grid_exponent(scale: float) -> int:
    """Exponent k of the grid 2^k on which a float release with this noise scale lies:
    k = floor(log2(scale)) - 30, a function of the scale alone, never of the data, so
    the released value cannot reveal low-order bits of the exact input (Mironov 2012).
    The input is rounded to the grid first, which moves it by at most 2^(k-1): the
    rounded query's sensitivity is at most Δ + 2^k, and the calibrations add that 2^k.
    """
    _, e = math.frexp(_num("scale", scale))  # scale = m·2^e with 1/2 <= m < 1
    return max(e - 1 - GRID_BITS, -1074)


@functools.lru_cache(maxsize=256)
def grid_unit(scale: float, k: int) -> Fraction:
    """scale / 2^k exactly: the scale of the discrete Laplace noise on the grid 2^k (a query's
    scales repeat, so the fractions are kept)."""
    return Fraction(scale) / Fraction(2) ** k


def grid_points(low: float, high: float, k: int) -> int:
    """Number of multiples of 2^k in the half-open interval [low, high)."""
    g = math.ldexp(1.0, k)
    return max(math.ceil(high / g) - math.ceil(low / g), 0)


def snap(value: float, k: int) -> float:
    """``value`` rounded to the nearest multiple of 2^k: for a release value + scale·Z
    computed in floating point, with k free of private data (e.g. from a public bound)."""
    return math.ldexp(round(math.ldexp(_num("value", value, False), -k)), k)


def _calibrate(sensitivity: float, grids: int, scale_of: Callable[[float], float]) -> float:
    """scale = scale_of(Δ + grids·2^k) with k = grid_exponent(scale), a fixed point (k starts
    at the slack-free scale's exponent and only grows; grids = 0: no slack). The result is
    enlarged by a few ulps, so floating-point rounding never makes it too small."""
    k = grid_exponent(scale_of(sensitivity))
    while True:
        scale = scale_of(sensitivity + grids * math.ldexp(1.0, k)) * (1.0 + 2.0**-50)
        if grid_exponent(scale) <= k:
            return scale
        k = grid_exponent(scale)


def laplace_scale(sensitivity: float, epsilon: float, *, integer: bool = False) -> float:
    """Laplace scale b making the release of a query with L1 sensitivity Δ ε-DP.

    Float releases (``NoiseSource.laplace``): b = (Δ + 2^k)/ε with k = grid_exponent(b).
    ``integer=True``, for integer queries released with ``laplace_int`` (discrete
    Laplace, nothing rounded): b = Δ/ε.
    """
    sensitivity, epsilon = _num("sensitivity", sensitivity), _num("epsilon", epsilon)
    return _calibrate(sensitivity, 0 if integer else 1, lambda d: d / epsilon)


def gaussian_sigma_zcdp(sensitivity: float, rho: float, *, integer: bool = False) -> float:
    """σ making a Gaussian release of a query with L2 sensitivity Δ ρ-zCDP.

    σ = (Δ + 2^k)/sqrt(2ρ), k = grid_exponent(σ) (Bun & Steinke 2016; for the discrete
    Gaussian CKS20 Thm. 4). ``integer=True`` (``gaussian_int``): σ = Δ/sqrt(2ρ).
    """
    sensitivity, rho = _num("sensitivity", sensitivity), _num("rho", rho)
    return _calibrate(sensitivity, 0 if integer else 1, lambda d: d / math.sqrt(2.0 * rho))


def gaussian_delta(sigma: float, sensitivity: float, epsilon: float) -> float:
    """Tight δ(ε) of the continuous Gaussian mechanism N(0, σ²) for sensitivity Δ."""
    s = _num("sigma", sigma) / _num("sensitivity", sensitivity)
    return math.exp(log_delta_unit(s, _num("epsilon", epsilon)))


def gaussian_sigma_approx(sensitivity: float, epsilon: float, delta: float) -> float:
    """σ making a Gaussian release of a query with L2 sensitivity Δ (ε, δ)-DP.

    Analytic Gaussian mechanism (Balle & Wang 2018, Thm. 8 / Alg. 1): the smallest σ with
    Φ(Δ'/(2σ) - εσ/Δ') - e^ε Φ(-Δ'/(2σ) - εσ/Δ') <= δ, by bisection on that closed form.
    Δ' = Δ + 3·2^k: one grid step for rounding, two for the sampler's discreteness
    (docs/noise.md proves this suffices). For integer queries, release with ``gaussian``
    and round the result (post-processing); ``gaussian_int`` pairs with zCDP.
    """
    sensitivity, epsilon = _num("sensitivity", sensitivity), _num("epsilon", epsilon)
    if not 0.0 < _num("delta", delta) < 1.0:
        raise ValueError(f"delta must lie strictly between 0 and 1, got {delta!r}")
    unit = unit_sigma(epsilon, float(delta))
    return _calibrate(sensitivity, 3, lambda d: d * unit)


def _confidence(c: float) -> float:
    if not 0.0 < float(c) < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {c!r}")
    return float(c)


def laplace_ci(scale: float, confidence: float = 0.95) -> float:
    """Half-width t with P[|Laplace(b)| <= t] = c: t = b·ln(1/(1 - c))."""
    return _num("scale", scale) * -math.log1p(-_confidence(confidence))


def gaussian_ci(sigma: float, confidence: float = 0.95) -> float:
    """Half-width t with P[|N(0, σ²)| <= t] = c: t = σ·Φ^-1((1 + c)/2)."""
    return _num("sigma", sigma) * NormalDist().inv_cdf((1.0 + _confidence(confidence)) / 2.0)


@functools.lru_cache(maxsize=512)
def _measurement(kind: str, scale: float, k: int, size: int | None = None) -> dp.Measurement:
    """OpenDP measurement for ``kind``, cached (building one costs about 0.2 ms)."""
    dp = _opendp()
    make = dp.m.make_laplace if kind.startswith("laplace") else dp.m.make_gaussian
    if kind.endswith("_vec"):
        # Independent noise on each coordinate, with the same scale and grid as the scalar
        # measurement: one call for a whole column of groups. ``size`` only enters OpenDP's own
        # privacy map (dpsql calibrates per coordinate), not the sampling.
        atom = dp.atom_domain(T="i64") if "_int" in kind else dp.atom_domain(T=float, nan=False)
        metric = dp.l1_distance if kind.startswith("laplace") else dp.l2_distance
        T = "i64" if "_int" in kind else float
        extra = {} if "_int" in kind else {"k": k}
        return make(dp.vector_domain(atom, size=size), metric(T=T), scale=scale, **extra)
    if kind.endswith("_int"):
        return make(dp.atom_domain(T="i64"), dp.absolute_distance(T="i64"), scale=scale)
    return make(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float),
                scale=scale, k=k)


class NoiseSource:
    """Where dpsql's randomness comes from. A subclass supplies random bits (``_randbits``)
    and float ``laplace``/``gaussian``; exact algorithms here build the rest on those bits."""

    secure: bool = False  # True only for sources fit for releases

    def _randbits(self, n: int) -> int:
        """A uniform integer in [0, 2^n)."""
        raise NotImplementedError

    def _randbelow(self, n: int) -> int:
        """A uniform integer in [0, n), by rejection from n.bit_length() bits."""
        while (r := self._randbits(n.bit_length())) >= n:
            pass
        return r

    def _unit(self) -> float:
        """A uniform float in (0, 1): a midpoint of the 2^-53 grid."""
        return (self._randbits(53) + 0.5) * 2.0**-53

    def _bernoulli_exp(self, gamma: Fraction) -> bool:
        """Exact Bernoulli(exp(-γ)) for rational γ >= 0 (CKS20, Algorithm 1)."""
        while gamma > 1:
            if not self._bernoulli_exp(Fraction(1)):
                return False
            gamma -= 1
        k = 1
        while self._randbelow((gamma / k).denominator) < (gamma / k).numerator:
            k += 1
        return k % 2 == 1

    def _discrete_laplace(self, scale: Fraction) -> int:
        """Exact P[y] ∝ exp(-|y|/scale) on the integers (CKS20, Algorithm 2)."""
        t, s = scale.numerator, scale.denominator
        while True:
            u = self._randbelow(t)
            if not self._bernoulli_exp(Fraction(u, t)):
                continue
            v = 0
            while self._bernoulli_exp(Fraction(1)):
                v += 1
            y = (u + t * v) // s
            negative = self._randbits(1) == 1
            if not (negative and y == 0):
                return -y if negative else y

    def laplace(self, value: float, scale: float, *, k: int | None = None) -> float:
        """value + Laplace(scale) (secure: on the grid 2^k, k = grid_exponent(scale)).

        Pass ``k`` only to fix the grid from public quantities when ``scale`` depends on
        private data (the grid would reveal it); then calibrate for sensitivity Δ + 2^k.
        """
        raise NotImplementedError

    def gaussian(self, value: float, sigma: float, *, k: int | None = None) -> float:
        """value + N(0, σ²) (secure: discrete Gaussian on the grid, as in ``laplace``)."""
        raise NotImplementedError

    def laplace_int(self, value: int, scale: float) -> int:
        """value + discrete Laplace noise, P[y] ∝ exp(-|y|/scale), for integer queries."""
        return int(value) + self._discrete_laplace(Fraction(_num("scale", scale)))

    def gaussian_int(self, value: int, sigma: float) -> int:
        """value + discrete Gaussian noise, P[y] ∝ exp(-y²/(2σ²)) (CKS20, Algorithm 3)."""
        sigma2, t = Fraction(_num("sigma", sigma)) ** 2, math.floor(sigma) + 1
        while True:
            y = self._discrete_laplace(Fraction(t))
            if self._bernoulli_exp((abs(y) - sigma2 / t) ** 2 / (2 * sigma2)):
                return int(value) + y

    def add_many(self, kind: str, values: Column, scale: float) -> Column:
        """``values`` each with independent noise of ``kind`` (``laplace``, ``gaussian``,
        ``laplace_int``, ``gaussian_int``) and the same scale: the same law as one call per value.
        A source may return a numpy array (int64 or float64) for a numpy column of ``values``."""
        one = getattr(self, kind)
        return [one(v, scale) for v in values]

    def uniform(self, low: float, high: float, *, k: int | None = None) -> float:
        """A uniform point of the grid 2^k in [low, high), k = grid_exponent(high - low).

        The grid index is drawn exactly. When the endpoints are private (intervals of the
        exponential mechanism), pass a k from public bounds and weight each interval by
        ``grid_points``: a grid chosen from the width would reveal the width.
        """
        low, high = _num("low", low, False), _num("high", high, False)
        if not low < high:
            raise ValueError(f"uniform needs low < high, got [{low!r}, {high!r})")
        k = grid_exponent(high - low) if k is None else k
        n = grid_points(low, high, k)
        if n == 0:
            raise ValueError(f"no multiple of 2^{k} lies in [{low!r}, {high!r})")
        first = math.ceil(low / math.ldexp(1.0, k))
        return min(max(math.ldexp(first + self._randbelow(n), k), low), high)

    def bernoulli_exp(self, x: float) -> bool:
        """True with probability exp(-x), x >= 0, exactly (a float is a rational)."""
        if _num("x", x, False) < 0.0:
            raise ValueError(f"bernoulli_exp needs x >= 0, got {x!r}")
        return self._bernoulli_exp(Fraction(float(x)))

    def choice_weighted(self, log_weights: Sequence[float]) -> int:
        """Index i with probability exp(w_i)/Σ_j exp(w_j); -inf entries are never chosen.

        Inverse CDF on weights normalised by log-sum-exp in floating point: each probability
        is off by ~1e-16 relative, and weights below 2^-1074 of the largest count as zero.
        """
        finite = finite_scores(log_weights)
        top = max(w for _, w in finite)
        weights = [math.exp(w - top) for _, w in finite]
        u, acc = self._unit() * math.fsum(weights), 0.0
        for (i, _), w in zip(finite, weights):
            acc += w
            if u < acc:
                return i
        return finite[-1][0]

    def cauchy_like(self, gamma: float) -> float:
        """Z with density ∝ 1/(1 + |z|^γ), γ > 1 (NRS 2007 admissible noise).

        γ = 2: Z = tan(π(U - 1/2)). γ > 2: rejection from the Cauchy density, accepting z
        with probability (1 + z²)/(M(1 + |z|^γ)), M = (√2 + 1)/2 for γ = 4 (the maximum)
        and 2 otherwise. 1 < γ < 2: rejection from the density ∝ (1 + |z|)^-γ with
        M = 2^(γ-1). Z is snapped to the grid 2^-40. OpenDP has no exact sampler for this
        law: release value + scale·Z through ``snap`` with a public grid.
        """
        if _num("gamma", gamma) <= 1.0:
            raise ValueError(f"cauchy_like needs gamma > 1, got {gamma!r}")
        gamma = float(gamma)
        while True:
            if gamma >= 2.0:
                z = math.tan(math.pi * (self._unit() - 0.5))
                bound = _CAUCHY4_BOUND if gamma == 4.0 else 2.0
                if gamma == 2.0 or self._unit() * bound < _ratio(abs(z), False, 2.0, gamma):
                    return snap(z, -40)
            else:
                try:
                    r = self._unit() ** (-1.0 / (gamma - 1.0)) - 1.0
                except OverflowError:
                    continue
                if self._unit() * 2.0 ** (gamma - 1.0) < _ratio(r, True, gamma, gamma):
                    return snap(-r if self._randbits(1) else r, -40)


def _ratio(r: float, shifted: bool, p: float, gamma: float) -> float:
    """((1 + r)^p if shifted else 1 + r^p)/(1 + r^γ) for r >= 0, p <= γ, without overflow."""
    if r <= 1.0:
        top = (1.0 + r) ** p if shifted else 1.0 + r**p
        return top / (1.0 + r**gamma)
    top = (1.0 + 1.0 / r) ** p * r ** (p - gamma) if shifted else r**-gamma + r ** (p - gamma)
    return top / (r**-gamma + 1.0)  # numerator and denominator divided by r^γ


class SecureNoise(NoiseSource):
    """The release source: OpenDP's exact samplers and the operating system's CSPRNG.

    Laplace and Gaussian (float and integer) come from OpenDP, except columns of Laplace
    noise (``add_many``), drawn by the same exact algorithm on whole arrays
    (:mod:`dpsql._privacy.dlaplace`, about 15 times faster per draw); ``choice_weighted`` is
    the exact inversion of :mod:`dpsql._privacy.choice` (about 50 times faster than OpenDP's
    report-noisy-max, which it replaced), and every other draw runs the exact algorithms on
    ``secrets`` bits.
    """

    secure = True

    def _randbits(self, n: int) -> int:
        return secrets.randbits(n)

    def _randbelow(self, n: int) -> int:
        return secrets.randbelow(n)

    def _on_grid(self, kind: str, value: float, scale: float, k: int | None) -> float:
        scale = _num("scale", scale)
        k = grid_exponent(scale) if k is None else int(k)
        return float(_measurement(kind, scale, k)(_num("value", value, False)))

    def laplace(self, value: float, scale: float, *, k: int | None = None) -> float:
        # One value by the same exact sampler as a column (the law of OpenDP's, about a fifth of
        # its cost): the grid point (round(value/2^k) + Z)·2^k, Z discrete Laplace of scale/2^k.
        scale = _num("scale", scale)
        k = grid_exponent(scale) if k is None else int(k)
        from dpsql._privacy import dlaplace

        unit = grid_unit(scale, k)
        if dlaplace.inversion_scale(unit) is not None:
            return dlaplace.place_one(_num("value", value, False), dlaplace.one(unit), k)
        return self._on_grid("laplace", value, scale, k)

    def gaussian(self, value: float, sigma: float, *, k: int | None = None) -> float:
        return self._on_grid("gaussian", value, sigma, k)

    def laplace_int(self, value: int, scale: float) -> int:
        from dpsql._privacy import dlaplace

        unit = Fraction(_num("scale", scale))
        if unit <= dlaplace.INVERSION_MAX:
            return int(value) + dlaplace.one(unit)
        if unit > _SATURATES:
            return super().laplace_int(value, scale)
        return int(_measurement("laplace_int", float(unit), 0)(int(value)))

    def add_many(self, kind: str, values: Column, scale: float) -> Column:
        if len(values) < 2 or (kind.endswith("_int") and _num("scale", scale) > _SATURATES):
            return super().add_many(kind, values, scale)
        scale = _num("scale", scale)
        k, cast = (0, int) if kind.endswith("_int") else (grid_exponent(scale), float)
        data = _column(values, cast)
        if kind.startswith("laplace"):  # exact discrete Laplace on whole arrays, numpy imported on first use
            from dpsql._privacy import dlaplace

            unit = grid_unit(scale, k)  # k = 0 for integers
            if dlaplace.fits(unit):
                # one thread: its blocks of numpy steps are short, and two threads on them
                # wait on each other more than they gain (docs/benchmarks.md, round 6)
                return dlaplace.add_int(data, unit) if cast is int else dlaplace.add_on_grid(data, unit, k)

        def draw(chunk: Any) -> list[float]:
            chunk = chunk.tolist() if hasattr(chunk, "tolist") else chunk  # OpenDP reads lists
            return [cast(x) for x in _measurement(kind + "_vec", scale, k, len(chunk))(chunk)]
        return map_chunks(draw, data)  # long vectors in parallel chunks (dpsql._privacy.parallel)

    def gaussian_int(self, value: int, sigma: float) -> int:
        if _num("sigma", sigma) > _SATURATES:
            return super().gaussian_int(value, sigma)
        return int(_measurement("gaussian_int", sigma, 0)(int(value)))

    def choice_weighted(self, log_weights: Sequence[float]) -> int:
        """Exactly i with probability ∝ e^(w_i), by certified inversion (:mod:`dpsql._privacy.choice`)."""
        return choice.weighted(log_weights)


class SeededNoise(NoiseSource):
    """INSECURE, reproducible noise for tests and simulations; never for a release.

    PCG64 is not a cryptographic generator and numpy's float samplers are open to
    Mironov's attack. Distributions equal ``SecureNoise``'s (numpy for Laplace, Gaussian
    and discrete Laplace; the exact algorithms on PCG64 bits for the other draws), but
    float results are not on the grid.
    """

    secure = False

    def __init__(self, seed: int) -> None:
        self.seed = int(seed)
        from numpy.random import PCG64, Generator  # insecure test mode only

        self._gen = Generator(PCG64(self.seed))

    def _randbits(self, n: int) -> int:
        nbytes = (n + 7) // 8
        return int.from_bytes(self._gen.bytes(nbytes), "little") >> (8 * nbytes - n)

    def _randbelow(self, n: int) -> int:
        return int(self._gen.integers(n)) if n < 2**63 else super()._randbelow(n)

    def laplace(self, value: float, scale: float, *, k: int | None = None) -> float:
        return _num("value", value, False) + float(self._gen.laplace(0.0, _num("scale", scale)))

    def gaussian(self, value: float, sigma: float, *, k: int | None = None) -> float:
        return _num("value", value, False) + float(self._gen.normal(0.0, _num("sigma", sigma)))

    def laplace_int(self, value: int, scale: float) -> int:
        """G1 - G2 for independent Geometric(1 - e^(-1/b)): P[y] ∝ exp(-|y|/b), fast."""
        p = -math.expm1(-1.0 / _num("scale", scale))
        return int(value) + int(self._gen.geometric(p)) - int(self._gen.geometric(p))

    def laplace_array(self, scale: float, size: int) -> _np.ndarray:
        """``size`` independent Laplace(scale) noise values (no value added)."""
        return self._gen.laplace(0.0, _num("scale", scale), size)

    def gaussian_array(self, sigma: float, size: int) -> _np.ndarray:
        """``size`` independent N(0, σ²) noise values (no value added)."""
        return self._gen.normal(0.0, _num("sigma", sigma), size)


def _column(values: Column, cast: type) -> Any:
    """``values`` as a list of ``cast`` (int or float), refusing NaN and infinities as ``_num``
    does; a numpy column of groups (int64 or float64) is checked and converted in numpy and
    stays a numpy array (int64 for ``int``, float64 for ``float``), with the same values."""
    dtype = getattr(values, "dtype", None)
    if dtype is not None and getattr(values, "ndim", 0) == 1 and dtype.kind in "if":
        import numpy

        column = numpy.asarray(values)  # the array itself (it is one), typed as one
        # copy=False: the samplers never write to the column they are given
        if dtype.kind == "i":  # int64 → float64 rounds to nearest, as float(int) does
            return column.astype(numpy.int64 if cast is int else numpy.float64, copy=False)
        finite = bool(numpy.isfinite(column).all())
        if finite and cast is float:
            return column.astype(numpy.float64, copy=False)
        if finite and bool((numpy.abs(column) < 2.0**53).all()):
            return column.astype(numpy.int64)  # truncates, as int()
    return [int(v) for v in values] if cast is int else [_num("value", v, False) for v in values]


@functools.lru_cache(maxsize=1)
def default_noise() -> SecureNoise:
    """The process-wide ``SecureNoise`` instance."""
    return SecureNoise()
