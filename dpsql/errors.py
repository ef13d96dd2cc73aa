"""The exceptions dpsql raises.

Every error carries one line that names the problem (the key, the column, the
table). The CLI prints ``Error: <message>`` and nothing else.
"""

from __future__ import annotations


class Error(Exception):
    """Base class of every dpsql error."""


class ParseError(Error):
    """The statement is not valid dpsql SQL."""


class OptionError(Error):
    """A key or value of the trailing ``WITH (...)`` options clause is wrong."""


class PolicyError(Error):
    """The policy file is missing, malformed or inconsistent."""


class BindError(Error):
    """A table, column or function the query names does not exist."""


class PrivacyError(Error):
    """The query is refused because answering it could expose private data."""


class BudgetError(PrivacyError):
    """The query would exceed the remaining privacy budget (nothing was charged)."""


class LedgerError(PrivacyError):
    """The budget ledger is missing, corrupted or unwritable; dpsql refuses to answer."""


class ExecutionError(Error):
    """DuckDB failed while computing the statistics of an accepted query."""


class InternalError(Error):
    """An invariant of dpsql's own code does not hold (a bug, never the analyst's fault).

    Its message is fixed text and never holds a value computed from the data: raised while
    releasing a result, it is reported as :class:`ExecutionError` without any details.
    """
