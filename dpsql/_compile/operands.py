"""Rule: a clip's guarded operand is computed once per row, in a projection under the clip.

A clip writes its operand three times (``CASE WHEN x < L THEN L WHEN x > U THEN U ELSE x END``,
:mod:`dpsql._compile.clip`). DuckDB computes a repeated subexpression once when it may, but not
one under ``TRY`` (an expression that could raise, such as a DECIMAL product, is guarded so:
:mod:`dpsql._sql.total`): it computed TPC-H Q1's two guarded prices three times each, 3–4 ms of
its 100 ms per-customer aggregation. So each guarded operand becomes a column ``__o<i>`` of a
SELECT over the FROM chain, and the clip reads that column::

    SELECT __k0, CASE WHEN __o0 < 0 THEN 0 ... ELSE __o0 END AS __v0, __u
    FROM (SELECT __t.k AS __k0, TRY(...) AS __o0, __t.pid AS __u FROM ... WHERE ...) AS __operands

The rows, their values and their order are the same; only the work changes. An operand is
found as the :class:`dpsql._compile.nodes.Shared` node the compiler writes a clip's operand as
(DuckDB's compiler only: Spark's writes the tree itself, which this rule leaves alone), in the
values the source names as guarded, and a projection is split only when the operand is all it
reads. Fixtures: ``fixtures/compile/operands.sql``.
"""

from __future__ import annotations

import typing as t

from sqlglot import exp

from dpsql._compile.nodes import Shared, alias, col, select, subquery

#: the derived table of the operands, and the prefix of their columns (reserved names)
OPERANDS = "__operands"
OPERAND = "__o"


def _split(projection: exp.Expression, names: dict[int, str], inner: list[exp.Expression]) -> exp.Expression | None:
    """``projection`` over the operand columns (each new operand added to ``inner`` under its
    name), or None unless it is named, holds an operand and reads nothing else (a
    :class:`Shared` node has no children: its tree is not walked)."""
    shared = list(projection.find_all(Shared))
    if not (isinstance(projection, exp.Alias) and shared and projection.find(exp.Column) is None):
        return None
    out = projection.copy()
    for node in list(out.find_all(Shared)):
        printed = node.meta["printed"]
        if id(printed) not in names:
            names[id(printed)] = f"{OPERAND}{len(names)}"
            inner.append(alias(printed.tree.copy(), names[id(printed)]))
        node.replace(col(names[id(printed)]))
    return out


def operands_once(rows: exp.Select, guarded: t.Collection[str]) -> exp.Select:
    """``rows`` (a SELECT of named projections over the FROM chain) with the operands of the
    projections named in ``guarded`` (the values whose argument holds a TRY) computed once,
    under the projections that read them; ``rows`` itself when there is none to split.

    >>> from dpsql._compile.clip import clip
    >>> from dpsql._compile.nodes import PRINTED, table
    >>> x = exp.Try(this=exp.Mul(this=col("p", "__t"), expression=col("d", "__t")))
    >>> rows = select([alias(col("k", "__t"), "__k0"), alias(clip(x, 0, 9, "DOUBLE", Shared.of), "__v0")],
    ...               table("t", "__t"))
    >>> operands_once(rows, {"__v0"}).sql(PRINTED)
    'SELECT __k0, CASE WHEN __o0 < 0.0 THEN 0.0 WHEN __o0 > 9.0 THEN 9.0 ELSE __o0 END AS __v0 FROM (SELECT __t.k AS __k0, TRY(__t.p * __t.d) AS __o0 FROM t AS __t) AS __operands'
    """
    names: dict[int, str] = {}
    inner: list[exp.Expression] = []
    outer: list[exp.Expression] = []
    for projection in rows.expressions:
        split = _split(projection, names, inner) if projection.alias in guarded else None
        if split is None:
            inner.append(projection)
            outer.append(col(projection.alias_or_name))
        else:
            outer.append(split)
    if not names:
        return rows
    rows.set("expressions", inner)  # the compiler's own tree, built for this statement
    return select(outer, subquery(rows, OPERANDS))
