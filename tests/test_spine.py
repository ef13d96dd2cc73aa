"""End-to-end behaviour of the spine: accuracy of the noise, refusals, public tables, budget."""

from __future__ import annotations

import math
import statistics
import subprocess
import sys
import textwrap

import pytest

import dpsql
from dpsql._privacy.noise import SeededNoise, gaussian_sigma_approx
from dpsql.interfaces.demo import load_adult
from tests.conftest import demo_policy

EXACT_MEAN_AGE = 38.58164675532078
EXACT_SUM_AGE = 1256257


def _releases(con: dpsql.Connection, query: str, n: int) -> list[float]:
    return [con.sql(query).fetchone()[0] for _ in range(n)]


def _repeat_release(con: dpsql.Connection, query: str, n: int) -> tuple[list[float], object]:
    """Run the query's DuckDB statement once, then its release step ``n`` times (noise only)."""
    from dpsql._release.release import release

    prepared = con.prepare(query)
    plan, rewritten = prepared.plan, prepared.rewritten
    cur = con.engine.connection.execute(rewritten.sql)
    rows, names = cur.fetchall(), [d[0] for d in cur.description]
    values = [release(plan, rewritten, names, rows, con.noise).rows[0][0] for _ in range(n)]
    return values, plan


def test_laplace_sum_std_matches_scale(seeded_demo) -> None:
    """2,000 releases of DP_SUM(age), ε = 1, bounds [0, 100], add_remove: std within 5% of √2·100."""
    con = seeded_demo(1)
    query = "SELECT DP_SUM(age, 0, 100) FROM adult WITH (epsilon = 1)"
    values, plan = _repeat_release(con, query, 2000)
    sd = statistics.pstdev(values)
    assert abs(sd - math.sqrt(2) * 100) / (math.sqrt(2) * 100) < 0.05
    assert abs(statistics.fmean(values) - EXACT_SUM_AGE) < 15  # unbiased: 5 standard errors
    # The same calibration through the whole API, a few times.
    report = con.sql(query).report[0]
    assert report.sensitivity == 100 and report.mechanism == "laplace"
    assert report.scale == pytest.approx(100, rel=1e-6)
    assert plan.prepared[0].parts["s"].scale == report.scale


def test_gaussian_sum_std_matches_sigma(seeded_demo) -> None:
    con = seeded_demo(2)
    query = "SELECT DP_SUM(age, 0, 100) FROM adult WITH (mechanism = 'gaussian', epsilon = 1, delta = 1e-6)"
    values, _ = _repeat_release(con, query, 2000)
    sigma = gaussian_sigma_approx(100, 1, 1e-6)
    assert abs(statistics.pstdev(values) - sigma) / sigma < 0.05
    assert con.sql(query).report[0].scale == pytest.approx(sigma)


def test_mean_is_near_the_truth(seeded_demo) -> None:
    con = seeded_demo(3)
    values = _releases(con, "SELECT DP_MEAN(age) FROM adult WITH (epsilon = 1)", 200)
    errors = sorted(abs(v - EXACT_MEAN_AGE) for v in values)
    assert errors[len(errors) // 2] < 0.02
    assert all(0 <= v <= 100 for v in values)


def test_replace_makes_unfiltered_count_public(seeded_demo) -> None:
    pol = demo_policy(epsilon=5.0)
    pol["neighbouring"] = "replace"
    con = dpsql.connect(":memory:", pol, setup=load_adult, noise=SeededNoise(0))
    res = con.sql("SELECT DP_COUNT(*) FROM adult WITH (epsilon = 1)")
    assert res.fetchall() == [(32561,)]
    assert res.cost.epsilon == 0 and con.budget.spent.epsilon == 0
    # With a WHERE the count is not public any more.
    res = con.sql("SELECT DP_COUNT(*) FROM adult WHERE age > 50 WITH (epsilon = 1)")
    assert res.cost.epsilon == 1 and res.report[0].sensitivity == 1


def test_group_by_public_keys_gives_every_key(seeded_demo) -> None:
    con = seeded_demo(4)
    res = con.sql("SELECT race, DP_COUNT(*) AS n FROM adult WHERE age > 200 GROUP BY race WITH (epsilon = 1)")
    rows = dict(res.fetchall())
    # No row passes the WHERE: every public key still gets a (noisy) row.
    assert set(rows) == {"Amer-Indian-Eskimo", "Asian-Pac-Islander", "Black", "Other", "White"}
    assert all(v >= 0 for v in rows.values())


def test_keys_option_restricts_the_domain(seeded_demo) -> None:
    con = seeded_demo(5)
    res = con.sql("SELECT occupation, DP_COUNT(*) FROM adult GROUP BY occupation WITH (epsilon = 1, keys = ['Sales', 'Nowhere'])")
    rows = dict(res.fetchall())
    assert set(rows) == {"Sales", "Nowhere"}
    assert abs(rows["Sales"] - 3650) < 40


def test_threshold_keys_drop_rare_groups(seeded_demo) -> None:
    con = seeded_demo(6)
    res = con.sql("SELECT native_country, DP_COUNT(*) FROM adult GROUP BY native_country WITH (epsilon = 1, delta = 1e-6)")
    keys = {k for k, _ in res.fetchall()}
    assert "United-States" in keys
    # Holand-Netherlands has one row: far below τ ≈ 2 + 2·ln(1/(2e-6)) ≈ 28.
    assert "Holand-Netherlands" not in keys


def test_group_by_without_public_keys_and_no_delta_is_refused(seeded_demo) -> None:
    con = seeded_demo(7)
    before = con.budget.spent
    with pytest.raises(dpsql.PrivacyError, match="GROUP BY occupation needs public keys"):
        con.sql("SELECT occupation, DP_COUNT(*) FROM adult GROUP BY occupation WITH (epsilon = 1)")
    assert con.budget.spent == before


@pytest.mark.parametrize(
    "query",
    [
        "SELECT age FROM adult",
        "SELECT max(age) FROM adult",
        "SELECT * FROM adult",
        "SELECT age, DP_COUNT(*) FROM adult WITH (epsilon = 1)",
        "SELECT DP_COUNT(*) FROM adult WHERE age IN (SELECT age FROM adult) WITH (epsilon = 1)",
        "SELECT DP_COUNT(*) FROM (SELECT * FROM adult LIMIT 5) WITH (epsilon = 1)",
        "SELECT DP_COUNT(*) FROM adult a JOIN adult b ON a.age = b.age WITH (epsilon = 1)",
        "SELECT DP_COUNT(*) FROM adult UNION ALL SELECT DP_COUNT(*) FROM adult WITH (epsilon = 1)",
        "SELECT count(*) FROM adult",
        "SELECT DP_COUNT(*) FROM (SELECT sex, count(*) FROM adult GROUP BY sex) WITH (epsilon = 1)",
    ],
)
def test_raw_access_is_refused_naming_the_table(seeded_demo, query: str) -> None:
    con = seeded_demo(8)
    with pytest.raises(dpsql.PrivacyError) as err:
        con.sql(query)
    assert "adult" in str(err.value)
    assert con.budget.spent.epsilon == 0


def test_public_tables_are_queried_normally(seeded_demo) -> None:
    con = seeded_demo(9)
    res = con.sql("SELECT education FROM education_levels WHERE education_num = 13")
    assert res.fetchall() == [("Bachelors",)]
    assert res.report == [] and res.cost.epsilon == 0


def test_having_order_limit_and_expressions_run_on_noisy_output(seeded_demo) -> None:
    con = seeded_demo(10)
    res = con.sql(
        "SELECT sex, DP_COUNT(*) AS n, DP_SUM(age) / DP_COUNT(*) AS ratio FROM adult GROUP BY sex "
        "HAVING DP_COUNT(*) > 100 ORDER BY n DESC LIMIT 1 WITH (epsilon = 1)"
    )
    assert res.columns == ["sex", "n", "ratio"]
    rows = res.fetchall()
    assert [r[0] for r in rows] == ["Male"]
    assert 30 < rows[0][2] < 50
    # DP_COUNT(*) appears twice but is released once: two shares, not three.
    assert len(res.report) == 2 and res.report[0].epsilon == pytest.approx(0.5)


def test_explain_spends_nothing_and_shows_the_split(seeded_demo) -> None:
    con = seeded_demo(11)
    text = con.explain("SELECT sex, DP_MEAN(age) FROM adult GROUP BY sex WITH (epsilon = 1)")
    assert "ε=1.000" in text and "Laplace(b=100" in text and "__stats" in text
    res = con.sql("EXPLAIN SELECT DP_COUNT(*) FROM adult WITH (epsilon = 1)")
    assert res.columns == ["explain"]
    assert con.budget.spent.epsilon == 0


def test_budget_exhaustion_refuses_without_charging() -> None:
    con = dpsql.connect(":memory:", demo_policy(epsilon=1.0), setup=load_adult, noise=SeededNoise(0))
    con.sql("SELECT DP_COUNT(*) FROM adult WITH (epsilon = 0.75)")
    with pytest.raises(dpsql.BudgetError) as err:
        con.sql("SELECT DP_COUNT(*) FROM adult WITH (epsilon = 0.5)")
    assert "Requested: ε=0.500" in str(err.value) and "Remaining: ε=0.250" in str(err.value)
    assert con.budget.spent.epsilon == pytest.approx(0.75)
    con.sql("SELECT DP_COUNT(*) FROM adult WITH (epsilon = 0.25)")  # exactly the rest still fits
    assert con.budget.remaining.epsilon == pytest.approx(0, abs=1e-12)


def _policy_file(tmp_path, epsilon: float) -> str:
    path = tmp_path / "policy.toml"
    text = (tmp_path.parent / "x").name  # noqa: F841
    src = textwrap.dedent(
        f"""
        neighbouring = "add_remove"
        [budget]
        epsilon = {epsilon}
        ledger = "budget.ledger"
        [defaults]
        reuse_releases = "off"  # every query below is charged, however often it is asked
        [tables.people]
        privacy_unit = "row"
        [tables.people.columns]
        age = {{ lower = 0, upper = 100 }}
        """
    )
    path.write_text(src)
    import duckdb

    con = duckdb.connect(str(tmp_path / "people.duckdb"))
    con.execute("CREATE TABLE people AS SELECT (range % 90)::INT AS age FROM range(1000)")
    con.close()
    return str(path)


def test_ledger_survives_a_new_process(tmp_path) -> None:
    policy = _policy_file(tmp_path, 3.0)
    db = str(tmp_path / "people.duckdb")
    code = (
        "import dpsql, sys;"
        f"con = dpsql.connect({db!r}, {policy!r}, init_ledger=True, read_only=True);"
        "con.sql('SELECT DP_COUNT(*) FROM people WITH (epsilon = 1)');"
        "print(con.budget.spent.epsilon)"
    )
    for expected in ("1.0", "2.0"):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        assert out.stdout.strip() == expected
    con = dpsql.connect(db, policy, read_only=True)
    assert con.budget.spent.epsilon == pytest.approx(2.0)
    assert len(con.budget.history) == 2


def test_two_processes_never_exceed_the_total(tmp_path) -> None:
    policy = _policy_file(tmp_path, 2.0)
    db = str(tmp_path / "people.duckdb")
    dpsql.connect(db, policy, init_ledger=True, read_only=True).close()
    code = (
        "import dpsql;"
        f"con = dpsql.connect({db!r}, {policy!r}, read_only=True);\n"
        "ok = 0\n"
        "for _ in range(15):\n"
        "    try:\n"
        "        con.sql('SELECT DP_COUNT(*) FROM people WITH (epsilon = 0.1)'); ok += 1\n"
        "    except dpsql.BudgetError:\n"
        "        pass\n"
        "print(ok)"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    successes = sum(int(p.communicate()[0].strip()) for p in procs)
    con = dpsql.connect(db, policy, read_only=True)
    assert successes == 20
    assert con.budget.spent.epsilon == pytest.approx(2.0)
    assert con.budget.spent.epsilon <= 2.0 * (1 + 1e-9)


def test_missing_ledger_is_refused(tmp_path) -> None:
    policy = _policy_file(tmp_path, 1.0)
    with pytest.raises(dpsql.LedgerError, match="does not exist"):
        dpsql.connect(str(tmp_path / "people.duckdb"), policy)


def test_errors_are_one_line_dpsql_errors(seeded_demo) -> None:
    con = seeded_demo(12)
    cases = {
        "SELECT DP_COUNT(*) FROM adult WITH (epsilon = -1)": (dpsql.OptionError, "epsilon"),
        "SELECT DP_COUNT(*) FROM adult WITH (epsilon = 1, delta = 1)": (dpsql.OptionError, "delta"),
        "SELECT DP_COUNT(*) FROM adult WITH (epsilon = 1, foo = 2)": (dpsql.OptionError, "foo"),
        "SELECT DP_COUNT(*) FROM adult WITH (epsilon = 'x')": (dpsql.OptionError, "epsilon"),
        "SELECT DP_COUNT(*) FROM adult": (dpsql.OptionError, "epsilon"),
        "SELECT DP_COUNT(*) FROM nowhere WITH (epsilon = 1)": (dpsql.BindError, "nowhere"),
        "SELECT DP_SUM(nope) FROM adult WITH (epsilon = 1)": (dpsql.BindError, "nope"),
        "SELECT DP_SUM(age, 10, 5) FROM adult WITH (epsilon = 1)": (dpsql.PrivacyError, "lower bound"),
        "SELECT DP_SUM(sqrt(age)) FROM adult WITH (epsilon = 1)": (dpsql.PrivacyError, "no bounds"),
        "SELECT DP_COUNT(*) FROM adult WITH (mechanism = 'gaussian', epsilon = 1)": (dpsql.OptionError, "delta"),
        "DROP TABLE adult": (dpsql.PrivacyError, "DROP"),
        "SELECT DP_COUNT(*) FROM adult WITH (epsilon = 1, keys = ['a'])": (dpsql.OptionError, "keys"),
    }
    for query, (kind, fragment) in cases.items():
        with pytest.raises(kind) as err:
            con.sql(query)
        assert fragment in str(err.value), query
        assert "\n" not in str(err.value)
    assert con.budget.spent.epsilon == 0


def test_result_behaves_like_a_relation(seeded_demo) -> None:
    con = seeded_demo(13)
    res = con.sql("SELECT sex, DP_COUNT(*) AS n FROM adult GROUP BY sex ORDER BY sex WITH (epsilon = 1)")
    assert res.columns == ["sex", "n"]
    df = res.df()
    assert list(df.columns) == ["sex", "n"] and len(df) == 2
    assert res.arrow().num_rows == 2
    rel = res.relation()
    assert rel.aggregate("count(*)").fetchall()[0][0] == 2
    assert res.fetchone()[0] == "Female"
    assert res.fetchall()[0][0] == "Male"


def test_statistics_query_transpiles_to_spark_and_back(seeded_demo) -> None:
    """The rewritten statistics query survives DuckDB → Spark SQL → DuckDB with the same rows."""
    import sqlglot

    con = seeded_demo(14)
    query = "SELECT sex, DP_MEAN(age) FROM adult WHERE workclass = 'Private' GROUP BY sex WITH (epsilon = 1)"
    spark = con.rewritten_sql(query, dialect="spark")
    assert "EXCEPT (__k0)" in spark  # DuckDB's EXCLUDE, in Spark's words
    back = sqlglot.transpile(spark, read="spark", write="duckdb")[0]
    original = con.rewritten_sql(query)
    assert sorted(con.engine.connection.execute(back).fetchall()) == sorted(con.engine.connection.execute(original).fetchall())
    with pytest.raises(dpsql.Error, match="public"):
        con.rewritten_sql("SELECT * FROM education_levels")


@pytest.mark.thorough
@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_secure_sampler_end_to_end_calibration(mechanism: str) -> None:
    """10,000 releases with the secure (OpenDP) source: std within 5% of the reported scale."""
    from dpsql._privacy.noise import SecureNoise

    con = dpsql.connect(":memory:", demo_policy(epsilon=1e9, delta=0.5), setup=load_adult, noise=SecureNoise())
    query = f"SELECT DP_SUM(age, 0, 100) FROM adult WITH (mechanism = '{mechanism}', epsilon = 1, delta = 1e-6)"
    values, plan = _repeat_release(con, query, 10_000)
    scale = plan.prepared[0].parts["s"].scale
    expected_sd = scale * math.sqrt(2) if mechanism == "laplace" else scale
    assert abs(statistics.pstdev(values) - expected_sd) / expected_sd < 0.05
    assert abs(statistics.fmean(values) - EXACT_SUM_AGE) < 6 * expected_sd / math.sqrt(10_000)
