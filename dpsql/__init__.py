"""dpsql: differentially private SQL for DuckDB.

    >>> import dpsql
    >>> con = dpsql.connect("data.duckdb", policy="policy.toml")
    >>> con.sql("SELECT DP_MEAN(age) FROM adult WITH (epsilon = 1)").fetchall()

The errors are imported eagerly; the rest on first use, so that the command starts quickly.
In IPython or Jupyter, ``%load_ext dpsql`` adds the ``%%dpsql`` cell magic.
"""

from __future__ import annotations

import importlib
import typing as t

from dpsql.errors import (
    BindError,
    BudgetError,
    Error,
    ExecutionError,
    LedgerError,
    OptionError,
    ParseError,
    PolicyError,
    PrivacyError,
    QueryCancelled,
)

if t.TYPE_CHECKING:
    from dpsql.connection import BudgetStatus, Connection, connect
    from dpsql.result import Result

__version__ = "0.1.0"

_LAZY = {
    "BudgetStatus": "dpsql.budget_status",
    "Connection": "dpsql.connection",
    "connect": "dpsql.connection",
    "Result": "dpsql.result",
}

__all__ = [
    "BindError",
    "BudgetError",
    "BudgetStatus",
    "Connection",
    "Error",
    "ExecutionError",
    "LedgerError",
    "OptionError",
    "ParseError",
    "PolicyError",
    "PrivacyError",
    "QueryCancelled",
    "Result",
    "connect",
]


def __getattr__(name: str) -> t.Any:
    if name == "dbapi":  # the DB-API 2.0 module (PEP 249)
        return importlib.import_module("dpsql.dbapi")
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'dpsql' has no attribute {name!r}")


def load_ipython_extension(ipython: t.Any) -> None:
    """``%load_ext dpsql``: register the ``%%dpsql`` cell magic (:mod:`dpsql.interfaces.notebook`)."""
    from dpsql.interfaces.notebook import load_ipython_extension as load

    load(ipython)
