"""The sensitivity table of the Laplace/Gaussian mechanisms, checked against brute force.

Rows are (value, group, passes WHERE). For every small dataset and every neighbour (add or
remove up to m rows; or change up to m rows), the L1 change of each released part over the
group vector must not exceed the analytic sensitivity, and the analytic value must be attained.
"""

from __future__ import annotations

import itertools

import pytest

from dpsql.mechanisms.additive import sensitivities
from dpsql.mechanisms.base import Context
from dpsql.options import Options

L, U = -1.0, 3.0  # an interval with L < 0 < U exercises max(|L|, |U|)
VALUES = (L, 0.0, 1.0, U)
C = (L + U) / 2


def parts(stat: str, rows: tuple, groups: tuple) -> dict[str, tuple[float, ...]]:
    def per_group(fn):
        return tuple(sum(fn(v) for v, g, ok in rows if ok and g == gg) for gg in groups)

    out = {"n": per_group(lambda v: 1)}
    if stat == "count":
        return out
    if stat == "sum":
        return {"s": per_group(lambda v: v)}
    out["s1"] = per_group(lambda v: v - C)
    if stat == "var":
        out["s2"] = per_group(lambda v: (v - C) ** 2)
    return out


def neighbours(rows: tuple, universe: list, relation: str, m: int):
    rows = list(rows)
    if relation == "add_remove":
        for k in range(1, m + 1):
            for extra in itertools.combinations_with_replacement(universe, k):
                yield tuple(rows + list(extra))
            for drop in itertools.combinations(range(len(rows)), k):
                yield tuple(r for i, r in enumerate(rows) if i not in drop)
    else:
        for k in range(1, m + 1):
            for idx in itertools.combinations(range(len(rows)), k):
                for new in itertools.product(universe, repeat=k):
                    changed = list(rows)
                    for i, r in zip(idx, new):
                        changed[i] = r
                    yield tuple(changed)


def brute(stat: str, relation: str, grouped: bool, filtered: bool, m: int, n_max: int = 3) -> dict[str, float]:
    groups = ("a", "b") if grouped else ("a",)
    flags = (True, False) if filtered else (True,)
    universe = [(v, g, ok) for v in VALUES for g in groups for ok in flags]
    worst: dict[str, float] = {}
    for n in range(0, n_max + 1):
        for rows in itertools.combinations_with_replacement(universe, n):
            base = parts(stat, rows, groups)
            for other in neighbours(rows, universe, relation, m):
                moved = parts(stat, other, groups)
                for name in base:
                    l1 = sum(abs(a - b) for a, b in zip(base[name], moved[name]))
                    worst[name] = max(worst.get(name, 0.0), l1)
    return worst


@pytest.mark.parametrize("stat", ["count", "sum", "mean", "var"])
@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@pytest.mark.parametrize("grouped", [False, True])
@pytest.mark.parametrize("m", [1, 2])
def test_sensitivity_table_matches_brute_force(stat: str, relation: str, grouped: bool, m: int) -> None:
    ctx = Context(neighbouring=relation, max_rows=m, grouped=grouped, filtered=True, options=Options())
    analytic = sensitivities(stat, L, U, ctx)
    worst = brute(stat, relation, grouped, filtered=True, m=m, n_max=3 if m == 1 else 2)
    for name, value in worst.items():
        assert analytic[name] >= value - 1e-12, (name, analytic[name], value)
        assert analytic[name] == pytest.approx(value), (name, analytic[name], value)


def test_unfiltered_count_under_replace_is_public() -> None:
    """COUNT(*) without WHERE or GROUP BY does not change when a row is replaced."""
    assert brute("count", "replace", grouped=False, filtered=False, m=1)["n"] == 0
