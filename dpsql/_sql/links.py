"""The unit of a linked table's rows, in SQL: up its links (dpsql._policy.links).

:func:`link_unit` gives, for a table read as ``over`` (``__t``), the expression of each row's
unit. A link that points at the unit column needs no other table (``orders.o_custkey`` IS the
customer key). Any other link reads its target: among the target rows whose key equals the
row's link column, the smallest unit, so that a row never gets more than one unit, whatever
the data holds (the target column need not be unique), and an orphan (a NULL link, a key
without target rows, or target rows without a unit) gets none and is dropped.

A table in a query's FROM reads it **once per row, as a correlated scalar subquery** in a
derived table that stands for the table (:func:`linked_source`)::

    (SELECT __lr.*, (SELECT MIN(__l1t."o_custkey") FROM "db"."main"."orders" AS __l1t
                     WHERE NOT __l1t."o_custkey" IS NULL AND __l1t."o_orderkey" = __lr."l_orderkey")
                    AS __ru
     FROM "db"."main"."lineitem" AS __lr) AS __t

DuckDB runs it as a join of the target rows with only the keys the rows that pass the query's
WHERE carry, then one aggregate per key. The same join **grouped by the target column** (one
row per key of the whole target table, :func:`target_by_key`), which the links further down a
chain and the subqueries of EXISTS and IN use, aggregated the whole target table first: TPC-H
Q6 at scale 1 took 2.3 times its hand-written floor, against 1.05 times in the correlated form
(docs/benchmarks.md). Values are compared in one type: a link column of another type than its
target is cast to the target's type, and a unit read from a link column to the unit column's
type (``TRY_CAST``: a value that does not cast is an orphan), so the unit values the
truncation partitions by are those of the unit table. The trees are built with sqlglot.
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
#: the alias of a linked table's rows inside :func:`linked_source`, and the column of their unit
LINK_ROW, ROW_UNIT = "__lr", "__ru"
#: which form a linked table in a FROM reads its unit by: "auto" (:func:`selective`),
#: "correlated" or "grouped" (tests set the latter two, to check both forms)
LINK_FORM = "auto"


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


def reads_unit(tp: TablePolicy, policy: Policy) -> bool:
    """Whether linked table ``tp``'s link column is the unit itself (no other table is read)."""
    assert tp.link is not None
    return _is_unit(policy, policy.tables[tp.link.table], tp.link.target)


def link_unit(tp: TablePolicy, over: str, policy: Policy, catalog: Catalog, database: str | None,
              alias: t.Callable[[], str], correlated: bool = False) -> LinkUnit:
    """The unit of linked table ``tp``'s rows read as ``over``, and the joins that reach it; with
    ``correlated``, a scalar subquery over ``over`` instead of a join (NULL for an orphan: the
    caller, :func:`linked_source`, drops those rows by the column it computes)."""
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
    step = (f"{tp.name} reaches its privacy unit {tp.privacy_unit} through the link {link}: each row takes the "
            f"unit of the {target.name} rows whose {link.target} equals its {link.column} (the smallest, if "
            f"several: one unit per row, never more rows); rows that match none belong to no unit and are dropped")
    if correlated:
        found = _correlated(exp.alias_(table, inner, table=True), exp.column(link.target, table=inner, quoted=True),
                            _as(column, have[link.column], target_have[link.target]), below)
        return LinkUnit(unit=found, steps=[*below.steps, step])
    on = exp.EQ(this=_as(column, have[link.column], target_have[link.target]),
                expression=exp.column(KEY, table=name))
    join = exp.Join(this=exp.Subquery(this=grouped, alias=exp.TableAlias(this=exp.to_identifier(name))), on=on)
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


def selective(where: exp.Expression | None) -> bool:
    """Whether a WHERE looks selective from its text alone: one of its AND terms is an equality
    with a constant, an IN list or a BETWEEN, or two terms bound one column from both sides.
    A linked table under such a WHERE reads its unit per row (few rows pass, so few keys are
    looked up); otherwise the target grouped by its key is joined (most rows pass, and the
    target has fewer rows than the table that links to it). Both forms are exact; the choice
    depends on the query only, and only the time it takes depends on it.

    >>> from sqlglot import parse_one
    >>> [selective(parse_one(f"SELECT 1 WHERE {w}").args["where"]) for w in
    ...  ("d >= 1 AND d < 9 AND q < 24", "d <= 9", "c = 'A'", "c IN (1, 2)", "x BETWEEN 1 AND 2", "a < 1 OR a > 2")]
    [True, False, True, True, True, False]
    """
    if where is None:
        return False
    below: set[str] = set()
    above: set[str] = set()
    node = (where.this if isinstance(where, exp.Where) else where).unnest()
    for term in node.flatten() if isinstance(node, exp.And) else [node]:
        term = term.unnest()
        column, constant = _sides(term)
        if column is None or not constant:
            continue
        if isinstance(term, (exp.EQ, exp.In, exp.Between)):
            return True
        flipped = term.this is not column  # ``1 < x``: x is bounded from below
        lower = isinstance(term, (exp.GT, exp.GTE)) != flipped
        if isinstance(term, (exp.GT, exp.GTE, exp.LT, exp.LTE)):
            (above if lower else below).add(column.sql())
    return bool(below & above)


def _sides(term: exp.Expression) -> tuple[exp.Column | None, bool]:
    """The column a comparison term compares, and whether the rest of it is constant."""
    parts = [term.this, *(term.expressions if isinstance(term, exp.In) else [term.args.get("expression")]),
             term.args.get("low"), term.args.get("high")]
    parts = [p for p in parts if p is not None]
    columns = [p for p in parts if isinstance(p, exp.Column)]
    if len(columns) != 1 or isinstance(term, exp.In) and term.args.get("query") is not None:
        return None, False
    return columns[0], all(p is columns[0] or not any(p.find_all(exp.Column)) for p in parts)


def _correlated(table: exp.Expression, key: exp.Column, value: exp.Expression, below: LinkUnit) -> exp.Subquery:
    """``(SELECT MIN(unit) FROM table ... WHERE unit IS NOT NULL AND key = value)``: the smallest
    unit of the target rows whose key is ``value`` (a column of the outer row), NULL if none."""
    out = exp.select(exp.Min(this=below.unit)).from_(table)
    for join in below.joins:
        out = out.join(join)
    for w in [*below.where, exp.EQ(this=key, expression=value)]:
        out = out.where(w)
    return exp.Subquery(this=out)


def linked_source(tp: TablePolicy, table: exp.Table, policy: Policy, catalog: Catalog, database: str | None,
                  alias: t.Callable[[], str], base: str) -> tuple[exp.Subquery, LinkUnit]:
    """The derived table that stands for linked table ``tp`` (``table``) in a FROM chain, its
    rows with their unit computed once (module docstring), and how its rows reach the unit, as
    read over ``base``: the unit column, and the WHERE that drops the rows without a unit.

    >>> from dpsql._policy.policy import load_policy
    >>> p = load_policy({"budget": {"epsilon": 1}, "tables": {"c": {"privacy_unit": "id", "max_rows_per_unit": 1},
    ...     "o": {"link": {"cid": "c.id"}, "max_rows_per_unit": 5},
    ...     "i": {"link": {"oid": "o.oid"}, "max_rows_per_unit": 9}}})
    >>> types = {"c": {"id": "INTEGER"}, "o": {"oid": "INTEGER", "cid": "INTEGER"}, "i": {"oid": "INTEGER"}}
    >>> src, found = linked_source(p.tables["i"], exp.to_table("i"), p, types.get, None, lambda: "__l1", "__t")
    >>> src.sql("duckdb")
    '(SELECT __lr.*, (SELECT MIN("__l1t"."cid") FROM "main"."o" AS __l1t WHERE NOT "__l1t"."cid" IS NULL AND "__l1t"."oid" = "__lr"."oid") AS __ru FROM i AS __lr)'
    >>> found.unit.sql("duckdb"), found.where[0].sql("duckdb")
    ('__t.__ru', 'NOT __t.__ru IS NULL')
    """
    if ROW_UNIT in {c.lower() for c in _types(catalog, tp.name)}:
        raise PolicyError(f"table {tp.name} has a column named {ROW_UNIT}, a name dpsql reserves for the unit of a "
                          "linked table's rows; rename the column")
    found = link_unit(tp, LINK_ROW, policy, catalog, database, alias, correlated=True)
    rows = exp.select(exp.Column(this=exp.Star(), table=exp.to_identifier(LINK_ROW)),
                      exp.alias_(found.unit, ROW_UNIT)).from_(exp.alias_(table, LINK_ROW, table=True))
    unit = exp.column(ROW_UNIT, table=base)
    return exp.Subquery(this=rows), LinkUnit(unit=unit, where=[exp.Not(this=exp.Is(this=unit.copy(),
                                                                                   expression=exp.Null()))],
                                             steps=found.steps)


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
