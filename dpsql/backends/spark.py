"""Apache Spark as the engine that computes the exact statistics (``dpsql.connect(spark, ...)``).

The plan, the budget, the noise and the release stay in dpsql; Spark only answers the catalog
(columns and types of a table or view, and the types of a SELECT, by analysing it without
running it) and runs the one statistics statement, written for Spark by
:data:`dpsql._compile.target.SPARK`. The post-processing SELECT (HAVING, ORDER BY, LIMIT,
expressions) runs on the noisy rows in a private in-memory DuckDB that holds nothing else.

Errors are sorted as for DuckDB: Spark analyses a statement when it is created
(``session.sql(...)``), before any row is read, and an error there depends on the query and
the schema only, so its first line is shown (:class:`~dpsql.errors.BindError`); any error while
the statement runs could depend on, or quote, private values, so its details are withheld
(:class:`~dpsql.errors.ExecutionError`) and nothing is charged.

Hardening (what Spark allows; ``docs/spark.md`` says what it does not): dpsql sends Spark only
statements it generated from an allowlisted query (SELECTs over the policy's tables: no DDL,
no writes, no UDF registration, no ``SET``), and every statement runs with
``spark.sql.ansi.enabled = false`` and ``try_*`` arithmetic, so that no value can make it fail.
"""

from __future__ import annotations

import contextlib
import decimal
import threading
import typing as t

from dpsql._compile.target import SPARK
from dpsql.backends.backend import Backend, Tables
from dpsql.errors import BindError, ExecutionError, InternalError

if t.TYPE_CHECKING:
    import pyarrow as pa

STATISTICS_FAILED = (
    "Spark failed while computing the statistics; the details are withheld because they could "
    "depend on private values (nothing was charged)"
)

#: Session settings applied before every statement dpsql runs (they are per session, and the
#: session's owner could change them in between).
SETTINGS = (
    # No value can make an expression raise: division by zero, overflow and bad casts are NULL.
    ("spark.sql.ansi.enabled", "false"),
)

Rows = list[tuple[t.Any, ...]]

#: Statements running per session (by id), and the owner's shuffle partitions to put back.
_RUNNING: dict[int, list[t.Any]] = {}
_SHARED = threading.Lock()

#: Spark SQL type names → the DuckDB names the binder and the rewrite use.
_TYPES = {
    "tinyint": "TINYINT", "smallint": "SMALLINT", "int": "INTEGER", "integer": "INTEGER",
    "bigint": "BIGINT", "float": "FLOAT", "double": "DOUBLE", "string": "VARCHAR",
    "boolean": "BOOLEAN", "date": "DATE", "timestamp": "TIMESTAMP WITH TIME ZONE",
    "timestamp_ntz": "TIMESTAMP", "binary": "BLOB", "void": "NULL",
}


def duckdb_type(spark_type: str) -> str:
    """A Spark type (``simpleString()``) by its DuckDB name: ``decimal(10,2)`` → ``DECIMAL(10,2)``."""
    name = spark_type.lower()
    if name in _TYPES:
        return _TYPES[name]
    if name.startswith(("varchar", "char")):
        return "VARCHAR"
    return name.upper()


def _plain(value: t.Any) -> t.Any:
    """A value of a Spark row as DuckDB's Python client gives it: structs as dicts, whole
    decimals (``DECIMAL(38, 0)`` for DuckDB's HUGEINT) as ints."""
    from pyspark.sql import Row

    if isinstance(value, Row):
        return {k: _plain(v) for k, v in value.asDict(recursive=False).items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, decimal.Decimal) and value.is_finite() and value == value.to_integral_value():
        return int(value)
    return value


class SparkEngine(Backend):
    """A Spark session seen as dpsql's statistics engine."""

    name = "spark"
    target = SPARK
    place = "a Spark session"
    #: tables are named ``name`` (the session's current database and temporary views) or
    #: ``schema.name``; there is no DuckDB catalog to qualify them with
    database: str | None = None
    files: tuple[str, ...] = ()
    #: public key values are cast by Spark itself: planning opens no DuckDB
    casts_keys = True

    def __init__(self, session: t.Any) -> None:
        super().__init__()
        self.session = session
        #: whether closing the connection stops the session (the command line's own session)
        self.owns_session = False
        self._catalog: dict[str, dict[str, str]] = {}
        #: ``spark.sql.shuffle.partitions`` while dpsql's statements run (None: the session's own)
        self.shuffle_partitions: int | None = _parallelism(session)
        self._settle()

    def _settle(self) -> None:
        for key, value in SETTINGS:
            self.session.conf.set(key, value)

    @staticmethod
    def spark_name(table: str) -> str:
        """``schema.name`` as Spark names it: schema ``main`` (the policy's default) is the
        session's current database, where temporary views are found too."""
        schema, _, name = table.rpartition(".")
        quoted = "`" + name.replace("`", "``") + "`"
        if schema and schema.lower() != "main":
            return "`" + schema.replace("`", "``") + "`." + quoted
        return quoted

    # -- catalog ------------------------------------------------------------------------------

    def columns(self, table: str) -> dict[str, str] | None:
        """Column name (lower-case) → DuckDB type name of ``table``, or None if Spark has none.

        Read from the analysed plan of the table: no data is read.
        """
        if table in self._catalog:
            return self._catalog[table]
        from pyspark.errors import PySparkException

        try:
            schema = self.session.table(self.spark_name(table)).schema
        except PySparkException:
            return None
        cols = {f.name.lower(): duckdb_type(f.dataType.simpleString()) for f in schema.fields}
        self._catalog[table] = cols
        return cols

    def catalog_of(self, table: str) -> str | None:
        """None: Spark names tables ``schema.name`` (its session's catalog), never by a catalog."""
        return None

    def described(self, statement: str, tables: Tables | None = None) -> list[tuple[str, str]]:
        """Names and types of a statement (Spark SQL), analysed by Spark without running it."""
        from pyspark.errors import PySparkException

        if tables:
            raise InternalError("a Spark statement reads no relation handed over as data")
        self._settle()
        try:
            fields = self.session.sql(statement).schema.fields
        except PySparkException as err:
            raise BindError(f"Spark cannot bind the query: {_first_line(err)}") from None
        return [(f.name, duckdb_type(f.dataType.simpleString())) for f in fields]

    # -- running ------------------------------------------------------------------------------

    def _analysed(self, sql: str) -> t.Any:
        """The DataFrame of ``sql``, analysed (nothing read yet); analysis errors are shown."""
        from pyspark.errors import PySparkException

        self._settle()
        try:
            return self.session.sql(sql)
        except PySparkException as err:
            raise BindError(f"Spark cannot bind the query: {_first_line(err)}") from None

    @contextlib.contextmanager
    def _partitions(self) -> t.Iterator[None]:
        """:attr:`shuffle_partitions` for the statement run inside; the session's value after.

        Spark's default (200) suits shuffles of whole tables on a cluster; a statistics
        statement mostly shuffles partial aggregates (a row per group, or per group and
        distinct value, from each task), where each extra partition is a file per task and a
        task to schedule: a fixed cost of the order of the query itself on a small cluster.

        Statements of several threads (``dpsql serve``'s workers share a session) overlap: the
        first one in saves the owner's value and the last one out puts it back.
        """
        if self.shuffle_partitions is None:
            yield
            return
        key, session = "spark.sql.shuffle.partitions", self.session
        with _SHARED:
            entry = _RUNNING.get(id(session))
            if entry is None:
                entry = _RUNNING[id(session)] = [0, session.conf.get(key)]
            entry[0] += 1
            session.conf.set(key, str(self.shuffle_partitions))
        try:
            yield
        finally:
            with _SHARED:
                entry[0] -= 1
                if entry[0] == 0:
                    del _RUNNING[id(session)]
                    session.conf.set(key, entry[1])

    def statistics(self, sql: str, tables: Tables | None = None) -> tuple[list[str], Rows]:
        """Run a statistics statement (Spark SQL): its column names and rows (exact: never shown).
        Spark's target writes key domains into the statement (``reads_data`` is false), so no
        ``tables`` are handed over."""
        if tables:
            raise InternalError("a Spark statement reads no relation handed over as data")
        with self._partitions():
            frame = self._analysed(sql)
            try:  # any error while reading rows, or while turning them into statistics: withheld
                atomic = [_atomic(f.dataType) for f in frame.schema.fields]
                collected = frame.collect()
                if all(atomic):  # numbers, strings, ...: already what DuckDB gives
                    rows = [tuple(row) for row in collected]
                else:
                    rows = [tuple(v if a else _plain(v) for v, a in zip(row, atomic)) for row in collected]
            except Exception:
                raise ExecutionError(STATISTICS_FAILED) from None
        return list(frame.columns), rows

    def public(self, sql: str) -> "pa.Table":
        """Run a query that reads public tables only (Spark SQL)."""
        frame = self._analysed(sql)
        try:
            return frame.toArrow()
        except Exception as err:
            raise ExecutionError(_first_line(err)) from None

    def public_rows(self, sql: str) -> Rows:
        """Rows of a query that reads public tables only (DuckDB SQL, written for Spark by the
        target): a public join's key multiplicity, read when the query is planned."""
        frame = self._analysed(self.target.finish(sql))
        try:
            return [tuple(_plain(v) for v in row) for row in frame.collect()]
        except Exception as err:
            raise BindError(f"Spark cannot read the public table: {_first_line(err)}") from None

    def sibling(self) -> "SparkEngine":
        """An engine over the same session (its own scratch DuckDB for post-processing; the
        session, its temporary views and its driver are shared, and Spark runs the threads'
        statements side by side)."""
        return SparkEngine(self.session)

    def cancel(self) -> None:
        """Stop the statement running (Ctrl-C; called from another thread, again until it stops:
        a job not yet submitted cannot be cancelled). Classic Spark: ``cancelAllJobs()``, as
        PySpark's own Ctrl-C handler does (``interruptAll()`` leaves a running ``collect()``
        alone there); it cancels every job of the SparkContext. Spark Connect, which has no
        SparkContext: ``interruptAll()``, every operation of the session."""
        try:
            context = self.session.sparkContext
        except Exception:  # Spark Connect
            self.session.interruptAll()
        else:
            context.cancelAllJobs()

    def close(self) -> None:
        """Close dpsql's own resources; the Spark session stays its owner's (it is stopped
        only when dpsql started it: :attr:`owns_session`)."""
        super().close()
        if self.owns_session:
            self.owns_session = False
            self.session.stop()


def _parallelism(session: t.Any) -> int | None:
    """The number of tasks the session runs at once (its default parallelism: the cores of
    ``local[n]`` or of the cluster's executors); None where it cannot be read (Spark Connect)."""
    try:
        return max(1, int(session.sparkContext.defaultParallelism))
    except Exception:  # Spark Connect has no SparkContext
        return None


def _atomic(data_type: t.Any) -> bool:
    """Whether values of this Spark type come back from ``collect()`` as DuckDB's client gives
    them (numbers, strings, booleans, dates, times, bytes): no conversion to run per value."""
    from pyspark.sql import types as T

    plain = (T.BooleanType, T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType,
             T.StringType, T.DateType, T.TimestampType, T.TimestampNTZType, T.BinaryType, T.NullType)
    return isinstance(data_type, plain)


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
