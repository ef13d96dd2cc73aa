"""Rule: the statistics over the rows themselves, each column of ``__src`` replaced by its
expression, when nothing but the statistics reads them.

``SELECT SUM(CAST(__v0 AS BIGINT)) AS a0_s FROM (SELECT <clip> AS __v0 FROM t) AS __src``
becomes ``SELECT SUM(CAST((<clip>) AS BIGINT)) AS a0_s FROM t``: DuckDB runs the same plan and
plans it faster (about 0.1 ms less per query). Only when every statistic is a mechanism's own
expression and reads only value columns, each at most once over all of them (an expression
read twice would be computed twice). The columns are replaced in the tree, never in text.
Fixtures: ``fixtures/compile/inline.sql``.
"""

from __future__ import annotations

import typing as t

from sqlglot import exp

from dpsql._compile.nodes import alias
from dpsql._compile.plan import Stat


def inlined(stats: t.Sequence[Stat], named: t.Mapping[str, exp.Expression]) -> list[exp.Expression] | None:
    """The statistics' select list with each column of ``named`` (name → expression) put back
    in parentheses, or None when that is not allowed (see the module's docstring).

    >>> stat = Stat("a0_s", exp.Sum(this=exp.column("__v0")))
    >>> [e.sql("duckdb") for e in inlined([stat], {"__v0": exp.column("x", "__t")})]
    ['SUM((__t.x)) AS a0_s']
    >>> inlined([stat, stat], {"__v0": exp.column("x")}) is None  # read twice
    True
    """
    seen: set[str] = set()
    found: list[tuple[Stat, list[exp.Column]]] = []
    for stat in stats:
        if not stat.plain:
            return None
        cols = list(stat.expr.find_all(exp.Column))
        for c in cols:
            if c.table or c.name not in named or c.name in seen:
                return None
            seen.add(c.name)
        found.append((stat, cols))
    out: list[exp.Expression] = []
    for stat, cols in found:
        expr = stat.expr.copy() if cols else stat.expr
        for c in (list(expr.find_all(exp.Column)) if cols else ()):
            c.replace(exp.Paren(this=named[c.name]))
        out.append(alias(expr, stat.column))
    return out
