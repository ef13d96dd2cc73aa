"""Propose-test-release for DP_MEAN, DP_MEDIAN and DP_QUANTILE: ``WITH (mechanism = 'ptr',
bound = b, epsilon = ..., delta = ...)``.

Mechanism (Dwork & Lei 2009; SPEC §4.2, with the corrections below)
    The analyst proposes b, a bound on the local sensitivity of f (the exact mean of the
    clipped values, or their order statistic of rank r = max(1, ⌈p·n⌉), as in
    :mod:`dpsql._privacy.sensitivity`) under the policy's neighbours: how far f can move when one
    privacy unit (up to m rows) changes. D = D(f, x, b), the number of unit steps from x to a
    dataset whose local sensitivity exceeds b, is computed exactly (for the bound A of
    :mod:`dpsql._privacy.sensitivity`), capped at C. With Z a discrete
    Laplace draw, P[Z = z] ∝ e^{−|z|·ε₁}, the result is NULL (⊥) when D + Z < j, and
    f(x) + Lap(b/ε₂) otherwise. The budget is spent either way. The mean is exact: Σd/n of the
    fixed-point integers of :func:`dpsql.mechanisms.datadep.mean_grid` (an exact integer sum in
    SQL, the division in fractions), not a float AVG, whose rounding can exceed b when the bounds
    are far from zero relative to their width (Casacuberta, Shoemate, Vadhan, Wagaman, CCS
    2022); its D uses the width of the integers' range (U − L plus at most one step), and f(x)
    is rounded to the release grid in integers (:mod:`dpsql._privacy.grid`).

Guarantee
    (ε₁ + ε₂, δ)-DP per calibrated step (one unit; one row with GROUP BY and units of several
    rows, see below). Let x, x' be neighbours. If |f(x) − f(x')| ≤ b, the test
    is ε₁-DP (D has sensitivity 1; the geometric mechanism, Ghosh, Roughgarden & Sundararajan
    2009) and the release ε₂-DP (Laplace, with dpsql._privacy.noise's grid slack). Otherwise
    LS(x) > b and LS(x') > b, so D(x) = D(x') = 0, both runs fail the test with the same
    probability and pass with probability P[Z ≥ j] ≤ δ. The threshold j is the least integer
    with P[Z ≥ j] = e^{−jε₁}/(1 + e^{−ε₁}) ≤ δ, at least SPEC's T = ln(1/(2δ))/ε₁ (which makes
    the continuous Laplace tail ½e^{−ε₁T} equal δ). Capping D at C = j + ⌈30/ε₁⌉ keeps it
    1-sensitive and no larger, and a test with D ≥ C fails with probability below e^{−30}.

Corrections to the seeds
    Seed 000 tests against ln(2/δ)/(2ε), which a Laplace(1/ε) draw exceeds at D = 0 with
    probability ½·sqrt(δ/2) ≫ δ: not used. Seed 002 adds the noise to the local sensitivity
    instead of the distance D: not used. Seed 000's D for the mean (first k with
    U/(n − k + 1) ≥ b) is replaced by the correct one below.

Budget split
    ε₁ = ε₂ = ε/2 (shown by EXPLAIN); the whole δ goes to the test. With GROUP BY and units of
    several rows, or under ``replace`` with GROUP BY (s row steps per unit, group privacy, see
    :mod:`dpsql.mechanisms.datadep`), each step gets ε/s and δ/Σ_{i<s} e^{iε/s}, split the same way.

Neighbouring relation and D (m rows per unit, m = 1 for row-level privacy; with GROUP BY and
m > 1, or ``replace`` with GROUP BY, the formulas for m = 1 and row steps)
    mean: from n alone. ``add_remove``: min{k : mW/max(n − km, m + 1) > b}, for m = 1
    min{k : (U − L)/max(n − k, 2) > b}; ``replace`` (the union relation: a value may also become
    NULL or leave the filter): min{k : mW/max(n − km, m) > b}
    (:func:`dpsql._privacy.sensitivity.mean_distance`). Quantiles, in DuckDB: the pair form
    D_pair = min{j − i − 1 : i ≤ r ≤ j, x_j − x_i > b} over the padded order statistics (NRS
    2007, seed 003 slide 18); D = ⌊D_pair/m⌋, the distance in units (A in units is NRS's A at
    (k + 1)m − 1 rows: :mod:`dpsql._privacy.sensitivity`, "Privacy units"). For m = 1 under
    ``add_remove`` D is 0 when the exact LS exceeds b and at least 1 otherwise. Each D is
    :func:`dpsql._privacy.sensitivity.distance_to_instability`'s for the relation and m, checked
    against brute force over datasets of units in ``tests/test_sensitivity.py`` and against the
    SQL in ``tests/test_ptr_smooth.py``.
"""

from __future__ import annotations

import math
import typing as t
from fractions import Fraction

from dpsql._accounting.budget import Cost
from dpsql._privacy import grid as _grid
from dpsql._privacy import noise as _noise
from dpsql._privacy import sensitivity as sens
from dpsql._sql import build
from dpsql._sql.statistics import Statistic
from dpsql.errors import OptionError
from dpsql.mechanisms import datadep
from dpsql.mechanisms.base import Context, Mechanism, Prepared, ReportEntry, clamp, fmt, num, register

if t.TYPE_CHECKING:
    from sqlglot import exp

    from dpsql._privacy.noise import NoiseSource
    from dpsql._sql.bind import BoundAggregate

#: Share of each step's ε spent on the test (the rest on the release).
TEST_SHARE = 0.5
#: The cap on D lies this many test-noise scales above the threshold.
CAP_MARGIN = 30.0


def test_threshold(scale: float, delta: float) -> int:
    """Least integer j >= 1 with P[Z >= j] <= δ for P[Z = z] ∝ exp(−|z|/scale)."""
    q = math.exp(-1.0 / scale)

    def tail(j: int) -> float:
        return math.exp(-j / scale) / (1.0 + q)

    target = delta * (1.0 - 1e-12)  # margin for the rounding of exp and log
    j = max(1, math.ceil(scale * math.log(1.0 / (target * (1.0 + q)))))
    while j > 1 and tail(j - 1) <= target:
        j -= 1
    while tail(j) > target:
        j += 1
    return j


def continuous_threshold(epsilon: float, delta: float) -> float:
    """SPEC's T = ln(1/(2δ))/ε₁: P[Lap(1/ε₁) > T] = δ."""
    return math.log(1.0 / (2.0 * delta)) / epsilon


class _PTRPrepared(datadep.QuantileSQL, Prepared):
    mechanism = "ptr"

    def __init__(self, agg: "BoundAggregate", ctx: Context, cost: Cost) -> None:
        super().__init__(agg, ctx, cost)
        assert agg.lower is not None and agg.upper is not None and ctx.options.bound is not None
        self.lower, self.upper = float(agg.lower), float(agg.upper)
        self.b = float(ctx.options.bound)
        self.stat = "mean" if agg.statistic == "mean" else "quantile"
        self.p = datadep.exact_p(agg.quantile, agg.label) if self.stat == "quantile" else None
        self.fixed = datadep.mean_grid(agg, self.stat)
        self.cal = datadep.calibrate(ctx, cost)
        self.eps_test = self.cal.epsilon * TEST_SHARE
        self.eps_release = self.cal.epsilon - self.eps_test
        self.test_scale = _noise.laplace_scale(1.0, self.eps_test, integer=True)
        self.threshold = test_threshold(self.test_scale, self.cal.delta)
        self.cap = self.threshold + math.ceil(CAP_MARGIN * self.test_scale)
        self.scale = _noise.laplace_scale(self.b, self.eps_release)
        i = agg.index
        self.columns = (f"a{i}_ptr_d", f"a{i}_ptr_n", f"a{i}_ptr_f")

    # -- SQL ---------------------------------------------------------------------------------

    def window_sql(self, values: build.Values) -> exp.Select:
        """D, n and x_r per group (:func:`dpsql.mechanisms.datadep.distance_sql`)."""
        assert self.p is not None
        return datadep.distance_sql(values, p=self.p, bound=self.b, cap=self.cap,
                                    add_remove=self.cal.relation == sens.ADD_REMOVE, columns=self.columns,
                                    rows=self.cal.rows)

    # -- release -----------------------------------------------------------------------------

    def distance(self, stats: t.Mapping[str, t.Any]) -> tuple[int, Fraction, int]:
        """(D capped at C, f(x) exactly, n) from one group's exact statistics."""
        if self.fixed is not None:  # the mean: exact, of values on the grid (datadep.mean_grid)
            n, f = datadep.exact_mean(self.fixed, stats)
            d = sens.mean_distance(n, self.b, 0.0, self.fixed.width, self.cal.relation, self.cal.rows)
            return min(d, self.cap), f, n
        n = int(num(stats.get("n")))
        if n == 0:  # only the padding: x_0 = L, x_1 = U
            return (0 if self.upper - self.lower > self.b else self.cap), Fraction(self.upper), 0
        dcol, _, fcol = self.columns
        return int(stats[dcol]), Fraction(float(stats[fcol])), n

    def release(self, stats: t.Mapping[str, t.Any], noise: "NoiseSource") -> tuple[t.Any, ReportEntry]:
        d, f, _ = self.distance(stats)
        if d + noise.laplace_int(0, self.test_scale) < self.threshold:
            return None, self._report(
                "⊥ (NULL): the test failed, the data may be too close to a dataset whose local "
                f"sensitivity exceeds bound={fmt(self.b)}; the budget was spent all the same", passed=False)
        value = clamp(_grid.release_value(noise, "laplace", f, self.scale), self.lower, self.upper)
        return value, self._report(f"test passed; Laplace noise for the proposed bound {fmt(self.b)}")

    def _report(self, note: str, passed: bool = True) -> ReportEntry:
        return ReportEntry(
            column=self.label, mechanism=self.mechanism, epsilon=self.cost.epsilon,
            delta=self.cost.delta, sensitivity=self.b, scale=self.scale, distribution="Laplace",
            ci_half_width=_noise.laplace_ci(self.scale, self.ctx.confidence) if passed else None,
            note=note)

    def explain(self) -> dict[str, str]:
        source = ("from n alone" if self.stat == "mean" else
                  f"in DuckDB from the order statistics of ranks r ± {self.cap * self.cal.rows} (histogram pass, no sort)")
        rows = self.cal.rows
        return {
            "bounds": f"[{fmt(self.lower)}, {fmt(self.upper)}]",
            "proposed bound": f"b = {fmt(self.b)}" + (
                "" if rows == 1 else f", on how far one unit of up to {rows} rows can move the statistic"),
            "split": (f"ε₁ = ε₂ = {fmt(self.eps_test)} (test, release) per step, δ = {self.cal.delta:.3g} "
                      "to the test"),
            "distance": (f"D = D(f, x, b) {source}, capped at {self.cap}"
                         + ("" if self.cal.rows == 1 else f", in units: the pair-form distance // {self.cal.rows}")),
            "test": (f"NULL (⊥) unless D + discrete Laplace(1/ε₁ = {fmt(self.test_scale)}) ≥ {self.threshold} "
                     f"(T = ln(1/(2δ))/ε₁ = {fmt(continuous_threshold(self.eps_test, self.cal.delta))})"),
            "release": f"f(x) + Laplace(b = {fmt(self.scale)}); budget spent even on ⊥",
            "relation": self.cal.why,
            **({"mean": "exact: " + self.fixed.describe()} if self.fixed is not None else {}),
        }


@register
class ProposeTestRelease(Mechanism):
    """Propose-test-release (Dwork & Lei 2009) for the mean and quantiles; module docstring.

    Guarantee: (ε, δ)-DP; refused without ``bound`` or with δ = 0 (OptionError naming the key).
    Neighbouring relation: both, for a privacy unit of up to m = ``ctx.max_rows`` rows
    (``add_remove``: the unit's rows added or removed; ``replace``: replaced, a value possibly
    becoming NULL or leaving the filter, the union relation); b bounds how far one unit moves f.
    Without GROUP BY, D is the distance in units; with GROUP BY and m > 1 (or ``replace``) a
    unit can touch several groups, and each group is calibrated for one row with group privacy
    over the unit's steps (:mod:`dpsql.mechanisms.datadep`).
    Constants: ε₁ = ε₂ = ε/2 (this module's choice); threshold j = least integer with
    e^{−jε₁}/(1 + e^{−ε₁}) ≤ δ, the discrete form of SPEC §4.2's T = ln(1/(2δ))/ε₁ (≥ T);
    cap C = j + ⌈30/ε₁⌉; D of the mean from n (:func:`dpsql._privacy.sensitivity.mean_distance`:
    mW/max(n − km, m + 1), or mW/max(n − km, m) under ``replace``), of quantiles the NRS 2007
    order-statistic pair form (seed 003 slide 18) divided by m and rounded down (A in units is
    NRS's A at (k + 1)m − 1 rows; derivation in :mod:`dpsql._privacy.sensitivity`). These bound A
    from above, so D is a lower bound on the true distance and the test stays valid.
    """

    name = "ptr"
    statistics = frozenset({Statistic.MEAN, Statistic.MEDIAN, Statistic.QUANTILE})
    options = frozenset({"bound"})
    uses_delta = True

    def check(self, agg: "BoundAggregate", ctx: Context) -> None:
        super().check(agg, ctx)
        if ctx.options.bound is None:
            raise OptionError(
                "mechanism 'ptr' needs option 'bound' (the proposed bound b on the local sensitivity): "
                "add WITH (mechanism = 'ptr', bound = ..., ...)")

    def prepare(self, agg: "BoundAggregate", ctx: Context, cost: Cost) -> Prepared:
        if cost.delta <= 0:
            raise OptionError("mechanism 'ptr' needs option 'delta' > 0 (the chance that its test "
                              "passes by accident)")
        return _PTRPrepared(agg, ctx, cost)
