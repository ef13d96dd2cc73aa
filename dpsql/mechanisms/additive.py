"""Global-sensitivity mechanisms: Laplace and Gaussian noise on clipped counts and sums.

Guarantee
    ``laplace``: ε-DP (Dwork, McSherry, Nissim, Smith 2006). ``gaussian``: (ε, δ)-DP by the
    analytic Gaussian mechanism (Balle & Wang 2018), or ρ-zCDP with σ = Δ₂/sqrt(2ρ) (Bun &
    Steinke 2016, Prop. 1.6). Each aggregate's share is split evenly over its noisy parts and
    composes sequentially (basic composition).

Neighbouring relation
    Both. ``add_remove`` (unbounded DP, the default): add or remove one privacy unit, i.e. up to
    m = max_rows_per_unit × group_size rows. ``replace`` (bounded DP): change up to m rows.
    For an id unit, m is what the truncation in the rewritten SQL leaves of one unit
    (:mod:`dpsql._policy.units`): k rows, or r rows in each of g groups, whose L1 multiplier
    r·g (Laplace) and L2 multiplier r·√g (Gaussian) differ (seed 004, Tumult's guide to
    sensitivity). Under ``replace`` an id unit's row count is not public: COUNT(*) is noisy.
    A changed row need not stay counted: its value may become NULL, it may leave (or enter)
    the WHERE filter, or, with GROUP BY, move to another group. So under ``replace`` one row
    changes a group's statistic as a change of value, a removal or an addition does, and the
    table takes the largest of the three: for SUM, U − L (a value moves from L to U) or
    max(|L|, |U|) (a value leaves), whichever is larger, the second when 0 is outside [L, U].

Sensitivities (per row; every value is multiplied by m, SPEC §4.1, §6 — for the Gaussian
mechanism by the L2 multiplier; values clipped to [L, U], c = (L+U)/2, r = (U−L)/2):

==============  ===================  ===========================  =========================
statistic       add_remove           replace, ungrouped           replace, GROUP BY (L1)
==============  ===================  ===========================  =========================
COUNT           1                    1 (0 for COUNT(*) w/o WHERE) 2
SUM             max(|L|, |U|)        max(U − L, |L|, |U|)         max(U − L, 2·max(|L|,|U|))
Σ(v − c)        r                    2r                           2r
Σ(v − c)²       r²                   r²                           2r²
==============  ===================  ===========================  =========================

MEAN releases a noisy count and a noisy centred sum, then c + Σ̃/max(ñ, 1) clamped to [L, U]
(post-processing). VAR releases ñ, Σ̃(v−c), Σ̃(v−c)² and returns the sample variance
(Σ₂ − Σ₁²/n)/(n − 1), clamped to [0, r²·n/(n−1)]; STDDEV is its square root. Under ``replace``
with no WHERE and no GROUP BY, COUNT(*) of a row-unit table is public (n) and is released
exactly at no cost.
Every row of the table above is checked against brute force in ``tests/test_additive.py``.

COUNT(DISTINCT x) has COUNT's sensitivity: a unit's m rows hold at most m distinct values, so
adding or removing the unit moves the count by at most m (a replaced unit: by at most m, and
across groups as COUNT does). COUNT(DISTINCT unit) counts units: without GROUP BY one unit moves
it by 1 whatever its rows (× the group size); with GROUP BY a unit's rows can reach m groups,
one each, so it keeps COUNT's m. Both are checked by brute force in ``tests/test_units_sql.py``.

Per-unit pre-aggregation (:mod:`dpsql._compile.perunit`; Wilson et al., PoPETs 2020)
    An id unit may be bounded by clipping its partial statistics instead of truncating its rows
    (:meth:`_AdditivePrepared.per_unit`): per (unit, group), the count to c, SUM's total to
    c·[min(A, 0), max(B, 0)], MEAN's and VAR's sums re-weighted to c rows (c = k, or r with g
    groups). Each partial then lies in the range c rows of values in [A, B] can reach, and a unit
    reaches at most g groups (1 without GROUP BY), so every entry of the table above holds with
    the same m (L1 c·g, L2 c·√g): the sensitivities, and the noise, are the same in both modes.
    The proof is in that module's docstring; ``tests/test_perunit.py`` checks it by brute force
    over every unit neighbour (both relations), with negative controls.

Exact sums (:mod:`dpsql.mechanisms.fixed`; Casacuberta, Shoemate, Vadhan, Wagaman, CCS 2022)
    A floating-point SUM rounds, and one added row can move a rounded sum by more than the
    table allows. So every sum is of integers: each value becomes an integer d in [A, B] on a
    public grid 2^g, standing for the value centre + d·2^g (the clamp to [A, B] comes after
    every floating-point step and is the clip), and COUNT(d), SUM(d) and SUM(d·d) are exact
    (HUGEINT in DuckDB, DECIMAL(38, 0) in Spark). The table holds with the bounds of the
    integers, L' = centre + A·2^g and U' = centre + B·2^g, at most one step 2^g ≤ 2^−30·r
    (SUM: 2^−30·max(|L|, |U|); MEAN on SUM's grid: 2^−30·(U − L)) outside [L, U]: SUM's d are the steps of the values (centre
    0); VAR's are centred in SQL (d ∈ [−R, R], r' = R·2^g); MEAN's are SUM's where that grid is
    at most one step coarser than the centred one (bounds near 0 relative to their width: then
    SUM(x) and AVG(x) read one column and one sum), else centred like VAR's; MEAN's and SUM's of
    an integer column with whole bounds are the clipped integers themselves (g = 0, L' = L,
    U' = U). MEAN's centred sum is 2Σd − (A + B)·n on the grid 2^(g − 1), in Python integers
    (with d ∈ [A, B], each row's term lies in [−(B − A), B − A]: r' = (B − A)/2·2^g).
    These sensitivities, rounded up to a double, are the ones the noise is calibrated to and the
    report shows. The exact integers reach the release as integers: the noise is added on the
    release grid to the exact value (:mod:`dpsql._privacy.grid`), never to a double near it.
    An exact part is kept inside the range the bounds allow over N_MAX = 2^63 rows (a NULL
    sum, of no rows, is 0), so that nothing can fail, depending on the data, after the budget
    is charged.
"""

from __future__ import annotations

import functools
import typing as t
from fractions import Fraction

import numpy as np
from sqlglot import exp

from dpsql._accounting.budget import Cost
from dpsql._sql.argtypes import whole_numbers
from dpsql._sql.statistics import Statistic
from dpsql.errors import OptionError
from dpsql.mechanisms.base import (
    N_MAX,
    Context,
    Mechanism,
    NoisyPart,
    Prepared,
    ReportEntry,
    fmt,
    num,
    register,
)
from dpsql.mechanisms.batch import Groups, ReleasedColumn
from dpsql.mechanisms.fixed import FixedPoint, integers, linear, up

if t.TYPE_CHECKING:
    from dpsql._privacy.noise import NoiseSource
    from dpsql._sql.bind import BoundAggregate


_Number = t.TypeVar("_Number", float, Fraction)


def sensitivities(stat: str, lower: _Number, upper: _Number, ctx: Context, l2: bool = False) -> dict[str, t.Any]:
    """Sensitivity of each part the statistic releases, for the context's relation (× m): the
    table of the module docstring for values in [lower, upper], floats or (exactly) fractions.

    m is the L1 multiplier ``ctx.max_rows``, or with ``l2`` (the Gaussian mechanism) the L2
    multiplier ``ctx.l2_rows``: the two differ when a unit may reach g groups with r rows in
    each (r·g against r·√g, :mod:`dpsql._policy.units`).
    """
    m = ctx.l2_rows if l2 else ctx.max_rows
    assert m is not None
    return _table(stat, lower, upper, m, ctx.neighbouring == "replace", ctx.grouped)


def _table(stat: str, lower: _Number, upper: _Number, m: float, replace: bool, grouped: bool) -> dict[str, t.Any]:
    """:func:`sensitivities` for the multiplier ``m``."""
    if isinstance(lower, Fraction):  # exact bounds: exact sensitivities
        m = Fraction(m)  # type: ignore[assignment]
    r = (upper - lower) / 2
    big = max(abs(lower), abs(upper))
    count = (2.0 if grouped else 1.0) if replace else 1.0
    if stat == "count":
        return {"n": count * m}
    if stat == "sum":
        if not replace:
            return {"s": big * m}
        # A replaced row can also become NULL or leave the WHERE filter (a removal, |v| ≤ big),
        # and with GROUP BY move to another group (a removal and an addition).
        return {"s": max(upper - lower, (2 if grouped else 1) * big) * m}
    s1 = (2 * r if replace else r) * m
    if stat == "mean":
        return {"n": count * m, "s1": s1}
    s2 = (2 * r * r if (replace and grouped) else r * r) * m
    return {"n": count * m, "s1": s1, "s2": s2}


@functools.lru_cache(maxsize=1024)  # a pure function of public facts, planned on every query
def _on_grid(stat: str, fixed: FixedPoint, m: float, replace: bool, grouped: bool) -> tuple[tuple[str, float], ...]:
    """The table for the values the integers of ``fixed`` stand for, exactly, each rounded up."""
    exact = _table(stat, fixed.value(fixed.low), fixed.value(fixed.high), m, replace, grouped)
    return tuple((name, up(x)) for name, x in exact.items())


class _AdditivePrepared(Prepared):
    def __init__(self, agg: "BoundAggregate", ctx: Context, cost: Cost, kind: str) -> None:
        super().__init__(agg, ctx, cost)
        self.mechanism = kind
        stat = "var" if agg.statistic in ("var", "stddev") else agg.statistic
        self.stat = stat
        # n is public under replace for a row unit only: replacing an id unit's rows may change
        # how many rows it has (and how many survive its truncation).
        self.public_count = (
            stat == "count"
            and agg.arg is None
            and ctx.neighbouring == "replace"
            and not ctx.grouped
            and not ctx.filtered
            and ctx.unit_key == "row"
        )
        self.clips = stat != "count"
        lo = agg.lower if agg.lower is not None else 0.0
        hi = agg.upper if agg.upper is not None else 0.0
        self.lower, self.upper = lo, hi
        # the integers the sums add up (module docstring, "Exact sums"); None for a count
        self.fixed = None
        if stat == "sum":
            self.fixed = FixedPoint.values(lo, hi, whole_numbers(agg))
        elif stat == "mean":
            self.fixed = FixedPoint.of_mean(lo, hi, whole_numbers(agg))
        elif stat == "var":
            self.fixed = FixedPoint.centred(lo, hi)
        sens = {} if self.public_count else self._sensitivities(l2=(kind == "gaussian"))
        if agg.distinct_unit and not ctx.grouped:
            # DP_COUNT(DISTINCT unit): one unit adds or removes one distinct value, however many
            # rows it has (× the policy's group size).
            sens = {"n": sens["n"] / ctx.max_rows * ctx.group_size}
        k = max(len(sens), 1)
        share = Cost(cost.epsilon / k, cost.delta / k, cost.rho / k)
        self.parts = {
            name: NoisyPart(name, d, kind, share, integer=(name == "n")) for name, d in sens.items()
        }
        if self.public_count:
            self.cost = Cost()

    def _sensitivities(self, l2: bool) -> dict[str, float]:
        """The table of the module docstring for the integers' bounds, each rounded up."""
        f, ctx = self.fixed, self.ctx
        if f is None:
            return sensitivities(self.stat, self.lower, self.upper, ctx, l2=l2)
        m = ctx.l2_rows if l2 else ctx.max_rows
        assert m is not None
        return dict(_on_grid(self.stat, f, m, ctx.neighbouring == "replace", ctx.grouped))

    def stats(self, v: exp.Expression | None) -> dict[str, exp.Expression]:
        """COUNT(d), SUM(d) and SUM(d·d) of the integers d (``v``, :attr:`fixed`), exact; the
        sums are written ``SUM(CAST(... AS BIGINT))``: Spark's form sums them as DECIMAL(38, 0)."""
        if self.stat == "count":
            if v is not None and self.agg.distinct:
                return {"n": exp.Count(this=exp.Distinct(expressions=[v.copy()]))}
            return {"n": exp.Count(this=exp.Star() if v is None else v.copy())}
        assert v is not None
        if self.stat == "sum":
            return {"s": _integer_sum(v)}
        out: dict[str, exp.Expression] = {"n": exp.Count(this=v.copy()), "s": _integer_sum(v)}
        if self.stat == "var":
            out["q"] = _integer_sum(exp.Mul(this=v.copy(), expression=v.copy()))
        return out

    def per_unit(self) -> dict[str, tuple[str, int, int]] | None:
        """Pre-aggregation (:mod:`dpsql._compile.perunit`): a unit's count clipped to c, SUM's total
        to c times the integers' range, MEAN's and VAR's sums (and VAR's sum of squares)
        re-weighted to c rows; a distinct count, and a count public under replace, need rows."""
        if self.public_count or self.agg.distinct or self.agg.inner_args:
            return None
        if self.stat == "count":
            return {"n": ("count", 0, 1)}
        f = self.fixed
        assert f is not None
        if self.stat == "sum":
            return {"s": ("total", f.low, f.high)}
        out = {"n": ("count", 0, 1), "s": ("scaled", f.low, f.high)}
        if self.stat == "var":
            out["q"] = ("scaled", 0, max(f.low * f.low, f.high * f.high))
        return out

    # -- release ------------------------------------------------------------------------------

    def release(self, stats: t.Mapping[str, t.Any], noise: "NoiseSource") -> tuple[t.Any, ReportEntry]:
        return self.release_many([stats], noise)[0]

    def release_many(
        self, groups: t.Sequence[t.Mapping[str, t.Any]], noise: "NoiseSource"
    ) -> ReleasedColumn:
        """:meth:`release` for every group: one sampler call per part (not per group), and the
        exact parts, the released values and the intervals computed on whole columns."""
        cols = Groups.of(groups)
        if self.public_count:
            note = "public under replace: n is known"
            values = [int(num(x)) for x in cols.column("n")]
            return ReleasedColumn(values, self._report(None, None, 0.0, note), np.zeros(len(values)))
        exact = self.exact_units(cols)
        noisy = {}
        for name, part in self.parts.items():
            units, exponent = exact[name]
            noisy[name] = part.add_many(units, noise) if part.integer else part.add_exact(units, exponent, noise)
        return self._finish(noisy)

    def exact_units(self, cols: Groups) -> dict[str, tuple[np.ndarray, int]]:
        """Every released part of every group exactly, as (integers, e): the value is each
        integer times 2^e. n, and SUM's Σd, MEAN's Σ(d − (A + B)/2) or VAR's Σd and Σd², each
        kept in the range its bounds allow over N_MAX rows (NULL, no rows, is 0)."""
        n = integers(cols.array("n"), 0, N_MAX) if "n" in self.parts else None
        f = self.fixed
        if f is None:
            assert n is not None
            return {"n": (n, 0)}
        low, high = N_MAX * min(f.low, 0), N_MAX * max(f.high, 0)
        s = integers(cols.array("s"), low, high)
        if self.stat == "sum":
            return {"s": (s, f.exponent)}
        assert n is not None
        if self.stat == "mean":  # 2·Σd − (A + B)·n on the grid 2^(g − 1)
            return {"n": (n, 0), "s1": (linear(s, 2, n, -(f.low + f.high)), f.exponent - 1)}
        q = integers(cols.array("q"), 0, N_MAX * f.high * f.high)
        return {"n": (n, 0), "s1": (s, f.exponent), "s2": (q, 2 * f.exponent)}

    def exact(self, stats: t.Mapping[str, t.Any]) -> dict[str, Fraction]:
        """The exact values of the released parts of one group (see :meth:`exact_units`)."""
        return {name: int(col[0]) * Fraction(2) ** e for name, (col, e) in self.exact_units(Groups.of([stats])).items()}

    def centred(self, stats: t.Mapping[str, t.Any]) -> dict[str, float]:
        """:meth:`exact` rounded to floats (for inspection; the release uses the exact values)."""
        return {name: float(x) for name, x in self.exact(stats).items()}

    def _finish(self, noisy: dict[str, t.Any]) -> ReleasedColumn:
        """The released values of every group from the noisy parts (post-processing only)."""
        conf = self.ctx.confidence
        if self.stat == "count":
            part = self.parts["n"]
            counts = noisy["n"]
            if isinstance(counts, np.ndarray) and counts.dtype == np.int64:
                values: t.Any = np.maximum(counts, 0, out=counts)  # the noisy column is ours
            else:
                values = [x if x > 0 else 0 for x in map(int, counts)]
            return ReleasedColumn(values, self._report(part.sensitivity, part.scale, None),
                                  _same(part.ci(conf), len(values)))
        if self.stat == "sum":
            part = self.parts["s"]
            values = np.asarray(noisy["s"], dtype=np.float64)
            return ReleasedColumn(values, self._report(part.sensitivity, part.scale, None),
                                  _same(part.ci(conf), len(values)))
        arrays = {name: np.asarray(col, dtype=np.float64) for name, col in noisy.items()}
        with np.errstate(all="ignore"):
            if self.stat == "mean":
                return self._mean(arrays, conf)
            return self._var(arrays, conf)

    def _mean(self, noisy: dict[str, np.ndarray], conf: float) -> ReleasedColumn:
        n, s1 = noisy["n"], noisy["s1"]
        pn, ps = self.parts["n"], self.parts["s1"]
        denom = np.maximum(n, 1.0)
        mean = s1 / denom
        centre = float(self.fixed.midpoint) if self.fixed is not None else 0.0
        mean += centre
        mean = _clamp(mean, self.lower, self.upper)
        # Both parts inside their (1+c)/2 intervals holds with probability >= c (union bound).
        q = (1 + conf) / 2
        hn, hs = pn.ci(q), ps.ci(q)
        width = mean - centre  # (hs + |mean − c|·hn) / max(denom − hn, 1), in place
        np.abs(width, out=width)
        width *= hn
        width += hs
        denom -= hn
        width /= np.maximum(denom, 1.0, out=denom)
        np.minimum(width, self.upper - self.lower, out=width)
        return ReleasedColumn(mean, self._report(ps.sensitivity, ps.scale, None,
                                                          "ratio of noisy sum and noisy count"), width)

    def _var(self, noisy: dict[str, np.ndarray], conf: float) -> ReleasedColumn:
        f = self.fixed
        assert f is not None
        r = float(Fraction(f.high - f.low, 2) * f.unit)  # the integers' half-width: r + at most a step
        q = 1 - (1 - conf) / 3
        halves = {name: part.ci(q) for name, part in self.parts.items()}

        def var_of(n: np.ndarray, s1: np.ndarray, s2: np.ndarray) -> np.ndarray:
            n = np.maximum(n, 2.0)
            v = (s2 - s1 * s1 / n) / (n - 1)
            return _clamp(v, 0.0, r * r * n / (n - 1))

        value = var_of(noisy["n"], noisy["s1"], noisy["s2"])
        corners = [
            var_of(noisy["n"] + a * halves["n"], noisy["s1"] + b * halves["s1"], noisy["s2"] + c * halves["s2"])
            for a in (-1, 1) for b in (-1, 0, 1) for c in (-1, 1)
        ]
        ps2 = self.parts["s2"]
        if self.agg.statistic == "stddev":
            sd = np.sqrt(value)
            width = np.max([np.abs(np.sqrt(x) - sd) for x in corners], axis=0)
            return ReleasedColumn(sd, self._report(ps2.sensitivity, ps2.scale, None,
                                                            "sqrt of noisy sample variance"), width)
        width = np.max([np.abs(x - value) for x in corners], axis=0)
        return ReleasedColumn(value, self._report(ps2.sensitivity, ps2.scale, None,
                                                           "noisy count and centred moments"), width)

    def _report(self, sens: float | None, scale: float | None, width: float | None, note: str = "") -> ReportEntry:
        dist = next(iter(self.parts.values())).distribution if self.parts else "none"
        return ReportEntry(
            column=self.label,
            mechanism=self.mechanism,
            epsilon=self.cost.epsilon,
            delta=self.cost.delta,
            rho=self.cost.rho,
            sensitivity=sens,
            scale=scale,
            distribution=dist if self.stat != "mean" and self.stat != "var" else self.parts["s1"].distribution,
            ci_half_width=width,
            note=note,
        )

    def explain(self) -> dict[str, str]:
        if self.public_count:
            return {"release": "exact n (public under replace, no WHERE, no GROUP BY)", "cost": "0"}
        out = {
            "bounds": f"[{fmt(self.lower)}, {fmt(self.upper)}]" if self.stat != "count" else "-",
            "parts": ", ".join(
                f"{name}: Δ={fmt(p.sensitivity)} {p.distribution}({'b' if p.kind == 'laplace' else 'σ'}={fmt(p.scale)}) "
                f"at {p.cost}"
                for name, p in self.parts.items()
            ),
        }
        if self.fixed is not None:
            out["sums"] = self.fixed.describe()
        return out


class _Additive(Mechanism):
    statistics = frozenset({Statistic.COUNT, Statistic.SUM, Statistic.MEAN, Statistic.VAR, Statistic.STDDEV})
    kind = ""

    def prepare(self, agg: "BoundAggregate", ctx: Context, cost: Cost) -> Prepared:
        return _AdditivePrepared(agg, ctx, cost, self.kind)


@register
class Laplace(_Additive):
    """ε-DP Laplace mechanism on clipped statistics; see the module docstring."""

    name = "laplace"
    kind = "laplace"


@register
class Gaussian(_Additive):
    """(ε, δ)-DP (analytic Gaussian) or ρ-zCDP Gaussian mechanism; see the module docstring."""

    name = "gaussian"
    kind = "gaussian"
    uses_delta = True
    supports_rho = True

    def prepare(self, agg: "BoundAggregate", ctx: Context, cost: Cost) -> Prepared:
        if cost.rho == 0 and cost.delta == 0:
            raise OptionError("mechanism 'gaussian' needs delta > 0 (or rho for zCDP)")
        return super().prepare(agg, ctx, cost)


def _same(width: float, size: int) -> np.ndarray:
    """One interval half-width for every group, as a read-only array (no memory per group:
    every element is the one value, stride 0; half the cost of ``np.broadcast_to``)."""
    out = np.ndarray((size,), dtype=np.float64, buffer=np.float64(width), strides=(0,))
    out.flags.writeable = False
    return out


def _clamp(x: np.ndarray, lo: float | np.ndarray, hi: float | np.ndarray) -> np.ndarray:
    """:func:`dpsql.mechanisms.base.clamp` on a column: NaN → ``lo``, then into [lo, hi]."""
    out = np.maximum(x, lo)  # NaN stays NaN
    np.minimum(out, hi, out=out)
    np.copyto(out, lo, where=np.isnan(out))
    return out


def _integer_sum(v: exp.Expression) -> exp.Expression:
    """``SUM(CAST(v AS BIGINT))``: the exact sum of integers (DuckDB's is HUGEINT; Spark's form
    casts to DECIMAL(38, 0) instead, :mod:`dpsql._compile.target`)."""
    return exp.Sum(this=exp.Cast(this=v.copy(), to=exp.DataType(this=exp.DataType.Type.BIGINT)))
