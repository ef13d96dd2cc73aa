"""The backend contract: a third engine is one Backend subclass and one compiler (with a SQL
target naming it), defined here and nowhere else.

The toy backend runs the statistics on the standard library's sqlite3. Its compiler, a
subclass of DuckDB's (:class:`dpsql._compile.compiler.Compiler`), writes the statement from its
typed plan in SQLite's dialect, overriding one form (the FROM chain, from the bound relation);
its target refuses the forms SQLite cannot run; ``dpsql.connect(backend, policy)`` then answers DP queries, DESCRIBE,
SHOW TABLES, SHOW ALL TABLES, information_schema and zero-row probes through the same pipeline
as DuckDB and Spark. Callers of the boundary use what :class:`Backend` declares: no probing of
members, no branches on an engine's name.
"""

from __future__ import annotations

import re
import sqlite3
import typing as t
from pathlib import Path

import duckdb
import pytest
import sqlglot
from sqlglot import exp

import dpsql
from dpsql._compile.compiler import Compiler, register
from dpsql._compile.plan import Relation
from dpsql._compile.target import Target
from dpsql._privacy.noise import SeededNoise
from dpsql.backends.backend import Backend, Tables
from dpsql.errors import BindError, Error, ExecutionError, PrivacyError

ROOT = Path(__file__).resolve().parent.parent

# ---------------------------------------------------------------------------------------------
# a toy backend on SQLite, defined here and nowhere else

#: SQLite's declared column types → DuckDB type names (what the binder reads)
_TYPES = {"INTEGER": "BIGINT", "REAL": "DOUBLE", "TEXT": "VARCHAR", "BLOB": "BLOB"}


@register("sqlite")
class SQLiteCompiler(Compiler):
    """The statistics statement in SQLite's dialect: DuckDB's forms, printed by sqlglot's SQLite
    generator, with the private table read from the bound relation rather than DuckDB's text."""

    dialect = "sqlite"

    def relation(self, rel: Relation) -> tuple[exp.Expression, list[exp.Join]]:
        node = rel.table.copy()
        node.set("alias", exp.TableAlias(this=exp.to_identifier("__t")))
        return node, []


class SQLiteTarget(Target):
    """SQLite's gate and flags; public SQL (DuckDB's) is transpiled. Grouped statements use
    forms SQLite lacks (``* EXCLUDE``, named columns of a ``VALUES`` alias), so the toy
    answers ungrouped queries only."""

    name = "sqlite"
    dialect = "sqlite"
    shared_histogram = False
    reads_data = False

    def check_query(self, query: exp.Expression) -> None:
        if query.args.get("group"):
            raise PrivacyError("the sqlite engine answers queries without GROUP BY only")

    def finish(self, sql: str) -> str:
        return sqlglot.transpile(sql, read="duckdb", write="sqlite")[0]

    def pretty(self, sql: str) -> str:
        return sqlglot.transpile(sql, read="sqlite", write="sqlite", pretty=True)[0]


class SQLiteBackend(Backend):
    """The statistics on a sqlite3 connection; tables are named ``name`` or ``main.name``."""

    name = "sqlite"
    target = SQLiteTarget()
    place = "a SQLite database"

    def __init__(self, con: sqlite3.Connection) -> None:
        super().__init__()
        self.connection = con

    def columns(self, table: str) -> dict[str, str] | None:
        schema, _, name = table.lower().rpartition(".")
        if schema not in ("", "main"):
            return None
        rows = self.connection.execute("SELECT name, type FROM pragma_table_info(?)", [name]).fetchall()
        return {col.lower(): _TYPES.get(dtype.upper(), "VARCHAR") for col, dtype in rows} or None

    def described(self, statement: str, tables: Tables | None = None) -> list[tuple[str, str]]:
        """Names and declared types of a statement's columns, through a temporary view (SQLite
        knows the type of a column it reads, not of an expression: those are refused)."""
        try:
            self.connection.execute(f"CREATE TEMP VIEW __described AS {statement}")
        except sqlite3.Error as err:
            raise BindError(f"sqlite cannot bind the query: {err}") from None
        try:
            rows = self.connection.execute("SELECT name, type FROM pragma_table_info('__described')").fetchall()
        finally:
            self.connection.execute("DROP VIEW __described")
        if any(not dtype for _, dtype in rows):
            raise BindError("sqlite cannot tell the type of an expression")
        return [(col, _TYPES.get(dtype.upper(), "VARCHAR")) for col, dtype in rows]

    def statistics(self, sql: str, tables: Tables | None = None) -> tuple[list[str], list[tuple[t.Any, ...]]]:
        try:
            cur = self.connection.execute(sql)
        except sqlite3.OperationalError as err:
            raise BindError(f"sqlite cannot bind the query: {err}") from None
        try:
            rows = cur.fetchall()
        except sqlite3.Error:
            raise ExecutionError("sqlite failed while computing the statistics; details withheld") from None
        return [d[0] for d in cur.description], rows

    def public(self, sql: str) -> t.Any:
        import pyarrow as pa

        cur = self.connection.execute(sql)
        rows = cur.fetchall()
        return pa.table({d[0]: [r[j] for r in rows] for j, d in enumerate(cur.description)})

    def public_rows(self, sql: str) -> list[tuple[t.Any, ...]]:
        return self.connection.execute(self.target.finish(sql)).fetchall()

    def close(self) -> None:
        super().close()
        self.connection.close()


ROWS = [(age, "ab"[age % 2], float(age) / 4) for age in range(20, 70)]
POLICY = {
    "budget": {"epsilon": 10},
    "tables": {
        "people": {"privacy_unit": "row", "columns": {"age": {"lower": 0, "upper": 100}, "w": {"lower": 0, "upper": 20},
                                                       "g": {"keys": ["a", "b"]}}},
        "codes": {"public": True},
    },
}


def _sqlite() -> sqlite3.Connection:
    con = sqlite3.connect(":memory:", check_same_thread=False)
    con.execute("CREATE TABLE people (age INTEGER, g TEXT, w REAL)")
    con.executemany("INSERT INTO people VALUES (?, ?, ?)", ROWS)
    con.execute("CREATE TABLE codes (code INTEGER, label TEXT)")
    con.execute("INSERT INTO codes VALUES (1, 'one'), (2, 'two')")
    return con


def _duckdb(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE TABLE people (age BIGINT, g VARCHAR, w DOUBLE)")
    con.executemany("INSERT INTO people VALUES (?, ?, ?)", [list(r) for r in ROWS])
    con.execute("CREATE TABLE codes (code BIGINT, label VARCHAR)")


@pytest.fixture
def con() -> t.Iterator[dpsql.Connection]:
    c = dpsql.connect(SQLiteBackend(_sqlite()), POLICY, noise=SeededNoise(7))
    yield c
    c.close()


QUERY = "SELECT DP_COUNT(*) AS n, DP_SUM(age) AS s, DP_MEAN(w) AS m FROM people WITH (epsilon = 1)"


def test_a_dp_query_runs_on_the_third_engine(con) -> None:
    """The statistics are SQLite's: the release equals DuckDB's on the same rows, seed and plan."""
    assert isinstance(con.engine, SQLiteBackend) and "a SQLite database" in repr(con)
    res = con.sql(QUERY)
    assert res.columns == ["n", "s", "m"] and len(res.report) == 3
    assert con.budget.spent.epsilon == pytest.approx(1)
    with dpsql.connect(":memory:", POLICY, setup=_duckdb, noise=SeededNoise(7)) as duck:
        assert res.fetchall() == duck.sql(QUERY).fetchall()
    prepared = con.prepare(QUERY)
    assert isinstance(prepared.rewritten.compiler, SQLiteCompiler)  # the statement SQLite ran is its compiler's
    assert prepared.sql == prepared.rewritten.statement and "AS INTEGER)" in prepared.sql and "BIGINT" not in prepared.sql
    assert "SUM(" in con.explain(QUERY)


def test_catalog_statements_and_a_zero_row_probe(con) -> None:
    rows = {r[0]: r[1:] for r in con.sql("DESCRIBE people").fetchall()}
    assert rows == {"age": ("BIGINT", "[0, 100]", None), "g": ("VARCHAR", None, "a, b"), "w": ("DOUBLE", "[0, 20]", None)}
    assert con.sql("SHOW TABLES").fetchall() == [("codes", "public"), ("people", "private")]
    assert con.sql("SHOW ALL TABLES").fetchall() == [
        (None, "main", "codes", ["code", "label"], ["BIGINT", "VARCHAR"], False),
        (None, "main", "people", ["age", "g", "w"], ["BIGINT", "VARCHAR", "DOUBLE"], False)]
    assert con.sql("SELECT table_name, column_name, data_type FROM information_schema.columns "
                   "WHERE table_name = 'people' ORDER BY ordinal_position").fetchall() == [
        ("people", "age", "BIGINT"), ("people", "g", "VARCHAR"), ("people", "w", "DOUBLE")]
    probe = con.sql("SELECT * FROM people LIMIT 0")
    assert probe.columns == ["age", "g", "w"] and probe.fetchall() == []
    assert [str(f.type) for f in probe.arrow().schema] == ["int64", "string", "double"]
    assert con.sql("SELECT label FROM codes WHERE code = 2").fetchall() == [("two",)]  # public: runs as it is
    assert con.budget.spent.epsilon == 0


def test_the_targets_refusal_charges_nothing(con) -> None:
    with pytest.raises(PrivacyError, match="^the sqlite engine answers queries without GROUP BY only$"):
        con.sql("SELECT g, DP_COUNT(*) FROM people GROUP BY g WITH (epsilon = 1)")
    with pytest.raises(Error, match="^this connection runs on sqlite; its statements are in that dialect only$"):
        con.rewritten_sql(QUERY, "spark")
    with pytest.raises(Error, match="^the sqlite engine cannot be shared by several threads$"):
        con.engine.sibling()
    with pytest.raises(Error, match="^setup= runs on a DuckDB connection or a Spark session"):
        dpsql.connect(SQLiteBackend(_sqlite()), POLICY, setup=lambda c: None)
    assert con.budget.spent.epsilon == 0


# ---------------------------------------------------------------------------------------------
# the boundary is what Backend declares

_BACKENDS = {"dpsql/backends/backend.py", "dpsql/backends/duck.py", "dpsql/backends/spark.py"}
_PROBED = re.compile(r"\b(?:hasattr|getattr)\(\s*[\w.]*engine\b")
_NAMED = re.compile(r"\bengine\.name\s*(?:==|!=)|==\s*[\w.]*engine\.name\b")


def test_no_caller_probes_an_engine_or_branches_on_its_name() -> None:
    found = []
    for path in sorted((ROOT / "dpsql").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in _BACKENDS:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _PROBED.search(line) or _NAMED.search(line):
                found.append(f"{rel}:{n}: {line.strip()}")
    assert found == []


def test_the_built_in_engines_are_backends() -> None:
    from dpsql.backends.duck import DuckDBEngine
    from dpsql.backends.spark import SparkEngine

    assert issubclass(DuckDBEngine, Backend) and issubclass(SparkEngine, Backend)
    with dpsql.connect(":memory:", POLICY, setup=_duckdb) as duck:
        assert isinstance(duck.engine, DuckDBEngine) and duck.engine.default
        worker = duck.engine.sibling()
        try:
            assert worker.columns("people") == duck.engine.columns("people")
        finally:
            worker.close()


@pytest.mark.spark
def test_catalog_statements_on_spark(spark) -> None:
    """Spark's backend answers what the catalog statements ask of any backend (SHOW ALL TABLES and
    information_schema failed on Spark when they reached for DuckDB's members)."""
    policy = {"budget": {"epsilon": 1}, "tables": {"visits": {"privacy_unit": "row"}}}
    with dpsql.connect(spark, policy) as con:
        columns = con.columns("visits")
        assert columns and con.sql("SHOW TABLES").fetchall() == [("visits", "private")]
        assert con.sql("SHOW ALL TABLES").fetchall() == [
            (None, "main", "visits", list(columns), list(columns.values()), False)]
        assert con.sql("SELECT column_name, data_type FROM information_schema.columns "
                       "ORDER BY ordinal_position").fetchall() == list(columns.items())
        assert [r[0] for r in con.sql("DESCRIBE visits").fetchall()] == list(columns)
        probe = con.sql("SELECT * FROM visits LIMIT 0")
        assert probe.columns == list(columns) and probe.fetchall() == []
        assert con.budget.spent.epsilon == 0
