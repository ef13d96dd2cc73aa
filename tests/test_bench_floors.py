"""The benchmark's hand-written floors compute the integers dpsql's statements sum (run by default:
the floors' SQL is checked here, the benchmark itself in ``tests/test_bench_smoke.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


@pytest.mark.parametrize("column, expr, grid", [
    ("income", "EXACT_INCOME", ("of_mean", 0.0, 200000.0)),
    ("income", "EXACT_INCOME_CENTRED", ("centred", 0.0, 200000.0)),
    ("air_time", "EXACT_AIR", ("of_mean", 0.0, 700.0)),
])
def test_the_floors_compute_dpsqls_integers(column: str, expr: str, grid: tuple) -> None:
    """The hand-written floors sum the integers dpsql's statement sums (the grid of the
    statistic they stand beside), so that a ratio against them measures dpsql, not exactness."""
    import duckdb

    from bench import common, flights
    from dpsql.mechanisms.fixed import FixedPoint

    text = getattr(common, expr, None) or getattr(flights, expr)
    fixed = getattr(FixedPoint, grid[0])(*grid[1:], *([False] if grid[0] == "of_mean" else []))
    xs = [-5.0, 0.0, 0.3, 1.0 / 3, 349.99, 700.0, 777.7, 123456.789, 199999.99, 200000.0, 250000.0]
    got = [r[0] for r in duckdb.sql(f"SELECT {text} FROM (SELECT UNNEST(?::DOUBLE[]) AS {column})",
                                    params=[xs]).fetchall()]
    assert got == [fixed.step(x) for x in xs]
