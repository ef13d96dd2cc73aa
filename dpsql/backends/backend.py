"""The engine boundary: :class:`Backend`, everything dpsql asks of the engine that holds the data.

The plan, the budget, the noise and the release stay in dpsql; a backend answers the catalog,
binds statements without running them, runs the one statistics statement and public queries,
and says what it can do as data (never by its name). :class:`~dpsql.backends.duck.DuckDBEngine`
and :class:`~dpsql.backends.spark.SparkEngine` subclass it; ``dpsql.connect(backend, policy)``
takes any subclass, so another engine is one module (and a SQL target,
:mod:`dpsql._compile.target`, if its SQL differs from DuckDB's).

What a subclass must give (abstract): :meth:`columns`, :meth:`described`, :meth:`statistics`,
:meth:`public` and :meth:`public_rows`, and the class attributes :attr:`name` and
:attr:`target`. The rest has a default it may override: :meth:`describe` (from
:meth:`described`), :meth:`statistics_columns` (the rows of :meth:`statistics`, as columns),
:meth:`catalog_of`, :meth:`catalog_rows` (``information_schema`` rows made from
:meth:`columns`), :meth:`data_files`, :meth:`post_process` (in a private in-memory DuckDB that
holds nothing else), :meth:`sibling` and :meth:`close`.

Every type a backend reports is a DuckDB type name (``INTEGER``, ``VARCHAR``, ``DECIMAL(10,2)``,
...): the binder, the rewrite, the key domains and the release read those. Errors are sorted by
when they happen: before any row is read they depend on the query and the schema only, and are
shown as :class:`~dpsql.errors.BindError` (their first line); while rows are read they could
quote private values, so the statistics' are withheld (:class:`~dpsql.errors.ExecutionError`)
and nothing is charged.
"""

from __future__ import annotations

import abc
import typing as t

from dpsql._sql.postprocess import NOISY
from dpsql.errors import Error, ExecutionError

if t.TYPE_CHECKING:
    import duckdb
    import pyarrow as pa
    from sqlglot import exp

    from dpsql._compile.target import Target
    from dpsql.backends.columns import Statistics

Rows = list[tuple[t.Any, ...]]
#: relations a statement reads by name, handed to the backend as Arrow data (a public key domain)
Tables = t.Mapping[str, "pa.Table"]


class Backend(abc.ABC):
    """An engine seen as dpsql's: its catalog, its binder, and where the statistics run."""

    #: the engine's name in messages (``duckdb``, ``spark``)
    name: t.ClassVar[str]
    #: the SQL its statistics statements are written in (:mod:`dpsql._compile.target`); a target
    #: whose ``reads_data`` is true has key domains handed over as Arrow tables (``tables``)
    target: t.ClassVar["Target"]
    #: what a connection's repr calls the data when it reads no database file
    place: t.ClassVar[str] = "a custom engine"
    #: whether this is the engine dpsql runs on unless told otherwise (messages name the others)
    default: t.ClassVar[bool] = False
    #: the catalog the policy's tables are qualified with (``catalog.schema.name``), or None
    #: when the engine names tables ``schema.name`` only
    database: str | None = None
    #: the database files the backend reads (they are part of the key of a kept release)
    files: tuple[str, ...] = ()
    #: whether public key values are cast by this engine (a statement of literals through
    #: :meth:`public_rows`) rather than by dpsql's private in-memory DuckDB that holds no data
    #: (:mod:`dpsql._plan.keys`); an engine that is not DuckDB says yes, so that planning on it
    #: opens no DuckDB
    casts_keys: t.ClassVar[bool] = False

    def __init__(self) -> None:
        #: policy tables (keys) whose views dpsql created in another catalog than ``database``
        self.located: dict[str, str] = {}
        self._scratch: "duckdb.DuckDBPyConnection | None" = None

    # -- catalog ------------------------------------------------------------------------------

    @abc.abstractmethod
    def columns(self, table: str) -> dict[str, str] | None:
        """Column name (lower-case) → DuckDB type of the policy table ``table`` (a policy key:
        ``name``, ``schema.name`` or ``catalog.schema.name``), or None if there is none."""

    def catalog_of(self, table: str) -> str | None:
        """The catalog that holds the policy's table ``table``: the one a ``catalog.schema.name``
        key names, else where dpsql created it (:attr:`located`), else :attr:`database`."""
        parts = table.lower().split(".")
        if len(parts) == 3:
            return parts[0]
        return self.located.get(table.lower(), self.database)

    def catalog_rows(self, tables: t.Sequence[tuple[str, str, str, str]]) -> dict[str, "pa.Table"]:
        """The rows of ``information_schema.tables``, ``columns`` and ``schemata`` (by view name)
        for these declared tables, each ``(policy key, catalog, schema, name)``, and for schema
        main of :attr:`database`. The default is made from :meth:`columns`."""
        found = [(c or "", s, n, self.columns(key) or {}) for key, c, s, n in tables]
        schemata = sorted({(c, s) for c, s, _, _ in found} | {((self.database or "").lower(), "main")})
        columns = [(c, s, n, col, i, dtype) for c, s, n, cols in found for i, (col, dtype) in enumerate(cols.items(), 1)]
        return {
            "tables": _table(["table_catalog", "table_schema", "table_name", "table_type"],
                             [(c, s, n, "BASE TABLE") for c, s, n, _ in found]),
            "columns": _table(["table_catalog", "table_schema", "table_name", "column_name", "ordinal_position",
                               "data_type"], columns),
            "schemata": _table(["catalog_name", "schema_name"], schemata),
        }

    def data_files(self) -> tuple[str, ...]:
        """The data files the backend may read besides its database (views over them)."""
        return ()

    # -- types --------------------------------------------------------------------------------

    @abc.abstractmethod
    def described(self, statement: str, tables: Tables | None = None) -> list[tuple[str, str]]:
        """The name and DuckDB type of each column of ``statement`` (written for :attr:`target`),
        bound without running it (reads no data); :class:`~dpsql.errors.BindError` if it does
        not bind. ``tables``: relations it reads that are handed over as data."""

    def describe(self, sql: str) -> list[str]:
        """The DuckDB type of each column of a SELECT in DuckDB SQL, bound without running it."""
        return [dtype for _, dtype in self.described(self.target.finish(sql))]

    # -- running ------------------------------------------------------------------------------

    @abc.abstractmethod
    def statistics(self, sql: str, tables: Tables | None = None) -> tuple[list[str], Rows]:
        """Run a statistics statement (written for :attr:`target`): its column names and rows,
        exact, never shown to anyone. ``tables`` (only when the target's ``reads_data``):
        public relations it reads by name, handed over as Arrow data."""

    def statistics_columns(self, sql: str, tables: Tables | None = None) -> tuple[list[str], "Statistics"]:
        """:meth:`statistics` as columns (:mod:`dpsql.backends.columns`); by default its rows,
        converted. A failure of the conversion is withheld like a failure of the statement."""
        from dpsql.backends.columns import Statistics

        names, rows = self.statistics(sql, tables) if tables else self.statistics(sql)
        try:
            return names, Statistics.from_rows(names, rows)
        except Exception:
            raise ExecutionError(f"the {self.name} engine failed while computing the statistics; the details are "
                                 "withheld because they could depend on private values (nothing was charged)") from None

    @abc.abstractmethod
    def public(self, sql: str) -> "pa.Table":
        """Run a query that reads public tables only (written for :attr:`target`)."""

    @abc.abstractmethod
    def public_rows(self, sql: str) -> Rows:
        """Rows of a query in DuckDB SQL that reads public tables only (a public join's key
        multiplicity, read while the query is planned)."""

    def post_process(self, outer: "exp.Select", columns: list[str], rows: "Rows | pa.Table") -> "pa.Table":
        """Run the post-processing SELECT on the noisy rows, in a DuckDB that holds nothing else."""
        if self._scratch is None:
            self._scratch = scratch_connection()
        return post_process_in(self._scratch, outer, columns, rows)

    # -- lifetime -----------------------------------------------------------------------------

    def sibling(self) -> "Backend":
        """A backend over the same data for another thread (``dpsql serve``'s workers)."""
        raise Error(f"the {self.name} engine cannot be shared by several threads")

    def cancel(self) -> None:
        """Stop the statement running now (Ctrl-C; called from another thread). An engine that
        cannot stop one lets it finish: :mod:`dpsql._query.cancel` then cancels after it."""
        return None

    def close(self) -> None:
        """Close what dpsql opened (the data stays its owner's)."""
        if self._scratch is not None:
            self._scratch.close()
            self._scratch = None


def _table(names: list[str], rows: t.Sequence[tuple[t.Any, ...]]) -> "pa.Table":
    """Catalog rows as a table: strings, and ordinal positions as integers (also when empty)."""
    import pyarrow as pa

    return pa.table({name: pa.array([r[j] for r in rows], pa.int64() if name == "ordinal_position" else pa.string())
                     for j, name in enumerate(names)})


def scratch_connection() -> "duckdb.DuckDBPyConnection":
    """A hardened in-memory DuckDB that holds nothing: where post-processing runs."""
    import duckdb

    from dpsql.backends.sandbox import harden

    con = duckdb.connect(":memory:")
    harden(con)
    return con


def post_process_in(scratch: "duckdb.DuckDBPyConnection", outer: "exp.Select", columns: list[str],
                    rows: "Rows | pa.Table") -> "pa.Table":
    """Run the post-processing SELECT ``outer`` on the noisy rows (or the same as an Arrow table
    with these ``columns``), as table ``__noisy`` of ``scratch``."""
    import pyarrow as pa  # imported on the first release (it is slow to import)

    if isinstance(rows, pa.Table):
        noisy = rows
    else:
        noisy = pa.table({name: [r[i] for r in rows] for i, name in enumerate(columns)})
    scratch.register(NOISY, noisy)
    try:
        return scratch.sql(outer.sql(dialect="duckdb")).to_arrow_table()
    finally:
        scratch.unregister(NOISY)
