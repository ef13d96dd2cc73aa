"""Joins and flat maps: the seed's three examples, brute force over neighbours, refusals.

The brute-force checks run the statistics query dpsql generates on small tables and on every
neighbour (remove one row of a private table, add one row from a small universe; under
``replace``, change one row) in a plain DuckDB, and compare how far each released part moves
with the sensitivity its noise is calibrated to. A negative control removes a bound from the
rewritten SQL and must be caught.
"""

from __future__ import annotations

import itertools
import math
import random
import re
import typing as t
from pathlib import Path

import duckdb
import pytest

import dpsql
from dpsql._privacy.joins import Truncation, parse_truncation, private_join_rows
from dpsql._privacy.noise import SeededNoise
from dpsql.errors import BindError, OptionError, PolicyError, PrivacyError

Tables = dict[str, list[tuple[t.Any, ...]]]

SCHEMAS = {
    "users": "user_id INTEGER, email VARCHAR",
    "purchases": "user_id INTEGER, amount DOUBLE",
    "people": "name VARCHAR, age INTEGER, zipcode INTEGER",
    "states": "state VARCHAR, zipcode INTEGER",
    "movies": "id INTEGER, genres VARCHAR",
}

SEED: Tables = {
    "users": [(1, "a@x"), (2, "b@x"), (3, "c@x")],
    "purchases": [(1, 10.0), (1, 20.0), (2, 5.0), (3, 7.0), (3, 8.0), (3, 9.0)],
    "people": [("susie", 30, 37752), ("bob", 40, 10001), ("al", 50, 10002)],
    "states": [("TN", 37752), ("KY", 37752), ("NY", 10001), ("NY", 10002)],
    "movies": [(1, "drama,comedy"), (2, "action"), (3, "drama,horror,comedy,war")],
}


def policy(neighbouring: str = "add_remove", **tables: dict) -> dict:
    base = {
        "users": {}, "purchases": {"columns": {"amount": {"lower": 0, "upper": 100}}},
        "people": {"columns": {"age": {"lower": 0, "upper": 100}}}, "states": {"public": True},
        "movies": {},
    }
    base.update(tables)
    return {"neighbouring": neighbouring, "budget": {"epsilon": 1e9, "delta": 0.5},
            "defaults": {"reuse_releases": "off"}, "tables": base}


def load(con: duckdb.DuckDBPyConnection, data: Tables) -> None:
    for name, schema in SCHEMAS.items():
        con.execute(f"CREATE OR REPLACE TABLE {name} ({schema})")
        rows = data.get(name, [])
        if rows:
            con.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' * len(rows[0]))})", rows)


def connect(pol: dict, data: Tables = SEED) -> dpsql.Connection:
    return dpsql.connect(":memory:", pol, setup=lambda con: load(con, data), noise=SeededNoise(0))


def explain(query: str, pol: dict | None = None) -> str:
    con = connect(pol or policy())
    try:
        return con.explain(query)
    finally:
        con.close()


# -- the seed's three examples (docs/joins.md shows them) -------------------------------------------

FLAT_MAP = ("SELECT genre, DP_COUNT(*) AS movies FROM movies CROSS JOIN UNNEST(string_split(genres, ',')) AS g(genre) "
            "GROUP BY genre WITH (epsilon = 1, max_rows = 3, keys = ['action', 'comedy', 'drama', 'horror', 'war'])")
PUBLIC_JOIN = ("SELECT DP_MEAN(age) FROM people JOIN states ON people.zipcode = states.zipcode "
               "WITH (epsilon = 1)")
PRIVATE_JOIN = ("SELECT DP_COUNT(*) AS purchases FROM users u JOIN purchases p ON u.user_id = p.user_id "
                "WITH (epsilon = 1, {options})")


def test_seed_flat_map_of_genres_multiplies_by_max_rows() -> None:
    text = explain(FLAT_MAP)
    assert "at most 3 rows per row (option max_rows; the rewritten SQL keeps 3 elements): × 3" in text
    assert "Δ=3 " in text and "LIST_SLICE(" in text


def test_seed_people_join_states_with_a_zipcode_in_two_states() -> None:
    text = explain(PUBLIC_JOIN)
    assert "at most 2 rows per key (the most rows of one key in states, read at plan time" in text
    assert "sensitivity multiplier × 2" in text and "n: Δ=2 " in text


@pytest.mark.parametrize("options,sensitivity", [
    ("join_truncation = 'drop_excess(2)'", 8),
    ("left_truncation = 'drop_non_unique', right_truncation = 'drop_excess(2)'", 4),
    ("left_truncation = 'drop_excess(1)', right_truncation = 'drop_excess(2)'", 6),
])
def test_seed_users_join_purchases(options: str, sensitivity: int) -> None:
    text = explain(PRIVATE_JOIN.format(options=options))
    assert f"= {sensitivity}\n" in text
    assert f"n: Δ={sensitivity} " in text


def test_the_docs_page_shows_what_explain_prints() -> None:
    page = (Path(__file__).resolve().parent.parent / "docs" / "joins.md").read_text(encoding="utf-8")
    pairs = re.findall(r"```sql\n(.*?)\n```\n\n```text\n(.*?)\n```", page, flags=re.S)
    assert len(pairs) == 4
    for query, lines in pairs:
        text = explain(query)
        for line in lines.splitlines():
            assert line in text, line


def test_truncation_strategies_parse_and_their_constants() -> None:
    assert parse_truncation("DropExcess(2)", "x") == Truncation("drop_excess", 2)
    assert parse_truncation(" drop_non_unique ", "x") == Truncation("drop_non_unique", 1)
    assert (Truncation("drop_excess", 2).stability, Truncation("drop_non_unique", 1).stability) == (2, 1)
    assert private_join_rows(Truncation("drop_excess", 2), Truncation("drop_excess", 2), 1, 1) == 8
    with pytest.raises(OptionError, match="drop_excess"):
        parse_truncation("drop_some(2)", "option 'join_truncation'")


def test_policy_join_truncation_and_unit_name() -> None:
    pol = policy(users={"join_truncation": "drop_non_unique"}, purchases={
        "join_truncation": "drop_excess(2)", "columns": {"amount": {"lower": 0, "upper": 100}}})
    text = explain(PRIVATE_JOIN.replace(", {options}", ""), pol)
    assert "= 4\n" in text
    with pytest.raises(PolicyError, match="join_truncation"):
        connect(policy(users={"join_truncation": "keep_all"}))
    with pytest.raises(PolicyError, match="unit_name"):
        connect(policy(users={"unit_name": "user"}))  # a row unit has no unit name


# -- answers ------------------------------------------------------------------------------------


def exact(query: str, pol: dict | None = None, data: Tables = SEED) -> dict[str, t.Any]:
    con = connect(pol or policy(), data)
    try:
        prepared = con.prepare(query)
        names, rows = con.engine.statistics(prepared.sql)
        return dict(zip(names, rows[0]))
    finally:
        con.close()


def test_flat_map_counts_genres_and_cuts_each_list() -> None:
    con = connect(policy())
    prepared = con.prepare(FLAT_MAP)
    names, rows = con.engine.statistics(prepared.sql)
    counts = {r[0]: r[1] for r in rows}
    # movie 3 keeps its first three genres (drama, horror, comedy); war is cut
    assert counts == {"action": 1, "comedy": 2, "drama": 2, "horror": 1, "war": None}
    con.close()


def test_select_list_unnest_is_the_same_flat_map() -> None:
    q = ("SELECT DP_COUNT(*) FROM (SELECT id, unnest(string_split(genres, ',')[1:2]) AS genre FROM movies) "
         "WHERE genre = 'comedy' WITH (epsilon = 1)")
    assert exact(q)["a0_n"] == 1  # movie 3's comedy is its third genre: sliced away
    assert "× 2" in explain(q)


def test_a_slice_keeps_its_start_and_bounds_the_rows() -> None:
    q = ("SELECT DP_COUNT(*) FROM (SELECT id, unnest(string_split(genres, ',')[2:3]) AS genre FROM movies) "
         "WHERE genre = 'horror' WITH (epsilon = 1)")
    assert exact(q)["a0_n"] == 1  # movie 3's second genre
    assert "at most 2 rows per row (a slice in the query" in explain(q)
    with pytest.raises(BindError, match="column zip does not exist in public table states"):
        exact("SELECT DP_COUNT(*) FROM people JOIN states s ON people.zipcode = s.zip WITH (epsilon = 1)")


def test_public_join_keeps_at_most_the_stated_rows_per_key() -> None:
    q = "SELECT DP_COUNT(*) FROM people JOIN states ON people.zipcode = states.zipcode WITH (epsilon = 1, {})"
    assert exact(q.format("max_join_rows = 2"))["a0_n"] == 4
    assert exact(q.format("max_join_rows = 1"))["a0_n"] == 3  # susie meets one state only
    assert "× 1" in explain(q.format("max_join_rows = 1"))


def test_left_semi_and_anti_joins_and_in_subqueries_of_public_tables() -> None:
    left = "SELECT DP_COUNT(*) FROM people LEFT JOIN states s ON people.zipcode = s.zipcode AND s.state = 'TN' WITH (epsilon = 1)"
    assert exact(left)["a0_n"] == 3  # a constant in ON is one more key part: (zipcode, 'TN')
    semi = "SELECT DP_COUNT(*) FROM people SEMI JOIN states ON people.zipcode = states.zipcode WITH (epsilon = 1)"
    anti = "SELECT DP_COUNT(*) FROM people ANTI JOIN states ON people.zipcode = states.zipcode WITH (epsilon = 1)"
    assert exact(semi)["a0_n"] == 3 and exact(anti)["a0_n"] == 0
    assert "a filter, × 1" in explain(semi)
    data = dict(SEED, people=SEED["people"] + [("zed", 20, 99999)])
    lj = "SELECT DP_COUNT(*) FROM people LEFT JOIN states ON people.zipcode = states.zipcode WITH (epsilon = 1)"
    assert exact(lj, data=data)["a0_n"] == 5  # susie twice, bob, al, zed with no state
    assert exact(anti, data=data)["a0_n"] == 1


def test_in_subqueries_of_public_tables_filter_and_private_ones_are_refused() -> None:
    q = "SELECT DP_COUNT(*) FROM people WHERE zipcode {} (SELECT zipcode FROM states WHERE state = 'NY') WITH (epsilon = 1)"
    assert exact(q.format("IN"))["a0_n"] == 2 and exact(q.format("NOT IN"))["a0_n"] == 1
    # a value that does not cast to the column's type is simply not in the set
    assert exact("SELECT DP_COUNT(*) FROM people WHERE name IN (SELECT zipcode FROM states) WITH (epsilon = 1)")["a0_n"] == 0
    with pytest.raises(PrivacyError, match="over private table users"):
        exact("SELECT DP_COUNT(*) FROM people WHERE zipcode IN (SELECT user_id FROM users) WITH (epsilon = 1)")
    with pytest.raises(PrivacyError, match="may only be SELECT column FROM public_table"):
        exact("SELECT DP_COUNT(*) FROM people WHERE zipcode IN (SELECT count(*) FROM states) WITH (epsilon = 1)")
    with pytest.raises(BindError, match="people"):  # correlated: the subquery sees only its table
        exact("SELECT DP_COUNT(*) FROM people WHERE zipcode IN (SELECT zipcode FROM states WHERE zipcode = people.age) "
              "WITH (epsilon = 1)")


def test_public_table_first_and_grouping_by_its_column() -> None:
    q = ("SELECT state, DP_COUNT(*) FROM states JOIN people ON states.zipcode = people.zipcode "
         "GROUP BY state WITH (epsilon = 1, keys = ['TN', 'KY', 'NY'])")
    con = connect(policy())
    names, rows = con.engine.statistics(con.prepare(q).sql)
    assert {r[0]: r[1] for r in rows} == {"TN": 1, "KY": 1, "NY": 2}
    con.close()


def test_private_join_truncates_both_sides_in_sql() -> None:
    q = PRIVATE_JOIN.format(options="join_truncation = 'drop_excess(2)'")
    got = exact(q)
    # user 1: 2 purchases, user 2: 1, user 3: 2 of 3 kept
    assert got["a0_n"] == 5
    nonunique = PRIVATE_JOIN.format(options="join_truncation = 'drop_non_unique'")
    assert exact(nonunique)["a0_n"] == 1  # only user 2 has one purchase


def test_same_id_unit_join_on_the_unit_truncates_after_the_join() -> None:
    visits = {"privacy_unit": "patient_id", "max_rows_per_unit": 2, "unit_name": "patient",
              "columns": {"cost": {"lower": 0, "upper": 10}}}
    patients = {"privacy_unit": "patient_id", "max_rows_per_unit": 1, "unit_name": "patient"}
    pol = {"budget": {"epsilon": 1e9, "delta": 0.5}, "defaults": {"reuse_releases": "off"},
           "tables": {"visits": visits, "patients": patients}}

    def setup(con: duckdb.DuckDBPyConnection) -> None:
        con.execute("CREATE TABLE visits AS SELECT * FROM (VALUES (1, 5.0), (1, 6.0), (1, 7.0), (2, 1.0)) v(patient_id, cost)")
        con.execute("CREATE TABLE patients AS SELECT * FROM (VALUES (1, 'F'), (2, 'M'), (3, 'F')) p(patient_id, sex)")

    con = dpsql.connect(":memory:", pol, setup=setup, noise=SeededNoise(0))
    q = ("SELECT DP_COUNT(*) FROM visits v JOIN patients p ON v.patient_id = p.patient_id "
         "WHERE p.sex = 'F' WITH (epsilon = 1)")
    names, rows = con.engine.statistics(con.prepare(q).sql)
    assert rows[0][0] == 2  # patient 1's three visits, truncated to k = 2 after the join
    assert "the joined rows keep the unit" in con.explain(q)
    other = dict(patients, unit_name="person")
    con2 = dpsql.connect(":memory:", dict(pol, tables={"visits": visits, "patients": other}), setup=setup)
    with pytest.raises(PrivacyError, match="do not share a privacy unit"):
        con2.prepare(q)
    with pytest.raises(PrivacyError, match="must equate their privacy units"):
        con.prepare("SELECT DP_COUNT(*) FROM visits v JOIN patients p ON v.cost = p.patient_id WITH (epsilon = 1)")
    con.close()
    con2.close()


# -- refusals that name the fix ------------------------------------------------------------------


@pytest.mark.parametrize("query,error,match", [
    ("SELECT DP_COUNT(*) FROM users u JOIN purchases p ON u.user_id = p.user_id WITH (epsilon = 1)",
     PrivacyError, "left_truncation = 'drop_excess(k)'"),
    ("SELECT DP_COUNT(*) FROM users, purchases WITH (epsilon = 1)", PrivacyError, "CROSS JOIN"),
    ("SELECT DP_COUNT(*) FROM users u JOIN purchases p ON u.user_id < p.user_id WITH (epsilon = 1, join_truncation = 'drop_excess(1)')",
     PrivacyError, "only equalities"),
    ("SELECT DP_COUNT(*) FROM people FULL JOIN states ON people.zipcode = states.zipcode WITH (epsilon = 1)",
     PrivacyError, "put the private table first"),
    ("SELECT DP_COUNT(*) FROM states LEFT JOIN people ON people.zipcode = states.zipcode WITH (epsilon = 1)",
     PrivacyError, "put the private table first"),
    ("SELECT DP_COUNT(*) FROM people CROSS JOIN states WITH (epsilon = 1)", PrivacyError, "CROSS JOIN"),
    ("SELECT DP_COUNT(*) FROM people CROSS JOIN range(10) WITH (epsilon = 1)", PrivacyError, "RANGE"),
    ("SELECT DP_COUNT(*) FROM movies CROSS JOIN UNNEST(string_split(genres, ',')) AS g(x) WITH (epsilon = 1)",
     PrivacyError, "max_rows = n"),
    ("SELECT DP_COUNT(*) FROM movies CROSS JOIN UNNEST(range(id)) AS g(x) WITH (epsilon = 1, max_rows = 2)",
     PrivacyError, "not supported"),
    ("SELECT DP_COUNT(*) FROM people WITH (epsilon = 1, max_rows = 2)", OptionError, "no flat map"),
    ("SELECT DP_COUNT(*) FROM people WITH (epsilon = 1, max_join_rows = 2)", OptionError, "no join with a public table"),
    ("SELECT DP_COUNT(*) FROM people JOIN states ON people.zipcode = states.zipcode WITH (epsilon = 1, join_truncation = 'drop_excess(1)')",
     OptionError, "has nothing to bound"),
    ("SELECT DP_COUNT(*) FROM people JOIN (SELECT * FROM states) s ON people.zipcode = s.zipcode WITH (epsilon = 1)",
     PrivacyError, "join a table by its name"),
    ("SELECT DP_COUNT(*) FROM people POSITIONAL JOIN states WITH (epsilon = 1)", PrivacyError, "POSITIONAL JOIN"),
    ("SELECT DP_COUNT(*) FROM people NATURAL JOIN states WITH (epsilon = 1)", PrivacyError, "NATURAL JOIN"),
    ("SELECT DP_COUNT(*) FROM people SEMI JOIN users ON people.age = users.user_id WITH (epsilon = 1)",
     PrivacyError, "only public tables may filter"),
    ("SELECT DP_COUNT(*) FROM (SELECT * FROM people UNION ALL SELECT * FROM people) WITH (epsilon = 1)",
     PrivacyError, "set operations"),
    ("SELECT zipcode, DP_COUNT(*) FROM people GROUP BY CUBE (zipcode) WITH (epsilon = 1, keys = [1])", PrivacyError, "CUBE"),
    ("SELECT zipcode, DP_COUNT(*) FROM people GROUP BY ROLLUP (zipcode) WITH (epsilon = 1, keys = [1])", PrivacyError, "ROLLUP"),
    ("SELECT zipcode, DP_COUNT(*) FROM people GROUP BY GROUPING SETS ((zipcode), ()) WITH (epsilon = 1, keys = [1])",
     PrivacyError, "GROUPING SETS"),
])
def test_refusals_name_the_problem_and_read_nothing(query: str, error: type, match: str) -> None:
    con = connect(policy())
    with pytest.raises(error, match=match.replace("(", r"\(").replace(")", r"\)")):
        con.sql(query)
    assert con.ledger.spent().epsilon == 0
    con.close()


def test_ambiguous_columns_must_be_qualified() -> None:
    with pytest.raises(BindError, match="ambiguous"):
        exact("SELECT DP_COUNT(*) FROM people JOIN states ON people.zipcode = states.zipcode WHERE zipcode > 1 WITH (epsilon = 1)")


# -- brute force: the statistics of neighbours move at most the claimed sensitivity ----------


class Claim:
    """A prepared query and the exact parts its statistics rows give, on any tables."""

    def __init__(self, pol: dict, query: str) -> None:
        con = connect(pol)
        self.prepared = con.prepare(query)
        con.close()
        self.raw = duckdb.connect()

    def parts(self, data: Tables) -> dict[t.Any, dict[str, dict[str, float]]]:
        load(self.raw, data)
        sql = self.prepared.sql.replace('"memory"."main".', "")
        cur = self.raw.execute(sql)
        names = [d[0] for d in cur.description]
        plan, rw = self.prepared.plan, self.prepared.rewritten
        out: dict[t.Any, dict[str, dict[str, float]]] = {}
        for values in cur.fetchall():
            row = dict(zip(names, values))
            key = tuple(row[k] for k in rw.keys)
            out[key] = {prep.label: prep.centred({s: row[c] for (i, s), c in rw.columns.items() if i == prep.agg.index})
                        for prep in plan.prepared}
        return out

    def moves(self, x: Tables, y: Tables) -> list[tuple[str, float, float]]:
        gx, gy = self.parts(x), self.parts(y)
        keys = set(gx) | set(gy)
        out = []
        for prep in self.prepared.plan.prepared:
            for name, part in prep.parts.items():
                diffs = [gx.get(k, {}).get(prep.label, {}).get(name, 0.0) - gy.get(k, {}).get(prep.label, {}).get(name, 0.0)
                         for k in keys]
                moved = math.sqrt(sum(d * d for d in diffs)) if part.kind == "gaussian" else sum(map(abs, diffs))
                out.append((f"{prep.label} {name}", moved, part.sensitivity))
        return out


UNIVERSE = {
    "users": [(u, "e") for u in (1, 2, 3)],
    "purchases": [(u, a) for u in (1, 2, 3) for a in (0.0, 100.0)],
    "people": [("n", a, z) for a in (0, 100) for z in (37752, 10001, 55555)],
    "movies": [(9, g) for g in ("drama,drama,war,comedy", "war", "")],
}


def neighbours(data: Tables, private: t.Sequence[str], relation: str) -> t.Iterator[Tables]:
    for name in private:
        rows = data[name]
        for i in range(len(rows)):
            rest = rows[:i] + rows[i + 1:]
            if relation == "add_remove":
                yield dict(data, **{name: rest})
            else:
                for new in UNIVERSE[name]:
                    yield dict(data, **{name: rest + [new]})
        if relation == "add_remove":
            for new in UNIVERSE[name]:
                yield dict(data, **{name: rows + [new]})


def random_data(rng: random.Random) -> Tables:
    return {
        "users": [(rng.choice([1, 1, 2, 3]), "e") for _ in range(rng.randint(1, 4))],
        "purchases": [(rng.choice([1, 2, 2, 3]), float(rng.choice([0, 50, 100]))) for _ in range(rng.randint(1, 5))],
        "people": [("n", rng.choice([0, 40, 100]), rng.choice([37752, 10001, 10002])) for _ in range(rng.randint(1, 4))],
        "states": SEED["states"],
        "movies": [(i, rng.choice(["drama,comedy", "war", "drama,war,drama,comedy", ""])) for i in range(rng.randint(1, 3))],
    }


CASES = {
    "flat map": ("SELECT genre, DP_COUNT(*), DP_SUM(id, 0, 10) FROM movies CROSS JOIN UNNEST(string_split(genres, ',')) AS g(genre) "
                 "GROUP BY genre WITH ({mech}, max_rows = 3, keys = ['drama', 'comedy', 'war', ''])", ["movies"]),
    "select-list unnest": ("SELECT DP_COUNT(*), DP_MEAN(id, 0, 10) FROM (SELECT id, unnest(string_split(genres, ',')[1:2]) AS g "
                           "FROM movies) WHERE g <> 'war' WITH ({mech})", ["movies"]),
    "public join": ("SELECT state, DP_COUNT(*), DP_SUM(age) FROM people JOIN states ON people.zipcode = states.zipcode "
                    "GROUP BY state WITH ({mech}, keys = ['TN', 'KY', 'NY'])", ["people"]),
    "left public join": ("SELECT DP_COUNT(*), DP_SUM(age) FROM people LEFT JOIN states ON people.zipcode = states.zipcode "
                         "WITH ({mech})", ["people"]),
    "semi join": ("SELECT DP_COUNT(*), DP_SUM(age) FROM people SEMI JOIN states ON people.zipcode = states.zipcode "
                  "WITH ({mech})", ["people"]),
    "private drop_excess": ("SELECT DP_COUNT(*), DP_SUM(amount) FROM users u JOIN purchases p ON u.user_id = p.user_id "
                            "WITH ({mech}, join_truncation = 'drop_excess(2)')", ["users", "purchases"]),
    "private mixed": ("SELECT DP_COUNT(*), DP_SUM(amount) FROM users u JOIN purchases p ON u.user_id = p.user_id "
                      "WITH ({mech}, left_truncation = 'drop_non_unique', right_truncation = 'drop_excess(2)')",
                      ["users", "purchases"]),
    "private left join": ("SELECT DP_COUNT(*) FROM users u LEFT JOIN purchases p ON u.user_id = p.user_id "
                          "WITH ({mech}, join_truncation = 'drop_excess(1)')", ["users", "purchases"]),
}
MECHS = {"laplace": "mechanism = 'laplace', epsilon = 1", "gaussian": "mechanism = 'gaussian', epsilon = 1, delta = 1e-6"}


def check(claim: Claim, private: list[str], relation: str, seed: int, datasets: int = 6) -> tuple[float, list[str]]:
    rng = random.Random(seed)
    worst, problems = 0.0, []
    for _ in range(datasets):
        data = random_data(rng)
        for y in neighbours(data, private, relation):
            for what, moved, claimed in claim.moves(data, y):
                worst = max(worst, moved / claimed)
                if moved > claimed * (1 + 1e-9) + 1e-9:
                    problems.append(f"{what}: moved {moved:g} > {claimed:g}")
    return worst, problems


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@pytest.mark.parametrize("mech", sorted(MECHS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_neighbours_move_the_statistics_at_most_the_claimed_sensitivity(case: str, mech: str, relation: str) -> None:
    query, private = CASES[case]
    claim = Claim(policy(relation), query.format(mech=MECHS[mech]))
    worst, problems = check(claim, private, relation, seed=len(case) * 7 + len(mech))
    assert not problems, problems[:5]
    # the neighbours reach a good part of the claim (under replace, twice the add/remove rows)
    assert worst > (0.2 if relation == "add_remove" else 0.1), worst


def test_the_seed_private_join_claim_is_reached() -> None:
    """One added user and purchase pair moves the truncated join's count by the claimed 8 at most,
    and adversarial tables come close."""
    claim = Claim(policy(), PRIVATE_JOIN.format(options="join_truncation = 'drop_excess(2)'"))
    base: Tables = {"users": [(1, "e"), (1, "e")], "purchases": [(1, 1.0), (1, 2.0)]}
    for extra_u, extra_p in itertools.product([[], [(1, "e")]], [[], [(1, 3.0)]]):
        y = {"users": base["users"] + extra_u, "purchases": base["purchases"] + extra_p}
        for _, moved, claimed in claim.moves(base, y):
            assert moved <= claimed == 8


@pytest.mark.parametrize("case,cut", [
    ("flat map", (r"(?i)list_slice\((.*?\)\)), 1, 3\)", r"\1")),
    ("public join", ("BETWEEN 1 AND 2", "BETWEEN 1 AND 99")),
    ("private drop_excess", ("BETWEEN 1 AND 2", "BETWEEN 1 AND 99")),
])
def test_negative_control_without_the_bound_in_sql_the_brute_force_finds_violations(case: str, cut: tuple[str, str]) -> None:
    query, private = CASES[case]
    claim = Claim(policy(), query.format(mech=MECHS["laplace"]))
    cut_sql = re.sub(cut[0], cut[1], claim.prepared.rewritten.sql)
    assert cut_sql != claim.prepared.rewritten.sql
    claim.prepared.rewritten.sql = cut_sql
    data = {"movies": [(1, "drama,drama,drama,drama,drama")], "people": [("n", 100, 37752)],
            "states": SEED["states"] + [("TN", 37752)] * 3,
            "users": [(1, "e")] * 3, "purchases": [(1, 100.0)] * 10}
    problems = [w for y in neighbours(data, private, "add_remove") for w, m, c in claim.moves(data, y) if m > c + 1e-9]
    assert problems
