"""The pipeline seam: prepare → statistics SQL → exact rows → release, as every caller uses it."""

from __future__ import annotations

import duckdb
import pytest

import dpsql
from dpsql._privacy.noise import SeededNoise
from dpsql._query import pipeline
from dpsql.interfaces.demo import load_adult
from tests.conftest import demo_policy


@pytest.fixture()
def con() -> dpsql.Connection:
    c = dpsql.connect(":memory:", demo_policy(epsilon=10), setup=load_adult, noise=SeededNoise(4))
    yield c
    c.close()


def test_prepare_reads_no_data_and_charges_nothing(con) -> None:
    prepared = con.prepare("SELECT sex, DP_MEAN(age) FROM adult GROUP BY sex WITH (epsilon = 1)")
    assert not prepared.public and prepared.plan is not None and prepared.rewritten is not None
    assert prepared.sql == prepared.rewritten.sql and "__src" in prepared.sql
    assert con.budget.spent.epsilon == 0
    public = con.prepare("SELECT count(*) FROM education_levels")
    assert public.public and '"main"."education_levels"' in public.sql


@pytest.fixture
def plannings(monkeypatch) -> list[str]:
    """The statements the connection plans (afresh), in order."""
    calls: list[str] = []
    real = pipeline.prepare

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr("dpsql.connection.prepare", counting)
    return calls


def test_explain_prepares_once(con, plannings) -> None:
    calls = plannings
    res = con.sql("EXPLAIN SELECT DP_COUNT(*) FROM adult WITH (epsilon = 1)")
    assert len(calls) == 1 and res.columns == ["explain"]
    assert con.budget.spent.epsilon == 0


def test_a_connection_keeps_the_plans_of_statements_it_has_seen(con, plannings) -> None:
    """The same text is planned once; every run still reads the data and charges its budget."""
    calls = plannings
    sql = "SELECT sex, DP_COUNT(*) FROM adult GROUP BY sex WITH (epsilon = 0.25)"
    first, second = con.sql(sql).fetchall(), con.sql(sql).fetchall()
    assert len(calls) == 1 and con.prepare(sql) is con.prepare(sql)
    assert con.budget.spent.epsilon == pytest.approx(0.5)  # charged twice
    assert [k for k, _ in first] == [k for k, _ in second] and first != second  # fresh noise
    con.prepare(sql.replace("0.25", "0.5"))  # another text: planned
    assert len(calls) == 2


def test_plans_that_read_public_rows_are_made_each_time(monkeypatch) -> None:
    """A join's key multiplicity is read from the public table while planning: such plans are
    not kept, so a public table that changes is read again."""
    from dpsql import connection

    pol = {"budget": {"epsilon": 10},
           "tables": {"t": {"privacy_unit": "row", "columns": {"x": {"lower": 0, "upper": 10}}},
                      "d": {"public": True}}}
    raw = duckdb.connect()
    raw.execute("CREATE TABLE t AS SELECT 1 AS k, 5 AS x")
    raw.execute("CREATE TABLE d AS SELECT 1 AS k")
    c = dpsql.connect(raw, pol, noise=SeededNoise(1))
    sql = "SELECT DP_SUM(x) FROM t JOIN d ON t.k = d.k WITH (epsilon = 1)"
    assert c.prepare(sql) is not c.prepare(sql)
    assert c.prepare("SELECT DP_SUM(x) FROM t WITH (epsilon = 1)") is c.prepare("SELECT DP_SUM(x) FROM t WITH (epsilon = 1)")
    monkeypatch.setattr(connection, "PLANS_KEPT", 2)
    for eps in (1, 2, 3):
        c.prepare(f"SELECT DP_COUNT(*) FROM t WITH (epsilon = {eps})")
    assert len(c._plans) == 2
    c.close()


def test_plans_of_links_between_private_tables_are_kept() -> None:
    """A linked table's join up to its unit reads no public rows while planning: its plan
    depends on the text, the policy and the catalog alone, and is kept like any other."""
    pol = {"budget": {"epsilon": 10},
           "tables": {"customer": {"privacy_unit": "c_custkey", "max_rows_per_unit": 1},
                      "orders": {"link": {"o_custkey": "customer.c_custkey"}, "max_rows_per_unit": 4,
                                 "columns": {"o_totalprice": {"lower": 0, "upper": 10}}}}}
    raw = duckdb.connect()
    raw.execute("CREATE TABLE customer AS SELECT 1 AS c_custkey")
    raw.execute("CREATE TABLE orders AS SELECT 1 AS o_orderkey, 1 AS o_custkey, 5.0 AS o_totalprice")
    c = dpsql.connect(raw, pol, noise=SeededNoise(1))
    sql = "SELECT DP_COUNT(*) FROM orders JOIN customer ON o_custkey = c_custkey WITH (epsilon = 1)"
    first = c.prepare(sql)
    assert first.bound.joined and c.prepare(sql) is first
    c.close()


def test_statistics_from_another_engine_are_released_through_the_same_charge(con) -> None:
    """The hook for other engines: rows computed elsewhere get the same checks, charge and noise."""
    query = "SELECT sex, DP_COUNT(*) AS n FROM adult GROUP BY sex WITH (epsilon = 2)"
    prepared = con.prepare(query)
    other = duckdb.connect(":memory:")
    load_adult(other)
    cur = other.execute(prepared.sql)
    rows, names = cur.fetchall(), [d[0] for d in cur.description]
    res = con.release(prepared, names, rows)
    assert con.budget.spent.epsilon == pytest.approx(2)
    assert con.budget.history[-1].query == query
    assert dict(res.fetchall()).keys() == {"Female", "Male"}
    # The same checks: over budget is refused before anything is charged.
    big = con.prepare("SELECT DP_COUNT(*) FROM adult WITH (epsilon = 9)")
    with pytest.raises(dpsql.BudgetError):
        con.release(big, names, rows)
    assert con.budget.spent.epsilon == pytest.approx(2)
    with pytest.raises(dpsql.Error, match="public tables"):
        con.release(con.prepare("SELECT 1"), [], [])


@pytest.mark.parametrize("level,label", [(0.9, "(90%)"), (0.99, "(99%)"), (0.95, "(95%)")])
def test_report_lines_show_the_confidence_asked_for(con, level: float, label: str) -> None:
    res = con.sql(f"SELECT DP_MEAN(age) FROM adult WITH (epsilon = 0.1, confidence = {level})")
    assert label in res.report_lines()[0]
