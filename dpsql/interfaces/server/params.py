"""Bound parameters, inlined as literals through the syntax tree (never pasted into the text).

A statement is parsed once in the dpsql dialect; each ``$n`` (or ``?``) node is replaced by a
literal node built from the value and the parameter's declared type, and the tree is rendered
back. A value can only ever become one literal: quotes in it are escaped by the generator.
"""

from __future__ import annotations

import math
import typing as t

from sqlglot import exp

from dpsql._sql import dialect
from dpsql.errors import OptionError, ParseError

from .columns import BOOL, FLOAT4, FLOAT8, INT2, INT4, INT8, NUMERIC

_NUMBERS = (INT2, INT4, INT8, FLOAT4, FLOAT8, NUMERIC)


def placeholders(tree: exp.Expression) -> list[exp.Placeholder]:
    return list(tree.find_all(exp.Placeholder))


def count(sql: str) -> int:
    """How many parameters ``sql`` takes (0 when it does not parse: the error comes later)."""
    try:
        tree = dialect.parse(sql)
    except Exception:
        return 0
    return len(_numbered(placeholders(tree)))


def _numbered(nodes: list[exp.Placeholder]) -> dict[int, list[exp.Placeholder]]:
    """Placeholder nodes by parameter number (``$n`` is n; each ``?`` takes the next)."""
    out: dict[int, list[exp.Placeholder]] = {}
    nxt = 1
    for node in nodes:
        this = node.this
        if this is not None and str(this).isdigit():
            n = int(str(this))
        else:
            n = nxt
            nxt += 1
        out.setdefault(n, []).append(node)
    return out


def literal(value: t.Any, oid: int | None, in_options: bool) -> exp.Expression:
    if value is None:
        return exp.Null()
    if isinstance(value, list):
        raise OptionError("array parameters are not supported")
    text = str(value)
    if oid == BOOL:
        return exp.Boolean(this=text.strip().lower() in ("t", "true", "1", "on", "yes"))
    if oid in _NUMBERS or (in_options and oid is None and _is_number(text)):
        if not _is_number(text):
            raise OptionError(f"parameter value {text!r} is not a number")
        return exp.Literal.number(text.strip())
    return exp.Literal.string(text)


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def strip_public(tree: exp.Expression) -> bool:
    """Drop the schema ``public`` from table names: clients see the declared tables in schema
    public (PostgreSQL's default), where DuckDB has them in main. Whether anything changed."""
    changed = False
    for table in tree.find_all(exp.Table):
        if table.db.lower() == "public" and not table.catalog:
            table.set("db", None)
            changed = True
    return changed


def inline(sql: str, values: list[t.Any], oids: list[int | None]) -> str:
    """``sql`` with its parameters replaced by literals of ``values`` (and tables named in
    schema public named without it)."""
    if not values and "public" not in sql.lower():
        return sql
    tree = dialect.parse(sql)
    if not strip_public(tree) and not values:
        return sql
    numbered = _numbered(placeholders(tree))
    if set(numbered) != set(range(1, len(values) + 1)):
        raise ParseError(f"the statement takes {len(numbered)} parameters, but {len(values)} were bound")
    for n, nodes in numbered.items():
        oid = oids[n - 1] if n - 1 < len(oids) else None
        for node in nodes:
            in_options = node.find_ancestor(dialect.DPOptions) is not None
            node.replace(literal(values[n - 1], oid, in_options))
    return dialect.to_sql(tree)


def stand_ins(sql: str, oids: list[int | None]) -> str:
    """``sql`` with a neutral value for each parameter, to describe it before values exist:
    1 for numbers and for options, '' for text (the types a statement returns do not depend
    on its parameters' values)."""
    tree = dialect.parse(sql)
    strip_public(tree)
    for n, nodes in _numbered(placeholders(tree)).items():
        oid = oids[n - 1] if n - 1 < len(oids) else None
        for node in nodes:
            number = oid in _NUMBERS or node.find_ancestor(dialect.DPOptions) is not None
            node.replace(exp.Literal.number("1") if number else exp.Null() if oid is None
                         else exp.Literal.string(""))
    return dialect.to_sql(tree)
