"""Public key domains besides the policy's keys (dpsql._sql.keysource, dpsql._plan.keys): a public
table's column after a join, a date part of a bounded date column; and on Spark, planning opens no
DuckDB (the key parts are cast in Python or by Spark)."""

from __future__ import annotations

import typing as t

import duckdb
import pytest

import dpsql
from dpsql._plan import keys as key_domains
from dpsql._policy.policy import load_policy
from dpsql.errors import PolicyError


def _setup(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE TABLE nation AS SELECT range AS n_nationkey, 'N' || range AS n_name FROM range(5)")
    con.execute("CREATE TABLE li AS SELECT range % 50 AS cust, range % 4 AS nk, (range % 7)::DOUBLE AS qty, "
                "DATE '1992-01-01' + (range % 2500)::INTEGER AS ship FROM range(2000)")


def _policy() -> dict:
    return {"budget": {"epsilon": 1000}, "tables": {
        "nation": {"public": True},
        "li": {"privacy_unit": "cust", "max_rows_per_unit": 40, "columns": {
            "qty": {"lower": 0, "upper": 10}, "ship": {"bounds": ["1992-01-01", "1998-12-31"]}}}}}


@pytest.fixture(scope="module")
def con() -> t.Iterator[dpsql.Connection]:
    c = dpsql.connect(":memory:", _policy(), setup=_setup)
    yield c
    c.close()


JOINED = "SELECT n_name, DP_COUNT(*) FROM li JOIN nation ON nk = n_nationkey GROUP BY n_name WITH (epsilon = 1)"


def test_a_public_table_s_column_is_a_public_key_domain_with_delta_zero(con: dpsql.Connection) -> None:
    text = con.explain(JOINED)
    assert "group keys: public domain of 5 keys (the distinct values of public table nation.n_name)" in text
    rows = con.sql(JOINED).fetchall()
    assert [k for k, _ in rows] == ["N0", "N1", "N2", "N3", "N4"]  # N4 has no line item and still a row
    assert all(abs(n - 500) < 400 for k, n in rows if k != "N4")  # Δ = 40 rows per unit, ε = 1


def test_the_domain_is_read_from_the_public_table_alone(con: dpsql.Connection, monkeypatch) -> None:
    """The statement that reads the keys names the public table and no private one (the join's
    rows depend on private data; the table's distinct values do not)."""
    seen: list[str] = []
    engine = con.engine
    real = engine.public_rows
    monkeypatch.setattr(engine, "public_rows", lambda sql: seen.append(sql) or real(sql))
    con.explain(JOINED.replace("epsilon = 1", "epsilon = 1.5"))
    reads = [s for s in seen if "DISTINCT" in s]
    assert reads and all('"nation"' in s and '"li"' not in s for s in reads)


def test_a_private_table_s_column_is_not_a_key_domain(con: dpsql.Connection) -> None:
    with pytest.raises(dpsql.PrivacyError, match="needs public keys when delta = 0"):
        con.explain("SELECT nk, DP_COUNT(*) FROM li GROUP BY nk WITH (epsilon = 1)")


@pytest.mark.parametrize("group, keys", [
    ("extract(year FROM ship)", list(range(1992, 1999))),
    ("year(ship)", list(range(1992, 1999))),
    ("date_part('year', ship)", list(range(1992, 1999))),
    ("month(ship)", list(range(1, 13))),
    ("quarter(ship)", [1, 2, 3, 4]),
])
def test_a_date_part_of_a_bounded_date_column_has_its_values_as_keys(con: dpsql.Connection, group: str,
                                                                      keys: list[int]) -> None:
    sql = f"SELECT {group} AS k, DP_COUNT(*) FROM li GROUP BY k WITH (epsilon = 1)"
    assert f"public domain of {len(keys)} keys" in con.explain(sql)
    assert [k for k, _ in con.sql(sql).fetchall()] == keys


def test_a_date_part_and_a_public_column_make_a_product(con: dpsql.Connection) -> None:
    sql = ("SELECT year(ship) AS y, n_name, DP_SUM(qty) FROM li JOIN nation ON nk = n_nationkey "
           "GROUP BY y, n_name WITH (epsilon = 1)")
    assert len(con.sql(sql).fetchall()) == 7 * 5


def test_the_day_of_a_date_has_no_domain(con: dpsql.Connection) -> None:
    with pytest.raises(dpsql.PrivacyError, match="needs public keys"):
        con.explain("SELECT day(ship) AS k, DP_COUNT(*) FROM li GROUP BY k WITH (epsilon = 1)")


@pytest.mark.parametrize("bounds, message", [
    (["1998-12-31", "1992-01-01"], "must be before"),
    (["1992-01-01"], "must be two dates"),
    ("1992-01-01", "must be two dates"),
    ([1992, 1998], "must be two dates"),
])
def test_bad_date_bounds_are_refused_in_one_line(bounds: t.Any, message: str) -> None:
    with pytest.raises(PolicyError, match=f"tables.li.columns.ship.bounds.*{message}|{message}"):
        load_policy({"budget": {"epsilon": 1}, "tables": {"li": {"columns": {"ship": {"bounds": bounds}}}}})


def test_keys_that_cast_to_themselves_open_no_duckdb(monkeypatch) -> None:
    """Key parts a str to VARCHAR, an int to an integer type, a date to DATE are cast in Python."""
    monkeypatch.setattr(key_domains, "_cast_rows", lambda *a: pytest.fail("the DuckDB caster was used"))
    domain = key_domains.normalise([(1,), (2,), (2**40,)], ["BIGINT"], "keys", dpsql.OptionError)
    assert domain.texts == (("1", "2", str(2**40)),)
    key_domains.normalise([("a",), ("b",)], ["VARCHAR"], "keys", dpsql.OptionError)


# -- Spark: planning opens no DuckDB -------------------------------------------------------------


def _spark_views(spark: t.Any) -> None:
    spark.sql("CREATE OR REPLACE TEMPORARY VIEW nation AS SELECT id AS n_nationkey, concat('N', id) AS n_name "
              "FROM range(5)")
    spark.sql("CREATE OR REPLACE TEMPORARY VIEW li AS SELECT id % 50 AS cust, id % 4 AS nk, "
              "CAST(id % 7 AS DOUBLE) AS qty, date_add(DATE '1992-01-01', CAST(id % 2500 AS INT)) AS ship "
              "FROM range(2000)")


@pytest.mark.spark
@pytest.mark.parametrize("sql", [
    JOINED,
    "SELECT year(ship) AS y, DP_SUM(qty * 2 - 1) FROM li GROUP BY y WITH (epsilon = 1)",
    "SELECT quarter(ship) AS q, n_name, DP_MEAN(CASE WHEN nk > 1 THEN qty ELSE -qty END) FROM li "
    "JOIN nation ON nk = n_nationkey GROUP BY q, n_name WITH (epsilon = 1)",
])
def test_spark_gives_the_same_statistics(spark, con: dpsql.Connection, sql: str) -> None:  # type: ignore[no-untyped-def]
    from tests.test_spark import check_same_statistics

    _spark_views(spark)
    on_spark = dpsql.connect(spark, _policy())
    check_same_statistics((con, on_spark), sql)


@pytest.mark.spark
def test_planning_on_spark_opens_no_duckdb(spark, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _spark_views(spark)
    con = dpsql.connect(spark, _policy())

    def refuse(*args: t.Any, **kwargs: t.Any) -> t.NoReturn:
        raise AssertionError("duckdb.connect was called while planning on Spark")

    monkeypatch.setattr(duckdb, "connect", refuse)
    monkeypatch.setattr(key_domains, "_CASTER", None)
    for sql in [JOINED,
                "SELECT year(ship) AS y, DP_SUM(qty) FROM li GROUP BY y WITH (epsilon = 1)",
                "SELECT nk, DP_COUNT(*) FROM li GROUP BY nk WITH (epsilon = 1, keys = ['1', 2, 3.0])",
                "SELECT ship, DP_COUNT(*) FROM li GROUP BY ship WITH (epsilon = 1, keys = ['1992-01-02'])"]:
        prepared = con.prepare(sql)
        assert prepared.plan is not None and prepared.plan.public_keys is not None, sql
    assert key_domains._CASTER is None
    nk = con.prepare("SELECT nk, DP_COUNT(*) FROM li GROUP BY nk WITH (epsilon = 1, keys = ['1', 2, 3.0])")
    assert nk.plan is not None and nk.plan.public_keys is not None
    assert nk.plan.public_keys.texts == (("1", "2", "3"),)
    monkeypatch.undo()
    assert [k for k, _ in con.sql(JOINED).fetchall()] == ["N0", "N1", "N2", "N3", "N4"]
    con.close()


def test_a_query_over_public_tables_only_is_answered_exactly(con: dpsql.Connection) -> None:
    """TPC-H Q2, Q11 and Q16 read only part, partsupp, supplier, nation and region: public under
    customer-level privacy, so they run as plain SQL, exactly, and spend nothing (this shape:
    a subquery, HAVING over an aggregate of a subquery, ORDER BY)."""
    before = con.budget.spent.epsilon
    sql = ("SELECT n_name, sum(n_nationkey) AS v FROM nation WHERE n_nationkey IN (SELECT n_nationkey FROM nation "
           "WHERE n_name <> 'N0') GROUP BY n_name HAVING sum(n_nationkey) > (SELECT min(n_nationkey) FROM nation) "
           "ORDER BY v DESC")
    assert con.sql(sql).fetchall() == [("N4", 4), ("N3", 3), ("N2", 2), ("N1", 1)]
    assert con.budget.spent.epsilon == before
    with pytest.raises(dpsql.PrivacyError):
        con.sql("SELECT n_name FROM nation WHERE n_nationkey IN (SELECT nk FROM li)")
