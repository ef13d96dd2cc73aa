"""DuckDB's own types of the parts of an arithmetic expression, without any table.

A range check that does not know the type of what it checks has to read it from ``typeof(...)``
in a CASE over every integer, decimal and temporal type, which DuckDB folds when it plans, but
planning that text costs about 3 ms per operation and 1-2 ms per leaf (TPC-H Q1 took four times
as long). The types are known before the statement exists: the query's columns have catalog
types. So each expression is typed by DuckDB's binder itself, over one row of NULL columns of
those types in place of the table (``SELECT typeof(c0 * (1 - c1)) FROM (SELECT CAST(NULL AS
DECIMAL(15,2)) AS c0, ...)``), in a connection of its own that holds no table and reads no file: nothing of the data, nor of the
query's tables, is involved. Where a column's type is not known (a name two tables type
differently, a column the rewrite made), or DuckDB cannot type the text, the answer is None and
the check stays the general one.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import threading
import typing as t

from sqlglot import exp
from sqlglot.errors import SqlglotError

#: Column name (lower case) → DuckDB type, for the query being planned.
_COLUMNS: contextvars.ContextVar[t.Mapping[str, str] | None] = contextvars.ContextVar("columns", default=None)
_LOCK = threading.Lock()


@contextlib.contextmanager
def columns(types: t.Mapping[str, str]) -> t.Iterator[None]:
    """Plan with these column types (name → DuckDB type) known."""
    token = _COLUMNS.set(types)
    try:
        yield
    finally:
        _COLUMNS.reset(token)


def known() -> t.Mapping[str, str] | None:
    """The column types of the query being planned (None: not known, as on Spark)."""
    return _COLUMNS.get()


def merged(tables: t.Iterable[t.Mapping[str, str] | None]) -> dict[str, str]:
    """One name → type map from several tables' columns; a name typed differently is left out.

    >>> merged([{"a": "INTEGER", "b": "DATE"}, {"a": "BIGINT", "c": "DOUBLE"}, None])
    {'b': 'DATE', 'c': 'DOUBLE'}
    """
    out: dict[str, str] = {}
    clash: set[str] = set()
    for cols in tables:
        for name, typ in (cols or {}).items():
            if out.setdefault(name, typ) != typ:
                clash.add(name)
    return {k: v for k, v in out.items() if k not in clash}


class _Unknown(Exception):
    pass


def typed(node: exp.Expression, names: dict[str, str]) -> exp.Expression:
    """``node`` with each column read from the row of typed NULLs (:func:`types_of` builds it),
    its name in ``names`` (column → that row's name); raises :class:`_Unknown` for a column
    whose type is not known.

    >>> names = {}
    >>> with columns({"a": "INTEGER"}):
    ...     typed(exp.column("a") + 1, names).sql("duckdb"), names
    ('c0 + 1', {'a': 'c0'})
    """
    types = _COLUMNS.get() or {}

    def swap(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Column):
            name = n.name.lower()
            if types.get(name) is None or n.name.startswith("__"):
                raise _Unknown(n.name)
            return exp.column(names.setdefault(name, f"c{len(names)}"))
        if isinstance(n, (exp.Query, exp.Subquery, exp.Lambda)):
            raise _Unknown(type(n).__name__)
        return n

    return node.copy().transform(swap, copy=False)


def _row(names: dict[str, str]) -> exp.Expression:
    """One row of NULLs of the columns' types, as a subquery: DuckDB before 2.0 folds arithmetic
    over NULL constants to a constant of type "NULL", but not over a subquery's columns."""
    types = _COLUMNS.get() or {}
    cols = []
    for name, alias in names.items():
        try:
            cols.append(exp.alias_(exp.Cast(this=exp.null(), to=_data_type(types[name]).copy()), alias))
        except SqlglotError as err:  # a type sqlglot cannot read (an ENUM's value list...)
            raise _Unknown(types[name]) from err
    return exp.select(*cols).subquery("__row") if cols else exp.select(exp.Literal.number(1)).subquery("__row")


@functools.lru_cache(maxsize=1024)
def _data_type(name: str) -> exp.DataType:
    return exp.DataType.build(name, dialect="duckdb")


@functools.cache
def _scratch() -> t.Any:
    import duckdb

    return duckdb.connect(config={"enable_external_access": False})


@functools.lru_cache(maxsize=4096)
def _typeof(sql: str) -> tuple[str, ...] | None:
    import duckdb

    try:
        with _LOCK:
            row = _scratch().execute(sql).fetchone()
    except duckdb.Error:
        return None
    return tuple(row) if row is not None else None


def types_of(nodes: t.Sequence[exp.Expression]) -> list[str] | None:
    """DuckDB's type of each of ``nodes`` (row-level expressions over the query's columns), or
    None when one of them cannot be typed without the data.

    >>> with columns({"p": "DECIMAL(15,2)", "n": "INTEGER"}):
    ...     types_of([exp.column("p") * 2, exp.column("n") + 1, exp.column("z")])
    >>> with columns({"p": "DECIMAL(15,2)", "n": "INTEGER"}):
    ...     types_of([exp.column("p") * 2, exp.column("n") + 1])
    ['DECIMAL(18,2)', 'INTEGER']
    """
    if not _COLUMNS.get() or not nodes:  # none known (or a target that takes the checks out)
        return None
    names: dict[str, str] = {}
    try:  # one statement, printed once (each print sets up a generator)
        reads = [exp.Anonymous(this="typeof", expressions=[typed(n, names)]) for n in nodes]
        sql = exp.select(*reads).from_(_row(names)).sql("duckdb")
    except (_Unknown, ValueError, SqlglotError):
        return None
    out = _typeof(sql)
    if out is None or any("NULL" in typ for typ in out):  # a type only the data would give
        return None
    return list(out)
