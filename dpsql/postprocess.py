"""The post-processing SELECT: HAVING, ORDER BY, LIMIT and select-list expressions, run on the
noisy rows only.

The binder hands over the user's SELECT; DP aggregate calls become columns ``__a<i>`` and group
expressions ``__k<j>`` of the table ``__noisy`` that the release step fills. Any other
reference to a column of the private table is refused before anything is charged.
"""

from __future__ import annotations

import typing as t

from sqlglot import exp

from dpsql.errors import PrivacyError

if t.TYPE_CHECKING:
    from dpsql.bind import _Source


def _label(node: exp.Expression) -> str:
    from dpsql.dialect import to_sql

    return to_sql(node)


def build_outer(
    select: exp.Select, index_of: dict[int, int], group_exprs: list[exp.Expression], source: "_Source"
) -> tuple[exp.Select, list[str]]:
    """Build the post-processing SELECT over ``__noisy`` and the output column names."""
    agg_by_id = index_of  # ids of the DP aggregate nodes of ``select`` (alive with it)
    group_keys = [g.sql(dialect="duckdb") for g in group_exprs]

    aliases = {p.alias.lower() for p in select.expressions if isinstance(p, exp.Alias)}

    def replace(node: exp.Expression, where: str) -> exp.Expression:
        made: set[int] = set()
        out = node.copy()
        # The copy's DP aggregate nodes, matched to the originals by walking both trees in step.
        # Kept per call: ids of nodes a previous call discarded may be reused by new objects.
        copies = {id(new): agg_by_id[id(orig)] for orig, new in zip(node.walk(), out.walk())
                  if id(orig) in agg_by_id}

        def swap(n: exp.Expression) -> exp.Expression:
            if id(n) in copies:
                col = exp.column(f"__a{copies[id(n)]}")
            elif not isinstance(n, exp.Literal) and n.sql(dialect="duckdb") in group_keys:
                col = exp.column(f"__k{group_keys.index(n.sql(dialect='duckdb'))}")
            else:
                return n
            made.add(id(col))
            return col

        out = out.transform(swap, copy=False)
        for col in out.find_all(exp.Column):
            if id(col) not in made:
                if where != "the select list" and not col.table and col.name.lower() in aliases:
                    continue
                if col.name.lower() in source.columns or col.table:
                    _refuse(
                        f"column {col.name} of private table {source.table.name} appears in "
                        f"{where} outside a DP aggregate and the GROUP BY keys"
                    )
        return out

    projections: list[exp.Expression] = []
    names: list[str] = []
    for proj in select.expressions:
        if isinstance(proj, exp.Star):
            _refuse(f"SELECT * would return raw rows of private table {source.table.name}")
        expr = proj.this if isinstance(proj, exp.Alias) else proj
        name = proj.alias if isinstance(proj, exp.Alias) else (
            expr.name if isinstance(expr, exp.Column) else _label(expr)
        )
        new = replace(expr, "the select list")
        projections.append(exp.alias_(new, name, quoted=True))
        names.append(name)
    outer = exp.select(*projections).from_("__noisy")
    if select.args.get("having"):
        outer = outer.where(replace(select.args["having"].this, "HAVING"))
    if select.args.get("order"):
        order = select.args["order"].copy()
        order.set("expressions", [
            o.__class__(**{**o.args, "this": replace(o.this, "ORDER BY")}) for o in select.args["order"].expressions
        ])
        outer.set("order", order)
    elif group_exprs:
        # Without ORDER BY, rows come back in key order rather than hash-join order.
        outer = outer.order_by(*[exp.column(f"__k{j}") for j in range(len(group_exprs))])
    for key in ("limit", "offset"):
        if select.args.get(key):
            outer.set(key, select.args[key].copy())
    return outer, names


def _refuse(msg: str) -> t.NoReturn:
    raise PrivacyError(msg)
