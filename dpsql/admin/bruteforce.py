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

Statistics are evaluated by :func:`dpsql._privacy.sensitivity.statistic` with clipping
bounds ``L = min(universe)`` and ``U = max(universe)``, so the conventions
(rank of a quantile, padding, mean of the empty set = midpoint, population
variance) are the analytic module's. A dataset without neighbours (``n = 0``
under replace) has local sensitivity 0.

Privacy units of several rows (the ``unit_*`` functions)
    A dataset is a multiset of *units*, each a small multiset of values (a sorted
    tuple), stored as a sorted tuple of units; the statistic reads the flattened
    rows. With ``max_rows = m``, neighbours

    * ``"add_remove"``: add one unit of 1 to m rows of the universe, or remove
      one unit (all its rows);
    * ``"replace"``: replace the rows of one unit by as many other rows (n and
      every unit's number of rows stay the same);
    * ``"union"``: replace the rows of one unit by 0 to m rows (a unit's values
      may become NULL or leave a WHERE filter; a unit with no rows stays, and
      may get rows back). Datasets may then hold empty units.

    Unit distance is the number of such steps, and ``LS``, ``A(k)``, ``D(b)``,
    ``S`` and the global sensitivity are taken over unit neighbours, exactly as
    above. For m = 1, ``add_remove`` and ``replace`` are the row-level relations,
    and ``union`` is their union (given empty units to fill). A statistic is a
    name of :data:`dpsql._privacy.sensitivity.STATISTICS` or any function of the
    sorted rows (e.g. a centred sum).

Vector statistics (:func:`vector_sensitivity`)
    A histogram's L1 and L∞ sensitivities over every unit neighbour, for a function that
    reads the units (e.g. a statement run on them in DuckDB).
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from functools import cache, lru_cache

from dpsql._privacy.sensitivity import (
    ADD_REMOVE,
    RELATIONS,
    REPLACE,
    UNION,
    UNIT_RELATIONS,
    canonical_statistic,
    statistic,
)

Dataset = tuple[float, ...]
Universe = tuple[float, ...]
Unit = tuple[float, ...]
UnitDataset = tuple[Unit, ...]
#: A statistic name, or a function of the sorted rows.
Stat = str | Callable[[Dataset], float]


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


@cache
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


# ----------------------------------------------------------------------------- units of several rows
def _check_unit_relation(relation: str) -> str:
    if relation not in UNIT_RELATIONS:
        raise ValueError(f"relation must be one of {UNIT_RELATIONS}, got {relation!r}")
    return relation


def _check_max_rows(max_rows: int) -> int:
    if int(max_rows) != max_rows or max_rows < 1:
        raise ValueError(f"max_rows must be an integer >= 1, got {max_rows}")
    return int(max_rows)


@cache
def unit_types(universe: Universe, max_rows: int, empty: bool = False) -> tuple[Unit, ...]:
    """Every unit of 1 to ``max_rows`` values of the universe (0 to ``max_rows`` with ``empty``)."""
    u = make_universe(universe)
    sizes = range(0 if empty else 1, _check_max_rows(max_rows) + 1)
    return tuple(t for size in sizes for t in itertools.combinations_with_replacement(u, size))


def rows_of(x: Iterable[Iterable[float]]) -> Dataset:
    """The flattened, sorted rows of a dataset of units."""
    return tuple(sorted(float(v) for unit in x for v in unit))


def _unit_dataset(x: Iterable[Iterable[float]], universe: Universe, max_rows: int,
                  relation: str) -> UnitDataset:
    units = tuple(sorted(_dataset(unit, universe) for unit in x))
    lo = 0 if relation == UNION else 1
    if any(not lo <= len(unit) <= max_rows for unit in units):
        raise ValueError(f"every unit of {units} must hold {lo} to {max_rows} rows under {relation}")
    return units


def unit_datasets(universe: Iterable[float], units: int, max_rows: int,
                  relation: str = ADD_REMOVE) -> Iterator[UnitDataset]:
    """Every dataset of exactly ``units`` units (empty units too under ``union``)."""
    types = unit_types(make_universe(universe), _check_max_rows(max_rows),
                       _check_unit_relation(relation) == UNION)
    return itertools.combinations_with_replacement(types, units)


def _drop(x: UnitDataset, i: int) -> UnitDataset:
    return x[:i] + x[i + 1:]


def _put(x: UnitDataset, unit: Unit) -> UnitDataset:
    i = bisect.bisect_left(x, unit)
    return x[:i] + (unit,) + x[i:]


@cache
def _unit_neighbours(universe: Universe, relation: str, m: int, x: UnitDataset) -> tuple[UnitDataset, ...]:
    out: set[UnitDataset] = set()
    types = unit_types(universe, m, relation == UNION)
    seen: set[Unit] = set()
    for i, unit in enumerate(x):
        if unit in seen:
            continue
        seen.add(unit)
        rest = _drop(x, i)
        if relation == ADD_REMOVE:
            out.add(rest)
        else:
            out.update(_put(rest, new) for new in types
                       if new != unit and (relation == UNION or len(new) == len(unit)))
    if relation == ADD_REMOVE:
        out.update(_put(x, new) for new in types)
    return tuple(sorted(out))


def unit_neighbours(x: Iterable[Iterable[float]], universe: Iterable[float], relation: str,
                    max_rows: int) -> list[UnitDataset]:
    """All datasets of units one unit step from ``x``."""
    u, m, rel = make_universe(universe), _check_max_rows(max_rows), _check_unit_relation(relation)
    return list(_unit_neighbours(u, rel, m, _unit_dataset(x, u, m, rel)))


def unit_ball(x: Iterable[Iterable[float]], k: int, universe: Iterable[float], relation: str,
              max_rows: int) -> set[UnitDataset]:
    """All datasets of units within ``k`` unit steps of ``x`` (``x`` included)."""
    u, m, rel = make_universe(universe), _check_max_rows(max_rows), _check_unit_relation(relation)
    seen = frontier = {_unit_dataset(x, u, m, rel)}
    for _ in range(k):
        frontier = {y for z in frontier for y in _unit_neighbours(u, rel, m, z)} - seen
        seen = seen | frontier
    return seen


class _UnitEngine(_Engine):
    """:class:`_Engine` over datasets of units: f reads the rows, neighbours are unit steps."""

    def __init__(self, stat: Stat, p: float | None, universe: Universe, relation: str, m: int) -> None:
        super().__init__("count", p, universe, relation)  # the name is replaced by ``fn`` below
        self.m = m
        lo, hi = self.lower, self.upper
        if callable(stat):
            self.fn: Callable[[Dataset], float] = stat
        else:
            self.fn = lambda rows: statistic(str(stat), rows, lo, hi, p)
        self._rows_f: dict[Dataset, float] = {}

    def nbrs(self, x: Dataset) -> tuple[Dataset, ...]:  # type: ignore[override]
        return _unit_neighbours(self.universe, self.relation, self.m, x)  # type: ignore[arg-type]

    def f(self, x: Dataset) -> float:  # type: ignore[override]
        rows = rows_of(x)  # type: ignore[arg-type]
        if rows not in self._rows_f:
            self._rows_f[rows] = float(self.fn(rows))
        return self._rows_f[rows]


@lru_cache(maxsize=256)
def _unit_engine(stat: Stat, p: float | None, universe: Universe, relation: str, m: int) -> _UnitEngine:
    return _UnitEngine(stat, p, universe, relation, m)


def _unit_setup(stat: Stat, p: float | None, universe: Iterable[float], relation: str,
                max_rows: int) -> _UnitEngine:
    if not callable(stat):
        stat, p = canonical_statistic(stat, p)
    return _unit_engine(stat, p, make_universe(universe), _check_unit_relation(relation),
                        _check_max_rows(max_rows))


def unit_local_sensitivity(stat: Stat, x: Iterable[Iterable[float]], universe: Iterable[float],
                           relation: str, max_rows: int, p: float | None = None) -> float:
    """``LS`` under unit neighbours: ``max |f(x) - f(y)|`` over datasets one unit step away."""
    eng = _unit_setup(stat, p, universe, relation, max_rows)
    return eng.ls(_unit_dataset(x, eng.universe, eng.m, eng.relation))  # type: ignore[arg-type]


def unit_local_sensitivity_at_distance(stat: Stat, x: Iterable[Iterable[float]], k: int,
                                       universe: Iterable[float], relation: str, max_rows: int,
                                       p: float | None = None) -> float:
    """``A(f, x, k)`` in units: the largest unit-level ``LS`` within ``k`` unit steps."""
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    eng = _unit_setup(stat, p, universe, relation, max_rows)
    return eng.a(_unit_dataset(x, eng.universe, eng.m, eng.relation), k)  # type: ignore[arg-type]


def unit_distance_to_instability(stat: Stat, x: Iterable[Iterable[float]], b: float,
                                 universe: Iterable[float], relation: str, max_rows: int,
                                 p: float | None = None, k_max: int = 2) -> int:
    """``min(D(f, x, b), k_max + 1)`` in units."""
    eng = _unit_setup(stat, p, universe, relation, max_rows)
    d = _unit_dataset(x, eng.universe, eng.m, eng.relation)
    return next((k for k in range(k_max + 1) if eng.a(d, k) > b), k_max + 1)  # type: ignore[arg-type]


def unit_smooth_sensitivity(stat: Stat, x: Iterable[Iterable[float]], beta: float,
                            universe: Iterable[float], relation: str, max_rows: int,
                            p: float | None = None, k_max: int = 2) -> float:
    """``max_{k <= k_max} e^{-beta k} A(f, x, k)`` in units: a lower bound on the smooth
    sensitivity in unit steps (equal to it once ``A(f, x, k_max)`` is the largest LS)."""
    eng = _unit_setup(stat, p, universe, relation, max_rows)
    d = _unit_dataset(x, eng.universe, eng.m, eng.relation)
    return max(math.exp(-beta * k) * eng.a(d, k) for k in range(k_max + 1))  # type: ignore[arg-type]


def unit_global_sensitivity(stat: Stat, universe: Iterable[float], units: int, relation: str,
                            max_rows: int, k: int = 1, p: float | None = None) -> float:
    """``max |f(x) - f(y)|`` over every dataset ``x`` of ``units`` units and every ``y``
    within ``k`` unit steps of it. The global sensitivity is the maximum over ``units``."""
    if units < 0 or k < 1:
        raise ValueError(f"need units >= 0 and k >= 1, got units={units}, k={k}")
    eng = _unit_setup(stat, p, universe, relation, max_rows)
    best = 0.0
    for x in unit_datasets(eng.universe, units, eng.m, eng.relation):
        lo, hi = eng.value_range(x, k)  # type: ignore[arg-type]
        fx = eng.f(x)  # type: ignore[arg-type]
        best = max(best, fx - lo, hi - fx)
    return best


# ----------------------------------------------------------------------------- vector statistics
#: A vector statistic of a dataset of units (a histogram: key → count).
Vector = Callable[[UnitDataset], Mapping[Hashable, float]]


def vector_sensitivity(counts: Vector, universe: Iterable[float], units: int, relation: str,
                       max_rows: int = 1) -> tuple[float, float]:
    """The L1 and L∞ distances, at most, between ``counts`` of a dataset of ``units`` units
    (each of 1 to ``max_rows`` values of the universe) and ``counts`` of each of its neighbours
    (one unit step, :func:`unit_neighbours`): the empirical sensitivities of a histogram.

    ``counts`` reads the units themselves, not only their rows (a statement that truncates each
    unit's rows needs to know whose rows they are); with ``max_rows`` 1 the units are rows.
    """
    u, m, rel = make_universe(universe), _check_max_rows(max_rows), _check_unit_relation(relation)
    memo: dict[UnitDataset, Mapping[Hashable, float]] = {}

    def of(x: UnitDataset) -> Mapping[Hashable, float]:
        if x not in memo:
            memo[x] = dict(counts(x))
        return memo[x]

    l1 = linf = 0.0
    for x in unit_datasets(u, units, m, rel):
        fx = of(x)
        for y in _unit_neighbours(u, rel, m, x):
            fy = of(y)
            moved = [abs(fx.get(key, 0) - fy.get(key, 0)) for key in set(fx) | set(fy)]
            l1, linf = max(l1, math.fsum(moved)), max(linf, max(moved, default=0.0))
    return l1, linf
