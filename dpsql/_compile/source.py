"""Rule: the source rows ``__src``, one row per row of the FROM chain that passes every filter.

Projected, under reserved names only: the group keys ``__k<j>``, every value column (clipped,
on a fixed-point grid, or as it is: :mod:`dpsql._compile.clip`) and inner argument, and the
privacy unit when one is needed: for an id unit ``__u`` and the hash of the whole row ``__h``
(of the private table's row and of every joined row), then truncated
(:mod:`dpsql._compile.truncate`), or ``__u`` alone, then pre-aggregated
(:mod:`dpsql._compile.preaggregate`); for a row unit counted by units, ``HASH(__t) AS __u``. A
guarded operand is computed once, beneath (:mod:`dpsql._compile.operands`). With
nothing else to read (``DP_COUNT(*)`` alone) the one column is ``TRUE AS __row``. Every column
of the table is read as ``__t."name"`` (the binder's work): no name a user writes reaches it.
Fixtures: ``fixtures/compile/source.sql``.
"""

from __future__ import annotations

from sqlglot import exp

from dpsql._compile import clip, operands
from dpsql._compile.nodes import Forms, alias, select
from dpsql._compile.plan import Clipped, Fixed, Source, Value
from dpsql._sql import build


def value(v: Value, compiler: Forms) -> exp.Expression:
    """The expression of a value column of ``__src``."""
    if isinstance(v, Clipped):
        return clip.clip(v.arg, v.lower, v.upper, v.dtype, compiler.once)
    if isinstance(v, Fixed):
        return clip.fixed_point(clip.operand(v.arg, v.dtype), v.grid, compiler.integer, compiler.once)
    return v.expr


def named(src: Source, compiler: Forms) -> dict[str, exp.Expression]:
    """The value columns and inner arguments of ``__src`` by name (what
    :mod:`dpsql._compile.inline` puts back into the aggregates)."""
    return {v.name: value(v, compiler) for v in src.values}


def source(src: Source, compiler: Forms, values: dict[str, exp.Expression] | None = None) -> exp.Select:
    """The SELECT of ``__src`` (``values``: :func:`named`, when already built).

    >>> from dpsql._compile.compiler import Compiler
    >>> from dpsql._compile.target import DUCKDB
    >>> from dpsql._compile.plan import Relation
    >>> rel = Relation(exp.to_table("t"), text='"t" AS __t')
    >>> src = Source(rel, keys=(), values=(Clipped("__v0", exp.column("x", "__t"), 0, 9, "BIGINT"),))
    >>> comp = Compiler(DUCKDB)
    >>> comp.sql(source(src, comp))
    'SELECT CASE WHEN __t.x < 0 THEN 0 WHEN __t.x > 9 THEN 9 ELSE __t.x END AS __v0 FROM "t" AS __t'
    """
    rows = unbounded(src, compiler, values)
    if src.truncation is not None:
        return compiler.truncated(rows, src.truncation)
    if src.preaggregation is not None:
        return compiler.preaggregated(rows, src.preaggregation)
    return rows


def unbounded(src: Source, compiler: Forms, values: dict[str, exp.Expression] | None = None) -> exp.Select:
    """The rows of ``__src`` before any per-unit bound (what ``report_dropped`` counts). The
    row hash only where rows are truncated: pre-aggregation keeps no row apart."""
    values = named(src, compiler) if values is None else values
    projections: list[exp.Expression] = [alias(k.expr, k.name) for k in src.keys]
    projections += [alias(e, n) for n, e in values.items()]
    if src.unit is not None:
        projections.append(alias(src.unit, build.UNIT))
        if src.preaggregation is None:
            projections.append(alias(compiler.row_hash(src.hashed), build.ROW_HASH))
    elif src.row_unit:
        projections.append(alias(compiler.row_hash((build.BASE,)), build.UNIT))
    if not projections:  # DP_COUNT(*) alone: the rows are all that is needed
        projections.append(alias(exp.Boolean(this=True), build.ROW))
    rows = rows_only(src, compiler, projections)
    guarded = [v.name for v in src.values if isinstance(v, (Clipped, Fixed)) and v.arg.find(exp.Try) is not None]
    return operands.operands_once(rows, guarded) if guarded else rows


def rows_only(src: Source, compiler: Forms, projections: list[exp.Expression]) -> exp.Select:
    """``projections`` over the FROM chain and filters themselves (no ``__src``)."""
    relation, joins = compiler.relation(src.relation)
    rows = select(projections, relation, src.where)
    if joins:
        rows.set("joins", joins)
    return rows

