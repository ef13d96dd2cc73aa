"""Per-unit pre-aggregation (dpsql._compile.perunit): which mode bounds a query, the statistics it
computes, and the sensitivity it claims, checked by brute force over every unit neighbour.

The brute force runs the statement dpsql generates with ``contribution = 'clip'`` on small
tables whose units hold more rows than the bound, NULLs and values outside the bounds, and on
every neighbour (remove a unit, add one, replace one's rows), and compares how far each
released part moves with the sensitivity its noise is calibrated to (L1 for Laplace, L2 for
Gaussian). A negative control that skips the clipping of the partials must be caught.
"""

from __future__ import annotations

import math
import random
import typing as t
import zlib

import pytest

from dpsql._compile import perunit, preaggregate
from dpsql._policy.policy import policy_from_dict
from dpsql.errors import OptionError, PolicyError
from tests.test_units import GROUPS, Claim, connect, load, neighbours

Row = tuple[int, str, "float | None"]
LOWER, UPPER = -4, 10


def policy(relation: str = "add_remove", k: int = 3, **bounds: t.Any) -> dict:
    table = {"privacy_unit": "id", "max_rows_per_unit": k,
             "columns": {"x": {"lower": LOWER, "upper": UPPER}}, **bounds}
    return {"neighbouring": relation, "budget": {"epsilon": 1e9, "delta": 0.5}, "tables": {"t": table}}


def random_table(rng: random.Random, units: int = 4, most: int = 8) -> list[Row]:
    """Units of 1 to ``most`` rows (the bound is 2 or 3), values in and out of the bounds, NULLs."""
    def value() -> float | None:
        return rng.choice([None, -9.0, 14.0, float(rng.randint(LOWER, UPPER)), float(rng.randint(LOWER, UPPER))])
    return [(u, rng.choice(GROUPS), value()) for u in range(1, units + 1) for _ in range(rng.randint(1, most))]


def adversary(rng: random.Random) -> list[Row]:
    """A heavy unit at one bound in every group, or a random one."""
    if rng.random() < 0.5:
        x = rng.choice([float(UPPER), float(LOWER), 99.0, -99.0])
        return [(0, g, x) for g in GROUPS for _ in range(5)]
    return [(0, rng.choice(GROUPS), rng.choice([None, -20.0, 0.0, 20.0, float(rng.randint(LOWER, UPPER))]))
            for _ in range(rng.randint(1, 12))]


def check(claim: Claim, datasets: int, seed: int, relation: str) -> tuple[float, list[str]]:
    """(largest moved / claimed, violations) over random tables and all their neighbours."""
    rng = random.Random(seed)
    worst, problems = 0.0, []
    for _ in range(datasets):
        rows = random_table(rng)
        for y in neighbours(rows, adversary(rng), relation):
            for what, moved, claimed in claim.moves(rows, y):
                worst = max(worst, moved / claimed)
                if moved > claimed * (1 + 1e-9) + 1e-9:
                    problems.append(f"{what}: moved {moved:g} > {claimed:g}")
    return worst, problems


QUERIES = {
    "ungrouped": "SELECT DP_COUNT(*), DP_COUNT(x), DP_SUM(x), DP_MEAN(x), DP_VAR(x) FROM t WITH ({opts})",
    "grouped": "SELECT g, DP_COUNT(*), DP_SUM(x), DP_MEAN(x), DP_STDDEV(x) FROM t GROUP BY g "
               "WITH ({opts}, keys = ['a', 'b', 'c', 'd'])",
    "keys by threshold": "SELECT g, DP_SUM(x) FROM t GROUP BY g WITH ({opts})",
}
BOUNDS = {"ungrouped": [{"k": 2}, {"k": 3}],
          "grouped": [{"k": 3, "max_groups_per_unit": 2, "max_rows_per_group_per_unit": 1},
                      {"k": 2, "max_groups_per_unit": 3}],
          "keys by threshold": [{"k": 2, "max_groups_per_unit": 2}]}
MECHANISMS = {"laplace": "mechanism = 'laplace', epsilon = 1, delta = 1e-6, contribution = 'clip'",
              "gaussian": "mechanism = 'gaussian', epsilon = 1, delta = 1e-6, contribution = 'clip'"}
CASES = [(b, shape, mech) for shape, bs in BOUNDS.items() for b in bs for mech in MECHANISMS
         if not (shape == "keys by threshold" and mech == "gaussian")]


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@pytest.mark.parametrize("bounds,shape,mechanism", CASES,
                         ids=[f"{'-'.join(f'{k}{v}' for k, v in b.items())}-{s}-{m}" for b, s, m in CASES])
def test_neighbours_move_the_clipped_statistics_at_most_the_claimed_sensitivity(
        bounds: dict, shape: str, mechanism: str, relation: str) -> None:
    bounds = dict(bounds)
    claim = Claim(policy(relation, bounds.pop("k"), **bounds), QUERIES[shape].format(opts=MECHANISMS[mechanism]))
    assert claim.prepared.plan.units.mode == "clip" and "__per" in claim.prepared.sql
    worst, problems = check(claim, datasets=4, seed=zlib.crc32(f"{shape}{mechanism}{relation}{bounds}".encode()),
                            relation=relation)
    assert not problems, problems[:5]
    assert worst > 0.5  # the neighbours reach a good part of the claim


def test_negative_control_without_clipping_the_brute_force_finds_violations(monkeypatch) -> None:
    monkeypatch.setattr(perunit, "clipped", lambda kind, x, n, cap: x)
    claim = Claim(policy("add_remove", 2), QUERIES["ungrouped"].format(opts=MECHANISMS["laplace"]))
    _, problems = check(claim, datasets=2, seed=3, relation="add_remove")
    assert problems


def test_negative_control_without_the_groups_bound_the_brute_force_finds_violations(monkeypatch) -> None:
    source = preaggregate.preaggregate

    def unbounded(rows, pre):  # noqa: ANN001, ANN202
        select = source(rows, pre)
        select.set("qualify", None)
        return select

    monkeypatch.setattr(preaggregate, "preaggregate", unbounded)
    claim = Claim(policy("add_remove", 2, max_groups_per_unit=1), QUERIES["grouped"].format(opts=MECHANISMS["laplace"]))
    _, problems = check(claim, datasets=2, seed=4, relation="add_remove")
    assert problems


@pytest.mark.parametrize("mechanism,expected", [("laplace", {"n": 2 * 3, "s": 2 * 3 * 10}),
                                                ("gaussian", {"n": 2 * math.sqrt(3), "s": 2 * 10 * math.sqrt(3)})])
def test_the_claim_is_tight(mechanism: str, expected: dict) -> None:
    """A unit with many rows at the upper bound in every group moves the counts and sums by
    exactly r·g (Laplace) or r·√g (Gaussian) times the per-row bound."""
    query = QUERIES["grouped"].format(opts=MECHANISMS[mechanism]).replace(", DP_MEAN(x), DP_STDDEV(x)", "")
    claim = Claim(policy("add_remove", 2, max_groups_per_unit=3), query)
    others: list[Row] = [(u, g, 5.0) for u in (2, 3) for g in GROUPS]
    heavy: list[Row] = [(1, g, 10.0) for g in GROUPS for _ in range(4)]
    moved = {what.split()[1]: (m, c) for what, m, c in claim.moves(others + heavy, others)}
    for part, value in expected.items():
        m, c = moved[part]
        assert m == pytest.approx(value) and c == pytest.approx(value)


# -- what the statistics are ------------------------------------------------------------------


def reference(rows: t.Sequence[Row], c: int) -> dict[str, float]:
    """The clipped statistics by hand: per unit, its count min(n, c), its total clipped to
    c·[min(L, 0), max(U, 0)], its mean's centred sum re-weighted to c rows when it has more."""
    out = {"rows": 0.0, "n": 0.0, "s": 0.0, "mean_n": 0.0, "mean_s": 0.0}
    centre = (LOWER + UPPER) / 2
    for u in {r[0] for r in rows}:
        xs = [min(max(x, LOWER), UPPER) for i, _, x in rows if i == u and x is not None]
        n_rows = sum(1 for r in rows if r[0] == u)
        out["rows"] += min(n_rows, c)
        out["n"] += min(len(xs), c)
        out["s"] += min(max(sum(xs), c * min(LOWER, 0)), c * max(UPPER, 0))
        out["mean_n"] += min(len(xs), c)
        centred = sum(x - centre for x in xs)
        out["mean_s"] += centred if len(xs) <= c else centred * c / len(xs)
    return out


def test_the_clipped_statistics_are_what_the_docstring_says() -> None:
    rng = random.Random(7)
    rows = random_table(rng, units=6, most=9)
    con = connect(policy(k=3))
    prepared = con.prepare("SELECT DP_COUNT(*), DP_COUNT(x), DP_SUM(x), DP_MEAN(x) FROM t WITH (epsilon = 1)")
    con.close()
    claim = Claim(policy(k=3), "SELECT 1")  # only for its DuckDB connection
    load(claim.raw, rows)
    cur = claim.raw.execute(prepared.sql)
    got = dict(zip([d[0] for d in cur.description], cur.fetchone()))
    count, count_x, total, mean = prepared.plan.prepared
    want = reference(rows, 3)
    assert got["a0_n"] == want["rows"] and got["a1_n"] == want["n"]
    assert float(total.exact({"s": got["a2_s"]})["s"]) == pytest.approx(want["s"], abs=1e-6)
    parts = mean.centred({"n": got["a3_n"], "s": got["a3_s"]})
    assert parts["n"] == want["mean_n"]
    # re-weighted sums are rounded to the grid once per unit: 2^-25 each
    assert parts["s1"] == pytest.approx(want["mean_s"], abs=1e-5)


# -- which mode, and EXPLAIN -------------------------------------------------------------------


def test_auto_picks_pre_aggregation_where_the_noise_is_the_same_and_says_so() -> None:
    con = connect(policy(k=3, max_groups_per_unit=2))
    text = con.explain("SELECT DP_SUM(x) FROM t WITH (epsilon = 1)")
    assert "bounding: pre-aggregation (contribution = 'clip'; chosen: the same noise as row truncation" in text
    assert "QUALIFY" not in text and "HASH(__t)" not in text and "GROUP BY\n      __u" in text
    grouped = con.explain("SELECT g, DP_MEAN(x) FROM t GROUP BY g WITH (epsilon = 1, keys = ['a'])")
    assert "pre-aggregation" in grouped and "at most 2 groups" in grouped


@pytest.mark.parametrize("query,why", [
    ("SELECT DP_MEDIAN(x) FROM t WITH (epsilon = 1)", "chosen: DP_MEDIAN(x) needs rows"),
    ("SELECT DP_COUNT(DISTINCT x) FROM t WITH (epsilon = 1)", "needs rows"),
    # a GROUP BY of counts without g is re-weighted (tests/test_reweight.py); of a median, not
    ("SELECT g, DP_MEDIAN(x) FROM t GROUP BY g WITH (epsilon = 1, keys = ['a'])",
     "chosen: DP_MEDIAN(x) needs rows"),
])
def test_auto_keeps_row_truncation_where_rows_are_needed_or_it_has_less_noise(query: str, why: str) -> None:
    con = connect(policy(k=3))
    prepared = con.prepare(query)
    assert prepared.plan.units.mode == "truncate" and "QUALIFY" in prepared.sql
    assert why in prepared.explain_text()


def test_an_explicit_clip_that_cannot_bound_the_query_is_refused_before_the_charge() -> None:
    con = connect(policy(k=3), [(1, "a", 1.0)])
    before = con.budget.spent
    with pytest.raises(OptionError, match="option 'contribution': pre-aggregation cannot bound this query: "
                                          "DP_MEDIAN\\(x\\) needs rows; use contribution = 'truncate'"):
        con.sql("SELECT DP_MEDIAN(x) FROM t WITH (epsilon = 1, contribution = 'clip')")
    assert con.budget.spent == before
    with pytest.raises(OptionError, match="option 'contribution' must be one of truncate, clip, reweight, auto"):
        con.prepare("SELECT DP_SUM(x) FROM t WITH (epsilon = 1, contribution = 'rows')")


def test_the_policy_chooses_when_the_query_is_silent_and_the_query_wins() -> None:
    con = connect(policy(k=3, contribution="truncate"))
    assert con.prepare("SELECT DP_SUM(x) FROM t WITH (epsilon = 1)").plan.units.mode == "truncate"
    assert "(contribution = 'truncate'; policy)" in con.explain("SELECT DP_SUM(x) FROM t WITH (epsilon = 1)")
    clip = con.prepare("SELECT DP_SUM(x) FROM t WITH (epsilon = 1, contribution = 'clip')")
    assert clip.plan.units.mode == "clip" and "(contribution = 'clip'; query)" in clip.explain_text()
    strict = connect(policy(k=3, contribution="clip"))
    with pytest.raises(OptionError, match="the policy's contribution = 'clip'"):
        strict.prepare("SELECT DP_MEDIAN(x) FROM t WITH (epsilon = 1)")
    with pytest.raises(PolicyError, match="contribution must be 'truncate', 'clip', 'reweight' or 'auto'"):
        policy_from_dict(policy(k=3, contribution="rows"))


def test_the_same_sensitivity_in_both_modes() -> None:
    con = connect(policy(k=3, max_groups_per_unit=2))
    for query in ("SELECT DP_COUNT(*), DP_SUM(x), DP_MEAN(x), DP_VAR(x) FROM t WITH (epsilon = 1{})",
                  "SELECT g, DP_COUNT(*), DP_SUM(x) FROM t GROUP BY g WITH (epsilon = 1, keys = ['a']{})"):
        clip = con.prepare(query.format(", contribution = 'clip'")).plan.prepared
        rows = con.prepare(query.format(", contribution = 'truncate'")).plan.prepared
        assert [{n: p.sensitivity for n, p in a.parts.items()} for a in clip] == \
               [{n: p.sensitivity for n, p in a.parts.items()} for a in rows]


def test_the_report_says_what_clipping_does_and_that_the_interval_does_not_cover_it() -> None:
    con = connect(policy(k=2), [(1, "a", 1.0)] * 5 + [(2, "b", 3.0)])
    lines = con.sql("SELECT DP_SUM(x) FROM t WITH (epsilon = 1)").report_lines()
    assert "per id, ≤ 2 rows, pre-aggregated" in lines[0]
    assert lines[0].endswith("each id counts as at most 2 rows (its sums clipped or re-weighted); "
                             "the interval covers the noise, not that bias")


# -- report_dropped ----------------------------------------------------------------------------


def cut_counts(claim: Claim, rows: t.Sequence[Row]) -> tuple[int, int]:
    load(claim.raw, rows)
    cur = claim.raw.execute(claim.prepared.sql)
    names = [d[0] for d in cur.description]
    first = cur.fetchone()
    if first is None:
        return 0, 0
    row = dict(zip(names, first))
    return int(row["__units_n"]), int(row["__cut_n"])


@pytest.mark.parametrize("query,bounds", [
    ("SELECT DP_SUM(x) FROM t WITH (epsilon = 1, report_dropped = true)", {}),
    ("SELECT DP_MEDIAN(x) FROM t WITH (epsilon = 1, report_dropped = true)", {}),
    ("SELECT g, DP_COUNT(*) FROM t GROUP BY g WITH (epsilon = 1, delta = 1e-6, report_dropped = true)",
     {"max_groups_per_unit": 2, "max_rows_per_group_per_unit": 2}),
])
def test_report_dropped_counts_units_over_the_bound_and_one_unit_moves_each_count_by_one(query, bounds) -> None:
    claim = Claim(policy("add_remove", 3, **bounds), query)
    part = claim.prepared.plan.dropped
    share = 1 / 3 if "GROUP" in query else 1 / 2  # the key selection takes a share too
    assert part is not None and part.sensitivity == 2 and part.cost.epsilon == pytest.approx(share)
    rng = random.Random(11)
    moved = 0
    for _ in range(3):
        rows = random_table(rng)
        units, cut = cut_counts(claim, rows)
        by_unit: dict[int, list[Row]] = {}
        for r in rows:
            by_unit.setdefault(r[0], []).append(r)
        if "max_groups_per_unit" in bounds:
            def over(rs: list[Row]) -> bool:
                per = [sum(1 for r in rs if r[1] == g) for g in GROUPS]
                return sum(1 for n in per if n) > 2 or max(per) > 2
        else:
            def over(rs: list[Row]) -> bool:
                return len(rs) > 3
        assert (units, cut) == (len(by_unit), sum(over(rs) for rs in by_unit.values()))
        for y in neighbours(rows, adversary(rng), "add_remove"):
            u2, c2 = cut_counts(claim, y)
            assert abs(u2 - units) <= 1 and abs(c2 - cut) <= 1
            moved = max(moved, abs(u2 - units) + abs(c2 - cut))
    assert moved == 2


def test_report_dropped_is_charged_shown_and_refused_where_nothing_is_bounded() -> None:
    con = connect(policy(k=2), [(1, "a", 1.0)] * 5 + [(2, "b", 3.0)])
    res = con.sql("SELECT DP_COUNT(*) FROM t WITH (epsilon = 1, report_dropped = true)")
    assert con.budget.spent.epsilon == pytest.approx(1.0)
    assert res.report[0].epsilon == pytest.approx(0.5)
    note = [n for n in res.notes if n.startswith("report_dropped:")]
    assert len(note) == 1 and "of id units are over the bound" in note[0] and "spent ε=0.500" in note[0]
    assert "report_dropped: noisy counts of units" in con.explain(
        "SELECT DP_COUNT(*) FROM t WITH (epsilon = 1, report_dropped = true)")
    spent = con.budget.spent
    with pytest.raises(OptionError, match="option 'report_dropped' spends epsilon"):
        con.sql("SELECT DP_COUNT(*) FROM t WITH (rho = 0.1, mechanism = 'gaussian', report_dropped = true)")
    with pytest.raises(OptionError, match="option 'report_dropped' must be true or false"):
        con.sql("SELECT DP_COUNT(*) FROM t WITH (epsilon = 1, report_dropped = 'maybe')")
    assert con.budget.spent == spent
    rows = connect({"budget": {"epsilon": 10}, "tables": {"r": {"privacy_unit": "row"}}})
    rows.engine.connection.execute("CREATE TABLE r (x INTEGER)")
    with pytest.raises(OptionError, match="option 'report_dropped' needs a table whose privacy unit is an id"):
        rows.prepare("SELECT DP_COUNT(*) FROM r WITH (epsilon = 1, report_dropped = true)")


def test_a_subquery_of_one_row_per_unit_needs_no_bounding_mode() -> None:
    query = ("WITH per AS (SELECT id, count(*) AS n FROM t GROUP BY id) "
             "SELECT DP_QUANTILE(n, 0.9, 0, 50) FROM per WITH (epsilon = 1)")
    for pol in (policy(k=3), policy(k=3, contribution="clip")):
        prepared = connect(pol).prepare(query)
        assert "bounding:" not in prepared.explain_text() and "__per" not in prepared.sql


@pytest.mark.parametrize("units,found", [(3000, True), (20, False)])
def test_bounds_found_privately_release_under_pre_aggregation(units: int, found: bool) -> None:
    """Where no bounds are found the release blanks the widths of a column that had one width for
    every group: it gives those columns an array of their own (a read-only one failed after the
    charge)."""
    rows = [(u, "a", float(u % 10)) for u in range(1, units + 1) for _ in range(2)]
    pol = policy(k=3)
    pol["tables"]["t"]["columns"] = {}  # x has no bounds: they are found privately
    con = connect(pol, rows)
    res = con.sql("SELECT DP_SUM(x), DP_COUNT(*) FROM t WITH (epsilon = 5, bounds = 'auto')")
    (total, count), = res.fetchall()
    assert (total is not None) == found and con.budget.spent.epsilon == pytest.approx(5)
    assert count == pytest.approx(2 * units, abs=200)


# -- exhaustive: every dataset of two small units and every unit neighbour ------------------------


@pytest.mark.parametrize("relation,neighbouring,units", [("add_remove", "add_remove", 1), ("union", "replace", 2)])
def test_every_unit_neighbour_of_every_small_dataset_moves_each_part_at_most_its_sensitivity(
        relation: str, neighbouring: str, units: int) -> None:
    """dpsql.admin.bruteforce enumerates every dataset of 1 unit (add_remove: its neighbours hold
    0 or 2) or 2 units (union) of up to 3 rows from a universe
    with values below, inside and above [L, U] = [-4, 10] (k = 2, so units over the bound are
    clipped and re-weighted), and every unit neighbour (``union``: a unit's rows replaced by 0 to
    3 others, dpsql's ``replace``); the pre-aggregated statement runs on each."""
    from dpsql.admin import bruteforce

    query = ("SELECT DP_COUNT(*), DP_SUM(x), DP_MEAN(x), DP_VAR(x) FROM t "
             "WITH (epsilon = 1, contribution = 'clip')")
    claim = Claim(policy(neighbouring, 2), query)
    memo: dict[t.Any, dict] = {}

    def parts(x: t.Any) -> dict:
        if x not in memo:
            rows = [(i + 1, "a", v) for i, unit in enumerate(x) for v in unit]
            memo[x] = claim.groups(rows).get((), {})
        return memo[x]

    worst = 0.0
    for prep in claim.prepared.plan.prepared:
        for name, part in prep.parts.items():
            l1, _ = bruteforce.vector_sensitivity(lambda x, p=prep, n=name: {0: parts(x).get(p.label, {}).get(n, 0.0)},
                                                  [-9.0, 3.0, 14.0], units, relation, max_rows=3)
            assert l1 <= part.sensitivity * (1 + 1e-9), (prep.label, name, l1, part.sensitivity)
            worst = max(worst, l1 / part.sensitivity)
    assert worst > 0.9  # a unit over the bound at a clipped end reaches the claim


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_row_truncation_with_groups_still_holds_its_claim(mechanism: str, relation: str) -> None:
    """tests/test_units.py's brute force now meets pre-aggregation wherever g is in force (auto
    picks it there); row truncation with g, asked for, is checked here the same way."""
    query = QUERIES["grouped"].format(opts=MECHANISMS[mechanism].replace("'clip'", "'truncate'"))
    claim = Claim(policy(relation, 3, max_groups_per_unit=2, max_rows_per_group_per_unit=2), query)
    assert claim.prepared.plan.units.mode == "truncate" and "DENSE_RANK()" in claim.prepared.sql
    worst, problems = check(claim, datasets=3, seed=zlib.crc32(f"truncate{mechanism}{relation}".encode()),
                            relation=relation)
    assert not problems, problems[:5]
    assert worst > 0.5


LINKED = {
    "line items, two links from the customer": "SELECT DP_COUNT(*), DP_SUM(l_quantity), DP_MEAN(l_quantity) "
                                               "FROM lineitem WITH (epsilon = 1, contribution = 'clip')",
    "line items joined to orders, g = 1": "SELECT o_orderstatus, DP_COUNT(*), DP_SUM(o_totalprice) FROM lineitem "
                                          "JOIN orders ON l_orderkey = o_orderkey GROUP BY o_orderstatus "
                                          "WITH (epsilon = 1, keys = ['F', 'O'], max_groups_per_unit = 1, "
                                          "max_rows_per_group_per_unit = 2, contribution = 'clip')",
}


@pytest.mark.parametrize("case", sorted(LINKED))
def test_a_linked_table_pre_aggregates_by_the_unit_its_links_reach(case: str) -> None:
    """A linked table's unit is the customer reached through its links (tests/links_fixture.py):
    the partials are grouped by that unit like any id unit's, and removing a customer with all
    their orders and line items moves each part at most its sensitivity (the links' oracle)."""
    from tests import links_fixture, test_links

    con = links_fixture.connect(orders=2, lineitem=3)
    prepared = con.prepare(LINKED[case])
    con.close()
    assert prepared.plan.units.mode == "clip" and "AS __per" in prepared.sql and "HASH(__t" not in prepared.sql
    rng = random.Random(zlib.crc32(case.encode()))
    worst, problems = test_links._check(prepared, [links_fixture.DATA, *(test_links.random_data(rng) for _ in range(12))])
    assert not problems, problems[:3]
    assert worst >= 0.5, worst


def test_negative_control_a_linked_table_without_clipping_breaks_the_bound(monkeypatch) -> None:
    from tests import links_fixture, test_links

    monkeypatch.setattr(perunit, "clipped", lambda kind, x, n, cap: x)
    con = links_fixture.connect(orders=2, lineitem=3)
    prepared = con.prepare(LINKED["line items, two links from the customer"])
    con.close()
    _, problems = test_links._check(prepared, [links_fixture.DATA])
    assert problems
