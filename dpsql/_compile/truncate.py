"""Rule: truncation, the rows an id unit may contribute (:mod:`dpsql._policy.units`).

:func:`truncate` is the one entry point: a SELECT of the rows (with the unit ``__u``, the row
hash ``__h`` and the group keys) becomes the SELECT of the rows each unit keeps. Without
max_groups_per_unit: per unit, the k rows of smallest row hash. With it: per unit, the g
groups of smallest ``HASH(unit, keys)`` (the keys break ties, so g distinct groups at most),
and in each the r rows of smallest row hash. The row hash is of the whole row of the base
table (and of every joined row): which rows survive depends on the unit's rows after the
WHERE, not on which columns the query reads. Identical rows are interchangeable; ROW_NUMBER
never keeps more than k.

With g, one sort of each unit's rows by (HASH(unit, keys), keys, row hash) serves all three
windows: a row's rank in its group ``__r`` is its ROW_NUMBER in that order minus the RANK of its
group, plus 1, and DENSE_RANK numbers the groups (two windows partitioned differently sort the
rows twice: about 1.7× slower on 10M rows). ``__r`` stays in the rows: those with ``__r = 1``
are the units of a group.

The filters are ``BETWEEN 1 AND k``: DuckDB rewrites ``ROW_NUMBER() ... <= k`` into a per-unit
top-k aggregate that is several times slower with millions of small units. Forms measured
slower on 10M rows (docs/benchmarks.md, issue 29): counting each unit's rows by GROUP BY and
ranking only the units over k (1.6–1.8×), ``MIN(__h, k)`` as an aggregate or a window (2–3×),
fewer larger partitions ordered by (unit, hash) (2–3×).

The window is written with QUALIFY (DuckDB's form); an engine without it rewrites that one
node (:meth:`dpsql._compile.spark.SparkCompiler.truncated`). A pre-aggregated form of unit
bounding (per-unit partial sums) is another entry point beside this one. Fixtures:
``fixtures/compile/truncate.sql``.
"""

from __future__ import annotations

from sqlglot import exp

from dpsql._compile.nodes import alias, col, fn, number, star, subquery
from dpsql._compile.plan import Truncation
from dpsql._sql import build


def _window(func: str, order: list[exp.Expression]) -> exp.Window:
    return exp.Window(this=exp.Anonymous(this=func, expressions=[]),
                      partition_by=[col(build.UNIT)],
                      order=exp.Order(expressions=[exp.Ordered(this=o) for o in order]))


def _within(x: exp.Expression, k: int) -> exp.Between:
    return exp.Between(this=x, low=number(1), high=number(str(int(k))))


def truncate(rows: exp.Select, cut: Truncation) -> exp.Select:
    """``rows`` truncated to what each unit may contribute (see the module's docstring).

    >>> rows = exp.select("x").from_("t")
    >>> truncate(rows, Truncation(3)).sql("duckdb")
    'SELECT * EXCLUDE (__h) FROM (SELECT x FROM t) AS __rows_in QUALIFY ROW_NUMBER() OVER (PARTITION BY __u ORDER BY __h) BETWEEN 1 AND 3'
    """
    source = subquery(rows, build.UNTRUNCATED)
    if cut.by_groups:
        assert cut.max_groups is not None and cut.max_rows_per_group is not None
        groups: list[exp.Expression] = [fn("HASH", col(build.UNIT), *(col(k) for k in cut.keys)),
                                        *(col(k) for k in cut.keys)]
        rank = exp.Add(this=exp.Sub(this=_window("ROW_NUMBER", [*groups, col(build.ROW_HASH)]),
                                    expression=_window("RANK", [g.copy() for g in groups])),
                       expression=number(1))
        keep: exp.Expression = exp.And(this=_within(col(build.ROW_IN_GROUP), cut.max_rows_per_group),
                       expression=_within(_window("DENSE_RANK", [g.copy() for g in groups]), cut.max_groups))
        projections = [star(exclude=[build.ROW_HASH]), alias(rank, build.ROW_IN_GROUP)]
    else:
        keep = _within(_window("ROW_NUMBER", [col(build.ROW_HASH)]), cut.max_rows)
        projections = [star(exclude=[build.ROW_HASH])]
    out = exp.Select(expressions=projections)
    out.set("from_", exp.From(this=source))
    out.set("qualify", exp.Qualify(this=keep))
    return out
