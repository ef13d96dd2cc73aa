"""Typed empty stand-ins for tables: how dpsql asks an engine for types without a private table.

Some answers need the type of an expression that is not a plain column: a GROUP BY key such as
``age / 10``, or a column of a zero-row probe (``SELECT age + 1 AS a FROM adult LIMIT 0``). The
engine's binder is the authority on its own types, but binding a statement that names a private
table is evaluating SQL over it: DuckDB binds a dynamic ``PIVOT`` by reading the table, and
whatever the binder reads leaks through column names or errors. So the statement an engine
describes never names a table of the policy: each one is replaced by a derived table with the
same columns and types and no rows,

    (SELECT CAST(NULL AS BIGINT) AS "age", CAST(NULL AS VARCHAR) AS "sex" LIMIT 0) AS __t

built from the catalog's names and types alone. Whatever the binder does with it, the answer is
a function of the schema, never of the data.

>>> from sqlglot import parse_one
>>> types = {"adult": {"age": "BIGINT", "sex": "VARCHAR"}}
>>> stmt = parse_one('SELECT __t.age / 10 FROM "memory"."main"."adult" AS __t', read="duckdb")
>>> emptied(stmt, lambda node: types.get(node.name.lower())).sql(dialect="duckdb")
'SELECT __t.age / 10 FROM (SELECT CAST(NULL AS BIGINT) AS "age", CAST(NULL AS TEXT) AS "sex" LIMIT 0) AS __t'
"""

from __future__ import annotations

import functools
import typing as t

from sqlglot import exp

from dpsql.errors import BindError

__all__ = ["stand_in", "emptied", "policy_types", "describe_over"]

#: the types of a table node's columns (name → engine type), or None when it is not a table
#: of the policy
TypesOf = t.Callable[[exp.Table], "dict[str, str] | None"]


def _data_type(name: str) -> exp.DataType:
    """A catalog type as a sqlglot type (DuckDB's spelling; Spark's for ``ARRAY<...>`` forms)."""
    try:
        return exp.DataType.build(name, dialect="spark" if "<" in name else "duckdb")
    except Exception:  # noqa: BLE001 - sqlglot raises several kinds for a type it cannot read
        raise BindError(f"cannot describe a column of type {name}: dpsql cannot read that type's name") from None


def stand_in(types: t.Mapping[str, str]) -> exp.Subquery:
    """A derived table with columns ``types`` (name → type) and no rows.

    >>> stand_in({"x": "DOUBLE"}).sql(dialect="duckdb")
    '(SELECT CAST(NULL AS DOUBLE) AS "x" LIMIT 0)'
    """
    select = exp.Select(expressions=[
        exp.alias_(exp.Cast(this=exp.Null(), to=_data_type(ty)), exp.to_identifier(name, quoted=True))
        for name, ty in types.items()
    ])
    select.set("limit", exp.Limit(expression=exp.Literal.number(0)))
    return exp.Subquery(this=select)


@functools.lru_cache(maxsize=256)
def _stand_in_text(items: tuple[tuple[str, str], ...]) -> str:
    """DuckDB's text of the :func:`stand_in` of ``items``: a table's stand-in is the same for
    every statement while its types are, so it is built and printed once."""
    return stand_in(dict(items)).sql(dialect="duckdb", copy=False)


def emptied(statement: exp.Expression, types_of: TypesOf) -> exp.Expression:
    """``statement`` with every table ``types_of`` knows replaced by its :func:`stand_in`.

    A table it does not know (a CTE's name) stays; the alias a table had (or its own name) is
    kept, so references to it still resolve. The statement is changed in place and returned.
    """
    for node in list(statement.find_all(exp.Table)):
        if not node.name:
            continue
        types = types_of(node)
        if types is None:
            continue
        alias = node.args.get("alias")
        # the stand-in's text, kept per table types (:func:`_stand_in_text`), as a verbatim name
        sub = exp.Table(this=exp.Var(this=_stand_in_text(tuple(types.items()))),
                        alias=alias.copy() if alias is not None
                        else exp.TableAlias(this=exp.to_identifier(node.name, quoted=True)))
        if node is statement:
            return sub
        node.replace(sub)
    return statement


def policy_types(policy: t.Any, catalog: t.Callable[[str], "dict[str, str] | None"]) -> TypesOf:
    """``types_of`` for the tables of ``policy``: a table node, qualified or not, by its schema
    and name (``main`` when it has none), with the catalog's types of that policy table."""
    by_name = {(tp.schema.lower(), tp.table_name.lower()): tp.name for tp in policy.tables.values()}

    def types_of(node: exp.Table) -> dict[str, str] | None:
        key = by_name.get(((node.db or "main").lower(), node.name.lower()))
        return None if key is None else catalog(key) or {}

    return types_of


def describe_over(exprs: t.Sequence[exp.Expression], relation: exp.Expression, joins: t.Sequence[exp.Expression],
                  describe: t.Callable[[str], "list[str]"], types_of: TypesOf) -> list[str]:
    """The engine's type of each expression (made total) over the FROM chain ``relation AS
    __t`` and its ``joins`` (the binder's trees, copied), bound with every table of the policy
    replaced by its stand-in: nothing private is bound.

    >>> seen = []
    >>> types = {"adult": {"age": "BIGINT"}}
    >>> describe_over([exp.column("age", "__t")], exp.to_table("adult"), [], lambda s: seen.append(s) or ["BIGINT"],
    ...               lambda node: types.get(node.name))
    ['BIGINT']
    >>> seen
    ['SELECT __t.age FROM (SELECT CAST(NULL AS BIGINT) AS "age" LIMIT 0) AS __t']
    """
    from dpsql._sql.relation import BASE
    from dpsql._sql.total import total

    select = exp.Select(expressions=[total(e) for e in exprs])
    select.set("from_", exp.From(this=exp.alias_(relation.copy(), BASE, table=True)))
    if joins:
        select.set("joins", [j.copy() for j in joins])
    statement = emptied(select, types_of)
    # the statement is this function's own (copies): printed without sqlglot's copy of it
    return describe(statement.sql(dialect="duckdb", copy=False))
