"""Analytic sensitivities of COUNT, SUM, MEAN, MEDIAN and quantiles (SPEC 4.1, 4.2).

Conventions, shared with :mod:`dpsql.admin.bruteforce` through :func:`statistic`:

* Data are clipped to ``[lower, upper]`` (``L < U``); ``W = U - L``.
* ``relation``: ``"add_remove"`` (unbounded DP, the default: add or remove one
  record; distance = size of the symmetric difference) or ``"replace"``
  (bounded DP, ``n`` public: change one record; distance = records changed).
* Quantile ``p`` of ``n`` sorted values is ``x_r``, ``r = rank(p, n) =
  max(1, ceil(p*n))``; the median is quantile 0.5, the lower median for even
  ``n``. Order statistics are padded: ``x_i = L`` for ``i <= 0``, ``x_i = U``
  for ``i > n``, so the quantile of the empty set is ``U``. The mean of the
  empty set is ``(L + U)/2``; its sum and (population) variance are 0.
* ``LS(x)`` is the local sensitivity, ``A(x, k)`` the largest ``LS`` within
  distance ``k`` (``A(x, 0) = LS(x)``), ``D(x, b) = min{k : A(x, k) > b}``,
  ``S_beta(x) = max_k exp(-beta k) A(x, k)``. Where ``A`` is not exact, an
  upper bound ``Â`` with ``Â(x, k) <= Â(x', k+1)`` for neighbours is used; its
  ``D`` is still 1-sensitive and its ``S`` beta-smooth (Nissim, Raskhodnikova,
  Smith 2007, "Smooth sensitivity and sampling in private data analysis",
  STOC, "NRS" below; Dwork and Lei 2009 for PTR).

Exactness, checked by brute-force enumeration in the tests (for data that can
take the values ``L`` and ``U``): count and sum exact; mean: ``LS`` exact, ``A``
exact under replace, and under add_remove ``A(k >= 1) = W/max(n - k, 2)``, an
upper bound attained by the worst dataset of size ``n`` (SPEC 4.2's
``W/max(n - 1, 1)`` is valid but loose; seed 000's ``U/(n + 1)`` is too small
for ``n >= 2``); quantiles: ``LS`` exact, ``A(k >= 1)`` the NRS order-statistic
formula (seed 003, slide 18), exact under replace, an upper bound under
add_remove (exact there only for the minimum, p = 0).

Privacy units of up to m rows (``max_rows = m``)
------------------------------------------------

A privacy unit (an id, or the policy's group of units) contributes up to m rows.
The unit-level relations are

* ``add_remove``: add or remove all rows of one unit (1 to m rows);
* ``replace``: replace the rows of one unit by as many other rows (n public);
* ``union``: replace the rows of one unit by 0 to m other rows. Its value may
  also become NULL or leave (or enter) a WHERE filter, so this is what a
  mechanism must protect under the policy's ``replace``: a change of value, an
  addition or a removal, up to m of each. For m = 1 it is the union of the two
  row-level relations.

``LS``, ``A``, ``D`` and ``S`` are then taken with unit neighbours and unit
distance. The functions below take ``max_rows = m`` (default 1, the row-level
quantities above, unchanged) and return upper bounds ``Â`` with
``Â(x, k) <= Â(x', k + 1)`` for unit neighbours, so ``D`` stays 1-sensitive and
``S`` beta-smooth in unit steps (NRS 2007, Def. 2.1 and Lemma 2.3, applied to
the unit relation; Dwork and Lei 2009 for PTR). They only read the values (the
partition into units is not known), so they hold for every partition.

Quantiles (the NRS form at k·m rows). Let ``P_s(x) = max{x_j - x_i : i <= r <= j,
j - i <= s}`` over the padded order statistics, so NRS's row-level bound is
``A(k) = P_{k+1}``. (a) One row step (a change, an addition or a removal)
shifts every rank-aligned order statistic by at most one place: for the new
rank r' = rank(p, n +- 1) and every t, ``x'_{r'+t}`` lies in
``[x_{r+t-1}, x_{r+t+1}]`` (``rank(p, n+1) - rank(p, n)`` is 0 or 1). So m steps
move the quantile within ``[x_{r-m}, x_{r+m}]`` and ``LS_unit(x) <= P_m(x)``.
(b) One row step gives ``P_s(x) <= P_{s+1}(x')``: after a removal or a value
moving up, ``x'_j >= x_j`` and ``x'_{i-1} <= x_i``, so the pair (i - 1, j) of x'
brackets r' in {r - 1, r}; after an addition or a value moving down,
``x'_{j+1} >= x_j`` and ``x'_i <= x_i``, and (i, j + 1) brackets r' in
{r, r + 1}. Either pair is one rank wider and spans at least x_j - x_i. A unit
step is at most m row steps, hence
``Â_unit(x, k) = P_{(k+1)m}(x)``, i.e. NRS's ``A`` at ``(k+1)m - 1`` rows, bounds
``A`` under all three relations, and ``P_{(k+1)m}(x) <= P_{(k+2)m}(x')`` gives
the neighbour condition. PTR's distance in units is the row pair-form distance
divided by m, rounded down: ``min{k : P_{(k+1)m} > b} = floor(D_pair / m)``
with ``D_pair = min{j - i - 1 : i <= r <= j, x_j - x_i > b}``.

The mean, from n alone (W = U - L). Removing j rows R from n' rows, the rest K,
moves the mean by ``j |mu_K - mu_R| / n' <= jW/n'`` (to the midpoint, at most
W/2, when j = n'); adding j rows moves it by at most ``jW/(n' + j)``. Over
datasets of size n', the largest unit-level LS is therefore at most
``mW/max(n', m + 1)`` under ``add_remove`` (``mW/n'`` for n' > m, attained by
removing m rows at L from rows at U; at most ``mW/(m + 1)`` otherwise, attained
at n' = 1 and n' = m + 1), and, under ``union`` (remove j <= m, add j' <= m:
the two moves add to at most ``W max(j/n', j'/(n' - j + j'))``), at most
``W min(1, m/n')`` (W for n' = 0). Both are nonincreasing in n', and within k
units of x every dataset has at least ``n - km`` rows, so

* ``add_remove``: ``Â(k) = mW/max(n - km, m + 1)`` (for m = 1, ``W/max(n - k, 2)``);
* ``union``: ``Â(k) = mW/max(n - km, m)`` (for m = 1, ``W/max(n - k, 1)``);
* ``replace``: n is fixed and j rows change: ``Â(k) = W min(m, n)/n`` (0 for n = 0).

The brute force over datasets of units (:mod:`dpsql.admin.bruteforce`) checks
each bound for m = 1, 2, 3 under the three relations in ``tests/test_sensitivity.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Final

import numpy as np
import numpy.typing as npt

from dpsql._privacy.exact import (  # the relations and statistics are part of this module's API
    ADD_REMOVE,
    RELATIONS,
    REPLACE,
    UNION,
    UNIT_RELATIONS,
    FloatArray,
    canonical_statistic,
    check_beta,
    check_bounds,
    check_k,
    check_relation,
    check_rows,
    gap_profile,
    rank,
    require,
    sorted_data,
    statistic,
)

#: D(x, b) when no dataset at any distance has local sensitivity above b.
MAX_DISTANCE: Final[int] = 2**31 - 1
_BLOCK: Final = 1 << 21  # matrix entries per block of the order-statistic profile


# ----------------------------------------------------------------------------- models
class _Model:
    """A(0) = ``ls``, A(k >= 1) = ``tail(k)``; A is nondecreasing and constant from ``sat`` on."""

    def __init__(self, ls: float, tail: Callable[[int], float], sat: int = 1) -> None:
        self.ls0, self.tail, self.sat = float(ls), tail, sat

    def a(self, k: int) -> float:
        return self.ls0 if k == 0 else self.tail(k)

    def smooth(self, beta: float, k_max: int | None) -> float:
        """Exact max_k e^{-beta k} A(k): log A(k) - beta k is convex on [1, sat - 1] for the
        closed forms here (constant, or -log(n - km) - beta k), and A(sat) may be cut off by
        the floor of the denominator, so k in {0, 1, sat - 1, sat}."""
        ks = {0, min(1, self.sat), max(self.sat - 1, 0), self.sat}
        return max(math.exp(-beta * k) * self.a(k) for k in ks)


def _const(ls: float, top: float) -> _Model:
    return _Model(ls, lambda k: top)


def _mean_add_remove(n: int, width: float, ls: float) -> _Model:
    return _Model(ls, lambda k: width / max(n - k, 2), max(n - 2, 1))


def _mean_units(n: int, width: float, relation: str, m: int) -> _Model:
    """The mean from n alone for units of up to m rows (module doc, "Privacy units")."""
    if relation == REPLACE:
        top = width * min(m, n) / n if n else 0.0
        return _const(top, top)
    floor = m + 1 if relation == ADD_REMOVE else m

    def a(k: int) -> float:
        return m * width / max(n - k * m, floor)

    sat = max(0, -(-(n - floor) // m))  # least k with n - km <= floor: A is constant from there
    return _Model(a(0), a, sat)


class _OrderStats(_Model):
    """Quantile p of sorted data given as a window of order statistics.

    ``window`` holds ``x_start, ..., x_{start+len-1}`` of ``n`` sorted values.
    ``A(k >= 1) = max_{0<=t<=k+1} x_{r+t} - x_{r+t-k-1}`` (NRS 2007) and
    ``A(k) = W`` for ``k >= n``. For units of ``m`` rows, or under ``union``,
    ``A(k) = P_{(k+1)m}``, the NRS value at ``(k+1)m - 1`` rows (module doc).
    """

    def __init__(self, window: FloatArray, start: int, n: int, p: float,
                 lower: float, upper: float, relation: str, m: int = 1) -> None:
        self.window, self.start, self.n, self.p = window, start, n, p
        self.lower, self.upper, self.relation, self.m = lower, upper, relation, m
        self.r = rank(p, n)
        self.isolated = m == 1 and relation == REPLACE and n == 0  # no neighbours at all
        if m > 1 or relation == UNION:
            # A(k) = P_{(k+1)m}; it is W once (k+1)m > n, from k = ceil((n+1)/m) - 1 on
            super().__init__(self.nrs(m - 1), lambda k: self.nrs((k + 1) * m - 1), -(-(n + 1) // m) - 1)
        elif self.isolated:
            super().__init__(0.0, lambda k: 0.0, 0)
        else:
            super().__init__(self.local(), self.nrs, n)

    def span(self, lo: int, hi: int) -> FloatArray:
        """Padded order statistics x_lo, ..., x_hi (1-based ranks)."""
        n_left = max(0, min(hi, 0) - lo + 1)
        n_right = max(0, hi - max(lo, self.n + 1) + 1)
        first, last = max(lo, 1), min(hi, self.n)
        mid = self.window[:0]
        if first <= last:
            require(self.start <= first and last < self.start + self.window.size,
                     f"the window starting at rank {self.start} lacks ranks {first}..{last}")
            mid = self.window[first - self.start: last - self.start + 1]
        return np.concatenate([np.full(n_left, self.lower), mid, np.full(n_right, self.upper)])

    def local(self) -> float:
        """Exact LS: replace, the NRS value at k = 0 (seed 003, slide 11)."""
        if self.relation == REPLACE:
            return self.nrs(0)
        # add_remove, r+- = rank(p, n +- 1): adding v makes the r+-th order statistic any
        # value in [x_{r+ - 1}, x_{r+}]; removing x_i makes it x_{r-} (i > r-) or x_{r- + 1}.
        r, vals = self.r, self.span(self.r - 1, self.r + 1)
        cands = [rank(self.p, self.n + 1)]
        cands += [cands[0] - 1] + ([rank(self.p, self.n - 1), rank(self.p, self.n - 1) + 1]
                                   if self.n >= 1 else [])
        return max(abs(float(vals[c - r + 1] - vals[1])) for c in cands)

    def nrs(self, k: int) -> float:
        if k >= self.n:
            return self.upper - self.lower
        v = self.span(self.r - k - 1, self.r + k + 1)
        return float(np.max(v[k + 1:] - v[: k + 2]))

    def profile(self, k_max: int) -> FloatArray:
        """A(0), ..., A(k_max), vectorised in O(m k_max^2) on 2(k_max + 1)m + 1 order statistics:
        A(k) = P_{(k+1)m} = max_{0<=t<=(k+1)m} x_{r+t} - x_{r+t-(k+1)m}, A(0) as the model says."""
        out = np.zeros(k_max + 1)
        if self.isolated:
            return out
        top = (k_max + 1) * self.m
        v = self.span(self.r - top, self.r + top)
        runs = gap_profile(v, top, (k_max + 1) * (top + 1) // 4)  # few distinct values: by runs
        if runs is not None:
            out = runs[(np.arange(k_max + 1) + 1) * self.m]
            out[0] = self.ls0
            return out
        right, left = v[top:], v[top:: -1]  # right[t] = x_{r+t}, left[a] = x_{r-a}
        t = np.arange(top + 1)[None, :]
        step = max(1, _BLOCK // (top + 1))
        for s in range(0, k_max + 1, step):
            width = (np.arange(s, min(s + step, k_max + 1))[:, None] + 1) * self.m
            a = width - t
            diffs = np.where(a >= 0, right[t] - left[np.maximum(a, 0)], -np.inf)
            out[s: s + width.shape[0]] = diffs.max(axis=1)
        out[0] = self.ls0
        return out

    def smooth(self, beta: float, k_max: int | None) -> float:
        width = self.upper - self.lower
        if k_max is not None:  # A(k) = W for k >= sat: no tail term needed beyond sat
            k = min(k_max, self.sat)
            best = float(np.max(np.exp(-beta * np.arange(k + 1)) * self.profile(k)))
            return best if k_max >= self.sat else max(best, width * math.exp(-beta * (k + 1)))
        k = min(self.sat, 63)
        while True:  # exact: stop once the tail bound W e^{-beta(k+1)} cannot win
            best = float(np.max(np.exp(-beta * np.arange(k + 1)) * self.profile(k)))
            if k >= self.sat or width * math.exp(-beta * (k + 1)) <= best:
                return best
            k = min(2 * k + 1, self.sat)


def _model(stat: str, x_sorted: npt.ArrayLike, lower: float, upper: float, relation: str,
           p: float | None, max_rows: int = 1) -> _Model:
    s, q = canonical_statistic(stat, p)
    require(s in ("count", "sum", "mean", "quantile"),
             f"no analytic sensitivity for {stat!r} (dpsql.admin.bruteforce has one)")
    m = check_rows(max_rows)
    units = m > 1 or relation == UNION
    require(not units or s in ("mean", "quantile"),
             f"unit-level bounds are for the mean and quantiles; for {stat!r} see global_sensitivity")
    rel = check_relation(relation, UNIT_RELATIONS if units else RELATIONS)
    lo, hi = check_bounds(lower, upper)
    x = sorted_data(x_sorted, lo, hi)
    n, width = x.size, hi - lo
    if s == "quantile":
        assert q is not None
        return _OrderStats(x, 1, n, q, lo, hi, rel, m)
    if units:  # the mean from n alone
        return _mean_units(n, width, rel, m)
    if s == "count":
        return _const(1.0, 1.0) if rel == ADD_REMOVE else _const(0.0, 0.0)
    if rel == REPLACE and n == 0:
        return _const(0.0, 0.0)
    if s == "sum":
        if rel == ADD_REMOVE:
            return _const(max(abs(lo), abs(hi)), max(abs(lo), abs(hi)))
        return _const(max(hi - x[0], x[-1] - lo), width)
    if rel == REPLACE:
        return _const(max(hi - x[0], x[-1] - lo) / n, width / n)
    if n == 0:
        ls = width / 2
    else:
        mu = statistic("mean", x, lo, hi)
        add = max(hi - mu, mu - lo) / (n + 1)
        drop = max(mu - x[0], x[-1] - mu) / (n - 1) if n >= 2 else abs(x[0] - (lo + hi) / 2)
        ls = float(max(add, drop))
    return _mean_add_remove(n, width, ls)


def _distance(model: _Model, b: float, k_max: int | None) -> int:
    require(math.isfinite(b) and b >= 0, f"b must be finite and >= 0, got {b}")
    lo, hi = 0, model.sat if k_max is None else min(model.sat, k_max)
    if model.a(hi) <= b:
        return MAX_DISTANCE if k_max is None else k_max + 1
    while lo < hi:  # binary search: A is nondecreasing
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if model.a(mid) <= b else (lo, mid)
    return lo


# ----------------------------------------------------------------------------- public API
def global_sensitivity(stat: str, lower: float, upper: float, relation: str = ADD_REMOVE,
                       max_rows: int = 1, p: float | None = None) -> float:
    """Exact global sensitivity when one privacy unit changes up to ``max_rows`` rows.

    ``max_rows = m`` is also the group-privacy distance ``k`` of seed 001.
    count: ``m`` (add_remove), 0 (replace: n is public). sum: ``m*max(|L|,|U|)``
    (add_remove), ``m*(U-L)`` (replace, where no value leaves; when a replaced value may
    become NULL or leave a WHERE filter it is ``m*max(U-L, |L|, |U|)``, SPEC 4.1, as
    :func:`dpsql.mechanisms.additive.sensitivities` uses). mean: ``(U-L)/2`` for
    ``m = 1`` under add_remove (the mean of the empty set is the midpoint, and
    any other single-row change moves the mean by at most ``W/2``), ``U-L``
    for ``m >= 2`` and under replace. median/quantile: ``U-L`` (both).
    """
    s, _ = canonical_statistic(stat, p)
    rel = check_relation(relation)
    lo, hi = check_bounds(lower, upper)
    require(int(max_rows) == max_rows and max_rows >= 1, "max_rows must be an integer >= 1")
    m, width = int(max_rows), hi - lo
    if s == "count":
        return float(m) if rel == ADD_REMOVE else 0.0
    if s == "sum":
        return m * (max(abs(lo), abs(hi)) if rel == ADD_REMOVE else width)
    if s == "mean":
        return width / 2 if (rel == ADD_REMOVE and m == 1) else width
    if s == "quantile":
        return width
    raise ValueError(f"no analytic sensitivity for {stat!r} (dpsql.admin.bruteforce has one)")


def local_sensitivity(stat: str, x_sorted: npt.ArrayLike, lower: float, upper: float,
                      relation: str = ADD_REMOVE, p: float | None = None) -> float:
    """Exact ``LS(f, x)`` under either relation (for data that may take the values L, U).

    count: 1 (add_remove), 0 (replace). sum: ``max(|L|, |U|)`` (add_remove),
    ``max(U - x_1, x_n - L)`` (replace). mean, add_remove:
    ``max(max(U-mu, mu-L)/(n+1), max(mu-x_1, x_n-mu)/(n-1))``
    (``|x_1 - (L+U)/2|`` for the removal when ``n = 1``; ``W/2`` when ``n = 0``).
    mean, replace: ``max(U - x_1, x_n - L)/n``. quantile, replace:
    ``max(x_r - x_{r-1}, x_{r+1} - x_r)`` (seed 003, slide 11); add_remove: the
    largest move to ``x_{r+-1}, x_{r+}`` (adding) or ``x_{r-}, x_{r-+1}``
    (removing), ``r+- = rank(p, n+-1)``. Never use it to calibrate noise (SPEC 4.2).
    """
    return _model(stat, x_sorted, lower, upper, relation, p).a(0)


def local_sensitivity_at_distance(stat: str, x_sorted: npt.ArrayLike, k: int, lower: float,
                                  upper: float, relation: str = ADD_REMOVE,
                                  p: float | None = None, max_rows: int = 1) -> float:
    """``A(f, x, k)``, exact or an upper bound as listed in the module doc.

    quantile (NRS 2007): ``max_{0<=t<=k+1} x_{r+t} - x_{r+t-k-1}`` for ``k >= 1``,
    exact under replace, an upper bound under add_remove. mean, add_remove:
    ``W / max(n-k, 2)`` for ``k >= 1`` (``W/max(m, 2)`` is the largest ``LS`` of any
    dataset of size ``m``; seed 000's ``U/(n+1)`` is too small). mean, replace:
    ``W/n``. sum, replace: ``W``; count and sum under add_remove are constant.

    With ``max_rows = m > 1`` or ``relation = "union"`` (mean and quantiles only): the
    unit-level bound of the module doc, at distance k in units: quantile ``P_{(k+1)m}``;
    mean from n alone, ``mW/max(n-km, m+1)`` (add_remove), ``mW/max(n-km, m)`` (union),
    ``W min(m, n)/n`` (replace).
    """
    model = _model(stat, x_sorted, lower, upper, relation, p, max_rows)
    return model.a(int(check_k(k, "k") or 0))


def distance_to_instability(stat: str, x_sorted: npt.ArrayLike, b: float, lower: float,
                            upper: float, relation: str = ADD_REMOVE, p: float | None = None,
                            k_max: int | None = None, max_rows: int = 1) -> int:
    """``D(f, x, b) = min{k : A(f, x, k) > b}`` with the ``A`` of this module.

    Returns :data:`MAX_DISTANCE` when ``A`` never exceeds ``b`` (e.g. ``b >= U-L``
    for quantiles). With ``k_max`` the search stops there and the result is
    ``min(D, k_max + 1)``, still a 1-sensitive lower bound on the true D. For
    quantiles under replace it equals the pair form ``min{j - i - 1 : i <= r <= j,
    x_j - x_i > b}`` of SPEC 4.2; under add_remove it is at least that. With
    ``max_rows = m > 1`` or under union it is the distance in units, the pair form
    divided by m and rounded down.
    """
    model = _model(stat, x_sorted, lower, upper, relation, p, max_rows)
    return _distance(model, b, check_k(k_max))


def smooth_sensitivity(stat: str, x_sorted: npt.ArrayLike, beta: float, lower: float,
                       upper: float, relation: str = ADD_REMOVE, p: float | None = None,
                       k_max: int | None = None, max_rows: int = 1) -> float:
    """``S_beta(x) = max_k exp(-beta k) A(x, k)``, a beta-smooth upper bound on ``LS``.

    Exact smooth sensitivity where ``A`` is exact (count, sum; mean and
    quantiles under replace), an upper bound otherwise. For quantiles ``k_max = K`` gives the
    truncation of SPEC 4.2, ``max(max_{k<=K} e^{-beta k} A(k), (U-L) e^{-beta(K+1)})``,
    also beta-smooth; ``None`` computes the exact maximum. Other statistics
    use closed forms and ignore ``k_max``. ``max_rows`` and ``union``: the unit-level
    ``A`` of :func:`local_sensitivity_at_distance`, so ``S`` is beta-smooth in unit steps.
    """
    model = _model(stat, x_sorted, lower, upper, relation, p, max_rows)
    return model.smooth(check_beta(beta), check_k(k_max))


def _mean_n_model(n: int, lower: float, upper: float, relation: str, max_rows: int = 1) -> _Model:
    lo, hi = check_bounds(lower, upper)
    require(int(n) == n and n >= 0, f"n must be an integer >= 0, got {n}")
    m = check_rows(max_rows)
    if m > 1 or relation == UNION:
        return _mean_units(int(n), hi - lo, check_relation(relation, UNIT_RELATIONS), m)
    if check_relation(relation) == REPLACE:
        return _const((hi - lo) / n, (hi - lo) / n) if n >= 1 else _const(0.0, 0.0)
    return _mean_add_remove(int(n), hi - lo, (hi - lo) / max(n, 2))


def mean_sensitivity_bound(n: int, lower: float, upper: float, relation: str = ADD_REMOVE,
                           k: int = 0, max_rows: int = 1) -> float:
    """Largest ``A(x, k)`` of the mean over datasets of size ``n``, from ``n`` alone:
    ``W/max(n-k, 2)`` (add_remove) or ``W/n`` (replace, 0 for ``n = 0``). Units of up to
    ``m = max_rows`` rows, k units away (module doc): ``mW/max(n-km, m+1)`` (add_remove),
    ``mW/max(n-km, m)`` (union), ``W min(m, n)/n`` (replace)."""
    return _mean_n_model(n, lower, upper, relation, max_rows).a(check_k(k, "k") or 0)


def mean_distance(n: int, b: float, lower: float, upper: float,
                  relation: str = ADD_REMOVE, max_rows: int = 1) -> int:
    """PTR distance of the mean from ``n`` alone: ``min{k : mean_sensitivity_bound(n, k) > b}``.

    add_remove: ``max(0, floor(n - W/b) + 1)`` when ``b < W/2`` (up to float
    rounding at the boundary), else :data:`MAX_DISTANCE`. replace: 0 if
    ``W/n > b`` else :data:`MAX_DISTANCE`. It is at most
    ``distance_to_instability("mean", x, b, ...)`` for every ``x`` of size n.
    With ``max_rows`` or union: in units, with the bounds of :func:`mean_sensitivity_bound`.
    """
    return _distance(_mean_n_model(n, lower, upper, relation, max_rows), b, None)


def mean_smooth_sensitivity(n: int, beta: float, lower: float, upper: float,
                            relation: str = ADD_REMOVE, max_rows: int = 1) -> float:
    """``max_k e^{-beta k} mean_sensitivity_bound(n, k)``: smooth sensitivity of the mean
    from ``n`` alone. add_remove: ``max(W/max(n, 2), e^{-beta max(n-2, 0)} W/2)``;
    replace: ``W/n``. With ``max_rows`` or union the maximum is at k = 0 or at the last
    one or two k before the bound stops changing (log-convex until then)."""
    return _mean_n_model(n, lower, upper, relation, max_rows).smooth(check_beta(beta), None)


def truncation_k(beta: float, lower: float, upper: float, tol: float) -> int:
    """Least ``K >= 0`` with tail term ``(U-L) e^{-beta(K+1)} <= tol`` (SPEC 4.2)."""
    b = check_beta(beta)
    lo, hi = check_bounds(lower, upper)
    require(math.isfinite(tol) and tol > 0, f"tol must be finite and > 0, got {tol}")
    k = max(0, math.ceil(math.log((hi - lo) / tol) / b) - 2)  # 1 below, against rounding
    while (hi - lo) * math.exp(-b * (k + 1)) > tol:
        k += 1
    return k


def window_ranks(n: int, p: float, k_max: int, max_rows: int = 1) -> tuple[int, int]:
    """First and last 1-based ranks of the order statistics that the window functions
    need for quantile ``p`` of ``n`` values truncated at ``k_max``: those of
    ``[r - (k_max + 1)m, r + (k_max + 1)m]`` (m = ``max_rows``) inside ``[1, n]``
    (empty if ``first > last``)."""
    r, reach = rank(p, n), (check_k(k_max) or 0) + 1
    reach *= check_rows(max_rows)
    return max(1, r - reach), min(n, r + reach)


def _window_model(window: npt.ArrayLike, start: int, n: int, p: float, lower: float,
                  upper: float, relation: str, max_rows: int) -> _OrderStats:
    lo, hi = check_bounds(lower, upper)
    require(n >= 0 and start >= 1, f"need n >= 0 and start >= 1, got n={n}, start={start}")
    _, q = canonical_statistic("quantile", p)
    assert q is not None
    m = check_rows(max_rows)
    allowed = UNIT_RELATIONS if m > 1 or relation == UNION else RELATIONS
    return _OrderStats(sorted_data(window, lo, hi), int(start), int(n), q, lo, hi,
                       check_relation(relation, allowed), m)


def smooth_sensitivity_window(window: npt.ArrayLike, start: int, n: int, p: float, beta: float,
                              lower: float, upper: float, k_max: int,
                              relation: str = ADD_REMOVE, max_rows: int = 1) -> float:
    """Truncated smooth sensitivity of quantile ``p`` from a window of order statistics.

    ``window`` holds ``x_start, ..., x_{start+len-1}`` (sorted, clipped) of ``n``
    values and must cover :func:`window_ranks` ``(n, p, k_max, max_rows)``. Equals
    ``smooth_sensitivity("quantile", x, beta, ..., k_max=k_max, max_rows=max_rows)``;
    costs ``O(m k_max^2)`` vectorised work, independent of ``n``.
    """
    return _window_model(window, start, n, p, lower, upper, relation, max_rows).smooth(
        check_beta(beta), check_k(k_max) or 0)


def distance_to_instability_window(window: npt.ArrayLike, start: int, n: int, p: float, b: float,
                                   lower: float, upper: float, k_max: int,
                                   relation: str = ADD_REMOVE, max_rows: int = 1) -> int:
    """``min(D(x, b), k_max + 1)`` for quantile ``p`` from a window covering
    :func:`window_ranks` ``(n, p, k_max, max_rows)``; see :func:`distance_to_instability`."""
    model = _window_model(window, start, n, p, lower, upper, relation, max_rows)
    return _distance(model, b, check_k(k_max) or 0)
