"""dpsql: differentially private SQL for DuckDB.

    >>> import dpsql
    >>> con = dpsql.connect("data.duckdb", policy="policy.toml")
    >>> con.sql("SELECT DP_MEAN(age) FROM adult WITH (epsilon = 1)").fetchall()
"""

from dpsql.connection import BudgetStatus, Connection, connect
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
)
from dpsql.result import Result

__version__ = "0.1.0"

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
    "Result",
    "connect",
]
