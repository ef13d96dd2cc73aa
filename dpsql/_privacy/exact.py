"""Exact (non-private) statistics of sorted, clipped data, and the argument checks the
sensitivity models share.

The conventions (ranks, padding with the bounds, the relations) are those of
:mod:`dpsql._privacy.sensitivity`, whose models use these functions; the brute-force oracle
(:mod:`dpsql.admin.bruteforce`) evaluates statistics with them too.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from typing import Final

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

ADD_REMOVE: Final = "add_remove"
REPLACE: Final = "replace"
RELATIONS: Final = (ADD_REMOVE, REPLACE)
#: A unit's rows replaced by 0 to m rows (see "Privacy units" in the module doc).
UNION: Final = "union"
#: Relations of the mean and quantile bounds that take ``max_rows``.
UNIT_RELATIONS: Final = (ADD_REMOVE, REPLACE, UNION)
#: Statistics with analytic sensitivities here ("percentile" takes p in [0, 100]).
ANALYTIC_STATISTICS: Final = ("count", "sum", "mean", "median", "quantile", "percentile")
#: Statistics :func:`statistic` (and so the brute force) can evaluate.
STATISTICS: Final = ANALYTIC_STATISTICS + ("var", "std")


# ----------------------------------------------------------------------------- validation
def require(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


def check_relation(relation: str, allowed: tuple[str, ...] = RELATIONS) -> str:
    require(relation in allowed, f"relation must be one of {allowed}, got {relation!r}")
    return relation


def check_rows(max_rows: int) -> int:
    require(int(max_rows) == max_rows and max_rows >= 1, f"max_rows must be an integer >= 1, got {max_rows}")
    return int(max_rows)


def check_bounds(lower: float, upper: float) -> tuple[float, float]:
    lo, hi = float(lower), float(upper)
    require(math.isfinite(lo) and math.isfinite(hi) and lo < hi,
             f"bounds must be finite with lower < upper, got [{lower}, {upper}]")
    return lo, hi


def check_beta(beta: float) -> float:
    require(math.isfinite(beta) and beta > 0, f"beta must be finite and > 0, got {beta}")
    return float(beta)


def check_k(k: int | None, name: str = "k_max") -> int | None:
    require(k is None or (int(k) == k and k >= 0), f"{name} must be an integer >= 0, got {k}")
    return None if k is None else int(k)


def canonical_statistic(stat: str, p: float | None = None) -> tuple[str, float | None]:
    """Normalise a statistic name: median and percentile become ``("quantile", p)``."""
    s = str(stat).lower()
    if s == "median":
        require(p is None or float(p) == 0.5, f"median is quantile 0.5, got p={p}")
        return "quantile", 0.5
    if s in ("quantile", "percentile"):
        top = 1.0 if s == "quantile" else 100.0
        require(p is not None and 0.0 <= float(p) <= top, f"{s} needs p in [0, {top:g}], got {p}")
        return "quantile", float(p) / top  # type: ignore[arg-type]
    require(s in STATISTICS, f"unknown statistic {stat!r}; expected one of {STATISTICS}")
    require(p is None, f"{s} takes no p, got p={p}")
    return s, None


def sorted_data(x_sorted: npt.ArrayLike, lower: float, upper: float) -> FloatArray:
    x = np.asarray(x_sorted, dtype=np.float64).reshape(-1)
    require(x.size == 0 or (bool(np.all(np.isfinite(x))) and x[0] >= lower and x[-1] <= upper),
             f"data must be finite and clipped to [{lower}, {upper}]")
    require(x.size < 2 or not np.any(x[1:] < x[:-1]), "data must be sorted (nondecreasing)")
    return x


# ----------------------------------------------------------------------------- statistics
def rank(p: float, n: int) -> int:
    """1-based rank of quantile ``p`` among ``n`` items: ``max(1, ceil(p*n))``.

    ``p`` is read as its shortest decimal (``Fraction(repr(p))``) so that e.g.
    ``rank(0.9, 10) == 9`` without floating-point drift. The median is
    ``rank(0.5, n) = ceil(n/2)`` (lower median for even ``n``); ``p = 0`` is
    the minimum, ``p = 1`` the maximum. For ``n = 0`` the rank is 1, which the
    padding convention maps to ``U``. ``rank(p, n+1) - rank(p, n)`` is 0 or 1.
    """
    require(0.0 <= float(p) <= 1.0 and n >= 0, f"need p in [0, 1] and n >= 0, got {p}, {n}")
    return max(1, math.ceil(_decimal(float(p)) * n))


@lru_cache(maxsize=1024)
def _decimal(p: float) -> Fraction:
    return Fraction(repr(p))


def order_statistic_quantile(x_sorted: npt.ArrayLike, p: float, lower: float,
                             upper: float) -> float:
    """Quantile ``p`` of sorted data: ``x_{rank(p, n)}`` with the padding convention."""
    lo, hi = check_bounds(lower, upper)
    x = sorted_data(x_sorted, lo, hi)
    r = rank(p, x.size)
    return float(x[r - 1]) if r <= x.size else hi


def statistic(stat: str, x_sorted: npt.ArrayLike, lower: float, upper: float,
              p: float | None = None) -> float:
    """Value of ``stat`` on sorted data in ``[lower, upper]`` (conventions in the module doc).

    ``stat`` is one of :data:`STATISTICS`; ``quantile`` takes ``p`` in [0, 1],
    ``percentile`` takes ``p`` in [0, 100]. ``var``/``std`` are population
    variance and standard deviation (0 on the empty set).
    """
    s, q = canonical_statistic(stat, p)
    lo, hi = check_bounds(lower, upper)
    x = sorted_data(x_sorted, lo, hi)
    if s == "quantile":
        return order_statistic_quantile(x, q, lo, hi)  # type: ignore[arg-type]
    if s in ("count", "sum") or x.size == 0:
        total = {"count": float(x.size), "sum": math.fsum(x.tolist()), "mean": (lo + hi) / 2}
        return total.get(s, 0.0)
    mu = math.fsum(x.tolist()) / x.size
    var = math.fsum(((x - mu) ** 2).tolist()) / x.size
    return {"mean": mu, "var": var, "std": math.sqrt(var)}[s]


# ----------------------------------------------------------------------------- gap profile
def gap_profile(v: FloatArray, top: int, budget: int) -> FloatArray | None:
    """P_w = max over a + t ≤ w of v[top + t] − v[top − a], for w = 0 .. ``top``, from the runs
    of equal values in the sorted ``v`` (2·top + 1 values, rank r at index ``top``); None when
    the pairs of runs would exceed ``budget`` (then the caller's direct form is cheaper).

    Below r only the first index of a run going down matters (the same value, a smaller a),
    above r the first index going up: a column with many ties, such as ages, has a handful of
    runs in any window, so this costs O(runs²), not O(top²). The maximum is over the same
    differences as ``max_{t ≤ w} v[top + t] − v[top + t − w]`` (the pairs with a + t < w are
    dominated: float subtraction is monotone), so the result is the same to the last bit.
    """
    right, left = v[top:], v[top::-1]  # right[t] = x_{r+t}, left[a] = x_{r-a}
    ts = np.flatnonzero(np.r_[True, right[1:] != right[:-1]])
    as_ = np.flatnonzero(np.r_[True, left[1:] != left[:-1]])
    if ts.size * as_.size > budget:
        return None
    d = as_[:, None] + ts[None, :]
    gaps = right[ts][None, :] - left[as_][:, None]
    keep = d <= top
    best = np.full(top + 1, -np.inf)
    np.maximum.at(best, d[keep], gaps[keep])
    return np.maximum.accumulate(best)
