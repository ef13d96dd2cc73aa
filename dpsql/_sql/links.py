"""The unit of a linked table's rows, in SQL: the joins up its links (dpsql._policy.links).

:func:`link_unit` gives, for a table read as ``over`` (``__t``), the expression of each row's
unit and the joins that reach it. A link that points at the unit column needs no join
(``orders.o_custkey`` IS the customer key); any other link joins its target **grouped by the
target column**, one row per key holding the smallest unit of that key's rows::

    JOIN (SELECT __l1t."o_orderkey" AS __k, MIN(__l1t."o_custkey") AS __u
          FROM "db"."main"."orders" AS __l1t WHERE __l1t."o_custkey" IS NOT NULL
          GROUP BY __l1t."o_orderkey") AS __l1 ON __t."l_orderkey" = __l1.__k

so that the join never multiplies a row, whatever the data holds (the target column need not
be unique), and an orphan (a NULL link, a key without target rows, or target rows without a
unit) matches nothing and is dropped. Values are compared in one type: a link column of
another type than its target is cast to the target's type, and a unit read from a link column
to the unit column's type (``TRY_CAST``: a value that does not cast is an orphan), so the unit
values the truncation partitions by are those of the unit table. The trees are built with
sqlglot; the rewrite receives them as DuckDB text.
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field

from sqlglot import exp

from dpsql._policy.links import check_link_columns
from dpsql._policy.policy import Policy, TablePolicy
from dpsql.errors import BindError, PolicyError

Catalog = t.Callable[[str], "dict[str, str] | None"]

#: columns of a link's grouped target: the key, and its unit
KEY, UNIT = "__k", "__u"


@dataclass
class LinkUnit:
    """How a linked table's rows reach their unit."""

    #: the unit of a row, over ``over`` and the link aliases
    unit: exp.Expression
    #: the joins to add after the table (grouped targets), over ``over``
    joins: list[exp.Join] = field(default_factory=list)
    #: conditions that drop orphans a join does not (a NULL unit read from a link column)
    where: list[exp.Expression] = field(default_factory=list)
    #: the aliases of the joins (part of the row hash)
    aliases: tuple[str, ...] = ()
    #: what EXPLAIN says about the links followed
    steps: list[str] = field(default_factory=list)


def _types(catalog: Catalog, name: str) -> dict[str, str]:
    types = catalog(name)
    if types is None:
        raise BindError(f"table {name} is in the policy (a link leads to it) but does not exist in the database")
    return types


def _as(expr: exp.Expression, have: str, want: str) -> exp.Expression:
    """``expr`` (of type ``have``) in type ``want``: itself, or ``TRY_CAST(expr AS want)``."""
    if " ".join(have.upper().split()) == " ".join(want.upper().split()):
        return expr
    return exp.TryCast(this=expr, to=exp.DataType.build(want, dialect="duckdb"))


def _root_type(policy: Policy, tp: TablePolicy, catalog: Catalog) -> str:
    root = policy.tables[tp.unit_root or tp.name]
    return _types(catalog, root.name)[root.privacy_unit]


def _is_unit(policy: Policy, tp: TablePolicy, column: str) -> bool:
    """Whether ``column`` of ``tp`` holds the unit itself: the unit column of a unit table, or a
    link column that leads to such a column (``orders.o_custkey``)."""
    if tp.link is None:
        return tp.privacy_unit == column
    return column == tp.link.column and _is_unit(policy, policy.tables[tp.link.table], tp.link.target)


def link_unit(tp: TablePolicy, over: str, policy: Policy, catalog: Catalog, database: str | None,
              alias: t.Callable[[], str]) -> LinkUnit:
    """The unit of linked table ``tp``'s rows read as ``over``, and the joins that reach it."""
    assert tp.link is not None
    link = tp.link
    target = policy.tables[link.table]
    have, target_have = _types(catalog, tp.name), _types(catalog, target.name)
    try:
        check_link_columns(tp, have, target_have)
    except PolicyError as err:
        raise PolicyError(str(err)) from None
    column = exp.column(link.column, table=over, quoted=True)
    if _is_unit(policy, target, link.target):
        unit = _as(column, have[link.column], _root_type(policy, tp, catalog))
        return LinkUnit(unit=unit, where=[exp.Not(this=exp.Is(this=unit.copy(), expression=exp.Null()))],
                        steps=[f"{tp.name} reaches its privacy unit {tp.privacy_unit} through the link {link}: "
                               f"{link.column} is the unit; rows whose {link.column} is NULL belong to no unit "
                               "and are dropped"])
    name = alias()
    inner = f"{name}t"
    below = link_unit(target, inner, policy, catalog, database, alias) if target.link is not None else \
        LinkUnit(unit=exp.column(target.privacy_unit, table=inner, quoted=True),
                 where=[exp.Not(this=exp.Is(this=exp.column(target.privacy_unit, table=inner, quoted=True),
                                            expression=exp.Null()))])
    table = exp.table_(target.table_name, db=target.schema, catalog=database, quoted=True)
    grouped = target_by_key(exp.alias_(table, inner, table=True), exp.column(link.target, table=inner, quoted=True),
                            below)
    on = exp.EQ(this=_as(column, have[link.column], target_have[link.target]),
                expression=exp.column(KEY, table=name))
    join = exp.Join(this=exp.Subquery(this=grouped, alias=exp.TableAlias(this=exp.to_identifier(name))), on=on)
    step = (f"{tp.name} reaches its privacy unit {tp.privacy_unit} through the link {link}: each row takes the "
            f"unit of the {target.name} rows whose {link.target} equals its {link.column} (the smallest, if "
            f"several: one unit per row, never more rows); rows that match none belong to no unit and are dropped")
    return LinkUnit(unit=exp.column(UNIT, table=name), joins=[join], aliases=(name,), steps=[*below.steps, step])


def target_by_key(table: exp.Expression, key: exp.Column, below: LinkUnit) -> exp.Select:
    """``SELECT key AS __k, MIN(unit) AS __u FROM table ... WHERE unit IS NOT NULL GROUP BY key``:
    one row per key of the link's target, so that the link join never multiplies a row, and
    the smallest unit of the key's rows (the attribution that other units' rows cannot change:
    dpsql._policy.links)."""
    out = exp.select(exp.alias_(key, KEY), exp.alias_(exp.Min(this=below.unit), UNIT)).from_(table)
    for join in below.joins:
        out = out.join(join)
    for w in below.where:
        out = out.where(w)
    return out.group_by(key.copy())


def is_link_pair(left: TablePolicy, left_column: str, right: TablePolicy, right_column: str) -> bool:
    """Whether ``left.left_column = right.right_column`` follows a link (either way), or equates
    the same link of one table (a self join on its link column).

    >>> from dpsql._policy.links import Link
    >>> o = TablePolicy("orders", privacy_unit="c", link=Link("o_custkey", "customer", "c"), unit_root="customer")
    >>> li = TablePolicy("lineitem", privacy_unit="c", link=Link("l_orderkey", "orders", "o_orderkey"),
    ...                  unit_root="customer")
    >>> is_link_pair(li, "l_orderkey", o, "o_orderkey"), is_link_pair(o, "o_orderkey", li, "l_orderkey")
    (True, True)
    >>> is_link_pair(li, "l_partkey", o, "o_orderkey")
    False
    """
    def follows(a: TablePolicy, ac: str, b: TablePolicy, bc: str) -> bool:
        return a.link is not None and a.link.column == ac and a.link.table == b.name and a.link.target == bc
    same = left.name == right.name and left.link is not None and left_column == right_column == left.link.column
    return follows(left, left_column, right, right_column) or follows(right, right_column, left, left_column) or same
