"""Bounds found privately on Spark: the histogram statement bins every value as DuckDB's does
(also where ln x / ln 2 rounds across a power of two), and the whole query runs and is charged
once. Runs with ``pytest -m spark`` (the session fixture of conftest.py)."""

from __future__ import annotations

import math

import pytest

import dpsql
from dpsql._privacy import approx_bounds as ab
from dpsql._privacy.noise import SeededNoise
from dpsql._release import found
from dpsql.interfaces.demo import load_adult
from tests.conftest import demo_policy

pytestmark = pytest.mark.spark


def _values() -> list[float]:
    out = [0.0, 3.0, 90.0, -7.5, 1e308, -1e308, 1e-300]
    for k in range(ab.K_MIN - 2, ab.K_MAX + 3):
        p = 2.0 ** k
        out += [p, -p, math.nextafter(p, 0.0), math.nextafter(p, math.inf)]
    return out


def test_spark_bins_every_value_as_duckdb_does(spark) -> None:
    values = _values()
    frame = spark.createDataFrame([(v,) for v in values] + [(None,), (math.nan,), (math.inf,)], "x DOUBLE")
    frame.createOrReplaceTempView("bounds_values")
    policy = {"budget": {"epsilon": 10.0}, "tables": {"bounds_values": {"privacy_unit": "row"}}}
    con = dpsql.connect(spark, policy)
    prepared = con.prepare("SELECT DP_SUM(x, bounds => 'auto') FROM bounds_values WITH (epsilon = 1)")
    assert "LOG(2, " in prepared.search_sql  # Spark's form: ln x / ln 2
    got = found.counts(*con.engine.statistics(prepared.search_sql))[0]
    expected: dict[int, int] = {}
    for v in values:
        expected[ab.bin_of(v)] = expected.get(ab.bin_of(v), 0) + 1
    assert got == expected


def test_a_query_with_bounds_found_runs_on_spark_and_is_charged_once(spark) -> None:
    con = dpsql.connect(spark, demo_policy(epsilon=10.0), noise=SeededNoise(4))
    result = con.sql("SELECT sex, DP_MEAN(age / 10, bounds => 'auto') AS decades FROM adult GROUP BY sex "
                     "WITH (epsilon = 1)")
    assert result.report[0].note.startswith("bounds [1, 16] found privately with ε=0.25 of it")
    assert [row[0] for row in result.fetchall()] == ["Female", "Male"]
    history = con.budget.history
    assert len(history) == 1 and history[0].cost.epsilon == pytest.approx(1.0)
    # the same histogram as DuckDB's
    duck = dpsql.connect(":memory:", demo_policy(epsilon=10.0), setup=load_adult)
    query = "SELECT DP_SUM(age / 10, bounds => 'auto') FROM adult WITH (epsilon = 1)"
    on_spark = found.counts(*con.engine.statistics(con.prepare(query).search_sql))
    on_duck = found.counts(*duck.engine.statistics(duck.prepare(query).search_sql))
    assert on_spark == on_duck and sum(on_duck[0].values()) == 32561
