"""Every way to open dpsql takes every form of policy, over every kind of source.

Entry points: ``dpsql.connect``, ``dpsql.dbapi.connect`` and the SQLAlchemy dialect (the policy
in the URL's query as a file, or in ``connect_args`` as any form), and a Spark session. Policy
forms: a :class:`Policy`, a TOML path, a YAML path, a dict. Sources: a Parquet file, a CSV file,
a glob and a list of files (each the policy's table ``visits``, as on the command line), a
DuckDB database file, and an open DuckDB connection. Each must give the exact count the
truncated visits have.
"""

from __future__ import annotations

import typing as t
from pathlib import Path

import duckdb
import pytest
import sqlalchemy as sa
import yaml
from sqlalchemy.dialects import registry

import dpsql
import dpsql.dbapi
from dpsql._policy.policy import load_policy
from dpsql._privacy.noise import SeededNoise
from dpsql.errors import Error

registry.register("dpsql", "dpsql.interfaces.sqla", "DpsqlDialect")

VISITS = Path(__file__).resolve().parent.parent / "fixtures" / "visits" / "visits.parquet"
POLICY = {"budget": {"epsilon": 1e6}, "tables": {"visits": {"privacy_unit": "patient_id", "max_rows_per_unit": 5}}}
COUNT = "SELECT DP_COUNT(*) FROM visits WITH (epsilon = 1)"
FORMS = ["Policy", "toml", "yaml", "dict", "text"]
SOURCES = ["parquet", "csv", "glob", "list", "database", "connection"]


@pytest.fixture(scope="module")
def place(tmp_path_factory) -> Path:
    """The visits as Parquet, CSV, two Parquet files in a folder, and a DuckDB database; the policy
    as TOML and as YAML."""
    root = tmp_path_factory.mktemp("sources")
    con = duckdb.connect(str(root / "people.duckdb"))
    con.execute(f"CREATE TABLE visits AS SELECT * FROM '{VISITS}'")
    con.execute(f"COPY visits TO '{root / 'visits.csv'}' (HEADER)")
    (root / "visits").mkdir()
    for part, parity in (("a", 0), ("b", 1)):
        con.execute(f"COPY (SELECT * FROM visits WHERE patient_id % 2 = {parity}) TO '{root / 'visits' / part}.parquet'")
    con.close()
    (root / "policy.toml").write_text('[budget]\nepsilon = 1e6\n[tables.visits]\nprivacy_unit = "patient_id"\n'
                                      "max_rows_per_unit = 5\n", encoding="utf-8")
    (root / "policy.yaml").write_text(yaml.safe_dump(POLICY), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def truth() -> int:
    return duckdb.connect().execute(
        f"SELECT SUM(LEAST(n, 5)) FROM (SELECT COUNT(*) AS n FROM '{VISITS}' GROUP BY patient_id)").fetchone()[0]


def policy_in(form: str, place: Path) -> t.Any:
    return {"Policy": load_policy(POLICY), "toml": str(place / "policy.toml"), "yaml": place / "policy.yaml",
            "dict": dict(POLICY), "text": (place / "policy.toml").read_text(encoding="utf-8")}[form]


def source_in(kind: str, place: Path) -> t.Any:
    if kind == "connection":
        con = duckdb.connect()
        con.execute(f"CREATE TABLE visits AS SELECT * FROM '{VISITS}'")
        return con
    return {"parquet": str(VISITS), "csv": place / "visits.csv", "glob": str(place / "visits" / "*.parquet"),
            "list": [str(place / "visits" / "a.parquet"), place / "visits" / "b.parquet"],
            "database": str(place / "people.duckdb")}[kind]


def exact_count(con: dpsql.Connection) -> int:
    names, rows = con.engine.statistics(con.prepare(COUNT).sql)
    return rows[0][0]


@pytest.mark.parametrize("kind", SOURCES)
@pytest.mark.parametrize("form", FORMS)
def test_connect_takes_every_policy_form_over_every_source(place: Path, truth: int, form: str, kind: str) -> None:
    con = dpsql.connect(source_in(kind, place), policy_in(form, place), noise=SeededNoise(0))
    try:
        assert exact_count(con) == truth
        assert abs(con.sql(COUNT).fetchall()[0][0] - truth) < 200
    finally:
        con.close()


@pytest.mark.parametrize("kind", SOURCES)
@pytest.mark.parametrize("form", FORMS)
def test_dbapi_connect_takes_every_policy_form_over_every_source(place: Path, truth: int, form: str, kind: str) -> None:
    con = dpsql.dbapi.connect(source_in(kind, place), policy_in(form, place), noise=SeededNoise(0))
    try:
        assert exact_count(con.dpsql) == truth
        cur = con.cursor()
        cur.execute(COUNT)
        assert abs(cur.fetchone()[0] - truth) < 200
    finally:
        con.close()


@pytest.mark.parametrize("kind", ["parquet", "csv", "glob", "database"])
@pytest.mark.parametrize("form", FORMS)
def test_sqlalchemy_takes_a_policy_file_in_the_url_and_any_form_in_connect_args(
        place: Path, truth: int, form: str, kind: str) -> None:
    policy = policy_in(form, place)
    if form in ("toml", "yaml"):  # a file goes in the URL's query
        url = sa.engine.URL.create("dpsql", database=str(source_in(kind, place)), query={"policy": str(policy)})
        engine = sa.create_engine(url, connect_args={"noise": SeededNoise(0)})
    else:  # a Policy, a dict or the policy's text cannot be written in a URL
        url = sa.engine.URL.create("dpsql", database=str(source_in(kind, place)))
        engine = sa.create_engine(url, connect_args={"policy": policy, "noise": SeededNoise(0)})
    try:
        with engine.connect() as conn:
            assert abs(conn.execute(sa.text(COUNT)).scalar_one() - truth) < 200
            assert exact_count(conn.connection.dbapi_connection.dpsql) == truth
    finally:
        engine.dispose()


def test_data_files_are_checked_before_anything_opens(place: Path) -> None:
    with pytest.raises(Error, match="does not exist"):
        dpsql.connect(str(place / "nosuch.parquet"), dict(POLICY))
    two = {"budget": {"epsilon": 1}, "tables": {"visits": {}, "people": {}}}
    with pytest.raises(Error, match=r"declares 2 tables \(people, visits\)"):
        dpsql.connect(str(place / "visits" / "a.parquet"), two)
    with pytest.raises(Error, match="already has its files in the policy"):
        sourced = {"budget": {"epsilon": 1}, "tables": {"visits": {"source": str(VISITS)}}}
        dpsql.connect(str(place / "visits.csv"), sourced)


@pytest.mark.spark
def test_a_spark_session_takes_every_policy_form(spark, place: Path, truth: int) -> None:
    for form in FORMS:
        con = dpsql.connect(spark, policy_in(form, place))
        assert exact_count(con) == truth, form


def test_a_policy_string_is_a_path_or_toml_text_and_a_bad_one_is_one_line(place: Path) -> None:
    """A string of several lines is the policy's TOML text; one line is a path. Either way a bad
    one is a one-line PolicyError, not an OSError from a name the file system refuses."""
    for policy, match in (("[tables.visits\nprivacy_unit = 1", "policy text is not valid TOML"),
                          ("x" * 300 + ".toml", "does not exist"), ("x" * 5000, "does not exist"),
                          (str(place), "does not exist")):
        with pytest.raises(dpsql.PolicyError, match=match) as err:
            dpsql.connect(str(VISITS), policy)
        assert "\n" not in str(err.value)
