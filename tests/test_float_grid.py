"""Floating point (SPEC §4.6, Mironov 2012): released values lie on a grid fixed by the noise
scale alone, so their low-order bits cannot tell two inputs apart, however close they are."""

from __future__ import annotations

import math

import pytest

import dpsql
from dpsql._privacy.noise import SecureNoise, SeededNoise, grid_exponent

# reuse off: every release below must draw fresh noise
POLICY = {"budget": {"epsilon": 1e9, "delta": 0.5}, "defaults": {"reuse_releases": "off"}, "tables": {"t": {"columns": {"x": {"lower": 0, "upper": 10}}}}}
# Two inputs whose sums differ by 1e-9, far below the grid step 2^k ≈ 7.5e-9 (scale ≈ 10).
INPUTS = {"x": [1.0, 2.0, 3.0], "x'": [1.0, 2.0, 3.0 + 1e-9]}
QUERIES = [
    "SELECT DP_SUM(x) FROM t WITH (epsilon = 1)",
    "SELECT DP_SUM(x) FROM t WITH (mechanism = 'gaussian', epsilon = 1, delta = 1e-6)",
]


def _connect(values: list[float], noise) -> dpsql.Connection:  # type: ignore[no-untyped-def]
    def setup(con) -> None:  # type: ignore[no-untyped-def]
        con.execute("CREATE TABLE t (x DOUBLE)")
        con.executemany("INSERT INTO t VALUES (?)", [[v] for v in values])

    return dpsql.connect(":memory:", POLICY, setup=setup, noise=noise)


def _on_grid(value: float, k: int) -> bool:
    scaled = math.ldexp(value, -k)
    return scaled == math.floor(scaled)


def _releases(con: dpsql.Connection, sql: str, n: int) -> tuple[list[float], float]:
    values, scales = [], set()
    for _ in range(n):
        result = con.sql(sql)
        values.append(result.fetchone()[0])
        scales.add(result.report[0].scale)
    assert len(scales) == 1
    return values, scales.pop()


@pytest.mark.parametrize("sql", QUERIES, ids=["laplace", "gaussian"])
def test_secure_releases_lie_on_a_grid_that_ignores_the_input(sql: str) -> None:
    exponents = set()
    for name, values in INPUTS.items():
        con = _connect(values, SecureNoise())
        released, scale = _releases(con, sql, 100)
        k = grid_exponent(scale)
        exponents.add(k)
        off = [v for v in released if not _on_grid(v, k)]
        assert not off, f"{name}: releases off the grid 2^{k}: {off[:3]}"
        assert len(set(released)) > 75  # real noise, not a constant
        con.close()
    assert len(exponents) == 1  # the same grid for both inputs


def test_seeded_noise_is_not_on_the_grid() -> None:
    """The insecure test source's float sampler adds continuous noise: the check above would
    catch a release that used it. (Sums now reach the release as integers on the grid, so a
    query's release is on the grid whatever the source: the control draws from the sampler.)"""
    con = _connect(INPUTS["x"], SeededNoise(3))
    _, scale = _releases(con, QUERIES[0], 1)
    con.close()
    k = grid_exponent(scale)
    noise = SeededNoise(3)
    released = [noise.laplace(0.1, scale) for _ in range(50)]
    assert sum(_on_grid(v, k) for v in released) <= 1
