"""Semi joins between tables of one privacy unit: ``[NOT] EXISTS`` and ``[NOT] IN`` correlated on the unit.

TPC-H's Q4 keeps the orders that have a late line item, Q22 the customers without orders: a
subquery over another private table decides which rows the DP query counts. That is safe when
the subquery reads only the same person's rows (the proof is in :mod:`dpsql._sql.insubquery`):
one person's change then moves only that person's rows, and the per-unit bound holds.

The brute force runs the statistics dpsql generates on small tables and on every neighbour
(all rows of one person removed from both tables, or a new person's rows added to both) and
compares how far each released part moves with its sensitivity. The negative control lifts
the check that the subquery is correlated on the unit: one person's rows then switch other
people's rows in and out, and the brute force sees the count move past its bound.
"""

from __future__ import annotations

import itertools
import random
import typing as t

import duckdb
import pytest

import dpsql
import dpsql._sql.insubquery
from dpsql._privacy.noise import SeededNoise
from dpsql.errors import BindError, PrivacyError

Tables = dict[str, list[tuple[t.Any, ...]]]

#: two tables of the unit "customer" (as orders and line items are), one of another unit, a public one
SCHEMAS = {"orders": "cid INTEGER, v INTEGER", "items": "cid INTEGER, w INTEGER",
           "others": "pid INTEGER, w INTEGER", "wide": "cid BIGINT, w INTEGER", "codes": "w INTEGER"}
UNITS = {"orders": "cid", "items": "cid", "others": "pid", "wide": "cid"}


def policy(k: int) -> dict:
    tables: dict[str, t.Any] = {name: {"privacy_unit": unit, "unit_name": "customer" if name != "others" else "patient",
                                       "max_rows_per_unit": k}
                                for name, unit in UNITS.items()}
    tables["orders"]["columns"] = {"v": {"lower": 0, "upper": 10}}
    tables["codes"] = {"public": True}
    return {"budget": {"epsilon": 1e9, "delta": 0.5}, "defaults": {"reuse_releases": "off"}, "tables": tables}


def load(con: duckdb.DuckDBPyConnection, data: Tables) -> None:
    for name, schema in SCHEMAS.items():
        con.execute(f"CREATE OR REPLACE TABLE {name} ({schema})")
        rows = data.get(name) or []
        if rows:
            con.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' * len(rows[0]))})", rows)


def connect(data: Tables | None = None, k: int = 2) -> dpsql.Connection:
    return dpsql.connect(":memory:", policy(k), setup=lambda con: load(con, data or {}), noise=SeededNoise(0))


def prepare(query: str, k: int = 2) -> t.Any:
    con = connect(k=k)
    try:
        return con.prepare(query)
    finally:
        con.close()


_RAW: list[duckdb.DuckDBPyConnection] = []


def _fill(data: Tables) -> duckdb.DuckDBPyConnection:
    """One plain DuckDB connection for the brute force, its tables holding ``data``."""
    if not _RAW:
        _RAW.append(duckdb.connect())
        load(_RAW[0], {})
    raw = _RAW[0]
    for name in SCHEMAS:
        raw.execute(f"DELETE FROM {name}")
        rows = data.get(name) or []
        if rows:
            raw.execute(f"INSERT INTO {name} VALUES " + ", ".join(
                "(" + ", ".join("NULL" if v is None else repr(v) for v in r) + ")" for r in rows))
    return raw


def released(prepared: t.Any, data: Tables) -> dict[tuple[t.Any, ...], dict[str, float]]:
    """The exact parts ("label part" -> value) of each group that ``prepared`` releases on ``data``."""
    plan, rw = prepared.plan, prepared.rewritten
    cur = _fill(data).execute(prepared.sql.replace('"memory"."main".', ""))
    names = [d[0] for d in cur.description]
    out: dict[tuple[t.Any, ...], dict[str, float]] = {}
    for values in cur.fetchall():
        row = dict(zip(names, values))
        group = out.setdefault(tuple(row[k] for k in rw.keys), {})
        for prep in plan.prepared:
            got = prep.centred({s: row[c] for (i, s), c in rw.columns.items() if i == prep.agg.index})
            group.update({f"{prep.label} {n}": v for n, v in got.items()})
    return out


def count(query: str, data: Tables, k: int = 5) -> float:
    (group,) = released(prepare(query, k), data).values()
    return next(iter(group.values()))


DATA: Tables = {"orders": [(1, 1), (1, 2), (2, 3), (3, 4)], "items": [(1, 7), (2, 8), (2, 9), (4, 7)],
                "codes": [(7,)]}
Q = "SELECT DP_COUNT(*) FROM orders WHERE {} WITH (epsilon = 1)"


@pytest.mark.parametrize("cond,expected", [
    ("EXISTS (SELECT * FROM items WHERE items.cid = orders.cid)", 3),
    ("EXISTS (SELECT * FROM items WHERE cid = orders.cid AND w = 7)", 2),
    ("EXISTS (SELECT * FROM items i WHERE i.cid = orders.cid AND i.w > v + 5)", 2),  # v of orders: correlated
    ("NOT EXISTS (SELECT * FROM items WHERE items.cid = orders.cid)", 1),
    ("EXISTS (SELECT * FROM orders o2 WHERE o2.cid = orders.cid AND o2.v <> orders.v)", 2),  # Q21's shape
    ("cid IN (SELECT cid FROM items)", 3),
    ("cid NOT IN (SELECT cid FROM items WHERE w = 7)", 2),
    ("cid IN (SELECT cid FROM items WHERE items.cid = orders.cid AND w = 9)", 1),
    ("EXISTS (SELECT 1 FROM codes WHERE w = 7)", 4),
    ("NOT EXISTS (SELECT 1 FROM codes WHERE w = 8)", 4),
])
def test_semi_joins_on_the_unit_filter_like_the_plain_query(cond: str, expected: int) -> None:
    sql = Q.format(cond)
    assert count(sql, DATA) == expected
    plain = duckdb.connect()
    load(plain, DATA)
    assert plain.execute(f"SELECT count(*) FROM orders WHERE {cond}").fetchone() == (expected,)


@pytest.mark.parametrize("cond,match", [
    ("EXISTS (SELECT * FROM items WHERE w = 7)", "must be correlated on the privacy unit"),
    ("EXISTS (SELECT * FROM items WHERE items.w = orders.v)", "must be correlated on the privacy unit"),
    ("EXISTS (SELECT * FROM items WHERE items.cid + 0 = orders.cid)", "must be correlated on the privacy unit"),
    ("EXISTS (SELECT * FROM items WHERE items.cid = orders.cid OR w = 7)", "must be correlated on the privacy unit"),
    ("v IN (SELECT w FROM items)", "must compare within one person's rows"),
    ("EXISTS (SELECT * FROM others WHERE others.pid = orders.cid)", "does not share orders's privacy unit"),
    ("EXISTS (SELECT * FROM wide WHERE wide.cid = orders.cid)", r"differ in type"),
    ("EXISTS (SELECT cid FROM items WHERE items.cid = orders.cid GROUP BY cid)", "no GROUP BY"),
    ("EXISTS (SELECT * FROM items JOIN orders o ON o.cid = items.cid WHERE items.cid = orders.cid)", "one table only"),
    ("EXISTS (SELECT * FROM items WHERE items.cid = orders.cid AND EXISTS (SELECT 1 FROM codes))", "subqueries are not allowed"),
    ("EXISTS (SELECT * FROM items WHERE items.cid = orders.cid AND random() < 0.5)", "rand"),
])
def test_semi_joins_not_within_one_person_are_refused_in_one_line_uncharged(cond: str, match: str) -> None:
    con = connect(DATA)
    with pytest.raises(PrivacyError, match=match) as info:
        con.sql(Q.format(cond))
    assert "\n" not in str(info.value)
    assert con.ledger.spent().epsilon == 0
    con.close()


def test_public_subqueries_still_see_only_their_table() -> None:
    with pytest.raises(BindError):
        connect(DATA).sql(Q.format("EXISTS (SELECT 1 FROM codes WHERE w = orders.v)"))


# -- brute force over every person's removal and addition --------------------------------------

#: queries whose filters read the other table of the unit
BRUTE = {
    "exists": "SELECT DP_COUNT(*), DP_SUM(v) FROM orders WHERE EXISTS (SELECT * FROM items WHERE items.cid = orders.cid "
              "AND w > 0) WITH (epsilon = 1)",
    "not exists grouped": "SELECT v, DP_COUNT(*) FROM orders WHERE NOT EXISTS (SELECT * FROM items WHERE items.cid = "
                          "orders.cid AND w = 1) GROUP BY v WITH (epsilon = 1, keys = [0, 1])",
    "in": "SELECT DP_COUNT(*) FROM orders WHERE cid IN (SELECT cid FROM items WHERE w = 1) WITH (epsilon = 1)",
    "self": "SELECT DP_COUNT(*) FROM orders WHERE EXISTS (SELECT * FROM orders o2 WHERE o2.cid = orders.cid AND "
            "o2.v <> orders.v) WITH (epsilon = 1)",
}
IDS = [1, 2, 3]


def random_data(rng: random.Random) -> Tables:
    return {"orders": [(rng.choice(IDS), rng.choice([0, 1])) for _ in range(rng.randint(0, 5))],
            "items": [(rng.choice(IDS), rng.choice([0, 1])) for _ in range(rng.randint(0, 4))]}


def person_neighbours(data: Tables) -> t.Iterator[Tables]:
    """Remove all rows of one person (both tables), or add a new person's rows to both."""
    people = {row[0] for rows in data.values() for row in rows}
    for person in people:
        yield {name: [r for r in rows if r[0] != person] for name, rows in data.items()}
    new = max(people | {0}) + 1
    for mine, theirs in itertools.product(
            [[], [(new, 1)], [(new, 0), (new, 1)], [(new, 1), (new, 1), (new, 1)]],
            [[], [(new, 1)], [(new, 1), (new, 0)]]):
        if mine or theirs:
            yield {"orders": data["orders"] + mine, "items": data["items"] + theirs}


def worst_moves(prepared: t.Any, trials: int, seed: int) -> dict[str, tuple[float, float]]:
    """The most each released part moved (L1 over groups) between data and a neighbour, and its sensitivity."""
    rng = random.Random(seed)
    worst: dict[str, tuple[float, float]] = {}
    for _ in range(trials):
        data = random_data(rng)
        gx = released(prepared, data)
        for other in person_neighbours(data):
            gy = released(prepared, other)
            for prep in prepared.plan.prepared:
                for name, part in prep.parts.items():
                    what = f"{prep.label} {name}"
                    moved = sum(abs(gx.get(g, {}).get(what, 0.0) - gy.get(g, {}).get(what, 0.0)) for g in set(gx) | set(gy))
                    if moved > worst.get(what, (-1.0, 0.0))[0]:
                        worst[what] = (moved, part.sensitivity)
    return worst


@pytest.mark.parametrize("case", sorted(BRUTE))
def test_one_person_moves_each_part_of_a_semi_join_query_at_most_its_sensitivity(case: str) -> None:
    prepared = prepare(BRUTE[case], k=2)
    worst = worst_moves(prepared, trials=8, seed=29)
    assert worst
    for what, (moved, sensitivity) in worst.items():
        assert moved <= sensitivity + 1e-9, (case, what, moved, sensitivity)


def test_negative_control_an_uncorrelated_exists_lets_one_person_move_the_count_past_its_bound(monkeypatch) -> None:
    monkeypatch.setattr(dpsql._sql.insubquery, "_correlated", lambda *a: True)
    prepared = prepare("SELECT DP_COUNT(*) FROM orders WHERE EXISTS (SELECT * FROM items WHERE w = 1) "
                       "WITH (epsilon = 1)", k=2)
    worst = worst_moves(prepared, trials=8, seed=29)
    moved, sensitivity = max(worst.values())
    assert moved > sensitivity  # one person's item switches every other person's orders in or out


def test_a_null_unit_in_the_subquery_belongs_to_nobody() -> None:
    data: Tables = {"orders": [(1, 1), (2, 2)], "items": [(None, 7), (1, 7)]}
    # plain SQL: NULL in the set makes every NOT IN NULL, and one row would drop everyone's rows
    assert count(Q.format("cid NOT IN (SELECT cid FROM items)"), data) == 1
    assert count(Q.format("cid IN (SELECT cid FROM items)"), data) == 1


# -- the same statistics on Spark ------------------------------------------------------------------

SPARK_CASES = [c for c, _ in test_semi_joins_on_the_unit_filter_like_the_plain_query.pytestmark[0].args[1]
               if "codes" not in c]


@pytest.mark.spark
def test_semi_joins_give_the_same_statistics_on_spark(spark) -> None:
    from tests.test_spark import exact, same

    for name in ("orders", "items"):
        spark.createDataFrame(DATA[name], SCHEMAS[name].replace("INTEGER", "INT")).createOrReplaceTempView(name)
    duck, on_spark = connect(DATA, k=5), dpsql.connect(spark, policy(5), noise=SeededNoise(0))
    try:
        for cond in SPARK_CASES:
            query = Q.format(cond)
            assert same(exact(duck, query), exact(on_spark, query)), query
    finally:
        duck.close()
        for name in ("orders", "items"):
            spark.catalog.dropTempView(name)
