"""Analytic sensitivities (dpsql._privacy.sensitivity) checked against brute force (dpsql.admin.bruteforce).

Every analytic LS, A(k), D(b), S_beta and global sensitivity is compared with an
exhaustive enumeration of neighbours on all small datasets (n <= 6, k <= 3,
both neighbouring relations). Formulas claimed exact must match; the others
must be upper bounds. Property tests check the smooth-sensitivity axioms.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from dpsql._privacy import sensitivity as sens
from dpsql.admin import bruteforce as bf

# Universes whose min and max are the clipping bounds L and U: around 0, and bounds that
# exclude 0 on either side (where U − L and max(|L|, |U|) differ).
UNIVERSES = [(0, 1, 3, 4, 7), (-2, -1, 0, 2), (17, 29, 61, 90), (-90, -61, -29, -17)]
RELATIONS = ("add_remove", "replace")
STATS = [("count", None), ("sum", None), ("mean", None), ("median", None)] + [
    ("quantile", p) for p in (0.0, 0.25, 0.5, 0.9, 1.0)
]
N_MAX, K_MAX = 6, 3
B_VALUES = (0.0, 0.37, 1.13, 2.71, 6.5)  # 0, or away from attainable values: no float ties
TOL = 1e-9


def _id(case: tuple[str, float | None]) -> str:
    return case[0] if case[1] is None else f"{case[0]}{case[1]}"


def _datasets(universe: tuple[float, ...], n_max: int = N_MAX) -> Iterator[tuple[float, ...]]:
    for n in range(n_max + 1):
        yield from itertools.combinations_with_replacement(universe, n)


def _a_exact(stat: str, relation: str, k: int) -> bool:
    """Where the module claims A(k) exact (for data that can take the values L and U)."""
    # mean and quantiles under add_remove are upper bounds for k >= 1
    return k == 0 or stat in ("count", "sum") or relation == "replace"


# ---------------------------------------------------------------- seed 000's formulas (for docs)
def seed000_mean_ls(n: int, upper: float) -> float:
    """Seed 000's local sensitivity of the mean: only adds a row, with L = 0."""
    return abs(upper / (n + 1))


def seed000_ptr_distance(n: int, upper: float, b: float) -> int:
    """Seed 000's dist_to_high_ls: first k with upper/(n-k+1) >= b."""
    k = 0
    while abs(upper / (n - k + 1)) < b:
        k += 1
    return k


def seed000_smooth_final(n: int, upper: float, epsilon: float, delta: float) -> float:
    """Seed 000's 'final sensitivity' 2*S with S over k < 200 of e^{-beta k} upper/(n-k+1)."""
    beta = epsilon / (2 * np.log(2 / delta))
    return 2 * max(math.exp(-beta * k) * upper / (n - k + 1) for k in range(200))


# ---------------------------------------------------------------- conventions
def test_rank_convention() -> None:
    assert [sens.rank(0.5, n) for n in range(1, 7)] == [1, 1, 2, 2, 3, 3]  # lower median
    assert sens.rank(0.9, 10) == 9 and sens.rank(0.1, 10) == 1 and sens.rank(0.25, 4) == 1
    assert sens.rank(0.0, 7) == 1 and sens.rank(1.0, 7) == 7 and sens.rank(0.5, 0) == 1
    for p in (0.0, 0.1, 0.25, 1 / 3, 0.5, 0.9, 0.99, 1.0):
        steps = {sens.rank(p, n + 1) - sens.rank(p, n) for n in range(200)}
        assert steps <= {0, 1}, p  # used by the add_remove proofs
    with pytest.raises(ValueError):
        sens.rank(1.5, 3)


def test_statistic_conventions_shared_with_bruteforce() -> None:
    assert sens.statistic("median", [1, 2, 3, 4], 0, 9) == 2.0
    assert sens.statistic("percentile", [1, 2, 3, 4], 0, 9, p=75) == 3.0
    assert sens.statistic("quantile", [], 0, 9, p=0.3) == 9.0  # padded x_1 = U
    assert sens.statistic("mean", [], 0, 9) == 4.5
    assert sens.statistic("var", [0, 9], 0, 9) == pytest.approx(20.25)
    assert sens.statistic("std", [0, 9], 0, 9) == pytest.approx(4.5)
    universe = (0, 1, 3, 4, 7)
    for x in _datasets(universe, 4):
        for stat, p in STATS + [("var", None), ("std", None), ("percentile", 90)]:
            assert bf.value(stat, x, universe, p) == sens.statistic(stat, x, 0, 7, p)


def test_neighbour_enumeration_matches_the_metric() -> None:
    universe = (0, 2, 5)
    for relation in RELATIONS:
        for x in _datasets(universe, 3):
            for k in range(3):
                lo = len(x) if relation == "replace" else max(0, len(x) - k)
                sizes = range(lo, len(x) + 1 if relation == "replace" else len(x) + k + 1)
                expected = {y for m in sizes for y in itertools.combinations_with_replacement(
                    (0.0, 2.0, 5.0), m) if bf.distance(x, y, relation) <= k}
                assert bf.ball(x, k, universe, relation) == expected


def test_bruteforce_var_and_std() -> None:
    assert bf.global_sensitivity("var", (0, 1), 2, "add_remove") == pytest.approx(0.25)
    assert bf.global_sensitivity("std", (0, 1), 2, "add_remove") == pytest.approx(0.5)
    assert bf.local_sensitivity("var", (0, 1), (0, 1), "replace") == pytest.approx(0.25)


# ---------------------------------------------------------------- global sensitivity
@pytest.mark.parametrize("relation", RELATIONS)
@pytest.mark.parametrize("case", STATS, ids=_id)
def test_global_sensitivity_is_exact(case: tuple[str, float | None], relation: str) -> None:
    stat, p = case
    for universe in UNIVERSES:
        lo, hi = min(universe), max(universe)
        for k in range(1, K_MAX + 1):
            brute = [bf.global_sensitivity(stat, universe, n, relation, k, p) for n in range(5)]
            analytic = sens.global_sensitivity(stat, lo, hi, relation, max_rows=k, p=p)
            assert all(analytic >= b - TOL for b in brute)
            assert analytic == pytest.approx(max(brute), abs=TOL), (universe, k, brute)


@pytest.mark.parametrize("universe", UNIVERSES)
def test_sum_under_replace_when_the_row_may_leave(universe: tuple[float, ...]) -> None:
    """A replaced row that becomes NULL or leaves the WHERE filter is a removal: the step set is
    the union of the two relations', and the sum moves by max(U − L, |L|, |U|), which is what
    the additive mechanism uses (the pure replace relation's U − L is less when 0 is outside)."""
    from dpsql._sql.options import Options
    from dpsql.mechanisms.additive import sensitivities
    from dpsql.mechanisms.base import Context

    lo, hi = min(universe), max(universe)
    union = max(bf.global_sensitivity("sum", universe, n, relation) for n in range(4) for relation in RELATIONS)
    assert union == pytest.approx(max(hi - lo, abs(lo), abs(hi)))
    assert sens.global_sensitivity("sum", lo, hi, "replace") == hi - lo  # the pure relation
    ctx = Context(neighbouring="replace", max_rows=1, grouped=False, filtered=True, options=Options())
    assert sensitivities("sum", lo, hi, ctx)["s"] == pytest.approx(union)


def test_mean_global_sensitivity_is_half_the_trivial_bound_under_add_remove() -> None:
    brute = max(bf.global_sensitivity("mean", (0, 1, 3, 4, 7), n, "add_remove") for n in range(5))
    assert brute == pytest.approx(3.5) and sens.global_sensitivity("mean", 0, 7) == 3.5
    assert sens.global_sensitivity("mean", 0, 7, "replace") == 7.0


# ---------------------------------------------------------------- LS and A(k)
@pytest.mark.parametrize("relation", RELATIONS)
@pytest.mark.parametrize("case", STATS, ids=_id)
def test_local_sensitivity_at_distance_against_bruteforce(case: tuple[str, float | None],
                                                          relation: str) -> None:
    stat, p = case
    strict = 0
    for universe in UNIVERSES:
        lo, hi = min(universe), max(universe)
        for x in _datasets(universe):
            assert sens.local_sensitivity(stat, x, lo, hi, relation, p) == pytest.approx(
                bf.local_sensitivity(stat, x, universe, relation, p), abs=TOL), x
            for k in range(K_MAX + 1):
                analytic = sens.local_sensitivity_at_distance(stat, x, k, lo, hi, relation, p)
                brute = bf.local_sensitivity_at_distance(stat, x, k, universe, relation, p)
                assert analytic >= brute - TOL, (x, k, analytic, brute)
                if _a_exact(stat, relation, k):
                    assert analytic == pytest.approx(brute, abs=TOL), (x, k)
                strict += analytic > brute + TOL
    # The non-exact formulas really are loose somewhere (so the docstrings are right).
    loose_expected = relation == "add_remove" and stat in ("mean", "median") or (
        relation == "add_remove" and stat == "quantile" and p in (0.25, 0.5, 0.9, 1.0))
    assert (strict > 0) == loose_expected


@pytest.mark.parametrize("relation", RELATIONS)
def test_mean_bound_is_the_worst_case_over_datasets_of_size_n(relation: str) -> None:
    universe = (0, 1, 3, 4, 7)
    for n in range(N_MAX + 1):
        for k in range(K_MAX + 1):
            worst = max(bf.local_sensitivity_at_distance("mean", x, k, universe, relation)
                        for x in itertools.combinations_with_replacement(universe, n))
            bound = sens.mean_sensitivity_bound(n, 0, 7, relation, k)
            assert bound == pytest.approx(worst, abs=TOL), (n, k)


def test_mean_bounds_of_seed000_and_spec_versus_the_exact_one() -> None:
    universe, width = (0, 1, 3, 4, 7), 7.0
    for n in range(1, N_MAX + 1):
        worst = max(bf.local_sensitivity("mean", x, universe, "add_remove")
                    for x in itertools.combinations_with_replacement(universe, n))
        # seed 000's U/(n+1) (L = 0) is right only for n = 1 and too small from n = 2 on
        assert (worst > seed000_mean_ls(n, 7) + TOL) == (n >= 2)
        assert worst == pytest.approx(width / max(n, 2))
        spec_g = width / max(n - 1, 1)  # SPEC 4.2's g(n): valid but loose
        assert spec_g > worst + TOL


# ---------------------------------------------------------------- D(b) and S_beta
@pytest.mark.parametrize("relation", RELATIONS)
@pytest.mark.parametrize("case", STATS, ids=_id)
def test_distance_to_instability_against_bruteforce(case: tuple[str, float | None],
                                                    relation: str) -> None:
    stat, p = case
    exact = all(_a_exact(stat, relation, k) for k in range(K_MAX + 1))
    for universe in UNIVERSES:
        lo, hi = min(universe), max(universe)
        for x in _datasets(universe, 5):
            for b in B_VALUES:
                capped = sens.distance_to_instability(stat, x, b, lo, hi, relation, p, k_max=K_MAX)
                full = sens.distance_to_instability(stat, x, b, lo, hi, relation, p)
                brute = bf.distance_to_instability(stat, x, b, universe, relation, p, K_MAX)
                assert capped == min(full, K_MAX + 1)
                assert capped <= brute and (capped == brute or not exact), (x, b, capped, brute)
                if stat == "mean":
                    assert sens.mean_distance(len(x), b, lo, hi, relation) <= full


@pytest.mark.parametrize("relation", RELATIONS)
@pytest.mark.parametrize("case", STATS, ids=_id)
def test_smooth_sensitivity_against_bruteforce(case: tuple[str, float | None],
                                               relation: str) -> None:
    stat, p = case
    exact = all(_a_exact(stat, relation, k) for k in range(5))
    universe = (0, 1, 3, 4, 7)
    for x in _datasets(universe, 4):
        for beta in (0.3, 1.5):
            # Brute force is exact once A(k_max) is the largest LS (k_max >= n, k_max >= 1).
            brute = bf.smooth_sensitivity(stat, x, beta, universe, relation, p, max(len(x), 1))
            analytic = sens.smooth_sensitivity(stat, x, beta, 0, 7, relation, p)
            assert analytic >= brute - TOL and (analytic == pytest.approx(brute) or not exact)
            assert analytic >= sens.local_sensitivity(stat, x, 0, 7, relation, p) - TOL


def test_seed003_median_example() -> None:
    """Slide 19: d = 1..10 in [0, Lambda], Lambda = 1000, beta = 2: S*(d) = 1."""
    d = list(range(1, 11))
    for relation in RELATIONS:
        assert sens.smooth_sensitivity("median", d, 2, 0, 1000, relation) == 1.0
        assert sens.smooth_sensitivity("median", d, 2, 0, 1000, relation, k_max=4) == 1.0
    assert sens.smooth_sensitivity("median", d, 0.1, 0, 1000, "replace") > 1.0
    # Slides 13-15: LS jumps from 0 to Lambda between neighbours; S does not.
    d1, d2 = [0] * 6 + [1000] * 4, [0] * 5 + [1000] * 5
    assert sens.local_sensitivity("median", d1, 0, 1000, "replace") == 0.0
    assert sens.local_sensitivity("median", d2, 0, 1000, "replace") == 1000.0
    s1, s2 = (sens.smooth_sensitivity("median", d, 2, 0, 1000, "replace") for d in (d1, d2))
    assert s1 == pytest.approx(1000 * math.exp(-2)) and s2 <= math.exp(2) * s1 * (1 + TOL)


# ---------------------------------------------------------------- reference facts (SPEC 8)
def test_adult_reference_figures() -> None:
    n, upper = 32561, 100.0
    delta = 1 / n**2
    beta = 1 / (2 * math.log(2 / delta))
    seed_final = seed000_smooth_final(n, upper, 1.0, delta)
    assert round(seed_final, 7) == 0.0061421 and seed_final == pytest.approx(200 / (n + 1))
    ours = 2 * sens.mean_smooth_sensitivity(n, beta, 0, upper)
    assert ours == pytest.approx(200 / n) and ours > seed_final  # LS is W/n, not U/(n+1)
    assert seed000_ptr_distance(n, upper, 0.005) == 12562
    # dpsql: least k with 100/max(n-k, 2) > 0.005, i.e. n - k < 20000.
    assert sens.mean_distance(n, 0.005, 0, upper) == 12562 == n - 20000 + 1
    # SPEC's g(n-k) = W/(n-k-1) would give one less (valid, looser); the seed's ">=" and
    # its n+1 cancel when W/b is an integer but overstate D (unsafe) otherwise:
    assert seed000_ptr_distance(n, upper, 0.0049) == 12154
    assert sens.mean_distance(n, 0.0049, 0, upper) == 12153
    assert sens.mean_distance(n, 50.0, 0, upper) == sens.MAX_DISTANCE  # b >= W/2


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 500), st.floats(1e-4, 60.0))
def test_mean_distance_closed_form(n: int, b: float) -> None:
    width = 100.0
    assume(abs(width / b - round(width / b)) > 1e-6)  # no float ties at the boundary
    expected = max(0, math.floor(n - width / b) + 1) if b < width / 2 else sens.MAX_DISTANCE
    assert sens.mean_distance(n, b, 0, width) == expected
    assert sens.mean_distance(n, b, 0, width, "replace") == (
        0 if n and width / n > b else sens.MAX_DISTANCE)


# ---------------------------------------------------------------- properties (hypothesis)
LO, HI = 0.0, 10.0
VALUES = st.one_of(st.integers(0, 10).map(float), st.floats(LO, HI, allow_nan=False))
DATA = st.lists(VALUES, max_size=30).map(sorted)
SMOOTH_STATS = [("median", None), ("quantile", 0.1), ("quantile", 0.75), ("quantile", 1.0),
                ("mean", None)]


@st.composite
def neighbours(draw: st.DrawFn) -> tuple[list[float], list[float], str]:
    x = draw(DATA)
    relation = draw(st.sampled_from(RELATIONS))
    y = list(x)
    if relation == "replace":
        assume(x)
        y[draw(st.integers(0, len(x) - 1))] = draw(VALUES)
    elif x and draw(st.booleans()):
        del y[draw(st.integers(0, len(x) - 1))]
    else:
        y.append(draw(VALUES))
    return x, sorted(y), relation


@settings(max_examples=250, deadline=None)
@given(neighbours(), st.sampled_from(SMOOTH_STATS), st.floats(0.01, 3.0),
       st.sampled_from([None, 0, 2, 7]), st.floats(0.0, 12.0))
def test_smooth_sensitivity_axioms(pair: tuple[list[float], list[float], str],
                                   case: tuple[str, float | None], beta: float,
                                   k_max: int | None, b: float) -> None:
    x, y, relation = pair
    stat, p = case
    sx, sy = (sens.smooth_sensitivity(stat, d, beta, LO, HI, relation, p, k_max) for d in (x, y))
    assert sx >= sens.local_sensitivity(stat, x, LO, HI, relation, p) - TOL
    assert sx <= math.exp(beta) * sy * (1 + TOL) + TOL
    assert sy <= math.exp(beta) * sx * (1 + TOL) + TOL
    dx, dy = (sens.distance_to_instability(stat, d, b, LO, HI, relation, p, k_max) for d in (x, y))
    assert abs(dx - dy) <= 1  # PTR needs sensitivity 1 (MAX_DISTANCE on both sides or neither)
    if stat == "mean":
        mx, my = (sens.mean_smooth_sensitivity(len(d), beta, LO, HI, relation) for d in (x, y))
        assert mx >= sx - TOL and mx <= math.exp(beta) * my * (1 + TOL)


def _pair_form(x: list[float], p: float, beta: float, b: float) -> tuple[float, int]:
    """S and D from the pair form max/min over i <= r <= j of the padded order statistics."""
    n, r = len(x), sens.rank(p, len(x))
    padded = [LO] + list(x) + [HI]
    pairs = [(i, j) for i in range(r + 1) for j in range(max(r, i + 1), n + 2)]
    s = max(math.exp(-beta * (j - i - 1)) * (padded[j] - padded[i]) for i, j in pairs)
    ds = [j - i - 1 for i, j in pairs if padded[j] - padded[i] > b]
    return s, min(ds, default=sens.MAX_DISTANCE)


@settings(max_examples=200, deadline=None)
@given(DATA, st.sampled_from([0.0, 0.2, 0.5, 0.9, 1.0]), st.floats(0.01, 3.0),
       st.floats(0.0, 11.0))
def test_pair_form_equivalence(x: list[float], p: float, beta: float, b: float) -> None:
    s_pair, d_pair = _pair_form(x, p, beta, b)
    s_rep = sens.smooth_sensitivity("quantile", x, beta, LO, HI, "replace", p)
    d_rep = sens.distance_to_instability("quantile", x, b, LO, HI, "replace", p)
    if x:  # replace: A(0) is the NRS value, so both forms agree exactly
        assert s_rep == pytest.approx(s_pair, rel=1e-12) and d_rep == d_pair
    # add_remove uses the exact LS at k = 0 (<= the NRS value): S no larger, D no smaller
    assert sens.smooth_sensitivity("quantile", x, beta, LO, HI, "add_remove", p) <= s_pair + TOL
    assert sens.distance_to_instability("quantile", x, b, LO, HI, "add_remove", p) >= d_pair


@settings(max_examples=200, deadline=None)
@given(DATA, st.sampled_from([0.0, 0.3, 0.5, 1.0]), st.floats(0.01, 2.0), st.integers(0, 12),
       st.sampled_from(RELATIONS), st.floats(0.0, 11.0))
def test_window_and_truncation(x: list[float], p: float, beta: float, k: int, relation: str,
                               b: float) -> None:
    n = len(x)
    first, last = sens.window_ranks(n, p, k)
    window = x[first - 1: last]
    truncated = sens.smooth_sensitivity("quantile", x, beta, LO, HI, relation, p, k_max=k)
    windowed = sens.smooth_sensitivity_window(window, first, n, p, beta, LO, HI, k, relation)
    assert windowed == truncated
    assert sens.distance_to_instability_window(window, first, n, p, b, LO, HI, k, relation) == \
        sens.distance_to_instability("quantile", x, b, LO, HI, relation, p, k_max=k)
    exact = sens.smooth_sensitivity("quantile", x, beta, LO, HI, relation, p)
    longer = sens.smooth_sensitivity("quantile", x, beta, LO, HI, relation, p, k_max=k + 1)
    assert truncated >= longer - TOL and longer >= exact - TOL  # S_K decreases to S
    if k >= n:
        assert truncated == pytest.approx(exact)
    if len(window) >= 2:  # a window missing an order statistic it needs is refused
        with pytest.raises(ValueError):
            sens.smooth_sensitivity_window(window[1:], first + 1, n, p, beta, LO, HI, k, relation)


def test_exact_smooth_sensitivity_on_large_data() -> None:
    rng = np.random.default_rng(7)
    x = np.sort(rng.uniform(0, 100, 1500))
    beta = 0.03
    exact = sens.smooth_sensitivity("median", x, beta, 0, 100, "replace")
    assert exact == pytest.approx(sens.smooth_sensitivity("median", x, beta, 0, 100, "replace",
                                                          k_max=1500))
    k = sens.truncation_k(beta, 0, 100, tol=1e-6 * exact)
    assert sens.smooth_sensitivity("median", x, beta, 0, 100, "replace", k_max=k) == pytest.approx(
        exact, rel=1e-5)
    assert 100 * math.exp(-beta * (k + 1)) <= 1e-6 * exact < 100 * math.exp(-beta * k)
    assert k < 750  # the truncation needs far fewer order statistics than the data


def test_truncation_k_and_window_ranks() -> None:
    k = sens.truncation_k(0.03, 0, 100, 1e-4)
    assert 100 * math.exp(-0.03 * (k + 1)) <= 1e-4 < 100 * math.exp(-0.03 * k)
    assert sens.truncation_k(1.0, 0, 1, 2.0) == 0
    assert sens.window_ranks(32561, 0.5, 300) == (16281 - 301, 16281 + 301)
    assert sens.window_ranks(5, 0.5, 300) == (1, 5)


@pytest.mark.parametrize(
    "call",
    [
        lambda: sens.local_sensitivity("median", [3, 1], 0, 5),  # unsorted
        lambda: sens.local_sensitivity("median", [1, 9], 0, 5),  # not clipped
        lambda: sens.local_sensitivity("median", [1], 5, 5),  # L >= U
        lambda: sens.local_sensitivity("median", [1], 0, 5, "bounded"),
        lambda: sens.local_sensitivity("quantile", [1], 0, 5, p=1.5),
        lambda: sens.local_sensitivity("var", [1], 0, 5),  # brute force only
        lambda: sens.distance_to_instability("mean", [1], -1.0, 0, 5),
        lambda: sens.smooth_sensitivity("mean", [1], 0.0, 0, 5),
        lambda: sens.global_sensitivity("sum", 0, 5, max_rows=0),
        lambda: bf.local_sensitivity("mean", [2], (0, 1), "replace"),  # not in the universe
    ],
)
def test_invalid_input_is_refused(call) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError):
        call()


# ---------------------------------------------------------------- privacy units of up to m rows
UNIT_RELATIONS = ("add_remove", "replace", "union")
#: (m, universe, most units per dataset, largest k): small enough to enumerate every dataset
UNIT_SETUPS = [(1, (0, 1, 3, 4), 4, 3), (2, (0, 1, 3, 4), 3, 2), (3, (0, 1, 4), 2, 2)]
UNIT_STATS = [("median", None), ("quantile", 0.0), ("quantile", 0.25), ("quantile", 1.0), ("mean", None)]


def _unit_datasets(universe: tuple, m: int, units: int, relation: str) -> Iterator[tuple]:
    for count in range(units + 1):
        yield from bf.unit_datasets(universe, count, m, relation)


@functools.cache
def _unit_bound(stat: str, rows: tuple, k: int, lo: float, hi: float, relation: str, p: float | None,
                m: int) -> float:
    return sens.local_sensitivity_at_distance(stat, rows, k, lo, hi, relation, p, max_rows=m)


@functools.cache
def _unit_smooth(stat: str, rows: tuple, beta: float, lo: float, hi: float, relation: str, p: float | None,
                 m: int) -> float:
    return sens.smooth_sensitivity(stat, rows, beta, lo, hi, relation, p, max_rows=m)


@functools.cache
def _unit_distance(stat: str, rows: tuple, b: float, lo: float, hi: float, relation: str, p: float | None,
                   m: int, k_max: int | None = None) -> int:
    return sens.distance_to_instability(stat, rows, b, lo, hi, relation, p, k_max=k_max, max_rows=m)


def test_unit_neighbours_follow_the_three_relations() -> None:
    universe, m = (0, 1, 3), 2
    x = ((0.0,), (1.0, 3.0))
    add_remove = bf.unit_neighbours(x, universe, "add_remove", m)
    assert ((0.0,),) in add_remove and ((1.0, 3.0),) in add_remove
    assert ((0.0,), (1.0, 3.0), (3.0, 3.0)) in add_remove and len(add_remove) == 2 + 9
    for y in bf.unit_neighbours(x, universe, "replace", m):  # every unit keeps its number of rows
        assert sorted(map(len, y)) == [1, 2] and len(set(y) & set(x)) == 1
    union = bf.unit_neighbours(x, universe, "union", m)
    assert ((), (1.0, 3.0)) in union and ((0.0,), (3.0, 3.0)) in union  # a unit's rows may vanish
    assert all(len(y) == 2 for y in union) and len(union) == 2 * 10 - 2
    assert bf.unit_ball(x, 2, universe, "union", m) >= set(union)
    with pytest.raises(ValueError):
        bf.unit_neighbours(((0.0, 1.0, 3.0),), universe, "add_remove", m)  # 3 rows > m


@pytest.mark.parametrize("relation", RELATIONS)
def test_units_of_one_row_are_rows(relation: str) -> None:
    """m = 1: the unit brute force is the row-level one; union is add_remove ∪ replace."""
    universe = (0, 1, 3, 4)
    for x in _datasets(universe, 4):
        units = tuple((v,) for v in x)
        for stat, p in (("median", None), ("mean", None), ("sum", None), ("quantile", 0.25)):
            for k in range(3):
                assert bf.unit_local_sensitivity_at_distance(stat, units, k, universe, relation, 1, p) == \
                    bf.local_sensitivity_at_distance(stat, x, k, universe, relation, p)
            # with one empty unit to fill, a union step adds, removes or changes one row
            union = bf.unit_local_sensitivity(stat, units + ((),), universe, "union", 1, p)
            assert union == max(bf.local_sensitivity(stat, x, universe, r, p) for r in RELATIONS)


@pytest.mark.parametrize("relation", UNIT_RELATIONS)
@pytest.mark.parametrize("case", UNIT_STATS, ids=_id)
@pytest.mark.parametrize("setup", UNIT_SETUPS, ids=lambda s: f"m{s[0]}")
def test_unit_bounds_against_bruteforce(setup: tuple, case: tuple[str, float | None], relation: str) -> None:
    """A(k), D(b) and S in units of up to m rows: upper bounds (lower for D) on the brute force for
    every partition of the rows into units, and the neighbour conditions PTR and smooth
    sensitivity need: Â(x, k) ≤ Â(x', k + 1), |D(x) − D(x')| ≤ 1, S(x) ≤ e^β·S(x')."""
    m, universe, units, k_max = setup
    stat, p = case
    lo, hi = min(universe), max(universe)
    beta, attained = 0.7, 0
    for x in _unit_datasets(universe, m, units, relation):
        rows = bf.rows_of(x)
        bound = [_unit_bound(stat, rows, k, lo, hi, relation, p, m) for k in range(k_max + 2)]
        for k in range(k_max + 1):
            brute = bf.unit_local_sensitivity_at_distance(stat, x, k, universe, relation, m, p)
            assert bound[k] >= brute - TOL, (x, k, bound[k], brute)
            attained += k > 0 and bound[k] == pytest.approx(brute, abs=TOL)
        s = _unit_smooth(stat, rows, beta, lo, hi, relation, p, m)
        assert s >= bf.unit_local_sensitivity(stat, x, universe, relation, m, p) - TOL
        for b in B_VALUES:
            d = _unit_distance(stat, rows, b, lo, hi, relation, p, m, k_max)
            assert d <= bf.unit_distance_to_instability(stat, x, b, universe, relation, m, p, k_max)
        for y in bf.unit_neighbours(x, universe, relation, m):
            other = bf.rows_of(y)
            for k in range(k_max + 1):
                assert bound[k] <= _unit_bound(stat, other, k + 1, lo, hi, relation, p, m) + TOL
            assert s <= math.exp(beta) * _unit_smooth(stat, other, beta, lo, hi, relation, p, m) * (1 + TOL)
            for b in B_VALUES:
                dx, dy = (_unit_distance(stat, d, b, lo, hi, relation, p, m) for d in (rows, other))
                assert abs(min(dx, 99) - min(dy, 99)) <= 1
    assert attained > 0  # the bound is reached, not only above the truth


@pytest.mark.parametrize("relation", UNIT_RELATIONS)
@pytest.mark.parametrize("setup", UNIT_SETUPS, ids=lambda s: f"m{s[0]}")
def test_unit_mean_bound_is_the_worst_case_over_datasets_of_n_rows(setup: tuple, relation: str) -> None:
    """The mean's A(k) from n alone, mW/max(n − km, m + 1) (add_remove), mW/max(n − km, m) (union),
    W·min(m, n)/n (replace), is the largest A(x, k) over datasets of n rows in any units; above it
    only where no dataset of the search reaches the size the bound is taken at."""
    m, universe, units, k_max = setup
    lo, hi = min(universe), max(universe)
    worst: dict[tuple[int, int], float] = {}
    for x in _unit_datasets(universe, m, units, relation):
        n = len(bf.rows_of(x))
        for k in range(k_max + 1):
            a = bf.unit_local_sensitivity_at_distance("mean", x, k, universe, relation, m)
            worst[n, k] = max(worst.get((n, k), 0.0), a)
    for (n, k), brute in worst.items():
        bound = sens.mean_sensitivity_bound(n, lo, hi, "union" if relation == "union" else relation, k,
                                            max_rows=m)
        assert bound >= brute - TOL, (n, k, bound, brute)
        floor = {"add_remove": m + 1, "union": 1, "replace": 0}[relation]
        if n - k * m >= floor and (n + k * m) // m <= units + k:  # the worst dataset is in the search
            assert bound == pytest.approx(brute, abs=TOL), (n, k, bound, brute)


@pytest.mark.parametrize("relation", UNIT_RELATIONS)
@pytest.mark.parametrize("m", [1, 2, 3, 5])
def test_unit_mean_distance_and_smooth_bound_from_n(relation: str, m: int) -> None:
    """mean_distance and mean_smooth_sensitivity are the min and the max over every k of the
    bound from n (the bound is log-convex only up to the last k before it stops changing)."""
    lo, hi = 0.0, 7.0
    for n in range(40):
        bounds = [sens.mean_sensitivity_bound(n, lo, hi, relation, k, max_rows=m) for k in range(n + 2)]
        for beta in (0.05, 0.3, 1.5):
            best = max(math.exp(-beta * k) * a for k, a in enumerate(bounds))
            assert sens.mean_smooth_sensitivity(n, beta, lo, hi, relation, max_rows=m) == pytest.approx(best)
        for b in (0.1, 0.5, 1.3, 3.4, 7.0):
            expected = next((k for k, a in enumerate(bounds) if a > b), sens.MAX_DISTANCE)
            assert sens.mean_distance(n, b, lo, hi, relation, max_rows=m) == expected
    if m == 1:  # m = 1 keeps the row-level forms
        assert sens.mean_sensitivity_bound(9, lo, hi, "add_remove", 2, max_rows=1) == 7 / 7
        assert sens.mean_sensitivity_bound(9, lo, hi, "union", 2, max_rows=1) == 7 / 7
        assert sens.mean_sensitivity_bound(9, lo, hi, "replace", 2, max_rows=1) == 7 / 9
    else:
        assert sens.mean_sensitivity_bound(9, lo, hi, "add_remove", 1, max_rows=m) == m * 7 / max(9 - m, m + 1)


@settings(max_examples=200, deadline=None)
@given(DATA, st.sampled_from([0.0, 0.2, 0.5, 0.9, 1.0]), st.floats(0.0, 11.0), st.integers(1, 4),
       st.sampled_from(UNIT_RELATIONS))
def test_unit_distance_is_the_pair_form_divided_by_m(x: list[float], p: float, b: float, m: int,
                                                     relation: str) -> None:
    """PTR's distance in units: min{k : P_{(k+1)m} > b} = ⌊D_pair/m⌋ (m ≥ 2, or union)."""
    assume(m > 1 or relation == "union")
    _, d_pair = _pair_form(x, p, 1.0, b)
    d = sens.distance_to_instability("quantile", x, b, LO, HI, relation, p, max_rows=m)
    assert d == (sens.MAX_DISTANCE if d_pair == sens.MAX_DISTANCE else d_pair // m)


@st.composite
def unit_neighbours(draw: st.DrawFn) -> tuple[list[float], list[float], str, int]:
    """x and x' one unit step apart: up to m rows removed and (union) up to m rows added."""
    x = draw(DATA)
    m = draw(st.integers(1, 5))
    relation = draw(st.sampled_from(UNIT_RELATIONS))
    y = list(x)
    drop = draw(st.integers(0, min(m, len(y))))
    for _ in range(drop):
        del y[draw(st.integers(0, len(y) - 1))]
    add = {"add_remove": 0 if drop else draw(st.integers(1, m)), "replace": drop,
           "union": draw(st.integers(0, m))}[relation]
    y += draw(st.lists(VALUES, min_size=add, max_size=add))
    return x, sorted(y), relation, m


@settings(max_examples=300, deadline=None)
@given(unit_neighbours(), st.sampled_from(SMOOTH_STATS), st.floats(0.01, 3.0),
       st.sampled_from([None, 0, 2, 7]), st.floats(0.0, 12.0))
def test_unit_smooth_sensitivity_axioms(pair: tuple[list[float], list[float], str, int],
                                        case: tuple[str, float | None], beta: float, k_max: int | None,
                                        b: float) -> None:
    """On larger data than the brute force: one unit step moves f by at most S(x), S by at most
    a factor e^β and D by at most 1 (the properties the releases rely on)."""
    x, y, relation, m = pair
    stat, p = case
    if stat == "mean" and relation == "replace" and len(x) != len(y):
        relation = "union"  # the pure relation keeps n
    sx, sy = (sens.smooth_sensitivity(stat, d, beta, LO, HI, relation, p, k_max, max_rows=m) for d in (x, y))
    moved = abs(sens.statistic(stat, x, LO, HI, p) - sens.statistic(stat, y, LO, HI, p))
    assert moved <= sens.local_sensitivity_at_distance(stat, x, 0, LO, HI, relation, p, max_rows=m) + TOL
    assert moved <= sx + TOL
    assert sx <= math.exp(beta) * sy * (1 + TOL) + TOL and sy <= math.exp(beta) * sx * (1 + TOL) + TOL
    dx, dy = (sens.distance_to_instability(stat, d, b, LO, HI, relation, p, k_max, max_rows=m) for d in (x, y))
    assert abs(dx - dy) <= 1


@settings(max_examples=150, deadline=None)
@given(DATA, st.sampled_from([0.0, 0.3, 0.5, 1.0]), st.floats(0.01, 2.0), st.integers(0, 8),
       st.sampled_from(UNIT_RELATIONS), st.floats(0.0, 11.0), st.integers(2, 4))
def test_unit_window_and_truncation(x: list[float], p: float, beta: float, k: int, relation: str,
                                    b: float, m: int) -> None:
    """The window of ranks r ± (K + 1)m gives the full-data truncated S and capped D in units."""
    n = len(x)
    first, last = sens.window_ranks(n, p, k, m)
    assert (first, last) == (max(1, sens.rank(p, n) - (k + 1) * m), min(n, sens.rank(p, n) + (k + 1) * m))
    window = x[first - 1: last]
    truncated = sens.smooth_sensitivity("quantile", x, beta, LO, HI, relation, p, k_max=k, max_rows=m)
    assert sens.smooth_sensitivity_window(window, first, n, p, beta, LO, HI, k, relation, m) == truncated
    assert sens.distance_to_instability_window(window, first, n, p, b, LO, HI, k, relation, m) == \
        sens.distance_to_instability("quantile", x, b, LO, HI, relation, p, k_max=k, max_rows=m)
    exact = sens.smooth_sensitivity("quantile", x, beta, LO, HI, relation, p, max_rows=m)
    assert truncated >= exact - TOL
    if (k + 1) * m > n:
        assert truncated == pytest.approx(exact)
    if len(window) >= 2:  # a window missing an order statistic it needs is refused
        with pytest.raises(ValueError):
            sens.smooth_sensitivity_window(window[1:], first + 1, n, p, beta, LO, HI, k, relation, m)


def test_unit_quantile_bound_is_nrs_at_km_rows() -> None:
    """A(k) in units is the NRS value at (k + 1)m − 1 rows (one unit = up to m rows)."""
    x = [1.0, 2.0, 2.0, 3.0, 5.0, 8.0, 9.0]
    for m in (1, 2, 3):
        for k in range(4):
            row = sens.local_sensitivity_at_distance("median", x, (k + 1) * m - 1, 0, 10, "replace")
            assert sens.local_sensitivity_at_distance("median", x, k, 0, 10, "union", max_rows=m) == row
    with pytest.raises(ValueError, match="mean and quantiles"):
        sens.local_sensitivity_at_distance("sum", x, 0, 0, 10, "add_remove", max_rows=2)
    with pytest.raises(ValueError, match="max_rows"):
        sens.mean_distance(5, 1.0, 0, 10, max_rows=0)


# ---------------------------------------------------------------- the additive mechanisms, in units
def _part(name: str, centre: float):  # type: ignore[no-untyped-def]
    return {"n": len, "s": sum, "s1": lambda rows: sum(v - centre for v in rows),
            "s2": lambda rows: sum((v - centre) ** 2 for v in rows)}[name]


@pytest.mark.parametrize("bounds", [(-1.0, 3.0), (17.0, 90.0), (-90.0, -17.0)], ids=str)
@pytest.mark.parametrize("m", [1, 2, 3])
def test_additive_parts_against_unit_bruteforce(m: int, bounds: tuple[float, float]) -> None:
    """The Laplace/Gaussian parts (ungrouped) against the unit brute force: add_remove exactly;
    under the policy's replace, the union relation (values may become NULL or leave the filter)
    exactly, and the pure relation (n public) keeps COUNT(*) unchanged."""
    from dpsql._sql.options import Options
    from dpsql.mechanisms.additive import sensitivities
    from dpsql.mechanisms.base import Context

    lo, hi = bounds
    centre = (lo + hi) / 2
    universe = tuple(sorted({lo, centre, hi} | ({0.0} if lo < 0 < hi else set())))
    units = 2 if m < 3 else 1
    for stat in ("count", "sum", "mean", "var"):
        for relation, unit_relation in (("add_remove", "add_remove"), ("replace", "union")):
            ctx = Context(neighbouring=relation, max_rows=m, grouped=False, filtered=True, options=Options())
            for name, claimed in sensitivities(stat, lo, hi, ctx).items():
                fn = _part(name, centre)
                brute = max(bf.unit_global_sensitivity(fn, universe, u, unit_relation, m) for u in range(units + 1))
                assert claimed == pytest.approx(brute), (stat, relation, name, claimed, brute)
    pure = max(bf.unit_global_sensitivity(len, universe, u, "replace", m) for u in range(units + 1))
    assert pure == 0.0  # the count is public only while no unit's rows can vanish
