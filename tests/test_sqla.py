"""The SQLAlchemy dialect ``dpsql``: URLs, reflection from the policy, Core, pandas.read_sql and a
Superset-style virtual-table query. Runs on whichever SQLAlchemy is installed (1.4 in the
old-versions environment of ``.ci/compat``, 2.x otherwise)."""

from __future__ import annotations

import tomllib
from importlib import import_module
from importlib.metadata import entry_points
from pathlib import Path

import duckdb
import pandas as pd
import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import registry

import dpsql
from dpsql.interfaces.sqla import DpsqlDialect, column_type

# The entry point is what installs the dialect (test_entry_point_is_installed checks it); this
# line lets the other tests run from a checkout whose installed metadata predates the entry point.
registry.register("dpsql", "dpsql.interfaces.sqla", "DpsqlDialect")

ROOT = Path(__file__).resolve().parent.parent
POLICY = """
[budget]
epsilon = 5.0
delta = 1e-6
ledger = "budget.ledger"

[tables.people]
privacy_unit = "row"
max_rows_per_unit = 1

[tables.people.columns]
age = { lower = 0, upper = 100 }
sex = { keys = ["F", "M"] }
"""


@pytest.fixture
def files(tmp_path, monkeypatch):
    """A DuckDB file with a declared table and an undeclared one, and a policy with a ledger:
    relative paths, as in the documented URL."""
    monkeypatch.chdir(tmp_path)
    con = duckdb.connect("people.duckdb")
    con.execute("CREATE TABLE people AS SELECT (i % 90)::INTEGER AS age, CASE WHEN i % 2 = 0 THEN 'F' ELSE 'M' END "
                "AS sex, (i * 1.5)::DECIMAL(10, 2) AS pay, DATE '2020-01-01' + (i % 300)::INTEGER AS day "
                "FROM range(1000) t(i)")
    con.execute("CREATE TABLE hidden (x INTEGER)")
    con.close()
    Path("policy.toml").write_text(POLICY, encoding="utf-8")
    dpsql.connect("people.duckdb", "policy.toml", init_ledger=True).close()
    return tmp_path


@pytest.fixture
def demo():
    engine = sa.create_engine("dpsql:///:memory:?demo=1")
    yield engine
    engine.dispose()


def test_entry_point_is_declared() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    target = project["project"]["entry-points"]["sqlalchemy.dialects"]["dpsql"]
    module, _, name = target.partition(":")
    assert getattr(import_module(module), name) is DpsqlDialect


def test_entry_point_is_installed() -> None:
    found = [ep for ep in entry_points(group="sqlalchemy.dialects") if ep.name == "dpsql"]
    assert found, "the dpsql dialect is not installed: pip install -e . (the entry point is in pyproject.toml)"
    assert found[0].load() is DpsqlDialect


def test_file_url_reflects_only_declared_tables(files) -> None:
    engine = sa.create_engine("dpsql:///people.duckdb?policy=policy.toml")
    insp = sa.inspect(engine)
    assert insp.get_schema_names() == ["main"]
    assert insp.get_table_names() == ["people"]  # not "hidden"
    assert insp.get_view_names() == []
    assert insp.has_table("people") and not insp.has_table("hidden") and not insp.has_table("nosuch")
    columns = {c["name"]: c["type"] for c in insp.get_columns("people")}
    assert list(columns) == ["age", "sex", "pay", "day"]
    assert isinstance(columns["age"], sa.INTEGER) and isinstance(columns["sex"], sa.VARCHAR)
    assert isinstance(columns["pay"], sa.NUMERIC) and (columns["pay"].precision, columns["pay"].scale) == (10, 2)
    assert isinstance(columns["day"], sa.DATE)
    assert insp.get_pk_constraint("people")["constrained_columns"] == []
    assert insp.get_foreign_keys("people") == [] and insp.get_indexes("people") == []
    assert insp.get_unique_constraints("people") == []
    with pytest.raises(sa.exc.NoSuchTableError):
        insp.get_columns("hidden")
    engine.dispose()


def test_file_url_charges_the_ledger(files) -> None:
    engine = sa.create_engine("dpsql:///people.duckdb?policy=policy.toml")
    with engine.connect() as c:
        n = c.execute(sa.text("SELECT DP_COUNT(*) AS n FROM people WHERE age > :a WITH (epsilon = 1)"), {"a": 3}).scalar()
        assert 800 < n < 1100
    engine.dispose()
    with dpsql.connect("people.duckdb", "policy.toml") as con:
        assert con.budget.spent.epsilon == pytest.approx(1.0)


def test_core_select_with_options_as_statement_hint(demo) -> None:
    adult = sa.Table("adult", sa.MetaData(), autoload_with=demo)
    assert "age" in adult.c and "income" in adult.c
    q = (sa.select(adult.c.sex, sa.func.DP_COUNT(sa.literal_column("*")).label("n"))
         .where(adult.c.age > 30).group_by(adult.c.sex).order_by(adult.c.sex)
         .with_statement_hint("WITH (epsilon = 1)"))
    with demo.connect() as c:
        rows = c.execute(q).fetchall()
    assert [r[0] for r in rows] == ["Female", "Male"]
    assert all(r[1] > 1000 for r in rows)


def test_text_and_superset_virtual_table_query(demo) -> None:
    sql = ("SELECT sex, DP_COUNT(*) AS c FROM (SELECT * FROM adult) AS virtual_table GROUP BY sex "
           "LIMIT 10000 WITH (epsilon = 1)")
    with demo.connect() as c:
        result = c.execute(sa.text(sql))
        assert list(result.keys()) == ["sex", "c"]
        rows = result.fetchall()
    assert [r[0] for r in rows] == ["Female", "Male"]
    assert 30000 < sum(r[1] for r in rows) < 35000


def test_pandas_read_sql(demo) -> None:
    frame = pd.read_sql(sa.text("SELECT sex, DP_MEAN(age) AS mean_age FROM adult GROUP BY sex WITH (epsilon = 1)"),
                        demo)
    assert list(frame.columns) == ["sex", "mean_age"] and len(frame) == 2
    assert frame["mean_age"].between(30, 50).all()
    frame = pd.read_sql("SELECT DP_COUNT(*) AS n FROM adult WHERE sex = ? WITH (epsilon = 1)", demo,
                        params=("Female",))
    assert 9000 < frame["n"][0] < 12000


def test_refusals_arrive_as_programming_errors_that_are_privacy_errors(demo) -> None:
    for sql in ("SELECT age FROM adult", "SELECT * FROM adult LIMIT 100"):  # Superset's "samples"
        with demo.connect() as c:
            with pytest.raises(sa.exc.ProgrammingError) as info:
                c.execute(sa.text(sql))
        assert isinstance(info.value.orig, dpsql.PrivacyError)
    with demo.connect() as c:
        with pytest.raises(sa.exc.ProgrammingError) as info:
            c.execute(sa.text("SELECT DP_COUNT(*) FROM adult AS virtual_table WHERE age > :a"), {"a": 1})
    assert isinstance(info.value.orig, dpsql.OptionError)  # no WITH (epsilon = ...)


def test_url_options_are_checked() -> None:
    with pytest.raises(Exception, match="unknown dpsql URL option 'polcy'"):
        sa.create_engine("dpsql:///:memory:?polcy=x").connect()
    with pytest.raises(Exception, match="demo=1 needs an in-memory database"):
        sa.create_engine("dpsql:///x.duckdb?demo=1").connect()
    with pytest.raises(sa.exc.OperationalError) as info:
        sa.create_engine("dpsql:///:memory:").connect()
    assert isinstance(info.value.orig, dpsql.PolicyError)


def test_pool_ping_and_rollback_are_harmless(demo) -> None:
    engine = sa.create_engine("dpsql:///:memory:?demo=1", pool_pre_ping=True)
    for _ in range(2):
        with engine.connect() as c:  # the pool pings before and rolls back after each use
            assert c.execute(sa.text("SELECT 1")).scalar() == 1
    raw = engine.raw_connection()
    raw.rollback()
    raw.commit()
    raw.close()
    engine.dispose()


@pytest.mark.parametrize("name, expected", [
    ("BIGINT", sa.BIGINT), ("DOUBLE", sa.FLOAT), ("VARCHAR", sa.VARCHAR), ("DECIMAL(18,3)", sa.NUMERIC),
    ("TIMESTAMP WITH TIME ZONE", sa.TIMESTAMP), ("BOOLEAN", sa.BOOLEAN), ("INTEGER[]", sa.types.NullType),
])
def test_column_types(name, expected) -> None:
    assert isinstance(column_type(name), expected)


def test_tables_of_other_schemas_are_reflected_under_their_schema(tmp_path) -> None:
    db = tmp_path / "x.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE SCHEMA sales; CREATE TABLE sales.orders (customer_id INTEGER, amount DOUBLE); "
                "CREATE TABLE t (a INTEGER); CREATE TABLE sales.secret (x INTEGER)")
    con.close()
    policy = tmp_path / "p.toml"
    policy.write_text('[budget]\nepsilon = 1\n[tables.t]\n[tables."sales.orders"]\nprivacy_unit = "customer_id"\n'
                      "max_rows_per_unit = 2\n", encoding="utf-8")
    insp = sa.inspect(sa.create_engine(f"dpsql:///{db}?policy={policy}"))
    assert insp.get_schema_names() == ["main", "sales"]
    assert insp.get_table_names() == ["t"] and insp.get_table_names(schema="sales") == ["orders"]
    assert [c["name"] for c in insp.get_columns("orders", schema="sales")] == ["customer_id", "amount"]
