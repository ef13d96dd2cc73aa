"""DuckDB as the engine that computes the exact statistics (the default :class:`Backend`).

The engine boundary of dpsql is :class:`~dpsql.backends.backend.Backend`: an engine knows its
catalog (tables, columns, types), can bind a SELECT without running it, runs a statistics query
and returns its rows. Planning, the budget and noise stay outside it; the post-processing
SELECT runs on the noisy rows in a DuckDB that holds nothing else.

Errors are sorted by when they happen: DuckDB's binder, catalog and parser errors come before
any row is read and depend on the query and the schema only, so their first line is shown
(:class:`~dpsql.errors.BindError`); any other error while reading data could depend on, or
quote, private values, so its details are withheld (:class:`~dpsql.errors.ExecutionError`).
"""

from __future__ import annotations

import contextlib
import threading
import typing as t

import duckdb

from dpsql._compile.target import DUCKDB
from dpsql.backends.backend import Backend, Tables
from dpsql.backends.sandbox import scalar
from dpsql.errors import BindError, ExecutionError

if t.TYPE_CHECKING:
    import pyarrow as pa

    from dpsql.backends.columns import Statistics

#: DuckDB errors raised while binding (before reading data): their messages are safe to show.
BIND_ERRORS = (duckdb.BinderException, duckdb.CatalogException, duckdb.ParserException)

STATISTICS_FAILED = (
    "DuckDB failed while computing the statistics; the details are withheld because they could "
    "depend on private values (nothing was charged)"
)

Rows = list[tuple[t.Any, ...]]


class DuckDBEngine(Backend):
    """A hardened DuckDB connection seen as dpsql's statistics engine."""

    name = "duckdb"
    target = DUCKDB
    place = "an in-memory DuckDB"
    default = True

    def __init__(self, con: duckdb.DuckDBPyConnection, located: t.Mapping[str, str] | None = None) -> None:
        super().__init__()
        self.connection = con
        #: the DuckDB catalog whose schema main holds the policy's tables
        self.database: str = scalar(con, "SELECT current_database()")
        #: the database files this connection reads (none in memory)
        self.files: tuple[str, ...] = tuple(
            path for (path,) in con.execute("SELECT path FROM duckdb_databases() WHERE path IS NOT NULL").fetchall()
        )
        self._catalog: dict[str, dict[str, str]] = {}
        # views dpsql created over data files on a database file live in temp (dpsql.backends.sources)
        self.located.update(located or {})
        self._lock = threading.Lock()

    # -- catalog ------------------------------------------------------------------------------

    def columns(self, table: str) -> dict[str, str] | None:
        """Column name (lower-case) → DuckDB type of ``table`` (``name`` in schema main,
        ``schema.name`` in this connection's database, or ``catalog.schema.name``), or None."""
        if table in self._catalog:
            return self._catalog[table]
        parts = table.lower().split(".")
        if len(parts) > 3:
            return None
        name, schema = parts[-1], parts[-2] if len(parts) > 1 else "main"
        rows = self.connection.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE lower(table_catalog) = ? AND lower(table_schema) = ? AND lower(table_name) = ? "
            "ORDER BY ordinal_position",
            [self.catalog_of(table).lower(), schema, name],
        ).fetchall()
        if not rows:
            return None
        # upper case, but not an ENUM's values ('flu' is not 'FLU')
        cols = {name.lower(): dtype if dtype.upper().startswith("ENUM") else dtype.upper() for name, dtype in rows}
        self._catalog[table] = cols
        return cols

    def catalog_of(self, table: str) -> str:
        """The DuckDB catalog of the policy's table ``table``: :meth:`Backend.catalog_of`, where
        views over data files on a database file are in ``temp`` (:mod:`dpsql.backends.sources`)."""
        return super().catalog_of(table) or self.database

    def catalog_rows(self, tables: t.Sequence[tuple[str, str, str, str]]) -> dict[str, "pa.Table"]:
        """DuckDB's own rows of ``information_schema.tables``, ``columns`` and ``schemata`` for
        these declared tables (policy key, catalog, schema, name) and schema main of the database."""
        where = [[catalog.lower(), schema, name] for _, catalog, schema, name in tables]
        schemata = sorted({(c, s) for c, s, _ in where} | {(self.database.lower(), "main")})
        # Fixed text: the names are one bound parameter, a list of [catalog, schema, name] lists.
        table = "list_contains(?, [lower(table_catalog), lower(table_schema), lower(table_name)])"
        queries = {
            "tables": ("SELECT * FROM information_schema.tables WHERE " + table
                       + " ORDER BY table_catalog, table_schema, table_name", where),
            "columns": ("SELECT * FROM information_schema.columns WHERE " + table
                        + " ORDER BY table_catalog, table_schema, table_name, ordinal_position", where),
            "schemata": ("SELECT * FROM information_schema.schemata WHERE list_contains(?, "
                         "[lower(catalog_name), lower(schema_name)]) ORDER BY catalog_name, schema_name",
                         [list(row) for row in schemata]),
        }
        return {view: self.connection.sql(select, params=[names]).to_arrow_table()
                for view, (select, names) in queries.items()}

    def data_files(self) -> tuple[str, ...]:
        """Files the locked-down DuckDB may still read (the views over data files read them)."""
        try:
            # fetchall: a result left unfinished would block the connection's next query
            value = self.connection.execute("SELECT current_setting('allowed_paths')").fetchall()[0][0]
        except duckdb.Error:
            return ()
        # DuckDB 1.4 reports each allowed path with a trailing slash (it still allows the file itself)
        return tuple(p[:-1] if len(p) > 1 and p.endswith("/") else p for p in value or ())

    def described(self, statement: str, tables: Tables | None = None) -> list[tuple[str, str]]:
        """Names and types of a statement, bound by DuckDB without running it (reads no data)."""
        try:
            with self.reading(tables) if tables else contextlib.nullcontext():
                rows = self.connection.execute(f"DESCRIBE {statement}").fetchall()
        except BIND_ERRORS as err:
            raise BindError(f"DuckDB cannot bind the query: {str(err).splitlines()[0]}") from None
        return [(str(row[0]), str(row[1])) for row in rows]

    # -- running ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def reading(self, tables: Tables) -> t.Iterator[None]:
        """``tables`` registered under their names while a statement runs, one statement at a
        time (a registration is seen by every statement of the connection)."""
        # DuckDB 2 registers nothing while a result of execute() is unfinished: the result is
        # dropped first, as the statement's own execute() would drop it
        settle = getattr(self.connection, "abort", None) or (lambda: None)
        with self._lock:
            settle()
            for name, table in tables.items():
                self.connection.register(name, table)
            try:
                yield
            finally:
                settle()
                for name in tables:
                    self.connection.unregister(name)

    def statistics(self, sql: str, tables: Tables | None = None) -> tuple[list[str], Rows]:
        """Run a statistics query: its column names and rows (exact: never shown to anyone).
        ``tables``: public relations the statement reads by name, handed over as Arrow data."""
        if tables:
            with self.reading(tables):
                return self.statistics(sql)
        try:
            cur = self.connection.execute(sql)
            rows = cur.fetchall()
            names = [d[0] for d in cur.description]
        except BIND_ERRORS as err:
            raise BindError(f"DuckDB cannot bind the query: {str(err).splitlines()[0]}") from None
        except duckdb.Error:
            raise ExecutionError(STATISTICS_FAILED) from None
        return names, rows

    def statistics_columns(self, sql: str, tables: Tables | None = None) -> tuple[list[str], "Statistics"]:
        """:meth:`statistics` as columns: fetched as Arrow when every column's type reads back
        as DuckDB's rows do (:mod:`dpsql.backends.columns`), else as rows, converted."""
        if tables:
            with self.reading(tables):
                return self.statistics_columns(sql)
        import warnings

        from dpsql.backends.columns import Statistics, arrow_types

        try:
            cur = self.connection.execute(sql)
            names = [d[0] for d in cur.description]
            types = [str(d[1]) for d in cur.description]
            stats = None
            if arrow_types(types):
                # fetch_arrow_table: DuckDB 1.4's name (the oldest supported), absent from newer stubs
                fetch = getattr(cur, "to_arrow_table", None) or cur.fetch_arrow_table  # type: ignore[attr-defined]
                with warnings.catch_warnings():
                    # "an extra copy of the rows": a few ms for 100,000 groups, and the
                    # relation API would refuse a connection with a result still open
                    warnings.simplefilter("ignore")
                    stats = Statistics.from_arrow(fetch(), types)
                if stats is None:  # an export this module does not read: run it again, as rows
                    cur = self.connection.execute(sql)
            if stats is None:
                stats = Statistics.from_rows(names, cur.fetchall())
        except BIND_ERRORS as err:
            raise BindError(f"DuckDB cannot bind the query: {str(err).splitlines()[0]}") from None
        except Exception:  # DuckDB's, or Arrow's while reading the rows: details withheld
            raise ExecutionError(STATISTICS_FAILED) from None
        return names, stats

    def public(self, sql: str) -> "pa.Table":
        """Run a query that reads public tables only."""
        import pyarrow as pa

        try:
            rel = self.connection.sql(sql)
            return rel.to_arrow_table() if rel is not None else pa.table({})
        except duckdb.Error as err:
            raise ExecutionError(str(err).splitlines()[0]) from None

    def public_rows(self, sql: str) -> Rows:
        """Rows of a query that reads public tables only (a public join's key multiplicity)."""
        try:
            return self.connection.execute(sql).fetchall()
        except duckdb.Error as err:
            raise BindError(f"DuckDB cannot read the public table: {str(err).splitlines()[0]}") from None

    def sibling(self) -> "DuckDBEngine":
        """An engine on a cursor of this connection: a connection of its own to the same database."""
        return DuckDBEngine(self.connection.cursor(), self.located)

    def cancel(self) -> None:
        """Stop the statement running on the connection (Ctrl-C; any thread may call this): it
        fails with DuckDB's InterruptException, which :mod:`dpsql._query.cancel` reports."""
        self.connection.interrupt()

    def close(self) -> None:
        super().close()
        self.connection.close()
