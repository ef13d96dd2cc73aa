"""Exact statistics released on the grid 2^k: no floating-point rounding before the noise.

A float release (:meth:`dpsql._privacy.noise.NoiseSource.laplace`, ``gaussian``) rounds its input to
the nearest multiple of 2^k, k = :func:`dpsql._privacy.noise.grid_exponent` of the noise scale, and
adds Z·2^k, Z discrete Laplace (or discrete Gaussian) of scale ``scale/2^k`` on the integers. Its
input is a double, so an exact statistic that is not one (a sum of 2^60-sized integers, a mean as
a fraction) would first be rounded to a double: a rounding that depends on the data and is not in
the sensitivity (Casacuberta, Shoemate, Vadhan, Wagaman, CCS 2022).

Here the exact statistic is given as integers ``units`` on a grid 2^e (value = units·2^e exactly,
or a :class:`~fractions.Fraction`): the grid index round(value/2^k) (ties to even) is computed in
integers, the noise is drawn as the integer Z of the same law (``laplace_int`` / ``gaussian_int``
of scale ``scale/2^k``, :func:`grid_noise`), and only the noisy index is turned into a float:
post-processing. The law is the float release's, but of the exact value rather than of a double
near it, so the rounding slack 2^k the calibrations add (docs/noise.md, "The grid rule") is the
only one there is.
"""

from __future__ import annotations

import math
import typing as t
from fractions import Fraction

import numpy as np

from dpsql._privacy.noise import grid_exponent

if t.TYPE_CHECKING:
    from dpsql._privacy.noise import NoiseSource

#: int64 columns are shifted and added in numpy while every value stays below this magnitude.
_SAFE = 2**62


def round_shift(v: int, shift: int) -> int:
    """round(v·2^shift) for an integer v, ties to even, exactly."""
    if shift >= 0:
        return v << shift
    q = -shift
    low = v >> q  # floor
    rest = v - (low << q)
    half = 1 << (q - 1)
    return low + (rest > half or (rest == half and low & 1))


def shifted(units: np.ndarray, shift: int) -> np.ndarray:
    """:func:`round_shift` of every integer of ``units`` (int64, or an object array of Python
    integers): int64 where every result provably fits, else an object array."""
    if units.dtype != np.int64:
        return np.fromiter((round_shift(int(v), shift) for v in units), dtype=object, count=len(units))
    top = max(-int(units.min()), int(units.max())) if units.size else 0
    if shift >= 0:
        if top < _SAFE >> min(shift, 62):
            return units << shift
        return shifted(units.astype(object), shift)
    q = -shift
    if q >= 64:  # |v| < 2^63: |v·2^shift| < 1/2
        return np.zeros(units.size, dtype=np.int64)
    if q == 63:
        return shifted(units.astype(object), shift)
    low = units >> q
    rest = units & np.int64((1 << q) - 1)
    half = np.int64(1 << (q - 1))
    return low + ((rest > half) | ((rest == half) & ((low & 1) == 1)))


def grid_noise(noise: "NoiseSource", kind: str, scale: float, k: int, size: int) -> np.ndarray:
    """``size`` independent noise values on the grid 2^k, in grid units: the integer Z of the
    float release of ``kind`` (``laplace`` or ``gaussian``) with this scale on that grid."""
    unit = math.ldexp(scale, -k)  # exact: a power of two apart
    name = "laplace_int" if kind == "laplace" else "gaussian_int"
    drawn = noise.add_many(name, np.zeros(size, dtype=np.int64), unit)
    if isinstance(drawn, np.ndarray) and drawn.dtype == np.int64:
        return drawn
    return np.fromiter((int(z) for z in drawn), dtype=object, count=size)


def _added(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype == np.int64 and b.dtype == np.int64 and a.size and \
            max(-int(a.min()), int(a.max())) < _SAFE and max(-int(b.min()), int(b.max())) < _SAFE:
        return a + b
    return np.fromiter((int(x) + int(y) for x, y in zip(a, b)), dtype=object, count=len(a))


def to_float(index: int, k: int) -> float:
    """index·2^k as the nearest float (±inf past the float range): post-processing only."""
    try:
        return float(Fraction(index) * Fraction(2) ** k) if k < -1000 else math.ldexp(float(index), k)
    except OverflowError:
        return math.inf if index > 0 else -math.inf


def on_grid(indices: np.ndarray, k: int) -> np.ndarray:
    """Each grid index times 2^k, as float64."""
    if indices.dtype == np.int64 and k >= -1000:
        with np.errstate(over="ignore"):
            return np.ldexp(indices.astype(np.float64), k)
    return np.fromiter((to_float(int(i), k) for i in indices), dtype=np.float64, count=len(indices))


def release_units(noise: "NoiseSource", kind: str, units: np.ndarray, exponent: int, scale: float,
                  k: int | None = None) -> np.ndarray:
    """Each exact value units·2^exponent plus noise of ``kind`` and ``scale`` on the grid 2^k
    (k = grid_exponent(scale) unless given), as float64: the index round(value/2^k) in integers,
    the integer noise added to it, and the sum times 2^k."""
    k = grid_exponent(scale) if k is None else int(k)
    index = shifted(units, exponent - k)
    return on_grid(_added(index, grid_noise(noise, kind, scale, k, len(units))), k)


def release_value(noise: "NoiseSource", kind: str, value: Fraction, scale: float, k: int | None = None) -> float:
    """One exact rational ``value`` plus noise of ``kind`` and ``scale`` on the grid 2^k (k =
    grid_exponent(scale) unless given): :func:`release_units` for a fraction."""
    k = grid_exponent(scale) if k is None else int(k)
    index = round(Fraction(value) / Fraction(2) ** k)  # ties to even, exactly
    return to_float(index + int(grid_noise(noise, kind, scale, k, 1)[0]), k)
