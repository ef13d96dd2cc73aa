"""The SQLAlchemy dialect ``dpsql`` (SQLAlchemy 1.4 and 2.x), over :mod:`dpsql.dbapi`.

    create_engine("dpsql:///people.duckdb?policy=policy.toml")
    create_engine("dpsql:///:memory:?demo=1")          # the bundled Adult demo

URL: the path is the DuckDB database (``dpsql:///relative.duckdb``, ``dpsql:////absolute.duckdb``,
``dpsql:///:memory:``); query keys ``policy`` (a TOML or YAML file), ``read_only`` and
``init_ledger`` (``1``/``true``), ``demo`` (``1``: the in-memory Adult table and its policy).
Registered under the entry point group ``sqlalchemy.dialects``.

Reflection is answered from the policy through dpsql's own catalog statements
(``information_schema``): only declared tables that exist, with their columns and DuckDB types;
no views, keys, indexes or constraints. Core's ``select()`` compiles to plain SQL with ``?``
parameters; DP options go at the end with ``select(...).with_statement_hint("WITH (epsilon = 1)")``.
"""

from __future__ import annotations

import re
import typing as t

import sqlalchemy
from sqlalchemy import types as sqltypes
from sqlalchemy.engine import default
from sqlalchemy.pool import QueuePool, SingletonThreadPool

from dpsql import dbapi as dpsql_dbapi

if t.TYPE_CHECKING:  # SQLAlchemy 2's reflection types (1.4 has none; the annotations stay strings)
    from sqlalchemy.engine.interfaces import (
        IsolationLevel,
        ReflectedCheckConstraint,
        ReflectedColumn,
        ReflectedForeignKeyConstraint,
        ReflectedIndex,
        ReflectedPrimaryKeyConstraint,
        ReflectedTableComment,
        ReflectedUniqueConstraint,
    )

_MAJOR = int(sqlalchemy.__version__.split(".")[0])
_TRUE = ("1", "true", "yes", "on")

_TYPES: dict[str, t.Any] = {
    "BOOLEAN": sqltypes.BOOLEAN, "TINYINT": sqltypes.SMALLINT, "SMALLINT": sqltypes.SMALLINT,
    "INTEGER": sqltypes.INTEGER, "BIGINT": sqltypes.BIGINT, "HUGEINT": sqltypes.NUMERIC,
    "UTINYINT": sqltypes.SMALLINT, "USMALLINT": sqltypes.INTEGER, "UINTEGER": sqltypes.BIGINT,
    "UBIGINT": sqltypes.NUMERIC, "FLOAT": sqltypes.REAL, "REAL": sqltypes.REAL, "DOUBLE": sqltypes.FLOAT,
    "VARCHAR": sqltypes.VARCHAR, "UUID": sqltypes.VARCHAR, "BLOB": sqltypes.LargeBinary, "DATE": sqltypes.DATE,
    "TIME": sqltypes.TIME, "TIMESTAMP": sqltypes.TIMESTAMP, "INTERVAL": sqltypes.Interval,
}


def column_type(name: str) -> t.Any:
    """The SQLAlchemy type of a DuckDB type name (NullType for what it cannot express)."""
    upper = name.upper().strip()
    m = re.fullmatch(r"DECIMAL\((\d+),\s*(\d+)\)", upper)
    if m:
        return sqltypes.NUMERIC(int(m.group(1)), int(m.group(2)))
    if upper.startswith("TIMESTAMP WITH TIME ZONE") or upper == "TIMESTAMPTZ":
        return sqltypes.TIMESTAMP(timezone=True)
    if upper.startswith("TIMESTAMP"):
        return sqltypes.TIMESTAMP()
    cls = _TYPES.get(upper)
    return cls() if cls is not None else sqltypes.NullType()


class DpsqlDialect(default.DefaultDialect):
    """Dialect ``dpsql``: a DuckDB database seen through a privacy policy."""

    name = "dpsql"
    driver = "dpsql"
    paramstyle = "qmark"
    positional = True
    default_paramstyle = "qmark"
    supports_statement_cache = True
    supports_native_boolean = True
    supports_native_decimal = True
    supports_sane_rowcount = False
    supports_sane_multi_rowcount = False
    supports_alter = False
    supports_sequences = False
    supports_default_values = False
    supports_empty_insert = False
    supports_multivalues_insert = False
    postfetch_lastrowid = False
    returns_unicode_strings = True
    description_encoding = None
    default_schema_name = "main"

    if _MAJOR >= 2:
        @classmethod
        def import_dbapi(cls) -> t.Any:
            return dpsql_dbapi
    else:  # SQLAlchemy 1.4 asks the class for its DB-API module this way
        @classmethod
        def dbapi(cls) -> t.Any:  # type: ignore[override]
            return dpsql_dbapi

    @classmethod
    def get_pool_class(cls, url: t.Any) -> t.Any:
        # an in-memory database (the demo) lives and dies with its connection: one per thread
        return SingletonThreadPool if _in_memory(url) else QueuePool

    def create_connect_args(self, url: t.Any) -> tuple[list[t.Any], dict[str, t.Any]]:
        query = dict(url.query)
        database = url.database or ":memory:"
        kwargs: dict[str, t.Any] = {}
        unknown = set(query) - {"policy", "read_only", "init_ledger", "demo"}
        if unknown:
            raise dpsql_dbapi.InterfaceError(
                f"unknown dpsql URL option {sorted(unknown)[0]!r}: use policy, read_only, init_ledger or demo")
        if _flag(query.get("demo")):
            from dpsql.interfaces.demo import demo_policy_path, load_adult

            if database != ":memory:":
                raise dpsql_dbapi.InterfaceError("demo=1 needs an in-memory database: dpsql:///:memory:?demo=1")
            kwargs["setup"] = load_adult
            kwargs["policy"] = query.get("policy") or demo_policy_path()
        else:
            kwargs["policy"] = query.get("policy")
        for key in ("read_only", "init_ledger"):
            if key in query:
                kwargs[key] = _flag(query[key])
        return [database], kwargs

    def is_disconnect(self, e: t.Any, connection: t.Any, cursor: t.Any) -> bool:
        return isinstance(e, dpsql_dbapi.InterfaceError) and "closed" in str(e)

    def do_rollback(self, dbapi_connection: t.Any) -> None:
        dbapi_connection.rollback()

    def do_commit(self, dbapi_connection: t.Any) -> None:
        dbapi_connection.commit()

    def get_isolation_level(self, dbapi_connection: t.Any) -> IsolationLevel:
        return "AUTOCOMMIT"

    def get_default_isolation_level(self, dbapi_conn: t.Any) -> IsolationLevel:
        return "AUTOCOMMIT"

    def set_isolation_level(self, dbapi_connection: t.Any, level: str) -> None:
        if level != "AUTOCOMMIT":
            raise dpsql_dbapi.NotSupportedError("dpsql only reads: its one isolation level is AUTOCOMMIT")

    def _get_server_version_info(self, connection: t.Any) -> tuple[int, ...]:
        import dpsql

        return tuple(int(p) for p in dpsql.__version__.split(".") if p.isdigit())

    def _get_default_schema_name(self, connection: t.Any) -> str:
        return "main"

    # -- reflection, from the policy ------------------------------------------------------------

    def _rows(self, connection: t.Any, sql: str, params: tuple[t.Any, ...] = ()) -> list[tuple[t.Any, ...]]:
        return list(connection.exec_driver_sql(sql, params).fetchall())

    def get_schema_names(self, connection: t.Any, **kw: t.Any) -> list[str]:
        return sorted({r[0] for r in self._rows(connection, "SELECT table_schema FROM information_schema.tables")})

    def get_table_names(self, connection: t.Any, schema: str | None = None, **kw: t.Any) -> list[str]:
        rows = self._rows(connection, "SELECT table_name FROM information_schema.tables WHERE table_schema = ? "
                                      "ORDER BY table_name", (schema or "main",))
        return [r[0] for r in rows]

    def get_view_names(self, connection: t.Any, schema: str | None = None, **kw: t.Any) -> list[str]:
        return []

    def get_temp_table_names(self, connection: t.Any, schema: str | None = None, **kw: t.Any) -> list[str]:
        return []

    def get_temp_view_names(self, connection: t.Any, schema: str | None = None, **kw: t.Any) -> list[str]:
        return []

    def has_table(self, connection: t.Any, table_name: str, schema: str | None = None, **kw: t.Any) -> bool:
        return table_name.lower() in {n.lower() for n in self.get_table_names(connection, schema)}

    def get_columns(self, connection: t.Any, table_name: str, schema: str | None = None,
                    **kw: t.Any) -> list[ReflectedColumn]:
        rows = self._rows(connection, "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
                                      "WHERE table_schema = ? AND lower(table_name) = lower(?) ORDER BY ordinal_position",
                          (schema or "main", table_name))
        if not rows:
            from sqlalchemy.exc import NoSuchTableError

            raise NoSuchTableError(table_name)
        return [{"name": name, "type": column_type(dtype), "nullable": nullable != "NO", "default": None,
                 "autoincrement": False} for name, dtype, nullable in rows]

    def get_pk_constraint(self, connection: t.Any, table_name: str, schema: str | None = None,
                          **kw: t.Any) -> ReflectedPrimaryKeyConstraint:
        return {"constrained_columns": [], "name": None}

    def get_foreign_keys(self, connection: t.Any, table_name: str, schema: str | None = None,
                         **kw: t.Any) -> list[ReflectedForeignKeyConstraint]:
        return []

    def get_indexes(self, connection: t.Any, table_name: str, schema: str | None = None,
                    **kw: t.Any) -> list[ReflectedIndex]:
        return []

    def get_unique_constraints(self, connection: t.Any, table_name: str, schema: str | None = None,
                               **kw: t.Any) -> list[ReflectedUniqueConstraint]:
        return []

    def get_check_constraints(self, connection: t.Any, table_name: str, schema: str | None = None,
                              **kw: t.Any) -> list[ReflectedCheckConstraint]:
        return []

    def get_table_comment(self, connection: t.Any, table_name: str, schema: str | None = None,
                          **kw: t.Any) -> ReflectedTableComment:
        return {"text": None}

    def get_view_definition(self, connection: t.Any, view_name: str, schema: str | None = None,
                            **kw: t.Any) -> str:
        from sqlalchemy.exc import NoSuchTableError

        raise NoSuchTableError(view_name)


def _flag(value: t.Any) -> bool:
    return str(value).lower() in _TRUE if value is not None else False


def _in_memory(url: t.Any) -> bool:
    return (url.database or ":memory:") == ":memory:"


dialect = DpsqlDialect
