"""Privacy units by id: bounds from the policy and the query, truncation in the rewritten SQL,
and the sensitivities it buys (L1 r·g, L2 r·√g), checked by brute force over neighbours.

The brute-force checks run the statistics query dpsql generates on small multi-row tables and
on every neighbour (remove one unit's rows, add a unit, replace one unit's rows) in a plain
DuckDB, and compare how far the released parts move with the sensitivity the noise is
calibrated to: L1 for Laplace, L2 for Gaussian (the gate's property tests do the same for row
units). A negative control removes the truncation and must be caught.
"""

from __future__ import annotations

import math
import random
import typing as t
import zlib
from pathlib import Path

import duckdb
import pytest

import dpsql
from dpsql._accounting.budget import Cost
from dpsql._compile.compiler import Compiler
from dpsql._plan.plan import KeySelection
from dpsql._policy.policy import policy_from_dict
from dpsql._policy.units import UnitBounds
from dpsql._privacy.noise import SeededNoise
from dpsql.errors import OptionError, PolicyError
from dpsql.interfaces.demo import load_adult
from tests.conftest import demo_policy

VISITS = Path(__file__).resolve().parent.parent / "fixtures" / "visits"
Row = tuple[int, str, float]
SCHEMA = "id INTEGER, g VARCHAR, x DOUBLE"
GROUPS = ["a", "b", "c", "d"]


def policy(neighbouring: str = "add_remove", k: int = 2, **bounds: int) -> dict:
    table = {"privacy_unit": "id", "max_rows_per_unit": k, "columns": {"x": {"lower": 0, "upper": 10}}, **bounds}
    return {"neighbouring": neighbouring, "budget": {"epsilon": 1e9, "delta": 0.5}, "tables": {"t": table}}


def connect(pol: dict, rows: t.Sequence[Row] = ()) -> dpsql.Connection:
    def setup(con: duckdb.DuckDBPyConnection) -> None:
        load(con, rows)

    return dpsql.connect(":memory:", pol, setup=setup, noise=SeededNoise(0))


def load(con: duckdb.DuckDBPyConnection, rows: t.Sequence[Row]) -> None:
    con.execute(f"CREATE OR REPLACE TABLE t ({SCHEMA})")
    if rows:
        con.executemany("INSERT INTO t VALUES (?, ?, ?)", list(rows))


# -- policy and options ------------------------------------------------------------------------


def test_policy_reads_the_three_bounds() -> None:
    tp = policy_from_dict(policy(k=5, max_groups_per_unit=3, max_rows_per_group_per_unit=2)).table("t")
    assert (tp.max_rows_per_unit, tp.max_groups_per_unit, tp.max_rows_per_group_per_unit) == (5, 3, 2)
    assert policy_from_dict(policy(k=5)).table("t").max_groups_per_unit is None


@pytest.mark.parametrize("table,message", [
    ({"privacy_unit": "id", "max_rows_per_unit": 2, "max_rows_per_group_per_unit": 2},
     "tables.t.max_rows_per_group_per_unit needs max_groups_per_unit"),
    ({"privacy_unit": "id", "max_rows_per_unit": 2, "max_groups_per_unit": 0},
     "tables.t.max_groups_per_unit must be an integer >= 1"),
    ({"privacy_unit": "id", "max_rows_per_unit": 2, "max_groups_per_unit": 2.5},
     "tables.t.max_groups_per_unit must be an integer >= 1"),
    ({"privacy_unit": "row", "max_groups_per_unit": 2},
     "tables.t.max_groups_per_unit: table t's privacy unit is a row"),
])
def test_policy_refuses_bad_bounds(table: dict, message: str) -> None:
    with pytest.raises(PolicyError) as err:
        policy_from_dict({"budget": {"epsilon": 1}, "tables": {"t": table}})
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.fixture(scope="module")
def adult() -> dpsql.Connection:
    con = dpsql.connect(":memory:", demo_policy(epsilon=10, delta=1e-5), setup=load_adult, noise=SeededNoise(0))
    yield con
    con.close()


@pytest.mark.parametrize("option", ["max_rows_per_unit", "max_groups_per_unit", "max_rows_per_group_per_unit"])
def test_a_row_unit_table_refuses_the_unit_options_and_charges_nothing(adult, option: str) -> None:
    query = f"SELECT sex, DP_COUNT(*) FROM adult GROUP BY sex WITH (epsilon = 1, {option} = 2)"
    with pytest.raises(OptionError) as err:
        adult.sql(query)
    assert str(err.value).startswith(f"table adult's privacy unit is a row: option '{option}'")
    assert adult.budget.spent.epsilon == 0


@pytest.mark.parametrize("options,message", [
    ("max_groups_per_unit = 2", "option 'max_groups_per_unit' needs a GROUP BY"),
    ("max_rows_per_group_per_unit = 2", "option 'max_rows_per_group_per_unit' needs a GROUP BY"),
    ("max_rows_per_unit = 0", "option 'max_rows_per_unit' must be an integer >= 1, got 0"),
    ("max_rows_per_unit = 1.5", "option 'max_rows_per_unit' must be an integer >= 1, got 1.5"),
    ("max_rows_per_unit = 'two'", "option 'max_rows_per_unit' must be a number"),
])
def test_unit_options_are_checked_before_anything_runs(options: str, message: str) -> None:
    con = connect(policy())
    with pytest.raises(OptionError, match=message):
        con.sql(f"SELECT DP_COUNT(*) FROM t WITH (epsilon = 1, {options})")
    assert con.budget.spent.epsilon == 0


def test_rows_per_group_needs_groups_in_the_query_or_the_policy() -> None:
    con = connect(policy())
    query = "SELECT g, DP_COUNT(*) FROM t GROUP BY g WITH (epsilon = 1, keys = ['a'], max_rows_per_group_per_unit = 1)"
    with pytest.raises(OptionError, match="needs max_groups_per_unit"):
        con.prepare(query)
    con = connect(policy(max_groups_per_unit=3))
    units = con.prepare(query).plan.units
    assert (units.max_groups, units.max_rows_per_group, units.sources["max_groups_per_unit"]) == (3, 1, "policy")


def test_a_row_bound_that_would_do_nothing_is_refused() -> None:
    con = connect(policy(k=2, max_groups_per_unit=3, max_rows_per_group_per_unit=1))
    grouped = "SELECT g, DP_COUNT(*) FROM t GROUP BY g WITH (epsilon = 1, keys = ['a'], max_rows_per_unit = 4)"
    with pytest.raises(OptionError, match="option 'max_rows_per_unit' has no effect in this GROUP BY"):
        con.prepare(grouped)
    # without r, k is the rows per group; ungrouped, k is the bound
    assert connect(policy(k=2, max_groups_per_unit=3)).prepare(grouped).plan.units.max_rows_per_group == 4
    assert con.prepare("SELECT DP_COUNT(*) FROM t WITH (epsilon = 1, max_rows_per_unit = 4)").plan.units.l1 == 4


def test_query_options_override_the_policy_and_explain_says_where_each_came_from() -> None:
    con = connect(policy(k=2, max_groups_per_unit=3))
    text = con.explain("SELECT DP_COUNT(*) FROM t WITH (epsilon = 1, max_rows_per_unit = 7, contribution = 'truncate')")
    assert "privacy unit: id (all rows of one id)" in text
    assert "max_rows_per_unit = 7 (query)" in text and "Δ=7 " in text
    assert "ROW_NUMBER() OVER (PARTITION BY __u ORDER BY __h) BETWEEN 1 AND 7" in text
    text = con.explain("SELECT g, DP_COUNT(*) FROM t GROUP BY g WITH (epsilon = 1, keys = ['a'], contribution = 'truncate')")
    assert "max_groups_per_unit = 3 (policy), max_rows_per_group_per_unit = 2 (default: max_rows_per_unit)" in text
    assert "DENSE_RANK() OVER (PARTITION BY __u ORDER BY HASH(__u, __k0), __k0) BETWEEN 1 AND 3" in text
    assert "L1 (Laplace, data-dependent) × 6, L2 (Gaussian) × 3.4641" in text
    assert con.budget.spent.epsilon == 0


def test_multipliers_notes_and_reach() -> None:
    k = UnitBounds(unit="pid", max_rows=5)
    gr = UnitBounds(unit="pid", max_rows=5, max_groups=4, max_rows_per_group=3)
    assert (k.l1, k.l2, k.reach, k.per_group) == (5, 5.0, 5, 1)
    assert (gr.l1, gr.l2, gr.reach, gr.per_group) == (12, 6.0, 4, 1)
    assert k.note == "per pid, ≤ 5 rows" and gr.note == "per pid, ≤ 4 groups × 3 rows"
    two = UnitBounds(unit="pid", max_rows=5, max_groups=4, max_rows_per_group=3, group_size=2)
    assert (two.l1, two.l2, two.reach, two.per_group) == (24, 12.0, 8, 2)
    row = UnitBounds(unit="row", max_rows=3, group_size=2)
    assert (row.l1, row.l2, row.reach, row.per_group, row.note) == (6, 6.0, 6, 6, "")


def test_row_unit_rewrite_has_no_truncation(adult) -> None:
    sql = adult.prepare("SELECT sex, DP_MEAN(age) FROM adult GROUP BY sex WITH (epsilon = 1)").sql
    assert "ROW_NUMBER" not in sql and "__h" not in sql


# -- acceptance: the bound is enforced, never trusted -------------------------------------------

#: unit 1 holds 15 rows, units 2..11 one row each
FIFTEEN: list[Row] = [(1, "a", float(v)) for v in range(15)] + [(u, "b", 1.0) for u in range(2, 12)]


def exact(con: dpsql.Connection, query: str) -> tuple[t.Any, dict[str, t.Any]]:
    """The prepared query and its exact statistics row (before any noise)."""
    prepared = con.prepare(query)
    names, rows = con.engine.statistics(prepared.sql)
    assert len(rows) == 1
    return prepared, dict(zip(names, rows[0]))


def test_policy_says_two_data_holds_fifteen_noise_and_statistics_are_for_two() -> None:
    con = connect(policy(k=2), FIFTEEN)
    prepared, row = exact(con, "SELECT DP_COUNT(*), DP_SUM(x), DP_MEAN(x) FROM t WITH (epsilon = 3, contribution = 'truncate')")
    count, total, mean = prepared.plan.prepared
    assert count.parts["n"].sensitivity == 2 and count.parts["n"].scale == pytest.approx(2 / 1.0, rel=1e-3)
    assert total.parts["s"].sensitivity == 2 * 10
    assert mean.parts["n"].sensitivity == 2 and mean.parts["s1"].sensitivity == 2 * 5
    # at most 2 of unit 1's 15 rows: the two with the smallest hash of the whole row
    raw = duckdb.connect()
    load(raw, FIFTEEN)
    kept = raw.execute("SELECT x FROM t AS r WHERE id = 1 ORDER BY hash(r) LIMIT 2").fetchall()
    assert row["a0_n"] == 10 + 2
    # clipped to [0, 10]; the sum is of integers on the grid of dpsql.mechanisms.fixed, exactly
    assert total.exact({"s": row["a1_s"]}) == {"s": 10 + sum(min(x, 10.0) for (x,) in kept)}
    assert row["a2_n"] == 12
    res = con.sql("SELECT DP_COUNT(*), DP_SUM(x) FROM t WITH (epsilon = 3, contribution = 'truncate')")
    assert all("per id, ≤ 2 rows; " in line for line in res.report_lines())
    assert all(line.endswith("rows beyond max_rows_per_unit = 2 per id are dropped; the interval covers the noise, "
                             "not that bias") for line in res.report_lines())


def test_a_query_may_loosen_the_bound_for_itself() -> None:
    con = connect(policy(k=2), FIFTEEN)
    prepared, row = exact(con, "SELECT DP_COUNT(*) FROM t WITH (epsilon = 1, max_rows_per_unit = 10)")
    assert row["a0_n"] == 10 + 10 and prepared.plan.prepared[0].parts["n"].sensitivity == 10


def test_truncation_is_after_the_where_and_every_mechanism_reads_the_truncated_rows() -> None:
    con = connect(policy(k=2), FIFTEEN)
    _, row = exact(con, "SELECT DP_COUNT(*) FROM t WHERE x >= 10 WITH (epsilon = 1)")
    assert row["a0_n"] == 2  # unit 1 has five rows with x >= 10; two survive; the others have x = 1
    # the exponential median's histogram counts the same truncated rows
    prepared, row = exact(con, "SELECT DP_MEDIAN(x) FROM t WITH (epsilon = 1)")
    sub = prepared.sql.split("__sq0 AS (", 1)[1]
    assert "FROM __src" in sub and "QUALIFY ROW_NUMBER()" in prepared.sql.split("__stats AS", 1)[0]
    (n,), = con.engine.connection.execute(f"{prepared.sql.split(', __stats AS', 1)[0]} SELECT COUNT(*) FROM __src").fetchall()
    assert n == 12


def test_which_rows_survive_depends_on_the_unit_and_its_rows_only() -> None:
    """Not on the physical order of the table, on other units, or on the columns a query reads."""
    rows = [(u, GROUPS[(u * v) % 4], float((u * 7 + v * 3) % 11)) for u in range(1, 30) for v in range(u % 9 + 1)]
    con = connect(policy(k=3), rows)
    prepared = con.prepare("SELECT g, DP_SUM(x) FROM t GROUP BY g WITH (epsilon = 1, keys = ['a', 'b', 'c', 'd'])")
    raw = duckdb.connect()

    def stats(data: t.Sequence[Row]) -> list[tuple]:
        load(raw, data)
        return sorted(raw.execute(prepared.sql).fetchall())

    first = stats(rows)
    assert stats(list(reversed(rows))) == first
    assert stats(random.Random(3).sample(rows, len(rows))) == first
    # adding another unit changes nothing of the others' survivors: only its own rows are added
    more = stats(rows + [(999, "a", 0.0)] * 8)
    assert [r[:1] + r[2:] for r in more] == [r[:1] + r[2:] for r in first]
    # a query that reads other columns keeps the same rows
    both = con.prepare("SELECT g, DP_SUM(x), DP_COUNT(id) FROM t GROUP BY g WITH (epsilon = 1, keys = ['a', 'b', 'c', 'd'])")
    load(raw, rows)
    assert [r[:2] for r in sorted(raw.execute(both.sql).fetchall())] == [r[:2] for r in first]


def test_replace_does_not_make_an_id_units_count_public() -> None:
    con = connect(policy("replace", k=2), FIFTEEN)
    prep = con.prepare("SELECT DP_COUNT(*) FROM t WITH (epsilon = 1)").plan.prepared[0]
    assert not prep.public_count and prep.parts["n"].sensitivity == 2 and prep.cost.epsilon == 1


def test_the_truncation_is_a_window_not_duckdbs_top_k_rewrite() -> None:
    """DuckDB rewrites ``ROW_NUMBER() ... <= k`` into a per-unit top-k aggregate, several times
    slower with millions of small units (see docs/benchmarks.md): the plan keeps the window."""
    con = connect(policy(k=5, max_groups_per_unit=3), FIFTEEN)
    for query in ("SELECT DP_MEAN(x) FROM t WITH (epsilon = 1, contribution = 'truncate')",
                  "SELECT g, DP_MEAN(x) FROM t GROUP BY g WITH (epsilon = 1, delta = 1e-6, contribution = 'truncate')"):
        plan = "\n".join(r[1] for r in con.engine.connection.execute("EXPLAIN " + con.prepare(query).sql).fetchall())
        assert "WINDOW" in plan.upper() and "arg_min" not in plan.lower()


# -- key selection counts units ------------------------------------------------------------------


def test_key_selection_counts_units_and_unions_over_the_groups_one_unit_reaches() -> None:
    con = connect(policy(k=4), FIFTEEN)
    query = "SELECT g, DP_COUNT(*) FROM t GROUP BY g WITH (epsilon = 2, delta = 1e-6, contribution = 'truncate')"
    prepared = con.prepare(query)
    sel = prepared.plan.selection
    assert "COUNT(DISTINCT __u) AS __keys_n" in prepared.sql
    assert sel.part.sensitivity == 4  # one unit reaches at most k = 4 groups
    q = math.exp(-1 / sel.part.scale)
    assert sel.threshold == pytest.approx(1 + sel.part.scale * math.log(4 / ((1 + q) * 1e-6)))  # all of δ: the Laplace count uses none
    names, rows = con.engine.statistics(prepared.sql)
    counts = {r[0]: r[names.index("__keys_n")] for r in rows}
    assert counts == {"a": 1, "b": 10}  # units, not rows
    assert "noisy count of ids" in prepared.explain_text()
    with_g = con.prepare(query.replace("1e-6,", "1e-6, max_groups_per_unit = 2,")).plan.selection
    assert with_g.part.sensitivity == 2
    replace = connect(policy("replace", k=4)).prepare(query).plan.selection
    assert replace.part.sensitivity == 8


def test_key_selection_for_rows_is_unchanged() -> None:
    a = KeySelection.build(3, Cost(epsilon=1, delta=1e-6))
    b = KeySelection.build(3, Cost(epsilon=1, delta=1e-6), per_group=3)
    assert a == b and a.part.sensitivity == 3
    q = math.exp(-1 / a.part.scale)
    assert a.threshold == pytest.approx(3 + a.part.scale * math.log(3 / ((1 + q) * 1e-6)))


# -- brute force: the truncated statistics of neighbours move at most the claimed L1 / L2 -------


class Claim:
    """One prepared query on table ``t`` and how to read its parts from the statistics rows."""

    def __init__(self, pol: dict, query: str) -> None:
        con = connect(pol)
        self.prepared = con.prepare(query)
        con.close()
        self.raw = duckdb.connect()

    def groups(self, rows: t.Sequence[Row]) -> dict[t.Any, dict[str, dict[str, float]]]:
        """group key → aggregate label → part → exact value, and the key count."""
        load(self.raw, rows)
        cur = self.raw.execute(self.prepared.sql)
        names = [d[0] for d in cur.description]
        plan, rw = self.prepared.plan, self.prepared.rewritten
        out: dict[t.Any, dict[str, dict[str, float]]] = {}
        for values in cur.fetchall():
            row = dict(zip(names, values))
            key = tuple(row[k] for k in rw.keys)
            parts = {}
            for prep in plan.prepared:
                stats = {stat: row[col] for (i, stat), col in rw.columns.items() if i == prep.agg.index}
                parts[prep.label] = prep.centred(stats)
            if rw.key_selection_column:
                parts["keys"] = {"n": float(row[rw.key_selection_column] or 0)}
            out[key] = parts
        return out

    def moves(self, x: t.Sequence[Row], y: t.Sequence[Row]) -> list[tuple[str, float, float]]:
        """(what, distance moved, claimed sensitivity) for every released part."""
        gx, gy = self.groups(x), self.groups(y)
        keys = sorted(set(gx) | set(gy), key=repr)
        plan = self.prepared.plan
        out = []
        for prep in plan.prepared:
            for name, part in prep.parts.items():
                diffs = [gx.get(k, {}).get(prep.label, {}).get(name, 0.0) - gy.get(k, {}).get(prep.label, {}).get(name, 0.0)
                         for k in keys]
                moved = math.sqrt(sum(d * d for d in diffs)) if part.kind == "gaussian" else sum(map(abs, diffs))
                out.append((f"{prep.label} {name} ({part.kind})", moved, part.sensitivity))
        if plan.selection is not None:
            diffs = [gx.get(k, {}).get("keys", {}).get("n", 0.0) - gy.get(k, {}).get("keys", {}).get("n", 0.0) for k in keys]
            out.append(("key count (L1)", sum(map(abs, diffs)), plan.selection.part.sensitivity))
            units = plan.units
            reach = len([k for k in keys if (k in gx) != (k in gy)])
            out.append(("groups present on one side only", reach, units.reach))
            out.append(("key count of one group", max(map(abs, diffs), default=0.0), units.per_group))
        return out


def neighbours(rows: list[Row], extra: list[Row], relation: str) -> t.Iterator[list[Row]]:
    """Every neighbour of ``rows`` under ``relation``: ``extra`` (rows of unit 0) is the unit
    added, or what a replaced unit's rows become."""
    ids = sorted({r[0] for r in rows})
    if relation == "add_remove":
        for u in ids:
            yield [r for r in rows if r[0] != u]
        yield rows + extra
    else:
        for u in ids:
            yield [r for r in rows if r[0] != u] + [(u, g, x) for _, g, x in extra]
            yield [r for r in rows if r[0] != u] + [(u, g, x) for _, g, x in extra[: len(extra) // 2]]


def random_table(rng: random.Random, units: int = 5, most: int = 7) -> list[Row]:
    return [(u, rng.choice(GROUPS), float(rng.randint(0, 10))) for u in range(1, units + 1)
            for _ in range(rng.randint(1, most))]


def adversary(rng: random.Random) -> list[Row]:
    """A unit with many rows at the upper bound in every group, or random ones."""
    if rng.random() < 0.5:
        return [(0, g, 10.0) for g in GROUPS for _ in range(4)]
    return [(0, rng.choice(GROUPS), float(rng.choice([0, 10, rng.randint(0, 10)]))) for _ in range(rng.randint(1, 12))]


#: bounds in force, grouped: k only; g groups × r rows (r·g ≠ r·√g)
BOUNDS = [
    {"k": 2},
    {"k": 3, "max_groups_per_unit": 2, "max_rows_per_group_per_unit": 1},
    {"k": 3, "max_groups_per_unit": 3, "max_rows_per_group_per_unit": 2},
    {"k": 5, "max_groups_per_unit": 4},
]
QUERIES = {
    "grouped": "SELECT g, DP_COUNT(*), DP_SUM(x), DP_MEAN(x) FROM t GROUP BY g WITH ({opts}, keys = ['a', 'b', 'c', 'd'])",
    "keys by threshold": "SELECT g, DP_COUNT(*) FROM t GROUP BY g WITH ({opts})",
    "ungrouped": "SELECT DP_COUNT(*), DP_SUM(x), DP_VAR(x) FROM t WITH ({opts})",
}
MECHANISMS = {"laplace": "mechanism = 'laplace', epsilon = 1, delta = 1e-6",
              "gaussian": "mechanism = 'gaussian', epsilon = 1, delta = 1e-6"}


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


#: (bounds, query shape, mechanism): max_groups_per_unit needs a GROUP BY, and the key count is
#: a Laplace count whatever the mechanism
CASES = [(b, shape, mech) for b in BOUNDS for shape in QUERIES for mech in MECHANISMS
         if not (shape == "ungrouped" and len(b) > 1) and not (shape == "keys by threshold" and mech == "gaussian")]


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@pytest.mark.parametrize("bounds,shape,mechanism", CASES,
                         ids=[f"{'-'.join(f'{k}{v}' for k, v in b.items())}-{s}-{m}" for b, s, m in CASES])
def test_neighbours_move_the_truncated_statistics_at_most_the_claimed_sensitivity(
        bounds: dict, shape: str, mechanism: str, relation: str) -> None:
    bounds = dict(bounds)
    claim = Claim(policy(relation, bounds.pop("k"), **bounds), QUERIES[shape].format(opts=MECHANISMS[mechanism]))
    worst, problems = check(claim, datasets=8, seed=zlib.crc32(f"{shape}{mechanism}{relation}".encode()), relation=relation)
    assert not problems, problems[:5]
    assert worst > 0.3  # the neighbours reach a good part of the claim


@pytest.mark.parametrize("mechanism,bounds,expected", [
    # k rows in one group: L1 = L2 = k
    ("laplace", {"k": 3}, {"n": 3, "s": 30}),
    ("gaussian", {"k": 3}, {"n": 3, "s": 30}),
    # r rows in each of g groups: L1 = r·g, L2 = r·√g
    ("laplace", {"k": 3, "max_groups_per_unit": 3, "max_rows_per_group_per_unit": 2}, {"n": 6, "s": 60}),
    ("gaussian", {"k": 3, "max_groups_per_unit": 3, "max_rows_per_group_per_unit": 2},
     {"n": 2 * math.sqrt(3), "s": 20 * math.sqrt(3)}),
])
def test_the_claim_is_tight(mechanism: str, bounds: dict, expected: dict) -> None:
    """Removing one unit with more rows at the upper bound than it may keep, in every group,
    moves the group counts and sums by exactly the claimed L1 (Laplace) or L2 (Gaussian)."""
    bounds = dict(bounds)
    query = QUERIES["grouped"].format(opts=MECHANISMS[mechanism]).replace(", DP_MEAN(x)", "")
    claim = Claim(policy("add_remove", bounds.pop("k"), **bounds), query)
    others = [(u, g, 5.0) for u in (2, 3) for g in GROUPS]
    heavy = [(1, g, 10.0) for g in (GROUPS if "max_groups_per_unit" in bounds else ["a"]) for _ in range(4)]
    moved = {what.split()[1]: (m, c) for what, m, c in claim.moves(others + heavy, others)}
    for part, value in expected.items():
        m, c = moved[part]
        assert m == pytest.approx(value) and c == pytest.approx(value)


def test_negative_control_without_truncation_the_brute_force_finds_violations(monkeypatch) -> None:
    monkeypatch.setattr(Compiler, "truncated", lambda self, rows, cut: rows)
    claim = Claim(policy("add_remove", 2), QUERIES["grouped"].format(opts=MECHANISMS["laplace"] + ", contribution = 'truncate'"))
    _, problems = check(claim, datasets=4, seed=1, relation="add_remove")
    assert problems


# -- end to end on the visits fixture ------------------------------------------------------------


@pytest.fixture(scope="module")
def visits() -> dpsql.Connection:
    def setup(con: duckdb.DuckDBPyConnection) -> None:
        con.execute(f"CREATE TABLE visits AS SELECT * FROM '{VISITS / 'visits.parquet'}'")

    con = dpsql.connect(":memory:", VISITS / "visits.toml", setup=setup, noise=SeededNoise(5))
    yield con
    con.close()


def test_group_by_with_several_groups_per_patient_on_the_visits_fixture(visits) -> None:
    query = ("SELECT ward, DP_COUNT(*) AS n, DP_MEAN(stay) AS stay FROM visits GROUP BY ward "
             "WITH (epsilon = 4, contribution = 'truncate')")
    prepared = visits.prepare(query)
    units = prepared.plan.units
    assert (units.max_groups, units.max_rows_per_group, units.l1) == (3, 2, 6)
    # exact: at most 3 wards per patient, at most 2 visits in each, computed by hand
    raw = visits.engine.connection
    by_hand = dict(raw.execute("""
        SELECT ward, count(*) FROM (
          SELECT ward, patient_id,
                 row_number() OVER (PARTITION BY patient_id, ward ORDER BY hash(v)) AS r,
                 dense_rank() OVER (PARTITION BY patient_id ORDER BY hash(patient_id, ward), ward) AS d
          FROM visits AS v) WHERE r <= 2 AND d <= 3 GROUP BY ward""").fetchall())
    names, rows = visits.engine.statistics(prepared.sql)
    exact_n = {r[0]: r[names.index("a0_n")] for r in rows}
    assert exact_n == by_hand
    total = raw.execute("SELECT count(*) FROM visits").fetchone()[0]
    assert sum(exact_n.values()) < total
    most = raw.execute("SELECT max(c) FROM (SELECT patient_id, count(DISTINCT ward) c FROM visits GROUP BY 1)").fetchone()[0]
    assert most > 3  # the bound binds
    res = visits.sql(query)
    out = {ward: n for ward, n, _ in res.fetchall()}
    assert out.keys() == by_hand.keys()
    assert all(abs(out[w] - by_hand[w]) < 60 for w in out)
    assert all("per patient_id, ≤ 3 groups × 2 rows" in line for line in res.report_lines())
    text = visits.explain(query)
    assert "max_groups_per_unit = 3 (policy), max_rows_per_group_per_unit = 2 (policy)" in text
    assert "DENSE_RANK()" in text


def test_keys_by_threshold_on_the_visits_fixture_count_patients(visits) -> None:
    query = ("SELECT stay, DP_COUNT(*) FROM visits WHERE stay < 4 GROUP BY stay "
             "WITH (epsilon = 2, delta = 1e-6, contribution = 'truncate')")
    released = visits.sql(query).fetchall()
    assert {r[0] for r in released} <= {0, 1, 2, 3} and released
    prepared = visits.prepare(query)
    assert prepared.plan.selection.part.sensitivity == 3  # max_groups_per_unit of the policy
    # with g, the key count is the rows ranked first in their unit's group: the distinct units
    assert "COUNT(*) FILTER(WHERE __r = 1) AS __keys_n" in prepared.sql
    names, rows = visits.engine.statistics(prepared.sql)
    counted = {r[0]: r[names.index("__keys_n")] for r in rows}
    head = prepared.sql.split(", __stats AS", 1)[0]
    distinct = dict(visits.engine.connection.execute(
        f"{head} SELECT __k0, COUNT(DISTINCT __u) FROM __src GROUP BY __k0").fetchall())
    assert counted == distinct and sum(counted.values()) > 1000


def test_gaussian_uses_the_l2_multiplier(visits) -> None:
    base = "SELECT ward, DP_COUNT(*) FROM visits GROUP BY ward WITH (epsilon = 1, delta = 1e-6, mechanism = '{}', max_groups_per_unit = 4)"
    lap = visits.prepare(base.format("laplace")).plan.prepared[0].parts["n"].sensitivity
    gau = visits.prepare(base.format("gaussian")).plan.prepared[0].parts["n"].sensitivity
    assert (lap, gau) == (2 * 4, 2 * 2.0)


def test_the_shell_shows_a_tables_unit_bounds(visits, tmp_path, capsys) -> None:
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    from dpsql.interfaces.repl import run_repl

    capsys.readouterr()
    with create_pipe_input() as inp:
        inp.send_text(".schema visits\n.policy\n\x04")
        assert run_repl(visits, input=inp, output=DummyOutput(), history_file=tmp_path / "history") == 0
    out = capsys.readouterr().out
    line = ("private; privacy unit patient_id, at most 5 row(s) per unit; in a GROUP BY at most 3 group(s) × "
            "2 row(s) per unit")
    assert f"visits: {line}" in out and f"table visits: {line}" in out
