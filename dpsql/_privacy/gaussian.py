"""The analytic Gaussian mechanism's privacy curve: δ(ε) of N(0, σ²) at sensitivity 1, and the
smallest σ for a target (ε, δ) (Balle & Wang 2018, Thm. 8 and Alg. 1), in floating point without
cancellation. :mod:`dpsql._privacy.noise` calibrates with these and adds the grid's slack.
"""

from __future__ import annotations

import functools
import math

__all__ = ["log_delta_unit", "unit_sigma"]

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


@functools.lru_cache(maxsize=1)
def _gauss_legendre() -> list[tuple[float, float]]:
    """24-point Gauss–Legendre nodes and weights (numpy is imported on first use)."""
    import numpy

    nodes, weights = numpy.polynomial.legendre.leggauss(24)
    return list(zip(nodes.tolist(), weights.tolist()))


def _mills_tail(x: float) -> float:
    """c with R(x) = 1/(x + c): Laplace's continued fraction, exact in double for x >= 5."""
    t = x
    for j in range(40, 1, -1):
        t = x + j / t
    return 1.0 / t


def _log_mills(x: float) -> float:
    """log R(x), R(x) = P[Z > x]/φ(x) the Mills ratio of the standard normal."""
    if x >= 5.0:
        return -math.log(x + _mills_tail(x))
    return math.log(0.5 * math.erfc(x / math.sqrt(2.0))) + 0.5 * x * x + _LOG_SQRT_2PI


def _one_minus_x_mills(x: float) -> float:
    """1 - x·R(x) = -R'(x) > 0, with no cancellation for large x."""
    if x >= 5.0:
        c = _mills_tail(x)
        return c / (x + c)
    return 1.0 - x * math.exp(_log_mills(x))


def log_delta_unit(s: float, epsilon: float) -> float:
    """log δ(ε) of the continuous Gaussian mechanism with sensitivity 1 and σ = s:
    δ = Φ(a - b) - e^ε Φ(-a - b), a = 1/(2s), b = εs (Balle & Wang 2018, Thm. 8). With
    x1 = b - a, x2 = b + a and e^ε φ(x2) = φ(x1) (as ε = 2ab), δ = φ(x1)(R(x1) - R(x2)).
    If R(x2)/R(x1) > 1/2 that difference is taken as the integral of -R' over [x1, x2]
    (24-point Gauss-Legendre), so small δ and small ε lose no digits to cancellation.
    """
    a, b = 0.5 / s, epsilon * s
    x1, x2 = b - a, b + a
    log_r1 = _log_mills(x1)
    q = math.exp(_log_mills(x2) - log_r1)
    log_phi1 = -0.5 * x1 * x1 - _LOG_SQRT_2PI
    if q < 0.5:
        return log_phi1 + log_r1 + math.log1p(-q)
    nodes = _gauss_legendre()
    return log_phi1 + math.log(a * math.fsum(w * _one_minus_x_mills(b + a * t) for t, w in nodes))


@functools.lru_cache(maxsize=256)
def unit_sigma(epsilon: float, delta: float) -> float:
    """Smallest σ with δ(σ) <= delta at sensitivity 1 (bisection to 2^-46, rounded up)."""
    target = math.log(delta)
    lo = hi = 1.0
    while log_delta_unit(hi, epsilon) > target:
        lo, hi = hi, hi * 2.0
    while lo == hi or log_delta_unit(lo, epsilon) <= target:
        lo, hi = lo / 2.0, lo
    while hi - lo > hi * 2.0**-46:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if log_delta_unit(mid, epsilon) > target else (lo, mid)
    return hi
