"""Rule: pre-aggregation, an id unit bounded by clipping its partial statistics, and the
``report_dropped`` counts (:mod:`dpsql._compile.perunit` states the bounds and their proof).

:func:`preaggregate` is the other entry point beside :func:`dpsql._compile.truncate.truncate`:
a SELECT of the rows (with the unit ``__u`` and the group keys; no row hash) becomes ``__src``
as one row per (unit, group) kept, holding every aggregate's partials clipped to the per-unit
bounds (:func:`dpsql._compile.perunit.clipped`). With g and keys, each unit keeps the g groups of
smallest ``HASH(unit, keys)``, the keys breaking ties: the groups truncation keeps. The
statistics are then the sums of the partials (:func:`dpsql._compile.perunit.sums`). One GROUP BY
of the unit and keys, hash aggregation: no sort of each unit's rows. The window is written
with QUALIFY; Spark rewrites that one node (:meth:`dpsql._compile.spark.SparkCompiler.preaggregated`).

:func:`dropped` is ``__cut``, the one row of counts ``report_dropped`` releases, over the rows
before any bound; :func:`report` joins it to every row of the final SELECT.
Fixtures: ``fixtures/compile/preaggregate.sql``.
"""

from __future__ import annotations

from sqlglot import exp

from dpsql._compile import perunit, reweight
from dpsql._compile.nodes import alias, col, fn, number, select, star, subquery, table
from dpsql._compile.plan import PreAggregation, Truncation
from dpsql._sql import build

#: the per-unit counts of :func:`dropped`: rows (the most in one group) and groups
_N, _G, _GROUPS = "__n", "__g", "__groups"


def _count() -> exp.Count:
    return exp.Count(this=exp.Star())


def _within(x: exp.Expression, k: int) -> exp.Between:
    return exp.Between(this=x, low=number(1), high=number(str(int(k))))


def preaggregate(rows: exp.Select, pre: PreAggregation) -> exp.Select:
    """``__src`` pre-aggregated: the keys and each aggregate's clipped partials per (unit, group).

    >>> agg = perunit.Aggregate(0, {"n": exp.Count(this=exp.Star())}, {"n": ("count", 0, 1)})
    >>> print(preaggregate(exp.select("__u").from_("t"), PreAggregation((agg,), 5)).sql("duckdb"))
    SELECT CASE WHEN __p0_n < 0 THEN 0 WHEN __p0_n > 5 THEN 5 ELSE __p0_n END AS __p0_n \
FROM (SELECT __u, COUNT(*) AS __p0_n FROM (SELECT __u FROM t) AS __rows_in GROUP BY __u) AS __per
    """
    if pre.reweight:  # weighted by the unit's rows instead of clipped (dpsql._compile.reweight)
        return reweight.reweight(rows, pre)
    inner: list[exp.Expression] = [col(build.UNIT), *(col(k) for k in pre.keys)]
    outer: list[exp.Expression] = [col(k) for k in pre.keys]
    for agg in pre.aggregates:
        n = col(perunit.partial(agg.index, "n")) if "n" in agg.stats else None
        for stat, expr in agg.stats.items():
            name = perunit.partial(agg.index, stat)
            inner.append(alias(expr.copy(), name))
            outer.append(alias(perunit.clipped(agg.kinds[stat], col(name), n, pre.cap), name))
    if not outer:
        outer.append(alias(exp.Boolean(this=True), build.ROW))
    per = select(inner, subquery(rows, build.UNTRUNCATED), group=(build.UNIT, *pre.keys))
    out = select(outer, subquery(per, perunit.PER_UNIT))
    if pre.max_groups is not None and pre.keys:
        order = [fn("HASH", col(build.UNIT), *(col(k) for k in pre.keys)), *(col(k) for k in pre.keys)]
        rank = exp.Window(this=exp.RowNumber(), partition_by=[col(build.UNIT)],
                          order=exp.Order(expressions=[exp.Ordered(this=o) for o in order]))
        out.set("qualify", exp.Qualify(this=_within(rank, pre.max_groups)))
    return out


def dropped(rows: exp.Select, cut: Truncation) -> exp.Select:
    """``__cut``: the count of units (``__units_n``) and of units whose contribution ``cut``
    cuts (``__cut_n``: more than k rows, or, with g and keys, more than g groups or more than r
    rows in one), over ``rows`` (before any bound: the unit and the keys). Each unit moves
    each count by at most 1.

    >>> print(dropped(exp.select("__u").from_("t"), Truncation(5)).sql("duckdb"))
    SELECT COUNT(*) AS __units_n, COUNT(*) FILTER(WHERE __n > 5) AS __cut_n \
FROM (SELECT COUNT(*) AS __n FROM (SELECT __u FROM t) AS __rows_in GROUP BY __u) AS __per
    """
    body = subquery(rows, build.UNTRUNCATED)
    over: exp.Expression
    if cut.by_groups:
        assert cut.max_groups is not None
        groups = select([col(build.UNIT), alias(_count(), _N)], body, group=(build.UNIT, *cut.keys))
        per = select([alias(_count(), _G), alias(exp.Max(this=col(_N)), _N)], subquery(groups, _GROUPS),
                     group=(build.UNIT,))
        over = exp.Or(this=exp.GT(this=col(_G), expression=number(str(cut.max_groups))),
                      expression=exp.GT(this=col(_N), expression=number(str(cut.max_rows_per_group or cut.max_rows))))
    else:
        per = select([alias(_count(), _N)], body, group=(build.UNIT,))
        over = exp.GT(this=col(_N), expression=number(str(cut.max_rows)))
    counted = exp.Filter(this=_count(), expression=exp.Where(this=over))
    return select([alias(_count(), perunit.UNITS_N), alias(counted, perunit.CUT_N)], subquery(per, perunit.PER_UNIT))


def report(top: exp.Select) -> exp.Select:
    """The final SELECT with ``__cut``'s counts on every row (``*`` read as ``__stats.*``).

    >>> report(exp.select("*").from_("__stats")).sql("duckdb")
    'SELECT __stats.*, __cut.__units_n, __cut.__cut_n FROM __stats CROSS JOIN __cut'
    """
    projections = [star(build.STATS) if isinstance(e, exp.Star) else e for e in top.expressions]
    top.set("expressions", [*projections, col(perunit.UNITS_N, perunit.CUT), col(perunit.CUT_N, perunit.CUT)])
    top.append("joins", exp.Join(this=table(perunit.CUT), kind="CROSS"))
    return top
