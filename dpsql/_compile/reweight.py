"""Rule: re-weighting, a GROUP BY's id unit bounded without a sort (:mod:`dpsql._sql.reweight`
states the bounds and their proof).

:func:`reweight` is the entry point :func:`dpsql._compile.preaggregate.preaggregate` hands a
re-weighted :class:`~dpsql._compile.plan.PreAggregation` to: a SELECT of the rows (with the unit
``__u`` and the group keys) becomes ``__src`` as one row per (unit, group) kept, holding every
aggregate's partials weighted by min(1, k / n_u) in whole rows. Hash aggregations and joins,
a window only over the partials of the units that need one (no sort of a unit's rows):

1. ``__per`` (a MATERIALIZED CTE): GROUP BY unit and keys, the rows c_ug (``__c``) and every
   partial;
2. ``__units`` (MATERIALIZED): each (unit, group) with n_u (``__nu``) and its unit's number of
   groups (``__ng``), from a GROUP BY of ``__per`` by the unit joined back (a window over the
   partials cost DuckDB a second scan and aggregation of the rows, its self-join rewrite, and
   a window operator besides);
3. the units in three branches (UNION ALL): at most k rows, the partials as they are
   (c' = c_ug), with no expression at all; over k rows in one group, c' = k (no window); over
   k rows in several groups, the k rows' worth apportioned by the window over the unit's
   partials ordered by remainder (:func:`dpsql._sql.reweight.apportioned`): together
   :func:`dpsql._sql.reweight.kept_rows`;
4. the partials of the units over k weighted as their rows are (:func:`dpsql._sql.reweight.ratio`),
   a (unit, group) kept while c' >= 1;
5. their scaled sums bounded by their weighted count (a unit at most k keeps its sums of
   clipped values, within that range already).

The statistics are then the sums of the partials (:func:`dpsql._compile.perunit.sums`), as for
pre-aggregation. The two CTEs are written in the rule's SELECT and hoisted into the
statement's WITH by the compiler (:meth:`dpsql._compile.compiler.Compiler.hoisted`); Spark
writes them without MATERIALIZED. Fixtures: ``fixtures/compile/reweight.sql``.
"""

from __future__ import annotations

from sqlglot import exp

from dpsql._compile import perunit
from dpsql._compile.nodes import alias, col, name, number, select, star, subquery, table
from dpsql._compile.plan import PreAggregation
from dpsql._sql import build
from dpsql._sql import reweight as rw

#: the (unit, group) partials and the units' totals, each written once and read twice
#: (materialized: DuckDB would otherwise run the rows' scan, joins and aggregation again for
#: the second reader, as it does for a window over a GROUP BY it turns into a self-join)
_UNITS = "__units"
#: the aliases of the steps, and the count of a unit's groups
_TOTALS, _SPLIT, _KEPT, _WEIGHTED, _BRANCHES, _GROUPS = "__n", "__split", "__kept", "__weighted", "__branches", "__ng"


def _cte(alias_: str, body: exp.Expression) -> exp.CTE:
    return exp.CTE(this=body, alias=exp.TableAlias(this=name(alias_)), materialized=True)


def _union(left: exp.Select, right: exp.Select) -> exp.Union:
    return exp.Union(this=left, expression=right, distinct=False)


def reweight(rows: exp.Select, pre: PreAggregation) -> exp.Select:
    """``__src`` re-weighted: the keys and each aggregate's weighted partials per (unit, group).

    The units are split so that only those that need it pay for it: a unit of at most k rows
    keeps its partials as they are (c' = c_ug: no expression at all, where a CASE over every
    partial cost DuckDB about 1 ms of TPC-H Q1 to plan); a unit over k rows in one group keeps
    k of them (c' = k, no window); only a unit over k rows in several groups has its k rows
    apportioned by the window over its groups' remainders. The two weighted branches share
    one weighting of the partials and one bound of the scaled sums. n_u comes from a GROUP BY
    of the partials joined back (a window over them cost DuckDB more). The rows of the branches are those of the one formula of the module
    :mod:`dpsql._sql.reweight` (:func:`~dpsql._sql.reweight.kept_rows`), case by case.

    >>> agg = perunit.Aggregate(0, {"n": exp.Count(this=exp.Star())}, {"n": ("count", 0, 1)})
    >>> print(reweight(exp.select("__u", "__k0").from_("t"), PreAggregation((agg,), 5, keys=("__k0",), reweight=True)).sql("duckdb"))
    WITH __per AS MATERIALIZED (SELECT __u, __k0, COUNT(*) AS __c, COUNT(*) AS __p0_n FROM (SELECT \
__u, __k0 FROM t) AS __rows_in GROUP BY __u, __k0), __units AS MATERIALIZED (SELECT __per.*, \
__n.__nu, __n.__ng FROM __per JOIN (SELECT __u, SUM(__c) AS __nu, COUNT(*) AS __ng FROM __per \
GROUP BY __u) AS __n ON __per.__u IS NOT DISTINCT FROM __n.__u) SELECT * FROM (SELECT __k0, \
__p0_n FROM __units WHERE __nu <= 5 UNION ALL SELECT __k0, __p0_n FROM (SELECT __k0, \
CAST(__p0_n // __c AS INT128) * __cw + CAST(__p0_n % __c AS INT128) * __cw // __c AS __p0_n \
FROM (SELECT __u, __k0, __c, __p0_n, 5 AS __cw FROM __units WHERE __nu > 5 AND __ng = 1 UNION \
ALL SELECT __u, __k0, __c, __p0_n, __f + CASE WHEN ROW_NUMBER() OVER (PARTITION BY __u ORDER \
BY __r DESC, __k0) <= 5 - SUM(__f) OVER (PARTITION BY __u) THEN 1 ELSE 0 END AS __cw FROM \
(SELECT *, CAST(__c AS INT128) * 5 // __nu AS __f, CAST(__c AS INT128) * 5 % __nu AS __r FROM \
__units WHERE __nu > 5 AND __ng > 1) AS __split) AS __kept WHERE __cw >= 1) AS __weighted) AS \
__branches
    """
    k, keys = pre.cap, pre.keys
    inner: list[exp.Expression] = [col(build.UNIT), *(col(key) for key in keys), alias(exp.Count(this=exp.Star()), rw.ROWS)]
    names: list[str] = []
    outer: list[exp.Expression] = [col(key) for key in keys]
    for agg in pre.aggregates:
        n = col(perunit.partial(agg.index, "n")) if "n" in agg.stats else None
        for stat, expr in agg.stats.items():
            name_ = perunit.partial(agg.index, stat)
            inner.append(alias(expr.copy(), name_))
            names.append(name_)
            kept = rw.bounded(agg.kinds[stat], col(name_), n)
            outer.append(kept if isinstance(kept, exp.Column) else alias(kept, name_))
    if len(outer) == len(keys):
        outer.append(alias(exp.Boolean(this=True), build.ROW))
    per = select(inner, subquery(rows, build.UNTRUNCATED), group=(build.UNIT, *keys))
    totals = select([col(build.UNIT), alias(exp.Sum(this=col(rw.ROWS)), rw.UNIT_ROWS),
                     alias(exp.Count(this=exp.Star()), _GROUPS)], table(perunit.PER_UNIT), group=(build.UNIT,))
    units = select([star(perunit.PER_UNIT), col(rw.UNIT_ROWS, _TOTALS), col(_GROUPS, _TOTALS)], table(perunit.PER_UNIT))
    units.set("joins", [exp.Join(this=subquery(totals, _TOTALS), on=exp.NullSafeEQ(
        this=col(build.UNIT, perunit.PER_UNIT), expression=col(build.UNIT, _TOTALS)))])
    over = exp.GT(this=col(rw.UNIT_ROWS), expression=number(str(k)))
    one = exp.EQ(this=col(_GROUPS), expression=number("1"))
    passed = select(outer_columns(keys, names), table(_UNITS),
                    where=[exp.LTE(this=col(rw.UNIT_ROWS), expression=number(str(k)))])
    carried = [col(build.UNIT), *(col(key) for key in keys), col(rw.ROWS), *(col(n) for n in names)]
    # over k in one group: k of its c rows (c' = k, c > k >= 1), no window
    alone = select([*carried, alias(number(str(k)), rw.KEPT)], table(_UNITS), where=[over, one])
    floor, remainder = rw.floor_and_remainder(k)
    split = select([star(), alias(floor, rw.FLOOR), alias(remainder, rw.REMAINDER)], table(_UNITS),
                   where=[over.copy(), exp.GT(this=col(_GROUPS), expression=number("1"))])
    shared = select([*(c.copy() for c in carried), alias(rw.apportioned(k, keys), rw.KEPT)], subquery(split, _SPLIT))
    weighted = select([*(col(key) for key in keys), *(alias(rw.ratio(col(n), col(rw.KEPT), col(rw.ROWS)), n) for n in names)],
                      subquery(_union(alone, shared), _KEPT), where=[exp.GTE(this=col(rw.KEPT), expression=number(1))])
    out = select([star()], subquery(_union(passed, select(outer, subquery(weighted, _WEIGHTED))), _BRANCHES))
    out.set("with_", exp.With(expressions=[_cte(perunit.PER_UNIT, per), _cte(_UNITS, units)]))
    return out


def outer_columns(keys: tuple[str, ...], names: list[str]) -> list[exp.Expression]:
    """The keys and the partials as they are (``TRUE AS __row`` without any partial)."""
    out: list[exp.Expression] = [*(col(key) for key in keys), *(col(n) for n in names)]
    if not names:
        out.append(alias(exp.Boolean(this=True), build.ROW))
    return out
