"""Re-weighting (dpsql._sql.reweight): a GROUP BY of an id unit without max_groups_per_unit,
each unit's partials weighted by min(1, k / its rows) and rounded toward zero.

Shown by brute force: random small tables whose units hold many rows across every group, at
the bounds and outside them, with bounds near and far from zero, and every unit neighbour
(remove a unit, add one, replace one's rows); and exhaustively, every dataset of small units
over a universe of (group, value) rows and every unit neighbour (dpsql.admin.bruteforce). Each
released part moves at most the sensitivity its noise is calibrated to, which is row
truncation's. Two negative controls (every group's weighted rows rounded up, and the weight
taken from the unit's rows in the group only) must be caught by the same checks.
"""

from __future__ import annotations

import random
import typing as t
import zlib

import pytest
from sqlglot import exp

from dpsql._sql import reweight
from dpsql.errors import OptionError
from tests.test_perunit import adversary, random_table
from tests.test_units import GROUPS, Claim, connect, load

Row = tuple[int, str, "float | None"]


def policy(relation: str = "add_remove", k: int = 3, lower: float = -4, upper: float = 10, **table: t.Any) -> dict:
    spec = {"privacy_unit": "id", "max_rows_per_unit": k, "columns": {"x": {"lower": lower, "upper": upper}}, **table}
    return {"neighbouring": relation, "budget": {"epsilon": 1e9, "delta": 0.5}, "tables": {"t": spec}}


MECHANISMS = {"laplace": "mechanism = 'laplace', epsilon = 1, delta = 1e-6",
              "gaussian": "mechanism = 'gaussian', epsilon = 1, delta = 1e-6"}
QUERIES = {
    "public keys": "SELECT g, DP_COUNT(*), DP_COUNT(x), DP_SUM(x), DP_MEAN(x), DP_VAR(x) FROM t GROUP BY g "
                   "WITH ({opts}, keys = ['a', 'b', 'c', 'd'])",
    "keys by threshold": "SELECT g, DP_COUNT(*), DP_SUM(x) FROM t GROUP BY g WITH ({opts})",
}
BOUNDS = {"near zero": (-4, 10), "far from zero": (1000, 1010), "negative": (-1010, -1000)}


def far(rng: random.Random, lower: float, upper: float) -> list[Row]:
    """A heavy unit: many rows in every group at a bound (or beyond it), or spread thinly."""
    if rng.random() < 0.4:
        x = rng.choice([upper, lower, upper + 50, lower - 50])
        return [(0, g, x) for g in GROUPS for _ in range(rng.randint(1, 6))]
    if rng.random() < 0.5:  # one row in each group: the weights round each group down
        return [(0, g, rng.choice([lower, upper])) for g in GROUPS]
    return [(0, rng.choice(GROUPS), rng.choice([None, lower, upper, (lower + upper) / 2])) for _ in range(rng.randint(1, 12))]


def shifted(rows: list[Row], lower: float) -> list[Row]:
    """test_perunit's tables ([-4, 10] around 0) moved so that 0 lies at ``lower``."""
    return [(u, g, None if x is None else x + lower + 4) for u, g, x in rows]


def brute(claim: Claim, lower: float, upper: float, relation: str, datasets: int, seed: int) -> tuple[float, list[str]]:
    """(largest moved / claimed, violations) over random tables, heavy units and all neighbours."""
    from tests import test_units

    rng = random.Random(seed)
    worst, problems = 0.0, []
    for _ in range(datasets):
        rows = shifted(random_table(rng, units=4, most=9), lower)
        for extra in (far(rng, lower, upper), far(rng, lower, upper), adversary(rng)):
            for y in test_units.neighbours(rows, extra, relation):
                for what, moved, claimed in claim.moves(rows, y):
                    worst = max(worst, moved / claimed)
                    if moved > claimed * (1 + 1e-9) + 1e-9:
                        problems.append(f"{what}: moved {moved:g} > {claimed:g}")
    return worst, problems


CASES = [*((shape, "laplace", where) for shape in QUERIES for where in BOUNDS), ("public keys", "gaussian", "near zero")]


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@pytest.mark.parametrize("shape,mechanism,where", CASES, ids=["-".join(c) for c in CASES])
def test_neighbours_move_the_reweighted_statistics_at_most_row_truncations_sensitivity(
        shape: str, mechanism: str, where: str, relation: str) -> None:
    lower, upper = BOUNDS[where]
    claim = Claim(policy(relation, 3, lower, upper), QUERIES[shape].format(opts=MECHANISMS[mechanism]))
    assert claim.prepared.plan.units.mode == "reweight" and "PARTITION BY __u)" in claim.prepared.sql
    assert "ORDER BY __h" not in claim.prepared.sql  # no window over the rows
    truncated = Claim(policy(relation, 3, lower, upper),
                      QUERIES[shape].format(opts=MECHANISMS[mechanism] + ", contribution = 'truncate'"))
    assert [p.sensitivity for q in truncated.prepared.plan.prepared for p in q.parts.values()] == \
        [p.sensitivity for q in claim.prepared.plan.prepared for p in q.parts.values()]
    worst, problems = brute(claim, lower, upper, relation, datasets=2,
                            seed=zlib.crc32(f"{shape}{mechanism}{where}{relation}".encode()))
    assert not problems, problems[:5]
    assert worst > (0.5 if mechanism == "laplace" else 0.35)  # the neighbours reach a good part of the claim


def _rounded_up(k: int, keys: t.Sequence[str]) -> exp.Expression:
    """Negative control: every group with a remainder gets its extra row (no apportionment)."""
    return exp.Add(this=exp.column("__f"), expression=exp.Case(
        ifs=[exp.If(this=exp.GT(this=exp.column("__r"), expression=exp.Literal.number(0)), true=exp.Literal.number(1))],
        default=exp.Literal.number(0)))


def _per_group_weight(monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: n_u counted over the unit's rows in the group only (each group its
    own unit of one group)."""
    from dpsql._compile import reweight as rule

    source = rule.reweight

    def per_group(rows, pre):  # noqa: ANN001, ANN202
        out = source(rows, pre)
        units = next(c.this for c in out.args["with_"].expressions if c.alias == "__units")
        units.set("expressions", [exp.Column(this=exp.Star(), table=exp.to_identifier("__per")), exp.alias_(exp.column("__c", "__per"), "__nu"),
                                  exp.alias_(exp.Literal.number(1), "__ng")])
        return out

    monkeypatch.setattr(rule, "reweight", per_group)


@pytest.mark.parametrize("control", ["rounded up", "weight from the group's rows"])
def test_negative_controls_the_brute_force_finds_violations(control: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if control == "rounded up":
        monkeypatch.setattr(reweight, "apportioned", _rounded_up)
    else:
        _per_group_weight(monkeypatch)
    claim = Claim(policy("add_remove", 3), QUERIES["public keys"].format(opts=MECHANISMS["laplace"]))
    _, problems = brute(claim, -4, 10, "add_remove", datasets=2, seed=5)
    assert problems


# -- exhaustive: every dataset of small units over (group, value) rows, every unit neighbour -----

#: the universe: a row is a code, standing for (group, value)
UNIVERSE = {0.0: ("a", -9.0), 1.0: ("a", 10.0), 2.0: ("b", 10.0), 3.0: ("c", -4.0)}


@pytest.mark.parametrize("relation,neighbouring,units", [("add_remove", "add_remove", 1), ("union", "replace", 2)])
def test_every_unit_neighbour_of_every_small_dataset_moves_each_part_at_most_its_sensitivity(
        relation: str, neighbouring: str, units: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """dpsql.admin.bruteforce enumerates every dataset of 1 unit (add_remove: its neighbours hold
    0 or 2) or 2 units (union) of up to 3 rows over 4 (group, value) rows (k = 2: a unit of 3
    rows over 3 groups is weighted by 2/3), and every unit neighbour; the re-weighted statement
    runs on each. Rounding every group up (the negative control) is caught by the same enumeration."""
    from dpsql.admin import bruteforce

    def run() -> tuple[float, list[str]]:
        query = ("SELECT g, DP_COUNT(*), DP_SUM(x), DP_MEAN(x), DP_VAR(x) FROM t GROUP BY g "
                 "WITH (epsilon = 1, mechanism = 'laplace', keys = ['a', 'b', 'c'])")
        claim = Claim(policy(neighbouring, 2), query)
        assert claim.prepared.plan.units.mode == "reweight"
        memo: dict[t.Any, dict] = {}

        def parts(x: t.Any) -> dict:
            if x not in memo:
                rows = [(i + 1, *UNIVERSE[v]) for i, unit in enumerate(x) for v in unit]
                memo[x] = claim.groups(rows)
            return memo[x]

        worst, problems = 0.0, []
        for prep in claim.prepared.plan.prepared:
            for name, part in prep.parts.items():
                def vector(x: t.Any, p: t.Any = prep, n: str = name) -> dict:
                    return {k: v.get(p.label, {}).get(n, 0.0) for k, v in parts(x).items()}
                l1, _ = bruteforce.vector_sensitivity(vector, list(UNIVERSE), units, relation, max_rows=3)
                worst = max(worst, l1 / part.sensitivity)
                if l1 > part.sensitivity * (1 + 1e-9):
                    problems.append(f"{prep.label} {name}: {l1:g} > {part.sensitivity:g}")
        return worst, problems

    worst, problems = run()
    assert not problems, problems
    assert worst > 0.9  # a unit over the bound at a bound reaches the claim
    if relation != "add_remove":
        return  # replace's claim is twice as large: three groups cannot show the control's excess
    monkeypatch.setattr(reweight, "apportioned", _rounded_up)
    _, problems = run()
    assert problems  # the control: rounding up lets 3 rows over 3 groups count as 3


# -- the statistics, the choice, EXPLAIN --------------------------------------------------------


def reference(rows: t.Sequence[Row], k: int) -> dict[str, dict[str, int]]:
    """By hand: per group, the units' rows apportioned (a unit over k rows: ⌊c·k/n⌋ in each
    group, plus 1 in the groups of largest remainder, smaller keys first, until k), and the
    groups a unit keeps (a row at least)."""
    out: dict[str, dict[str, int]] = {}
    for u in {r[0] for r in rows}:
        mine = [r for r in rows if r[0] == u]
        n = len(mine)
        counts = {g: sum(1 for r in mine if r[1] == g) for g in sorted({r[1] for r in mine})}
        kept = dict(counts) if n <= k else {g: c * k // n for g, c in counts.items()}
        if n > k:
            for g in sorted(counts, key=lambda g: (-(counts[g] * k % n), g))[: k - sum(kept.values())]:
                kept[g] += 1
        assert sum(kept.values()) == min(n, k)
        for g, w in kept.items():
            if w >= 1:
                group = out.setdefault(g, {"rows": 0, "units": 0})
                group["rows"] += w
                group["units"] += 1
    return out


def test_the_weighted_counts_are_what_the_docstring_says() -> None:
    rng = random.Random(11)
    rows = random_table(rng, units=8, most=12)
    con = connect(policy(k=3))
    prepared = con.prepare("SELECT g, DP_COUNT(*) FROM t GROUP BY g WITH (epsilon = 1, delta = 1e-6)")
    con.close()
    claim = Claim(policy(k=3), "SELECT 1")
    load(claim.raw, rows)
    got = {r[0]: r[1:] for r in claim.raw.execute(prepared.sql).fetchall()}
    want = reference(rows, 3)
    assert {g: (int(n), int(keys)) for g, (n, keys) in got.items()} == {g: (v["rows"], v["units"]) for g, v in want.items()}


def test_auto_reweights_a_group_by_without_g_and_explain_says_so() -> None:
    con = connect(policy(k=3))
    q = "SELECT g, DP_COUNT(*), DP_MEAN(x) FROM t GROUP BY g WITH (epsilon = 1, keys = ['a', 'b'])"
    text = con.explain(q)
    assert con.prepare(q).plan.units.mode == "reweight"
    assert "bounding: re-weighting (contribution = 'reweight'; chosen: a GROUP BY without max_groups_per_unit" in text
    assert "re-weighting (in the rewritten SQL, after the WHERE)" in text and "truncation (in the" not in text
    truncated = con.prepare(q.replace("keys =", "contribution = 'truncate', keys ="))
    assert truncated.plan.units.mode == "truncate" and "ROW_NUMBER() OVER (PARTITION BY __u ORDER BY __h)" in truncated.sql
    median = con.prepare("SELECT g, DP_MEDIAN(x) FROM t GROUP BY g WITH (epsilon = 1, keys = ['a'])")
    assert median.plan.units.mode == "truncate"
    con.close()


def test_an_explicit_reweight_that_cannot_bound_the_query_is_refused() -> None:
    con = connect(policy(k=3))
    with pytest.raises(OptionError, match="re-weighting cannot bound this query: DP_MEDIAN"):
        con.prepare("SELECT g, DP_MEDIAN(x) FROM t GROUP BY g WITH (epsilon = 1, keys = ['a'], contribution = 'reweight')")
    con.close()
    con = connect(policy(k=3, max_groups_per_unit=2))
    with pytest.raises(OptionError, match="re-weighting cannot bound this query: max_groups_per_unit is in force"):
        con.prepare("SELECT g, DP_SUM(x) FROM t GROUP BY g WITH (epsilon = 1, keys = ['a'], contribution = 'reweight')")
    con.close()


def test_the_policy_may_ask_for_reweighting_and_the_report_says_what_it_does() -> None:
    rows = [(1, "a", 1.0), (1, "b", 2.0), (1, "b", 3.0), (1, "c", 4.0), (2, "a", 5.0)]
    con = connect(policy(k=2, contribution="reweight"), rows)
    res = con.execute("SELECT g, DP_SUM(x) FROM t GROUP BY g WITH (epsilon = 1, keys = ['a', 'b', 'c'])")
    assert con.prepare("SELECT DP_SUM(x) FROM t WITH (epsilon = 1)").plan.units.mode == "reweight"
    text = str(res.report)
    assert "re-weighted" in text and "weighted by 2/its rows, shared among its groups" in text
    con.close()
