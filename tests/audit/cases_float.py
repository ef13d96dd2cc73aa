"""Audit cases for sums whose bounds lie far from zero relative to their width.

A floating-point SUM of 10,000 values near 1e9 rounds in steps of 2^-9 ≈ 0.002, four times the
half-width 0.0005 of bounds [1e9, 1e9 + 0.001]: centred afterwards as SUM(v) − c·n, the sum moved
by 0.00195 when one row at U was added, and releases at ε = 1 showed a privacy loss near 2
(Casacuberta, Shoemate, Vadhan, Wagaman, CCS 2022; issue 27). dpsql now sums integers on a
public grid (:mod:`dpsql.mechanisms.fixed`). The cases release through the real pipeline, with
the audit's fast seeded noise and with the production sampler ``SecureNoise``; each negative
control releases the same plan, with the same noise, from the statistics the float sums give
(the computation dpsql used before), put on the grid, and must be caught.
"""

from __future__ import annotations

import typing as t

import duckdb
import numpy as np

from dpsql._policy.policy import load_policy
from dpsql._privacy.noise import NoiseSource, SecureNoise
from dpsql._query.pipeline import prepare
from dpsql._release.release import release
from dpsql.backends.duck import DuckDBEngine
from dpsql.mechanisms.batch import Groups

from .harness import AuditCase, Pair, first_value, query_pair

MEAN_BOUNDS = (1e9, 1e9 + 0.001)
VAR_BOUNDS = (1e8, 1e8 + 2.0)
#: 9,999 rows spread over the bounds, and the neighbour with one more row at U
MEAN_X = [(1e9 + ((i * 7919) % 10007) / 10007 * 0.001,) for i in range(9999)]
MEAN_Y = [*MEAN_X, (MEAN_BOUNDS[1],)]
VAR_X = [(1e8 + 0.5 * (i % 5),) for i in range(9999)]
VAR_Y = [*VAR_X, (VAR_BOUNDS[1],)]
MEAN_SQL = "SELECT DP_MEAN(x) FROM t WITH (epsilon = 1)"
VAR_SQL = "SELECT DP_VAR(x) FROM t WITH (epsilon = 1)"


def far_policy(lower: float, upper: float) -> dict:
    """Table ``t``, one DOUBLE column ``x`` in [lower, upper], rows as units, add_remove."""
    return {"neighbouring": "add_remove", "budget": {"epsilon": 1e6, "delta": 0.5},
            "tables": {"t": {"privacy_unit": "row", "columns": {"x": {"lower": lower, "upper": upper}}}}}


def float_statistics(values: np.ndarray, lower: float, upper: float) -> dict[str, float]:
    """n, Σ(v − c) and Σ(v − c)² the way dpsql computed them before exact sums: DuckDB's float
    SUM(v) and SUM(v·v) of the clipped values, centred afterwards in float64 (SUM(v) − c·n)."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t (x DOUBLE)")
    con.execute("INSERT INTO t SELECT * FROM (SELECT UNNEST(?::DOUBLE[]))", [values.tolist()])
    n, s, q = con.execute(f"SELECT COUNT(v), SUM(v), SUM(v * v) FROM (SELECT LEAST(GREATEST(x, {lower!r}), "
                          f"{upper!r}) AS v FROM t)").fetchone()
    con.close()
    c = (lower + upper) / 2.0
    n, s, q = np.float64(n), np.float64(s), np.float64(q)
    return {"n": float(n), "s1": float(s - c * n), "s2": float(max(q - 2 * c * s + c * c * n, 0.0))}


def _statistics(p: t.Any, rw: t.Any, rows: list[tuple], bounds: tuple[float, float], floats: bool) -> dict:
    """The statistics row of the plan's one aggregate on ``rows``: from its rewritten statement
    (exact), or from float sums put on its grid (the integers the exact SQL would return for them)."""
    if not floats:
        con = duckdb.connect()
        con.execute("CREATE TABLE t (x DOUBLE)")
        con.executemany("INSERT INTO t VALUES (?)", [list(r) for r in rows])
        names, out = DuckDBEngine(con).statistics(rw.sql.replace('"memory"."main".', ""))
        con.close()
        return {name: (out.values(i)[0].item() if hasattr(out, "values") else out[0][i]) for i, name in enumerate(names)}
    fixed = p.prepared[0].fixed
    assert fixed is not None and not fixed.integer and fixed.low == -fixed.high  # centred in SQL
    unit = float(fixed.unit)
    f = float_statistics(np.array([r[0] for r in rows]), *bounds)
    shift = float(fixed.centre) - (bounds[0] + bounds[1]) / 2.0  # Σ(v − a) = Σ(v − c) − n·(a − c)
    parts = {"n": int(f["n"]), "s": round((f["s1"] - f["n"] * shift) / unit), "q": round(f["s2"] / unit / unit)}
    return {col: parts[name] for (_, name), col in rw.columns.items()}


def sum_pair(sql: str, x: list[tuple], y: list[tuple], bounds: tuple[float, float], *, floats: bool = False,
             part: str | None = None) -> Pair:
    """The plan of ``sql`` released on ``x`` and ``y``: its output, or with ``part`` that noisy part
    alone (at the part's share of ε); the statistics exact or, with ``floats`` (negative control),
    from float sums: everything but the summation is the current release."""
    prepared = prepare(sql, load_policy(far_policy(*bounds)), DuckDBEngine(_empty()))
    p, rw = prepared.plan, prepared.rewritten
    assert p is not None and rw is not None
    prep = p.prepared[0]

    def runner(rows: list[tuple]) -> t.Callable[[NoiseSource], t.Any]:
        stats = _statistics(p, rw, rows, bounds, floats)
        names, row = list(stats), tuple(stats.values())
        if part is None:
            return lambda noise: first_value(release(p, rw, names, [row], noise))
        units, exponent = prep.exact_units(Groups.of([{s: stats[c] for (_, s), c in rw.columns.items()}]))[part]
        return lambda noise: float(prep.parts[part].add_exact(units, exponent, noise)[0])

    epsilon = p.cost.epsilon if part is None else prep.parts[part].cost.epsilon
    what = "" if part is None else f", part {part}"
    return Pair(runner(x), runner(y), epsilon, 0.0 if part else p.cost.delta,
                f"{sql}{what}{' from float sums' if floats else ''} [x: {len(x)} rows, x': {len(y)} rows]")


def _empty() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(":memory:")
    con.execute("CREATE TABLE t (x DOUBLE)")
    return con


def _secure(_: NoiseSource) -> NoiseSource:
    return SecureNoise()


FLOAT_CASES: list[AuditCase] = []
FLOAT_CONTROLS: list[AuditCase] = []
for _noise, _label in ((None, ""), (_secure, ", SecureNoise")):
    FLOAT_CASES += [
        AuditCase(f"laplace mean, bounds [1e9, 1e9 + 0.001], 9,999 rows vs a row more at U{_label}",
                  lambda: query_pair(MEAN_SQL, MEAN_X, MEAN_Y, far_policy(*MEAN_BOUNDS)), mechanism="laplace",
                  noise=_noise),
        AuditCase(f"laplace var's Σ(v − c)², bounds [1e8, 1e8 + 2], 9,999 rows vs a row more at U{_label}",
                  lambda: sum_pair(VAR_SQL, VAR_X, VAR_Y, VAR_BOUNDS, part="s2"), mechanism="laplace",
                  noise=_noise),
    ]
    FLOAT_CONTROLS += [
        AuditCase(f"laplace mean from float sums, bounds [1e9, 1e9 + 0.001]{_label}",
                  lambda: sum_pair(MEAN_SQL, MEAN_X, MEAN_Y, MEAN_BOUNDS, floats=True), mechanism="laplace",
                  expect="violation", noise=_noise),
        AuditCase(f"laplace var's Σ(v − c)² from float sums, bounds [1e8, 1e8 + 2]{_label}",
                  lambda: sum_pair(VAR_SQL, VAR_X, VAR_Y, VAR_BOUNDS, floats=True, part="s2"), mechanism="laplace",
                  expect="violation", noise=_noise),
    ]
