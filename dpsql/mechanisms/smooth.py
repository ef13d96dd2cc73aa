"""Smooth sensitivity for DP_MEAN, DP_MEDIAN and DP_QUANTILE: ``WITH (mechanism = 'smooth', ...)``.

Framework (Nissim, Raskhodnikova & Smith 2007, "NRS" below)
    S is a β-smooth upper bound on the local sensitivity of f: S(x) ≥ LS(x) and
    S(x) ≤ e^β·S(x') for neighbours. A noise density h is (α, β)-admissible when, for
    |Δ| ≤ α and |λ| ≤ β, P[Z ∈ A] ≤ e^{ε/2}·P[Z ∈ A + Δ] + δ/2 (sliding) and
    P[Z ∈ A] ≤ e^{ε/2}·P[Z ∈ e^λ·A] + δ/2 (dilation); then f(x) + (S(x)/α)·Z is (ε, δ)-DP
    (NRS 2007, §2: the definition of admissible noise and the calibration lemma that follows it).

Noise (``noise`` option)
    ``laplace`` (the default, and the only one offered): h(z) = ½e^{−|z|} is
    (ε/2, ε/(2 ln(2/δ)))-admissible (NRS 2007's Laplace example; seed 000's Definition 19), so
    β = ε/(2 ln(2/δ)) and f(x) + Lap(2S/ε) is (ε, δ)-DP; δ = 0 is refused.
    ``cauchy`` (NRS 2007's pure-ε Cauchy-like density 1/(1 + z⁴)) is refused, with the fix in
    the message: its sampler (:meth:`dpsql._privacy.noise.NoiseSource.cauchy_like`) inverts and
    rejects in floating point and snaps f(x) + (16/ε)·S·Z afterwards, so when the scale is large
    the set of outputs it can reach depends on f(x) and S(x), i.e. on the data (Mironov 2012).
    It comes back only with an exact sampler on the release grid and a cited derivation that the
    discretised density stays admissible.
    Data-dependent scales are sampled on a public grid 2^k (k from U − L only) and S is
    enlarged by 2^k for the rounding to it, which keeps it β-smooth (S + c ≤ e^β(S' + c)).
    The exact f(x) (a fraction for the mean) is rounded to that grid in integers
    (:func:`dpsql._privacy.grid.release_value`), so that rounding is the only one.
    S ≤ U − L for every dataset, so a query whose largest scale (U − L + 2^k)/α overflows a
    double is refused when planned.

Exact mean
    The mean is Σd/n of the integers of :func:`dpsql.mechanisms.datadep.mean_grid`, summed and
    divided exactly, not DuckDB's AVG (a float sum, whose rounding moves it by more than S: with
    bounds far from 0 relative to their width the rounding is larger than the whole local
    sensitivity). Its S uses the width of the integers' range, U − L plus at most one grid step.

Smooth bound S (SPEC §4.2), β-smooth in steps of one privacy unit of up to m rows
    (m = ``ctx.max_rows``; m = 1 for row-level privacy; with GROUP BY and m > 1, or ``replace``
    with GROUP BY, each group uses m = 1 and group privacy over the unit's row steps, see
    :mod:`dpsql.mechanisms.datadep`; the module doc of :mod:`dpsql._privacy.sensitivity` derives the
    unit-level A, and ``tests/test_sensitivity.py`` checks it by brute force over units)
    mean: from n alone, ``add_remove``: max_k e^{−βk}·mW/max(n − km, m + 1), for m = 1
    max_k e^{−βk}·(U − L)/max(n − k, 2) (k = 0: the exact bound of any dataset of size n;
    :func:`dpsql._privacy.sensitivity.mean_smooth_sensitivity`; seed 000's U/(n + 1) is too small);
    ``replace``: with mW/max(n − km, m), valid also when values appear or disappear.
    Quantiles: S = max_{k ≤ K} e^{−βk}·A(k) with A(k) = P_{(k+1)m} = max_{0≤t≤(k+1)m}
    x_{r+t} − x_{r+t−(k+1)m}, NRS's A at (k + 1)m − 1 rows (NRS 2007, seed 003 slide 18; for
    m = 1 ``add_remove`` uses the exact LS at k = 0), truncated at K with the tail term
    (U − L)·e^{−β(K+1)}, still β-smooth; K = :func:`dpsql._privacy.sensitivity.truncation_k` for a
    tail of 10⁻¹²·(U − L), with (K + 1)·m at most 4097. DuckDB returns only the order
    statistics of ranks [r − (K + 1)m, r + (K + 1)m] (:func:`dpsql.mechanisms.datadep.points_sql`).

Not reported
    The noise scale depends on the data (for the mean, S reveals n exactly: seed 000's
    warning). The report shows neither S nor the scale nor an interval derived from them.
"""

from __future__ import annotations

import math
import typing as t
from fractions import Fraction

from dpsql._accounting.budget import Cost
from dpsql._privacy import grid as _grid
from dpsql._privacy import sensitivity as sens
from dpsql._sql import build
from dpsql._sql.statistics import Statistic
from dpsql.errors import InternalError, OptionError
from dpsql.mechanisms import datadep
from dpsql.mechanisms.base import Context, Mechanism, Prepared, ReportEntry, clamp, fmt, num, register

if t.TYPE_CHECKING:
    from sqlglot import exp

    from dpsql._privacy.noise import NoiseSource
    from dpsql._sql.bind import BoundAggregate

def refuse_cauchy(ctx: Context) -> None:
    """Refuse ``noise = 'cauchy'`` (module docstring, "Noise"), naming the fix."""
    if ctx.options.noise == "cauchy":
        raise OptionError("noise = 'cauchy' is not offered: its sampler is not exact on the release grid; "
                          "use the Laplace noise (noise = 'laplace', the default) with delta > 0")


class _SmoothPrepared(datadep.QuantileSQL, Prepared):
    mechanism = "smooth"

    def __init__(self, agg: "BoundAggregate", ctx: Context, cost: Cost) -> None:
        super().__init__(agg, ctx, cost)
        assert agg.lower is not None and agg.upper is not None
        self.lower, self.upper = float(agg.lower), float(agg.upper)
        self.stat = "mean" if agg.statistic == "mean" else "quantile"
        self.p = datadep.exact_p(agg.quantile, agg.label) if self.stat == "quantile" else None
        self.fixed = datadep.mean_grid(agg, self.stat)
        self.cal = datadep.calibrate(ctx, self.cost)
        eps = self.cal.epsilon
        # NRS 2007, Laplace example: (ε/2, ε/(2 ln(2/δ)))-admissible
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

    def window_sql(self, values: build.Values) -> exp.Select:
        """The window's order statistics and n per group (:func:`dpsql.mechanisms.datadep.points_sql`)."""
        assert self.p is not None
        column, n_column = self.columns
        half = (self.k + 1) * self.cal.rows - 1  # ranks r ± (K + 1)m
        return datadep.points_sql(values, p=self.p, half=half, column=column, n_column=n_column)

    # -- release -----------------------------------------------------------------------------

    def smooth(self, stats: t.Mapping[str, t.Any]) -> tuple[Fraction, float]:
        """(f(x), S(x)) of one group: the exact statistic and its β-smooth bound."""
        if self.fixed is not None:  # the mean: exact, of values on the grid (datadep.mean_grid)
            n, f = datadep.exact_mean(self.fixed, stats)
            return f, sens.mean_smooth_sensitivity(n, self.beta, 0.0, self.fixed.width, self.cal.relation,
                                                   self.cal.rows)
        n = int(num(stats.get("n")))
        if self.p is None:
            raise InternalError("a quantile without its p")
        p = float(self.p)
        first, last = sens.window_ranks(n, p, self.k, self.cal.rows)
        window = datadep.window_values(stats.get(self.columns[0]), first, last)
        r = sens.rank(p, n)
        f = Fraction(float(window[r - first]) if r <= n else self.upper)
        s = sens.smooth_sensitivity_window(window, first, n, p, self.beta, self.lower, self.upper,
                                           self.k, self.cal.relation, self.cal.rows)
        return f, s

    def release(self, stats: t.Mapping[str, t.Any], noise: "NoiseSource") -> tuple[t.Any, ReportEntry]:
        f, s = self.smooth(stats)
        scale = (s + math.ldexp(1.0, self.grid)) / self.alpha
        raw = _grid.release_value(noise, "laplace", f, scale, k=self.grid)
        value = clamp(raw, self.lower, self.upper)
        entry = ReportEntry(
            column=self.label, mechanism=self.mechanism, epsilon=self.cost.epsilon,
            delta=self.cost.delta, distribution=self._distribution(),
            note="the noise scale depends on the data (smooth sensitivity) and is not shown")
        return value, entry

    def _distribution(self) -> str:
        return "Laplace, scale 2·S/ε"

    def explain(self) -> dict[str, str]:
        if self.stat == "mean":
            how = "S from n alone (count in DuckDB)"
        else:
            rows = self.cal.rows
            unit = "" if rows == 1 else f", A(k) in units of {rows} rows = NRS A at (k + 1)·{rows} − 1 rows"
            how = (f"S = max_(k ≤ {self.k}) e^(-βk)·A(k){unit} and tail (U − L)·e^(-β·{self.k + 1}) from the "
                   f"order statistics of ranks r ± {(self.k + 1) * rows} (DuckDB histogram pass, no sort)")
        return {
            "bounds": f"[{fmt(self.lower)}, {fmt(self.upper)}]",
            "noise": "f(x) + Laplace(S/α = 2S/ε)",
            "admissible": f"α = {fmt(self.alpha)}, β = {fmt(self.beta)} per step",
            "sensitivity": how + "; the scale is data-dependent and not reported",
            "relation": self.cal.why,
            **({"mean": "exact: " + self.fixed.describe()} if self.fixed is not None else {}),
        }


@register
class SmoothSensitivity(Mechanism):
    """Smooth-sensitivity release (NRS 2007) of the mean and quantiles; module docstring.

    Guarantee: (ε, δ)-DP with Laplace noise (β = ε/(2 ln(2/δ)), scale 2S/ε: NRS 2007's Laplace
    admissibility, α = ε/2); δ = 0 and the pure-ε Cauchy-like noise are refused (module
    docstring). The mean is exact (fixed-point integers), the release rounds only to its grid.
    Neighbouring relation: both, for a privacy unit of up to m = ``ctx.max_rows`` rows (under
    ``replace`` the union relation: values may also become NULL or leave the filter). Quantiles
    use A(k) = NRS's order-statistic bound at (k + 1)m − 1 rows (exact for rows under
    ``replace``, an upper bound in general); the mean mW/max(n − km, m + 1) (``add_remove``) or
    mW/max(n − km, m) (``replace``); both derived in :mod:`dpsql._privacy.sensitivity` and checked
    by brute force over datasets of units. With GROUP BY and m > 1 (or ``replace`` with GROUP BY)
    each group uses m = 1 and group privacy over the unit's row steps.
    """

    name = "smooth"
    statistics = frozenset({Statistic.MEAN, Statistic.MEDIAN, Statistic.QUANTILE})
    options = frozenset({"noise"})
    uses_delta = True

    def check(self, agg: "BoundAggregate", ctx: Context) -> None:
        super().check(agg, ctx)
        refuse_cauchy(ctx)

    def prepare(self, agg: "BoundAggregate", ctx: Context, cost: Cost) -> Prepared:
        if cost.delta <= 0:
            raise OptionError("mechanism 'smooth' needs option 'delta' > 0 (its Laplace noise is (ε, δ)-DP; "
                              "the pure-ε Cauchy-like noise is not offered): add delta = ...")
        prepared = _SmoothPrepared(agg, ctx, cost)
        # The largest scale bounds every data-dependent one: when it is finite, no release can
        # overflow it (refused here, from the query and the share alone).
        if not math.isfinite(prepared.largest_scale):
            raise OptionError(f"{agg.label}: epsilon is too small for the bounds "
                              f"[{fmt(prepared.lower)}, {fmt(prepared.upper)}]: the noise scale would overflow")
        return prepared
