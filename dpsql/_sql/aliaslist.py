"""Column alias lists on a FROM subquery: ``(SELECT ...) AS name (a, b)``.

SQL names a derived table's columns by the list, position by position; DuckDB lets the list be
shorter than the select list (the rest keep their names) and refuses a longer one. The list is
mapped onto the subquery's select list here, before anything is resolved: each of the first
``len(list)`` projections gets the list's name as its alias, and the subquery is bound as if it
had been written so. That is a rewrite of names only; no row or value changes, so the privacy
argument of whatever the subquery is (row-wise, or one row per unit) is the one it already has.

The same holds for a CTE's list, ``WITH name (a, b) AS (...)``. A select list with ``*`` is refused (its columns' positions come from the catalog, and a name
list over them is easy to misread): write the columns out.
"""

from __future__ import annotations

import typing as t

from sqlglot import exp

from dpsql.errors import BindError, PrivacyError


def _refuse(msg: str) -> t.NoReturn:
    raise PrivacyError(msg)


def apply_alias_list(item: exp.Subquery) -> exp.Subquery:
    """``item`` with its alias's column list moved onto its select list (``item`` itself when it
    has none).

    >>> import sqlglot
    >>> q = sqlglot.parse_one("SELECT * FROM (SELECT k, count(v) FROM t GROUP BY k) AS c (key, n)")
    >>> apply_alias_list(q.args["from_"].this).sql()
    '(SELECT k AS key, COUNT(v) AS n FROM t GROUP BY k) AS c'
    >>> apply_alias_list(sqlglot.parse_one("SELECT * FROM (SELECT a, b FROM t) AS c (x)").args["from_"].this).sql()
    '(SELECT a AS x, b FROM t) AS c'
    """
    alias = item.args.get("alias")
    if alias is None or not alias.args.get("columns"):
        return item
    new_alias = alias.copy()
    new_alias.set("columns", None)
    return exp.Subquery(this=renamed(item.this, alias), alias=new_alias)


def renamed(query: exp.Expression, alias: exp.TableAlias | None) -> exp.Expression:
    """``query`` with the first projections named by ``alias``'s column list (a FROM subquery's
    ``AS name (a, b)`` or a CTE's ``name (a, b) AS``); ``query`` itself when there is none."""
    names = list(alias.args.get("columns") or []) if alias is not None else []
    if not names:
        return query
    shown = alias.name or "the subquery"
    if not isinstance(query, exp.Select):
        _refuse(f"column aliases on {shown} need a plain SELECT inside; rename columns in its SELECT instead")
    projections = list(query.expressions)
    if any(isinstance(p, exp.Star) or (isinstance(p, exp.Column) and isinstance(p.this, exp.Star))
           for p in projections):
        _refuse(f"column aliases on {shown} cannot name the columns of a *; list the columns in its SELECT")
    if len(names) > len(projections):
        raise BindError(f"{shown} has {len(names)} column aliases but its SELECT has {len(projections)} "
                        "columns; give at most one name per column")
    out = query.copy()
    projs = []
    for k, proj in enumerate(out.expressions):
        if k < len(names):
            value = proj.this if isinstance(proj, exp.Alias) else proj
            proj = exp.Alias(this=value, alias=names[k].copy())
        projs.append(proj)
    out.set("expressions", projs)
    return out
