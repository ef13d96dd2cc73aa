"""dpsql as a DB-API 2.0 (PEP 249) driver, over :func:`dpsql.connect` and :class:`dpsql.Connection`.

    >>> from dpsql import dbapi
    >>> con = dbapi.connect("people.duckdb", policy="policy.toml")  # doctest: +SKIP
    >>> cur = con.cursor()  # doctest: +SKIP
    >>> cur.execute("SELECT DP_MEAN(age) FROM people WHERE sex = ? WITH (epsilon = 0.5)", ["F"])  # doctest: +SKIP
    >>> cur.fetchall()  # doctest: +SKIP

Every statement goes through :meth:`dpsql.Connection.sql`: the same gate, the same budget, the
same noise. Parameters are bound by :mod:`dpsql.params` (literal nodes in the parsed statement).
``paramstyle`` is ``qmark``; a mapping binds ``$name`` placeholders instead.

Transactions: dpsql only reads, so ``commit()`` has nothing to commit and ``rollback()`` has
nothing to undo. A budget charge is never rolled back: it is committed to the ledger before any
noisy value is released, and a released value cannot be taken back.

dpsql's errors arrive as DB-API errors that are also the dpsql error they stand for: a refusal
is a :class:`ProgrammingError` and a :class:`dpsql.PrivacyError` (``except dpsql.BudgetError``
still works).
"""

from __future__ import annotations

import datetime as _dt
import time as _time
import typing as t
from collections.abc import Iterator, Mapping, Sequence

from dpsql import errors
from dpsql.params import ParameterError, ParameterValueError, bind_parameters

if t.TYPE_CHECKING:
    import pyarrow as pa

    from dpsql.connection import Connection as DPConnection
    from dpsql.result import Result

apilevel = "2.0"
#: threads may share the module, not connections (a DuckDB connection is not safe to share)
threadsafety = 1
paramstyle = "qmark"


# -- exceptions (PEP 249) ---------------------------------------------------------------------

class Warning(Exception):  # the name PEP 249 gives it (shadows the builtin here only)
    """Important warnings (never raised by dpsql, which refuses instead of warning)."""


class Error(Exception):
    """Base class of every DB-API error of this module."""


class InterfaceError(Error):
    """The driver is misused (a closed connection or cursor)."""


class DatabaseError(Error):
    """An error of the database (here: of dpsql or DuckDB)."""


class DataError(DatabaseError):
    """A parameter's value cannot be bound."""


class OperationalError(DatabaseError):
    """The database, the policy or the ledger cannot be opened or used; DuckDB failed."""


class IntegrityError(DatabaseError):
    """Never raised: dpsql does not write."""


class InternalError(DatabaseError):
    """An invariant of dpsql does not hold (a bug)."""


class ProgrammingError(DatabaseError):
    """The statement is wrong or refused: syntax, names, options, parameters, privacy."""


class NotSupportedError(DatabaseError):
    """A DB-API feature dpsql does not offer."""


# Each dpsql error as a DB-API error that still is the dpsql error.

class ParseError(ProgrammingError, errors.ParseError):
    """The statement is not valid dpsql SQL."""


class OptionError(ProgrammingError, errors.OptionError):
    """A key or value of ``WITH (...)`` is wrong."""


class BindError(ProgrammingError, errors.BindError):
    """A table, column or function the statement names does not exist."""


class PrivacyError(ProgrammingError, errors.PrivacyError):
    """The statement is refused because answering it could expose private data."""


class BudgetError(PrivacyError, errors.BudgetError):
    """The statement would exceed the remaining budget (nothing was charged)."""


class LedgerError(OperationalError, errors.LedgerError):
    """The ledger is missing, corrupted or unwritable."""


class PolicyError(OperationalError, errors.PolicyError):
    """The policy is missing, malformed or inconsistent with the database."""


class ExecutionError(OperationalError, errors.ExecutionError):
    """DuckDB failed while computing an accepted statement."""


class DPInternalError(InternalError, errors.InternalError):
    """An invariant of dpsql does not hold."""


class ParameterBindingError(ProgrammingError, ParameterError):
    """The parameters do not fit the placeholders (count, names, style or position)."""


class ParameterDataError(DataError, ParameterValueError):
    """A parameter's value cannot be a SQL literal."""


class OtherError(DatabaseError, errors.Error):
    """Any other dpsql error."""


_MAPPED: dict[type[BaseException], type[Error]] = {
    errors.ParseError: ParseError,
    errors.OptionError: OptionError,
    errors.BindError: BindError,
    errors.BudgetError: BudgetError,
    errors.LedgerError: LedgerError,
    errors.PrivacyError: PrivacyError,
    errors.PolicyError: PolicyError,
    errors.ExecutionError: ExecutionError,
    errors.InternalError: DPInternalError,
    ParameterError: ParameterBindingError,
    ParameterValueError: ParameterDataError,
    errors.Error: OtherError,
}


def as_dbapi_error(err: BaseException) -> BaseException:
    """The DB-API error that stands for ``err`` (a dpsql error), with its message and attributes;
    anything else is returned as it is."""
    if isinstance(err, Error):
        return err
    for cls in type(err).__mro__:
        target = _MAPPED.get(cls)
        if target is not None:
            new = target(*err.args)
            new.__dict__.update(err.__dict__)
            return new
    return err


# -- types and constructors (PEP 249) ---------------------------------------------------------

class DBAPITypeObject:
    """A type object: compares equal to each type code (a DuckDB type name) of its kind."""

    def __init__(self, name: str, *codes: str) -> None:
        self.name = name
        self.codes = frozenset(codes)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DBAPITypeObject):
            return other is self
        return isinstance(other, str) and other.upper() in self.codes

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"<dpsql.dbapi.{self.name}>"


STRING = DBAPITypeObject("STRING", "VARCHAR", "UUID", "JSON")
BINARY = DBAPITypeObject("BINARY", "BLOB")
NUMBER = DBAPITypeObject("NUMBER", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT",
                         "USMALLINT", "UINTEGER", "UBIGINT", "FLOAT", "DOUBLE", "DECIMAL", "BOOLEAN")
DATETIME = DBAPITypeObject("DATETIME", "DATE", "TIME", "TIMESTAMP", "TIMESTAMP WITH TIME ZONE", "INTERVAL")
ROWID = DBAPITypeObject("ROWID")  # dpsql has no row ids

Date = _dt.date
Time = _dt.time
Timestamp = _dt.datetime
Binary = bytes


def DateFromTicks(ticks: float) -> _dt.date:  # PEP 249's names
    return Date(*_time.localtime(ticks)[:3])


def TimeFromTicks(ticks: float) -> _dt.time:
    return Time(*_time.localtime(ticks)[3:6])


def TimestampFromTicks(ticks: float) -> _dt.datetime:
    return Timestamp(*_time.localtime(ticks)[:6])


def type_code(arrow_type: pa.DataType) -> str:
    """The DuckDB type name of an Arrow type: a ``description`` type code."""
    import pyarrow as pa

    checks: list[tuple[t.Callable[[pa.DataType], bool], str]] = [
        (pa.types.is_boolean, "BOOLEAN"), (pa.types.is_int8, "TINYINT"), (pa.types.is_int16, "SMALLINT"),
        (pa.types.is_int32, "INTEGER"), (pa.types.is_int64, "BIGINT"), (pa.types.is_uint8, "UTINYINT"),
        (pa.types.is_uint16, "USMALLINT"), (pa.types.is_uint32, "UINTEGER"), (pa.types.is_uint64, "UBIGINT"),
        (pa.types.is_float16, "FLOAT"), (pa.types.is_float32, "FLOAT"), (pa.types.is_float64, "DOUBLE"),
        (pa.types.is_decimal, "DECIMAL"), (pa.types.is_string, "VARCHAR"), (pa.types.is_large_string, "VARCHAR"),
        (pa.types.is_binary, "BLOB"), (pa.types.is_large_binary, "BLOB"), (pa.types.is_fixed_size_binary, "BLOB"),
        (pa.types.is_date, "DATE"), (pa.types.is_time, "TIME"), (pa.types.is_duration, "INTERVAL"),
        (pa.types.is_interval, "INTERVAL"), (pa.types.is_list, "LIST"), (pa.types.is_large_list, "LIST"),
        (pa.types.is_struct, "STRUCT"), (pa.types.is_map, "MAP"), (pa.types.is_null, "NULL"),
    ]
    if pa.types.is_timestamp(arrow_type):
        return "TIMESTAMP WITH TIME ZONE" if arrow_type.tz else "TIMESTAMP"
    if str(arrow_type) == "string_view":  # pyarrow >= 16
        return "VARCHAR"
    for check, name in checks:
        if check(arrow_type):
            return name
    return str(arrow_type).upper()


def describe(table: pa.Table) -> list[tuple[t.Any, ...]]:
    """PEP 249 ``description``: (name, type_code, display_size, internal_size, precision, scale, null_ok)."""
    out = []
    for field in table.schema:
        code = type_code(field.type)
        precision = getattr(field.type, "precision", None) if code == "DECIMAL" else None
        scale = getattr(field.type, "scale", None) if code == "DECIMAL" else None
        out.append((field.name, code, None, None, precision, scale, True))
    return out


# -- connection and cursor ----------------------------------------------------------------------

def connect(database: t.Any = ":memory:", policy: t.Any = None, **kwargs: t.Any) -> Connection:
    """Open a DB-API connection: the arguments are those of :func:`dpsql.connect` (``policy``,
    ``init_ledger``, ``read_only``, ``noise``, ``setup``), or ``connection=`` an open
    :class:`dpsql.Connection` to wrap."""
    wrapped = kwargs.pop("connection", None)
    if wrapped is None:
        from dpsql.connection import connect as dp_connect

        try:
            wrapped = dp_connect(database, policy, **kwargs)
        except errors.Error as err:
            raise as_dbapi_error(err) from None
    return Connection(wrapped)


class Connection:
    """A DB-API connection over a :class:`dpsql.Connection` (``.dpsql``)."""

    Warning = Warning
    Error = Error
    InterfaceError = InterfaceError
    DatabaseError = DatabaseError
    DataError = DataError
    OperationalError = OperationalError
    IntegrityError = IntegrityError
    InternalError = InternalError
    ProgrammingError = ProgrammingError
    NotSupportedError = NotSupportedError

    def __init__(self, connection: DPConnection) -> None:
        self._dpsql: DPConnection | None = connection

    @property
    def dpsql(self) -> DPConnection:
        """The :class:`dpsql.Connection` underneath (its budget, EXPLAIN, ...)."""
        if self._dpsql is None:
            raise InterfaceError("the connection is closed")
        return self._dpsql

    @property
    def closed(self) -> bool:
        return self._dpsql is None

    def cursor(self) -> Cursor:
        return Cursor(self)

    def commit(self) -> None:
        """Nothing to commit: dpsql only reads, and the ledger commits each charge by itself."""
        self.dpsql  # noqa: B018 - raises InterfaceError on a closed connection

    def rollback(self) -> None:
        """Nothing to undo: no statement writes, and a budget charge is never rolled back."""
        self.dpsql  # noqa: B018

    def close(self) -> None:
        """Close the dpsql connection (closing twice is allowed)."""
        if self._dpsql is not None:
            con, self._dpsql = self._dpsql, None
            con.close()

    def execute(self, operation: str, parameters: t.Any = None) -> Cursor:
        """A new cursor that has run ``operation`` (a shortcut, as in sqlite3 and duckdb)."""
        return self.cursor().execute(operation, parameters)

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Cursor:
    """A DB-API cursor. After ``execute``, ``result`` is the dpsql :class:`Result` (with its
    report of mechanisms, spend and intervals), and ``messages`` holds the report's lines."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.arraysize = 1
        self.result: Result | None = None
        self.messages: list[tuple[type, str]] = []
        self._rows: list[tuple[t.Any, ...]] = []
        self._position = 0
        self._description: list[tuple[t.Any, ...]] | None = None
        self._rowcount = -1
        self._closed = False

    # -- state ---------------------------------------------------------------------------------

    def _open(self) -> DPConnection:
        if self._closed:
            raise InterfaceError("the cursor is closed")
        if self.connection.closed:
            raise InterfaceError("the connection is closed")
        return self.connection.dpsql

    @property
    def description(self) -> list[tuple[t.Any, ...]] | None:
        return self._description

    @property
    def rowcount(self) -> int:
        """Rows of the last result set; -1 before any and after ``executemany``."""
        return self._rowcount

    @property
    def lastrowid(self) -> None:
        return None

    def close(self) -> None:
        self._closed = True
        self._rows, self.result = [], None

    # -- execution -----------------------------------------------------------------------------

    def execute(self, operation: str, parameters: Sequence[t.Any] | Mapping[str, t.Any] | None = None) -> Cursor:
        """Run one statement. Parameters are bound as literals of the parsed statement."""
        con = self._open()
        self._reset()
        try:
            text = operation if parameters is None else bind_parameters(operation, parameters)
            result = con.sql(text)
        except errors.Error as err:  # parameter errors included
            raise as_dbapi_error(err) from None
        self._take(result)
        return self

    def executemany(self, operation: str, seq_of_parameters: t.Iterable[t.Any]) -> Cursor:
        """Run ``operation`` once per parameter set; each run is a query of its own (and spends
        its own budget). No result set is kept."""
        for parameters in seq_of_parameters:
            self.execute(operation, parameters)
        self._reset()
        return self

    def _reset(self) -> None:
        self.result, self.messages = None, []
        self._rows, self._position, self._description, self._rowcount = [], 0, None, -1

    def _take(self, result: Result) -> None:
        self.result = result
        self._rows = result.fetchall()
        self._description = describe(result.table) if result.table.num_columns else None
        self._rowcount = len(self._rows) if self._description is not None else -1
        self.messages = [(Warning, line) for line in [*result.report_lines(), *result.notes]]

    # -- fetching ------------------------------------------------------------------------------

    def _result_set(self) -> list[tuple[t.Any, ...]]:
        self._open()
        if self._description is None:
            raise ProgrammingError("no result set: execute a query first")
        return self._rows

    def fetchone(self) -> tuple[t.Any, ...] | None:
        rows = self._result_set()
        if self._position >= len(rows):
            return None
        self._position += 1
        return rows[self._position - 1]

    def fetchmany(self, size: int | None = None) -> list[tuple[t.Any, ...]]:
        rows = self._result_set()
        n = self.arraysize if size is None else size
        out = rows[self._position:self._position + max(0, n)]
        self._position += len(out)
        return out

    def fetchall(self) -> list[tuple[t.Any, ...]]:
        rows = self._result_set()
        out = rows[self._position:]
        self._position = len(rows)
        return out

    def __iter__(self) -> Iterator[tuple[t.Any, ...]]:
        return self

    def __next__(self) -> tuple[t.Any, ...]:
        row = self.fetchone()
        if row is None:
            raise StopIteration
        return row

    # -- no-ops PEP 249 asks for -----------------------------------------------------------------

    def setinputsizes(self, sizes: t.Any) -> None:
        self._open()

    def setoutputsize(self, size: t.Any, column: t.Any = None) -> None:
        self._open()

    def nextset(self) -> None:
        """Every statement has at most one result set."""
        self._open()
        return None

    def callproc(self, procname: str, parameters: t.Any = None) -> t.Any:
        raise NotSupportedError("dpsql has no stored procedures")

    def __enter__(self) -> Cursor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
