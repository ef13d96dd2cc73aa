"""Conditions in ON of a join with a private table that read that table alone.

``customer LEFT JOIN orders ON c_custkey = o_custkey AND o_comment NOT LIKE '%special%'`` (TPC-H
Q13): the second condition reads only the joined table. For an INNER or a LEFT join, a condition
on the right side alone is the same as filtering the right side's rows before the join: a left
row that no kept right row matches stays, with NULLs, exactly as when the ON failed for every
right row. So the condition is taken out of the ON and becomes a WHERE of the joined table's own
side (:class:`~dpsql._sql.relation.Relation` ``where``), which the join already applies row by
row, before it joins and before any truncation (``dpsql._sql.joins._private_side`` and
``_truncated``). A row-wise filter of one table changes no sensitivity: one person's rows are
still only that person's rows, and every bound after the join is enforced as before.

A non-equality that reads another table of the FROM clause (``o_totalprice > c_acctbal``) would
decide per pair of rows which ones join; it stays refused in one line.
"""

from __future__ import annotations

from sqlglot import exp

from dpsql._sql.relation import Relation
from dpsql.errors import PrivacyError


def _sql(node: exp.Expression) -> str:
    return node.sql(dialect="duckdb")


def _own(node: exp.Expression, alias: str, right: Relation, left: Relation) -> bool:
    """Whether every column of ``node`` is one of the joined table's (qualified by its alias, or
    unqualified and not a column of the tables before it); a node without columns is not.

    >>> import sqlglot
    >>> from dpsql._policy.policy import TablePolicy
    >>> r = Relation(TablePolicy("o", "o_id"), {"o_c": None, "o_id": None}, "o")
    >>> l = Relation(TablePolicy("c", "c_id"), {"c_id": None}, "c")
    >>> [_own(sqlglot.parse_one(s), "o", r, l) for s in ("o_c LIKE 'x%'", "o.o_id > c_id", "1 = 1")]
    [True, False, False]
    """
    cols = list(node.find_all(exp.Column))
    if not cols:
        return False
    for col in cols:
        name = col.name.lower()
        if col.table:
            if col.table.lower() != alias:
                return False
        elif name not in right.columns or name in left.columns:
            return False
    return True


def right_filters(join: exp.Join, alias: str, right: Relation, left: Relation) -> tuple[exp.Join, Relation]:
    """The join with the ON conditions that read the joined table alone taken out, and the joined
    table's relation with them added to its WHEREs. Equalities stay in the ON (the join's keys);
    a non-equality that reads any other table is refused.
    """
    on = join.args.get("on")
    if on is None:
        return join, right
    parts = list(on.flatten()) if isinstance(on, exp.And) else [on]
    keep: list[exp.Expression] = []
    filters: list[exp.Expression] = []
    what = f"private table {right.table.name}"
    for part in parts:
        bare = part
        while isinstance(bare, exp.Paren):
            bare = bare.this
        if _own(bare, alias, right, left):
            filters.append(right.substitute(bare, f"ON of a join with {what}"))
        elif isinstance(bare, exp.EQ):
            keep.append(part)
        else:
            raise PrivacyError(
                f"only equalities of keys, and conditions on {right.table.name} alone, are supported in ON "
                f"of a join with {what}, not {_sql(bare)[:60]}; move it to WHERE (an INNER join) or "
                "filter the tables before the join")
    if not filters:
        return join, right
    if not keep:
        raise PrivacyError(f"a join with {what} needs an equality of keys in ON, not only "
                           f"conditions on {right.table.name}; add the key equality (ON a = b)")
    out = join.copy()
    out.set("on", exp.and_(*keep, copy=True) if len(keep) > 1 else keep[0].copy())
    return out, right.carried(right.columns, right.alias, [*right.where, *filters])
