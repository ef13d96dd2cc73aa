"""Audit cases of bounds found privately (docs/bounds.md): the whole release, bounds and value.

A pair runs the real pipeline: the query is prepared once, the histogram statement runs once on
each input, and each draw adds noise to every bin, chooses the bounds, and releases the query's
statistics with them (which DuckDB computes once per distinct bounds and input). The output is
(lower bound, upper bound, released value), or ⊥ when no bin passed (the value is then NULL): the
bounds are published in the report, so they are part of what is audited. The claimed (ε, δ) is
the plan's cost, both parts.

The worst case for the histogram is a bin at the threshold τ: x holds τ rows in it, x' one more
(or, under replace, one row moved into it), so that whether the bin passes, and with it the upper
bound and the clipping of the value, moves as much as one protected change can make it. The
negative control cuts the histogram's noise eightfold (the threshold stays): whether that bin
passes then nearly shows whether the row is there, and must be caught.
"""

from __future__ import annotations

import typing as t

import duckdb

from dpsql._accounting.budget import Cost
from dpsql._policy.policy import load_policy
from dpsql._privacy import approx_bounds as ab
from dpsql._privacy.noise import NoiseSource
from dpsql._query.pipeline import prepare
from dpsql._release import found
from dpsql._release.release import release
from dpsql.backends.duck import DuckDBEngine

from .harness import AuditCase, Pair, ScaledNoise, first_value


def found_bounds_pair(sql: str, x: t.Sequence[tuple], y: t.Sequence[tuple], policy: dict, *,
                      search_noise: t.Callable[[NoiseSource], NoiseSource] | None = None) -> Pair:
    """The pair of a query with one aggregate whose bounds are found privately; ``search_noise``
    wraps the noise of the histogram alone (a negative control)."""
    pol = load_policy(policy)
    engines = []
    for rows in (x, y):
        con = duckdb.connect(":memory:")
        con.execute("CREATE TABLE t (x DOUBLE)")
        con.executemany("INSERT INTO t VALUES (?)", [list(r) for r in rows])
        engines.append(DuckDBEngine(con))
    prepared = prepare(sql, pol, engines[0])
    plan = prepared.plan
    assert plan is not None and len(plan.searches) == 1
    search = plan.searches[0]
    counts = [found.counts(*engine.statistics(prepared.search_sql)).get(search.index, {}) for engine in engines]
    statistics: dict[tuple[float, float], t.Any] = {}  # bounds → (plan, rewritten, rows on x, rows on x')

    def with_bounds(bounds: ab.Found) -> t.Any:
        key = (bounds.lower, bounds.upper)
        if key not in statistics:
            p, rewritten = found.replan(plan, pol, {search.index: bounds})
            statistics[key] = (p, rewritten, *(engine.statistics(rewritten.sql) for engine in engines))
        return statistics[key]

    def runner(side: int) -> t.Callable[[NoiseSource], t.Any]:
        def run(noise: NoiseSource) -> tuple:
            bounds = search.choose(counts[side], search_noise(noise) if search_noise else noise)
            p, rewritten, *stats = with_bounds(bounds)
            released = release(p, rewritten, *stats[side], noise)
            found.annotate(p, released)  # as the pipeline: NULL when no bin passed
            value = first_value(released)
            return None if value is None else (bounds.lower, bounds.upper, value)
        return run

    cost = plan.cost
    return Pair(runner(0), runner(1), cost.epsilon, cost.delta,
                f"{sql}  [x: {len(x)} rows, x': {len(y)} rows; τ={search.threshold}, b={search.scale:g}]",
                prepared.search_sql)


def _policy(neighbouring: str = "add_remove") -> dict:
    return {"neighbouring": neighbouring, "budget": {"epsilon": 1e6},
            "tables": {"t": {"privacy_unit": "row", "max_rows_per_unit": 1}}}


def _tau(rows: int, neighbouring: str, epsilon: float) -> int:
    """τ of the search of a query with one aggregate and this ε."""
    return ab.BoundsSearch.build(0, "", rows, neighbouring, Cost(epsilon=ab.SHARE * epsilon)).threshold


def _rows(*groups: tuple[float, int]) -> list[tuple]:
    return [(v,) for v, n in groups for _ in range(n)]


MEAN = "SELECT DP_MEAN(x, bounds => 'auto') FROM t WITH (epsilon = 1)"
SUM = "SELECT DP_SUM(x, bounds => 'auto') FROM t WITH (epsilon = 1)"
TAU = _tau(1, "add_remove", 1.0)
TAU_REPLACE = _tau(1, "replace", 1.0)
# x: a full bin [4, 8) and τ rows in [64, 128); x': one more row there
AT_THRESHOLD = (_rows((5.0, 300), (100.0, TAU)), _rows((5.0, 300), (100.0, TAU + 1)))
# the only bin at the threshold: no bin passes (⊥) or the answer comes with bounds [64, 128]
LONE = (_rows((100.0, TAU)), _rows((100.0, TAU + 1)))
# replace: one row moved from [4, 8) into [64, 128), which holds τ − 1 rows before
MOVED = (_rows((5.0, 301), (100.0, TAU_REPLACE - 1)), _rows((5.0, 300), (100.0, TAU_REPLACE)))


def cases() -> list[AuditCase]:
    return [
        AuditCase("bounds found privately: mean, a bin at the threshold gains a row",
                  lambda: found_bounds_pair(MEAN, *AT_THRESHOLD, _policy()), mechanism="laplace",
                  trials=6_000, thorough_trials=60_000),
        AuditCase("bounds found privately: the only bin at the threshold, ⊥ or an answer",
                  lambda: found_bounds_pair(MEAN, *LONE, _policy()), mechanism="laplace",
                  trials=6_000, thorough_trials=60_000),
        AuditCase("bounds found privately: sum, replace moves a row into a bin at the threshold",
                  lambda: found_bounds_pair(SUM, *MOVED, _policy("replace")), mechanism="laplace",
                  trials=6_000, thorough_trials=60_000),
    ]


def controls() -> list[AuditCase]:
    return [
        AuditCase("bounds found privately, histogram noise cut by 8 (threshold unchanged)",
                  lambda: found_bounds_pair(MEAN, *AT_THRESHOLD, _policy(),
                                            search_noise=lambda n: ScaledNoise(n, 8)),
                  mechanism="laplace", expect="violation", trials=6_000, thorough_trials=20_000),
    ]
