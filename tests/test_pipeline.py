"""The pipeline seam: prepare → statistics SQL → exact rows → release, as every caller uses it."""

from __future__ import annotations

import duckdb
import pytest

import dpsql
from dpsql.engine import pipeline
from dpsql.interfaces.demo import load_adult
from dpsql.privacy.noise import SeededNoise
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


def test_explain_prepares_once(con, monkeypatch) -> None:
    calls = []
    real = pipeline.prepare

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr("dpsql.connection.prepare", counting)
    res = con.sql("EXPLAIN SELECT DP_COUNT(*) FROM adult WITH (epsilon = 1)")
    assert len(calls) == 1 and res.columns == ["explain"]
    assert con.budget.spent.epsilon == 0


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
