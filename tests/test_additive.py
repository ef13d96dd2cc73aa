"""The sensitivity table of the Laplace/Gaussian mechanisms, checked against brute force.

Rows are (value, group, passes WHERE), a value of None being NULL. For every small dataset and
every neighbour (add or remove up to m rows; or change up to m rows, where a changed row may
become NULL, leave or enter the WHERE filter, or move to another group), the L1 change of each
released part over the group vector must not exceed the analytic sensitivity, and the
analytic value must be attained. Bounds around 0 and bounds that exclude 0 (where U − L and
max(|L|, |U|) differ) are both checked, and so is every row of the table in the module
docstring, read from the docstring itself.
"""

from __future__ import annotations

import functools
import itertools
import re

import pytest

from dpsql._sql.options import Options
from dpsql.mechanisms import additive
from dpsql.mechanisms.additive import sensitivities
from dpsql.mechanisms.base import Context

#: (L, U): around 0 (exercises max(|L|, |U|) for add_remove), and two intervals that exclude 0
#: (where a replaced row that becomes NULL or leaves the filter moves a sum by more than U − L)
BOUNDS = [(-1.0, 3.0), (17.0, 90.0), (-90.0, -17.0)]


def values(lower: float, upper: float) -> tuple[float | None, ...]:
    """The bounds, the centre, 0 when it lies inside, and NULL."""
    inside = {lower, (lower + upper) / 2, upper} | ({0.0} if lower < 0 < upper else set())
    return (*sorted(inside), None)


def parts(stat: str, rows: tuple, groups: tuple, centre: float) -> dict[str, tuple[float, ...]]:
    """The exact released parts per group; NULL is skipped by COUNT(v) and the sums."""

    def per_group(fn):
        return tuple(sum(fn(v) for v, g, ok in rows if ok and g == gg and v is not None) for gg in groups)

    out = {"n": per_group(lambda v: 1)}
    if stat == "count":
        return out
    if stat == "sum":
        return {"s": per_group(lambda v: v)}
    out["s1"] = per_group(lambda v: v - centre)
    if stat == "var":
        out["s2"] = per_group(lambda v: (v - centre) ** 2)
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


@functools.cache
def brute(stat: str, relation: str, grouped: bool, filtered: bool, m: int, bounds: tuple[float, float],
          n_max: int = 3, star: bool = False) -> dict[str, float]:
    """Largest L1 change of each part; ``star``: COUNT(*) (NULL rows count too)."""
    lower, upper = bounds
    centre = (lower + upper) / 2
    groups = ("a", "b") if grouped else ("a",)
    flags = (True, False) if filtered else (True,)
    universe = [(v, g, ok) for v in values(lower, upper) for g in groups for ok in flags]

    def of(rows: tuple) -> dict[str, tuple[float, ...]]:
        if star:
            rows = tuple((0.0, g, ok) for _, g, ok in rows)
        return parts(stat, rows, groups, centre)

    worst: dict[str, float] = {}
    for n in range(0, n_max + 1):
        for rows in itertools.combinations_with_replacement(universe, n):
            base = of(rows)
            for other in neighbours(rows, universe, relation, m):
                moved = of(other)
                for name in base:
                    l1 = sum(abs(a - b) for a, b in zip(base[name], moved[name]))
                    worst[name] = max(worst.get(name, 0.0), l1)
    return worst


def _ctx(relation: str, grouped: bool, filtered: bool, m: int) -> Context:
    return Context(neighbouring=relation, max_rows=m, grouped=grouped, filtered=filtered, options=Options())


@pytest.mark.parametrize("bounds", BOUNDS, ids=lambda b: f"[{b[0]:g},{b[1]:g}]")
@pytest.mark.parametrize("stat", ["count", "sum", "mean", "var"])
@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@pytest.mark.parametrize("grouped", [False, True])
@pytest.mark.parametrize("m", [1, 2])
def test_sensitivity_table_matches_brute_force(stat: str, relation: str, grouped: bool, m: int,
                                               bounds: tuple[float, float]) -> None:
    analytic = sensitivities(stat, *bounds, _ctx(relation, grouped, True, m))
    worst = brute(stat, relation, grouped, filtered=True, m=m, bounds=bounds, n_max=3 if m == 1 else 2)
    assert set(worst) == set(analytic)
    for name, value in worst.items():
        assert analytic[name] >= value - 1e-9, (name, analytic[name], value)
        assert analytic[name] == pytest.approx(value), (name, analytic[name], value)


@pytest.mark.parametrize("bounds", BOUNDS, ids=lambda b: f"[{b[0]:g},{b[1]:g}]")
@pytest.mark.parametrize("stat", ["count", "sum", "mean", "var"])
def test_without_where_a_value_that_becomes_null_still_counts(stat: str, bounds: tuple[float, float]) -> None:
    """No filter, but NULLs: a replaced value can still drop out of COUNT(v) and the sums."""
    analytic = sensitivities(stat, *bounds, _ctx("replace", False, False, 1))
    worst = brute(stat, "replace", grouped=False, filtered=False, m=1, bounds=bounds)
    for name, value in worst.items():
        assert analytic[name] == pytest.approx(value), (name, analytic[name], value)


def test_a_replaced_row_that_leaves_moves_a_sum_by_its_value_not_u_minus_l() -> None:
    """[17, 90]: 90 → NULL (or out of the filter) moves the sum by 90, more than U − L = 73."""
    for filtered in (False, True):
        assert brute("sum", "replace", False, filtered, 1, (17.0, 90.0))["s"] == 90.0
        assert brute("sum", "replace", False, filtered, 1, (-90.0, -17.0))["s"] == 90.0
    assert sensitivities("sum", 17.0, 90.0, _ctx("replace", False, True, 1))["s"] == 90.0


@pytest.mark.parametrize("bounds", BOUNDS, ids=lambda b: f"[{b[0]:g},{b[1]:g}]")
def test_unfiltered_count_star_under_replace_is_public(bounds: tuple[float, float]) -> None:
    """COUNT(*) without WHERE or GROUP BY does not change when a row is replaced (NULLs count)."""
    assert brute("count", "replace", grouped=False, filtered=False, m=1, bounds=bounds, star=True)["n"] == 0


# ------------------------------------------------------------------ the docstring's table
def _docstring_table() -> dict[str, list[str]]:
    """Statistic → its three cells (add_remove, replace ungrouped, replace grouped)."""
    doc = additive.__doc__ or ""
    rules = [i for i, line in enumerate(doc.splitlines()) if re.fullmatch(r"=+( +=+)+", line)]
    lines = doc.splitlines()[rules[1] + 1:rules[2]]
    starts = [m.start() for m in re.finditer(r"=+", doc.splitlines()[rules[0]])]
    table = {}
    for line in lines:
        cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], None])]
        table[cells[0]] = cells[1:]
    return table


def _evaluate(cell: str, lower: float, upper: float) -> float:
    """A cell such as 'max(U − L, 2·max(|L|,|U|))' for these bounds (per row, m = 1)."""
    expr = re.sub(r"\(0 for .*\)$", "", cell).strip()
    expr = expr.replace("−", "-").replace("·", "*").replace("²", "**2")
    expr = re.sub(r"\|([LU])\|", r"abs(\1)", expr)
    expr = re.sub(r"(\d)([rLU])", r"\1*\2", expr)
    return float(eval(expr, {"__builtins__": {}}, {"max": max, "abs": abs, "L": lower, "U": upper,
                                                     "r": (upper - lower) / 2}))


PART = {"COUNT": ("count", "n"), "SUM": ("sum", "s"), "Σ(v − c)": ("mean", "s1"), "Σ(v − c)²": ("var", "s2")}
COLUMNS = [("add_remove", False), ("replace", False), ("replace", True)]


def test_the_docstring_table_lists_every_part() -> None:
    assert set(_docstring_table()) == set(PART)


@pytest.mark.parametrize("bounds", BOUNDS, ids=lambda b: f"[{b[0]:g},{b[1]:g}]")
@pytest.mark.parametrize("row", sorted(PART))
def test_every_cell_of_the_docstring_table_matches_brute_force_and_the_code(
    row: str, bounds: tuple[float, float]
) -> None:
    stat, part = PART[row]
    for cell, (relation, grouped) in zip(_docstring_table()[row], COLUMNS):
        documented = _evaluate(cell, *bounds)
        worst = brute(stat, relation, grouped, filtered=True, m=1, bounds=bounds, n_max=3)[part]
        assert documented == pytest.approx(worst), (row, relation, grouped, cell)
        assert sensitivities(stat, *bounds, _ctx(relation, grouped, True, 1))[part] == pytest.approx(documented)


@pytest.mark.parametrize("source", [
    "(SELECT * FROM adult WHERE age > 50) AS s",
    "older",
])
def test_a_count_through_a_filtering_cte_or_subquery_is_not_public_under_replace(source: str) -> None:
    import dpsql
    from dpsql.interfaces.demo import load_adult
    from tests.conftest import demo_policy

    pol = demo_policy(epsilon=5.0)
    pol["neighbouring"] = "replace"
    con = dpsql.connect(":memory:", pol, setup=load_adult)
    with_ = "WITH older AS (SELECT * FROM adult WHERE age > 50) " if source == "older" else ""
    res = con.sql(f"{with_}SELECT DP_COUNT(*) FROM {source} WITH (epsilon = 1)")
    assert res.cost.epsilon == 1 and res.report[0].sensitivity == 1
    assert con.sql("SELECT DP_COUNT(*) FROM adult AS a WITH (epsilon = 1)").cost.epsilon == 0
    con.close()


def test_one_width_for_every_group_is_read_only() -> None:
    widths = additive._same(2.5, 3)
    assert widths.tolist() == [2.5, 2.5, 2.5] and additive._same(1.0, 0).tolist() == []
    with pytest.raises(ValueError):
        widths[0] = 1.0
