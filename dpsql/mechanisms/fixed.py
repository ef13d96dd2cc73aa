"""Exact sums of clipped values: each value as an integer on a public grid, summed in integers.

Why (Casacuberta, Shoemate, Vadhan, Wagaman, CCS 2022, "Widespread Underestimation of Sensitivity
in Differentially Private Libraries and How to Fix It"): a floating-point SUM rounds every partial
sum, so adding one row can move the computed sum by far more than the row's value. With bounds
[1e9, 1e9 + 0.001] and 10,000 rows, Σ(v − c) computed as SUM(v) − c·n moved by 0.00195 where
its sensitivity is 0.0005. The rounding depends on the data and is not in the sensitivity.

How: in SQL each value x becomes the integer

    d = FLOOR(clamp(x·2^−g − o, A, B)),   A ≤ d ≤ B integers,

and the statistics are SUM(d), SUM(d·d) and COUNT(d) in integers: DuckDB sums BIGINT into
HUGEINT, Spark into DECIMAL(38, 0) (:mod:`dpsql.sql.target`), exactly. The clamp and the FLOOR
come last, so one row's d lies in [A, B] whatever rounding x·2^−g − o suffered: the integer range,
not the real one, gives the sensitivity, and it includes the (less than one) grid step by which
[A·2^g, B·2^g] may exceed the bounds. The clamp replaces the clip to [L, U]: a value outside
is clipped to the grid point of its bound, NULL stays NULL, NaN goes to B and ±inf to the ends
(as the clip does). g, o, A and B come from the bounds alone, never from the data:

* :meth:`FixedPoint.values` (SUM, MEAN, and the mean of ``ptr`` and ``smooth``): o = 0,
  2^g = 2^(e − 62) for max(|L|, |U|) < 2^e, A = ⌊L·2^−g⌋, B = ⌈U·2^−g⌉, so |d| ≤ 2^62 and no sum
  of up to 2^63 rows passes 2^125. Below 2^53 in magnitude x·2^−g keeps every bit of a double
  near the larger bound (the grid is 2^−62 of it); the sum is then centred in Python, exactly:
  Σ(d − (A + B)/2) has per-row range ±(B − A)/2, i.e. ±((U − L)/2 plus at most one step).
  An integer column with whole bounds needs none of it: its clipped values are the integers
  (g = 0, A = L, B = U, :attr:`FixedPoint.integer`), exact as before.
* :meth:`FixedPoint.centred` (VAR, STDDEV): o = c·2^−g rounded, c = (L + U)/2, 2^g = 2^(e − 31) for
  r = (U − L)/2 < 2^e, A = −R, B = R with R = ⌈r·2^−g⌉ ≤ 2^31: d·d < 2^63 in BIGINT, and Σd²
  over 2^63 rows stays below 2^125. The grid is 2^−30 of r or finer. (For bounds whose centre
  is more than 2^990 times their half-width, g is raised until c·2^−g is a finite double.)

The exact statistic then reaches the release as integers (:mod:`dpsql.privacy.grid`): the noise
is added on the release grid to the exact value, never to a double near it. Integer columns read
through the grid lose nothing either: (x − c)·2^−g is exact for integers below 2^52 and bounds of
that size.
"""

from __future__ import annotations

import math
import typing as t
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

#: Bits of the grid of plain sums: |d| ≤ 2^62.
SUM_BITS = 62
#: Bits of the grid of sums of squares: |d| ≤ 2^31, so d·d < 2^63.
SQUARE_BITS = 31
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
    """Values as integers d in [low, high] on the grid 2^exponent (module docstring)."""

    exponent: int  # g
    low: int  # A
    high: int  # B
    offset: float = 0.0  # o (a double)
    #: the values are the clipped integers themselves (an integer column, whole bounds): no grid
    integer: bool = False

    @classmethod
    def values(cls, lower: float, upper: float, whole: bool) -> "FixedPoint":
        """The grid of a plain sum of values in [lower, upper] (``whole``: the clipped values are
        integers, summed as they are)."""
        if whole:
            return cls(0, int(lower), int(upper), integer=True)
        lo, hi = Fraction(lower), Fraction(upper)
        big = max(abs(lo), abs(hi))
        g = max(_exponent(big) - SUM_BITS, -_MAX_SCALE) if big else 0
        scale = Fraction(2) ** -g
        return cls(g, math.floor(lo * scale), math.ceil(hi * scale))

    @classmethod
    def centred(cls, lower: float, upper: float) -> "FixedPoint":
        """The grid of a sum of squares of the values in [lower, upper] less their centre."""
        lo, hi = Fraction(lower), Fraction(upper)
        r, c = (hi - lo) / 2, (hi + lo) / 2
        g = max(_exponent(r) - SQUARE_BITS, -_MAX_SCALE)
        if c:
            g = max(g, _exponent(c) - 1020)  # c·2^−g below 2^1020
        scale = Fraction(2) ** -g
        radius = math.ceil(r * scale)
        return cls(g, -radius, radius, offset=float(c * scale))

    @property
    def unit(self) -> Fraction:
        """2^g: the value of one unit of d."""
        return Fraction(2) ** self.exponent

    @property
    def centre(self) -> Fraction:
        """(A + B)/2 in value: the centre of the range of d (for a mean)."""
        return Fraction(self.low + self.high, 2) * self.unit

    @property
    def width(self) -> float:
        """(B − A)·2^g rounded up: the width of the values' range, U − L plus at most a step."""
        return up((self.high - self.low) * self.unit)

    def mean(self, n: int, total: int) -> Fraction:
        """The exact mean of n integers summing to ``total``, as a value in [A·2^g, B·2^g] (kept
        there; the centre when n = 0)."""
        if n <= 0:
            return self.centre
        return min(max(Fraction(total, n), Fraction(self.low)), Fraction(self.high)) * self.unit

    def sql(self, x: str) -> str:
        """d of the value ``x`` (SQL text of a number): ``CAST(FLOOR(clamp(x·2^−g − o)) AS BIGINT)``."""
        assert not self.integer
        t_ = f"({x}) * {double_literal(math.ldexp(1.0, -self.exponent))}"
        if self.offset:
            sign = "-" if self.offset > 0 else "+"
            t_ += f" {sign} {double_literal(abs(self.offset))}"
        lo, hi = double_literal(float(self.low)), double_literal(float(self.high))
        return f"CAST(FLOOR(CASE WHEN {t_} < {lo} THEN {lo} WHEN {t_} > {hi} THEN {hi} ELSE {t_} END) AS BIGINT)"

    def describe(self) -> str:
        """For EXPLAIN: the grid and the integer range."""
        if self.integer:
            return f"exact integers in [{self.low}, {self.high}]"
        return f"fixed point: integers in [{self.low}, {self.high}] × 2^{self.exponent}"


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
