"""Smooth sensitivity for DP_MEAN, DP_MEDIAN and DP_QUANTILE: ``WITH (mechanism = 'smooth', ...)``.

Framework (Nissim, Raskhodnikova & Smith 2007, "NRS" below)
    S is a β-smooth upper bound on the local sensitivity of f: S(x) ≥ LS(x) and
    S(x) ≤ e^β·S(x') for neighbours. A noise density h is (α, β)-admissible when, for
    |Δ| ≤ α and |λ| ≤ β, P[Z ∈ A] ≤ e^{ε/2}·P[Z ∈ A + Δ] + δ/2 (sliding) and
    P[Z ∈ A] ≤ e^{ε/2}·P[Z ∈ e^λ·A] + δ/2 (dilation); then f(x) + (S(x)/α)·Z is (ε, δ)-DP
    (NRS 2007, §2: the definition of admissible noise and the calibration lemma that follows it).

Noise (``noise`` option)
    ``laplace`` (the default when δ > 0): h(z) = ½e^{−|z|} is (ε/2, ε/(2 ln(2/δ)))-admissible
    (NRS 2007's Laplace example; seed 000's Definition 19), so β = ε/(2 ln(2/δ)) and
    f(x) + Lap(2S/ε) is (ε, δ)-DP.
    ``cauchy`` (the default when δ = 0): h(z) ∝ 1/(1 + z⁴), γ = 4, with α = ε/(4γ) = ε/16 and
    β = ε/γ = ε/4 (NRS 2007's Cauchy-like example; seed 003 slide 22): f(x) + (16/ε)·S·Z,
    pure ε-DP. Checked here directly rather than taken on trust: with v = e^λ(u + Δ), the log
    density ratio is [ln h(u) − ln h(u + Δ)] + [ln h(u + Δ) − λ − ln h(e^λ(u + Δ))]; the
    first term is at most |Δ|·max_z 4z³/(1 + z⁴) = 3^{3/4}·|Δ| ≤ 3^{3/4}ε/16, the second at
    most (γ − 1)|λ| = 3ε/4, so the loss is at most 0.893ε < ε. (The dilation part alone can
    reach 3ε/4, more than the ε/2 of the admissibility definition; the sum still stays below
    ε. ``tests/test_ptr_smooth.py`` checks both distributions numerically.)
    Data-dependent scales are sampled on a public grid 2^k (k from U − L only) and S is
    enlarged by 2^k for the rounding to it, which keeps it β-smooth (S + c ≤ e^β(S' + c)).
    S ≤ U − L for every dataset, so a query whose largest scale (U − L + 2^k)/α overflows a
    double is refused when planned; a Cauchy-like value more than one grid step beyond a bound
    is set to that point before snapping (it is clamped to the bound all the same), so that
    no release fails on the data after the budget is charged.

Smooth bound S (SPEC §4.2), β-smooth in steps of one privacy unit of up to m rows
    (m = ``ctx.max_rows``; m = 1 for row-level privacy; with GROUP BY and m > 1, or ``replace``
    with GROUP BY, each group uses m = 1 and group privacy over the unit's row steps, see
    :mod:`dpsql.mechanisms.datadep`; the module doc of :mod:`dpsql.privacy.sensitivity` derives the
    unit-level A, and ``tests/test_sensitivity.py`` checks it by brute force over units)
    mean: from n alone, ``add_remove``: max_k e^{−βk}·mW/max(n − km, m + 1), for m = 1
    max_k e^{−βk}·(U − L)/max(n − k, 2) (k = 0: the exact bound of any dataset of size n;
    :func:`dpsql.privacy.sensitivity.mean_smooth_sensitivity`; seed 000's U/(n + 1) is too small);
    ``replace``: with mW/max(n − km, m), valid also when values appear or disappear.
    Quantiles: S = max_{k ≤ K} e^{−βk}·A(k) with A(k) = P_{(k+1)m} = max_{0≤t≤(k+1)m}
    x_{r+t} − x_{r+t−(k+1)m}, NRS's A at (k + 1)m − 1 rows (NRS 2007, seed 003 slide 18; for
    m = 1 ``add_remove`` uses the exact LS at k = 0), truncated at K with the tail term
    (U − L)·e^{−β(K+1)}, still β-smooth; K = :func:`dpsql.privacy.sensitivity.truncation_k` for a
    tail of 10⁻¹²·(U − L), with (K + 1)·m at most 4097. DuckDB returns only the order
    statistics of ranks [r − (K + 1)m, r + (K + 1)m] (:func:`dpsql.mechanisms.datadep.points_sql`).

Not reported
    The noise scale depends on the data (for the mean, S reveals n exactly: seed 000's
    warning). The report shows neither S nor the scale nor an interval derived from them.
"""

from __future__ import annotations

import math
import typing as t

from dpsql.errors import InternalError, OptionError
from dpsql.mechanisms import datadep
from dpsql.mechanisms.base import Context, Mechanism, Prepared, ReportEntry, clamp, finite_in, fmt, num, register
from dpsql.privacy import noise as _noise
from dpsql.privacy import sensitivity as sens
from dpsql.privacy.budget import Cost
from dpsql.sql import build
from dpsql.sql.statistics import Statistic

if t.TYPE_CHECKING:
    from dpsql.privacy.noise import NoiseSource
    from dpsql.sql.bind import BoundAggregate

#: γ of the Cauchy-like density h(z) ∝ 1/(1 + |z|^γ) (pure ε-DP option).
GAMMA = 4.0


def cauchy_noise(ctx: Context, cost: Cost) -> bool:
    """Whether the release uses the Cauchy-like noise: asked for, or by default when δ = 0."""
    choice = ctx.options.noise
    return choice == "cauchy" or (choice is None and cost.delta <= 0)


class _SmoothPrepared(datadep.QuantileSQL, Prepared):
    mechanism = "smooth"

    def __init__(self, agg: "BoundAggregate", ctx: Context, cost: Cost) -> None:
        super().__init__(agg, ctx, cost)
        self.cauchy = cauchy_noise(ctx, cost)
        if self.cauchy:
            self.cost = Cost(epsilon=cost.epsilon)
        assert agg.lower is not None and agg.upper is not None
        self.lower, self.upper = float(agg.lower), float(agg.upper)
        self.stat = "mean" if agg.statistic == "mean" else "quantile"
        self.p = datadep.exact_p(agg.quantile, agg.label) if self.stat == "quantile" else None
        self.cal = datadep.calibrate(ctx, self.cost)
        eps = self.cal.epsilon
        if self.cauchy:  # NRS 2007, Cauchy-like example: (ε/(4γ), ε/γ)-admissible, δ = 0
            self.alpha, self.beta = eps / (4.0 * GAMMA), eps / GAMMA
        else:  # NRS 2007, Laplace example: (ε/2, ε/(2 ln(2/δ)))-admissible
            self.alpha, self.beta = eps / 2.0, eps / (2.0 * math.log(2.0 / self.cal.delta))
        rows = self.cal.rows
        self.k = datadep.truncation(self.beta, self.lower, self.upper, rows) if self.stat == "quantile" else 0
        self.grid = datadep.public_grid(self.lower, self.upper)
        i = agg.index
        self.columns = (f"a{i}_smooth_w", f"a{i}_smooth_n")

    @property
    def largest_scale(self) -> float:
        """(U − L + 2^k)/α: S ≤ U − L for every dataset, so no release's scale is larger."""
        return (self.upper - self.lower + math.ldexp(1.0, self.grid)) / self.alpha

    # -- SQL ---------------------------------------------------------------------------------

    def window_sql(self, values: build.Values) -> str:
        """The window's order statistics and n per group (:func:`dpsql.mechanisms.datadep.points_sql`)."""
        assert self.p is not None
        column, n_column = self.columns
        half = (self.k + 1) * self.cal.rows - 1  # ranks r ± (K + 1)m
        return datadep.points_sql(values, p=self.p, half=half, column=column, n_column=n_column)

    # -- release -----------------------------------------------------------------------------

    def smooth(self, stats: t.Mapping[str, t.Any]) -> tuple[float, float]:
        """(f(x), S(x)) of one group: the exact statistic and its β-smooth bound."""
        n = int(num(stats.get("n")))
        if self.stat == "mean":
            # the mean of values clipped to [L, U] lies in [L, U]; finite_in keeps it finite
            f = finite_in(num(stats.get("mean")), self.lower, self.upper) if n else (self.lower + self.upper) / 2
            return f, sens.mean_smooth_sensitivity(n, self.beta, self.lower, self.upper, self.cal.relation,
                                                   self.cal.rows)
        if self.p is None:
            raise InternalError("a quantile without its p")
        p = float(self.p)
        first, last = sens.window_ranks(n, p, self.k, self.cal.rows)
        window = datadep.window_values(stats.get(self.columns[0]), first, last)
        r = sens.rank(p, n)
        f = float(window[r - first]) if r <= n else self.upper
        s = sens.smooth_sensitivity_window(window, first, n, p, self.beta, self.lower, self.upper,
                                           self.k, self.cal.relation, self.cal.rows)
        return f, s

    def release(self, stats: t.Mapping[str, t.Any], noise: "NoiseSource") -> tuple[t.Any, ReportEntry]:
        f, s = self.smooth(stats)
        scale = (s + math.ldexp(1.0, self.grid)) / self.alpha
        if self.cauchy:
            # A value more than one grid step beyond a bound snaps to a point beyond it and is
            # clamped to that bound all the same: clamping first keeps inf and huge values
            # (which the snapping cannot scale) out of it, and changes no result.
            step = math.ldexp(1.0, self.grid)
            raw = clamp(f + scale * noise.cauchy_like(GAMMA), self.lower - step, self.upper + step)
            raw = _noise.snap(raw, self.grid)
        else:
            raw = noise.laplace(f, scale, k=self.grid)
        value = clamp(raw, self.lower, self.upper)
        entry = ReportEntry(
            column=self.label, mechanism=self.mechanism, epsilon=self.cost.epsilon,
            delta=self.cost.delta, distribution=self._distribution(),
            note="the noise scale depends on the data (smooth sensitivity) and is not shown")
        return value, entry

    def _distribution(self) -> str:
        if self.cauchy:
            return f"Cauchy-like 1/(1+|z|^{GAMMA:g}), scale 16·S/ε"
        return "Laplace, scale 2·S/ε"

    def explain(self) -> dict[str, str]:
        if self.stat == "mean":
            how = "S from n alone (count in DuckDB)"
        else:
            rows = self.cal.rows
            unit = "" if rows == 1 else f", A(k) in units of {rows} rows = NRS A at (k + 1)·{rows} − 1 rows"
            how = (f"S = max_(k ≤ {self.k}) e^(-βk)·A(k){unit} and tail (U − L)·e^(-β·{self.k + 1}) from the "
                   f"order statistics of ranks r ± {(self.k + 1) * rows} (DuckDB histogram pass, no sort)")
        noise = (f"f(x) + (S/α)·Z, Z ∝ 1/(1 + |z|^{GAMMA:g}), pure ε-DP" if self.cauchy
                 else "f(x) + Laplace(S/α = 2S/ε)")
        return {
            "bounds": f"[{fmt(self.lower)}, {fmt(self.upper)}]",
            "noise": noise,
            "admissible": f"α = {fmt(self.alpha)}, β = {fmt(self.beta)} per step",
            "sensitivity": how + "; the scale is data-dependent and not reported",
            "relation": self.cal.why,
        }


@register
class SmoothSensitivity(Mechanism):
    """Smooth-sensitivity release (NRS 2007) of the mean and quantiles; module docstring.

    Guarantee: (ε, δ)-DP with Laplace noise (β = ε/(2 ln(2/δ)), scale 2S/ε: NRS 2007's Laplace
    admissibility, α = ε/2), or pure ε-DP with the Cauchy-like density 1/(1 + z⁴) (α = ε/16,
    β = ε/4: NRS 2007's example with γ = 4, re-derived in the module docstring).
    Neighbouring relation: both, for a privacy unit of up to m = ``ctx.max_rows`` rows (under
    ``replace`` the union relation: values may also become NULL or leave the filter). Quantiles
    use A(k) = NRS's order-statistic bound at (k + 1)m − 1 rows (exact for rows under
    ``replace``, an upper bound in general); the mean mW/max(n − km, m + 1) (``add_remove``) or
    mW/max(n − km, m) (``replace``); both derived in :mod:`dpsql.privacy.sensitivity` and checked
    by brute force over datasets of units. With GROUP BY and m > 1 (or ``replace`` with GROUP BY)
    each group uses m = 1 and group privacy over the unit's row steps.
    """

    name = "smooth"
    statistics = frozenset({Statistic.MEAN, Statistic.MEDIAN, Statistic.QUANTILE})
    options = frozenset({"noise"})
    uses_delta = True

    def prepare(self, agg: "BoundAggregate", ctx: Context, cost: Cost) -> Prepared:
        if not cauchy_noise(ctx, cost) and cost.delta <= 0:
            raise OptionError("option 'delta' must be > 0 for mechanism 'smooth' with noise = 'laplace' "
                              "(or use noise = 'cauchy' for pure ε-DP)")
        prepared = _SmoothPrepared(agg, ctx, cost)
        # The largest scale bounds every data-dependent one: when it is finite, no release can
        # overflow it (refused here, from the query and the share alone).
        if not math.isfinite(prepared.largest_scale):
            raise OptionError(f"{agg.label}: epsilon is too small for the bounds "
                              f"[{fmt(prepared.lower)}, {fmt(prepared.upper)}]: the noise scale would overflow")
        return prepared
