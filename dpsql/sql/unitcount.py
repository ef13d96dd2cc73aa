"""Per-unit counts clipped to the policy's row bound, and the public key domain that gives them.

A subquery that GROUPs BY the privacy unit (:func:`dpsql.sql.scope._per_unit`) holds one row per
unit. Its ``count(...)`` columns are written ``LEAST(count(...), k)`` in the rewritten SQL, where
``k`` is the largest ``max_rows_per_unit`` of the unit's private tables the subquery reads (TPC-H
Q13: orders' 40 for ``customer LEFT JOIN orders``). That is the policy's row bound enforced in
the SQL, as everywhere else: a unit with more rows counts as ``k`` (at SF 1 one customer of
150,000 has 41 orders, and Q13 counts it in the group ``c_count = 40``), the same number a count
of its rows truncated to ``k`` would give for ``count(*)``.

The clip makes every value of the column an integer in ``0..k``, a set the policy alone fixes, so
a GROUP BY of the column has a public key domain (:func:`count_source`): every key of ``0..k``
gets a row, with no τ-threshold. Guarantee: under add/remove of one unit (all its rows in every
table), the per-unit subquery gains or loses exactly one row, so the unit lands in exactly one
outer group; the keys are fixed; so the vector of per-group ``DP_COUNT(*)`` moves by 1 in L1 and
L2, and Laplace (or Gaussian) noise of scale ``1/ε`` per group is ε-DP (Dwork, McSherry, Nissim,
Smith 2006, parallel composition over disjoint groups: McSherry 2009, "Privacy Integrated
Queries"). The brute force in ``tests/test_q13.py`` checks the move of 1 over every neighbour of
small data, and that without the clip the key domain would not hold a unit's count.
"""

from __future__ import annotations

import typing as t

from sqlglot import exp

from dpsql.sql.build import BASE

if t.TYPE_CHECKING:
    from dpsql.sql.keysource import KeySource
    from dpsql.sql.relation import Relation


def rows_bound(inner: "Relation") -> int | None:
    """The largest ``max_rows_per_unit`` of the private tables of ``inner``'s unit (the FROM
    table and those joined to it); ``None`` if one of them has no bound."""
    tables = [inner.table, *(tp for tp in inner.joined_tables.values()
                             if not tp.public and tp.privacy_unit == inner.table.privacy_unit)]
    bounds = [tp.max_rows_per_unit for tp in tables]
    if any(b is None for b in bounds):
        return None
    return max(t.cast(list[int], bounds))


def clipped(aggregate: exp.Expression, name: str, k: int | None) -> exp.Expression:
    """``LEAST(count(...), k)`` for a count of a per-unit subquery; anything else as it is.

    >>> "LEAST(COUNT(*), 40)" in clipped(exp.Count(this=exp.Star()), "count", 40).sql("duckdb")
    True
    >>> clipped(exp.Sum(this=exp.column("x")), "sum", 40).sql("duckdb")
    'SUM(x)'
    """
    if name != "count" or k is None:
        return aggregate
    return exp.Least(this=aggregate, expressions=[exp.Literal.number(k)])


def count_source(g: exp.Expression, rel: "Relation") -> "KeySource | None":
    """The public domain ``0..k`` of a GROUP BY of a clipped per-unit count, else ``None``."""
    from dpsql.sql.keysource import KeySource

    while isinstance(g, exp.Paren):
        g = g.this
    if not (rel.per_unit and isinstance(g, exp.Column) and g.table == BASE):
        return None
    k = rel.count_keys.get(g.name)
    if k is None:
        return None
    return KeySource(f"a per-unit count, clipped to 0..{k} (max_rows_per_unit) in the SQL",
                     values=tuple(range(k + 1)))
