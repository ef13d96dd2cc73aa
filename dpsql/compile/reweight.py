"""Rule: re-weighting, a GROUP BY's id unit bounded without a sort (:mod:`dpsql.sql.reweight`
states the bounds and their proof).

:func:`reweight` is the entry point :func:`dpsql.compile.preaggregate.preaggregate` hands a
re-weighted :class:`~dpsql.compile.plan.PreAggregation` to: a SELECT of the rows (with the unit
``__u`` and the group keys) becomes ``__src`` as one row per (unit, group) kept, holding every
aggregate's partials weighted by min(1, k / n_u) in whole rows. Five steps, hash aggregations,
projections and windows over the (unit, group) partials (no sort of a unit's rows):

1. ``__per``: GROUP BY unit and keys, the rows c_ug (``__c``) and every partial;
2. n_u (``__nu``) = ``SUM(__c) OVER (PARTITION BY __u)``, over the (unit, group) rows only
   (the unit's total rows joined back from a GROUP BY of the unit measured no faster,
   docs/benchmarks.md);
3. the unit's k rows' worth apportioned to its groups (``__cw``, :func:`dpsql.sql.reweight.kept_rows`:
   a window over the unit's (unit, group) partials ordered by remainder, not over its rows);
4. every partial weighted as its rows are (:func:`dpsql.sql.reweight.weighted`);
5. the (unit, group) rows with ``__cw >= 1`` kept, scaled sums bounded by their weighted count.

The statistics are then the sums of the partials (:func:`dpsql.sql.perunit.sums`), as for
pre-aggregation. Both engines write it alike (no QUALIFY). Fixtures: ``fixtures/compile/reweight.sql``.
"""

from __future__ import annotations

from sqlglot import exp

from dpsql.compile.nodes import alias, col, number, select, star, subquery
from dpsql.compile.plan import PreAggregation
from dpsql.sql import build, perunit
from dpsql.sql import reweight as rw

#: the aliases of the steps
_TOTALS, _SPLIT, _KEPT, _WEIGHTED = "__units", "__split", "__kept", "__weighted"


def reweight(rows: exp.Select, pre: PreAggregation) -> exp.Select:
    """``__src`` re-weighted: the keys and each aggregate's weighted partials per (unit, group).

    >>> agg = perunit.Aggregate(0, {"n": exp.Count(this=exp.Star())}, {"n": ("count", 0, 1)})
    >>> print(reweight(exp.select("__u", "__k0").from_("t"), PreAggregation((agg,), 5, keys=("__k0",), reweight=True)).sql("duckdb"))
    SELECT __k0, __p0_n FROM (SELECT __k0, __cw, CASE WHEN __nu <= 5 THEN __p0_n ELSE CAST(__p0_n \
// __c AS INT128) * __cw + CAST(__p0_n % __c AS INT128) * __cw // __c END AS __p0_n FROM \
(SELECT *, CASE WHEN __nu <= 5 THEN __c ELSE __f + CASE WHEN ROW_NUMBER() OVER (PARTITION BY \
__u ORDER BY __r DESC, __k0) <= 5 - SUM(__f) OVER (PARTITION BY __u) THEN 1 ELSE 0 END END AS \
__cw FROM (SELECT *, CAST(__c AS INT128) * 5 // __nu AS __f, CAST(__c AS INT128) * 5 % __nu AS \
__r FROM (SELECT *, SUM(__c) OVER (PARTITION BY __u) AS __nu FROM (SELECT __u, __k0, COUNT(*) \
AS __c, COUNT(*) AS __p0_n FROM (SELECT __u, __k0 FROM t) AS __rows_in GROUP BY __u, __k0) AS \
__per) AS __units) AS __split) AS __kept) AS __weighted WHERE __cw >= 1
    """
    k, keys = pre.cap, pre.keys
    inner: list[exp.Expression] = [col(build.UNIT), *(col(key) for key in keys), alias(exp.Count(this=exp.Star()), rw.ROWS)]
    middle: list[exp.Expression] = [*(col(key) for key in keys), col(rw.KEPT)]
    outer: list[exp.Expression] = [col(key) for key in keys]
    for agg in pre.aggregates:
        n = col(perunit.partial(agg.index, "n")) if "n" in agg.stats else None
        for stat, expr in agg.stats.items():
            name = perunit.partial(agg.index, stat)
            inner.append(alias(expr.copy(), name))
            middle.append(alias(rw.weighted(col(name), k), name))
            kept = rw.bounded(agg.kinds[stat], col(name), n)
            outer.append(kept if isinstance(kept, exp.Column) else alias(kept, name))
    if len(outer) == len(keys):
        outer.append(alias(exp.Boolean(this=True), build.ROW))
    per = select(inner, subquery(rows, build.UNTRUNCATED), group=(build.UNIT, *keys))
    total = exp.Window(this=exp.Sum(this=col(rw.ROWS)), partition_by=[col(build.UNIT)])
    units = select([star(), alias(total, rw.UNIT_ROWS)], subquery(per, perunit.PER_UNIT))
    floor, remainder = rw.floor_and_remainder(k)
    split = select([star(), alias(floor, rw.FLOOR), alias(remainder, rw.REMAINDER)], subquery(units, _TOTALS))
    apportioned = select([star(), alias(rw.kept_rows(k, keys), rw.KEPT)], subquery(split, _SPLIT))
    weighted = select(middle, subquery(apportioned, _KEPT))
    return select(outer, subquery(weighted, _WEIGHTED), where=[exp.GTE(this=col(rw.KEPT), expression=number(1))])
