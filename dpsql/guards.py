"""Refusals that depend on what a query *calls* or *is*, not on how it reads private rows.

Shared by the binder: statements that are not queries, file and system functions, functions
that can fail on chosen values or multiply rows, and what post-processing could only do after
the budget is charged. Each check raises :class:`~dpsql.errors.PrivacyError` with one line.
"""

from __future__ import annotations

import typing as t

from sqlglot import exp

from dpsql.dialect import DPAggregate
from dpsql.errors import PrivacyError


def refuse(msg: str) -> t.NoReturn:
    raise PrivacyError(msg)


#: Statement kinds that can never run through an analyst connection.
STATEMENT_NAMES = {
    exp.Create: "CREATE",
    exp.Insert: "INSERT",
    exp.Update: "UPDATE",
    exp.Delete: "DELETE",
    exp.Drop: "DROP",
    exp.Alter: "ALTER",
    exp.Pragma: "PRAGMA",
    exp.Set: "SET",
    exp.Attach: "ATTACH",
    exp.Detach: "DETACH",
    exp.Copy: "COPY",
    exp.Install: "INSTALL",
    exp.Use: "USE",
    exp.Merge: "MERGE",
    exp.Describe: "DESCRIBE",
}


def check_statement(query: exp.Expression) -> None:
    """Only queries: no DDL, DML, PRAGMA, SET, ATTACH, COPY, INSTALL, ..."""
    for kind, name in STATEMENT_NAMES.items():
        if isinstance(query, kind):
            refuse(f"{name} statements are not allowed; dpsql answers SELECT queries only")
    if not isinstance(query, exp.Query):
        refuse(f"only SELECT queries are allowed, not {type(query).__name__.upper()}")


def check_functions(query: exp.Expression) -> None:
    """File, settings and catalog functions are refused anywhere in a query."""
    for node in query.find_all(exp.Anonymous, exp.Func):
        name = (node.name if isinstance(node, exp.Anonymous) else node.sql_name()).lower()
        if name.startswith(("read_", "duckdb_", "pragma_", "glob", "sniff_")) or name in (
            "current_setting",
            "getenv",
            "query",
            "query_table",
        ):
            refuse(f"function {name}() is not allowed in dpsql queries")


#: Functions that fail (or stall, or write) on values the analyst chooses: a failure on some
#: rows would tell the analyst that such a row exists, so a DP query may not call them. (Other
#: failures, e.g. of CAST or chr(), are made impossible by the rewrite: TRY_CAST and TRY.)
FAILING_FUNCTIONS = ("error", "setseed", "setval", "nextval", "currval", "sleep_ms", "write_log")
#: Set-returning functions: in a select list they turn one row into many, multiplying what one
#: privacy unit contributes beyond the sensitivity the mechanisms assume.
ROW_MULTIPLYING = ("unnest", "generate_subscripts")


def check_total(node: exp.Expression, table: str, where: str) -> None:
    """Refuse calls that can fail on chosen values and calls that multiply rows (new refusals)."""
    for fn in node.find_all(exp.Anonymous, exp.Explode, exp.Unnest):
        name = "unnest" if isinstance(fn, (exp.Explode, exp.Unnest)) else fn.name.lower()
        if name in ROW_MULTIPLYING:
            refuse(
                f"{name}() is not allowed in {where} of a DP query over {table}: it turns one row "
                "into many, so one person could count more than once"
            )
        if name in FAILING_FUNCTIONS:
            refuse(
                f"function {name}() is not allowed in {where} of a DP query over {table}: "
                "whether it fails would reveal whether some row exists"
            )


def check_post_processing(select: exp.Select, table: str) -> None:
    """Refuse what the post-processing SELECT over the noisy rows cannot run (new refusals).

    The select list, HAVING, ORDER BY, LIMIT and OFFSET run on the noisy table alone, after the
    budget is charged: a subquery there (it would read tables the noisy table does not hold), a
    window, a FILTER clause, a non-DP aggregate or a failing function would only fail after the
    charge.
    """
    parts = [("the select list", p) for p in select.expressions]
    for key, what in (("having", "HAVING"), ("order", "ORDER BY"), ("limit", "LIMIT"), ("offset", "OFFSET")):
        if select.args.get(key) is not None:
            parts.append((what, select.args[key]))
    for what, node in parts:
        if node.find(exp.Subquery, exp.Exists, exp.Select):
            refuse(f"subqueries are not allowed in {what} of a DP query over {table}")
        if node.find(exp.Window):
            refuse(f"window functions are not allowed in {what} of a DP query over {table}")
        if node.find(exp.Filter):
            refuse("FILTER (WHERE ...) is not supported on DP aggregates; put the condition in WHERE")
        for fn in node.find_all(exp.AggFunc):
            if not isinstance(fn, DPAggregate) and fn.find_ancestor(DPAggregate) is None:
                refuse(
                    f"aggregate {fn.sql_name().lower()}() over private table {table} is not "
                    "differentially private; use a DP aggregate (DP_COUNT, DP_SUM, DP_MEAN, ...)"
                )
        check_total(node, table, what)
