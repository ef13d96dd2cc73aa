"""Privacy units in the query language: per-unit subqueries and counting distinct units or values.

A CTE or subquery that GROUPs BY the privacy unit holds one row per unit and may feed DP
aggregates; any other GROUP BY below the DP aggregates stays refused. DP_COUNT(DISTINCT unit)
counts units; DP_COUNT(DISTINCT x) has the sensitivity it really has. The sensitivities are
checked by brute force over every small dataset of units.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

import dpsql
from dpsql._privacy.noise import SeededNoise

VISITS = Path(__file__).resolve().parent.parent / "fixtures" / "visits" / "visits.parquet"


def _policy(max_rows: int = 5) -> dict:
    return {
        "budget": {"epsilon": 1e9, "delta": 0.5},
        "tables": {"visits": {
            "privacy_unit": "patient_id", "max_rows_per_unit": max_rows,
            "columns": {"cost": {"lower": 0, "upper": 20000}, "stay": {"lower": 0, "upper": 30},
                        "ward": {"keys": ["cardiology", "emergency", "maternity", "oncology", "orthopaedics"]}},
        }},
    }


@pytest.fixture(scope="module")
def con() -> dpsql.Connection:
    def setup(c) -> None:  # type: ignore[no-untyped-def]
        c.execute(f"CREATE TABLE visits AS SELECT * FROM '{VISITS}'")

    c = dpsql.connect(":memory:", _policy(), setup=setup, noise=SeededNoise(5))
    yield c
    c.close()


def _exact(con: dpsql.Connection, sql: str) -> dict[str, object]:
    prepared = con.prepare(sql)
    names, rows = con.engine.statistics(prepared.sql)
    return dict(zip(names, rows[0]))


# -- per-unit subqueries -------------------------------------------------------------------------


PER_PATIENT = "WITH per AS (SELECT patient_id, count(*) AS n, sum(cost) AS spend FROM visits GROUP BY patient_id) "


def test_a_per_unit_cte_has_one_row_per_unit(con) -> None:
    truth = con.engine.connection.execute(
        "SELECT count(*), sum(LEAST(n, 30)) FROM (SELECT count(*) AS n FROM visits GROUP BY patient_id)").fetchone()
    query = PER_PATIENT + "SELECT DP_COUNT(*), DP_SUM(n, 0, 30) FROM per WITH (epsilon = 1)"
    exact = _exact(con, query)
    total = con.prepare(query).plan.prepared[1]  # the sum is of integers on a grid (dpsql.mechanisms.fixed)
    assert (exact["a0_n"], total.exact({"s": exact["a1_s"]})["s"]) == truth
    res = con.sql(PER_PATIENT + "SELECT DP_MEAN(n, 0, 30) AS visits, DP_COUNT(*) AS patients FROM per WITH (epsilon = 1)")
    visits, patients = res.fetchone()
    assert abs(patients - 4000) < 50 and 2 < visits < 5
    # one row per unit: the sensitivity is that of one row, not of max_rows_per_unit rows
    assert [e.sensitivity for e in res.report] == [15.0, 1.0]


def test_a_per_unit_cte_with_a_renamed_unit_and_a_filter(con) -> None:
    sql = ("WITH r AS (SELECT patient_id AS pid, stay FROM visits WHERE ward <> 'emergency'), "
           "per AS (SELECT pid, max(stay) AS longest FROM r GROUP BY pid) "
           "SELECT DP_MEDIAN(longest, 0, 30) FROM per WITH (epsilon = 1)")
    value = con.sql(sql).fetchone()[0]
    assert 0 <= value <= 30


@pytest.mark.parametrize("sql,fragment", [
    ("WITH per AS (SELECT ward, count(*) AS n FROM visits GROUP BY ward) SELECT DP_SUM(n, 0, 9) FROM per",
     "GROUP BY its privacy unit patient_id only"),
    ("WITH per AS (SELECT patient_id, count(*) AS n FROM visits GROUP BY patient_id, ward) "
     "SELECT DP_SUM(n, 0, 9) FROM per", "GROUP BY its privacy unit patient_id only"),
    ("WITH r AS (SELECT ward AS patient_id FROM visits), per AS (SELECT patient_id, count(*) AS n FROM r "
     "GROUP BY patient_id) SELECT DP_SUM(n, 0, 9) FROM per", "GROUP BY its privacy unit patient_id only"),
    ("WITH per AS (SELECT patient_id, list(cost) AS n FROM visits GROUP BY patient_id) SELECT DP_COUNT(*) FROM per",
     "array_agg() is not allowed"),
    ("WITH per AS (SELECT patient_id, cost FROM visits GROUP BY patient_id) SELECT DP_COUNT(*) FROM per",
     "must be the unit or an aggregate"),
    ("WITH per AS (SELECT patient_id, count(*) AS n FROM visits GROUP BY patient_id HAVING count(*) > 2) "
     "SELECT DP_COUNT(*) FROM per", "HAVING"),
    ("WITH per AS (SELECT patient_id, count(*) AS n FROM visits GROUP BY patient_id), "
     "again AS (SELECT patient_id, sum(n) AS m FROM per GROUP BY patient_id) SELECT DP_SUM(m, 0, 9) FROM again",
     "twice"),
    ("WITH per AS (SELECT patient_id, sum(cost) OVER () AS n FROM visits GROUP BY patient_id) "
     "SELECT DP_COUNT(*) FROM per", "must be the unit or an aggregate"),
    ("WITH per AS (SELECT patient_id, skewness(cost) AS n FROM visits GROUP BY patient_id) "
     "SELECT DP_COUNT(*) FROM per", "skewness() is not allowed"),
])
def test_other_groupings_below_the_dp_aggregates_are_refused(con, sql: str, fragment: str) -> None:
    before = con.budget.spent
    with pytest.raises(dpsql.PrivacyError) as info:
        con.sql(sql + " WITH (epsilon = 1)")
    assert fragment in str(info.value)
    assert con.budget.spent == before


def test_row_unit_tables_have_no_per_unit_subqueries() -> None:
    from dpsql.interfaces.demo import load_adult
    from tests.conftest import demo_policy

    c = dpsql.connect(":memory:", demo_policy(epsilon=10), setup=load_adult)
    with pytest.raises(dpsql.PrivacyError, match="its privacy unit is a row"):
        c.sql("WITH g AS (SELECT sex, count(*) AS n FROM adult GROUP BY sex) SELECT DP_SUM(n, 0, 9) FROM g "
              "WITH (epsilon = 1)")


# -- counting distinct units and values ---------------------------------------------------------


def test_counting_distinct_units_and_values(con) -> None:
    exact = _exact(con, "SELECT DP_COUNT(DISTINCT patient_id), DP_COUNT(DISTINCT ward) FROM visits WITH (epsilon = 1)")
    assert exact["a0_n"] == 4000 and exact["a1_n"] == 5
    prepared = con.prepare("SELECT DP_COUNT(DISTINCT patient_id), DP_COUNT(DISTINCT ward) FROM visits "
                           "WITH (epsilon = 1)")
    units, wards = (p.parts["n"].sensitivity for p in prepared.plan.prepared)
    assert (units, wards) == (1.0, 5.0)
    grouped = con.prepare("SELECT ward, DP_COUNT(DISTINCT patient_id) FROM visits GROUP BY ward WITH (epsilon = 1)")
    assert grouped.plan.prepared[0].parts["n"].sensitivity == 5.0  # a unit reaches up to 5 wards


def _distinct_count_moves(m: int, universe: range, units: int) -> tuple[int, int]:
    """Largest change of COUNT(DISTINCT unit) and COUNT(DISTINCT value) between neighbours that
    add or remove one unit of at most m rows, over every small dataset."""
    unit_rows = [rows for k in range(1, m + 1) for rows in itertools.combinations_with_replacement(universe, k)]
    worst_units = worst_values = 0
    for n in range(units + 1):
        for data in itertools.combinations_with_replacement(range(len(unit_rows)), n):
            values = {v for i in data for v in unit_rows[i]}
            for extra in range(len(unit_rows)):
                bigger = values | set(unit_rows[extra])
                worst_units = max(worst_units, 1)  # one more unit id
                worst_values = max(worst_values, len(bigger) - len(values))
    return worst_units, worst_values


@pytest.mark.parametrize("m", [1, 2, 3])
def test_distinct_count_sensitivities_match_brute_force(m: int) -> None:
    worst_units, worst_values = _distinct_count_moves(m, range(4), units=2)
    def setup(c) -> None:  # type: ignore[no-untyped-def]
        c.execute("CREATE TABLE visits (patient_id INTEGER, ward VARCHAR, cost DOUBLE, stay INTEGER)")

    c = dpsql.connect(":memory:", {"budget": {"epsilon": 10}, "tables": {"visits": {
        "privacy_unit": "patient_id", "max_rows_per_unit": m}}}, setup=setup)
    prepared = c.prepare("SELECT DP_COUNT(DISTINCT patient_id), DP_COUNT(DISTINCT ward) FROM visits WITH (epsilon = 1)")
    claimed = [p.parts["n"].sensitivity for p in prepared.plan.prepared]
    assert claimed == [worst_units, worst_values] == [1, m]
