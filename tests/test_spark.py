"""dpsql on Apache Spark: the same queries on DuckDB and on a local Spark session.

For every query of the corpus (the rewrite fixtures, the spine tests' data queries, every DP
aggregate and mechanism, GROUP BY with public keys and with key selection, WHERE, CTEs,
per-unit subqueries, privacy-unit truncation) the exact statistics before noise must be equal
on both engines, floats up to summation order; refusals must be the same error with the same
message. Where the statistics depend on a hash (the rows truncation keeps, the chunks of
sample-and-aggregate), the engines' hashes differ by design, so the test checks what does not
depend on the hash. pyspark is imported by the session fixture: without it every test here
fails (none is skipped), and the default run, which deselects the spark marker, does not need
it. One Spark session (local[2], the ``spark`` fixture of conftest.py) serves the whole run;
joins and flat maps are in tests/test_spark_joins.py.
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import duckdb
import pytest

import dpsql
from dpsql._privacy.noise import SeededNoise
from dpsql.backends.spark import SparkEngine
from tests.conftest import demo_policy

#: The Spark suite runs with ``pytest -m spark`` (CI runs it after the default suite).
pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parent.parent
ADULT = ROOT / "dpsql" / "data" / "adult.parquet"
VISITS = ROOT / "fixtures" / "visits" / "visits.parquet"
VISITS_POLICY = ROOT / "fixtures" / "visits" / "visits.toml"


def fixture_queries() -> list[str]:
    lines = (ROOT / "fixtures" / "rewrite" / "queries.txt").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


#: Queries over the Adult table whose statistics do not depend on a hash.
ADULT_QUERIES = [
    *fixture_queries(),
    "SELECT DP_COUNT(*) FROM adult WHERE age > 50 WITH (epsilon = 1)",
    "SELECT race, DP_COUNT(*) AS n FROM adult WHERE age > 200 GROUP BY race WITH (epsilon = 1)",
    "SELECT occupation, DP_COUNT(*) FROM adult GROUP BY occupation WITH (epsilon = 1, keys = ['Sales', 'Nowhere'])",
    "SELECT native_country, DP_COUNT(*) FROM adult GROUP BY native_country WITH (epsilon = 1, delta = 1e-6)",
    "SELECT sex, DP_COUNT(*) AS n, DP_SUM(age) / DP_COUNT(*) AS ratio FROM adult GROUP BY sex "
    "HAVING DP_COUNT(*) > 100 ORDER BY n DESC LIMIT 1 WITH (epsilon = 1)",
    "SELECT sex, DP_MEAN(age) FROM adult WHERE workclass = 'Private' GROUP BY sex WITH (epsilon = 1)",
    "SELECT DP_MEDIAN(age) FROM adult WITH (epsilon = 1)",
    "SELECT sex, DP_QUANTILE(age, 0.9) FROM adult GROUP BY sex WITH (epsilon = 1)",
    "SELECT DP_MIN(hours_per_week), DP_MAX(hours_per_week) FROM adult WITH (epsilon = 1)",
    # many distinct values per bucket of DuckDB's histogram: Spark's one-bucket-per-value form
    "SELECT DP_MEDIAN(fnlwgt, 0, 1e6), DP_QUANTILE(fnlwgt, 0.01, 0, 1e6) FROM adult WITH (epsilon = 1)",
    "SELECT sex, DP_QUANTILE(fnlwgt, 0.75, 0, 1e6) FROM adult GROUP BY sex "
    "WITH (mechanism = 'ptr', bound = 1000, epsilon = 1, delta = 1e-6)",
    "SELECT DP_MEDIAN(age) FROM adult WITH (mechanism = 'ptr', bound = 5, epsilon = 1, delta = 1e-6)",
    "SELECT sex, DP_MEAN(age) FROM adult GROUP BY sex WITH (mechanism = 'ptr', bound = 1, epsilon = 1, delta = 1e-6)",
    "SELECT DP_MEDIAN(age) FROM adult WITH (mechanism = 'smooth', epsilon = 1, delta = 1e-6)",
    "SELECT income, DP_QUANTILE(hours_per_week, 0.25) FROM adult GROUP BY income "
    "WITH (mechanism = 'smooth', epsilon = 1, delta = 1e-6)",
    "SELECT DP_MEAN(fnlwgt, 0, 1e6) FROM adult WITH (mechanism = 'smooth', epsilon = 1, delta = 1e-6)",
    "SELECT DP_VAR(age), DP_STDDEV(hours_per_week) FROM adult WITH (mechanism = 'gaussian', epsilon = 1, delta = 1e-6)",
    "SELECT DP_COUNT(DISTINCT workclass) FROM adult WITH (epsilon = 1)",
    "SELECT DP_SUM(CAST(workclass AS INT), 0, 10) FROM adult WITH (epsilon = 1)",
    "SELECT DP_SUM(fnlwgt * fnlwgt * fnlwgt * fnlwgt, 0, 1e9) FROM adult WITH (epsilon = 1)",
    "SELECT education_num % 3 AS m, DP_COUNT(*) FROM adult GROUP BY education_num % 3 WITH (epsilon = 1, keys = [0, 1, 2])",
    "SELECT DP_COUNT(*) FROM adult WHERE lower(workclass) LIKE '%gov%' AND age BETWEEN 20 AND 40 WITH (epsilon = 1)",
    "SELECT DP_MEAN(CASE WHEN sex = 'Male' THEN age ELSE NULL END, 0, 100) FROM adult WITH (epsilon = 1)",
    "WITH g AS (SELECT age, sex FROM adult WHERE hours_per_week > 40) SELECT sex, DP_MEDIAN(age) FROM g "
    "GROUP BY sex WITH (epsilon = 1)",
]

#: Sample and aggregate: the chunks follow the engine's hash (checked by invariants).
SAA_QUERIES = [
    ("SELECT DP_MEAN(age) FROM adult WITH (mechanism = 'saa', epsilon = 1)", 0, 100),
    ("SELECT sex, DP_MEDIAN(age) FROM adult GROUP BY sex WITH (mechanism = 'saa', epsilon = 1, chunks = 20)", 0, 100),
    ("SELECT DP_QUANTILE(age, 0.75) FROM adult WITH (mechanism = 'saa', epsilon = 1)", 0, 100),
    ("SELECT DP_AGG(stddev(age), 0, 50) FROM adult WITH (epsilon = 1)", 0, 50),
]

#: Queries over the visits table (an id privacy unit), run under bounds no patient reaches, so
#: that truncation keeps every row whichever hash orders them.
VISITS_QUERIES = [
    "SELECT DP_COUNT(*) FROM visits WITH (epsilon = 1)",
    "SELECT DP_SUM(cost) FROM visits WITH (epsilon = 1)",
    "SELECT ward, DP_COUNT(*), DP_MEAN(stay) FROM visits GROUP BY ward WITH (epsilon = 1)",
    # a sum and a mean of one column: one value column, its partials re-weighted per unit
    "SELECT ward, DP_SUM(cost), DP_MEAN(cost) FROM visits GROUP BY ward WITH (epsilon = 1)",
    "SELECT ward, DP_COUNT(*) FROM visits GROUP BY ward WITH (epsilon = 1, delta = 1e-6)",
    "SELECT DP_COUNT(DISTINCT patient_id), DP_COUNT(DISTINCT ward) FROM visits WITH (epsilon = 1)",
    "WITH per AS (SELECT patient_id, count(*) AS n, sum(cost) AS spend FROM visits GROUP BY patient_id) "
    "SELECT DP_COUNT(*), DP_SUM(n, 0, 30) FROM per WITH (epsilon = 1)",
    "WITH r AS (SELECT patient_id AS pid, stay FROM visits WHERE ward <> 'emergency'), "
    "per AS (SELECT pid, max(stay) AS longest FROM r GROUP BY pid) SELECT DP_MEDIAN(longest, 0, 30) FROM per "
    "WITH (epsilon = 1)",
    "SELECT DP_MEDIAN(cost) FROM visits WITH (epsilon = 1)",
    "SELECT ward, DP_QUANTILE(stay, 0.5) FROM visits WHERE day > DATE '2024-03-01' GROUP BY ward WITH (epsilon = 1)",
]

#: Refused queries: the same error class and message on both engines.
REFUSED = [
    "SELECT age, DP_COUNT(*) FROM adult WITH (epsilon = 1)",
    "SELECT DP_COUNT(*) FROM adult WHERE age IN (SELECT age FROM adult) WITH (epsilon = 1)",
    "SELECT DP_COUNT(*) FROM (SELECT * FROM adult LIMIT 5) WITH (epsilon = 1)",
    "SELECT DP_COUNT(*) FROM adult a JOIN adult b ON a.age = b.age WITH (epsilon = 1)",
    "SELECT DP_COUNT(*) FROM (SELECT sex, count(*) FROM adult GROUP BY sex) WITH (epsilon = 1)",
    "SELECT DP_COUNT(*) FROM adult WITH (epsilon = -1)",
    "SELECT DP_COUNT(*) FROM adult WITH (epsilon = 1, foo = 2)",
    "SELECT DP_COUNT(*) FROM adult",
    "SELECT DP_COUNT(*) FROM nowhere WITH (epsilon = 1)",
    "SELECT DP_SUM(nope) FROM adult WITH (epsilon = 1)",
    "SELECT DP_SUM(age, 10, 5) FROM adult WITH (epsilon = 1)",
    "SELECT DP_SUM(sqrt(age)) FROM adult WITH (epsilon = 1)",
    "SELECT DP_COUNT(*) FROM adult WITH (mechanism = 'gaussian', epsilon = 1)",
    "SELECT DP_COUNT(*) FROM adult WHERE random() < 0.5 WITH (epsilon = 1)",
    "SELECT DP_MEDIAN(age) FROM adult WITH (mechanism = 'ptr', epsilon = 1, delta = 1e-6)",
    "SELECT occupation, DP_COUNT(*) FROM adult GROUP BY occupation WITH (epsilon = 1)",
    "SELECT DP_SUM(age) FROM adult WHERE read_csv('x') IS NULL WITH (epsilon = 1)",
]


# -- fixtures -----------------------------------------------------------------------------------


def loose_visits_policy() -> dict:
    policy = tomllib.loads(VISITS_POLICY.read_text(encoding="utf-8"))
    table = policy["tables"]["visits"]
    table["max_rows_per_unit"] = 1000
    table.pop("max_groups_per_unit")
    table.pop("max_rows_per_group_per_unit")
    return policy


@pytest.fixture(scope="module")
def pairs(spark):
    """(DuckDB connection, Spark connection) for the Adult policy, the strict and the loose visits policies."""
    adult = demo_policy(epsilon=1e9, delta=0.5)
    duck_adult = dpsql.connect(":memory:", adult, setup=lambda c: c.execute(
        f"CREATE TABLE adult AS SELECT * FROM '{ADULT}'"), noise=SeededNoise(1))
    out = {"adult": (duck_adult, dpsql.connect(spark, adult, noise=SeededNoise(1)))}
    for name, policy in (("visits", str(VISITS_POLICY)), ("loose", loose_visits_policy())):
        raw = duckdb.connect()
        raw.execute(f"CREATE TABLE visits AS SELECT * FROM '{VISITS}'")
        out[name] = (dpsql.connect(raw, policy), dpsql.connect(spark, policy))
    yield out
    for a, _ in out.values():
        a.close()


def exact(con: dpsql.Connection, query: str) -> tuple[list[str], list[tuple]]:
    prepared = con.prepare(query)
    return con.engine.statistics(prepared.sql)


def same(a, b) -> bool:
    """Equal values, floats up to summation order."""
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9) or (math.isnan(a) and math.isnan(b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


def check_same_statistics(pair, query: str) -> None:
    duck, spark = pair
    names_d, rows_d = exact(duck, query)
    names_s, rows_s = exact(spark, query)
    assert names_d == names_s
    order = lambda rows: sorted(rows, key=repr)  # noqa: E731  (group order is not part of the result)
    assert same(order(rows_d), order(rows_s)), f"{query}\nDuckDB {order(rows_d)[:3]}\nSpark  {order(rows_s)[:3]}"


# -- the corpus ---------------------------------------------------------------------------------


@pytest.mark.parametrize("query", ADULT_QUERIES)
def test_adult_statistics_are_the_same(pairs, query: str) -> None:
    check_same_statistics(pairs["adult"], query)


@pytest.mark.parametrize("query", [
    "SELECT DP_COUNT(*), DP_SUM(cost), DP_MEAN(stay), DP_VAR(cost) FROM visits WITH (epsilon = 1, contribution = 'clip')",
    "SELECT DP_COUNT(stay), DP_SUM(cost) FROM visits WHERE ward <> 'emergency' "
    "WITH (epsilon = 1, contribution = 'clip', report_dropped = true)",
    "SELECT ward, DP_COUNT(*) FROM visits GROUP BY ward WITH (epsilon = 1, delta = 1e-6, report_dropped = true)",
])
def test_pre_aggregation_is_the_same_on_spark(pairs, query: str) -> None:
    """Pre-aggregation (dpsql._compile.perunit) under the real bounds: without GROUP BY nothing depends
    on a hash, so the clipped and re-weighted statistics are the same; so are the counts of
    units over the bound."""
    duck, spark = pairs["visits"]
    (_, a), (_, b) = exact(duck, query), exact(spark, query)
    if "GROUP BY" in query:
        assert {r[-2:] for r in a} == {r[-2:] for r in b}  # the one row of unit counts, on every group
        return
    # A re-weighted partial is round(Σ·c/n) of a DOUBLE: each engine's conversion of a large
    # integer sum to DOUBLE may differ in its last bit, so those sums agree to 1e-15.
    assert len(a) == len(b) == 1
    assert all(x == y or math.isclose(x, y, rel_tol=1e-15) for x, y in zip(a[0], b[0])), (a, b)


@pytest.mark.parametrize("query", VISITS_QUERIES)
def test_unit_statistics_are_the_same(pairs, query: str) -> None:
    check_same_statistics(pairs["loose"], query)


def test_truncation_binds_on_spark(pairs) -> None:
    """Under the real bounds the rows kept follow each engine's hash; what does not depend on
    the hash is the same: Σ min(rows of a patient, k) rows, and with g = r = 1 one row per patient."""
    duck, spark = pairs["visits"]
    raw = duck.engine.connection
    k = 5
    expected = raw.execute(f"SELECT SUM(LEAST(n, {k})) FROM (SELECT COUNT(*) AS n FROM visits GROUP BY patient_id)").fetchone()[0]
    patients = raw.execute("SELECT COUNT(DISTINCT patient_id) FROM visits").fetchone()[0]
    for con in (duck, spark):
        assert exact(con, "SELECT DP_COUNT(*) FROM visits WITH (epsilon = 1)")[1] == [(expected,)]
        for mode in ("truncate", "clip"):
            _, rows = exact(con, "SELECT ward, DP_COUNT(*) FROM visits GROUP BY ward WITH (epsilon = 1, "
                                 f"max_groups_per_unit = 1, max_rows_per_group_per_unit = 1, contribution = '{mode}')")
            assert sum(r[1] or 0 for r in rows) == patients
    check_same_statistics(pairs["visits"], "SELECT DP_COUNT(DISTINCT patient_id) FROM visits WITH (epsilon = 1)")


@pytest.mark.parametrize("query,lower,upper", SAA_QUERIES)
def test_sample_and_aggregate_on_spark(pairs, query: str, lower: float, upper: float) -> None:
    """Spark's chunks are PMOD(XXHASH64(unit), k): k answers per group, none lost to a negative
    remainder, each clipped to the bounds, and the chunks' rows add up to the group."""
    duck, spark = pairs["adult"]
    names_d, rows_d = exact(duck, query)
    names_s, rows_s = exact(spark, query)
    assert names_d == names_s
    assert len(rows_d) == len(rows_s)
    column = next(i for i, n in enumerate(names_s) if n.endswith("_chunks"))
    for d, s in zip(sorted(rows_d, key=repr), sorted(rows_s, key=repr)):
        assert len(s[column]) == len(d[column])
        assert all(lower <= x <= upper for x in s[column])
    prepared = spark.prepare(query)
    k = len(rows_s[0][column])
    assert f"PMOD(XXHASH64(__u), {k})" in prepared.sql


def test_refusals_are_the_same(pairs) -> None:
    duck, spark = pairs["adult"]
    for query in REFUSED:
        with pytest.raises(dpsql.Error) as on_duck:
            duck.prepare(query)
        with pytest.raises(dpsql.Error) as on_spark:
            spark.prepare(query)
        assert type(on_duck.value) is type(on_spark.value), query
        assert str(on_duck.value) == str(on_spark.value), query


# -- the error channel --------------------------------------------------------------------------


def test_regex_error_channel_is_closed(spark, pairs) -> None:
    """Java compiles a regular expression computed from a row when a row reaches it: the raw
    statement fails iff someone is 90, which would answer "is anyone 90?" for free. dpsql
    refuses the query before reading anything, on both engines (on DuckDB, RE2 compiles such a
    pattern for every row, and that time would say the same: dpsql._sql.size)."""
    spark.conf.set("spark.sql.ansi.enabled", "false")
    # concat with a column: Spark's optimizer cannot fold the pattern into the branches
    probe = "SELECT COUNT(*) FROM adult WHERE 'x' RLIKE CASE WHEN age = {} THEN concat('(', sex) ELSE 'x' END"
    with pytest.raises(Exception, match="(?i)regex|pattern|unclosed group"):  # noqa: B017 - Java's error
        spark.sql(probe.format(90)).collect()
    assert spark.sql(probe.format(200)).collect()[0][0] == 32561  # no one is 200: no error
    query = ("SELECT DP_COUNT(*) FROM adult WHERE regexp_matches('x', CASE WHEN age = 90 "
             "THEN concat('(', sex) ELSE 'x' END) WITH (epsilon = 1)")
    duck, con = pairs["adult"]
    for c in (duck, con):
        before = c.budget.spent
        with pytest.raises(dpsql.PrivacyError, match="regexp_matches.*its pattern must be a literal"):
            c.sql(query)
        assert c.budget.spent == before


def _refused_on_spark_only(pairs, query: str, match: str) -> None:
    """``query`` plans on DuckDB; on Spark it is refused before any row is read, charging nothing."""
    duck, con = pairs["adult"]
    duck.prepare(query)
    before = con.budget.spent
    with pytest.raises(dpsql.BindError, match=match):
        con.sql(query)
    assert con.budget.spent == before


def test_interval_error_channel_is_closed(spark, pairs) -> None:
    """Spark's date arithmetic with an INTERVAL overflows with an error even with ANSI off: the
    raw statement fails iff someone is 90. dpsql refuses INTERVAL on Spark; DuckDB runs it in TRY."""
    spark.conf.set("spark.sql.ansi.enabled", "false")
    probe = ("SELECT COUNT(*) FROM adult WHERE CASE WHEN age = {} THEN DATE'2020-01-01' + INTERVAL 100000000 YEAR "
             "ELSE DATE'2020-01-01' END > DATE'2000-01-01'")
    with pytest.raises(Exception, match="(?i)overflow"):  # noqa: B017 - Spark's error
        spark.sql(probe.format(90)).collect()
    assert spark.sql(probe.format(200)).collect()[0][0] == 32561  # no one is 200: no error
    _refused_on_spark_only(pairs, "SELECT DP_COUNT(*) FROM adult WHERE CASE WHEN age = 90 THEN DATE '2020-01-01' "
                           "+ INTERVAL 100000000 YEAR ELSE DATE '2020-01-01' END > DATE '2000-01-01' WITH (epsilon = 1)",
                           "INTERVAL.*Spark")


def test_error_channel_is_closed_under_ansi(spark, pairs) -> None:
    """Under ANSI mode, WHERE 100/(age-39) > 1 raises DIVIDE_BY_ZERO on Spark iff some age is 39.
    dpsql's statement answers it without error: the rows of age 39 are dropped (NULL)."""
    from pyspark.errors import PySparkException

    spark.conf.set("spark.sql.ansi.enabled", "true")
    with pytest.raises(PySparkException, match="DIVIDE_BY_ZERO"):
        spark.sql("SELECT COUNT(*) FROM adult WHERE 100 / (age - 39) > 1").collect()
    spark.conf.set("spark.sql.ansi.enabled", "true")
    _, con = pairs["adult"]
    query = "SELECT DP_COUNT(*) FROM adult WHERE 100 / (age - 39) > 1 WITH (epsilon = 1)"
    assert "TRY_DIVIDE" in con.prepare(query).sql
    expected = spark.sql("SELECT COUNT(*) FROM adult WHERE age >= 40").collect()[0][0]
    assert exact(con, query)[1] == [(expected,)]
    result = con.sql(query)
    assert result.table.num_rows == 1
    for query in ("SELECT DP_SUM(CAST(workclass AS INT), 0, 10) FROM adult WITH (epsilon = 1)",
                  "SELECT DP_SUM(fnlwgt * fnlwgt * fnlwgt * fnlwgt, 0, 1e9) FROM adult WITH (epsilon = 1)"):
        spark.conf.set("spark.sql.ansi.enabled", "true")
        con.sql(query)  # no error


def test_errors_while_reading_are_withheld_and_charge_nothing(spark) -> None:
    """A view that fails on some rows: the generic message, and nothing charged."""
    spark.sql("CREATE OR REPLACE TEMP VIEW fragile AS "
              "SELECT age, CASE WHEN age > 80 THEN raise_error('age 90 of Alice') ELSE age END AS x FROM adult")
    policy = {"budget": {"epsilon": 10.0}, "tables": {"fragile": {"privacy_unit": "row", "max_rows_per_unit": 1,
                                                                  "columns": {"x": {"lower": 0, "upper": 100}}}}}
    con = dpsql.connect(spark, policy)
    before = con.budget.spent
    with pytest.raises(dpsql.ExecutionError) as err:
        con.sql("SELECT DP_SUM(x) FROM fragile WITH (epsilon = 1)")
    assert "Alice" not in str(err.value) and "withheld" in str(err.value)
    assert con.budget.spent == before


def test_ctrl_c_cancels_the_spark_job_and_charges_nothing(spark) -> None:
    """Ctrl-C while Spark runs the statistics: its jobs are cancelled (again until the statement
    stops: the job may not be submitted yet), QueryCancelled, nothing charged, and PySpark's own
    SIGINT handler is back afterwards."""
    import os
    import signal
    import threading
    import time

    spark.range(200000).crossJoin(spark.range(200000).withColumnRenamed("id", "j")) \
        .selectExpr("(id * 7 + j) % 100 AS x").createOrReplaceTempView("endless")
    policy = {"budget": {"epsilon": 10.0}, "tables": {"endless": {"privacy_unit": "row", "max_rows_per_unit": 1,
                                                                  "columns": {"x": {"lower": 0, "upper": 100}}}}}
    con = dpsql.connect(spark, policy)
    handler = signal.getsignal(signal.SIGINT)
    sent: list[float] = []
    over = threading.Event()

    def fire() -> None:
        time.sleep(2)
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)
        if not over.wait(60):  # not cancelled: fail instead of hanging (and never later, when
            spark.sparkContext.cancelAllJobs()  # another test's job would be the one cancelled)

    firing = threading.Thread(target=fire, daemon=True)
    firing.start()
    try:
        with pytest.raises(dpsql.QueryCancelled, match="nothing was charged"):
            con.sql("SELECT DP_SUM(x) FROM endless WITH (epsilon = 1)")
    finally:
        over.set()
        firing.join()
    assert time.monotonic() - sent[0] < 15
    assert con.budget.spent.epsilon == 0
    assert signal.getsignal(signal.SIGINT) is handler


def test_release_on_spark_charges_and_answers(spark) -> None:
    policy = demo_policy(epsilon=3.0, delta=1e-5)
    con = dpsql.connect(spark, policy, noise=SeededNoise(3))
    res = con.sql("SELECT sex, DP_COUNT(*) AS n, DP_MEAN(age) AS a FROM adult GROUP BY sex ORDER BY sex WITH (epsilon = 1)")
    assert res.table.column("sex").to_pylist() == ["Female", "Male"]
    assert abs(res.table.column("n").to_pylist()[1] - 21790) < 200
    assert con.budget.spent.epsilon == pytest.approx(1.0)
    assert "Spark session" in repr(con)
    assert "XXHASH64" not in con.explain("SELECT DP_MEDIAN(age) FROM adult WITH (epsilon = 1)")
    assert "ARRAY_SORT(COLLECT_LIST(" in con.explain("SELECT DP_MEDIAN(age) FROM adult WITH (epsilon = 1)")
    table = con.sql("SELECT * FROM education_levels").table if con.tables().count("education_levels") else None
    assert table is None  # a public table the Spark catalog lacks is not listed


def test_foreign_engine_release_hook(spark, seeded_demo) -> None:
    """Connection.release(prepared, names, rows) is the hook for statistics any engine computed:
    here a DuckDB connection's query, run by hand on Spark, released through the same checks,
    noise and charge."""
    con = seeded_demo(7, epsilon=1.5, delta=1e-5)
    query = "SELECT sex, DP_MEDIAN(age) FROM adult GROUP BY sex WITH (epsilon = 1)"
    prepared = con.prepare(query)
    frame = spark.sql(con.rewritten_sql(query, dialect="spark"))
    engine = SparkEngine(spark)
    names, rows = engine.statistics(con.rewritten_sql(query, dialect="spark"))
    assert names == list(frame.columns)
    before = con.budget.spent.epsilon
    res = con.release(prepared, names, rows)
    assert con.budget.spent.epsilon == pytest.approx(before + 1.0)
    medians = dict(zip(res.table.column("sex").to_pylist(), res.table.column(1).to_pylist()))
    assert 30 <= medians["Female"] <= 40 and 33 <= medians["Male"] <= 43
    with pytest.raises(dpsql.BudgetError):
        con.release(prepared, names, rows)  # 0.5 left: refused, releases nothing


def test_policy_sources_become_temporary_views(spark, tmp_path) -> None:
    """``source = ...`` on Spark: a temporary view over the files (JSON lines here), with the
    exact statistics DuckDB computes over the same files; a name the session uses is refused."""
    data = tmp_path / "ages.json"
    duckdb.execute(f"COPY (SELECT age, sex FROM '{ADULT}') TO '{data}' (FORMAT json)")
    tables = {"ages": {"privacy_unit": "row", "max_rows_per_unit": 1, "source": str(data),
                       "columns": {"age": {"lower": 0, "upper": 100}}}}
    policy = {"budget": {"epsilon": 1e9}, "tables": tables}
    query = "SELECT DP_SUM(age), DP_COUNT(*) FROM ages WITH (epsilon = 1)"
    on_spark = exact(dpsql.connect(spark, policy), query)
    assert on_spark == exact(dpsql.connect(":memory:", policy), query)
    with pytest.raises(dpsql.PolicyError, match="already has a table or view ages"):
        dpsql.connect(spark, policy)
    spark.catalog.dropTempView("ages")
    tables["main.ages"] = tables.pop("ages")  # schema main: the session's current database
    dpsql.connect(spark, policy)
    spark.catalog.dropTempView("ages")
    tables["sales.ages"] = tables.pop("main.ages")
    with pytest.raises(dpsql.PolicyError, match="a temporary view, which has no schema; name it ages"):
        dpsql.connect(spark, policy)
    tables["ages"] = {**tables.pop("sales.ages"), "source": str(tmp_path / "none*.json")}
    with pytest.raises(dpsql.PolicyError, match="no file matches"):
        dpsql.connect(spark, policy)


def test_order_statistics_run_as_one_value_histogram_on_spark(pairs) -> None:
    """Spark's form of the order statistics over a wide column (DuckDB's bucketed two-pass form
    there): one bucket per value, no second pass (the statistics are checked equal to DuckDB's by
    ``test_adult_statistics_are_the_same``). A narrow integer column such as age is a one-pass
    value histogram on both engines already."""
    duck, _ = pairs["adult"]
    for query in ("SELECT DP_MEDIAN(fnlwgt, 0, 1500000) FROM adult WITH (epsilon = 1)",
                  "SELECT sex, DP_QUANTILE(fnlwgt, 0.5, 0, 1500000) FROM adult GROUP BY sex "
                  "WITH (mechanism = 'smooth', epsilon = 1, delta = 1e-6)"):
        assert "_vals0" in duck.rewritten_sql(query)
        spark_sql = duck.rewritten_sql(query, "spark")
        assert "_h AS" in spark_sql and "_vals0" not in spark_sql and "_multi" not in spark_sql


@pytest.mark.parametrize("query", [
    "SELECT DP_MEDIAN(age) FROM adult WITH (epsilon = 1)",
    "SELECT DP_MEDIAN(age) FROM adult WHERE age > 1000 WITH (epsilon = 1)",
    "SELECT sex, DP_QUANTILE(age, 0.9) FROM adult GROUP BY sex WITH (epsilon = 0.01)",
    "SELECT race, DP_MIN(hours_per_week), DP_MAX(hours_per_week) FROM adult GROUP BY race WITH (epsilon = 1)",
    "SELECT DP_MIN(hours_per_week), DP_MEDIAN(age) FROM adult WHERE age > 40 WITH (epsilon = 1)",
])
def test_exponential_ranks_come_back_as_a_value_histogram(pairs, query: str) -> None:
    """The exponential mechanism's order statistics of a narrow integer column: the value
    histogram alone, collected per group on both engines (no window function, no join); the
    release finds the window in it. Without GROUP BY, Spark reads each COUNT(v) from that list
    and does not run ``__stats``. A wide column keeps the window in SQL: its histogram may hold a
    value per row."""
    duck, spark = pairs["adult"]
    wide = duck.rewritten_sql("SELECT DP_MEDIAN(fnlwgt, 0, 1500000) FROM adult WITH (epsilon = 1)", "spark")
    assert "a0_hist" not in wide and "__e_vd" in wide
    spark_sql = duck.rewritten_sql(query, "spark")
    assert "_hist" in spark_sql and "_e_vd" not in spark_sql and " OVER " not in spark_sql.split("__sq")[1]
    check_same_statistics(pairs["adult"], query)
    if "GROUP BY" not in query:  # the count comes from the histogram: no second pass for __stats
        assert "__stats" not in spark_sql and "AGGREGATE(__sq" in spark_sql
    names, rows = exact(spark, query)
    hists = [v for row in rows for v in row if isinstance(v, list)]
    assert all(len(h) <= 101 and [e["v"] for e in h] == sorted({e["v"] for e in h}) for h in hists)
    assert bool(hists) is ("> 1000" not in query)  # no rows: NULL, as DuckDB's LIST of no rows


def test_public_key_domain_rows_are_kept_as_text(pairs, monkeypatch) -> None:
    """Spark's form of a public key domain of plain literals: the rows are written as text once
    (one node for all of them); a domain with another literal is written by sqlglot's Spark
    generator, and the statistics are DuckDB's either way."""
    from dpsql._compile import spark as compile_spark

    duck, _ = pairs["adult"]
    query = "SELECT occupation, DP_COUNT(*), DP_MEDIAN(age) FROM adult GROUP BY occupation " \
            "WITH (epsilon = 1, keys = ['Sales', 'Nowhere', 'it''s', 'a\\b', 'x, y'])"
    spark_sql = duck.rewritten_sql(query, "spark")
    assert "FROM VALUES ('Sales'), ('Nowhere'), ('it\\'s'), ('a\\\\b'), ('x, y') AS __keys(__k0)" in spark_sql
    check_same_statistics(pairs["adult"], query)
    plain = "SELECT occupation, age, DP_COUNT(*) FROM adult GROUP BY occupation, age " \
            "WITH (epsilon = 1, keys = [['Sales', 30], ['Nowhere', 40]])"
    rewritten = duck.prepare(plain).rewritten  # DuckDB: two keys, written in as text (a larger domain: a table)
    assert "AS __domain(__k0, __k1)) AS __keys" in rewritten.statement and not rewritten.tables
    written = []
    value_list = compile_spark.value_list
    monkeypatch.setattr(compile_spark, "value_list", lambda *a: written.append(a) or value_list(*a))
    duck.rewritten_sql(plain, "spark")
    assert written  # Spark's rows were written as text
    monkeypatch.undo()
    assert "FROM VALUES ('Sales', 30), ('Nowhere', 40) AS __keys(__k0, __k1)" in duck.rewritten_sql(plain, "spark")
    check_same_statistics(pairs["adult"], plain)


#: Public key domains: keys with no rows, a NULL key (workclass has NULLs), two keys, every
#: additive aggregate, a filter that leaves no row, and a median's subquery joined as well.
PUBLIC_KEYS = [
    "SELECT workclass, DP_COUNT(*), DP_SUM(age), DP_VAR(hours_per_week) FROM adult GROUP BY workclass "
    "WITH (epsilon = 1, keys = ['Private', 'Nowhere', NULL])",
    "SELECT sex, race, DP_MEAN(age) FROM adult GROUP BY sex, race "
    "WITH (epsilon = 1, keys = [['Male', 'White'], ['Female', 'Nowhere'], ['Nowhere', 'Black']])",
    "SELECT sex, DP_COUNT(*), DP_MEAN(age) FROM adult WHERE age > 200 GROUP BY sex "
    "WITH (epsilon = 1, keys = ['Male', 'Female'])",
    "SELECT education_num, DP_COUNT(*), DP_STDDEV(age) FROM adult GROUP BY education_num "
    "WITH (mechanism = 'gaussian', epsilon = 1, delta = 1e-6, keys = [1, 2, 3, 99])",
    "SELECT sex, DP_COUNT(*), DP_MEDIAN(age) FROM adult GROUP BY sex WITH (epsilon = 1, keys = ['Male', 'Nowhere'])",
]


@pytest.mark.parametrize("query", PUBLIC_KEYS)
def test_public_key_domains_give_the_same_statistics(pairs, query: str) -> None:
    """A key without rows gets NULL for every statistic, a key of the data outside the domain
    is dropped, and NULL is a key like any other, on both engines."""
    check_same_statistics(pairs["adult"], query)


def test_statements_run_with_the_sessions_parallelism_as_shuffle_partitions(spark, pairs) -> None:
    """dpsql's statements run with spark.sql.shuffle.partitions = the session's default
    parallelism; the owner's setting is back afterwards."""
    _, con = pairs["adult"]
    seen = []
    real = spark.sql

    def spy(sql, *args, **kwargs):
        seen.append(spark.conf.get("spark.sql.shuffle.partitions"))
        return real(sql, *args, **kwargs)

    spark.conf.set("spark.sql.shuffle.partitions", "7")
    con.engine.session = type("S", (), {"sql": staticmethod(spy), "conf": spark.conf})()
    try:
        con.engine.statistics(con.prepare("SELECT DP_COUNT(*) FROM adult WITH (epsilon = 1)").sql)
    finally:
        con.engine.session = spark
    assert seen == [str(spark.sparkContext.defaultParallelism)] == [str(con.engine.shuffle_partitions)]
    assert spark.conf.get("spark.sql.shuffle.partitions") == "7"
    spark.conf.set("spark.sql.shuffle.partitions", "2")


def test_zero_row_probes_are_answered_alike_and_the_pivot_probe_is_refused(pairs) -> None:
    """A probe is typed by dpsql (columns) and by each engine over typed empty stand-ins of the
    tables (expressions): the same names and types on both engines, and the PIVOT probe refused."""
    duck, spark = pairs["adult"]
    before = spark.budget.spent.epsilon  # the connection is the module's: earlier tests spent on it
    for query in ("SELECT * FROM adult WHERE 1=0", "SELECT age / 10 AS d, upper(sex) AS s, age FROM adult LIMIT 0"):
        a, b = duck.sql(query).arrow(), spark.sql(query).arrow()
        assert a.num_rows == b.num_rows == 0
        assert a.schema.names == b.schema.names
        assert [str(f.type) for f in a.schema][-3:] == [str(f.type) for f in b.schema][-3:]
    with pytest.raises(dpsql.PrivacyError, match="PIVOT"):
        spark.sql("SELECT * FROM (PIVOT adult ON sex) LIMIT 0")
    assert spark.budget.spent.epsilon == before
