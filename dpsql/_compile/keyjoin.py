"""Rule: the statement's final SELECT, the statistics joined to what gives the groups.

Without a public key domain: ``SELECT * FROM __stats`` (the groups the rows have; their keys
are then τ-selected). With one: the domain left-joined to the statistics,
``SELECT __keys.__k0, ..., __stats.* EXCLUDE (__k0, ...) FROM <domain> LEFT JOIN __stats ON
__keys.__k0 IS NOT DISTINCT FROM __stats.__k0 ...``: every public key has a row, the keys the
data have and the domain lacks have none (no key is read from private data), and NULL is a
key like any other. Every mechanism's subquery is joined on the keys the same way, or, without
keys, cross-joined (one row each). Fixtures: ``fixtures/compile/keyjoin.sql``.
"""

from __future__ import annotations

import typing as t

from sqlglot import exp

from dpsql._compile.nodes import col, same_keys, star, table
from dpsql._compile.plan import Subquery
from dpsql._sql import build


def key_join(keys: t.Sequence[str], subqueries: t.Sequence[Subquery],
             domain: exp.Expression | None) -> exp.Select:
    """The final SELECT over ``__stats`` (``domain``: the ``__keys`` relation, or None).

    >>> key_join(["__k0"], [], exp.to_table("__keys")).sql("duckdb")
    'SELECT __keys.__k0, __stats.* EXCLUDE (__k0) FROM __keys LEFT JOIN __stats ON __keys.__k0 IS NOT DISTINCT FROM __stats.__k0'
    >>> key_join([], [Subquery("__sq0", exp.select("a"), ("a",))], None).sql("duckdb")
    'SELECT *, __sq0.a FROM __stats CROSS JOIN __sq0'
    """
    joins: list[exp.Join] = []
    if domain is not None:
        projections: list[exp.Expression] = [col(k, build.KEYS) for k in keys]
        projections.append(star(build.STATS, keys))
        source, base = domain, build.KEYS
        joins.append(exp.Join(this=table(build.STATS), side="LEFT", on=same_keys(build.KEYS, build.STATS, keys)))
    else:
        projections, source, base = [exp.Star()], table(build.STATS), build.STATS
    for sq in subqueries:
        projections += [col(c, sq.alias) for c in sq.columns]
        if keys:
            joins.append(exp.Join(this=table(sq.alias), side="LEFT", on=same_keys(base, sq.alias, keys)))
        else:
            joins.append(exp.Join(this=table(sq.alias), kind="CROSS"))
    out = exp.Select(expressions=projections)
    out.set("from_", exp.From(this=source))
    if joins:
        out.set("joins", joins)
    return out
