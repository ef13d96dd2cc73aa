"""Rule: the shared order-statistics histogram ``__hist`` and the statistics read from it.

A mechanism of order statistics (:meth:`dpsql.mechanisms.base.Prepared.order_values`)
aggregates the rows into a histogram per group and bucket anyway. When every statistic is
``COUNT(*)`` or ``COUNT(v)`` of that aggregate's value ``v`` (``dpsql._plan.rewrite``),
the same histogram with the rows whose value is NULL in a bucket of their own holds them all
as sums, and the statistics are one aggregate of the rows, not two: ``COUNT(*)`` is the sum of
every bucket's count ``__c``, ``COUNT(v)`` that of the non-NULL buckets (:func:`counted`).

Buckets: the value itself for whole numbers in a range of at most ``build.BUCKETS``
(:attr:`dpsql._sql.build.Values.one_per_bucket`), else ⌊(x − L)·BUCKETS/(U − L)⌋ (U in a
bucket of its own); per bucket the count and the least and greatest value. Fixtures:
``fixtures/compile/histogram.sql``.
"""

from __future__ import annotations

from sqlglot import exp

from dpsql._compile.nodes import alias, col, number, select
from dpsql._sql import build

_BIGINT = exp.DataType(this=exp.DataType.Type.BIGINT)
_DOUBLE = exp.DataType(this=exp.DataType.Type.DOUBLE)


def _double(x: float) -> exp.Cast:
    return exp.Cast(this=number(repr(float(x))), to=_DOUBLE.copy())


def bucket(values: build.Values, buckets: int = build.BUCKETS) -> exp.Expression:
    """⌊(x − L)·buckets/(U − L)⌋ as a BIGINT: 0 .. buckets − 1, and U in a bucket of its own.

    >>> bucket(build.Values("__src", (), "__v0", 0.0, 8.0), 4).sql("duckdb")
    'CAST(FLOOR((__v0 - CAST(0.0 AS DOUBLE)) * CAST(0.5 AS DOUBLE)) AS BIGINT)'
    """
    scale = buckets / (values.upper - values.lower)
    shifted = exp.Paren(this=exp.Sub(this=col(values.value), expression=_double(values.lower)))
    return exp.Cast(this=exp.Floor(this=exp.Mul(this=shifted, expression=_double(scale))), to=_BIGINT.copy())


def histogram(values: build.Values) -> exp.Select:
    """The histogram of ``values`` per group, NULL values counted in a bucket NULL.

    >>> histogram(build.Values("__src", ("__k0",), "__v0", 0, 9, True)).sql("duckdb")
    'SELECT __k0, __v0 AS __b, COUNT(*) AS __c, __v0 AS __lo, __v0 AS __hi FROM __src GROUP BY ALL'
    """
    v = col(values.value)
    if values.one_per_bucket:
        ends = [alias(v.copy(), "__lo"), alias(v.copy(), "__hi")]
        b: exp.Expression = v
    else:
        ends = [alias(exp.Min(this=v.copy()), "__lo"), alias(exp.Max(this=v.copy()), "__hi")]
        b = bucket(values)
    projections = [*(col(k) for k in values.keys), alias(b, "__b"),
                   alias(exp.Count(this=exp.Star()), "__c"), *ends]
    out = select(projections, exp.Table(this=exp.to_identifier(values.source)))
    out.set("group", exp.Group(all=True))
    return out


def counted(count: exp.Expression) -> exp.Expression:
    """``COUNT(*)`` or ``COUNT(v)`` of the rows from the histogram: the sum of the counts of all
    buckets, or of the non-NULL ones (0 for none, and a BIGINT, as COUNT).

    >>> counted(exp.Count(this=exp.column("__v0"))).sql("duckdb")
    'CAST(COALESCE(SUM(__c) FILTER(WHERE NOT __b IS NULL), 0) AS BIGINT)'
    """
    assert isinstance(count, exp.Count)
    total: exp.Expression = exp.Sum(this=col("__c"))
    if not isinstance(count.this, exp.Star):
        known = exp.Not(this=exp.Is(this=col("__b"), expression=exp.Null()))
        total = exp.Filter(this=total, expression=exp.Where(this=known))
    return exp.Cast(this=exp.Coalesce(this=total, expressions=[number(0)]), to=_BIGINT.copy())
