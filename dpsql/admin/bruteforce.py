"""Empirical sensitivities by enumerating every neighbouring dataset (seed 001's method).

Datasets are multisets of values from a small finite *universe* (any value may
repeat: seed 001's scenario (b)), stored as sorted tuples. Neighbours:

* ``"add_remove"`` (unbounded DP): add one universe value or remove one record;
  the distance between two datasets is the size of their multiset symmetric
  difference (seed 001's Hamming distance).
* ``"replace"`` (bounded DP): change one record to another universe value; the
  distance between two datasets of equal size ``n`` is ``n`` minus the size of
  their multiset intersection.

Both distances are path lengths in the neighbour graph, so the ball of radius
``k`` is found by breadth-first steps and ``A(x, k) = max(LS(x), max over
neighbours y of A(y, k - 1))``, which memoisation makes cheap: ``n <= 7``,
six universe values and ``k <= 3`` take under a second.

Statistics are evaluated by :func:`dpsql.privacy.sensitivity.statistic` with clipping
bounds ``L = min(universe)`` and ``U = max(universe)``, so the conventions
(rank of a quantile, padding, mean of the empty set = midpoint, population
variance) are the analytic module's. A dataset without neighbours (``n = 0``
under replace) has local sensitivity 0.
"""

from __future__ import annotations

import bisect
import itertools
import math
from functools import lru_cache
from typing import Iterable, Iterator

from dpsql.privacy.sensitivity import ADD_REMOVE, REPLACE, RELATIONS, canonical_statistic, statistic

Dataset = tuple[float, ...]
Universe = tuple[float, ...]


def make_universe(values: Iterable[float]) -> Universe:
    """Sorted distinct values as floats; at least two, so that ``L < U``."""
    u = tuple(sorted({float(v) for v in values}))
    if len(u) < 2 or not all(math.isfinite(v) for v in u):
        raise ValueError(f"a universe needs at least two finite values, got {u}")
    return u


def _dataset(x: Iterable[float], universe: Universe) -> Dataset:
    d = tuple(sorted(float(v) for v in x))
    members = set(universe)
    if any(v not in members for v in d):
        raise ValueError(f"dataset {d} has values outside the universe {universe}")
    return d


def _check_relation(relation: str) -> str:
    if relation not in RELATIONS:
        raise ValueError(f"relation must be one of {RELATIONS}, got {relation!r}")
    return relation


def datasets(universe: Iterable[float], n: int) -> Iterator[Dataset]:
    """Every multiset of size ``n`` over the universe, as a sorted tuple."""
    return itertools.combinations_with_replacement(make_universe(universe), n)


def _remove(x: Dataset, v: float) -> Dataset:
    i = bisect.bisect_left(x, v)
    return x[:i] + x[i + 1:]


def _insert(x: Dataset, v: float) -> Dataset:
    i = bisect.bisect_left(x, v)
    return x[:i] + (v,) + x[i:]


@lru_cache(maxsize=None)
def _neighbours(universe: Universe, relation: str, x: Dataset) -> tuple[Dataset, ...]:
    out: set[Dataset] = set()
    for a in sorted(set(x)):
        smaller = _remove(x, a)
        if relation == ADD_REMOVE:
            out.add(smaller)
        else:
            out.update(_insert(smaller, v) for v in universe if v != a)
    if relation == ADD_REMOVE:
        out.update(_insert(x, v) for v in universe)
    return tuple(sorted(out))


def neighbours(x: Iterable[float], universe: Iterable[float], relation: str) -> list[Dataset]:
    """All datasets at distance exactly 1 from ``x``."""
    u = make_universe(universe)
    return list(_neighbours(u, _check_relation(relation), _dataset(x, u)))


def ball(x: Iterable[float], k: int, universe: Iterable[float], relation: str) -> set[Dataset]:
    """All datasets at distance at most ``k`` from ``x`` (``x`` included)."""
    u, rel = make_universe(universe), _check_relation(relation)
    seen = frontier = {_dataset(x, u)}
    for _ in range(k):
        frontier = {y for z in frontier for y in _neighbours(u, rel, z)} - seen
        seen = seen | frontier
    return seen


def distance(x: Iterable[float], y: Iterable[float], relation: str) -> int:
    """Hamming distance: symmetric difference (add_remove) or changed records (replace)."""
    cx: dict[float, int] = {}
    cy: dict[float, int] = {}
    for v in x:
        cx[float(v)] = cx.get(float(v), 0) + 1
    for v in y:
        cy[float(v)] = cy.get(float(v), 0) + 1
    common = sum(min(c, cy.get(v, 0)) for v, c in cx.items())
    nx, ny = sum(cx.values()), sum(cy.values())
    if _check_relation(relation) == REPLACE:
        if nx != ny:
            raise ValueError("replace neighbours have equal sizes")
        return nx - common
    return nx + ny - 2 * common


class _Engine:
    """Memoised f, LS, A and the range of f over balls, for one statistic and universe."""

    def __init__(self, stat: str, p: float | None, universe: Universe, relation: str) -> None:
        self.stat, self.p, self.universe, self.relation = stat, p, universe, relation
        self.lower, self.upper = universe[0], universe[-1]
        self._f: dict[Dataset, float] = {}
        self._ls: dict[Dataset, float] = {}
        self._a: dict[tuple[Dataset, int], float] = {}
        self._range: dict[tuple[Dataset, int], tuple[float, float]] = {}

    def nbrs(self, x: Dataset) -> tuple[Dataset, ...]:
        return _neighbours(self.universe, self.relation, x)

    def f(self, x: Dataset) -> float:
        if x not in self._f:
            self._f[x] = statistic(self.stat, x, self.lower, self.upper, self.p)
        return self._f[x]

    def ls(self, x: Dataset) -> float:
        if x not in self._ls:
            fx = self.f(x)
            self._ls[x] = max((abs(fx - self.f(y)) for y in self.nbrs(x)), default=0.0)
        return self._ls[x]

    def a(self, x: Dataset, k: int) -> float:
        if k == 0:
            return self.ls(x)
        key = (x, k)
        if key not in self._a:
            self._a[key] = max([self.ls(x)] + [self.a(y, k - 1) for y in self.nbrs(x)])
        return self._a[key]

    def value_range(self, x: Dataset, k: int) -> tuple[float, float]:
        """(min, max) of f over the ball of radius k around x."""
        if k == 0:
            return self.f(x), self.f(x)
        key = (x, k)
        if key not in self._range:
            parts = [self.value_range(y, k - 1) for y in self.nbrs(x)] + [(self.f(x), self.f(x))]
            self._range[key] = (min(lo for lo, _ in parts), max(hi for _, hi in parts))
        return self._range[key]


@lru_cache(maxsize=256)
def _engine(stat: str, p: float | None, universe: Universe, relation: str) -> _Engine:
    return _Engine(stat, p, universe, relation)


def _setup(stat: str, p: float | None, universe: Iterable[float], relation: str) -> _Engine:
    s, q = canonical_statistic(stat, p)
    return _engine(s, q, make_universe(universe), _check_relation(relation))


def value(stat: str, x: Iterable[float], universe: Iterable[float],
          p: float | None = None) -> float:
    """The statistic of ``x`` with the universe's bounds (the analytic module's definition)."""
    eng = _setup(stat, p, universe, ADD_REMOVE)
    return eng.f(_dataset(x, eng.universe))


def local_sensitivity(stat: str, x: Iterable[float], universe: Iterable[float], relation: str,
                      p: float | None = None) -> float:
    """``LS(f, x) = max |f(x) - f(y)|`` over the neighbours ``y`` of ``x``."""
    eng = _setup(stat, p, universe, relation)
    return eng.ls(_dataset(x, eng.universe))


def local_sensitivity_at_distance(stat: str, x: Iterable[float], k: int,
                                  universe: Iterable[float], relation: str,
                                  p: float | None = None) -> float:
    """``A(f, x, k) = max LS(f, y)`` over ``y`` at distance at most ``k`` from ``x``."""
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    eng = _setup(stat, p, universe, relation)
    return eng.a(_dataset(x, eng.universe), k)


def distance_to_instability(stat: str, x: Iterable[float], b: float, universe: Iterable[float],
                            relation: str, p: float | None = None, k_max: int = 3) -> int:
    """``min(D(f, x, b), k_max + 1)``: the least ``k <= k_max`` with ``A(f, x, k) > b``."""
    eng = _setup(stat, p, universe, relation)
    d = _dataset(x, eng.universe)
    return next((k for k in range(k_max + 1) if eng.a(d, k) > b), k_max + 1)


def smooth_sensitivity(stat: str, x: Iterable[float], beta: float, universe: Iterable[float],
                       relation: str, p: float | None = None, k_max: int = 3) -> float:
    """``max_{k <= k_max} e^{-beta k} A(f, x, k)``: a lower bound on the smooth
    sensitivity, equal to it once ``A(f, x, k_max)`` is the largest LS of any dataset
    (e.g. ``k_max >= n`` for quantiles, where ``A(n) = U - L``)."""
    eng = _setup(stat, p, universe, relation)
    d = _dataset(x, eng.universe)
    return max(math.exp(-beta * k) * eng.a(d, k) for k in range(k_max + 1))


def global_sensitivity(stat: str, universe: Iterable[float], n: int, relation: str, k: int = 1,
                       p: float | None = None) -> float:
    """``max |f(x) - f(y)|`` over every ``x`` of size ``n`` and every ``y`` within
    distance ``k`` of it (sizes ``n - k .. n + k`` under add_remove). The global
    sensitivity for group size ``k`` is the maximum of this over ``n``."""
    if n < 0 or k < 1:
        raise ValueError(f"need n >= 0 and k >= 1, got n={n}, k={k}")
    eng = _setup(stat, p, universe, relation)
    best = 0.0
    for x in itertools.combinations_with_replacement(eng.universe, n):
        lo, hi = eng.value_range(x, k)
        fx = eng.f(x)
        best = max(best, fx - lo, hi - fx)
    return best
