"""Pieces shared by the data-dependent mechanisms ``ptr`` and ``smooth`` (SPEC §4.2).

Neighbouring relation and group privacy (:func:`calibrate`)
    The row-level quantities of :mod:`dpsql.privacy.sensitivity` are for one row step. dpsql runs them
    on the clipped, non-NULL values of one group (after WHERE), where a privacy unit can cause

    * ``add_remove``: up to m row additions or removals (m = ``ctx.max_rows``);
    * ``replace``, no GROUP BY: up to m steps, each a change of one value, or (when the value
      becomes NULL, or leaves or enters the WHERE filter) an addition or a removal: the
      *union* relation. The formulas used are valid for all three kinds of step: for
      quantiles the NRS order-statistic form (A(0) = NRS value ≥ LS under either relation;
      ``sensitivity``'s ``replace`` model for n ≥ 1, its ``add_remove`` model for n = 0, where
      ``replace`` would claim no neighbours); for the mean Â(k) = W/max(n − k, 1) (any dataset of
      size n' ≥ 1 has LS ≤ W/n' under both relations, and its size is at least n − k);
    * ``replace`` with GROUP BY: a changed row can leave one group and join another, so 2m steps
      of the union relation.

    With s steps, the mechanism is calibrated for one step at ε_r = ε/s and
    δ_r = δ/Σ_{i<s} e^{i·ε_r}; group privacy (Dwork & Roth 2014, §2.3, proved by chaining s
    steps: P[M(x_0) ∈ E] ≤ e^{sε_r}·P[M(x_s) ∈ E] + Σ_{i<s} e^{iε_r}·δ_r) then gives (ε, δ)
    for the unit. A single row step touches one group, so per-group releases compose in
    parallel. For s = 1 nothing changes.

Order statistics in SQL (:func:`points_sql`, :func:`distance_sql`)
    Per group, one hash pass over the clipped values builds a histogram of
    :data:`dpsql.sql.build.BUCKETS` equal buckets on [L, U] (count, min, max;
    :func:`dpsql.sql.build.order_statistics`); a window sum gives cumulative counts, n and the target
    rank r = max(1, ⌈p·n⌉) (exact, in integer arithmetic with p as its shortest decimal, as
    :func:`dpsql.privacy.sensitivity.rank`). Only the buckets holding a rank of the window
    [r − h − 1, r + h + 1] are kept; a bucket with a single value (every bucket of an integer
    column such as age) is already exact, and the values of the others are counted in a second
    pass that joins the source to those few buckets. Nothing sorts the table. The result is the
    list of distinct values {v, c, r} (value, multiplicity, cumulative rank) covering the window.
"""

from __future__ import annotations

import math
import typing as t
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from sqlglot import exp

from dpsql.privacy import noise as _noise
from dpsql.privacy import sensitivity as sens
from dpsql.privacy.budget import Cost
from dpsql.errors import InternalError, PrivacyError
from dpsql.mechanisms.base import raw_select
from dpsql.sql import build

if t.TYPE_CHECKING:
    from dpsql.mechanisms.base import Context

#: The truncation of the smooth bound: tail term (U − L)·e^{−β(K+1)} at most TOL·(U − L) ...
TRUNCATION_TOL = 1e-12
#: ... with K at most this many ranks on each side of r.
MAX_WINDOW = 4096
#: Largest denominator of p (its shortest decimal) for the exact integer rank in SQL.
MAX_DENOMINATOR = 10**30
#: Data-dependent noise scales are sampled on the grid 2^k, k = grid_exponent(U − L) − GRID_SHIFT
#: (public), so that the grid never depends on the data (Mironov 2012; dpsql.privacy.noise).
GRID_SHIFT = 10


# ----------------------------------------------------------------------------- calibration
@dataclass(frozen=True)
class Calibration:
    """How a unit's change maps onto row steps, and the per-step budget."""

    relation: str  # "add_remove", or "replace" meaning the union relation (module docstring)
    steps: int
    epsilon: float  # per step
    delta: float  # per step
    why: str

    def model_relation(self, n: int) -> str:
        """The :mod:`dpsql.privacy.sensitivity` relation whose quantile model is valid here."""
        return sens.ADD_REMOVE if self.relation == sens.ADD_REMOVE or n == 0 else sens.REPLACE


def calibrate(ctx: "Context", cost: Cost) -> Calibration:
    """Per-step ε and δ for the context (module docstring)."""
    m = int(ctx.max_rows)
    if ctx.neighbouring == "replace":
        steps = 2 * m if ctx.grouped else m
        why = ("replace with GROUP BY: a row can move between groups, 2 steps per row"
               if ctx.grouped else "replace: one value changes, appears or disappears per row")
        relation = sens.REPLACE
    else:
        steps, relation, why = m, sens.ADD_REMOVE, "add_remove: one row added or removed per row"
    if steps > 1:
        why += f"; {steps} steps per unit (group privacy)"
    eps = cost.epsilon / steps
    delta = cost.delta / math.fsum(math.exp(i * eps) for i in range(steps)) if cost.delta else 0.0
    return Calibration(relation, steps, eps, delta, why)


# ----------------------------------------------------------------------------- the mean from n
def mean_smooth(n: int, beta: float, lower: float, upper: float, relation: str) -> float:
    """β-smooth upper bound on LS of the clipped mean, from n alone."""
    if relation == sens.ADD_REMOVE:
        return sens.mean_smooth_sensitivity(n, beta, lower, upper, relation)
    w = upper - lower  # union: Â(k) = W/max(n − k, 1), log-convex in k on [0, n − 1]
    return max(w / max(n, 1), w * math.exp(-beta * max(n - 1, 0)))


def mean_distance(n: int, b: float, lower: float, upper: float, relation: str) -> int:
    """PTR distance of the clipped mean from n alone (capped at sensitivity.MAX_DISTANCE)."""
    if relation == sens.ADD_REMOVE:
        return sens.mean_distance(n, b, lower, upper, relation)
    w = upper - lower  # union: least k with W/max(n − k, 1) > b

    def high(k: int) -> bool:
        return w / max(n - k, 1) > b

    if not high(max(n - 1, 0)):
        return sens.MAX_DISTANCE
    k = max(0, min(n - 1, math.floor(n - w / b) + 1))
    while k > 0 and high(k - 1):
        k -= 1
    while not high(k):
        k += 1
    return k


# ----------------------------------------------------------------------------- ranks
def exact_p(p: float, label: str) -> Fraction:
    """p as its shortest decimal, refused if the exact rank would overflow SQL integers."""
    q = Fraction(repr(float(p)))
    if q.denominator > MAX_DENOMINATOR:
        raise PrivacyError(f"{label}: the quantile {p!r} has too many decimals for an exact rank")
    return q


def truncation(beta: float, lower: float, upper: float) -> int:
    """K of the truncated smooth bound (SPEC §4.2)."""
    return min(sens.truncation_k(beta, lower, upper, TRUNCATION_TOL * (upper - lower)), MAX_WINDOW)


def public_grid(lower: float, upper: float) -> int:
    """Exponent of the public output grid for data-dependent noise scales."""
    return _noise.grid_exponent(upper - lower) - GRID_SHIFT


def window_values(points: t.Sequence[t.Mapping[str, t.Any]] | None, first: int,
                  last: int) -> np.ndarray:
    """Order statistics x_first..x_last from distinct points {v, c, r} (r: cumulative rank)."""
    if last < first:
        return np.zeros(0)
    vals, counts = [], []
    for pt in points or ():
        v, c, r = float(pt["v"]), int(pt["c"]), int(pt["r"])
        lo, hi = max(r - c + 1, first), min(r, last)
        if lo <= hi:
            vals.append(v)
            counts.append(hi - lo + 1)
    out = np.repeat(np.asarray(vals, dtype=np.float64), np.asarray(counts, dtype=np.int64))
    if out.size != last - first + 1:  # pragma: no cover - the SQL always covers the window
        raise InternalError("the order statistics of the window are incomplete")
    return out


# ----------------------------------------------------------------------------- SQL
def _rank(n: str, p: Fraction) -> str:
    """r = max(1, ⌈p·n⌉) in exact integer arithmetic (p as a fraction)."""
    return f"GREATEST(1, (CAST({n} AS HUGEINT) * {p.numerator} + {p.denominator - 1}) // {p.denominator})"


def _window(values: build.Values, names: build.Scratch, p: Fraction, half: int) -> str:
    """CTEs up to ``names.pts`` (distinct values {val, c, cum} with r and n) and ``names.g``
    (n, r per group): the values of ranks [r − half − 1, r + half + 1]."""
    near = f"__cum >= __r - {half + 1} AND __cum - __c < __r + {half + 1}"
    ks = values.keys
    return f"""{build.order_statistics(values, names, near, {"__r": _rank("__n", p)})}, {names.g} AS (
  SELECT {build.leading(ks)}ANY_VALUE(__n) AS __n, ANY_VALUE(__r) AS __r FROM {names.hist} {build.group_by(ks)}
)"""


def points_sql(values: build.Values, *, p: Fraction, half: int, column: str, n_column: str,
               tag: str = "w") -> str:
    """Per group: ``column`` = LIST of {v, c, r} covering ranks [r − half − 1, r + half + 1],
    and ``n_column`` = n (both NULL when the group has no values)."""
    nm, ks = build.scratch(tag), values.keys
    return f"""WITH {_window(values, nm, p, half)}
SELECT {build.leading(ks, 'g')}LIST({{'v': w.__val, 'c': w.__c, 'r': w.__cum}} ORDER BY w.__val)
         FILTER (WHERE w.__val IS NOT NULL) AS {column}, ANY_VALUE(g.__n) AS {n_column}
FROM {nm.g} AS g LEFT JOIN {nm.pts} AS w ON {build.same_keys('g', 'w', ks)}
GROUP BY {build.leading(ks, 'g')}g.__n"""


def distance_sql(values: build.Values, *, p: Fraction, bound: float, cap: int, add_remove: bool,
                 columns: tuple[str, str, str], tag: str = "d") -> str:
    """Per group: PTR distance D = min(D(x, b), cap) of the quantile p, with n and x_r.

    D is the pair form min{j − i − 1 : i ≤ r ≤ j, x_j − x_i > b} (b = ``bound``) over the
    padded order statistics (x_0 = L, x_{n+1} = U), computed by an inequality join of the
    candidates for i (largest rank ≤ r of each value) and j (smallest rank ≥ r) inside the
    window [r − cap, r + cap]; pairs outside it have j − i − 1 ≥ cap. Under ``add_remove`` it
    is 0 if the exact LS exceeds b and otherwise max(1, pair form): dpsql.privacy.sensitivity's
    ``add_remove`` D (A(0) = LS, A(k ≥ 1) = NRS). ``columns``: names of D, n and x_r.
    """
    nm, ks = build.scratch(tag), values.keys
    kc, (dcol, ncol, fcol) = build.leading(ks), columns
    lo, hi, bb = (build.literal(x, double=True) for x in (values.lower, values.upper, bound))

    def x_at(k: str) -> str:  # padded order statistic x_k from the points joined to g
        return (f"CASE WHEN {k} <= 0 THEN {lo} WHEN {k} > g.__n THEN {hi} ELSE "
                f"MIN(w.__val) FILTER (WHERE w.__cum - w.__c < {k} AND {k} <= w.__cum) END")

    def x_near(k: str) -> str:  # k in {r - 1, r, r + 1}
        return f"(CASE {k} - __r WHEN -1 THEN __xm WHEN 0 THEN __x0 ELSE __xp END)"

    ls = (f"GREATEST(ABS({x_near('__rp')} - __x0), ABS({x_near('__rp - 1')} - __x0), "
          f"CASE WHEN __n >= 1 THEN GREATEST(ABS({x_near('__rm')} - __x0), "
          f"ABS({x_near('__rm + 1')} - __x0)) ELSE 0 END)")
    pair = f"COALESCE(pd.__d, {cap})"
    dist = (f"CASE WHEN s.__ls > {bb} THEN 0 ELSE GREATEST(1, {pair}) END" if add_remove else pair)
    return f"""WITH {_window(values, nm, p, cap - 1)}, {nm.lf} AS (
  SELECT {kc}LEAST(__cum, __r) AS __i, __val AS __x FROM {nm.pts} WHERE __cum - __c + 1 <= __r
  UNION ALL SELECT {kc}0, {lo} FROM {nm.g}
), {nm.rt} AS (
  SELECT {kc}GREATEST(__cum - __c + 1, __r) AS __j, __val AS __x FROM {nm.pts} WHERE __cum >= __r
  UNION ALL SELECT {kc}__n + 1, {hi} FROM {nm.g}
), {nm.pd} AS (
  SELECT {build.leading(ks, 'a')}MIN(b.__j - a.__i - 1) AS __d
  FROM {nm.lf} AS a JOIN {nm.rt} AS b ON {build.same_keys('a', 'b', ks, f'b.__x - a.__x > {bb}')}
  {build.group_by(ks, 'a')}
), {nm.xs} AS (
  SELECT {build.leading(ks, 'g')}g.__n AS __n, g.__r AS __r, {x_at('g.__r - 1')} AS __xm, {x_at('g.__r')} AS __x0,
         {x_at('g.__r + 1')} AS __xp, {_rank('g.__n + 1', p)} AS __rp, {_rank('g.__n - 1', p)} AS __rm
  FROM {nm.g} AS g LEFT JOIN {nm.pts} AS w ON {build.same_keys('g', 'w', ks)}
  GROUP BY {build.leading(ks, 'g')}g.__n, g.__r
), {nm.ls} AS (
  SELECT *, {ls} AS __ls FROM {nm.xs}
)
SELECT {build.leading(ks, 's')}LEAST({cap}, {dist}) AS {dcol}, s.__n AS {ncol}, s.__x0 AS {fcol}
FROM {nm.ls} AS s LEFT JOIN {nm.pd} AS pd ON {build.same_keys('s', 'pd', ks)}"""


class WindowSQL(t.Protocol):
    """What :func:`quantile_subquery` reads of a PTR or smooth release plan."""

    @property
    def stat(self) -> str: ...
    @property
    def lower(self) -> float: ...
    @property
    def upper(self) -> float: ...
    @property
    def columns(self) -> tuple[str, ...]: ...

    def window_sql(self, values: build.Values) -> str:
        """The per-group SELECT of the quantile's data-dependent quantities over ``values``."""
        ...


def quantile_subquery(prep: WindowSQL, source: str, keys: list[str], v: str | None) -> exp.Select | None:
    """The subquery of PTR and smooth: none for the mean (n alone is enough), else the
    quantities of ``prep.window_sql`` per group, in the columns ``prep.columns``."""
    if prep.stat == "mean":
        return None
    assert v is not None
    values = build.Values(source, tuple(keys), v, prep.lower, prep.upper)
    return raw_select(prep.window_sql(values), [*keys, *prep.columns])


def count_and_mean(stat: str, v: exp.Expression | None) -> dict[str, exp.Expression]:
    """The grouped statistics PTR and smooth share: n, and the exact mean for DP_MEAN."""
    assert v is not None
    out: dict[str, exp.Expression] = {"n": exp.Count(this=v.copy())}
    if stat == "mean":
        out["mean"] = exp.Avg(this=v.copy())
    return out


class QuantileSQL:
    """The SQL half of a PTR or smooth release plan: ``stats`` and ``subquery`` from
    :func:`count_and_mean` and :func:`quantile_subquery`; the class supplies ``window_sql``."""

    stat: str

    def stats(self, v: exp.Expression | None) -> dict[str, exp.Expression]:
        return count_and_mean(self.stat, v)

    def subquery(self, source: str, keys: list[str], v: str | None) -> exp.Select | None:
        return quantile_subquery(t.cast(WindowSQL, self), source, keys, v)
