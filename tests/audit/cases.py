"""The audit cases: every mechanism on inputs that are worst cases for its sensitivity.

To audit a new mechanism, append to :data:`CASES` (a few lines)::

    CASES.append(AuditCase(
        "ptr median, add_remove",
        lambda: query_pair("SELECT DP_MEDIAN(x) FROM t WITH (mechanism='ptr', bound=1, ...)",
                           X_ROWS, X_PRIME_ROWS, policy()),
        mechanism="ptr"))

``query_pair`` runs the real pipeline (parse, bind, plan, rewrite, DuckDB, release) and takes the
claimed (ε, δ) from the plan's cost. A ⊥ release (None) is an output like any other: the audit
then also tests the events {out = ⊥} and {out ≠ ⊥}. Pick neighbouring rows that push the
statistic as far as the sensitivity allows: a row at a bound, a tiny n, a key that exists on one
side only. ``test_every_registered_mechanism_is_audited`` fails until a new mechanism has a case.

Table ``t`` has a DOUBLE column ``x`` (bounds from :func:`policy`) and, in grouped cases, a
VARCHAR column ``g``.
"""

from __future__ import annotations

import math
import re
import typing as t

from dpsql.admin import bruteforce

from .cases_float import FLOAT_CASES, FLOAT_CONTROLS
from .harness import ArrayNoise, AuditCase, Pair, ScaledNoise, query_pair, value_of_key, values_of_keys

XG = "x DOUBLE, g VARCHAR"


def policy(
    neighbouring: str = "add_remove",
    lower: float = 0.0,
    upper: float = 100.0,
    keys: list[str] | None = None,
    *,
    unit: str = "row",
    m: int = 1,
) -> dict:
    """A policy for table ``t``: column ``x`` in [lower, upper]; ``g`` with public keys if given."""
    columns: dict = {"x": {"lower": lower, "upper": upper}}
    if keys is not None:
        columns["g"] = {"keys": keys}
    table: dict = {"privacy_unit": unit, "max_rows_per_unit": m, "columns": columns}
    return {"neighbouring": neighbouring, "budget": {"epsilon": 1e6, "delta": 0.5}, "tables": {"t": table}}


def rows(*values: float | None) -> list[tuple]:
    return [(v,) for v in values]


def _q(sql: str, x: list[tuple], y: list[tuple], pol: dict, **kw: t.Any) -> t.Callable[[], Pair]:
    """A case's build function: the pair is made (and DuckDB run) only when the case runs."""
    return lambda: query_pair(sql, x, y, pol, **kw)


CASES: list[AuditCase] = []


def _additive(kind: str, opts: str) -> None:
    """count/sum/mean/var/stddev under both relations, for mechanism ``kind``."""
    add = policy()
    rep = policy("replace")
    w = f"WITH (mechanism = '{kind}', {opts})"
    specs = [
        # add_remove: x' = x plus one row as far out as the bounds allow
        ("count(*), add_remove", f"SELECT DP_COUNT(*) FROM t {w}", rows(1, 2, 3, 4, 5), rows(1, 2, 3, 4, 5, 6), add),
        ("count(x) with NULLs, add_remove", f"SELECT DP_COUNT(x) FROM t {w}", rows(1, None), rows(1, None, 7), add),
        ("sum, row at the upper bound", f"SELECT DP_SUM(x) FROM t {w}", rows(50, 50), rows(50, 50, 100), add),
        ("sum, bounds [-200, 100], row clipped to -200", f"SELECT DP_SUM(x, -200, 100) FROM t {w}",
         rows(0), rows(0, -1e6), add),
        ("mean, n = 1 vs 2", f"SELECT DP_MEAN(x) FROM t {w}", rows(0), rows(0, 100), add),
        ("mean, empty vs one row", f"SELECT DP_MEAN(x) FROM t {w}", rows(), rows(100), add),
        # n large, every value at the centre: the count is nearly exact, the centred sum moves
        # by (U − L)/2, so the mean shows the sum part's whole privacy loss
        ("mean, 200 rows at the centre, one row at U", f"SELECT DP_MEAN(x) FROM t {w}",
         rows(*[50] * 200), rows(*[50] * 200, 100), add),
        ("var, row at the bound", f"SELECT DP_VAR(x) FROM t {w}", rows(0, 100), rows(0, 100, 100), add),
        ("stddev, row at the bound", f"SELECT DP_STDDEV(x) FROM t {w}", rows(0, 0), rows(0, 0, 100), add),
        # replace: one row changed from one extreme to the other
        ("count with WHERE, replace", f"SELECT DP_COUNT(*) FROM t WHERE x > 50 {w}",
         rows(0, 0, 100), rows(0, 100, 100), rep),
        ("sum, replace L → U", f"SELECT DP_SUM(x, -50, 100) FROM t {w}", rows(-50, 0), rows(100, 0), rep),
        # bounds that exclude 0: the row at U becoming NULL moves the sum by 90 > U − L = 73
        ("sum, replace, [17, 90], U → NULL", f"SELECT DP_SUM(x) FROM t {w}", rows(90, 50), rows(None, 50),
         policy("replace", 17.0, 90.0)),
        ("mean, replace, n = 2", f"SELECT DP_MEAN(x) FROM t {w}", rows(0, 0), rows(0, 100), rep),
        ("var, replace, n = 3", f"SELECT DP_VAR(x) FROM t {w}", rows(0, 0, 0), rows(0, 0, 100), rep),
        ("stddev, replace, n = 3", f"SELECT DP_STDDEV(x) FROM t {w}", rows(0, 100, 100), rows(100, 100, 100), rep),
    ]
    for name, sql, x, y, pol in specs:
        CASES.append(AuditCase(f"{kind} {name}", _q(sql, x, y, pol), mechanism=kind))
    # a row moves between two public groups under replace: both counts (sums) move at once
    gpol = policy("replace", keys=["a", "b"])
    CASES.append(AuditCase(
        f"{kind} grouped count, replace moves a row between groups",
        _q(f"SELECT g, DP_COUNT(*) FROM t GROUP BY g {w}", [(0, "a"), (0, "a"), (0, "b")],
           [(0, "a"), (0, "b"), (0, "b")], gpol, schema=XG, pick=values_of_keys(["a", "b"])),
        mechanism=kind))
    CASES.append(AuditCase(
        f"{kind} grouped sum, replace moves a row at U between groups",
        _q(f"SELECT g, DP_SUM(x) FROM t GROUP BY g {w}", [(100, "a"), (0, "b")], [(0, "a"), (100, "b")],
           gpol, schema=XG, pick=values_of_keys(["a", "b"])),
        mechanism=kind))
    # an id privacy unit contributing m = 2 rows
    CASES.append(AuditCase(
        f"{kind} sum, unit of 2 rows (max_rows_per_unit = 2)",
        _q(f"SELECT DP_SUM(x) FROM t {w}", [(1, 50)], [(1, 50), (2, 100), (2, 100)],
           policy(unit="id", m=2), schema="id INTEGER, x DOUBLE"),
        mechanism=kind))


_additive("laplace", "epsilon = 1")
_additive("gaussian", "epsilon = 1, delta = 1e-4")

CASES.append(AuditCase(
    "gaussian sum, rho-zCDP (charged as (ε, δ) at the query's delta)",
    _q("SELECT DP_SUM(x) FROM t WITH (rho = 0.5, delta = 1e-5)", rows(50), rows(50, 100), policy()),
    mechanism="gaussian"))

# --- group keys selected by τ-thresholding (δ > 0, no public domain) -------------------------
_KEYS = "SELECT g, DP_COUNT(*) FROM t GROUP BY g WITH (epsilon = 1, delta = 1e-3)"
CASES.append(AuditCase(
    "τ-thresholded key: count 1 in x, absent in x'",
    _q(_KEYS, [(0, "k"), (0, "o")], [(0, "o")], policy(), schema=XG, pick=value_of_key("k")),
    mechanism="laplace"))
CASES.append(AuditCase(
    "τ-thresholded key: count at the threshold (13 vs 14), present in both",
    _q(_KEYS, [(0, "k")] * 13, [(0, "k")] * 14, policy(), schema=XG, pick=value_of_key("k")),
    mechanism="laplace"))
# The worst case for the discrete tail: δ chosen so that the continuous-tail threshold
# τ − m = b·ln(m/(2δ)) would sit just below an integer (3). There P[Y ≥ 3] = q³/(1 + q),
# q = e^(−1/b), exceeds the continuous ½·q³ by 2/(1 + q) = 1.46 (b = 1); a threshold derived
# from the continuous tail was caught here, and plan.KeySelection uses the discrete tail.
_EDGE_DELTA = 0.5 * math.exp(-3.0) * (1 + 1e-7)
CASES.append(AuditCase(
    "τ-thresholded key at an integer threshold: count 1 in x, absent in x'",
    _q(f"SELECT g, DP_COUNT(*) FROM t GROUP BY g WITH (epsilon = 2, delta = {_EDGE_DELTA!r})",
       [(0, "k")], [], policy(), schema=XG, pick=value_of_key("k")),
    mechanism="laplace",
    trials=60_000,
))

# --- mechanisms that other modules add: audited as soon as they are registered --------------
# Seed 003's median example (Λ = 100): the rank shifts by one when one value changes.
D1 = rows(0, 0, 0, 0, 0, 0, 100, 100, 100, 100)
D2 = rows(0, 0, 0, 0, 0, 100, 100, 100, 100, 100)
CASES += [
    AuditCase("exponential median, seed 003's d1/d2, replace",
              _q("SELECT DP_MEDIAN(x) FROM t WITH (mechanism = 'exponential', epsilon = 1)", D1, D2,
                 policy("replace")), mechanism="exponential"),
    AuditCase("exponential median, add_remove, x' adds a row at U",
              _q("SELECT DP_MEDIAN(x) FROM t WITH (mechanism = 'exponential', epsilon = 1)",
                 rows(0, 0, 0, 100, 100), rows(0, 0, 0, 100, 100, 100), policy()), mechanism="exponential"),
    AuditCase("exponential quantile 0.9, add_remove",
              _q("SELECT DP_QUANTILE(x, 0.9) FROM t WITH (mechanism = 'exponential', epsilon = 1)",
                 rows(10, 20, 30, 40, 50, 60, 70, 80, 90), rows(10, 20, 30, 40, 50, 60, 70, 80, 90, 0),
                 policy()), mechanism="exponential", trials=4_000, thorough_trials=30_000),
    AuditCase("saa avg over 4 chunks, x' adds a row at U",
              _q("SELECT DP_AGG(avg(x), 0, 100) FROM t WITH (mechanism = 'saa', chunks = 4, epsilon = 1)",
                 rows(0, 1, 2, 3, 4, 5, 6, 7), rows(0, 1, 2, 3, 4, 5, 6, 7, 100), policy()),
              mechanism="saa"),
    AuditCase("saa avg, widened Winsorized mean over 8 chunks, x' adds a row at U",
              _q("SELECT DP_AGG(avg(x), 0, 100) FROM t "
                 "WITH (mechanism = 'saa', chunks = 8, aggregator = 'winsorized', epsilon = 1)",
                 rows(*range(16)), rows(*range(16), 100), policy()),
              mechanism="saa", trials=4_000, thorough_trials=30_000),
    AuditCase("saa max over 3 chunks, replace",
              _q("SELECT DP_AGG(max(x), 0, 100) FROM t WITH (mechanism = 'saa', chunks = 3, epsilon = 1)",
                 rows(0, 1, 2, 3, 4, 5), rows(0, 1, 2, 3, 4, 100), policy("replace")),
              mechanism="saa"),
]


# --- negative controls: broken mechanisms the audit must catch ------------------------------


def _ls_median_pair(big: float = 1000.0, epsilon: float = 1.0) -> Pair:
    """Seed 003: median + Lap(LS/ε) on d1/d2, LS by brute force over neighbours (replace).

    d1 = {0×6, Λ×4}, d2 = {0×5, Λ×5}: both medians are 0, LS(d1) = 0 (no noise at all) and
    LS(d2) = Λ. The output is exactly 0 on d1 and positive half the time on d2.
    """
    universe = (0.0, big)
    d1 = [0.0] * 6 + [big] * 4
    d2 = [0.0] * 5 + [big] * 5

    def run(data: list[float]):
        med = bruteforce.value("median", data, universe)
        ls = bruteforce.local_sensitivity("median", data, universe, "replace")

        def release(noise):
            return med if ls == 0 else noise.laplace(med, ls / epsilon)

        return release

    return Pair(run(d1), run(d2), epsilon, 0.0, "median + Lap(LS/ε), seed 003's d1 vs d2 (Λ = 1000)")


CONTROLS: list[AuditCase] = [
    AuditCase("laplace sum with noise scaled down by 3",
              _q("SELECT DP_SUM(x) FROM t WITH (epsilon = 1)", rows(50, 50), rows(50, 50, 100), policy()),
              mechanism="laplace", expect="violation", noise=lambda n: ScaledNoise(n, 3)),
    AuditCase("laplace count with noise scaled down by 3",
              _q("SELECT DP_COUNT(*) FROM t WITH (epsilon = 1)", rows(1, 2), rows(1, 2, 3), policy()),
              mechanism="laplace", expect="violation", noise=lambda n: ScaledNoise(n, 3)),
    AuditCase("gaussian sum with noise scaled down by 3",
              _q("SELECT DP_SUM(x) FROM t WITH (mechanism = 'gaussian', epsilon = 1, delta = 1e-4)",
                 rows(50), rows(50, 100), policy()),
              mechanism="gaussian", expect="violation", noise=lambda n: ScaledNoise(n, 3)),
    AuditCase("median + Lap(LS/ε) on seed 003's d1/d2", _ls_median_pair, expect="violation"),
]

# --- propose-test-release and smooth sensitivity (mechanisms 'ptr' and 'smooth') ------------
# PTR: ε = 1 gives ε₁ = ε₂ = ½ and, at δ = 1e-3, the test threshold j = 13. D = 12 vs 13 puts
# the ⊥ event exactly at the test's privacy loss; a median moving by b with D far above j puts
# the loss on the release.
_PTR = "WITH (mechanism = 'ptr', bound = {b}, epsilon = 1, delta = 1e-3)"
_SMOOTH = "WITH (mechanism = 'smooth', epsilon = 1, delta = 1e-3)"
# Seed 003's d2 = {0×5, Λ×5} and d2 plus a row at U: the median jumps from 0 to U while
# LS = S = U on both sides, the worst case for the sliding property.
D2_UP = rows(*[0] * 5, *[100] * 6)
CASES += [
    AuditCase("ptr median, D = 12 vs 13 at the threshold (⊥ event), add_remove",
              _q(f"SELECT DP_MEDIAN(x) FROM t {_PTR.format(b=10)}", rows(*[50] * 26),
                 rows(*[50] * 26, 100), policy()), mechanism="ptr"),
    AuditCase("ptr median moves by b, test passes on both sides, add_remove",
              _q(f"SELECT DP_MEDIAN(x) FROM t {_PTR.format(b=1)}", rows(*[19] * 30, *[20] * 30),
                 rows(*[19] * 30, *[20] * 30, 100), policy()), mechanism="ptr"),
    AuditCase("ptr mean, D = 12 vs 13 from n (⊥ event), add_remove",
              _q(f"SELECT DP_MEAN(x) FROM t {_PTR.format(b=5)}", rows(*[50] * 31),
                 rows(*[50] * 31, 100), policy()), mechanism="ptr"),
    AuditCase("ptr mean, replace, one value 0 → 100",
              _q(f"SELECT DP_MEAN(x) FROM t {_PTR.format(b=5)}", rows(*[0] * 40),
                 rows(*[0] * 39, 100), policy("replace")), mechanism="ptr"),
    AuditCase("smooth median, Laplace noise, seed 003's d2 vs d2 plus a row at U",
              _q(f"SELECT DP_MEDIAN(x) FROM t {_SMOOTH}", D2, D2_UP, policy()), mechanism="smooth"),
    AuditCase("smooth median, Laplace noise, spread values, x' adds a row at L",
              _q(f"SELECT DP_MEDIAN(x) FROM t {_SMOOTH}", rows(10, 20, 30, 40, 50), rows(10, 20, 30, 40, 50, 0),
                 policy()), mechanism="smooth", trials=4_000, thorough_trials=30_000),
    AuditCase("smooth mean, Laplace noise, replace, n = 2",
              _q(f"SELECT DP_MEAN(x) FROM t {_SMOOTH}", rows(0, 0), rows(0, 100), policy("replace")),
              mechanism="smooth"),
    AuditCase("smooth quantile 0.25, Laplace noise, value becomes NULL under replace",
              _q(f"SELECT DP_QUANTILE(x, 0.25) FROM t {_SMOOTH}", rows(10, 20, 30, 40),
                 rows(10, 20, 30, None), policy("replace")), mechanism="smooth",
              trials=4_000, thorough_trials=30_000),
    AuditCase("smooth median grouped, replace moves a row between groups",
              _q(f"SELECT g, DP_MEDIAN(x) FROM t GROUP BY g {_SMOOTH}",
                 [(10, "a"), (20, "a"), (30, "b"), (40, "b")], [(10, "a"), (20, "b"), (30, "b"), (40, "b")],
                 policy("replace", keys=["a", "b"]), schema=XG, pick=values_of_keys(["a", "b"])),
              mechanism="smooth", trials=4_000, thorough_trials=30_000),
]
CONTROLS += [
    AuditCase("ptr median with noise scaled down by 3",
              _q(f"SELECT DP_MEDIAN(x) FROM t {_PTR.format(b=1)}", rows(*[19] * 30, *[20] * 30),
                 rows(*[19] * 30, *[20] * 30, 100), policy()),
              mechanism="ptr", expect="violation", noise=lambda n: ScaledNoise(n, 3)),
    AuditCase("smooth median with noise scaled down by 3",
              _q(f"SELECT DP_MEDIAN(x) FROM t {_SMOOTH}", D2, D2_UP, policy()),
              mechanism="smooth", expect="violation", noise=lambda n: ScaledNoise(n, 3)),
]


# --- privacy units of several rows (an id column, max_rows_per_unit = m) ---------------------
# Neighbours differ by ALL rows of one unit: x' adds or removes a whole unit (add_remove), or
# replaces its rows (replace: they may also become NULL or leave the WHERE filter). Every unit
# here holds at most m rows, so the rewrite's truncation to m rows per unit keeps them all; the
# cases further down audit what happens when a unit holds more.
PX = "pid INTEGER, x DOUBLE"


def unit_policy(m: int, neighbouring: str = "add_remove", lower: float = 0.0, upper: float = 100.0,
                keys: list[str] | None = None) -> dict:
    """Table ``t`` with privacy unit ``pid`` and at most ``m`` rows per unit."""
    return policy(neighbouring, lower, upper, keys, unit="pid", m=m)


def unit_rows(*units: t.Sequence[float | None], first: int = 1) -> list[tuple]:
    """Rows (pid, x): the i-th sequence of values is the unit with pid ``first + i``."""
    return [(first + i, v) for i, values in enumerate(units) for v in values]


def _additive_units(kind: str, opts: str) -> None:
    w = f"WITH (mechanism = '{kind}', {opts})"
    specs = [
        ("count(*), a unit of 3 rows added (m = 3)", f"SELECT DP_COUNT(*) FROM t {w}",
         unit_rows([50]), unit_rows([50], [0, 0, 0]), unit_policy(3)),
        ("mean, a unit of 3 rows at U added to 2 rows at L (m = 3)", f"SELECT DP_MEAN(x) FROM t {w}",
         unit_rows([0], [0]), unit_rows([0], [0], [100, 100, 100]), unit_policy(3)),
        ("sum, replace, a unit's 2 rows move from L to U (m = 2)", f"SELECT DP_SUM(x, -50, 100) FROM t {w}",
         unit_rows([-50, -50], [0]), unit_rows([100, 100], [0]), unit_policy(2, "replace")),
        ("count with WHERE, replace, a unit's 2 rows leave the filter (m = 2)",
         f"SELECT DP_COUNT(*) FROM t WHERE x > 50 {w}",
         unit_rows([100, 100], [0]), unit_rows([0, 0], [0]), unit_policy(2, "replace")),
    ]
    for name, sql, x, y, pol in specs:
        CASES.append(AuditCase(f"{kind} {name}", _q(sql, x, y, pol, schema=PX), mechanism=kind))


_additive_units("laplace", "epsilon = 1")
_additive_units("gaussian", "epsilon = 1, delta = 1e-4")

_EXP = "WITH (mechanism = 'exponential', epsilon = 1)"
# Values inside (L, U): the draw picks an interval between consecutive values, so data at L and
# U only would leave a single interval and nothing to tell apart.
SPREAD = [[10], [20], [30], [40], [50]]
CASES += [
    # a unit of m rows at one end moves the median's rank by m/2: Δu = m·½
    AuditCase("exponential median, a unit of 2 rows near U added (m = 2)",
              _q(f"SELECT DP_MEDIAN(x) FROM t {_EXP}", unit_rows(*SPREAD), unit_rows(*SPREAD, [90, 90]),
                 unit_policy(2), schema=PX), mechanism="exponential"),
    AuditCase("exponential median, replace, a unit's 2 rows move from near L to near U (m = 2)",
              _q(f"SELECT DP_MEDIAN(x) FROM t {_EXP}", unit_rows([5, 5], *SPREAD), unit_rows([90, 90], *SPREAD),
                 unit_policy(2, "replace"), schema=PX), mechanism="exponential"),
    # p = 0 with ε' = ε/Δu: under replace a unit's rows move in opposite directions
    AuditCase("exponential min, replace, a unit's rows move apart, one down near L (m = 2)",
              _q(f"SELECT DP_MIN(x) FROM t {_EXP}", unit_rows([50, 50], [60], [70]),
                 unit_rows([10, 95], [60], [70]), unit_policy(2, "replace"), schema=PX),
              mechanism="exponential"),
]

_PTR_U = "WITH (mechanism = 'ptr', bound = {b}, epsilon = 1, delta = 1e-3)"
CASES += [
    # j = 13; D in units is the pair-form distance // 2: 53 rows at 50 give D = 13, a unit of
    # two rows at L brings it to 12 (the ⊥ event at the threshold)
    AuditCase("ptr median, unit D = 13 vs 12 at the threshold (⊥ event), a unit of 2 rows at L (m = 2)",
              _q(f"SELECT DP_MEDIAN(x) FROM t {_PTR_U.format(b=10)}", unit_rows(*[[50, 50]] * 26, [50]),
                 unit_rows(*[[50, 50]] * 26, [50], [0, 0]), unit_policy(2), schema=PX), mechanism="ptr"),
    # the median moves by b = 1 when a unit of two rows at U arrives; D = 19 on both sides
    AuditCase("ptr median moves by b, a unit of 2 rows at U, test passes on both sides (m = 2)",
              _q(f"SELECT DP_MEDIAN(x) FROM t {_PTR_U.format(b=1)}", unit_rows(*[[19, 19]] * 20, *[[20, 20]] * 20),
                 unit_rows(*[[19, 19]] * 20, *[[20, 20]] * 20, [100, 100]), unit_policy(2), schema=PX),
              mechanism="ptr"),
    # mean from n: least k with 2·100/max(n − 2k, 3) > 5 is 12 at n = 63 and 13 at n = 65
    AuditCase("ptr mean, unit D = 12 vs 13 from n (⊥ event), a unit of 2 rows at U (m = 2)",
              _q(f"SELECT DP_MEAN(x) FROM t {_PTR_U.format(b=5)}", unit_rows(*[[50, 50]] * 31, [50]),
                 unit_rows(*[[50, 50]] * 31, [50], [100, 100]), unit_policy(2), schema=PX), mechanism="ptr"),
    AuditCase("ptr mean, replace, a unit's 2 rows move from L to U (m = 2)",
              _q(f"SELECT DP_MEAN(x) FROM t {_PTR_U.format(b=5)}", unit_rows(*[[0, 0]] * 40),
                 unit_rows([100, 100], *[[0, 0]] * 39), unit_policy(2, "replace"), schema=PX), mechanism="ptr"),
]

_SMOOTH_U = "WITH (mechanism = 'smooth', epsilon = 1, delta = 1e-3)"
# seed 003's d2 = {0×5, Λ×5} in units of one row, and d2 plus a unit of two rows at U: the median
# jumps from 0 to U
D2_UNITS = unit_rows(*[[0]] * 5, *[[100]] * 5)
D2_UNITS_UP = unit_rows(*[[0]] * 5, *[[100]] * 5, [100, 100])
CASES += [
    AuditCase("smooth median, Laplace noise, d2 vs d2 plus a unit of 2 rows at U (m = 2)",
              _q(f"SELECT DP_MEDIAN(x) FROM t {_SMOOTH_U}", D2_UNITS, D2_UNITS_UP, unit_policy(2), schema=PX),
              mechanism="smooth"),
    AuditCase("smooth mean, Laplace noise, replace, a unit's 2 rows move from L to U (m = 2)",
              _q(f"SELECT DP_MEAN(x) FROM t {_SMOOTH_U}", unit_rows([0, 0], [0]), unit_rows([100, 100], [0]),
                 unit_policy(2, "replace"), schema=PX), mechanism="smooth"),
    AuditCase("smooth quantile 0.25, Laplace noise, replace, a unit's 2 rows become NULL (m = 2)",
              _q(f"SELECT DP_QUANTILE(x, 0.25) FROM t {_SMOOTH_U}", unit_rows([10, 20], [30], [40]),
                 unit_rows([None, None], [30], [40]), unit_policy(2, "replace"), schema=PX),
              mechanism="smooth", trials=4_000, thorough_trials=30_000),
]


def _other_chunk(pid: int, chunks: int) -> int:
    """An id whose rows fall into another of the ``chunks`` chunks than ``pid``'s (DuckDB's hash)."""
    import duckdb

    con = duckdb.connect(":memory:")
    try:
        home = con.execute(f"SELECT HASH({pid}::INTEGER) % {chunks}").fetchone()[0]
        return next(v for v in range(pid + 1, pid + 100)
                    if con.execute(f"SELECT HASH({v}::INTEGER) % {chunks}").fetchone()[0] != home)
    finally:
        con.close()


def _saa_replace_pair() -> Pair:
    """Replace: unit 1's rows (at L) give way to another id's rows at U, in another chunk."""
    other = _other_chunk(1, 4)
    rest = [(v, x) for v, x in unit_rows(*[[x] for x in range(2, 9)], first=200)]
    return query_pair("SELECT DP_AGG(avg(x), 0, 100) FROM t WITH (mechanism = 'saa', chunks = 4, epsilon = 1)",
                      [(1, 0.0), (1, 0.0), *rest], [(other, 100.0), (other, 100.0), *rest],
                      unit_policy(2, "replace"), schema=PX)


CASES += [
    AuditCase("saa avg over 4 chunks, a unit of 3 rows at U added (m = 3)",
              _q("SELECT DP_AGG(avg(x), 0, 100) FROM t WITH (mechanism = 'saa', chunks = 4, epsilon = 1)",
                 unit_rows(*[[x] for x in range(8)]), unit_rows(*[[x] for x in range(8)], [100, 100, 100]),
                 unit_policy(3), schema=PX), mechanism="saa"),
    AuditCase("saa avg over 4 chunks, replace, a unit's 2 rows give way to another id's at U (m = 2)",
              _saa_replace_pair, mechanism="saa"),
    # with GROUP BY a unit's rows can fall into two groups: one chunk changes in each
    AuditCase("saa avg grouped, a unit's 2 rows at U in two groups (m = 2)",
              _q("SELECT g, DP_AGG(avg(x), 0, 100) FROM t GROUP BY g WITH (mechanism = 'saa', chunks = 4, epsilon = 1)",
                 [(i, float(i), "a" if i % 2 else "b") for i in range(1, 9)],
                 [(i, float(i), "a" if i % 2 else "b") for i in range(1, 9)] + [(9, 100.0, "a"), (9, 100.0, "b")],
                 unit_policy(2, keys=["a", "b"]), schema=f"{PX}, g VARCHAR", pick=values_of_keys(["a", "b"])),
              mechanism="saa", trials=4_000, thorough_trials=30_000),
]


# --- a unit holding MORE than m rows: truncation is what keeps the promise -------------------
# x' adds a unit of 6 (8) rows while the policy says m = 2. With the rewrite's truncation to m
# rows per unit the release is private; computed without it (the negative controls: the
# statistics come from the SQL of a row-level policy that protects groups of m rows, so every
# row of the unit is read while the noise is calibrated for m) the audit must catch it.
BIG_UNIT_SUM = ("SELECT DP_SUM(x) FROM t WITH (epsilon = 1)", unit_rows([50]), unit_rows([50], [100] * 6))
BIG_UNIT_MEDIAN = (f"SELECT DP_MEDIAN(x) FROM t {_EXP}", unit_rows(*SPREAD), unit_rows(*SPREAD, [90] * 8))


def rows_policy_for(m: int) -> dict:
    """Row-level privacy protecting groups of m rows: the same calibration as units of m rows
    without any truncation (nothing bounds a unit's rows)."""
    pol = policy()
    pol["group_size"] = m
    return pol


def truncates(sql: str) -> bool:
    """Whether statistics SQL truncates each unit's rows: ROW_NUMBER() over the unit ``__u``."""
    return re.search(r"ROW_NUMBER\s*\(\s*\)\s*OVER\s*\([^)]*PARTITION\s+BY[^)]*__u\b", sql, re.I) is not None


def _truncated(sql: str, x: list[tuple], y: list[tuple], m: int) -> t.Callable[[], Pair]:
    def build() -> Pair:
        pair = query_pair(sql, x, y, unit_policy(m), schema=PX)
        if not truncates(pair.sql):
            import pytest

            pytest.skip("the rewritten SQL does not truncate units to max_rows_per_unit rows yet")
        return pair

    return build


CASES += [
    AuditCase("laplace sum, a unit of 6 rows at U, m = 2, truncated in SQL",
              _truncated(*BIG_UNIT_SUM, 2), mechanism="laplace"),
    AuditCase("exponential median, a unit of 8 rows at U, m = 2, truncated in SQL",
              _truncated(*BIG_UNIT_MEDIAN, 2), mechanism="exponential"),
]
CONTROLS += [
    AuditCase("laplace sum, a unit of 6 rows at U, m = 2, without truncation",
              _q(*BIG_UNIT_SUM, unit_policy(2), schema=PX, statistics_policy=rows_policy_for(2)),
              mechanism="laplace", expect="violation"),
    AuditCase("exponential median, a unit of 8 rows at U, m = 2, without truncation",
              _q(*BIG_UNIT_MEDIAN, unit_policy(2), schema=PX, statistics_policy=rows_policy_for(2)),
              mechanism="exponential", expect="violation"),
]


# --- joins and flat maps (docs/joins.md): the bound enforced in SQL keeps the promise ---------
# Each control computes the statistics with the SQL of the same query under a looser bound (the
# public table or the joined side keeps more rows per key, or each list more elements), while the
# noise is calibrated for the tight one: the audit must catch it.


def join_policy() -> dict:
    pol = policy()
    pol["tables"]["d"] = {"public": True}
    pol["tables"]["u"] = {"privacy_unit": "row"}
    return pol


JOIN_SCHEMA = "x DOUBLE, k INTEGER"
PUBLIC_D = {"d": ("k INTEGER", [(1,)] * 3 + [(2,)]), "u": ("k INTEGER", [])}
PRIVATE_U = {"d": ("k INTEGER", []), "u": ("k INTEGER", [(1,)] * 20)}
PUBLIC_JOIN = "SELECT DP_SUM(x) FROM t JOIN d ON t.k = d.k WITH (epsilon = 1{})"
PRIVATE_JOIN = "SELECT DP_SUM(x) FROM t JOIN u ON t.k = u.k WITH (epsilon = 1, join_truncation = 'drop_excess({})')"
FLAT_MAP = "SELECT DP_SUM(x) FROM t CROSS JOIN UNNEST(string_split(l, ',')) AS s(e) WITH (epsilon = 1, max_rows = {})"
LISTS = "x DOUBLE, l VARCHAR"

CASES += [
    AuditCase("laplace sum over a public join, key 1 three times in the public table",
              _q(PUBLIC_JOIN.format(""), [(50.0, 2)], [(50.0, 2), (100.0, 1)], join_policy(),
                 schema=JOIN_SCHEMA, extra=PUBLIC_D), mechanism="laplace"),
    AuditCase("laplace sum over a private join, drop_excess(1) on both sides",
              _q(PRIVATE_JOIN.format(1), [], [(100.0, 1)], join_policy(), schema=JOIN_SCHEMA, extra=PRIVATE_U),
              mechanism="laplace"),
    AuditCase("laplace sum over a flat map, max_rows = 2, a list of 6",
              _q(FLAT_MAP.format(2), [], [(100.0, "a,b,c,d,e,f")], join_policy(), schema=LISTS),
              mechanism="laplace"),
]
CONTROLS += [
    AuditCase("laplace sum over a public join, calibrated for 1 row per key, the SQL keeps 3",
              _q(PUBLIC_JOIN.format(", max_join_rows = 1"), [(50.0, 2)], [(50.0, 2), (100.0, 1)], join_policy(),
                 schema=JOIN_SCHEMA, extra=PUBLIC_D, statistics_query=PUBLIC_JOIN.format("")),
              mechanism="laplace", expect="violation"),
    AuditCase("laplace sum over a private join, calibrated for drop_excess(1), the SQL keeps 50",
              _q(PRIVATE_JOIN.format(1), [], [(100.0, 1)], join_policy(), schema=JOIN_SCHEMA, extra=PRIVATE_U,
                 statistics_query=PRIVATE_JOIN.format(50)),
              mechanism="laplace", expect="violation"),
    AuditCase("laplace sum over a flat map, calibrated for max_rows = 2, the SQL keeps 6",
              _q(FLAT_MAP.format(2), [], [(100.0, "a,b,c,d,e,f")], join_policy(), schema=LISTS,
                 statistics_query=FLAT_MAP.format(6)),
              mechanism="laplace", expect="violation"),
]

# --- the release's array sampler of Laplace noise (dpsql.privacy.dlaplace) ---------------------
# Columns of Laplace noise (grouped releases, key selection) come from the array sampler (inversion);
# these cases release through it, float (on the grid) and integer, and with the scale cut by 3.
CASES += [
    AuditCase("laplace sum, noise from the array sampler",
              _q("SELECT DP_SUM(x) FROM t WITH (epsilon = 1)", rows(50, 50), rows(50, 50, 100), policy()),
              mechanism="laplace", noise=ArrayNoise),
    AuditCase("laplace count, integer noise from the array sampler",
              _q("SELECT DP_COUNT(*) FROM t WITH (epsilon = 1)", rows(1, 2), rows(1, 2, 3), policy()),
              mechanism="laplace", noise=ArrayNoise),
    AuditCase("τ-thresholded key, noisy counts from the array sampler: count 1 in x, absent in x'",
              _q(_KEYS, [(0, "k"), (0, "o")], [(0, "o")], policy(), schema=XG, pick=value_of_key("k")),
              mechanism="laplace", noise=ArrayNoise),
]
CONTROLS += [
    AuditCase("laplace count, array sampler with noise scaled down by 3",
              _q("SELECT DP_COUNT(*) FROM t WITH (epsilon = 1)", rows(1, 2), rows(1, 2, 3), policy()),
              mechanism="laplace", expect="violation", noise=lambda n: ScaledNoise(ArrayNoise(n), 3)),
]

# --- sums with bounds far from zero relative to their width (tests/audit/cases_float.py) --------
CASES += FLOAT_CASES
CONTROLS += FLOAT_CONTROLS
