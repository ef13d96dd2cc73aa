"""The columns a statement returns (names and PostgreSQL types), known before any data is read.

A client's Describe is answered here, from the plan: the group keys take the DuckDB type of
their GROUP BY expression (the engine, DuckDB or Spark, binds the statistics query without
running it), a released
count is ``int8`` and every other released statistic ``float8``; the post-processing SELECT
(HAVING, ORDER BY, expressions) is then bound over an empty table of those types in a DuckDB
that holds nothing else. A public query is bound by DuckDB the same way. Nothing is read and
nothing is charged, and the rows an Execute returns are cast to exactly these types.
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass

import duckdb
import pyarrow as pa

from dpsql._sql import build
from dpsql._sql.statistics import Statistic
from dpsql.backends.backend import Backend
from dpsql.backends.sandbox import harden
from dpsql.errors import BindError

if t.TYPE_CHECKING:
    from dpsql._query.pipeline import PreparedQuery
    from dpsql.connection import Connection

# PostgreSQL type OIDs (fixed by PostgreSQL; the same numbers every client knows)
BOOL, BYTEA, INT8, INT2, INT4, TEXT = 16, 17, 20, 21, 23, 25
FLOAT4, FLOAT8, DATE, TIME, TIMESTAMP, TIMESTAMPTZ, INTERVAL, NUMERIC = 700, 701, 1082, 1083, 1114, 1184, 1186, 1700

#: PostgreSQL type names of the OIDs above (for the catalog)
PG_NAMES = {BOOL: "boolean", BYTEA: "bytea", INT8: "bigint", INT2: "smallint", INT4: "integer", TEXT: "text",
            FLOAT4: "real", FLOAT8: "double precision", DATE: "date", TIME: "time", TIMESTAMP: "timestamp",
            TIMESTAMPTZ: "timestamptz", INTERVAL: "interval", NUMERIC: "numeric"}

_ARROW_TYPES = {BOOL: pa.bool_(), INT2: pa.int16(), INT4: pa.int32(), INT8: pa.int64(), FLOAT4: pa.float32(),
                FLOAT8: pa.float64(), TEXT: pa.string(), DATE: pa.date32(), BYTEA: pa.binary(),
                TIME: pa.time64("us"), TIMESTAMP: pa.timestamp("us"), TIMESTAMPTZ: pa.timestamp("us", tz="UTC"),
                INTERVAL: pa.duration("us")}


@dataclass(frozen=True)
class Column:
    name: str
    oid: int


def oid_of_duckdb(dtype: str) -> int:
    """The PostgreSQL type of a DuckDB type name; text for anything without a close match."""
    name = dtype.upper().strip()
    if name.startswith(("DECIMAL", "NUMERIC")) or name in ("HUGEINT", "UHUGEINT", "UBIGINT"):
        return NUMERIC
    simple = {"BOOLEAN": BOOL, "TINYINT": INT2, "SMALLINT": INT2, "UTINYINT": INT2, "INTEGER": INT4,
              "USMALLINT": INT4, "BIGINT": INT8, "UINTEGER": INT8, "FLOAT": FLOAT4, "REAL": FLOAT4,
              "DOUBLE": FLOAT8, "VARCHAR": TEXT, "DATE": DATE, "TIME": TIME, "TIMESTAMP": TIMESTAMP,
              "TIMESTAMP_US": TIMESTAMP, "TIMESTAMP WITH TIME ZONE": TIMESTAMPTZ, "INTERVAL": INTERVAL,
              "BLOB": BYTEA}
    return simple.get(name, TEXT)


def oid_of_arrow(dtype: pa.DataType) -> int:
    """The PostgreSQL type of an Arrow type (the result of a catalog statement)."""
    if pa.types.is_boolean(dtype):
        return BOOL
    if pa.types.is_int8(dtype) or pa.types.is_int16(dtype) or pa.types.is_uint8(dtype):
        return INT2
    if pa.types.is_int32(dtype) or pa.types.is_uint16(dtype):
        return INT4
    if pa.types.is_integer(dtype):
        return INT8
    if pa.types.is_float16(dtype) or pa.types.is_float32(dtype):
        return FLOAT4
    if pa.types.is_floating(dtype):
        return FLOAT8
    if pa.types.is_decimal(dtype):
        return NUMERIC
    if pa.types.is_date(dtype):
        return DATE
    if pa.types.is_timestamp(dtype):
        return TIMESTAMPTZ if dtype.tz else TIMESTAMP
    return TEXT


class Binder:
    """Binds SELECTs over typed empty tables, in a locked-down in-memory DuckDB (one per worker)."""

    def __init__(self) -> None:
        self.scratch = duckdb.connect(":memory:")
        harden(self.scratch)

    def close(self) -> None:
        self.scratch.close()

    def columns(self, con: Connection, prepared: PreparedQuery) -> list[Column]:
        """Names and types of what ``prepared`` returns (reads no data, charges nothing)."""
        if prepared.explain:
            return [Column("explain", TEXT)]
        if prepared.plan is None or prepared.rewritten is None:
            return bind_columns(con.engine, prepared.sql)
        plan, bound = prepared.plan, prepared.bound
        nkeys = len(prepared.rewritten.keys)
        rewritten = prepared.rewritten
        key_types = [oid for _, oid in _described(con.engine, rewritten.statement, rewritten.arrow_tables)[:nkeys]]
        noisy = {name: _ARROW_TYPES.get(oid, pa.string()) if oid != NUMERIC else pa.float64()
                 for name, oid in zip(build.keys(nkeys), key_types)}
        for p in plan.prepared:
            noisy[build.agg(p.agg.index)] = pa.int64() if p.agg.statistic is Statistic.COUNT else pa.float64()
        assert bound.outer is not None
        if bound.outer_columns is not None:
            return [Column(name, oid_of_arrow(noisy[c])) for name, c in zip(bound.output_names, bound.outer_columns)]
        empty = pa.table({name: pa.array([], type=dtype) for name, dtype in noisy.items()})
        self.scratch.register(build.NOISY, empty)
        try:
            table = self.scratch.sql(bound.outer.sql(dialect="duckdb")).to_arrow_table()
        finally:
            self.scratch.unregister(build.NOISY)
        return [Column(f.name, oid_of_arrow(f.type)) for f in table.schema]


def _described(engine: Backend, sql: str, tables: t.Mapping[str, pa.Table] | None = None) -> list[tuple[str, int]]:
    """Names and types of the statement ``sql`` the engine runs, bound by it without running it
    (``tables``: relations it reads that the engine is handed as data)."""
    return [(name, oid_of_duckdb(dtype)) for name, dtype in engine.described(sql, tables)]


def bind_columns(engine: Backend, sql: str) -> list[Column]:
    """Names and types of a query the engine binds without running it."""
    return [Column(name, oid) for name, oid in _described(engine, sql)]


def conform(table: pa.Table, columns: list[Column]) -> list[tuple[t.Any, ...]]:
    """The rows of ``table`` as Python values of the declared column types."""
    if table.num_columns != len(columns):
        raise BindError(f"the statement returned {table.num_columns} columns, not the {len(columns)} described")
    arrays = []
    for array, col in zip(table.columns, columns):
        target = _ARROW_TYPES.get(col.oid)
        if target is not None and array.type != target:
            if col.oid == TEXT and not (pa.types.is_string(array.type) or pa.types.is_null(array.type)):
                arrays.append([None if v is None else str(v) for v in array.to_pylist()])
                continue
            array = array.cast(target)
        arrays.append(array.to_pylist())
    return list(zip(*arrays)) if arrays else []


__all__ = ["Binder", "Column", "PG_NAMES", "bind_columns", "conform", "oid_of_arrow", "oid_of_duckdb"]
