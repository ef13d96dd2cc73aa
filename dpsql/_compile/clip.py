"""Rule: a value column of ``__src``, its argument clipped to public bounds (or put on a
fixed-point grid), so that one row moves a sum by at most what the mechanism calibrated for.

``CASE WHEN x < L THEN L WHEN x > U THEN U ELSE x END``: NULL stays NULL (GREATEST/LEAST would
turn it into a bound), NaN clips to the upper bound (DuckDB and Spark order NaN above every
number), ±inf clip to the bounds. ``x`` is the argument itself when its type is numeric, else
``CAST``/``TRY_CAST(... AS DOUBLE)`` (:func:`operand`), so that no value can make the query fail
(a failure would reveal that such a value exists). A summed value (:mod:`dpsql.mechanisms.fixed`)
is instead its integer on a public grid, clamped to the integers' range after every
floating-point step (:func:`fixed_point`). Fixtures: ``fixtures/compile/clip.sql``.
"""

from __future__ import annotations

import math
import typing as t

from sqlglot import exp

from dpsql._compile.nodes import number
from dpsql.mechanisms.fixed import FixedPoint, double_literal

INTEGER_TYPES = frozenset({
    "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT",
    "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT",
})
FLOAT_TYPES = frozenset({"FLOAT", "DOUBLE", "REAL"})
_DOUBLE = exp.DataType(this=exp.DataType.Type.DOUBLE)

#: rounds a DOUBLE in BIGINT's range to the nearest integer, ties to even (per engine)
Integer = t.Callable[[exp.Expression], exp.Expression]


def operand(arg: exp.Expression, dtype: str | None = None) -> exp.Expression:
    """The argument as a number: as it is (an integer or float column), ``CAST(... AS
    DOUBLE)`` (a decimal), ``TRY_CAST(... AS DOUBLE)`` (any other type).

    >>> operand(exp.column("x"), "VARCHAR").sql("duckdb")
    'TRY_CAST(x AS DOUBLE)'
    >>> operand(exp.column("x"), "DECIMAL(9, 2)").sql("duckdb")
    'CAST(x AS DOUBLE)'
    """
    dtype = (dtype or "").upper()
    if dtype.startswith("DECIMAL") and dtype not in INTEGER_TYPES:
        return exp.Cast(this=arg, to=_DOUBLE.copy())
    if dtype not in INTEGER_TYPES and dtype not in FLOAT_TYPES:
        return exp.TryCast(this=arg, to=_DOUBLE.copy())
    return arg


def between(x: exp.Expression, lo: exp.Expression, hi: exp.Expression) -> exp.Case:
    """``CASE WHEN x < lo THEN lo WHEN x > hi THEN hi ELSE x END`` (``x`` copied twice)."""
    return exp.Case(ifs=[exp.If(this=exp.LT(this=x.copy(), expression=lo), true=lo.copy()),
                         exp.If(this=exp.GT(this=x.copy(), expression=hi), true=hi.copy())],
                    default=x)


def _same(x: exp.Expression) -> exp.Expression:
    return x


def clip(arg: exp.Expression, lower: float, upper: float, dtype: str | None = None,
         once: t.Callable[[exp.Expression], exp.Expression] = _same) -> exp.Case:
    """The argument clipped to [lower, upper]; integers keep integer arithmetic while no sum
    can overflow (2^63 rows of at most 2^62 each stay below HUGEINT's 2^127), else the bounds
    are DOUBLE literals. ``once``: the engine's node for an operand written three times
    (:meth:`dpsql._compile.compiler.Compiler.once`).

    >>> clip(exp.column("age"), 0, 100, "BIGINT").sql("duckdb")
    'CASE WHEN age < 0 THEN 0 WHEN age > 100 THEN 100 ELSE age END'
    >>> clip(exp.column("w"), 0, 1.5, "DOUBLE").sql("duckdb")
    'CASE WHEN w < 0.0 THEN 0.0 WHEN w > 1.5 THEN 1.5 ELSE w END'
    """
    dtype = (dtype or "").upper()
    integral = (float(lower).is_integer() and float(upper).is_integer()
                and max(abs(lower), abs(upper)) <= 2.0**62)
    x = once(operand(arg, dtype))
    if dtype in INTEGER_TYPES and integral:
        lo, hi = number(str(int(lower))), number(str(int(upper)))
    else:
        lo, hi = number(repr(float(lower))), number(repr(float(upper)))
    return between(x, lo, hi)


def fixed_point(x: exp.Expression, grid: FixedPoint, integer: Integer,
                once: t.Callable[[exp.Expression], exp.Expression] = _same) -> exp.Expression:
    """d of the value ``x`` on ``grid``: ``integer(clamp((x − a)·2^−g))`` (NaN → B, ±inf to
    the ends, NULL stays NULL); ``integer`` is the engine's rounding to BIGINT, ``once`` its
    node for the scaled value written three times.

    >>> g = FixedPoint.centred(0.0, 10.0)
    >>> fixed_point(exp.column("x"), g, lambda e: e).sql("duckdb")[:39]
    'CASE WHEN (x - 5.0e0) * 268435456.0e0 <'
    """
    assert not grid.integer
    if grid.origin:
        op = exp.Sub if grid.origin > 0 else exp.Add
        x = op(this=x, expression=number(double_literal(abs(grid.origin))))
    scaled = exp.Mul(this=exp.Paren(this=x), expression=number(double_literal(math.ldexp(1.0, -grid.exponent))))
    lo, hi = number(double_literal(float(grid.low))), number(double_literal(float(grid.high)))
    return integer(between(once(scaled), lo, hi))
