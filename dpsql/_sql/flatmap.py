"""Flat maps in a DP query's FROM chain: ``UNNEST`` of a list each row holds, × F elements per
row with every list cut to F in the SQL (seed 004; docs/joins.md). Moved out of
:mod:`dpsql._sql.joins`, which binds the joins around it."""

from __future__ import annotations

import typing as t
from dataclasses import replace

from sqlglot import exp

from dpsql._sql.allow import check_rowwise
from dpsql._sql.relation import JoinContext, Relation
from dpsql._sql.total import total
from dpsql.errors import PrivacyError


def _refuse(msg: str) -> t.NoReturn:
    raise PrivacyError(msg)


def _sql(node: exp.Expression) -> str:
    return node.sql(dialect="duckdb")


# ---------------------------------------------------------------------------------------------
# Flat maps

#: Functions that turn one allowed value into a list to flat-map (DuckDB names).
_SPLITS = (exp.Split, exp.RegexpSplit)
_SPLIT_NAMES = {"str_split", "string_split", "string_to_array", "regexp_split_to_array",
                "string_split_regex", "str_split_regex"}


def flat_map(rel: Relation, args: list[exp.Expression], alias: exp.TableAlias | None, jc: JoinContext | None,
             what: str, column: str | None = None) -> Relation:
    """Flat-map ``rel`` by UNNEST of the one list in ``args``: a new column per element."""
    if jc is None:
        _refuse("unnest() is not supported here")
    if len(args) != 1:
        _refuse(f"{what} of one list at a time is supported in a DP query")
    if rel.per_unit:
        _refuse(f"{what} of a subquery that groups by the privacy unit is not supported")
    listed, limit = _list(rel, args[0], what)
    opts = jc.options
    by_id = rel.table.privacy_unit != "row"
    source = "a slice in the query" if limit is not None else ""
    if opts.max_rows is not None and (limit is None or opts.max_rows < limit):
        limit, source = opts.max_rows, "option max_rows"
    if opts.max_rows is not None:
        rel.used.add("max_rows")
    if limit is None and not by_id:
        _refuse(f"{what} of {_sql(args[0])[:50]} needs a bound on the rows it makes of one row: add "
                "max_rows = n to WITH (...), or slice the list, e.g. list[1:3]")
    name = jc.alias("f")
    element = "__e"
    out = replace(rel, joins=list(rel.joins), steps=list(rel.steps), used=set(rel.used), joined=True,
                  scopes=dict(rel.scopes or {}), columns=dict(rel.columns))
    value = total(listed)
    if limit is not None:
        value = exp.Anonymous(this="list_slice", expressions=[value, exp.Literal.number(1), exp.Literal.number(limit)])
    unnest = exp.Unnest(expressions=[value], alias=exp.TableAlias(this=exp.to_identifier(name),
                                                                  columns=[exp.to_identifier(element)]))
    out.joins.append(exp.Join(this=unnest, kind="CROSS"))
    out.hashed = (*rel.hashed, name)
    if by_id:
        out.steps.append(f"flat map unnest({_sql(args[0])[:50]}): "
                         + (f"at most {limit} rows per row ({source}); " if limit else "")
                         + "truncation per unit after it bounds the rows")
    else:
        assert limit is not None
        out.rows = rel.rows * limit
        out.steps.append(f"flat map unnest({_sql(args[0])[:50]}): at most {limit} rows per row ({source}; "
                         f"the rewritten SQL keeps {limit} elements): × {limit}")
    col = column
    if col is None:
        cols = alias.args.get("columns") if alias is not None else None
        col = cols[0].name.lower() if cols else "unnest"
    value_col = exp.column(element, table=name)
    if column is None:
        scope_name = alias.name.lower() if alias is not None and alias.name else name
        out.add_scope(scope_name, {col: value_col})
    else:
        out.columns[col] = value_col
    return out


def _list(rel: Relation, node: exp.Expression, what: str) -> tuple[exp.Expression, int | None]:
    """The list a flat map unnests, over the reserved aliases, and the slice's length if the
    query slices it with literal bounds."""
    if isinstance(node, exp.Bracket) and len(node.expressions) == 1 and isinstance(node.expressions[0], exp.Slice):
        inner, _ = _list(rel, node.this, what)
        bounds = node.expressions[0]
        for part in (bounds.this, bounds.expression):
            if part is not None:
                check_rowwise(part, what, rel.table.name)
        out = node.copy()
        out.set("this", inner)
        return out, _slice_length(bounds.this, bounds.expression)
    if isinstance(node, exp.Anonymous) and node.name.lower() == "list_slice" and len(node.expressions) == 3:
        inner, _ = _list(rel, node.expressions[0], what)
        for part in node.expressions[1:]:
            check_rowwise(part, what, rel.table.name)
        out = node.copy()
        out.set("expressions", [inner, *(e.copy() for e in node.expressions[1:])])
        return out, _slice_length(node.expressions[1], node.expressions[2])
    limit = None
    if isinstance(node, exp.Column):
        return rel.column(node, what), limit
    if isinstance(node, _SPLITS) or (isinstance(node, exp.Anonymous) and node.name.lower() in _SPLIT_NAMES):
        parts = [node.this, node.expression] if isinstance(node, _SPLITS) else list(node.expressions)
        if len(parts) != 2 or not isinstance(parts[1], exp.Literal) or not parts[1].is_string:
            _refuse(f"{what}: split a value by a literal separator, e.g. string_split(x, ',')")
        check_rowwise(parts[0], what, rel.table.name)
        value = rel.substitute(parts[0], what)
        out = node.copy()
        if isinstance(node, _SPLITS):
            out.set("this", value)
        else:
            out.set("expressions", [value, parts[1].copy()])
        return out, limit
    _refuse(f"{what} of {_sql(node)[:50]} is not supported: unnest a list column or string_split(x, ',')")


def _slice_length(begin: exp.Expression | None, end: exp.Expression | None) -> int | None:
    def lit(n: exp.Expression | None) -> int | None:
        if isinstance(n, exp.Literal) and not n.is_string and str(n.this).isdigit():
            return int(n.this)
        return None
    b, e = lit(begin) if begin is not None else 1, lit(end)
    if b is None or e is None or b < 1 or e < b:
        return None
    return e - b + 1


