"""Rule: re-weighting, a GROUP BY's id unit bounded without a sort (:mod:`dpsql.sql.reweight`
states the bounds and their proof).

:func:`reweight` is the entry point :func:`dpsql.compile.preaggregate.preaggregate` hands a
re-weighted :class:`~dpsql.compile.plan.PreAggregation` to: a SELECT of the rows (with the unit
``__u`` and the group keys) becomes ``__src`` as one row per (unit, group) kept, holding every
aggregate's partials weighted by min(1, k / n_u) and rounded toward zero. Four steps, each a
hash aggregation or a projection but for one window without ORDER BY (a partition, no sort of
a unit's rows):

1. ``__per``: GROUP BY unit and keys, the rows c_ug (``__c``) and every partial;
2. n_u (``__nu``) = ``SUM(__c) OVER (PARTITION BY __u)``, over the (unit, group) rows only
   (the unit's total rows joined back from a GROUP BY of the unit measured no faster,
   docs/benchmarks.md);
3. every partial weighted (:func:`dpsql.sql.reweight.weighted`), the rows as ``__cw``;
4. the (unit, group) rows with ``__cw >= 1`` kept, scaled sums bounded by their weighted count.

The statistics are then the sums of the partials (:func:`dpsql.sql.perunit.sums`), as for
pre-aggregation. Both engines write it alike (no QUALIFY). Fixtures: ``fixtures/compile/reweight.sql``.
"""

from __future__ import annotations

from sqlglot import exp

from dpsql.compile.nodes import alias, col, number, select, star, subquery
from dpsql.compile.plan import PreAggregation
from dpsql.sql import build, perunit
from dpsql.sql import reweight as rw

#: the aliases of steps 2 and 3
_TOTALS, _WEIGHTED = "__units", "__weighted"


def reweight(rows: exp.Select, pre: PreAggregation) -> exp.Select:
    """``__src`` re-weighted: the keys and each aggregate's weighted partials per (unit, group).

    >>> agg = perunit.Aggregate(0, {"n": exp.Count(this=exp.Star())}, {"n": ("count", 0, 1)})
    >>> print(reweight(exp.select("__u", "__k0").from_("t"), PreAggregation((agg,), 5, keys=("__k0",), reweight=True)).sql("duckdb"))
    SELECT __k0, __p0_n FROM (SELECT __k0, CASE WHEN __nu <= 5 THEN __c ELSE CAST(__c // __nu AS INT128) * 5 \
+ CAST(__c % __nu AS INT128) * 5 // __nu END AS __cw, CASE WHEN __nu <= 5 THEN __p0_n ELSE \
CAST(__p0_n // __nu AS INT128) * 5 + CAST(__p0_n % __nu AS INT128) * 5 // __nu END AS __p0_n \
FROM (SELECT *, SUM(__c) OVER (PARTITION BY __u) AS __nu FROM (SELECT __u, __k0, COUNT(*) AS __c, \
COUNT(*) AS __p0_n FROM (SELECT __u, __k0 FROM t) AS __rows_in GROUP BY __u, __k0) AS __per) AS __units) \
AS __weighted WHERE __cw >= 1
    """
    k, keys = pre.cap, pre.keys
    inner: list[exp.Expression] = [col(build.UNIT), *(col(key) for key in keys), alias(exp.Count(this=exp.Star()), rw.ROWS)]
    nu = col(rw.UNIT_ROWS)
    middle: list[exp.Expression] = [*(col(key) for key in keys), alias(rw.weighted(col(rw.ROWS), nu, k), rw.KEPT)]
    outer: list[exp.Expression] = [col(key) for key in keys]
    for agg in pre.aggregates:
        n = col(perunit.partial(agg.index, "n")) if "n" in agg.stats else None
        for stat, expr in agg.stats.items():
            name = perunit.partial(agg.index, stat)
            inner.append(alias(expr.copy(), name))
            middle.append(alias(rw.weighted(col(name), nu, k), name))
            kept = rw.bounded(agg.kinds[stat], col(name), n)
            outer.append(kept if isinstance(kept, exp.Column) else alias(kept, name))
    if len(outer) == len(keys):
        outer.append(alias(exp.Boolean(this=True), build.ROW))
    per = select(inner, subquery(rows, build.UNTRUNCATED), group=(build.UNIT, *keys))
    total = exp.Window(this=exp.Sum(this=col(rw.ROWS)), partition_by=[col(build.UNIT)])
    units = select([star(), alias(total, rw.UNIT_ROWS)], subquery(per, perunit.PER_UNIT))
    weighted = select(middle, subquery(units, _TOTALS))
    return select(outer, subquery(weighted, _WEIGHTED), where=[exp.GTE(this=col(rw.KEPT), expression=number(1))])
