"""Sample and aggregate: hash chunks, the Laplace release, Smith's Winsorized mean, DP_AGG."""

from __future__ import annotations

import math
import statistics
import time

import duckdb
import pytest
from scipy import stats as sps

import dpsql
from dpsql._privacy.noise import SeededNoise, laplace_scale
from dpsql._release.release import release
from dpsql._sql.options import Options
from dpsql.errors import PrivacyError
from dpsql.interfaces.demo import load_adult
from dpsql.mechanisms import saa
from dpsql.mechanisms.base import Context

MEAN_QUERY = "SELECT DP_MEAN(age, 20, 80) FROM adult WITH (mechanism = 'saa', chunks = 600, epsilon = 1)"
SLOPE_QUERY = ("SELECT DP_AGG(regr_slope(hours_per_week, age), -1, 1) FROM adult "
               "WITH (mechanism = 'saa', chunks = 300, epsilon = 1)")


def _run(con: dpsql.Connection, query: str):
    """Plan, rewritten SQL, column names and rows of one execution (no release, no charge)."""
    prepared = con.prepare(query)
    plan, rw = prepared.plan, prepared.rewritten
    cur = con.engine.connection.execute(rw.sql)
    return plan, rw, [d[0] for d in cur.description], cur.fetchall()


def _adult() -> duckdb.DuckDBPyConnection:
    raw = duckdb.connect()
    load_adult(raw)
    return raw


def ctx(relation: str = "add_remove", unit: str = "row", grouped: bool = False, m: int = 1, g: int = 1) -> Context:
    return Context(neighbouring=relation, max_rows=m, grouped=grouped, filtered=False, options=Options(),
                   unit_key=unit, group_size=g)


def test_changed_chunks_per_relation_and_unit() -> None:
    assert saa.changed_chunks(ctx()) == 1
    assert saa.changed_chunks(ctx("replace")) == 2  # the changed row hashes to another chunk
    assert saa.changed_chunks(ctx(m=3)) == 3  # m rows, m chunks
    assert saa.changed_chunks(ctx(unit="pid", m=10, g=1)) == 1  # an id's rows share a chunk
    assert saa.changed_chunks(ctx("replace", unit="pid", m=10, g=2)) == 4
    assert saa.changed_chunks(ctx(unit="pid", m=10, grouped=True)) == 10  # one chunk per group


def test_chunk_sizes_from_the_chunk_assignment(seeded_demo) -> None:
    """600 chunks of Adult: all exist, ≈ 54 rows each (32561/600), none empty."""
    con = seeded_demo(1)
    prepared = con.prepare(MEAN_QUERY)
    plan, rw = prepared.plan, prepared.rewritten
    prep = plan.prepared[0]
    sizes = [r[1] for r in _adult().execute(saa.assignment_sql(rw.sql, "row", prep.k)).fetchall()]
    assert len(sizes) == 600 and sum(sizes) == 32561
    assert 54 <= statistics.fmean(sizes) <= 55
    assert min(sizes) >= 25 and max(sizes) <= 95  # Binomial(32561, 1/600): sd ≈ 7.4


def test_mean_errors_are_laplace_around_the_chunk_mean(seeded_demo) -> None:
    """200 releases of the mean age: value − mean(chunk answers) ~ Lap(60/(600·1)) (KS test)."""
    con = seeded_demo(2)
    plan, rw, names, rows = _run(con, MEAN_QUERY)
    prep = plan.prepared[0]
    answers = rows[0][names.index(prep.column)]
    assert len(answers) == 600 and all(20 <= a <= 80 for a in answers)
    centre = math.fsum(answers) / 600
    assert abs(centre - 38.58) < 0.5
    scale = laplace_scale(60 / 600, 1.0)
    assert prep.part.scale == pytest.approx(scale) and scale == pytest.approx(0.1, rel=1e-6)
    noise = SeededNoise(2)
    errors = [release(plan, rw, names, rows, noise).rows[0][0] - centre for _ in range(200)]
    assert sps.kstest(errors, "laplace", args=(0, scale)).pvalue > 0.01
    report = con.sql(MEAN_QUERY).report[0]
    assert report.mechanism == "saa" and report.sensitivity == pytest.approx(0.1)


def test_regr_slope_within_a_tenth(seeded_demo) -> None:
    con = seeded_demo(3)
    if duckdb.__version__.startswith("1."):  # DuckDB 1.x raises in regr_slope on extreme values: refused
        with pytest.raises(PrivacyError, match="regr_slope"):
            con.sql(SLOPE_QUERY)
        return
    exact = _adult().execute("SELECT regr_slope(hours_per_week, age) FROM adult").fetchone()[0]
    plan, rw, names, rows = _run(con, SLOPE_QUERY)
    noise = SeededNoise(3)
    values = [release(plan, rw, names, rows, noise).rows[0][0] for _ in range(100)]
    assert sum(abs(v - exact) <= 0.1 for v in values) >= 90
    assert all(-1 <= v <= 1 for v in values)


def _assignment(raw: duckdb.DuckDBPyConnection, sql: str) -> dict[int, tuple[int, int]]:
    return {chunk: (rows, content) for chunk, rows, content in raw.execute(sql).fetchall()}


def test_adding_a_row_changes_exactly_one_chunk(seeded_demo) -> None:
    con = seeded_demo(4)
    prepared = con.prepare(MEAN_QUERY)
    plan, rw = prepared.plan, prepared.rewritten
    sql = saa.assignment_sql(rw.sql, "row", plan.prepared[0].k)
    raw = _adult()
    before = _assignment(raw, sql)
    raw.execute("INSERT INTO adult SELECT * REPLACE (age + 1 AS age) FROM adult LIMIT 1")
    after = _assignment(raw, sql)
    changed = [c for c in set(before) | set(after) if before.get(c) != after.get(c)]
    assert len(changed) == 1 and after[changed[0]][0] == before.get(changed[0], (0, 0))[0] + 1


def test_changing_a_row_can_move_it_to_another_chunk(seeded_demo) -> None:
    """Why ``replace`` has c = 2: an edited row leaves its chunk and usually lands in another."""
    con = seeded_demo(5)
    prepared = con.prepare(MEAN_QUERY)
    plan, rw = prepared.plan, prepared.rewritten
    sql = saa.assignment_sql(rw.sql, "row", plan.prepared[0].k)
    raw = _adult()
    before = _assignment(raw, sql)
    raw.execute("UPDATE adult SET age = age + 1 WHERE rowid = 0")
    after = _assignment(raw, sql)
    changed = [c for c in before if before[c] != after.get(c)]
    assert len(changed) == 2  # one chunk loses the row, another gains it


def test_id_unit_keeps_a_units_rows_in_one_chunk() -> None:
    """With an id privacy unit the chunk is a hash of the id: every row of an id shares it."""
    def setup(con: duckdb.DuckDBPyConnection) -> None:
        con.execute("CREATE TABLE v AS SELECT range % 500 AS pid, (range * 7919) % 100 AS x FROM range(5000)")

    pol = {"budget": {"epsilon": 1e9}, "tables": {"v": {"privacy_unit": "pid", "max_rows_per_unit": 10,
                                                       "columns": {"x": {"lower": 0, "upper": 100}}}}}
    con = dpsql.connect(":memory:", pol, setup=setup, noise=SeededNoise(6))
    query = "SELECT DP_MEAN(x) FROM v WITH (mechanism = 'saa', chunks = 50, epsilon = 1)"
    prepared = con.prepare(query)
    plan, rw = prepared.plan, prepared.rewritten
    prep = plan.prepared[0]
    assert prep.c == 1 and prep.part.sensitivity == pytest.approx(100 / 50)
    chunk = saa.chunk_sql("__src", "pid", 50)
    tree_sql = saa.assignment_sql(rw.sql, "pid", 50)
    with_part = tree_sql[: tree_sql.index(" SELECT CAST(HASH")]
    per_id = con.engine.connection.execute(f"{with_part} SELECT __u, COUNT(DISTINCT {chunk}) FROM __src GROUP BY __u").fetchall()
    assert len(per_id) == 500 and all(n == 1 for _, n in per_id)
    value = con.sql(query).fetchone()[0]
    assert 0 <= value <= 100


def test_group_by_gives_every_group_k_answers(seeded_demo) -> None:
    con = seeded_demo(7)
    query = ("SELECT sex, DP_MEDIAN(age) FROM adult GROUP BY sex "
             "WITH (mechanism = 'saa', chunks = 100, epsilon = 2, keys = ['Female', 'Male', 'Other'])")
    plan, rw, names, rows = _run(con, query)
    col = names.index(plan.prepared[0].column)
    lists = {r[0]: r[col] for r in rows}
    assert len(lists["Female"]) == 100 and len(lists["Male"]) == 100 and lists["Other"] is None
    res = con.sql(query)
    out = dict(res.fetchall())
    assert 30 <= out["Female"] <= 45 and 30 <= out["Male"] <= 45
    assert 0 <= out["Other"] <= 100  # absent group: k midpoints plus noise


def test_default_mechanism_and_refusals(seeded_demo) -> None:
    con = seeded_demo(8)
    res = con.sql("SELECT DP_AGG(covar_pop(age / 100, hours_per_week / 100), -1, 1) FROM adult WITH (epsilon = 1)")
    assert res.report[0].mechanism == "saa" and -1 <= res.fetchone()[0] <= 1
    assert con.prepare("SELECT DP_AGG(avg(age), 0, 100) FROM adult WITH (epsilon = 1)").plan.prepared[0].k == saa.DEFAULT_CHUNKS
    with pytest.raises(PrivacyError, match="saa"):
        con.sql("SELECT DP_COUNT(*) FROM adult WITH (mechanism = 'saa', epsilon = 1)")
    text = con.explain(MEAN_QUERY)
    assert "hash of the whole row % 600" in text and "Laplace(b=0.1)" in text


def test_dp_agg_keeps_quotes_literals_and_aliases(seeded_demo) -> None:
    """The aggregate runs per chunk as written (quoted names, string literals, table aliases)."""
    con = seeded_demo(11)
    exact = _adult().execute("SELECT avg(age) FILTER (WHERE sex = 'Female') FROM adult").fetchone()[0]
    query = ("SELECT DP_AGG(avg(CASE WHEN a.sex = 'Female' THEN a.\"age\" END), 0, 100) FROM adult AS a "
             "WITH (chunks = 50, epsilon = 5)")
    assert abs(con.sql(query).fetchone()[0] - exact) < 2


def test_winsorized_on_adult_and_on_a_wide_range(seeded_demo) -> None:
    con = seeded_demo(9)
    query = MEAN_QUERY.replace("epsilon = 1)", "epsilon = 1, aggregator = 'winsorized')")
    plan, rw, names, rows = _run(con, query)
    noise = SeededNoise(9)
    values = [release(plan, rw, names, rows, noise).rows[0][0] for _ in range(50)]
    assert statistics.median(abs(v - 38.58) for v in values) < 1.0
    prep = plan.prepared[0]
    assert prep.eps_q == (0.25 / 2, 0.25 / 2) and prep.eps_mean == 0.5
    # Many tightly spread answers in a wide range: the widened interval shrinks the noise.
    prep.k, prep.lower, prep.upper = 20000, -1000.0, 1000.0
    answers = [0.5 + 0.01 * math.sin(i) for i in range(20000)]
    value, entry = prep._winsorized(answers, SeededNoise(10))
    assert abs(value - 0.5) < 0.05
    assert entry.sensitivity < 2000 / 20000 / 10  # [a, b] is far narrower than [l, u]


@pytest.mark.thorough
def test_ten_million_rows_against_a_hand_written_chunked_group_by() -> None:
    """SAA's query on 10M rows costs about what a plain chunked GROUP BY in DuckDB costs."""
    raw = duckdb.connect()
    raw.execute("CREATE TABLE t AS SELECT (random() * 100)::INT AS age, random() AS w FROM range(10000000)")
    pol = {"budget": {"epsilon": 1e9}, "tables": {"t": {"columns": {"age": {"lower": 0, "upper": 100}}}}}
    con = dpsql.connect(raw, pol, noise=SeededNoise(0))
    query = "SELECT DP_MEAN(age, 20, 80) FROM t WITH (mechanism = 'saa', chunks = 1000, epsilon = 1)"
    by_hand = "SELECT list(a) FROM (SELECT hash(t) % 1000 AS c, avg(age) AS a FROM t GROUP BY c)"
    plain, private = [], []
    for _ in range(5):
        start = time.perf_counter()
        raw.execute(by_hand).fetchall()
        plain.append(time.perf_counter() - start)
        start = time.perf_counter()
        con.sql(query).fetchall()
        private.append(time.perf_counter() - start)
    assert min(private) <= 2.0 * min(plain)
