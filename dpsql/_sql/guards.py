"""Refusals that depend on what a statement *is* or *calls*, for public and DP queries alike.

Statements that are not queries, and file, settings and catalog functions anywhere in a query.
What may appear in an expression over private rows is decided by the allowlist of
:mod:`dpsql._sql.allow`. Each check raises :class:`~dpsql.errors.PrivacyError` with one line.
"""

from __future__ import annotations

import typing as t

from sqlglot import exp

from dpsql._sql.suggest import check_dp_function_names
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
            refuse(name + " statements are not allowed; dpsql answers SELECT queries only")
    if not isinstance(query, exp.Query):
        refuse("only SELECT queries are allowed, not " + type(query).__name__.upper())


def check_functions(query: exp.Expression) -> None:
    """File, settings and catalog functions are refused anywhere in a query; so is a misspelled
    DP aggregate (``DP_MEDAN``), by name, before it can read as a plain function."""
    check_dp_function_names(query)
    for node in query.find_all(exp.Anonymous, exp.Func):
        name = (node.name if isinstance(node, exp.Anonymous) else node.sql_name()).lower()
        if name.startswith(("read_", "duckdb_", "pragma_", "glob", "sniff_")) or name in (
            "current_setting",
            "getenv",
            "query",
            "query_table",
        ):
            refuse(f"function {name}() is not allowed in dpsql queries")
