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

import duckdb

from dpsql.admin import bruteforce

from . import found_bounds
from .cases_float import FLOAT_CASES, FLOAT_CONTROLS
from .cases_links import LINK_CASES, LINK_CONTROLS
from .cases_q13 import Q13_CASES
from .cases_reweight import REWEIGHT_CASES, REWEIGHT_CONTROLS
from .cases_semijoin import SEMIJOIN_CASES, SEMIJOIN_CONTROLS
from .harness import (
    ArrayNoise,
    AuditCase,
    Pair,
    ScaledNoise,
    query_pair,
    released_of_keys,
    sum_of_keys,
    value_of_key,
    values_of_keys,
)

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
BIG_UNIT_SUM = ("SELECT DP_SUM(x) FROM t WITH (epsilon = 1, contribution = 'truncate')", unit_rows([50]),
                unit_rows([50], [100] * 6))
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


# --- a unit holding more than m rows, bounded by pre-aggregation (dpsql._compile.perunit) -----------
# Each unit's rows are aggregated first and its partials clipped: the sum's total to m·U, the
# mean's sums re-weighted to m rows, a grouped unit's groups to g. The controls compute the
# statistics with a looser bound (m = 6, or g = 3) while the noise is calibrated for the tight one.
_CLIP = "WITH (epsilon = 1, contribution = 'clip'{})"
CLIP_SUM = "SELECT DP_SUM(x) FROM t " + _CLIP
CLIP_MEAN = "SELECT DP_MEAN(x) FROM t " + _CLIP
CLIP_GROUPS = "SELECT g, DP_COUNT(*) FROM t GROUP BY g " + _CLIP
GROUP_ROWS = [(i, 50.0, "a" if i % 2 else "b") for i in range(1, 9)]
SPREAD_UNIT = [(9, 100.0, g) for g in ("a", "b", "c") for _ in range(2)]


def _groups_policy(g: int) -> dict:
    pol = unit_policy(2, keys=["a", "b", "c"])
    pol["tables"]["t"]["max_groups_per_unit"] = g
    return pol


CASES += [
    AuditCase("laplace sum, a unit of 6 rows at U, m = 2, pre-aggregated (its total clipped to 2·U)",
              _q(CLIP_SUM.format(""), unit_rows([50]), unit_rows([50], [100] * 6), unit_policy(2), schema=PX),
              mechanism="laplace"),
    AuditCase("laplace mean, a unit of 6 rows at U added to 2 at L, m = 2, pre-aggregated (re-weighted)",
              _q(CLIP_MEAN.format(""), unit_rows([0], [0]), unit_rows([0], [0], [100] * 6), unit_policy(2),
                 schema=PX), mechanism="laplace"),
    AuditCase("laplace grouped count, a unit of 2 rows in each of 3 groups, g = 1, pre-aggregated (one group kept)",
              _q(CLIP_GROUPS.format(""), GROUP_ROWS, GROUP_ROWS + SPREAD_UNIT, _groups_policy(1),
                 schema=f"{PX}, g VARCHAR", pick=values_of_keys(["a", "b", "c"])),
              mechanism="laplace", trials=4_000, thorough_trials=30_000),
]
CONTROLS += [
    AuditCase("laplace sum, calibrated for m = 2, pre-aggregated with m = 6",
              _q(CLIP_SUM.format(""), unit_rows([50]), unit_rows([50], [100] * 6), unit_policy(2), schema=PX,
                 statistics_query=CLIP_SUM.format(", max_rows_per_unit = 6")),
              mechanism="laplace", expect="violation"),
    AuditCase("laplace grouped count, calibrated for g = 1, pre-aggregated with g = 3",
              _q(CLIP_GROUPS.format(""), GROUP_ROWS, GROUP_ROWS + SPREAD_UNIT, _groups_policy(1),
                 schema=f"{PX}, g VARCHAR", pick=values_of_keys(["a", "b", "c"]),
                 statistics_query=CLIP_GROUPS.format(", max_groups_per_unit = 3")),
              mechanism="laplace", expect="violation", trials=4_000, thorough_trials=30_000),
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

# --- the release's array sampler of Laplace noise (dpsql._privacy.dlaplace) ---------------------
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


# --- contribution bounds across groups, distinct units, private joins, id units through joins,
# --- and key selection with id units ---------------------------------------------------------
# Each pair realises the claimed sensitivity exactly: the case passes only if nothing is
# underestimated, and the control (the noise of a plausible mistake: a bound that forgets the
# groups, a side of the join, or the join itself) shows the pair is tight enough to catch it.
PXG = "pid INTEGER, x DOUBLE, g VARCHAR"
# The controls below are caught with a wide margin at quick mode's 8,000 trials; the thorough run
# gives them 30,000 (the cases keep the full count, whose power is what the cases need).
CONTROL_TRIALS = 30_000
GR_KEYS = list("abcdefghi")
# g = 9 groups × r = 2 rows: L1 multiplier r·g = 18, L2 multiplier r·√g = 6. The unit adds r rows
# to each of the g groups; the sum of the g released counts moves by r·g while its noise has
# standard deviation √g·σ, a shift of r·√g/σ = Δ₂/σ: the Gaussian mechanism's whole privacy loss.
GR_GAUSS = ("SELECT g, DP_COUNT(*) FROM t GROUP BY g WITH (mechanism = 'gaussian', epsilon = 1, delta = 1e-4, "
            "max_groups_per_unit = 9, max_rows_per_group_per_unit = 2)")
GR_X = [(1, 0.0, "a"), (2, 0.0, "c")]
GR_Y = GR_X + [(9, 0.0, key) for key in GR_KEYS for _ in range(2)]
# COUNT(DISTINCT unit) by group keeps COUNT's k (= 2): a unit's k rows in k groups add 1 to each.
DISTINCT_UNITS = "SELECT g, DP_COUNT(DISTINCT pid) FROM t GROUP BY g WITH (epsilon = 1)"
DU_X = [(1, 0.0, "a"), (1, 0.0, "a"), (2, 0.0, "b")]
DU_Y = DU_X + [(9, 0.0, "a"), (9, 0.0, "b")]


def _gr_pair() -> Pair:
    return query_pair(GR_GAUSS, GR_X, GR_Y, unit_policy(2, keys=GR_KEYS), schema=PXG, pick=sum_of_keys(GR_KEYS))


def _distinct_pair() -> Pair:
    return query_pair(DISTINCT_UNITS, DU_X, DU_Y, unit_policy(2, keys=["a", "b"]), schema=PXG,
                      pick=values_of_keys(["a", "b"]))


CASES += [
    AuditCase("gaussian grouped count, a unit of r = 2 rows in each of g = 9 groups (L2 r·√g), summed",
              _gr_pair, mechanism="gaussian"),
    AuditCase("laplace grouped count of distinct units, a unit of k = 2 rows in two groups",
              _distinct_pair, mechanism="laplace"),
]
CONTROLS += [
    AuditCase("gaussian grouped count, g × r unit, noise for one group's r rows (L2 r, not r·√g)",
              _gr_pair, mechanism="gaussian", expect="violation", noise=lambda n: ScaledNoise(n, 3),
              thorough_trials=CONTROL_TRIALS),
    AuditCase("laplace grouped count of distinct units, noise for the ungrouped Δ = 1, not k = 2",
              _distinct_pair, mechanism="laplace", expect="violation", noise=lambda n: ScaledNoise(n, 2),
              thorough_trials=CONTROL_TRIALS),
]


# Private joins of two row-unit tables: rows per change T_l·S_r·R_r + T_r·S_l·R_l. A protected
# change may have rows on both sides, and only then is the sum reached: x' adds one row to t and
# one to u, each under another key, each taking the most the strategy lets it.
def pjoin_policy() -> dict:
    pol = join_policy()
    pol["tables"]["t"]["columns"] = {"x": {"lower": -100.0, "upper": 100.0}}
    return pol


TN = "x DOUBLE, k INTEGER, n INTEGER"
UN = "y DOUBLE, k INTEGER, n INTEGER"
NO_D = {"d": ("k INTEGER", [])}


def _hash_order(schema: str, low: tuple, high: t.Callable[[int], tuple]) -> tuple:
    """``high(n)`` for the first tag n whose row hashes above ``low`` (DuckDB's HASH of the whole
    row, the order truncation keeps rows in): ``low`` is then kept before it."""
    con = duckdb.connect(":memory:")
    try:
        con.execute(f"CREATE TABLE h ({schema})")
        for n in range(1000):
            con.execute("DELETE FROM h")
            marks = ", ".join("?" * len(low))
            con.executemany(f"INSERT INTO h VALUES ({marks})", [list(low), list(high(n))])
            h = dict(con.execute("SELECT n, HASH(__t) FROM h AS __t").fetchall())
            if h[high(n)[-1]] > h[low[-1]]:
                return high(n)
    finally:
        con.close()
    raise AssertionError("no tag orders the hashes")


# drop_non_unique on both sides (T = S = 1): 1·1·1 + 1·1·1 = 2. A second row under key 1 in t and
# under key 2 in u makes both keys non-unique: both joined rows go.
NON_UNIQUE = "SELECT DP_COUNT(*) FROM t JOIN u ON t.k = u.k WITH (epsilon = 1, join_truncation = 'drop_non_unique')"
NU_T, NU_U = [(0.0, 1, 0), (0.0, 2, 0)], [(0.0, 1, 0), (0.0, 2, 0)]


def _non_unique_pair() -> Pair:
    return query_pair(NON_UNIQUE, NU_T, NU_T + [(0.0, 1, 1)], pjoin_policy(), schema=TN,
                      extra={**NO_D, "u": (UN, NU_U)}, extra_prime={"u": (UN, NU_U + [(0.0, 2, 1)])})


# drop_excess(1) on both sides (T = 1, S = 2): 1·2·1 + 1·2·1 = 4. Under key 1 the new row of t
# (x = 100) pushes out the kept one (x = −100); under key 2 the new row of u does the same.
# Each pair's value x + y goes from −100 to 100: the sum moves by 4·100.
EXCESS_BOTH = ("SELECT DP_SUM(t.x + u.y, -100, 100) FROM t JOIN u ON t.k = u.k "
               "WITH (epsilon = 1, join_truncation = 'drop_excess(1)')")


def _excess_both_pair() -> Pair:
    new_t, new_u = (100.0, 1, 0), (100.0, 2, 0)
    old_t = _hash_order(TN, new_t, lambda n: (-100.0, 1, n + 1))
    old_u = _hash_order(UN, new_u, lambda n: (-100.0, 2, n + 1))
    ts, us = [old_t, (0.0, 2, 0)], [(0.0, 1, 0), old_u]
    return query_pair(EXCESS_BOTH, ts, ts + [new_t], pjoin_policy(), schema=TN,
                      extra={**NO_D, "u": (UN, us)}, extra_prime={"u": (UN, us + [new_u])})


# A self join: one row of t is on both sides. drop_non_unique: 1·1·1 + 1·1·1 = 2. The new row
# (k = 1, j = 2) makes left key 1 and right key 2 non-unique: the joined rows (a, b) and (c, d),
# each with a.x = c.x = 100, go.
SELF_JOIN = ("SELECT DP_SUM(a.x) FROM t AS a JOIN t AS b ON a.k = b.j "
             "WITH (epsilon = 1, join_truncation = 'drop_non_unique')")
SELF_X = [(100.0, 1, 10), (0.0, 11, 1), (100.0, 2, 12), (0.0, 13, 2)]


def _self_join_pair() -> Pair:
    return query_pair(SELF_JOIN, SELF_X, SELF_X + [(0.0, 1, 2)], policy(), schema="x DOUBLE, k INTEGER, j INTEGER",
                      extra=NO_D)


# A LEFT join: a left row whose matches all go keeps one row of NULLs, so a right row that
# leaves (or joins) the truncated side alters two joined rows per left row, not one, even under
# drop_non_unique (S = 1), so dpsql._privacy.joins counts S_r = 2 in a LEFT join (this case caught
# the bound that used 1: 6 rows claimed, 10 moved). Left drop_excess(4), right drop_non_unique:
# T_l·2·R_r + T_r·S_l·R_l = 4·2·1 + 1·2·1 = 10. x' adds a second row of u under key 1 (its 4 joined rows lose their match:
# x + y = 100 becomes x − 100 = −100) and a row of t under key 2 that pushes out one of its 4
# kept rows (x + y = 100 becomes −100): the sum moves by 10·100.
LEFT_JOIN = ("SELECT DP_SUM(t.x + COALESCE(u.y, -100), -100, 100) FROM t {} JOIN u ON t.k = u.k "
             "WITH (epsilon = 1, left_truncation = 'drop_excess(4)', right_truncation = 'drop_non_unique')")


def _left_join(join: str = "LEFT") -> t.Callable[[], Pair]:
    def build() -> Pair:
        new_t = (-100.0, 2, 0)
        kept = [_hash_order(TN, new_t, lambda n: (100.0, 2, n + 1))]
        while len(kept) < 4:  # three more rows under key 2; one of the four hashes above the new row
            kept.append((100.0, 2, kept[-1][2] + 1))
        ts = [(0.0, 1, i) for i in range(4)] + kept
        us = [(100.0, 1, 0), (0.0, 2, 0)]
        return query_pair(LEFT_JOIN.format(join), ts, ts + [new_t], pjoin_policy(), schema=TN,
                          extra={**NO_D, "u": (UN, us)}, extra_prime={"u": (UN, us + [(100.0, 1, 1)])},
                          statistics_query=LEFT_JOIN.format("LEFT"))

    return build


CASES.append(AuditCase(
    "laplace sum over a private LEFT join, drop_excess(4) and drop_non_unique, a row added on each side (10 rows)",
    _left_join(), mechanism="laplace"))
CONTROLS.append(AuditCase(
    "laplace sum over a private LEFT join, noise for the inner join's rows (6, not 10)",
    _left_join("INNER"), mechanism="laplace", expect="violation", thorough_trials=CONTROL_TRIALS))

CASES += [
    AuditCase("laplace count over a private join, drop_non_unique, a row added on each side (2 rows)",
              _non_unique_pair, mechanism="laplace"),
    AuditCase("laplace sum over a private join, drop_excess(1), a row added on each side pushes one out (4 rows)",
              _excess_both_pair, mechanism="laplace"),
    AuditCase("laplace sum over a self join, drop_non_unique, one row on both sides (2 rows)",
              _self_join_pair, mechanism="laplace"),
]
CONTROLS += [
    AuditCase("laplace count over a private join, drop_non_unique, noise for a change on one side (1 row)",
              _non_unique_pair, mechanism="laplace", expect="violation", noise=lambda n: ScaledNoise(n, 2),
              thorough_trials=CONTROL_TRIALS),
    AuditCase("laplace sum over a private join, drop_excess(1), noise for stability 1 (2 rows, not 4)",
              _excess_both_pair, mechanism="laplace", expect="violation", noise=lambda n: ScaledNoise(n, 2),
              thorough_trials=CONTROL_TRIALS),
    AuditCase("laplace sum over a self join, drop_non_unique, noise for a change on one side (1 row)",
              _self_join_pair, mechanism="laplace", expect="violation", noise=lambda n: ScaledNoise(n, 2),
              thorough_trials=CONTROL_TRIALS),
]


# An id unit through a join: tables t and u share the unit (unit_name), the join equates it, and
# the rewrite truncates each unit's rows after the join. x' adds a unit with 3 rows in each
# table: 9 joined rows, of which k = 2 (at U) are kept. The control computes the statistics with
# max_rows_per_unit = 9 (all of them) while the noise is for k = 2.
def id_join_policy() -> dict:
    pol = unit_policy(2)
    pol["tables"]["t"]["unit_name"] = "person"
    pol["tables"]["u"] = {"privacy_unit": "pid", "max_rows_per_unit": 2, "unit_name": "person"}
    return pol


ID_JOIN = "SELECT DP_SUM(t.x) FROM t JOIN u ON t.pid = u.pid WITH (epsilon = 1{})"
ID_U = "pid INTEGER, w INTEGER"
ID_X, ID_XU = [(1, 50.0)], [(1, 0)]
ID_Y, ID_YU = ID_X + [(9, 100.0)] * 3, ID_XU + [(9, 1), (9, 2), (9, 3)]


def _id_join(statistics_query: str | None = None) -> t.Callable[[], Pair]:
    return lambda: query_pair(ID_JOIN.format(""), ID_X, ID_Y, id_join_policy(), schema=PX,
                              extra={"u": (ID_U, ID_XU)}, extra_prime={"u": (ID_U, ID_YU)},
                              statistics_query=statistics_query)


CASES.append(AuditCase("laplace sum over a join of two tables of one id unit, a unit of 3 × 3 joined rows (k = 2)",
                       _id_join(), mechanism="laplace"))
CONTROLS.append(AuditCase("laplace sum over a join of two tables of one id unit, noise for k = 2, the SQL keeps 9",
                          _id_join(ID_JOIN.format(", max_rows_per_unit = 9")), mechanism="laplace",
                          expect="violation", thorough_trials=CONTROL_TRIALS))


# τ-selected keys with an id unit: a unit reaching g = 3 groups (2 rows in each) that x' does not
# have. Each key counts units, so each of the three counts is 1, and each key is released with
# probability at most δ/g. δ is chosen, as in the integer-threshold case above, so that τ − 1
# sits just below an integer, where the discrete tail is widest: the three keys together are
# released with probability just below δ (≈ 0.03). The control selects keys for g = 1 (noise and
# τ for a unit in one group) while the SQL keeps the unit's three groups: about 3δ.
def _tau_units_delta(epsilon: float = 1.0, groups: int = 3, s: int = 24) -> float:
    b = groups / (epsilon / 2)  # key selection spends half of ε; Δ = g under add_remove
    q = math.exp(-1.0 / b)
    return groups * q**s / (1 + q) * (1 + 1e-7)


TAU_UNITS = "SELECT g, DP_COUNT(*) FROM t GROUP BY g WITH (epsilon = 1, delta = {!r}, max_groups_per_unit = {})"
TAU_UNIT_ROWS = [(9, 0.0, key) for key in ("p", "q", "r") for _ in range(2)]


def _tau_units(claimed_groups: int) -> t.Callable[[], Pair]:
    delta = _tau_units_delta()
    return lambda: query_pair(TAU_UNITS.format(delta, claimed_groups), TAU_UNIT_ROWS, [], unit_policy(2),
                              schema=PXG, pick=released_of_keys(["p", "q", "r"]),
                              statistics_query=TAU_UNITS.format(delta, 3))


CASES.append(AuditCase("τ-thresholded keys, id unit: a unit in g = 3 groups absent from x', τ − 1 just below an integer",
                       _tau_units(3), mechanism="laplace"))
CONTROLS.append(AuditCase("τ-thresholded keys, id unit: selection for g = 1, the SQL keeps the unit's 3 groups",
                          _tau_units(1), mechanism="laplace", expect="violation",
                          thorough_trials=CONTROL_TRIALS))


# --- bounds found privately: the whole release, a bin at the threshold (tests/audit/found_bounds.py)
CASES += found_bounds.cases()
CONTROLS += found_bounds.controls()


# --- sums with bounds far from zero relative to their width (tests/audit/cases_float.py) --------
CASES += FLOAT_CASES + SEMIJOIN_CASES + LINK_CASES + REWEIGHT_CASES + Q13_CASES
CONTROLS += FLOAT_CONTROLS + SEMIJOIN_CONTROLS + LINK_CONTROLS + REWEIGHT_CONTROLS
