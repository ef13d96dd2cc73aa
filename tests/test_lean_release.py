"""The short path of an ungrouped query: what it defers and merges gives the same answer, and the
charge still comes first.

* The one row of an ungrouped release is kept as Python values; the Arrow table, built when
  asked for, is the one the eager path builds, and every reader gives the same values.
* ``Connection.release`` reads the ledger once, in the charge's transaction: a budget spent by
  someone else after the query was checked is still refused there, before any noise is drawn.
* An ungrouped statement without subqueries is one SELECT (with the values' expressions in the
  aggregates when each is read once): the same statistics as the CTE form.
* A charge compares the header's total with the opened one directly, and the running sums keep
  their Cost while nothing is added: a total changed or a charge made elsewhere is still seen.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

import dpsql
from dpsql._accounting.budget import Budget, Cost
from dpsql._accounting.ledger import Ledger
from dpsql._compile.target import Target
from dpsql._plan.rewrite import rewrite
from dpsql._query.pipeline import prepare
from dpsql.backends.output import OneRow
from dpsql.interfaces.demo import load_adult
from dpsql.result import Result
from tests.conftest import demo_policy

UNGROUPED = [
    "SELECT DP_COUNT(*) FROM adult WITH (epsilon = 1)",
    "SELECT DP_SUM(age) FROM adult WITH (epsilon = 1)",
    "SELECT DP_MEAN(age) AS m FROM adult WHERE sex = 'Male' WITH (epsilon = 1)",
    "SELECT DP_VAR(age), DP_COUNT(*) AS n, DP_STDDEV(hours_per_week) FROM adult WITH (epsilon = 1)",
    "SELECT DP_MEAN(age) FROM adult WHERE age > 500 WITH (epsilon = 1)",  # no rows
]


def _eager(result: Result) -> pa.Table:
    """The table the eager path builds from the same row (one Arrow array per column)."""
    row = result._table
    assert isinstance(row, OneRow)
    return pa.Table.from_arrays([pa.array([v]) for v in row.values], names=row.names)


@pytest.mark.parametrize("query", UNGROUPED)
def test_an_ungrouped_release_builds_its_table_only_when_asked_and_it_is_the_eager_one(seeded_demo, query) -> None:
    con = seeded_demo(5)
    res = con.sql(query)
    assert isinstance(res._table, OneRow)  # nothing built yet
    rows = res.fetchall()
    columns, count = res.columns, len(res)
    assert isinstance(res._table, OneRow)  # fetchall, columns and len answer from the row
    expected = _eager(res)
    assert res.table.equals(expected) and res.table.schema == expected.schema
    assert isinstance(res._table, pa.Table)  # built once, then kept
    assert rows == [tuple(c[0] for c in expected.to_pydict().values())]
    assert columns == expected.column_names and count == 1 == res.rowcount
    assert all(type(v) in (int, float) for v in rows[0])


@pytest.mark.parametrize("query", UNGROUPED)
def test_every_reader_of_a_lazy_result_gives_what_the_table_gives(seeded_demo, query) -> None:
    lazy, built = seeded_demo(9).sql(query), seeded_demo(9).sql(query)
    table = built.table  # the same seed, built at once
    assert isinstance(lazy._table, OneRow)
    assert lazy.fetchone() == tuple(table.to_pylist()[0].values()) and lazy.fetchone() is None
    assert list(lazy) == [tuple(r.values()) for r in table.to_pylist()]
    assert repr(lazy) == repr(built) and lazy._repr_html_() == built._repr_html_()
    assert lazy.description == built.description
    assert lazy.df().equals(built.df()) and lazy.arrow().equals(table)
    assert lazy.relation().fetchall() == built.relation().fetchall()
    assert lazy.report_dicts() == built.report_dicts()


def test_fetchall_keeps_the_cursor_of_a_lazy_result(seeded_demo) -> None:
    res = seeded_demo(1).sql(UNGROUPED[1])
    assert len(res.fetchall()) == 1 and res.fetchall() == [] and res.fetchmany(3) == []


@pytest.mark.parametrize("values", [
    [True], [2**63], [-(2**63) - 1], [np.float64(1.5)], [np.int64(3)], ["x"], [1.0, 2.0], [],
])
def test_values_arrow_may_change_are_not_kept_lazily(values) -> None:
    assert OneRow.of(["a"], [values]) is None  # the eager path builds the table at once


def test_plain_values_are_kept_and_give_the_eager_table() -> None:
    values = [[None], [0], [2**63 - 1], [-(2**63)], [math.inf], [math.nan], [-0.0]]
    names = [f"c{i}" for i in range(len(values))]
    row = OneRow.of(names, values)
    assert row is not None and row.rows() == [tuple(v[0] for v in values)]
    eager = pa.Table.from_arrays([pa.array(v) for v in values], names=names)
    built = row.to_arrow()
    assert built.schema == eager.schema  # NaN is not equal to itself: compare the values' text
    assert repr(built.to_pylist()) == repr(eager.to_pylist()) == repr([dict(zip(names, row.values))])
    assert OneRow.of([], []) is None  # no columns: nothing to defer


def test_grouped_and_post_processed_outputs_stay_arrow_tables(seeded_demo) -> None:
    con = seeded_demo(2)
    assert isinstance(con.sql("SELECT sex, DP_COUNT(*) FROM adult GROUP BY sex WITH (epsilon = 1)")._table, pa.Table)
    assert isinstance(con.sql("SELECT DP_COUNT(*) + 1 FROM adult WITH (epsilon = 1)")._table, pa.Table)


# -- the charge still precedes the release ---------------------------------------------------


def _file_connection(tmp_path, epsilon: float) -> dpsql.Connection:
    policy = demo_policy(epsilon=epsilon)
    policy["budget"]["ledger"] = str(tmp_path / "budget.ledger")
    return dpsql.connect(":memory:", policy, setup=load_adult, init_ledger=True)


def _spy(con: dpsql.Connection) -> list[str]:
    """Record, in order, each charge and each noise draw of ``con``."""
    events: list[str] = []
    charge = con.ledger.charge

    def charged(*args, **kwargs):  # type: ignore[no-untyped-def]
        entry = charge(*args, **kwargs)
        events.append("charge")
        return entry

    con.ledger.charge = charged  # type: ignore[method-assign]
    for name in ("laplace", "laplace_int", "gaussian", "gaussian_int", "add_many"):
        draw = getattr(con.noise, name)
        setattr(con.noise, name, lambda *a, _draw=draw, **k: events.append("noise") or _draw(*a, **k))
    return events


@pytest.mark.parametrize("query", UNGROUPED[:4])
def test_the_charge_commits_before_any_noise_is_drawn(tmp_path, query) -> None:
    with _file_connection(tmp_path, 100.0) as con:
        events = _spy(con)
        con.sql(query).fetchall()
        assert events[0] == "charge" and events.count("charge") == 1 and "noise" in events
        assert len(con.budget.history) == 1


def test_a_budget_spent_elsewhere_during_the_query_is_refused_at_the_charge(tmp_path) -> None:
    with _file_connection(tmp_path, 1.0) as con:
        other = Ledger.open(con.ledger.path, None)
        events = _spy(con)
        statistics = con.engine.statistics  # what Connection.sql fetches one ungrouped row with

        def meanwhile(sql: str):  # type: ignore[no-untyped-def]
            other.charge(Cost(epsilon=0.7), query="another process")  # after the check, before the charge
            return statistics(sql)

        con.engine.statistics = meanwhile  # type: ignore[method-assign]
        with pytest.raises(dpsql.BudgetError):
            con.sql("SELECT DP_SUM(age) FROM adult WITH (epsilon = 0.5)")
        assert events == [] and con.budget.spent.epsilon == pytest.approx(0.7)
        other.close()


def test_release_of_rows_from_elsewhere_reads_the_durable_ledger(tmp_path) -> None:
    with _file_connection(tmp_path, 1.0) as con:
        prepared = con.prepare("SELECT DP_COUNT(*) FROM adult WITH (epsilon = 0.5)")
        names, rows = con.engine.statistics(prepared.sql)
        con.release(prepared, names, rows)
        other = Ledger.open(con.ledger.path, None)
        other.charge(Cost(epsilon=0.4), query="another process")
        other.close()
        events = _spy(con)
        with pytest.raises(dpsql.BudgetError):
            con.release(prepared, names, rows)
        assert events == [] and con.budget.spent.epsilon == pytest.approx(0.9)


# -- one SELECT for an ungrouped statement ---------------------------------------------------


class _AsCtes(Target):
    """DuckDB's statements in the general form: ``__src`` and ``__stats`` as CTEs."""

    name = "duckdb, as CTEs"
    single_select = False


ONE_SELECT = UNGROUPED + [
    "SELECT DP_COUNT(workclass), DP_SUM(age / 10, 0, 10) FROM adult WHERE TRY_CAST(age AS INT) > 30 WITH (epsilon = 1)",
    "SELECT DP_SUM(hours_per_week, 0, 99.5) FROM adult WHERE age > 500 WITH (epsilon = 1)",  # no rows
    # reserved names spelled inside string literals stay text
    "SELECT DP_SUM(LENGTH('__v0') + age, 0, 200) FROM adult WHERE sex <> 'x''__v0' WITH (epsilon = 1)",
]


@pytest.mark.parametrize("query", ONE_SELECT)
def test_the_one_select_statement_gives_the_statistics_of_the_cte_form(seeded_demo, query) -> None:
    con = seeded_demo(0)
    sql = con.prepare(query).sql
    assert sql.startswith("SELECT ") and "__stats" not in sql
    ctes = rewrite(prepare(query, con.policy, con.engine).plan, _AsCtes()).sql
    assert ctes.startswith("WITH __src AS (") and "__stats" in ctes
    assert con.engine.statistics(sql) == con.engine.statistics(ctes)


@pytest.mark.parametrize("query, derived", [
    (UNGROUPED[0], False),  # COUNT(*)
    (UNGROUPED[1], False),  # SUM(v)
    (ONE_SELECT[len(UNGROUPED)], False),  # COUNT(v), SUM(w), and a WHERE
    (ONE_SELECT[-1], False),
    (UNGROUPED[2], True),  # COUNT(v) and SUM(v): v is computed once, in the derived table
    (UNGROUPED[3], True),
])
def test_values_read_once_are_computed_in_the_aggregates(seeded_demo, query, derived) -> None:
    sql = seeded_demo(0).prepare(query).sql
    assert (" AS __src" in sql) == derived
    if not derived:
        assert " AS __v" not in sql and sql.count(" FROM ") == 1  # no value column, one SELECT


@pytest.mark.parametrize("query", [
    "SELECT sex, DP_COUNT(*) FROM adult GROUP BY sex WITH (epsilon = 1)",
    "SELECT DP_MEDIAN(age) FROM adult WITH (epsilon = 1)",  # a subquery of its mechanism
])
def test_grouped_statements_and_subqueries_keep_their_ctes(seeded_demo, query) -> None:
    assert seeded_demo(0).prepare(query).sql.startswith("WITH __src AS (")


def test_the_spark_statement_keeps_its_form(seeded_demo) -> None:
    con = seeded_demo(0)
    spark = con.rewritten_sql("SELECT DP_SUM(age) FROM adult WITH (epsilon = 1)", dialect="spark")
    assert "__stats" in spark and spark.startswith("WITH")


# -- the ledger's shortcuts see what other handles did ----------------------------------------


def test_a_charge_sees_a_total_changed_and_charges_made_by_another_handle(tmp_path) -> None:
    path = str(tmp_path / "l.ledger")
    budget = Budget(Cost(epsilon=1.0))
    a = Ledger.open(path, budget, create=True)
    a.charge(Cost(epsilon=0.25))
    assert a.spent().epsilon == pytest.approx(0.25)  # the running sums are now kept
    b = Ledger.open(path, budget)
    b.charge(Cost(epsilon=0.5))
    assert a.spent().epsilon == pytest.approx(0.75)
    with pytest.raises(dpsql.BudgetError):
        a.charge(Cost(epsilon=0.5))
    b.set_total(Budget(Cost(epsilon=2.0)), "more budget")
    with pytest.raises(dpsql.LedgerError, match="was changed"):
        a.charge(Cost(epsilon=0.1))
    assert a.spent().epsilon == pytest.approx(0.75)
    a.close()
    b.close()


@pytest.mark.parametrize("statement", [
    "SHOW TABLES", "  show all tables;", "\n\tDescribe adult", "desc TABLE adult ;", "sHoW adult",
    "SHOW COLUMNS IN adult", "\u2003DESCRIBE \"adult\"", "\u017fHOW TABLES",  # ſ: IGNORECASE matches S
])
def test_catalog_statements_are_still_answered_before_the_binder(seeded_demo, statement) -> None:
    from dpsql.describe import answer

    con = seeded_demo(0)
    res = answer(con, statement)
    assert res is not None and len(res) >= 1 and res.report == []
    assert answer(con, "SELECT DP_COUNT(*) FROM adult WITH (epsilon = 1)") is None


def test_a_charge_reads_the_header_and_the_new_entries_in_one_statement_and_counts_each_once(tmp_path) -> None:
    path = str(tmp_path / "l.ledger")
    budget = Budget(Cost(epsilon=1.0))
    a = Ledger.open(path, budget, create=True)
    b = Ledger.open(path, budget)
    for _ in range(3):
        b.charge(Cost(epsilon=0.25))  # a has read nothing yet: its charge reads all three
    with pytest.raises(dpsql.BudgetError):
        a.charge(Cost(epsilon=0.3))
    assert a.charge(Cost(epsilon=0.25)) > 0 and a.spent().epsilon == pytest.approx(1.0)
    b.close()
    a.close()


def test_a_header_removed_after_opening_refuses_the_charge(tmp_path) -> None:
    import sqlite3

    path = str(tmp_path / "l.ledger")
    ledger = Ledger.open(path, Budget(Cost(epsilon=1.0)), create=True)
    raw = sqlite3.connect(path)
    raw.execute("DELETE FROM ledger_header")
    raw.commit()
    raw.close()
    with pytest.raises(dpsql.LedgerError, match="no header row"):
        ledger.charge(Cost(epsilon=0.1))
    assert ledger.history() == []
    ledger.close()
