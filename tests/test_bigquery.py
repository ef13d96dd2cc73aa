"""BigQuery's SELECT WITH DIFFERENTIAL_PRIVACY: parsed, translated into the dpsql form, and
released exactly as the dpsql query would be (same seeded noise, same values, same charge)."""

from __future__ import annotations

import copy
import doctest
from pathlib import Path

import pytest

import dpsql
from dpsql._policy.policy import load_policy
from dpsql._privacy.noise import SeededNoise
from dpsql._sql import bigquery
from dpsql._sql import dialect as d
from dpsql.errors import Error, OptionError, ParseError, PrivacyError
from tests.conftest import demo_policy

VISITS = Path(__file__).resolve().parent.parent / "fixtures" / "visits"

#: The professors table of BigQuery's and ZetaSQL's examples; the privacy unit is the id.
PROFESSORS = [(101, "pencil", 24), (123, "pen", 16), (123, "pencil", 10), (123, "pencil", 38),
              (101, "pen", 19), (101, "pen", 23), (130, "scissors", 8), (150, "pencil", 72)]
PROFESSORS_POLICY = {
    "budget": {"epsilon": 1e9, "delta": 0.5},
    "tables": {"professors": {"privacy_unit": "id", "max_rows_per_unit": 3, "columns": {
        "quantity": {"lower": 0, "upper": 100}, "item": {"keys": ["pen", "pencil", "scissors"]}}}},
}
EXAMPLE = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-5, max_groups_contributed = 2, "
           "privacy_unit_column = id) item, AVG(quantity, contribution_bounds_per_group => (0, 100)) "
           "AS average_quantity FROM professors GROUP BY item")


# One DuckDB thread: a grouped statistics query then returns its rows in one order, so that the
# seeded noise meets the groups in the same order in both forms (and float sums add up alike).


def _professors(seed: int = 0) -> dpsql.Connection:
    def setup(con) -> None:
        con.execute("SET threads = 1")
        con.execute("CREATE TABLE professors (id INTEGER, item VARCHAR, quantity INTEGER)")
        con.executemany("INSERT INTO professors VALUES (?, ?, ?)", PROFESSORS)

    return dpsql.connect(":memory:", copy.deepcopy(PROFESSORS_POLICY), setup=setup, noise=SeededNoise(seed))


def _visits(seed: int = 0) -> dpsql.Connection:
    def setup(con) -> None:
        con.execute("SET threads = 1")
        con.execute(f"CREATE TABLE visits AS SELECT * FROM '{VISITS / 'visits.parquet'}'")

    return dpsql.connect(":memory:", VISITS / "visits.toml", setup=setup, noise=SeededNoise(seed))


def _demo(seed: int = 0, **defaults: object) -> dpsql.Connection:
    from dpsql.interfaces.demo import load_adult

    def setup(con) -> None:
        con.execute("SET threads = 1")
        load_adult(con)

    policy = demo_policy(epsilon=1e9, delta=0.5)
    if defaults:
        policy["defaults"] = dict(defaults)
    return dpsql.connect(":memory:", policy, setup=setup, noise=SeededNoise(seed))


# -- parsing -------------------------------------------------------------------------------------


def test_the_issue_example_parses_into_the_clause_and_the_bounds() -> None:
    node = d.parse(EXAMPLE)
    clause = node.this.args["hint"]
    assert isinstance(clause, d.DifferentialPrivacyClause)
    assert [eq.this.name for eq in clause.expressions] == ["epsilon", "delta", "max_groups_contributed",
                                                          "privacy_unit_column"]
    bounds = node.this.expressions[1].this
    assert isinstance(bounds, d.ContributionBounds) and bounds.text("per") == "group"
    assert (bounds.args["lower"].this, bounds.args["upper"].this) == ("0", "100")
    assert d.to_sql(node) == EXAMPLE and d.parse(d.to_sql(node)) == node


def test_lower_case_and_no_options_parse() -> None:
    node = d.parse("select with differential_privacy sum(age, contribution_bounds_per_group => (0, 100)) from adult")
    assert node.this.args["hint"].expressions == []
    assert d.to_sql(node) == ("SELECT WITH DIFFERENTIAL_PRIVACY SUM(age, contribution_bounds_per_group => (0, 100)) "
                              "FROM adult")


def test_the_module_doctests_pass() -> None:
    assert doctest.testmod(bigquery).failed == 0


def test_translation_of_the_issue_example() -> None:
    pol = load_policy(copy.deepcopy(PROFESSORS_POLICY))
    node = d.parse(EXAMPLE)
    notes = bigquery.translate(node, pol)
    assert d.to_sql(node) == ("SELECT item, DP_MEAN(quantity, 0, 100) AS average_quantity FROM professors "
                              "GROUP BY item WITH (epsilon = 1, delta = 1e-5, max_groups_per_unit = 2)")
    assert notes[0].startswith("BigQuery form: WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1")
    assert "privacy_unit_column = id: the policy's privacy unit of table professors" in notes
    assert any("clips each row" in n and "BigQuery clamps each id's total" in n for n in notes)


def test_a_statement_without_the_clause_is_left_alone() -> None:
    node = d.parse("SELECT DP_COUNT(*) FROM adult WITH (epsilon = 1)")
    before = d.to_sql(node)
    assert bigquery.translate(node, load_policy(demo_policy())) == [] and d.to_sql(node) == before


# -- the same release as the dpsql form ------------------------------------------------------------


SAME_ON_ADULT = [
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-5, max_groups_contributed = 1) sex, "
     "COUNT(*, contribution_bounds_per_group => (0, 100)) AS n, AVG(age, contribution_bounds_per_group => (0, 100)) "
     "AS a FROM adult GROUP BY sex",
     "SELECT sex, DP_COUNT(*) AS n, DP_MEAN(age, 0, 100) AS a FROM adult GROUP BY sex WITH (epsilon = 1, delta = 1e-5)"),
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) SUM(hours_per_week, contribution_bounds_per_group "
     "=> (0, 80)) AS s, COUNT(workclass) AS c FROM adult WHERE age >= 30",
     "SELECT DP_SUM(hours_per_week, 0, 80) AS s, DP_COUNT(workclass) AS c FROM adult WHERE age >= 30 "
     "WITH (epsilon = 0.5)"),
    ("select with differential_privacy options (epsilon = 2) var_pop(age) as v, stddev_pop(age, "
     "contribution_bounds_per_row => (0, 90)) as s, percentile_cont(age, 0.9, contribution_bounds_per_row => "
     "(0, 100)) as p from adult",
     "SELECT DP_VAR(age) AS v, DP_STDDEV(age, 0, 90) AS s, DP_QUANTILE(age, 0.9, 0, 100) AS p FROM adult "
     "WITH (epsilon = 2)"),
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) sex, COUNT(*) AS n FROM adult GROUP BY sex "
     "HAVING COUNT(*) > 100 ORDER BY COUNT(*) DESC LIMIT 1",
     "SELECT sex, DP_COUNT(*) AS n FROM adult GROUP BY sex HAVING DP_COUNT(*) > 100 ORDER BY DP_COUNT(*) DESC "
     "LIMIT 1 WITH (epsilon = 1)"),
]


@pytest.mark.parametrize(("bq", "ours"), SAME_ON_ADULT)
def test_bigquery_form_releases_what_the_dpsql_form_releases_on_adult(bq: str, ours: str) -> None:
    a, b = _demo(seed=7), _demo(seed=7)
    ra, rb = a.sql(bq), b.sql(ours)
    assert ra.fetchall() == rb.fetchall()
    assert ra.columns == rb.columns
    assert a.budget.spent == b.budget.spent
    assert a.prepare(bq).sql == b.prepare(ours).sql  # one statistics query, the same one
    assert any(n.startswith("BigQuery form:") for n in ra.notes)


SAME_ON_VISITS = [
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-5, max_groups_contributed = 2, "
     "privacy_unit_column = patient_id) ward, AVG(stay, contribution_bounds_per_group => (0, 30)) AS s, "
     "COUNT(*, contribution_bounds_per_group => (0, 3)) AS n FROM visits GROUP BY ward",
     "SELECT ward, DP_MEAN(stay, 0, 30) AS s, DP_COUNT(*) AS n FROM visits GROUP BY ward "
     "WITH (epsilon = 1, delta = 1e-5, max_groups_per_unit = 2, max_rows_per_group_per_unit = 3)"),
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, max_groups_contributed = 2) "
     "COUNT(*, contribution_bounds_per_group => (0, 4)) AS n FROM visits",
     "SELECT DP_COUNT(*) AS n FROM visits WITH (epsilon = 1, max_rows_per_unit = 4)"),
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, max_rows_contributed = 2) "
     "SUM(cost, contribution_bounds_per_row => (0, 1000)) AS c FROM visits WHERE stay > 0",
     "SELECT DP_SUM(cost, 0, 1000) AS c FROM visits WHERE stay > 0 WITH (epsilon = 1, max_rows_per_unit = 2)"),
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, privacy_unit_column = visits.patient_id) ward, "
     "COUNT(*) AS n FROM visits GROUP BY ward",
     "SELECT ward, DP_COUNT(*) AS n FROM visits GROUP BY ward WITH (epsilon = 1)"),
]


@pytest.mark.parametrize(("bq", "ours"), SAME_ON_VISITS)
def test_bigquery_form_releases_what_the_dpsql_form_releases_on_an_id_unit(bq: str, ours: str) -> None:
    a, b = _visits(seed=3), _visits(seed=3)
    ra, rb = a.sql(bq), b.sql(ours)
    assert ra.fetchall() == rb.fetchall()
    assert a.budget.spent == b.budget.spent
    assert a.prepare(bq).sql == b.prepare(ours).sql


def test_explain_shows_the_translation_and_spends_nothing() -> None:
    con = _professors()
    text = con.prepare("EXPLAIN " + EXAMPLE).explain_text()
    lines = text.splitlines()
    assert lines[1] == ("BigQuery form: WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-5, "
                        "max_groups_contributed = 2, privacy_unit_column = id) → WITH (epsilon = 1, delta = 1e-5, "
                        "max_groups_per_unit = 2)")
    assert ("BigQuery aggregate AVG(quantity, contribution_bounds_per_group => (0, 100)) → "
            "DP_MEAN(quantity, 0, 100)") in lines
    assert "bounds: max_groups_per_unit = 2 (query)" in text
    con.sql("EXPLAIN " + EXAMPLE)
    assert con.budget.spent.epsilon == 0


def test_on_professors_dpsql_averages_rows_where_bigquery_averages_per_unit_averages() -> None:
    """docs/bigquery.md: BigQuery's docs show pencil 40, pen 18.5, scissors 8 (the mean of each
    professor's mean); dpsql's AVG is the mean of the (clipped) rows: 36, 19.33, 8."""
    query = EXAMPLE.replace("epsilon = 1,", "epsilon = 1e9,")
    rows = dict(_professors().sql(query + " ORDER BY item").fetchall())
    assert rows["pencil"] == pytest.approx(36, abs=1e-3)
    assert rows["pen"] == pytest.approx(58 / 3, abs=1e-3)
    assert rows["scissors"] == pytest.approx(8, abs=1e-3)


def test_on_professors_count_and_sum_agree_with_bigquerys_documented_results() -> None:
    """BigQuery's docs, without noise: COUNT(*, contribution_bounds_per_group => (0, 100)) is
    pencil 4, pen 3, scissors 1 and SUM(quantity, ... (0, 100)) pencil 144, pen 58, scissors 8:
    no unit's total leaves the bounds, so per-row clipping gives the same numbers."""
    query = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1e9, delta = 1e-5, max_groups_contributed = 2, "
             "privacy_unit_column = id) item, COUNT(*, contribution_bounds_per_group => (0, 100)) AS n, "
             "SUM(quantity, contribution_bounds_per_group => (0, 100)) AS s FROM professors GROUP BY item ORDER BY item")
    rows = _professors().sql(query).fetchall()
    assert [(item, n) for item, n, _ in rows] == [("pen", 3), ("pencil", 4), ("scissors", 1)]
    assert [s for _, _, s in rows] == pytest.approx([58, 144, 8], abs=1e-3)


def test_the_issue_example_releases_what_its_dpsql_form_releases() -> None:
    ours = ("SELECT item, DP_MEAN(quantity, 0, 100) AS average_quantity FROM professors GROUP BY item "
            "WITH (epsilon = 1, delta = 1e-5, max_groups_per_unit = 2)")
    a, b = _professors(seed=11), _professors(seed=11)
    assert a.sql(EXAMPLE).fetchall() == b.sql(ours).fetchall()
    assert a.budget.spent == b.budget.spent


def test_without_options_the_policy_default_budget_is_spent() -> None:
    con = _demo(epsilon=0.25)
    r = con.sql("SELECT WITH DIFFERENTIAL_PRIVACY COUNT(*) AS n FROM adult")
    assert r.cost.epsilon == pytest.approx(0.25)
    assert r.notes[0] == "BigQuery form: WITH DIFFERENTIAL_PRIVACY → no options"
    assert any("[defaults]" in n for n in r.notes)


# -- refusals: one line, nothing charged ----------------------------------------------------------


REFUSED = [
    (_visits, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, privacy_unit_column = id) COUNT(*) FROM visits",
     OptionError, "privacy_unit_column = id is not the privacy unit of table visits, which is patient_id"),
    (_demo, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, privacy_unit_column = id) COUNT(*) FROM adult",
     OptionError, "the privacy unit of table adult is a row"),
    (_demo, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, group_selection_strategy = PUBLIC_GROUPS) "
     "COUNT(*) FROM adult", OptionError, "unknown option 'group_selection_strategy'"),
    (_demo, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*) FROM adult WITH (delta = 1e-6)",
     ParseError, "not in both"),
    (_demo, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) sex, MAX(age) FROM adult GROUP BY sex",
     PrivacyError, "MAX(age) is not one of the differentially private aggregates of BigQuery's form"),
    (_visits, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, max_groups_contributed = 2, "
     "max_rows_contributed = 2) COUNT(*) FROM visits", OptionError, "not both"),
    (_visits, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) ward, COUNT(*, contribution_bounds_per_group "
     "=> (0, 2)), COUNT(stay, contribution_bounds_per_group => (0, 3)) FROM visits GROUP BY ward",
     OptionError, "different upper contribution bounds (2 and 3)"),
    (_visits, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, max_rows_contributed = 2) ward, COUNT(*) "
     "FROM visits GROUP BY ward", OptionError, "max_rows_contributed cannot bound this GROUP BY"),
    (_demo, "SELECT WITH DIFFERENTIAL_PRIVACY COUNT(*) FROM adult", OptionError,
     "WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = ...)"),
    (_demo, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*, contribution_bounds_per_group => (0, 0)) "
     "FROM adult", OptionError, "whole upper bound from 1"),
    (_demo, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) PERCENTILE_CONT(age, age) FROM adult",
     PrivacyError, "PERCENTILE_CONT(age, age): the percentile must be a number in [0, 1]"),
    (_demo, "SELECT WITH ANONYMIZATION OPTIONS (epsilon = 1) COUNT(*) FROM adult", ParseError, "older form"),
    (_demo, "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*) FROM information_schema.tables",
     PrivacyError, "an information_schema query takes no WITH DIFFERENTIAL_PRIVACY clause"),
]


@pytest.mark.parametrize(("connect", "sql", "error", "fragment"), REFUSED)
def test_refusals_are_one_line_and_charge_nothing(connect, sql: str, error: type, fragment: str) -> None:
    con = connect()
    with pytest.raises(error) as err:
        con.sql(sql)
    assert fragment in str(err.value) and "\n" not in str(err.value)
    assert con.budget.spent.epsilon == 0 and not con.budget.history


def test_a_private_column_outside_the_aggregates_is_refused_as_in_the_dpsql_form() -> None:
    con = _demo()
    with pytest.raises(Error) as bq:
        con.sql("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) sex, age, COUNT(*) FROM adult GROUP BY sex")
    with pytest.raises(Error) as ours:
        con.sql("SELECT sex, age, DP_COUNT(*) FROM adult GROUP BY sex WITH (epsilon = 1)")
    assert type(bq.value) is type(ours.value) and str(bq.value) == str(ours.value)
    assert "column age of private table adult" in str(bq.value)
    assert con.budget.spent.epsilon == 0
