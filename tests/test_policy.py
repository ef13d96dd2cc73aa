"""Policy files: TOML, YAML, SmartNoise metadata, and one-line errors naming the key."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import dpsql
from dpsql._accounting.budget import Budget, Cost
from dpsql._policy.policy import load_policy
from dpsql.errors import PolicyError

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def test_adult_policy_fixture() -> None:
    pol = load_policy(FIXTURES / "policies" / "adult.toml")
    adult = pol.table("ADULT")
    assert adult is not None and not adult.public and adult.privacy_unit == "row"
    assert adult.column("age").bounds == (0, 100)
    assert adult.column("sex").keys == ("Female", "Male")
    assert pol.table("education_levels").public
    assert pol.budget.total.epsilon == 10 and pol.budget.total.delta == 1e-5
    assert pol.ledger == str(FIXTURES / "policies" / "adult.ledger")


def test_yaml_policy(tmp_path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        "neighbouring: replace\nbudget: {epsilon: 2}\ntables:\n  t:\n    columns:\n      x: {lower: -1, upper: 1}\n"
    )
    pol = load_policy(path)
    assert pol.neighbouring == "replace" and pol.table("t").column("x").bounds == (-1, 1)


@pytest.mark.parametrize("name", ["PUMS.yaml", "PUMS_pid.yaml", "PUMS_dup.yaml"])
def test_smartnoise_metadata_is_imported(name: str) -> None:
    pol = load_policy(FIXTURES / "smartnoise" / name)
    pums = pol.table("PUMS.PUMS")  # SmartNoise's schema.table
    assert pums is not None and pums.column("age").bounds == (0, 100)
    assert (pums.schema, pums.table_name) == ("pums", "pums") and pol.resolve("PUMS") == [pums.name]
    assert pums.column("income").bounds == (0, 500000)
    if name == "PUMS_pid.yaml":
        assert pums.privacy_unit == "pid"


def test_smartnoise_policy_answers_its_own_queries() -> None:
    """SmartNoise's metadata names the table PUMS.PUMS, and so do its queries."""
    def setup(con):
        con.execute("CREATE SCHEMA PUMS")
        con.execute(f"CREATE TABLE PUMS.PUMS AS SELECT * FROM read_csv('{FIXTURES / 'smartnoise' / 'PUMS.csv'}')")

    pol = dataclasses.replace(load_policy(FIXTURES / "smartnoise" / "PUMS.yaml"), budget=Budget(total=Cost(epsilon=10)))
    con = dpsql.connect(":memory:", pol, setup=setup)
    for table in ("PUMS.PUMS", "pums.pums", "PUMS"):  # unqualified: the one declared table of that name
        value = con.sql(f"SELECT DP_MEAN(age) FROM {table} WITH (epsilon = 1)").fetchone()[0]
        assert 30 < value < 60  # exact mean age of the 1,000-row sample is 44.8
    res = con.sql("SELECT sex, DP_COUNT(*) AS n FROM PUMS.PUMS GROUP BY sex WITH (epsilon = 1, keys = ['0', '1'])")
    assert len(res.fetchall()) == 2
    with pytest.raises(dpsql.PrivacyError, match="table pums.pums is private"):
        con.sql("SELECT * FROM PUMS.PUMS")
    with pytest.raises(dpsql.BindError, match="table main.pums does not exist|in the policy but does not exist"):
        con.sql("SELECT DP_COUNT(*) FROM main.PUMS WITH (epsilon = 1)")


@pytest.mark.parametrize(
    "policy,fragment",
    [
        ({"tables": {}}, "no [budget]"),
        ({"budget": {"epsilon": 0}}, "budget.epsilon must be > 0"),
        ({"budget": {"epsilon": 1, "delta": 1.5}}, "budget.delta"),
        ({"budget": {"epsilon": "x"}}, "budget.epsilon must be a number"),
        ({"budget": {"epsilon": 1}, "neighbouring": "swap"}, "neighbouring"),
        ({"budget": {"epsilon": 1}, "tables": {"t": {"columns": {"x": {"lower": 5, "upper": 1}}}}}, "tables.t.columns.x"),
        ({"budget": {"epsilon": 1}, "tables": {"t": {"columns": {"x": {"lower": 5}}}}}, "give both lower and upper"),
        ({"budget": {"epsilon": 1}, "tables": {"t": {"max_rows_per_unit": 0}}}, "max_rows_per_unit"),
        ({"budget": {"epsilon": 1}, "tables": {"t": {"colour": 1}}}, "unknown key 'colour'"),
        ({"budget": {"epsilon": 1}, "tables": {"t": {"privacy_unit": "pid"}}}, "needs max_rows_per_unit"),
        ({"budget": {"epsilon": 1, "rho": 1}}, "not both"),
    ],
)
def test_policy_errors_name_the_key(policy: dict, fragment: str) -> None:
    with pytest.raises(PolicyError) as err:
        load_policy(policy)
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_tables_outside_the_policy_cannot_be_read() -> None:
    def setup(con):
        con.execute("CREATE TABLE secret AS SELECT 1 AS x")
        con.execute("CREATE TABLE t AS SELECT 1 AS x")

    con = dpsql.connect(":memory:", {"budget": {"epsilon": 1}, "tables": {"t": {"public": True}}}, setup=setup)
    assert con.sql("SELECT x FROM t").fetchall() == [(1,)]
    with pytest.raises(dpsql.PrivacyError, match="secret is not declared in the policy"):
        con.sql("SELECT x FROM secret")


def test_bundled_demo_table_equals_the_csv_fixture() -> None:
    """The demo's Parquet file holds exactly the rows of fixtures/adult/adult.csv."""
    import duckdb

    from dpsql.interfaces.demo import load_adult

    con = duckdb.connect()
    load_adult(con)
    con.execute(f"CREATE TABLE csv AS SELECT * FROM read_csv('{FIXTURES / 'adult' / 'adult.csv'}', header = true, nullstr = '')")
    assert con.execute("SELECT count(*) FROM adult").fetchone()[0] == 32561
    assert con.execute("SELECT count(*) FROM (SELECT * FROM adult EXCEPT ALL SELECT * FROM csv)").fetchone()[0] == 0
    assert con.execute("SELECT count(*) FROM (SELECT * FROM csv EXCEPT ALL SELECT * FROM adult)").fetchone()[0] == 0


# -- the policy against the catalog ------------------------------------------------------------


def _visits(con) -> None:  # type: ignore[no-untyped-def]
    con.execute("CREATE TABLE visits (patient_id INTEGER, cost DOUBLE, ward VARCHAR)")


@pytest.mark.parametrize("table,fragment", [
    ({"privacy_unit": "patientid", "max_rows_per_unit": 2},
     "tables.visits.privacy_unit: table visits has no column patientid; did you mean patient_id?"),
    ({"privacy_unit": "patiend_id", "max_rows_per_unit": 2},
     "tables.visits.privacy_unit: table visits has no column patiend_id; did you mean patient_id?"),
    ({"privacy_unit": "person", "max_rows_per_unit": 2}, "table visits has no column person"),  # nothing near
    ({"privacy_unit": "patient_id", "max_rows_per_unit": 2, "columns": {"costs": {"lower": 0, "upper": 9}}},
     "tables.visits.columns.costs: table visits has no column costs (the policy gives it bounds); did you mean cost?"),
    ({"columns": {"wards": {"keys": ["a"]}}},
     "table visits has no column wards (the policy gives it key domain); did you mean ward?"),
])
def test_a_policy_naming_missing_columns_is_refused_at_connect(table: dict, fragment: str) -> None:
    import dpsql

    pol = {"budget": {"epsilon": 1}, "tables": {"visits": table}}
    with pytest.raises(dpsql.PolicyError) as info:
        dpsql.connect(":memory:", pol, setup=_visits)
    assert fragment in str(info.value)


def test_a_table_created_later_is_checked_when_first_read() -> None:
    import duckdb

    import dpsql

    raw = duckdb.connect(":memory:")
    pol = {"budget": {"epsilon": 1}, "tables": {"visits": {"privacy_unit": "pid", "max_rows_per_unit": 2}}}
    con = dpsql.connect(raw, pol)  # no table yet: nothing to check
    with pytest.raises(dpsql.BindError, match="does not exist in the database"):
        con.sql("SELECT DP_COUNT(*) FROM visits WITH (epsilon = 1)")


def test_a_misspelt_privacy_unit_of_a_table_created_later_gets_the_nearest_column() -> None:
    import duckdb

    import dpsql

    raw = duckdb.connect(":memory:")
    pol = {"budget": {"epsilon": 1}, "tables": {"visits": {"privacy_unit": "patiend_id", "max_rows_per_unit": 2}}}
    con = dpsql.connect(raw, pol)
    raw.execute("CREATE TABLE visits (patient_id INTEGER, cost DOUBLE)")
    with pytest.raises(dpsql.PolicyError, match="has no column patiend_id; did you mean patient_id[?]$"):
        con.sql("SELECT DP_COUNT(*) FROM visits WITH (epsilon = 1)")
