"""Catalog queries, answered from the policy: the declared tables (in schema ``public``) and
their columns with PostgreSQL types, never the data.

pg_mimic's middleware answers ``information_schema``, the ``pg_catalog`` tables psql's ``\\dt``
and ``\\d t`` read, ``SET name = value`` / ``SHOW name``, transaction control and session
functions (``version()``, ``current_database()``, ``current_schema()``, ...) from
:func:`schema`. The middleware here runs first and adds what clients send beyond that:
``SHOW`` of any length, the other forms of ``SET`` (and ``RESET``, ``DISCARD``,
``DEALLOCATE``: no-ops), and the JDBC driver's ``DatabaseMetaData`` queries (``getSchemas``,
``getTables``, ``getColumns``, ``getPrimaryKeys``, ``getIndexInfo``), which are recognised by
their shape and answered from the same declared tables, honouring the name patterns they filter
on. dpsql's own catalog statements (``SHOW TABLES``, ``DESCRIBE t``, ...) go to dpsql.
"""

from __future__ import annotations

import re
import typing as t

from pg_mimic import ResultColumn, StaticStatement

from .columns import BOOL, INT2, INT4, INT8, PG_NAMES, TEXT, oid_of_duckdb

if t.TYPE_CHECKING:
    from dpsql.connection import Connection

#: dpsql's own catalog statements: they go to dpsql (``Connection.sql`` answers them)
_DPSQL_CATALOG = re.compile(r"^\s*(SHOW\s+(ALL\s+)?TABLES|SHOW\s+COLUMNS\b|DESCRIBE\b|DESC\s)", re.IGNORECASE)
_SHOW = re.compile(r"^\s*SHOW\s+(?P<what>.+?)\s*;?\s*$", re.IGNORECASE | re.DOTALL)
_SET_SIMPLE = re.compile(r"^\s*SET\s+(?:SESSION\s+|LOCAL\s+)?\w+\s*(?:TO|=)\s*.+$", re.IGNORECASE | re.DOTALL)
_NO_OP = re.compile(r"^\s*(SET|RESET|DISCARD|DEALLOCATE|UNLISTEN|CLOSE\s+ALL)\b", re.IGNORECASE)
_KNOWN_SETTINGS = {"transaction isolation level": ("transaction_isolation", "read committed"),
                   "transaction_isolation": ("transaction_isolation", "read committed"),
                   "default_transaction_isolation": ("default_transaction_isolation", "read committed"),
                   "max_identifier_length": ("max_identifier_length", "63"),
                   "transaction_read_only": ("transaction_read_only", "on")}


def is_dpsql_statement(sql: str) -> bool:
    return bool(_DPSQL_CATALOG.match(sql))


def tables(con: Connection) -> dict[str, dict[str, int]]:
    """Declared table → column → PostgreSQL type OID, for the tables the database holds."""
    out = {}
    for name in con.tables():
        out[name] = {col: oid_of_duckdb(dtype) for col, dtype in (con.columns(name) or {}).items()}
    return out


def schema(declared: dict[str, dict[str, int]]) -> dict[str, dict[str, str]]:
    """``Session.schema()`` for pg_mimic: type names it maps to OIDs."""
    return {name: {col: PG_NAMES.get(oid, "text") for col, oid in cols.items()}
            for name, cols in declared.items()}


async def show(ctx: t.Any) -> StaticStatement | None:
    m = _SHOW.match(ctx.sql)
    if not m or is_dpsql_statement(ctx.sql):
        return None
    what = " ".join(m.group("what").lower().split())
    if " " not in what and what not in _KNOWN_SETTINGS:
        return None  # SHOW name: pg_mimic answers it from the session's settings
    name, value = _KNOWN_SETTINGS.get(what, (what.replace(" ", "_"), ""))
    return StaticStatement(ctx.sql, [ResultColumn(name, TEXT)], [(value,)])


async def no_op(ctx: t.Any) -> StaticStatement | None:
    if not _NO_OP.match(ctx.sql) or _SET_SIMPLE.match(ctx.sql):
        return None
    return StaticStatement(ctx.sql, None, [])


# -- JDBC DatabaseMetaData -----------------------------------------------------------------


def _like(sql: str, column: str) -> re.Pattern[str] | None:
    """The LIKE pattern a JDBC metadata query applies to ``column``, as a regex (None: any)."""
    m = re.search(rf"\b{column}\s+(?:I?LIKE)\s+E?'((?:[^']|'')*)'", sql, re.IGNORECASE)
    if not m:
        return None
    pattern, out, i = m.group(1).replace("''", "'"), "", 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out += re.escape(pattern[i + 1])
            i += 2
            continue
        out += ".*" if ch == "%" else "." if ch == "_" else re.escape(ch)
        i += 1
    return re.compile(out + r"\Z", re.DOTALL)


def _match(pattern: re.Pattern[str] | None, value: str) -> bool:
    return pattern is None or pattern.match(value) is not None


def _text_columns(*names: str) -> list[ResultColumn]:
    return [ResultColumn(n, TEXT) for n in names]


def jdbc(declared: dict[str, dict[str, int]]) -> t.Callable[[t.Any], t.Awaitable[StaticStatement | None]]:
    """The middleware answering the JDBC driver's DatabaseMetaData queries."""

    async def answer(ctx: t.Any) -> StaticStatement | None:
        sql = ctx.sql
        if "pg_catalog" not in sql.lower():
            return None
        if " AS TABLE_SCHEM" in sql and "pg_namespace" in sql and " AS TABLE_NAME" not in sql:
            rows = [(s, None) for s in ("public",) if _match(_like(sql, "nspname"), s)]
            return StaticStatement(sql, _text_columns("table_schem", "table_catalog"), rows)
        if " AS TABLE_NAME" in sql and " AS TABLE_TYPE" in sql:
            schema_ok = _match(_like(sql, "nspname"), "public")
            names = _like(sql, "relname")
            rows = [(None, "public", name, "TABLE", "", "", "", "", "", "")
                    for name in sorted(declared) if schema_ok and _match(names, name)]
            if "(false" in sql and "c.relkind = 'r'" not in sql:
                rows = []  # only other types (views, sequences, ...) were asked for: there are none
            return StaticStatement(sql, _text_columns(
                "table_cat", "table_schem", "table_name", "table_type", "remarks", "type_cat", "type_schem",
                "type_name", "self_referencing_col_name", "ref_generation"), rows)
        if sql.startswith("SELECT * FROM (SELECT n.nspname,c.relname,a.attname,a.atttypid,") \
                and "pg_attribute" in sql:
            return _columns_query(declared, sql)
        return None  # keys, indexes and the rest: pg_mimic's pg_catalog answers (no rows)

    return answer


def _columns_query(declared: dict[str, dict[str, int]], sql: str) -> StaticStatement:
    """JDBC ``getColumns``: the driver reads these columns by name and decodes the rest itself."""
    schema_ok = _match(_like(sql, "nspname"), "public")
    table_pattern, column_pattern = _like(sql, "relname"), _like(sql, "attname")
    rows = []
    for table, cols in sorted(declared.items()):
        if not schema_ok or not _match(table_pattern, table):
            continue
        for position, (col, oid) in enumerate(cols.items(), start=1):
            if _match(column_pattern, col):
                rows.append(("public", table, col, oid, False, -1, -1, -1, position, None, None, None, None, 0, "b"))
    # the driver's own SELECT list, in its order
    columns = [ResultColumn("nspname", TEXT), ResultColumn("relname", TEXT), ResultColumn("attname", TEXT),
               ResultColumn("atttypid", INT8), ResultColumn("attnotnull", BOOL), ResultColumn("atttypmod", INT4),
               ResultColumn("attlen", INT2), ResultColumn("typtypmod", INT4), ResultColumn("attnum", INT8),
               ResultColumn("attidentity", TEXT), ResultColumn("attgenerated", TEXT), ResultColumn("adsrc", TEXT),
               ResultColumn("description", TEXT), ResultColumn("typbasetype", INT8), ResultColumn("typtype", TEXT)]
    return StaticStatement(sql, columns, rows)


MIDDLEWARE = (show, no_op)
