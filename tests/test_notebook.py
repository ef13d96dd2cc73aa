"""Notebooks and DuckDB in Python: results and the budget render as tables, ``df()`` carries the
report, the ``%%dpsql`` cell magic (through IPython's InteractiveShell), and a DuckDB
connection handed to ``dpsql.connect`` (its lockdown said out loud, registered pandas and Arrow
objects declared in the policy)."""

from __future__ import annotations

import math
import typing as t

import duckdb
import pandas as pd
import pyarrow as pa
import pytest
from IPython.core.interactiveshell import InteractiveShell

import dpsql
from dpsql._privacy.noise import SeededNoise
from dpsql.interfaces.demo import connect_demo, demo_policy_path, load_adult

GROUPED = ("SELECT sex, DP_MEAN(age) AS mean_age, DP_COUNT(*) AS n, DP_MEAN(age) * 12 AS months "
           "FROM adult GROUP BY sex WITH (epsilon = 1)")


@pytest.fixture
def con() -> t.Iterator[dpsql.Connection]:
    c = connect_demo(noise=SeededNoise(0))
    yield c
    c.close()


# -- Result --------------------------------------------------------------------------------------


def test_result_repr_is_the_table_with_the_report_under_it(con) -> None:
    res = con.sql(GROUPED)
    text = repr(res).splitlines()
    assert text[0].startswith("┌") and "│ sex    │ mean_age │" in text[1]
    assert text[-2].startswith("-- DP_MEAN(age): laplace, ε=0.5, ±")
    assert text[-1].startswith("-- DP_COUNT(*): laplace, ε=0.5, ±")
    assert res.fetchall()  # showing it consumed nothing


def test_result_html_has_the_rows_and_the_report(con) -> None:
    html = con.sql(GROUPED)._repr_html_()
    assert html.startswith("<table") and "<th>mean_age</th>" in html and "<td>Female</td>" in html
    assert html.index("</table>") < html.index("DP_MEAN(age): laplace")
    public = con.sql("SELECT education FROM education_levels WHERE education_num < 3 ORDER BY 1")._repr_html_()
    assert "<td>1st-4th</td>" in public and "laplace" not in public


def test_html_is_escaped(con) -> None:
    html = con.sql("SELECT '<b>x</b>' AS \"a<b\" FROM education_levels LIMIT 1")._repr_html_()
    assert "<b>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html and "a&lt;b" in html


def test_a_long_result_shows_its_first_rows_and_says_so() -> None:
    res = dpsql.Result(table=pa.table({"i": list(range(100))}))
    assert "(100 rows, the first 40 shown)" in repr(res) and "│ 39 │" in repr(res) and "│ 40 │" not in repr(res)
    assert "(100 rows, the first 40 shown)" in res._repr_html_()
    assert len(res.fetchall()) == 100


def test_df_intervals_follow_the_released_dp_columns(con) -> None:
    res = con.sql(GROUPED)
    frame = res.df(intervals=True)
    assert list(frame.columns) == ["sex", "mean_age", "mean_age_ci", "n", "n_ci", "months"]
    mean_entry, count_entry = res.report
    # each group its own width (from its own noisy count); the report shows the widest
    assert frame["mean_age_ci"].max() == mean_entry.ci_half_width
    assert frame["mean_age_ci"].nunique() == 2 and (frame["mean_age_ci"] > 0).all()
    assert (frame["n_ci"] == count_entry.ci_half_width).all()  # counts share one noise scale
    assert list(res.df().columns) == ["sex", "mean_age", "n", "months"]


def test_df_carries_the_report_in_attrs(con) -> None:
    res = con.sql(GROUPED)
    report = res.df().attrs["dpsql_report"]
    assert [r["column"] for r in report] == ["DP_MEAN(age)", "DP_COUNT(*)"]
    assert report[0]["output_columns"] == ["mean_age"] and report[1]["output_columns"] == ["n"]
    assert report[0]["mechanism"] == "laplace" and report[0]["confidence"] == 0.95
    assert report[0]["ci_half_width"] == res.report[0].ci_half_width


def test_one_aggregate_shown_twice_has_an_interval_each_time(con) -> None:
    res = con.sql("SELECT DP_SUM(age) AS a, DP_SUM(age) AS b, DP_SUM(age) + 1 AS c FROM adult "
                  "WITH (epsilon = 1, confidence = 0.9)")
    frame = res.df(intervals=True)
    assert list(frame.columns) == ["a", "a_ci", "b", "b_ci", "c"]
    assert frame["a_ci"][0] == frame["b_ci"][0] == res.report[0].ci_half_width
    assert frame.attrs["dpsql_report"][0]["confidence"] == 0.9


def test_no_interval_is_nan(con) -> None:
    frame = con.sql("SELECT DP_MEDIAN(age) AS m FROM adult WITH (epsilon = 1)").df(intervals=True)
    assert list(frame.columns) == ["m", "m_ci"] and math.isnan(frame["m_ci"][0])


def test_a_public_result_gets_no_interval_columns(con) -> None:
    frame = con.sql("SELECT education_num FROM education_levels").df(intervals=True)
    assert list(frame.columns) == ["education_num"] and frame.attrs["dpsql_report"] == []


# -- the budget ---------------------------------------------------------------------------------


def test_the_budget_renders_as_a_small_table(con) -> None:
    fresh = repr(con.budget)
    assert "│ total     │ 10 │ 1e-05 │" in fresh and "no query has spent budget yet" in fresh
    con.sql("SELECT DP_COUNT(*) FROM adult WITH (epsilon = 0.25)")
    status = con.budget
    text = repr(status)
    assert "│ spent     │ 0.25 │" in text and "│ remaining │ 9.75 │" in text
    assert "SELECT DP_COUNT(*) FROM adult WITH (epsilon = 0.25)" in text
    assert str(status) == "spent ε=0.250, δ=0 of ε=10.000, δ=1e-05; remaining ε=9.750, δ=1e-05"
    html = status._repr_html_()
    assert "<th>ε</th>" in html and "<td>remaining</td>" in html and "<caption>history</caption>" in html


# -- %%dpsql ------------------------------------------------------------------------------------


@pytest.fixture
def shell(con) -> t.Iterator[InteractiveShell]:
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "dpsql")
    ip.user_ns["con"] = con
    yield ip
    ip.user_ns.pop("con", None)
    ip.user_ns.pop("other", None)


def test_the_cell_magic_runs_a_query_and_returns_its_result(shell, con) -> None:
    out = shell.run_cell("%%dpsql con\nSELECT sex, DP_COUNT(*) AS n FROM adult GROUP BY sex\nWITH (epsilon = 1)\n")
    assert out.error_in_exec is None
    res = out.result
    assert isinstance(res, dpsql.Result) and res.columns == ["sex", "n"] and res.report
    assert "_repr_html_" in dir(res)
    assert con.budget.spent.epsilon == pytest.approx(1)


def test_the_magic_finds_the_only_connection_and_keeps_the_result(shell) -> None:
    out = shell.run_cell("%%dpsql --out counts\nSELECT DP_COUNT(*) AS n FROM adult WITH (epsilon = 1)")
    assert shell.user_ns["counts"] is out.result


def test_the_magic_runs_every_statement_and_shows_the_budget(shell, capsys) -> None:
    out = shell.run_cell("%%dpsql con\nSELECT DP_COUNT(*) FROM adult WITH (epsilon = 1);\n"
                         "SELECT DP_MEAN(age) FROM adult WITH (epsilon = 1);\n.budget\n")
    assert isinstance(out.result, dpsql.BudgetStatus) and out.result.spent.epsilon == pytest.approx(2)
    shown = capsys.readouterr().out
    assert "DP_COUNT(*): laplace" in shown and "DP_MEAN(age): laplace" in shown


def test_a_refused_cell_prints_one_error_and_charges_nothing(shell, con, capsys) -> None:
    out = shell.run_cell("%%dpsql con\nSELECT * FROM adult")
    assert out.result is None and out.error_in_exec is None  # no traceback
    err = capsys.readouterr().err
    assert err.splitlines() == ["Error: table adult is private: its rows cannot be selected; only DP aggregates "
                                "(DP_COUNT, DP_SUM, DP_MEAN, ...) may read it"]
    assert con.budget.spent.epsilon == 0


def test_a_syntax_error_in_a_cell_is_pointed_at(shell, capsys) -> None:
    shell.run_cell("%%dpsql con\nSELECT DP_COUNT(*) FROM adult WITH (epsilon = 1);\nSELECT DP_MEAN(age) FORM adult;\n")
    err = capsys.readouterr().err.splitlines()
    assert err == ["Error: statement 2 (line 2): syntax error at line 1, column 21 near 'FORM': did you mean FROM?",
                   "  SELECT DP_MEAN(age) FORM adult",
                   "                      ^^^^"]


@pytest.mark.parametrize("line,message", [
    ("nope", "Error: no variable nope in the notebook; open one with nope = dpsql.connect(...)"),
    ("other", "Error: other is a int, not a dpsql connection (dpsql.connect(...) returns one)"),
    ("con extra", "Error: usage: %%dpsql [CONNECTION] [--out NAME]"),
])
def test_magic_argument_errors(shell, capsys, line: str, message: str) -> None:
    shell.user_ns["other"] = 3
    out = shell.run_cell(f"%%dpsql {line}\nSELECT 1")
    assert out.result is None and capsys.readouterr().err.strip() == message


def test_two_connections_must_be_named(shell, capsys) -> None:
    second = connect_demo(noise=SeededNoise(1))
    shell.user_ns["other"] = second
    try:
        shell.run_cell("%%dpsql\nSELECT 1")
        assert capsys.readouterr().err.strip() == "Error: name the connection to use: %%dpsql con (there are con, other)"
    finally:
        second.close()


# -- a DuckDB connection of the caller ----------------------------------------------------------


POLICY = {
    "budget": {"epsilon": 5},
    "tables": {
        "visits": {"privacy_unit": "row", "columns": {"age": {"lower": 0, "upper": 100}}},
        "wards": {"public": True},
    },
}


def test_registered_pandas_and_arrow_objects_can_be_declared_and_queried() -> None:
    raw = duckdb.connect()
    raw.register("visits", pd.DataFrame({"age": [30, 40, 50] * 200, "ward": ["a", "b", "c"] * 200}))
    raw.register("wards", pa.table({"ward": ["a", "b", "c"], "floor": [1, 2, 3]}))
    with dpsql.connect(raw, POLICY, noise=SeededNoise(2)) as con:
        n = con.sql("SELECT DP_COUNT(*) FROM visits WITH (epsilon = 1)").fetchone()[0]
        assert abs(n - 600) < 20
        assert con.sql("SELECT floor FROM wards WHERE ward = 'b'").fetchall() == [(2,)]
        with pytest.raises(dpsql.PrivacyError, match="table visits is private"):
            con.sql("SELECT * FROM visits")
        assert "visits" in con.tables() and "wards" in con.tables()


def test_registered_objects_on_a_database_file_are_refused_with_what_to_do(tmp_path) -> None:
    raw = duckdb.connect(str(tmp_path / "f.duckdb"))
    raw.register("visits", pd.DataFrame({"age": [1, 2]}))
    with pytest.raises(dpsql.PolicyError, match=r"table visits is a registered \(temporary\) object"):
        dpsql.connect(raw, POLICY)
    assert raw.execute("SELECT count(*) FROM duckdb_views() WHERE NOT internal AND NOT temporary").fetchone()[0] == 0


def test_the_callers_connection_is_locked_down_and_the_repr_says_so() -> None:
    raw = duckdb.connect()
    load_adult(raw)
    con = dpsql.connect(raw, demo_policy_path())
    assert "NOTE: the DuckDB connection given to dpsql.connect() is locked down for good" in repr(con)
    other = raw.cursor()
    with pytest.raises(duckdb.Error, match="disabled"):
        other.execute("SELECT * FROM read_csv('anything.csv')")
    with pytest.raises(duckdb.Error):
        raw.execute("SET enable_external_access = true")
    con.close()


def test_a_connection_dpsql_opened_has_no_such_note(con) -> None:
    text = repr(con)
    assert text.startswith("<dpsql.Connection to an in-memory DuckDB") and "NOTE" not in text
    assert "tables: adult, education_levels" in text and "remaining ε=10.000" in text


def test_a_missing_ledger_in_python_names_the_keyword(tmp_path) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text('[budget]\nepsilon = 1.0\nledger = "b.ledger"\n[tables.t]\npublic = true\n')
    with pytest.raises(dpsql.LedgerError) as info:
        dpsql.connect(":memory:", str(policy))
    message = str(info.value)
    assert "does not exist; create it once with dpsql.connect(':memory:', " in message
    assert "init_ledger=True" in message and "--init-ledger" in message
    assert not (tmp_path / "b.ledger").exists()
