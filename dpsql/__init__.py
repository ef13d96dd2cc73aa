"""dpsql: differentially private SQL for DuckDB.

    >>> import dpsql
    >>> con = dpsql.connect("data.duckdb", policy="policy.toml")
    >>> con.sql("SELECT DP_MEAN(age) FROM adult WITH (epsilon = 1)").fetchall()

The public surface is :data:`__all__`: :func:`connect`, :class:`Connection`, :class:`Result`,
:class:`BudgetStatus` and the errors, with :mod:`dpsql.dbapi` (the DB-API 2.0 driver). Two
packages are documented extension points: :mod:`dpsql.mechanisms` (a mechanism is one module
keeping the contract of :mod:`dpsql.mechanisms.base`) and :mod:`dpsql.backends` (an engine is
a :class:`~dpsql.backends.Backend` and a :class:`~dpsql.backends.Compiler`). Packages whose
names start with ``_`` are internal and change without notice.

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

#: submodules reachable as attributes of the package before they are imported
_MODULES = ("dbapi", "mechanisms", "backends")

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
    if name in _MODULES:  # the DB-API 2.0 module (PEP 249) and the two extension points
        return importlib.import_module(f"dpsql.{name}")
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'dpsql' has no attribute {name!r}")


def load_ipython_extension(ipython: t.Any) -> None:
    """``%load_ext dpsql``: register the ``%%dpsql`` cell magic (:mod:`dpsql.interfaces.notebook`)."""
    from dpsql.interfaces.notebook import load_ipython_extension as load

    load(ipython)
