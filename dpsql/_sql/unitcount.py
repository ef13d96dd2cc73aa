"""A GROUP BY of a per-unit count: the count clipped to the policy's row bound, a public key domain.

A subquery that GROUPs BY the privacy unit (:func:`dpsql._sql.scope._per_unit`) holds one row per
unit. Besides each of its ``count(...)`` columns it computes ``LEAST(count(...), k)``, where ``k``
is the largest ``max_rows_per_unit`` of the unit's private tables the subquery reads (TPC-H Q13:
orders' 40 for ``customer LEFT JOIN orders``). A GROUP BY of the count reads the clipped column
(:func:`clipped_key`): the policy's row bound, enforced in the SQL as everywhere else. A unit
with more rows lands in the group ``k`` (at SF 1, 3 customers of 150,000 have 41 orders, and Q13
counts them in ``c_count = 40``), the group a count of its rows truncated to ``k`` would give for
``count(*)``. The count as a *value* (``DP_SUM(n, 0, 30)``, ``DP_QUANTILE(n, 0.9, 0, 50)`` to
choose ``max_rows_per_unit``) stays the unit's own, clamped by the aggregate's bounds as before.

Every value of the clipped column is an integer in ``0..k``, a set the policy alone fixes, so the
GROUP BY has a public key domain (:func:`count_domain`): every key of ``0..k`` gets a row, with no
τ-threshold and no δ. Guarantee: under add/remove of one unit (all its rows in every table), the
per-unit subquery gains or loses exactly its one row, so the unit is in exactly one outer group;
the keys are fixed; so the vector of per-group ``DP_COUNT(*)`` moves by 1 in L1 and L2, and
Laplace noise of scale ``1/ε`` per group is ε-DP (Dwork, McSherry, Nissim, Smith 2006; disjoint
groups compose in parallel: McSherry 2009, "Privacy Integrated Queries"). ``tests/test_q13.py``
checks the move of 1 by brute force over every unit neighbour of small data, with a join that
mixes units as the negative control, and shows the clip keeps a unit over the bound in the domain.
"""

from __future__ import annotations

import typing as t

from sqlglot import exp

from dpsql._sql.build import BASE

if t.TYPE_CHECKING:
    from dpsql._sql.relation import Relation


def rows_bound(inner: "Relation") -> int | None:
    """The largest ``max_rows_per_unit`` of the private tables of ``inner``'s unit (the FROM
    table and those joined to it); ``None`` if one of them has no bound."""
    tables = [inner.table, *(tp for tp in inner.joined_tables.values()
                             if not tp.public and tp.privacy_unit == inner.table.privacy_unit)]
    bounds = [tp.max_rows_per_unit for tp in tables]
    if any(b is None for b in bounds):
        return None
    return max(t.cast(list[int], bounds))


def clipped_counts(selects: list[exp.Expression], k: int | None
                   ) -> tuple[list[exp.Expression], dict[str, tuple[str, int]]]:
    """For each ``count(...) AS __pN`` of a per-unit select list, ``LEAST(count(...), k) AS __cN``
    and the entry ``{"__pN": ("__cN", k)}``; nothing when ``k`` is unknown.

    >>> extra, keys = clipped_counts([exp.alias_(exp.Count(this=exp.Star()), "__p1"),
    ...                               exp.alias_(exp.Sum(this=exp.column("x")), "__p2")], 40)
    >>> keys, "LEAST(COUNT(*), 40) END AS __c1" in extra[0].sql("duckdb"), len(extra)
    ({'__p1': ('__c1', 40)}, True, 1)
    """
    extra: list[exp.Expression] = []
    keys: dict[str, tuple[str, int]] = {}
    if k is None:
        return extra, keys
    for item in selects:
        agg = item.this if isinstance(item, exp.Alias) else item
        if not (isinstance(agg, exp.Count) or (isinstance(agg, exp.Anonymous) and agg.name.lower() == "count")):
            continue
        name = "__c" + item.alias_or_name[len("__p"):]
        extra.append(exp.alias_(exp.Least(this=agg.copy(), expressions=[exp.Literal.number(k)]), name))
        keys[item.alias_or_name] = (name, k)
    return extra, keys


def _column(g: exp.Expression, rel: "Relation") -> str | None:
    while isinstance(g, exp.Paren):
        g = g.this
    if rel.per_unit and isinstance(g, exp.Column) and g.table == BASE:
        return g.name
    return None


def clipped_key(g: exp.Expression, rel: "Relation") -> exp.Expression:
    """A GROUP BY key over ``rel``: a per-unit count's clipped column in place of the count."""
    name = _column(g, rel)
    if name is None or name not in rel.count_keys:
        return g
    return exp.column(rel.count_keys[name][0], table=BASE)


def count_domain(g: exp.Expression, rel: "Relation") -> tuple[str, tuple[int, ...]] | None:
    """The public domain ``0..k`` of a GROUP BY of a clipped per-unit count (how EXPLAIN names
    it, and its keys), else ``None``."""
    name = _column(g, rel)
    for clip, k in rel.count_keys.values():
        if name == clip:
            return f"a per-unit count, clipped to 0..{k} (max_rows_per_unit) in the SQL", tuple(range(k + 1))
    return None
