"""Exact sums of clipped values: each value as an integer on a public grid, summed in integers.

Why (Casacuberta, Shoemate, Vadhan, Wagaman, CCS 2022, "Widespread Underestimation of Sensitivity
in Differentially Private Libraries and How to Fix It"): a floating-point SUM rounds every partial
sum, so adding one row can move the computed sum by far more than the row's value. With bounds
[1e9, 1e9 + 0.001] and 10,000 rows, Σ(v − c) computed as SUM(v) − c·n moved by 0.00195 where
its sensitivity is 0.0005. The rounding depends on the data and is not in the sensitivity.

How: in SQL each value x becomes the integer

    d = round(clamp((x − a)·2^−g, A, B)),   A ≤ d ≤ B integers,  |A|, |B| ≤ 2^31,

and the statistics are COUNT(d), SUM(d) and SUM(d·d), exact: DuckDB sums BIGINT into HUGEINT,
Spark into DECIMAL(38, 0) (:mod:`dpsql._compile.target`); d·d < 2^63 is a BIGINT and no sum of up to
2^63 rows passes 2^125. The clamp and the rounding to an integer come last, so one row's d lies
in [A, B] whatever rounding (x − a)·2^−g suffered: the integers' range, not the real one, gives the
sensitivity, and it includes the (less than one) step by which it may exceed the bounds. The
clamp is the clip: a value outside [L, U] goes to the end of the range, NULL stays NULL, NaN goes
to B and ±inf to the ends, as the clip does. d stands for the value a + d·2^g. g, a, A and B
come from the bounds alone, never from the data. The rounding is to the nearest integer, ties to
even: DuckDB's CAST of a DOUBLE to BIGINT, Spark's ``CAST(RINT(...) AS BIGINT)`` (its CAST
truncates; ``integer`` of :mod:`dpsql._compile.compiler`), so both engines compute the same d.

* :meth:`FixedPoint.values` (SUM): a = 0, 2^g = 2^(e − 31) for max(|L|, |U|) < 2^e,
  [A, B] = the nearest steps of L and U. The step is 2^−30 of
  max(|L|, |U|) or finer, and SUM's noise is at least max(|L|, |U|)/ε: the rounding of a row
  is at most 2^−31 of the noise scale times ε.
* :meth:`FixedPoint.centred` (VAR, STDDEV, and a mean, of ``laplace``, ``gaussian``, ``ptr`` or
  ``smooth``, where :meth:`FixedPoint.of_mean` does not give it SUM's grid):
  a = c = (L + U)/2 to the nearest double (x − c is exact when x is within a factor of 2 of
  c, the case of bounds far from 0), 2^g = 2^(e − 31) for r = (U − L)/2 < 2^e,
  [A, B] = [−R, R] with R the larger |step| of L and U (R
  ≤ 2^31; the grid is made coarser in the rare case where the rounding of c would push it past).
  The step is 2^−30 of r or finer. MEAN's centred sum is Σd; VAR's second sum is Σd².
* :meth:`FixedPoint.of_mean` (MEAN): SUM's grid where it is at most one step coarser than the
  centred grid (bounds near 0 relative to their width, e.g. [0, U]), so that ``SUM(x)`` and
  ``AVG(x)`` of one query read one integer column and one sum; MEAN's centred sum is then
  2Σd − (A + B)·n on the grid 2^(g − 1), formed in Python integers, each row's term in
  [−(B − A), B − A]: the same range r plus at most a step.
* :attr:`FixedPoint.integer`: an integer column with whole bounds (SUM, MEAN) needs none of it;
  its clipped values are the integers (g = 0, [A, B] = [L, U]), exact as before, and
  MEAN's centred sum is formed in Python integers as 2Σd − (A + B)·n.

Why 31 bits: DuckDB adds BIGINT values below 2^31 into its HUGEINT sum about a third faster than
values near 2^62 (measured; docs/noise.md), and d·d must fit a BIGINT. Integer columns read
through a grid lose nothing either: for integers and bounds below 2^52, (x − c)·2^−g is exact.

The exact statistic then reaches the release as integers (:mod:`dpsql._privacy.grid`): the noise
is added on the release grid to the exact value, never to a double near it.
"""

from __future__ import annotations

import functools
import math
import typing as t
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

#: Bits of the grid: |d| ≤ 2^31, so d·d < 2^63.
BITS = 31
#: The largest binary exponent of the grid's scale 2^−g (a finite double).
_MAX_SCALE = 1023


def _exponent(x: Fraction) -> int:
    """The least e with |x| < 2^e (x ≠ 0)."""
    x = abs(x)
    e = x.numerator.bit_length() - x.denominator.bit_length()  # 2^(e−1) < x < 2^(e+1)
    return e + 1 if x >= Fraction(2) ** e else e


def double_literal(x: float) -> str:
    """A finite double as a SQL literal read as that DOUBLE by DuckDB and Spark: its shortest
    decimal with an exponent (``100.0e0``), never a DECIMAL literal."""
    text = repr(float(x))
    return text if "e" in text else text + "e0"


@dataclass(frozen=True)
class FixedPoint:
    """Values as integers d in [low, high] on the grid 2^exponent (module docstring): d stands
    for ``centre + d·2^exponent``."""

    exponent: int  # g
    low: int  # A
    high: int  # B
    origin: float = 0.0  # a (a double)
    #: the values are the clipped integers themselves (an integer column, whole bounds): no grid
    integer: bool = False

    @classmethod
    @functools.lru_cache(maxsize=1024)  # a pure function of the bounds; planned on every query
    def values(cls, lower: float, upper: float, whole: bool) -> "FixedPoint":
        """The grid of a plain sum of values in [lower, upper] (``whole``: the clipped values are
        integers, summed as they are)."""
        if whole:
            return cls(0, int(lower), int(upper), integer=True)
        lo, hi = Fraction(lower), Fraction(upper)
        g = max(_exponent(max(abs(lo), abs(hi))) - BITS, -_MAX_SCALE)
        scale = Fraction(2) ** -g
        return cls(g, round(lo * scale), round(hi * scale))

    @classmethod
    @functools.lru_cache(maxsize=1024)  # a pure function of the bounds; planned on every query
    def centred(cls, lower: float, upper: float) -> "FixedPoint":
        """The grid of the values in [lower, upper] less their centre (a mean, a variance)."""
        lo, hi = Fraction(lower), Fraction(upper)
        origin = float((hi + lo) / 2)
        a = Fraction(origin)
        g = max(_exponent((hi - lo) / 2) - BITS, -_MAX_SCALE)
        while True:
            scale = Fraction(2) ** -g
            radius = max(abs(round((lo - a) * scale)), abs(round((hi - a) * scale)))
            if radius <= 2**BITS:
                return cls(g, -radius, radius, origin=origin)
            g += 1  # c rounded to a double far from (L + U)/2: a coarser grid

    @classmethod
    @functools.lru_cache(maxsize=1024)  # a pure function of the bounds; planned on every query
    def of_mean(cls, lower: float, upper: float, whole: bool) -> "FixedPoint":
        """The grid of a mean's values: a SUM's own (:meth:`values`: so that a SUM and a MEAN
        of one column read one integer column) where it is at most one step coarser than the
        centred grid, else :meth:`centred`. Both give the centred sum 2Σd − (A + B)·n the same
        range, r plus at most a step; the SUM's grid is refused only for bounds far from 0
        relative to their width (its step would be more than twice the centred one's).

        >>> FixedPoint.of_mean(0.0, 100.0, False) == FixedPoint.values(0.0, 100.0, False)
        True
        >>> FixedPoint.of_mean(1e9, 1e9 + 0.001, False).origin
        1000000000.0005
        """
        plain = cls.values(lower, upper, whole)
        if whole:
            return plain
        centred = cls.centred(lower, upper)
        return plain if plain.exponent <= centred.exponent + 1 else centred

    @property
    def unit(self) -> Fraction:
        """2^g: the value of one unit of d."""
        return Fraction(2) ** self.exponent

    @property
    def centre(self) -> Fraction:
        """The value d = 0 stands for: a (0 for a plain sum and for the integers themselves)."""
        return Fraction(self.origin)

    def value(self, d: Fraction | int) -> Fraction:
        """The value the integer (or mean of integers) ``d`` stands for."""
        return self.centre + d * self.unit

    @property
    def midpoint(self) -> Fraction:
        """The value of (A + B)/2: a mean's centre."""
        return self.value(Fraction(self.low + self.high, 2))

    @property
    def width(self) -> float:
        """(B − A)·2^g rounded up: the width of the values' range, U − L plus at most a step."""
        return up((self.high - self.low) * self.unit)

    def mean(self, n: int, total: int) -> Fraction:
        """The exact mean of n integers summing to ``total``, as a value (kept in the range;
        the midpoint when n = 0)."""
        if n <= 0:
            return self.midpoint
        return self.value(min(max(Fraction(total, n), Fraction(self.low)), Fraction(self.high)))

    def step(self, x: float) -> int:
        """d of the value ``x`` computed exactly (what :func:`dpsql._compile.clip.fixed_point` gives whenever its floating-point
        steps are exact, e.g. for integers; otherwise within one step of it)."""
        if self.integer:
            return min(max(round(x), self.low), self.high)
        return round(min(max((Fraction(x) - Fraction(self.origin)) / self.unit, Fraction(self.low)), Fraction(self.high)))

    def describe(self) -> str:
        """For EXPLAIN: the grid and the integer range."""
        if self.integer:
            return f"exact integers in [{self.low}, {self.high}]"
        return f"fixed point: integers in [{self.low}, {self.high}] on the grid 2^{self.exponent}"


def up(x: Fraction) -> float:
    """The least double at least ``x``: a sensitivity is never rounded down."""
    out = float(x)
    return math.nextafter(out, math.inf) if Fraction(out) < x else out


def whole(value: t.Any) -> int:
    """An exact integer statistic as a Python int: NULL (no rows) is 0; a float (from a row form
    that was not the statistics query's) is rounded, NaN read as 0 and ±inf as ±2^1024 (clamped
    by the caller)."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return 0
        if math.isinf(value):
            return 2**1024 if value > 0 else -(2**1024)
        return round(value)
    return round(Fraction(value))  # Decimal (Spark's DECIMAL(38, 0)), numpy integers


# -- exact integer columns (the statistics of every group) ----------------------------------------

#: int64 arithmetic on columns while every operand stays below this magnitude.
_SAFE = 2**61


def _top(col: np.ndarray) -> int:
    return max(-int(col.min()), int(col.max())) if col.size else 0


def integers(col: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """An exact integer statistic of every group (int64, float64 or Python values), each kept in
    [lo, hi] (the range its bounds allow over 2^63 rows; NULL is 0, see :func:`whole`): int64
    when every value fits, else an object array of Python integers. Nothing here can fail."""
    if col.dtype == np.int64:
        if int(col.min(initial=0)) >= lo and int(col.max(initial=0)) <= hi:
            return col
        return np.clip(col, max(lo, -(2**63)), min(hi, 2**63 - 1))
    out = np.fromiter((min(max(whole(x), lo), hi) for x in col), dtype=object, count=len(col))
    if all(-(2**63) <= v < 2**63 for v in out):
        return out.astype(np.int64)
    return out


def linear(a: np.ndarray, x: int, b: np.ndarray, y: int) -> np.ndarray:
    """x·a + y·b for integer columns a, b and integers x, y, exactly (int64 while it fits)."""
    if a.dtype == np.int64 and b.dtype == np.int64 and abs(x) < _SAFE and abs(y) < _SAFE \
            and _top(a) * abs(x) < _SAFE and _top(b) * abs(y) < _SAFE:
        return a * x + b * y
    return np.fromiter((x * int(p) + y * int(q) for p, q in zip(a, b)), dtype=object, count=len(a))
