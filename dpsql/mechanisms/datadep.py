"""Pieces shared by the data-dependent mechanisms ``ptr`` and ``smooth`` (SPEC §4.2).

Neighbouring relation and privacy units (:func:`calibrate`)
    dpsql runs the quantities of :mod:`dpsql._privacy.sensitivity` on the clipped, non-NULL values
    of one group (after WHERE). One protected change is one privacy unit: up to m rows
    (m = ``ctx.max_rows``: ``max_rows_per_unit`` × the policy's group size; the rewrite keeps at
    most ``max_rows_per_unit`` rows of each unit).

    * ``add_remove``: the unit's rows are added or removed: the ``add_remove`` relation.
    * ``replace``: the unit's rows are replaced; a value may also become NULL or leave (or enter)
      the WHERE filter, so the rows of one unit become 0 to m other rows: the ``union``
      relation of :mod:`dpsql._privacy.sensitivity` (for m = 1, a change, an addition or a removal
      of one value). Its formulas hold for all of these.

    Without GROUP BY the mechanism is calibrated for one unit step at the full (ε, δ), with the
    unit-level quantities of :mod:`dpsql._privacy.sensitivity` for m rows (its module doc
    derives them; the brute force over datasets of units checks them): a quantile's
    A(k) = P_{(k+1)m}, the NRS order-statistic bound at (k + 1)m − 1 rows, so PTR's distance is
    the pair-form distance divided by m, rounded down, and S = max_k e^{−βk}·P_{(k+1)m}; the
    mean's A(k) from n is mW/max(n − km, m + 1) (``add_remove``) or mW/max(n − km, m)
    (``union``). For m = 1 these are the row-level formulas (``add_remove`` keeps the exact LS
    at k = 0).

    With GROUP BY a unit's rows can fall into up to m groups, and a release calibrated for a
    unit in each group would be charged once per group it touches. So each group is calibrated
    for one row step, s steps per unit: s = m under ``add_remove``, 2m under ``replace`` (a
    row can leave one group and join another), at ε_r = ε/s and δ_r = δ/Σ_{i<s} e^{i·ε_r};
    group privacy (Dwork & Roth 2014, §2.3, proved by chaining s steps: P[M(x_0) ∈ E] ≤
    e^{sε_r}·P[M(x_s) ∈ E] + Σ_{i<s} e^{iε_r}·δ_r) gives (ε, δ) for the unit. A single row step
    touches one group, so the per-group releases compose in parallel. Without GROUP BY the unit
    calibration is the better one (group privacy would pay m in a quantile's noise scale and
    again in the smoothing), and for s = 1 both are the same.

Order statistics in SQL (:func:`points_sql`, :func:`distance_sql`)
    Per group, one hash pass over the clipped values builds a histogram of
    :data:`dpsql._sql.build.BUCKETS` equal buckets on [L, U] (count, min, max;
    :func:`dpsql._sql.build.order_statistics`); a window sum gives cumulative counts, n and the target
    rank r = max(1, ⌈p·n⌉) (exact, in integer arithmetic with p as its shortest decimal, as
    :func:`dpsql._privacy.sensitivity.rank`). Only the buckets holding a rank of the window
    [r − h − 1, r + h + 1] are kept; a bucket with a single value (every bucket of an integer
    column such as age) is already exact, and the values of the others are counted in a second
    pass that joins the source to those few buckets. Nothing sorts the table. The result is the
    list of distinct values {v, c, r} (value, multiplicity, cumulative rank) covering the window.
"""

from __future__ import annotations

import functools
import math
import typing as t
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from sqlglot import exp

from dpsql._accounting.budget import Cost
from dpsql._privacy import noise as _noise
from dpsql._privacy import sensitivity as sens
from dpsql._sql import build, template
from dpsql._sql.argtypes import whole_numbers
from dpsql.errors import InternalError, PrivacyError
from dpsql.mechanisms.base import raw_select
from dpsql.mechanisms.fixed import FixedPoint, whole

if t.TYPE_CHECKING:
    from dpsql.mechanisms.base import Context

#: The truncation of the smooth bound: tail term (U − L)·e^{−β(K+1)} at most TOL·(U − L) ...
TRUNCATION_TOL = 1e-12
#: ... with K at most this many ranks on each side of r.
MAX_WINDOW = 4096
#: Largest denominator of p (its shortest decimal) for the exact integer rank in SQL.
MAX_DENOMINATOR = 10**30
#: Data-dependent noise scales are sampled on the grid 2^k, k = grid_exponent(U − L) − GRID_SHIFT
#: (public), so that the grid never depends on the data (Mironov 2012; dpsql._privacy.noise).
GRID_SHIFT = 10


# ----------------------------------------------------------------------------- calibration
@dataclass(frozen=True)
class Calibration:
    """What one calibrated step is, and its budget (module docstring).

    ``relation`` and ``rows`` are the arguments ``relation`` and ``max_rows`` of the
    :mod:`dpsql._privacy.sensitivity` functions: one step adds or removes (``add_remove``), or
    replaces by 0 to ``rows`` rows (``union``), up to ``rows`` rows. A protected change is
    ``steps`` such steps; ``epsilon`` and ``delta`` are per step.
    """

    relation: str
    rows: int
    steps: int
    epsilon: float
    delta: float
    why: str


def calibrate(ctx: "Context", cost: Cost) -> Calibration:
    """The calibrated step and its ε and δ for the context (module docstring)."""
    m = int(ctx.max_rows)
    replace = ctx.neighbouring == "replace"
    relation = sens.UNION if replace else sens.ADD_REMOVE
    if replace:
        why = ("replace with GROUP BY: a row can move between groups, 2 steps per row" if ctx.grouped
               else "replace: one value changes, appears or disappears per row")
    else:
        why = "add_remove: one row added or removed per row"
    if ctx.grouped and (m > 1 or replace):
        steps, rows = (2 * m if replace else m), 1
    else:
        steps, rows = 1, m
    if rows > 1:
        why = (f"{'replace' if replace else 'add_remove'}: one privacy unit of up to {m} rows "
               f"{'replaced (values may also appear or disappear)' if replace else 'added or removed'}; "
               f"A(k) in units of {m} rows")
    if steps > 1:
        why += f"; {steps} steps per unit (group privacy)"
    eps = cost.epsilon / steps
    delta = cost.delta / math.fsum(math.exp(i * eps) for i in range(steps)) if cost.delta else 0.0
    return Calibration(relation, rows, steps, eps, delta, why)


# ----------------------------------------------------------------------------- ranks
def exact_p(p: float, label: str) -> Fraction:
    """p as its shortest decimal, refused if the exact rank would overflow SQL integers."""
    q = Fraction(repr(float(p)))
    if q.denominator > MAX_DENOMINATOR:
        raise PrivacyError(f"{label}: the quantile {p!r} has too many decimals for an exact rank")
    return q


def truncation(beta: float, lower: float, upper: float, rows: int = 1) -> int:
    """K of the truncated smooth bound (SPEC §4.2): the window holds the ranks r ± (K + 1)·rows,
    at most MAX_WINDOW + 1 on each side (a smaller K only makes the tail term larger)."""
    tail = sens.truncation_k(beta, lower, upper, TRUNCATION_TOL * (upper - lower))
    return max(0, min(tail, (MAX_WINDOW + 1) // rows - 1))


def public_grid(lower: float, upper: float) -> int:
    """Exponent of the public output grid for data-dependent noise scales."""
    return _noise.grid_exponent(upper - lower) - GRID_SHIFT


def window_values(points: t.Sequence[t.Mapping[str, t.Any]] | None, first: int,
                  last: int) -> np.ndarray:
    """Order statistics x_first..x_last from distinct points {v, c, r} (r: cumulative rank)."""
    if last < first:
        return np.zeros(0)
    points = points or ()
    size = len(points)
    vals = np.fromiter((pt["v"] for pt in points), dtype=np.float64, count=size)
    c = np.fromiter((pt["c"] for pt in points), dtype=np.int64, count=size)
    r = np.fromiter((pt["r"] for pt in points), dtype=np.int64, count=size)
    # ranks (r − c, r] of each value, cut to [first, last]: how often it fills the window
    counts = np.maximum(np.minimum(r, last) - np.maximum(r - c + 1, first) + 1, 0)
    out = np.repeat(vals, counts)
    if out.size != last - first + 1:  # pragma: no cover - the SQL always covers the window
        raise InternalError("the order statistics of the window are incomplete")
    return out


# ----------------------------------------------------------------------------- SQL
# The subquery is built from templates parsed once (dpsql._sql.template), as the order
# statistics of dpsql._sql.build are: a tree every compiler takes as it is.

_RANK = "GREATEST(1, (CAST(_Z_n AS HUGEINT) * _Z_num + _Z_less) // _Z_den)"
_NEAR = "__cum >= __r - _Z_half AND __cum - __c < __r + _Z_half"
_GROUPS = "SELECT _Z_keys, ANY_VALUE(__n) AS __n, ANY_VALUE(__r) AS __r FROM _Z_hist GROUP BY _Z_keys"
_POINTS = """
SELECT g._Z_keys, LIST({'v': w.__val, 'c': w.__c, 'r': w.__cum} ORDER BY w.__val)
         FILTER (WHERE NOT w.__val IS NULL) AS _Z_column, ANY_VALUE(g.__n) AS _Z_ncolumn
FROM _Z_g AS g LEFT JOIN _Z_pts AS w ON _Z_match
GROUP BY g._Z_keys, g.__n
"""
_X_AT = ("CASE WHEN _Z_k <= 0 THEN _Z_lo WHEN _Z_k > g.__n THEN _Z_hi ELSE "
         "MIN(w.__val) FILTER (WHERE w.__cum - w.__c < _Z_k AND _Z_k <= w.__cum) END")
_X_NEAR = "(CASE _Z_k - __r WHEN -1 THEN __xm WHEN 0 THEN __x0 ELSE __xp END)"
_LS = ("GREATEST(ABS(_Z_a - __x0), ABS(_Z_b - __x0), "
       "CASE WHEN __n >= 1 THEN GREATEST(ABS(_Z_c - __x0), ABS(_Z_d - __x0)) ELSE 0 END)")
_PAIR = "COALESCE(pd.__d, _Z_reach)"
_PER_UNIT = "(_Z_pair) // _Z_rows"
_ADD_REMOVE = "CASE WHEN s.__ls > _Z_bound THEN 0 ELSE GREATEST(1, _Z_pair) END"
_DISTANCE = """
WITH _Z_lf AS (
  SELECT _Z_keys, LEAST(__cum, __r) AS __i, __val AS __x FROM _Z_pts WHERE __cum - __c + 1 <= __r
  UNION ALL SELECT _Z_keys, 0, _Z_lo FROM _Z_g
), _Z_rt AS (
  SELECT _Z_keys, GREATEST(__cum - __c + 1, __r) AS __j, __val AS __x FROM _Z_pts WHERE __cum >= __r
  UNION ALL SELECT _Z_keys, __n + 1, _Z_hi FROM _Z_g
), _Z_pd AS (
  SELECT a._Z_keys, MIN(b.__j - a.__i - 1) AS __d
  FROM _Z_lf AS a JOIN _Z_rt AS b ON _Z_ab
  GROUP BY a._Z_keys
), _Z_xs AS (
  SELECT g._Z_keys, g.__n AS __n, g.__r AS __r, _Z_xm AS __xm, _Z_x0 AS __x0,
         _Z_xp AS __xp, _Z_rp AS __rp, _Z_rm AS __rm
  FROM _Z_g AS g LEFT JOIN _Z_pts AS w ON _Z_gw
  GROUP BY g._Z_keys, g.__n, g.__r
), _Z_ls AS (
  SELECT *, _Z_lsx AS __ls FROM _Z_xs
)
SELECT s._Z_keys, LEAST(_Z_cap, _Z_dist) AS _Z_dcol, s.__n AS _Z_ncol, s.__x0 AS _Z_fcol
FROM _Z_ls AS s LEFT JOIN _Z_pd AS pd ON _Z_spd
"""


def _rank(n: exp.Expression, p: Fraction) -> exp.Expression:
    """r = max(1, ⌈p·n⌉) in exact integer arithmetic (p as a fraction).

    >>> _rank(exp.column("__n"), Fraction(1, 2)).sql("duckdb")
    'GREATEST(1, (CAST(__n AS INT128) * 1 + 1) // 2)'
    """
    return template.fill(_RANK, n=n, num=template.number(p.numerator), less=template.number(p.denominator - 1),
                         den=template.number(p.denominator))


def _offset(name: str, table: str, by: int) -> exp.Expression:
    """``table.name``, ``table.name + by`` or ``table.name - |by|``."""
    column = exp.column(name, table or None)
    if by == 0:
        return column
    return (exp.Add if by > 0 else exp.Sub)(this=column, expression=template.number(abs(by)))


def _window(values: build.Values, names: build.Scratch, p: Fraction, half: int) -> list[exp.CTE]:
    """CTEs up to ``names.pts`` (distinct values {val, c, cum} with r and n) and ``names.g``
    (n, r per group): the values of ranks [r − half − 1, r + half + 1]."""
    near = template.fill(_NEAR, half=template.number(half + 1))
    stats = build.order_statistics(values, names, near, {"__r": _rank(exp.column("__n"), p)})
    return [*stats, build.cte(names.g, template.fill(_GROUPS, keys=values.keys, hist=names.hist))]


@functools.lru_cache(maxsize=256)
def points_sql(values: build.Values, *, p: Fraction, half: int, column: str, n_column: str,
               tag: str = "w") -> exp.Select:
    """Per group: ``column`` = LIST of {v, c, r} covering ranks [r − half − 1, r + half + 1],
    and ``n_column`` = n (both NULL when the group has no values)."""
    nm, ks = build.scratch(tag), values.keys
    tree = template.fill(_POINTS, keys=ks, column=column, ncolumn=n_column, g=nm.g, pts=nm.pts,
                         match=template.conjunction(template.same_keys("g", "w", ks)))
    tree.set("with_", exp.With(expressions=_window(values, nm, p, half)))
    return t.cast(exp.Select, tree)


@functools.lru_cache(maxsize=256)
def distance_sql(values: build.Values, *, p: Fraction, bound: float, cap: int, add_remove: bool,
                 columns: tuple[str, str, str], rows: int = 1, tag: str = "d") -> exp.Select:
    """Per group: PTR distance D = min(D(x, b), cap) of the quantile p, with n and x_r.

    The pair form min{j − i − 1 : i ≤ r ≤ j, x_j − x_i > b} (b = ``bound``) over the padded
    order statistics (x_0 = L, x_{n+1} = U) is computed by an inequality join of the
    candidates for i (largest rank ≤ r of each value) and j (smallest rank ≥ r) inside the
    window [r − cap·rows, r + cap·rows]; pairs outside it have j − i − 1 ≥ cap·rows. For units
    of ``rows`` > 1 rows D is the pair form divided by ``rows``, rounded down (the distance in
    units, :mod:`dpsql._privacy.sensitivity`). For ``rows`` = 1 under ``add_remove`` (``add_remove``
    true) it is 0 if the exact LS exceeds b and otherwise max(1, pair form): the row-level
    ``add_remove`` D (A(0) = LS, A(k ≥ 1) = NRS); otherwise the pair form. ``columns``: names of
    D, n and x_r.
    """
    nm, ks = build.scratch(tag), values.keys
    dcol, ncol, fcol = columns
    reach = cap * rows
    lo, hi, bb = (template.double(x) for x in (values.lower, values.upper, bound))

    def x_at(by: int) -> exp.Expression:  # padded order statistic x_(r + by) from the points joined to g
        return template.fill(_X_AT, k=_offset("__r", "g", by), lo=lo, hi=hi)

    def x_near(name: str, by: int) -> exp.Expression:  # k in {r - 1, r, r + 1}
        return template.fill(_X_NEAR, k=_offset(name, "", by))

    ls = template.fill(_LS, a=x_near("__rp", 0), b=x_near("__rp", -1), c=x_near("__rm", 0), d=x_near("__rm", 1))
    pair = template.fill(_PAIR, reach=template.number(reach))
    if rows > 1:
        dist = template.fill(_PER_UNIT, pair=pair, rows=template.number(rows))
    elif add_remove:
        dist = template.fill(_ADD_REMOVE, pair=pair, bound=bb)
    else:
        dist = pair
    beyond = exp.GT(this=exp.Sub(this=exp.column("__x", "b"), expression=exp.column("__x", "a")), expression=bb)
    tree = template.fill(
        _DISTANCE, keys=ks, lo=lo, hi=hi, xm=x_at(-1), x0=x_at(0), xp=x_at(1),
        rp=_rank(_offset("__n", "g", 1), p), rm=_rank(_offset("__n", "g", -1), p), lsx=ls,
        cap=template.number(cap), dist=dist, dcol=dcol, ncol=ncol, fcol=fcol,
        ab=template.conjunction([*template.same_keys("a", "b", ks), beyond]),
        gw=template.conjunction(template.same_keys("g", "w", ks)),
        spd=template.conjunction(template.same_keys("s", "pd", ks)),
        lf=nm.lf, rt=nm.rt, pd=nm.pd, xs=nm.xs, ls=nm.ls, g=nm.g, pts=nm.pts)
    with_ = tree.args["with_"]
    with_.set("expressions", [*_window(values, nm, p, reach - 1), *with_.expressions])
    return t.cast(exp.Select, tree)


class WindowSQL(t.Protocol):
    """What :func:`quantile_subquery` reads of a PTR or smooth release plan."""

    @property
    def agg(self) -> t.Any: ...
    @property
    def stat(self) -> str: ...
    @property
    def lower(self) -> float: ...
    @property
    def upper(self) -> float: ...
    @property
    def columns(self) -> tuple[str, ...]: ...

    def window_sql(self, values: build.Values) -> exp.Select:
        """The per-group SELECT of the quantile's data-dependent quantities over ``values``."""
        ...


def quantile_subquery(prep: WindowSQL, source: str, keys: list[str], v: str | None) -> exp.Select | None:
    """The subquery of PTR and smooth: none for the mean (n alone is enough), else the
    quantities of ``prep.window_sql`` per group, in the columns ``prep.columns``."""
    if prep.stat == "mean":
        return None
    assert v is not None
    values = build.Values(source, tuple(keys), v, prep.lower, prep.upper, whole_numbers(prep.agg))
    return raw_select(prep.window_sql(values), [*keys, *prep.columns])


def count_and_mean(stat: str, v: exp.Expression | None) -> dict[str, exp.Expression]:
    """The grouped statistics PTR and smooth share: n, and for DP_MEAN the exact sum of the
    integers ``v`` (:func:`mean_grid`), from which :func:`exact_mean` is the exact mean."""
    assert v is not None
    out: dict[str, exp.Expression] = {"n": exp.Count(this=v.copy())}
    if stat == "mean":
        bigint = exp.DataType(this=exp.DataType.Type.BIGINT)
        out["s"] = exp.Sum(this=exp.Cast(this=v.copy(), to=bigint))
    return out


def mean_grid(agg: t.Any, stat: str) -> FixedPoint | None:
    """The fixed-point grid of DP_MEAN's values (None for a quantile): the mean is their exact
    sum over their exact count, not a floating-point AVG, whose rounding can move it by more than
    its local sensitivity (Casacuberta, Shoemate, Vadhan, Wagaman, CCS 2022). The mean is then
    that of values in [A·2^g, B·2^g] ⊇ [L, U], and its sensitivities use that width,
    :attr:`FixedPoint.width` (U − L plus at most one grid step, 2^−30 of U − L or finer). The grid
    is the laplace MEAN's (:meth:`FixedPoint.of_mean`): SUM's where it is fine enough, else centred."""
    if stat != "mean":
        return None
    return FixedPoint.of_mean(float(agg.lower), float(agg.upper), whole_numbers(agg))


def exact_mean(grid: FixedPoint, stats: t.Mapping[str, t.Any]) -> tuple[int, Fraction]:
    """(n, the exact mean) of one group from COUNT and SUM of the integers (:func:`count_and_mean`);
    the centre of the range for no rows."""
    n = min(max(whole(stats.get("n")), 0), 2**63)
    return n, grid.mean(n, whole(stats.get("s")))


class QuantileSQL:
    """The SQL half of a PTR or smooth release plan: ``stats`` and ``subquery`` from
    :func:`count_and_mean` and :func:`quantile_subquery`; the class supplies ``window_sql``."""

    stat: str

    def stats(self, v: exp.Expression | None) -> dict[str, exp.Expression]:
        return count_and_mean(self.stat, v)

    def subquery(self, source: str, keys: list[str], v: str | None) -> exp.Select | None:
        return quantile_subquery(t.cast(WindowSQL, self), source, keys, v)
