"""Quantiles (DP_MEDIAN, DP_QUANTILE, DP_MIN, DP_MAX) by the exponential mechanism.

Guarantee
    Pure ε-DP (McSherry & Talwar 2007; Dwork & Roth 2014, Thm. 3.10), no δ. The candidates
    are the points of the public grid 2^k in [L, U), k = ``grid_exponent(U − L)``: a finite
    exponential mechanism, and :meth:`NoiseSource.uniform` on that grid never reveals an
    interval's exact width.

Mechanism (Smith 2011; SPEC §4.4)
    Data clipped to [L, U], n non-NULL values. For a candidate y let c(y) = #{x_j ≤ y}; y is
    output with probability ∝ exp(ε'·u(y)), u(y) = −min(|c(y) − p·n|, D + B). All y between two
    consecutive distinct values share c(y), so the draw picks an interval of the sorted data
    padded with L and U (weight G_i·exp(ε'·u_i), G_i = grid points in it), then a uniform grid
    point inside it.

Whole-number candidates
    On an integer column clipped to whole-number bounds (within ±2^53, where doubles hold every
    integer) the candidates are the whole numbers of [L, U] instead: a median of whole days is a
    whole number. There a data value y is a candidate of its own, whose utility is the distance
    from p·n to the ranks it spans, so that the best y is DuckDB's ``quantile_disc`` (the value at
    rank ⌈p·n⌉) also when values repeat: :mod:`dpsql.mechanisms.wholequantile`, with its
    sensitivity (the same Δu) and the brute force in ``tests/test_perf_paths.py``. The choice
    depends on the column's type and the bounds only.

Sensitivity Δu of the utility (brute-forced in ``tests/test_exponential.py``, for rows and
for units of up to m rows over :mod:`dpsql.admin.bruteforce`'s datasets of units)
    ``add_remove``: adding a row moves c(y) by 0 or 1 and p·n by p, so c(y) − p·n moves by −p
    or 1 − p: Δu = max(p, 1 − p) (½ for the median). ``replace``: n is fixed, c(y) moves by at
    most 1: Δu = 1 (a value that becomes NULL or leaves the filter is a removal, within the
    same bound); with GROUP BY a changed row can leave one group and join another, and the
    per-group draws must add up: Δu = 2·max(p, 1 − p). A privacy unit of up to m rows
    (m = ``ctx.max_rows``) moves the rank by up to m: its rows are m such steps, so Δu is
    multiplied by m (under ``replace``, removing j ≤ m rows and adding j' ≤ m moves c(y) − p·n
    by at most p·j' + (1 − p)·j ≤ m, or the reverse). ε' = ε/(2Δu) (McSherry & Talwar 2007):
    for 0 < p < 1 the utility is not monotone (c(y) − p·n rises for some y and falls for
    others), so the normaliser can also move by e^{ε/2}; for the median under ``add_remove``
    this gives weights exp(−ε|i − n/2|), not the exp(−ε|i − n/2|/2) of the Δu = 1 form.
    For p = 0 or 1 (DP_MIN, DP_MAX), ε' = ε/Δu. With d = u_x − u_x', the log ratio of the
    output probabilities at y is ε'·d(y) − ln E[e^{ε'·d}] (the mean under the output law on
    x'), at most ε'·(max d − min d) in size. Here u = −c(y) (p = 0) or c(y) − n (p = 1), so
    when j rows are removed and j' added, d(y) = A(y) − R(y), the added and the removed rows at
    or below y (p = 0; above y for p = 1): two nondecreasing counts, so between any two y the
    difference d moves by at most j one way and j' the other, and d spans at most
    max(j, j') ≤ m. That is Δu for a row, a unit added or removed, and a unit replaced (whose
    rows may move in opposite directions, so that d takes both signs); with GROUP BY the spans
    of the groups add up to at most Σ (j_g + j'_g) ≤ Δu.

The clip at D + B
    D = min over y of |c(y) − p·n| is the best achievable rank distance; B = ⌈64/ε'⌉ is public.
    D has sensitivity Δu (a minimum of functions of sensitivity Δu), so u does too, and privacy
    is exact. No weight above e^{−64} times the best one changes. It makes the draw local: every
    y with |c(y) − p·n| ≥ D + B weighs the same, so the two tails are uniform on [L, x_(R+1))
    and [x_(R'), U) with R = ⌊p·n − D − B⌋, R' = ⌈p·n + D + B⌉, and only the order statistics
    of ranks R+1..R' are needed. The tails' total weight is part of the draw: the output has
    exactly the mechanism's distribution.

SQL (per group, two passes over the source: :func:`dpsql._sql.build.order_statistics`)
    A histogram of 4096 (``build.BUCKETS``) equal-width buckets over [L, U] (count, min, max;
    cumulative counts by a window function), an upper bound on D from it, and the buckets
    holding a rank of the window; then an exact histogram (GROUP BY value) of the rows of those buckets that hold
    more than one distinct value, found by a semi join on the bucket number. Only the window's
    distinct values, with counts and cumulative ranks, come back: a few hundred numbers per group.
    On DuckDB the histogram is built once for the whole statement and n is read from it
    (:meth:`order_values`; see ``dpsql._plan.rewrite``): n is not a separate aggregate of the rows.

Whole numbers in a range of at most ``build.BUCKETS`` (ages, hours, days)
    One pass, GROUP BY value, is the exact histogram, and it comes back whole: per group a list
    of at most ``build.BUCKETS`` values with their counts, with no window function and no join
    in SQL. :func:`windows` finds the window of ranks in it for every group at once, in numpy,
    with the SQL's double arithmetic (``tests/test_perf_paths.py`` checks that it gives what the
    bucketed SQL gives for the same values). The draw reads only the window either way.
"""

from __future__ import annotations

import functools
import math
import typing as t
from fractions import Fraction

import numpy as np
from sqlglot import exp

from dpsql._accounting.budget import Cost
from dpsql._privacy import noise as _noise
from dpsql._sql import build, template
from dpsql._sql.argtypes import whole_numbers
from dpsql._sql.statistics import Statistic
from dpsql.errors import InternalError, OptionError, PrivacyError
from dpsql.mechanisms.base import Context, Mechanism, Prepared, ReportEntry, fmt, num, raw_select, register  # noqa: F401
from dpsql.mechanisms.batch import Groups, Lists, ReleasedColumn
from dpsql.mechanisms.wholequantile import whole_regions

if t.TYPE_CHECKING:
    from dpsql._privacy.noise import NoiseSource
    from dpsql._sql.bind import BoundAggregate

#: ε'·B: a candidate farther than D + B ranks from p·n weighs e^{-TAIL} of the best one.
TAIL = 64.0
#: Extra ranks fetched on each side of the window, absorbing floating-point rounding in SQL.
SLACK = 2

Point = tuple[float, int, int]
"""A distinct value v, its multiplicity c and its cumulative rank r = #{x_j ≤ v}."""


def utility_sensitivity(p: float, ctx: Context) -> float:
    """Δu of u(y) = −|c(y) − p·n| for the context's relation, summed over groups (× m)."""
    wide = max(p, 1.0 - p)
    if ctx.neighbouring == "replace":
        return ctx.max_rows * (2.0 * wide if ctx.grouped else 1.0)
    return ctx.max_rows * wide


def exponent(p: float, sensitivity: float, epsilon: float) -> float:
    """ε': ε/Δu for the monotone utilities (p = 0 or 1), ε/(2Δu) otherwise."""
    monotone = p in (0.0, 1.0)
    return epsilon / ((1.0 if monotone else 2.0) * sensitivity)


def window(eps_prime: float) -> int:
    """B: the public rank distance beyond which the utility is clipped."""
    return max(1, math.ceil(TAIL / eps_prime))


def grid(lower: float, upper: float) -> int:
    """The exponent k of the public output grid 2^k on [L, U)."""
    return _noise.grid_exponent(upper - lower)


def points_of(values: t.Iterable[float]) -> list[Point]:
    """Sorted distinct values with multiplicities and cumulative ranks (in-memory path)."""
    out: list[Point] = []
    for v in sorted(values):
        if out and out[-1][0] == v:
            _, c, r = out[-1]
            out[-1] = (v, c + 1, r + 1)
        else:
            out.append((v, 1, (out[-1][2] if out else 0) + 1))
    return out


def nearest(points: t.Sequence[Point], n: int, pn: Fraction, lower: float, upper: float) -> Fraction:
    """D = min over y in [L, U) of |c(y) − p·n|: the rank distance of the best interval.

    Candidates are the intervals of positive width: [x_t, next) with rank r_t (unless x_t is
    the largest value and equals U), and [L, x_1) with rank 0 when x_1 > L (or [L, U), n = 0).
    """
    return Fraction(_nearest_units(points, n, pn.numerator, pn.denominator, lower, upper), pn.denominator)


def _nearest_units(points: t.Sequence[Point], n: int, num: int, den: int, lower: float, upper: float) -> int:
    """:func:`nearest` for p·n = num/den, in whole units of 1/den (integers only)."""
    best: int | None = None
    if not points or (points[0][1] == points[0][2] and points[0][0] > lower):
        best = abs(num)
    for v, _, r in points:
        if r < n or v < upper:
            d = abs(r * den - num)
            best = d if best is None or d < best else best
    if best is None:
        raise InternalError("no candidate interval for the quantile")
    return best


def regions(points: t.Sequence[Point], n: int, p: float, eps_prime: float, lower: float,
            upper: float, b: int) -> list[tuple[float, float, float]]:
    """The draw's regions ``(lo, hi, score)``: per grid point in [lo, hi), weight e^score.

    The utility is u(y) = −min(|c(y) − p·n|, D + B) with D = :func:`nearest`. ``points`` are
    consecutive distinct values (in rank order) that cover every rank in [R+1, R'] ∩ [1, n]
    (R = ⌊p·n − D − B⌋, R' = ⌈p·n + D + B⌉) and the value attaining D; extra points are
    ignored. The regions partition [L, U): left tail, the intervals between, right tail.
    Ranks are compared in integers: p·n = num/den exactly (p is a float, so a dyadic rational),
    and each score is one correctly rounded division of integers.
    """
    for (_, _, r0), (_, c1, r1) in zip(points, points[1:]):
        if r1 - c1 != r0:
            raise InternalError("the order statistics are not contiguous")
    num, den = float(p).as_integer_ratio()
    num *= n  # p·n = num/den
    cap = _nearest_units(points, n, num, den, lower, upper) + b * den  # D + B, in units of 1/den
    lo_rank = (num - cap) // den  # R = ⌊p·n − D − B⌋: c(y) <= R is the left tail
    hi_rank = -((-num - cap) // den)  # R' = ⌈p·n + D + B⌉: c(y) >= R' is the right tail

    def holder(rank: int) -> float:
        """x_(rank): the value whose rank range (r − c, r] holds ``rank`` (1-based)."""
        for v, c, r in points:
            if r - c < rank <= r:
                return v
        raise InternalError("an order statistic of the window is missing")

    tail = -eps_prime * (cap / den)
    out: list[tuple[float, float, float]] = []
    if lo_rank >= 0:
        out.append((lower, holder(lo_rank + 1), tail))
    else:  # rank 0: below the smallest value
        if points and points[0][1] != points[0][2]:
            raise InternalError("the smallest value is missing")
        out.append((lower, points[0][0] if points else upper, -eps_prime * (num / den)))
    last = len(points) - 1
    for j, (v, _, r) in enumerate(points):
        if lo_rank < r < hi_rank:
            if j < last:
                nxt = points[j + 1][0]
            elif r == n:
                nxt = upper
            else:
                raise InternalError("an order statistic of the window is missing")
            out.append((v, nxt, -eps_prime * (abs(r * den - num) / den)))
    if hi_rank <= n:
        out.append((holder(hi_rank), upper, tail))
    return out


def log_weights(parts: t.Sequence[tuple[float, float, float]], k: int) -> list[float]:
    """log(G·e^score) per region, G = grid points of 2^k in [lo, hi); −inf when G = 0."""
    out = []
    for lo, hi, score in parts:
        g = _noise.grid_points(lo, hi, k) if lo < hi else 0
        out.append(math.log(g) + score if g > 0 else -math.inf)
    return out


def draw(points: t.Sequence[Point], n: int, p: float, eps_prime: float, lower: float,
         upper: float, noise: "NoiseSource", b: int | None = None, integer: bool = False) -> float:
    """One exponential-mechanism quantile from the order statistics around rank p·n: on the
    public grid of [L, U) (:func:`regions`), or with ``integer`` (whole-number data and bounds)
    on the whole numbers of [L, U], the grid 2^0 (:func:`~dpsql.mechanisms.wholequantile.whole_regions`)."""
    b = window(eps_prime) if b is None else b
    if integer:
        parts, k = whole_regions(points, n, p, eps_prime, lower, upper, b), 0
    else:
        parts, k = regions(points, n, p, eps_prime, lower, upper, b), grid(lower, upper)
    i = noise.choice_weighted(log_weights(parts, k))
    lo, hi, _ = parts[i]
    return noise.uniform(lo, hi, k=k)


def quantile_of(values: t.Sequence[float], p: float, eps_prime: float, lower: float, upper: float,
                noise: "NoiseSource") -> float:
    """The mechanism on values held in memory (clipped to [L, U] first)."""
    clipped = [min(max(float(x), lower), upper) for x in values]
    return draw(points_of(clipped), len(clipped), p, eps_prime, lower, upper, noise)


def rank_error(eps_prime: float, lower: float, upper: float, confidence: float, integer: bool = False) -> float:
    """With probability ≥ confidence, |c(out) − p·n| exceeds the best achievable by at most this.

    The exponential mechanism's tail bound (Dwork & Roth 2014, Thm. 3.11) with |R| candidates
    (grid points, or the whole numbers of [L, U]): P[u(out) ≤ OPT − (ln|R| + t)/ε'] ≤ e^{−t}.
    """
    size = int(upper - lower) + 1 if integer else _noise.grid_points(lower, upper, grid(lower, upper))
    return (math.log(size) + math.log(1.0 / (1.0 - confidence))) / eps_prime


# -- SQL ---------------------------------------------------------------------------------------
# The subquery is built from templates parsed once (dpsql._sql.template), as the order
# statistics of dpsql._sql.build are: a tree every compiler takes as it is.

_HISTOGRAM = "SELECT _Z_keys, LIST({'v': __lo, 'c': __c} ORDER BY __lo) AS _Z_column FROM _Z_h GROUP BY _Z_keys"
_BUCKET_D = "COALESCE(MIN(ABS(__cum - _Z_p * __n)) FILTER (WHERE __hi < _Z_hi) OVER (PARTITION BY _Z_keys), _Z_p * __n)"
_NEAR = "__cum >= _Z_p * __n - __d - _Z_reach AND __cum - __c <= _Z_p * __n + __d + _Z_reach"
_RANKS = """
WITH _Z_vd AS (
  SELECT _Z_keys, MIN(ABS(__cum - _Z_p * __n)) FILTER (WHERE __val < _Z_hi OR __cum < __n) AS __dv
  FROM _Z_pts GROUP BY _Z_keys
)
SELECT e._Z_keys, LIST({'v': e.__val, 'c': e.__c, 'r': e.__cum} ORDER BY e.__val) AS _Z_column
FROM _Z_pts AS e JOIN _Z_vd AS x ON _Z_match
WHERE e.__cum >= _Z_p * e.__n - LEAST(e.__d, COALESCE(x.__dv, e.__d)) - _Z_reach
  AND e.__cum - e.__c <= _Z_p * e.__n + LEAST(e.__d, COALESCE(x.__dv, e.__d)) + _Z_reach
GROUP BY e._Z_keys
"""


@functools.lru_cache(maxsize=256)
def ranks_sql(values: build.Values, *, p: float, b: int, column: str, tag: str = "e") -> exp.Select:
    """Per group, in ``column``: the distinct values with ranks near p·n as ``LIST({v, c, r})``,
    or, for :attr:`~dpsql._sql.build.Values.one_per_bucket` values, the whole value histogram as
    ``LIST({v, c})`` (at most ``build.BUCKETS`` values per group; :func:`windows` finds the window
    in it, which is cheaper than finding it in SQL: no window function, no join).

    The window is [p·n − D − B, p·n + D + B] widened by SLACK, first with the upper bound on D
    that the histogram gives (its buckets' last values are candidates), then with D itself.
    """
    nm, ks = build.scratch(tag), values.keys
    if values.one_per_bucket:
        tree = template.fill(_HISTOGRAM, keys=ks, column=column, h=nm.h)
        tree.set("with_", exp.With(expressions=build.order_histogram(values, nm)))
        return t.cast(exp.Select, tree)
    p_, hi, reach = template.double(p), template.double(values.upper), template.number(b + SLACK)
    bucket_d = template.fill(_BUCKET_D, p=p_, hi=hi, keys=ks)
    near = template.fill(_NEAR, p=p_, reach=reach)
    tree = template.fill(_RANKS, keys=ks, p=p_, hi=hi, reach=reach, column=column, vd=nm.vd, pts=nm.pts,
                         match=template.conjunction(template.same_keys("e", "x", ks)))
    with_ = tree.args["with_"]
    with_.set("expressions", [*build.order_statistics(values, nm, near, {"__d": bucket_d}), *with_.expressions])
    return t.cast(exp.Select, tree)


#: The numpy types of the fields of a window ``{v, c, r}`` and of a histogram ``{v, c}``.
WINDOW_FIELDS = {"v": np.float64, "c": np.int64, "r": np.int64}
HISTOGRAM_FIELDS = {"v": np.float64, "c": np.int64}


def _group_min(x: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Per group, the least element of ``x`` in its range of ``offsets`` (+inf for none)."""
    out = np.full(len(offsets) - 1, np.inf)
    starts = offsets[:-1]
    filled = starts < offsets[1:]
    if filled.any():
        out[filled] = np.minimum.reduceat(x, starts[filled])
    return out


def windows(hist: Lists, p: float, upper: float, reach: int) -> list[list[Point]]:
    """Per group, the window of ranks that :func:`ranks_sql`'s list form returns, as points,
    from the group's value histogram (``v`` ascending, counts ``c``; NULL or empty: no points).

    Every group at once, with the SQL's double arithmetic: cumulative counts r, n, the distance
    d = min |r − p·n| over the values below U, and the values whose ranges (r − c, r] meet
    [p·n − d − reach, p·n + d + reach]. With one value per bucket d is D itself, or above it
    only when the interval [L, x_1) (rank 0) is nearer, which the window then reaches too; the
    SQL's second bound on D (from the window's values) cannot lower it. A group whose only value
    is U keeps it (d = +inf).
    """
    off = hist.offsets
    size = len(off) - 1
    v = hist.fields["v"].astype(np.float64, copy=False)
    c = hist.fields["c"].astype(np.int64, copy=False)
    lengths = np.diff(off)
    group = np.repeat(np.arange(size), lengths)
    total = np.cumsum(c)
    before = np.zeros(size, dtype=np.int64)  # the count of every earlier group's values
    starts = off[:-1] > 0
    before[starts] = total[off[:-1][starts] - 1]
    r = total - before[group]
    n = np.zeros(size, dtype=np.int64)
    filled = lengths > 0
    n[filled] = r[off[1:][filled] - 1]
    at = (p * n.astype(np.float64))[group]
    rf = r.astype(np.float64)
    d = _group_min(np.where(v < upper, np.abs(rf - at), np.inf), off)[group]
    keep = (rf >= at - d - reach) & ((r - c).astype(np.float64) <= at + d + reach)
    counts = np.bincount(group[keep], minlength=size).tolist()
    points = list(zip(v[keep].tolist(), c[keep].tolist(), r[keep].tolist()))
    return _split(points, counts)


def window_points(window: Lists) -> list[list[Point]]:
    """Per group, the points of a window ``{v, c, r}`` (what :func:`ranks_sql` returns)."""
    f = window.fields
    points = list(zip(f["v"].astype(np.float64, copy=False).tolist(), f["c"].tolist(), f["r"].tolist()))
    return _split(points, np.diff(window.offsets).tolist())


def _split(points: list[Point], counts: list[int]) -> list[list[Point]]:
    out, at = [], 0
    for k in counts:
        out.append(points[at:at + k])
        at += k
    return out


# -- the mechanism ---------------------------------------------------------------------------


class _QuantilePrepared(Prepared):
    mechanism = "exponential"

    def __init__(self, agg: "BoundAggregate", ctx: Context, cost: Cost) -> None:
        super().__init__(agg, ctx, cost)
        assert agg.lower is not None and agg.upper is not None and agg.quantile is not None
        self.lower, self.upper, self.p = float(agg.lower), float(agg.upper), float(agg.quantile)
        self.sensitivity = utility_sensitivity(self.p, ctx)
        self.eps_prime = exponent(self.p, self.sensitivity, cost.epsilon)
        self.b = window(self.eps_prime)
        self.integer = whole_numbers(agg)
        #: whole numbers in a range of at most ``build.BUCKETS``: the SQL returns the value histogram
        self.histogram = build.one_per_bucket(self.lower, self.upper, self.integer)
        self.column = f"a{agg.index}_{'hist' if self.histogram else 'ranks'}"
        #: whole-number candidates: whole-number data and bounds that floats hold exactly
        self.whole = self.integer and max(abs(self.lower), abs(self.upper)) <= 2.0**53

    def stats(self, v: exp.Expression | None) -> dict[str, exp.Expression]:
        assert v is not None
        return {"n": exp.Count(this=v.copy())}

    def subquery(self, source: str, keys: list[str], v: str | None) -> exp.Select | None:
        return self.order_subquery(self.order_values(source, keys, v))

    def order_values(self, source: str, keys: list[str], v: str | None) -> build.Values:
        assert v is not None
        return build.Values(source, tuple(keys), v, self.lower, self.upper, self.integer)

    def value_counts(self) -> str | None:
        return self.column if self.histogram else None

    def order_subquery(self, values: build.Values) -> exp.Select:
        tree = ranks_sql(values, p=self.p, b=self.b, column=self.column)
        return raw_select(tree, [*values.keys, self.column])

    def _points(self, column: "Lists | t.Sequence[t.Any]") -> list[list[Point]]:
        """Per group, the points of the window of ranks, from the list :func:`ranks_sql` returns
        (a :class:`Lists`, or the rows' lists of dicts)."""
        if self.histogram:
            return windows(Lists.of(column, HISTOGRAM_FIELDS), self.p, self.upper, self.b + SLACK)
        return window_points(Lists.of(column, WINDOW_FIELDS))

    def _value(self, n: t.Any, points: list[Point], noise: "NoiseSource") -> float:
        return draw(points, int(num(n)), self.p, self.eps_prime, self.lower, self.upper, noise, self.b, self.whole)

    def release(self, stats: t.Mapping[str, t.Any], noise: "NoiseSource") -> tuple[t.Any, ReportEntry]:
        return self._value(stats.get("n"), self._points([stats.get(self.column)])[0], noise), self._entry()

    def release_many(self, groups: t.Sequence[t.Mapping[str, t.Any]],
                     noise: "NoiseSource") -> t.Sequence[tuple[t.Any, ReportEntry]]:
        """One draw per group, one report entry for the column (the same for every group)."""
        if not isinstance(groups, Groups) or not len(groups):
            return super().release_many(groups, noise)
        ns, points = groups.column("n"), self._points(groups.array(self.column))
        return ReleasedColumn([self._value(n, w, noise) for n, w in zip(ns, points)], self._entry())

    def _entry(self) -> ReportEntry:
        conf = self.ctx.confidence
        ranks = rank_error(self.eps_prime, self.lower, self.upper, conf, self.whole)
        return ReportEntry(
            column=self.label, mechanism=self.mechanism, epsilon=self.cost.epsilon,
            sensitivity=self.sensitivity, distribution="exponential mechanism on rank",
            note=(f"weights exp(-{fmt(self.eps_prime)}·|rank - {self.p:g}·n|), Δu={fmt(self.sensitivity)}; "
                  f"with {conf:.0%} probability the rank is within {ranks:.1f} of the best achievable"),
        )

    def explain(self) -> dict[str, str]:
        return {
            "bounds": f"[{fmt(self.lower)}, {fmt(self.upper)}]",
            "utility": (f"-min(|rank - {self.p:g}·n|, D + {self.b}), Δu={fmt(self.sensitivity)} "
                        f"({self.ctx.neighbouring}, m={self.ctx.max_rows})"),
            "weights": (f"exp(-{fmt(self.eps_prime)}·|i - {self.p:g}·n|) per "
                        + ("whole number of [L, U]" if self.whole
                           else f"point of the grid 2^{grid(self.lower, self.upper)}")),
            "sql": ("the value histogram per group (GROUP BY value), read for the ranks within "
                    + f"D ± {self.b + SLACK} of {self.p:g}·n" if self.histogram else
                    f"order statistics within D ± {self.b + SLACK} ranks of {self.p:g}·n per group "
                    f"({build.BUCKETS}-bucket histogram, then exact values)"),
        }


@register
class Exponential(Mechanism):
    """ε-DP quantiles by the exponential mechanism on ranks; see the module docstring.

    Guarantee: pure ε-DP (McSherry & Talwar 2007; Dwork & Roth 2014, Thm. 3.10).
    Neighbouring relation: both, for a privacy unit of up to m = ``ctx.max_rows`` rows, whose
    rows move the rank by up to m: Δu = m·max(p, 1 − p) under ``add_remove``, m under
    ``replace`` (2m·max(p, 1 − p) with GROUP BY). Constants: ε' = ε/(2Δu), or ε/Δu for p = 0
    and p = 1, where the utilities' differences span at most Δu (proof in the module
    docstring); the interval form of the draw (Smith 2011); the clip at D + ⌈64/ε'⌉ ranks
    and the output grid 2^k with k = ⌊log2(U − L)⌋ − 30 (:func:`dpsql._privacy.noise.grid_exponent`),
    both argued in the module docstring and checked by brute force.
    """

    name = "exponential"
    statistics = frozenset({Statistic.MEDIAN, Statistic.QUANTILE, Statistic.MIN, Statistic.MAX})

    def check(self, agg: "BoundAggregate", ctx: Context) -> None:
        super().check(agg, ctx)
        assert agg.lower is not None and agg.upper is not None
        if not math.isfinite(agg.upper - agg.lower):
            raise PrivacyError(f"{agg.label}: the range U − L of the bounds must be a finite number")

    def prepare(self, agg: "BoundAggregate", ctx: Context, cost: Cost) -> Prepared:
        if cost.epsilon <= 0:
            raise OptionError("mechanism 'exponential' needs epsilon > 0")
        return _QuantilePrepared(agg, ctx, cost)
