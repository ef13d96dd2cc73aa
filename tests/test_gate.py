"""The privacy gate piece by piece: name resolution, the allowlist, the rewrite's names, DP_AGG.

The hostile corpus (tests/corpus/hostile.toml) and the random-query property test check the
gate from the outside; these tests pin down each rule of dpsql/_sql/scope.py, dpsql/_sql/allow.py and
dpsql/_sql/bind.py on its own, so that a regression names the rule it breaks.
"""

from __future__ import annotations

import duckdb
import pytest
import sqlglot
from sqlglot import exp

import dpsql
from dpsql._privacy.noise import SeededNoise
from dpsql._sql.allow import _WHY, ANONYMOUS
from dpsql._sql.allow import SAFE_ANY_AGGREGATES as DP_AGG_ANY
from dpsql._sql.allow import SAFE_NUMERIC_AGGREGATES as DP_AGG_NUMERIC
from dpsql.interfaces.demo import load_adult
from tests.conftest import demo_policy


@pytest.fixture(scope="module")
def con() -> dpsql.Connection:
    c = dpsql.connect(":memory:", demo_policy(epsilon=1e9, delta=0.5), setup=load_adult, noise=SeededNoise(3))
    yield c
    c.close()


def _refused(con: dpsql.Connection, sql: str, kind: type[dpsql.Error] = dpsql.PrivacyError) -> str:
    before = con.budget.spent
    with pytest.raises(kind) as info:
        con.sql(sql)
    assert con.budget.spent == before
    return str(info.value)


# -- name resolution ---------------------------------------------------------------------------


@pytest.mark.parametrize("sql", [
    "WITH adult AS (SELECT * FROM adult) SELECT * FROM adult LIMIT 3",
    "WITH adult AS (SELECT 1 AS x) SELECT * FROM adult",
    "SELECT * FROM adult WHERE EXISTS (WITH adult AS (SELECT 1 AS x) SELECT 1)",
    "WITH education_levels AS (SELECT * FROM adult) SELECT count(*) FROM education_levels",
    "SELECT (WITH Adult AS (SELECT 1) SELECT 1)",
    "WITH nosuch AS (SELECT 1 AS x) SELECT * FROM nosuch",  # allowed name: see below
])
def test_a_cte_cannot_take_a_tables_name(con, sql: str) -> None:
    if "nosuch" in sql:
        assert con.sql(sql).fetchall() == [(1,)]
        return
    assert "has the name of a table" in _refused(con, sql)


def test_forward_and_self_references_are_the_real_table(con) -> None:
    # DuckDB resolves a CTE's reference to a later CTE as a table: it does not exist here.
    assert "table b does not exist" in _refused(
        con, "WITH a AS (SELECT * FROM b), b AS (SELECT 1 AS x) SELECT * FROM a", dpsql.BindError)
    # An inner WITH is visible only inside its subquery.
    msg = _refused(con, "SELECT * FROM (WITH zz AS (SELECT 1 AS x) SELECT * FROM zz), zz", dpsql.BindError)
    assert "table zz does not exist" in msg


def test_a_cte_defined_twice_is_an_error(con) -> None:
    assert "defined twice" in _refused(
        con, "WITH a AS (SELECT 1 AS x), a AS (SELECT 2 AS x) SELECT * FROM a", dpsql.BindError)


def test_public_queries_read_tables_by_qualified_name(con) -> None:
    bound = con.prepare("SELECT e.education FROM education_levels AS e ORDER BY 1 LIMIT 1").bound
    tables = list(bound.query.find_all(exp.Table))
    assert [(t.catalog, t.db, t.name, t.alias) for t in tables] == [("memory", "main", "education_levels", "e")]
    assert con.sql("SELECT education_levels.education FROM education_levels ORDER BY 1 LIMIT 1").fetchall()


# -- reserved names ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["__v0", "__src", "__t", "__k0", "__noisy", "__u", '"__a0"'])
def test_reserved_names_are_refused_wherever_they_appear(con, name: str) -> None:
    sql = f"SELECT DP_SUM({name}, 0, 1) FROM (SELECT *, fnlwgt AS {name} FROM adult) WITH (epsilon = 1)"
    assert "reserved" in _refused(con, sql)


REWRITES = [
    "SELECT DP_SUM(a) FROM (SELECT age AS a FROM adult WHERE fnlwgt > 5) WITH (epsilon = 1)",
    "WITH x AS (SELECT * EXCLUDE (fnlwgt) FROM adult) SELECT sex, DP_MEAN(age) FROM x GROUP BY sex WITH (epsilon = 1)",
    "SELECT DP_AGG(covar_pop(age / 100, hours_per_week / 100), -1, 1) FROM adult WITH (epsilon = 1)",
    "SELECT DP_MEDIAN(age) FROM adult WHERE sex = 'Male' WITH (mechanism = 'smooth', epsilon = 1, delta = 1e-6)",
    "SELECT DP_MEAN(age) FROM adult WITH (mechanism = 'ptr', bound = 0.01, epsilon = 1, delta = 1e-6)",
    "SELECT occupation, DP_COUNT(*) FROM adult GROUP BY occupation WITH (epsilon = 1, delta = 1e-6)",
]


@pytest.mark.parametrize("sql", REWRITES)
def test_the_rewrite_names_no_user_column_or_table(con, sql: str) -> None:
    """Every column of the statistics query is an internal name or a base column of __t."""
    prepared = con.prepare(sql)
    rw = prepared.rewritten
    tree = sqlglot.parse_one(rw.sql, read="duckdb")
    for col in tree.find_all(exp.Column):
        if col.table == "__t":
            assert col.name in {"age", "fnlwgt", "sex", "hours_per_week", "occupation"}
        else:
            name = col.name if not isinstance(col.this, exp.Star) else col.table
            assert name.startswith("__") or name[0] == "a" or name == "range", col.sql()
    real = {t.name for t in tree.find_all(exp.Table) if t.db}
    assert real == {"adult"}
    assert all(t.catalog == "memory" for t in tree.find_all(exp.Table) if t.db)


# -- the allowlist -----------------------------------------------------------------------------


@pytest.mark.parametrize("fn", sorted(_WHY))
def test_functions_with_a_known_hazard_are_refused(con, fn: str) -> None:
    args = {"repeat": "'x', age", "lpad": "'x', age, 'y'", "rpad": "'x', age, 'y'", "range": "age",
            "generate_series": "1, age", "unnest": "[age]", "generate_subscripts": "[age], 1",
            "error": "'x'", "write_log": "'x'", "sleep_ms": "1", "setseed": "0.5",
            "nextval": "'s'", "currval": "'s'"}.get(fn, "")
    msg = _refused(con, f"SELECT DP_COUNT(*) FROM adult WHERE {fn}({args}) IS NOT NULL WITH (epsilon = 1)")
    assert "not allowed" in msg


def test_allowed_anonymous_functions_are_deterministic_scalars() -> None:
    """Each name DuckDB keeps as Anonymous is a scalar function DuckDB does not call volatile."""
    rows = duckdb.connect().execute(
        "SELECT function_name, any_value(function_type), bool_or(stability = 'VOLATILE') "
        "FROM duckdb_functions() GROUP BY function_name").fetchall()
    known = {name: (kind, volatile) for name, kind, volatile in rows}
    for name in ANONYMOUS:
        if name in known:  # a few names exist only in some DuckDB versions
            kind, volatile = known[name]
            assert kind in ("scalar", "macro") and not volatile, name


@pytest.mark.parametrize("sql,fragment", [
    ("SELECT DP_COUNT(*) FROM adult WHERE [age][1] > 3", "list access"),
    ("SELECT DP_COUNT(*) FROM adult WHERE CAST(age AS INT[]) IS NULL", "only scalar types"),
    ("SELECT DP_COUNT(*) FROM adult WHERE age IN (SELECT age FROM adult)", "over private table adult"),
    ("SELECT DP_COUNT(*) FROM adult WHERE age = ANY([1])", "ANY"),
    ("SELECT DP_SUM(age) FROM adult GROUP BY GROUPING SETS ((sex), ())", "GROUPINGSETS"),
    ("SELECT DP_SUM(age) FROM adult GROUP BY ROLLUP (sex)", "ROLLUP"),
    ("SELECT DP_COUNT(*) FROM (SELECT * RENAME (age AS a) FROM adult)", "RENAME"),
    ("SELECT DP_COUNT(*) FROM (SELECT COLUMNS('a.*') FROM adult)", "columns()"),
    ("SELECT DP_COUNT(*) FROM adult AS a(x, y)", "column aliases"),
    ("SELECT DP_COUNT(*) FROM adult USING SAMPLE 10", "SAMPLE"),
    ("SELECT DP_COUNT(*) FROM (SELECT * FROM adult TABLESAMPLE 50%)", "TABLESAMPLE"),
    ("SELECT DP_COUNT(*) FROM adult UNPIVOT (v FOR k IN (age, fnlwgt))", "UNPIVOT"),
    ("SELECT DP_COUNT(*) FROM adult WHERE $1 > 0", "parameters"),
])
def test_shapes_outside_the_allowlist_are_refused(con, sql: str, fragment: str) -> None:
    assert fragment in _refused(con, sql + " WITH (epsilon = 1)")


def test_star_modifiers_are_checked_and_applied(con) -> None:
    # EXCLUDE removes a column: what was excluded cannot be read afterwards.
    assert "does not exist" in _refused(
        con, "SELECT DP_SUM(fnlwgt, 0, 1) FROM (SELECT * EXCLUDE (fnlwgt) FROM adult) WITH (epsilon = 1)",
        dpsql.BindError)
    # REPLACE's expression is what the column means afterwards (and is clipped).
    rw = con.prepare(
        "SELECT DP_SUM(age, 0, 10) FROM (SELECT * REPLACE (age / 10 AS age) FROM adult) WITH (epsilon = 1)")
    assert '"__t"."age" / 10' in rw.sql
    # A name that two columns share cannot be read: DuckDB and dpsql could pick different ones.
    assert "ambiguous" in _refused(
        con, "SELECT DP_SUM(age, 0, 1) FROM (SELECT *, fnlwgt AS age FROM adult) WITH (epsilon = 1)",
        dpsql.BindError)


def test_post_processing_names_only_outputs(con) -> None:
    before = con.budget.spent
    with pytest.raises(dpsql.BindError, match="column nosuch does not exist"):
        con.sql("SELECT DP_COUNT(*) + nosuch FROM adult WITH (epsilon = 1)")
    with pytest.raises(dpsql.PrivacyError, match="whole number literal"):
        con.sql("SELECT DP_COUNT(*) FROM adult LIMIT 1 + 1 WITH (epsilon = 1)")
    assert con.budget.spent == before
    # Post-processing that would fail on a value gives NULL instead (it runs after the charge).
    res = con.sql("SELECT CAST(DP_COUNT(*) AS TINYINT) AS n FROM adult WITH (epsilon = 1)")
    assert res.fetchall() == [(None,)]


# -- replace neighbours: any filter makes the count noisy ---------------------------------------


@pytest.mark.parametrize("sql", [
    "SELECT DP_COUNT(*) FROM (SELECT * FROM adult WHERE age > 30) WITH (epsilon = 1)",
    "WITH a AS (SELECT * FROM adult WHERE sex = 'Male') SELECT DP_COUNT(*) FROM a WITH (epsilon = 1)",
    "SELECT DP_COUNT(*) FROM (SELECT * FROM (SELECT * FROM adult WHERE age > 30)) WITH (epsilon = 1)",
])
def test_a_filtered_count_is_never_public_under_replace(sql: str) -> None:
    pol = demo_policy(epsilon=100)
    pol["neighbouring"] = "replace"
    con = dpsql.connect(":memory:", pol, setup=load_adult, noise=SeededNoise(1))
    res = con.sql(sql)
    assert res.cost.epsilon == 1.0 and res.report[0].scale is not None
    unfiltered = con.sql("SELECT DP_COUNT(*) FROM adult WITH (epsilon = 1)")
    assert unfiltered.cost.epsilon == 0 and unfiltered.fetchone()[0] == 32561


# -- DP_AGG runs only aggregates that cannot raise -----------------------------------------------

NASTY = ["1e308", "-1e308", "'inf'::DOUBLE", "'-inf'::DOUBLE", "'nan'::DOUBLE", "NULL", "0", "1.7e308"]


def _nasty() -> dpsql.Connection:
    def setup(c: duckdb.DuckDBPyConnection) -> None:
        c.execute("CREATE TABLE v (x DOUBLE, y DOUBLE, h HUGEINT, s VARCHAR)")
        for i, a in enumerate(NASTY):
            b = NASTY[(i + 3) % len(NASTY)]
            c.execute(f"INSERT INTO v VALUES ({a}, {b}, 170141183460469231731687303715884105727, 'x{i}')")

    pol = {"budget": {"epsilon": 1e9}, "tables": {"v": {"privacy_unit": "row"}}}
    return dpsql.connect(":memory:", pol, setup=setup, noise=SeededNoise(2))


@pytest.mark.parametrize("name", sorted(DP_AGG_NUMERIC | DP_AGG_ANY))
def test_dp_agg_aggregates_cannot_fail(name: str) -> None:
    con = _nasty()
    two = {"corr", "covar_samp", "covar_pop"} | {n for n in DP_AGG_NUMERIC if n.startswith("regr_")}
    if name in ("quantile_cont", "quantile_disc", "approx_quantile"):
        calls = [f"{name}(x, 0.5)", f"{name}(h, 0.5)"]
    elif name in two:
        calls = [f"{name}(x, y)", f"{name}(h, h)"]
    else:
        calls = [f"{name}(x)", f"{name}(h)", f"{name}(s)"]
    for call in calls:
        for where in ("", " WHERE x > 1e300", " WHERE FALSE"):
            res = con.sql(f"SELECT DP_AGG({call}, 0, 1) FROM v{where} WITH (epsilon = 1, chunks = 2)")
            assert 0 <= res.fetchone()[0] <= 1


def test_dp_agg_refuses_aggregates_that_can_fail(con) -> None:
    for call in ("skewness(age)", "kurtosis(age)", "bit_xor(age)", "list(age)", "string_agg(sex, ',')",
                 "avg(DISTINCT age)", "sum(age) FILTER (WHERE age > 3)"):
        msg = _refused(con, f"SELECT DP_AGG({call}, 0, 1) FROM adult WITH (epsilon = 1)")
        assert "DP_AGG" in msg


@pytest.mark.parametrize("select,group", [("sex", "SEX"), ("SEX", "sex"), ('"Sex"', "sex")])
def test_group_keys_match_the_select_list_without_regard_to_case(seeded_demo, select: str, group: str) -> None:
    """DuckDB resolves names without regard to case, and so does the binder."""
    con = seeded_demo()
    out = con.sql(f"SELECT {select}, DP_COUNT(*) FROM adult GROUP BY {group} WITH (epsilon = 1)")
    assert sorted(r[0] for r in out.fetchall()) == ["Female", "Male"]


def test_aggregates_this_duckdb_raises_on_are_refused_by_dp_agg(con) -> None:
    """DuckDB before 2.0 raises "out of range" in the variance family on ±inf, NaN or ±1e308: there
    DP_AGG refuses them (a failure would depend on the data); DuckDB 2.0 allows them."""
    import duckdb

    from dpsql._sql.allow import RAISE_BEFORE_DUCKDB_2, SAFE_NUMERIC_AGGREGATES

    old = duckdb.__version__.startswith("1.")
    for name in sorted(RAISE_BEFORE_DUCKDB_2):
        assert (name in SAFE_NUMERIC_AGGREGATES) is not old, name
    if old:
        msg = _refused(con, "SELECT DP_AGG(stddev(age), 0, 1) FROM adult WITH (epsilon = 1)")
        assert "DP_AGG" in msg and "stddev" in msg
