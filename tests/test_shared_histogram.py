"""``__stats`` read from an order-statistics histogram (``dpsql._plan.rewrite``): on DuckDB the
exponential mechanism's histogram is built once, NULL values included, and the counts of
``__stats`` are its sums. The exact statistics must be those of the statement that aggregates
the rows twice, for every shape: groups, NULL values and keys, ties, a group with only NULLs,
no rows at all, τ-thresholded keys, a public key domain, a continuous column (bucketed, with a
second pass) and whole numbers (one bucket per value)."""

from __future__ import annotations

import random

import duckdb
import pytest

import dpsql
from dpsql._compile.target import Target
from dpsql._plan.rewrite import rewrite
from dpsql._query.pipeline import prepare

POLICY = {
    "neighbouring": "add_remove",
    "budget": {"epsilon": 1e9, "delta": 0.5},
    "tables": {"t": {"privacy_unit": "row", "columns": {
        "x": {"lower": 0, "upper": 1000},
        "a": {"lower": 0, "upper": 100},
        "w": {"lower": -5, "upper": 5},
    }}, "u": {"privacy_unit": "pid", "max_rows_per_unit": 3, "columns": {
        "x": {"lower": 0, "upper": 1000},
    }}},
}

QUERIES = [
    "SELECT DP_MEDIAN(x) FROM t WITH (epsilon = 1)",
    "SELECT DP_QUANTILE(x, 0.9) FROM t WHERE g = 'b' WITH (epsilon = 1)",
    "SELECT DP_MEDIAN(x) FROM t WHERE a > 1000 WITH (epsilon = 1)",
    "SELECT g, DP_MEDIAN(x) FROM t GROUP BY g WITH (epsilon = 1, keys = ['a', 'b', 'c', 'only_nulls', 'none'])",
    "SELECT g, DP_MEDIAN(a) FROM t GROUP BY g WITH (epsilon = 1, delta = 1e-6)",
    "SELECT g, DP_MIN(w), DP_COUNT(*) FROM t GROUP BY g WITH (epsilon = 1, delta = 1e-6)",
    "SELECT DP_COUNT(*), DP_MAX(a) FROM t WITH (epsilon = 1)",
    "SELECT g, a > 50 AS old, DP_QUANTILE(x, 0.25) FROM t GROUP BY g, a > 50 WITH (epsilon = 1, delta = 1e-6)",
    "SELECT DP_MEDIAN(x) FROM u WITH (epsilon = 1)",
    "SELECT g, DP_MEDIAN(x) FROM u GROUP BY g WITH (epsilon = 1, keys = ['a', 'b', 'none'])",
]


class _Separate(Target):
    """DuckDB, with ``__stats`` aggregated from the rows as before."""

    shared_histogram = False


@pytest.fixture(scope="module")
def con():
    raw = duckdb.connect()
    raw.execute("CREATE TABLE t (g VARCHAR, x DOUBLE, a INTEGER, w DOUBLE)")
    rng = random.Random(7)
    rows = []
    for _ in range(3000):
        g = rng.choice(["a", "b", "c", None])
        x = rng.choice([None, rng.random() * 1200 - 100, round(rng.gauss(500, 0.01), 4), 250.0])
        a = rng.choice([None, rng.randint(-3, 104)])
        w = rng.choice([None, rng.random() * 12 - 6, 0.0])
        rows.append((g, x, a, w))
    rows += [("only_nulls", None, None, None)] * 5
    raw.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", rows)
    raw.execute("CREATE TABLE u AS SELECT (hash(g, x, a, w) % 400)::INTEGER AS pid, g, x FROM t")
    c = dpsql.connect(raw, POLICY)
    yield c, raw
    c.close()


def _rows(raw: duckdb.DuckDBPyConnection, sql: str) -> list[tuple]:
    return sorted(raw.execute(sql).fetchall(), key=repr)


@pytest.mark.parametrize("query", QUERIES)
def test_statistics_equal_with_and_without_the_shared_histogram(con, query: str) -> None:
    c, raw = con
    shared = prepare(query, c.policy, c.engine).rewritten
    separate = rewrite(prepare(query, c.policy, c.engine).plan, _Separate())
    assert "__hist AS (" in shared.sql and "FROM __hist" in shared.sql
    assert "__hist" not in separate.sql
    assert shared.columns == separate.columns
    a, b = _rows(raw, shared.sql), _rows(raw, separate.sql)
    assert a == b
    assert [type(x) for r in a for x in r] == [type(x) for r in b for x in r]
    assert a  # the statement returns rows to compare


@pytest.mark.parametrize("query", [
    "SELECT DP_MEDIAN(x), DP_MEAN(a) FROM t WITH (epsilon = 1)",  # a sum is not in the histogram
    "SELECT DP_MEDIAN(x), DP_MEDIAN(a) FROM t WITH (epsilon = 1)",  # COUNT(a) is not in x's histogram
    "SELECT DP_COUNT(a), DP_MAX(a) FROM t WITH (epsilon = 1)",  # COUNT of the unclipped column
    "SELECT DP_MEDIAN(x, 0, 1000) FROM t WITH (mechanism = 'smooth', epsilon = 1, delta = 1e-6)",
])
def test_other_statistics_keep_their_own_aggregate(con, query: str) -> None:
    c, raw = con
    sql = prepare(query, c.policy, c.engine).rewritten.sql
    assert "__hist" not in sql
    assert raw.execute(sql).fetchall()


def test_spark_statement_keeps_its_own_form() -> None:
    from dpsql._compile.target import SPARK

    assert SPARK.shared_histogram is False


@pytest.mark.parametrize("query,again", [
    ("SELECT DP_MEDIAN(x) FROM t WITH (epsilon = 1)", True),  # the histogram, then a second pass
    ("SELECT g, DP_MEDIAN(a) FROM t GROUP BY g WITH (epsilon = 1, delta = 1e-6)", False),  # one pass
    ("SELECT DP_MEDIAN(x) FROM u WITH (epsilon = 1)", False),  # truncated units: too costly to redo
])
def test_source_read_again_only_for_a_second_pass_over_a_plain_table(con, query: str, again: bool) -> None:
    c, _ = con
    sql = prepare(query, c.policy, c.engine).rewritten.sql
    assert sql.startswith("WITH __src AS NOT MATERIALIZED (") is again
