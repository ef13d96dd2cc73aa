"""Joins and flat maps on Spark: the query corpus of tests/test_joins.py on both engines.

Every accepted join and flat-map query of that file that reads data runs on DuckDB and on the
shared local Spark session (the ``spark`` fixture of conftest.py), over the same small tables;
the exact statistics before noise must be equal. Where truncation picks rows by the engine's
hash (a side cut by ``drop_excess(k)``, a public table cut to M rows per key, a unit's rows cut
after a join), what does not depend on the hash must be equal: the rows kept. Refusals are the
same error with the same message on both engines, and the join's sensitivity factors are the
same (the public table's multiplicity is read from Spark when the query is planned there).
"""

from __future__ import annotations

import copy
import tomllib
import typing as t
from pathlib import Path

import duckdb
import pytest

import dpsql
from dpsql._privacy.noise import SeededNoise
from dpsql.errors import BindError
from tests import test_joins as tj
from tests.test_spark import check_same_statistics, exact, same

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parent.parent
VISITS = ROOT / "fixtures" / "visits" / "visits.parquet"

#: A list column (with an empty and a NULL list: DuckDB's UNNEST gives them no row, and so must
#: Spark's form) besides the tables of tests/test_joins.py.
LISTS = [(1, ["a", "b", "c"]), (2, []), (3, None), (4, ["b"]), (5, ["c", "a"])]
#: The seed's tables with extra rows: a person with no state, a purchase of no user, states
#: whose names a genre's first letters meet (one of them twice).
DATA = dict(tj.SEED, people=tj.SEED["people"] + [("zed", 20, 99999)],
            purchases=tj.SEED["purchases"] + [(7, 3.0)],
            states=tj.SEED["states"] + [("DR", 11111), ("CO", 11112), ("CO", 11113)])

_SPARK_TYPES = {"INTEGER": "INT", "VARCHAR": "STRING", "DOUBLE": "DOUBLE"}

#: Queries whose statistics do not depend on a hash: equal on both engines.
EQUAL = [
    tj.FLAT_MAP,
    tj.PUBLIC_JOIN,
    "SELECT DP_COUNT(*) FROM (SELECT id, unnest(string_split(genres, ',')[1:2]) AS genre FROM movies) "
    "WHERE genre = 'comedy' WITH (epsilon = 1)",
    "SELECT DP_COUNT(*) FROM (SELECT id, unnest(string_split(genres, ',')[2:3]) AS genre FROM movies) "
    "WHERE genre = 'horror' WITH (epsilon = 1)",
    "SELECT DP_COUNT(*) FROM movies CROSS JOIN UNNEST(list_slice(string_split(genres, ','), 2, 9)) AS g(x) "
    "WITH (epsilon = 1, max_rows = 2)",
    "SELECT DP_COUNT(*) FROM movies CROSS JOIN UNNEST(string_split(genres, 'o')) AS g(x) WITH (epsilon = 1, max_rows = 5)",
    "SELECT DP_COUNT(*) FROM movies CROSS JOIN UNNEST(string_split(genres, '')) AS g(x) WITH (epsilon = 1, max_rows = 50)",
    "SELECT DP_COUNT(*) FROM people LEFT JOIN states s ON people.zipcode = s.zipcode AND s.state = 'TN' WITH (epsilon = 1)",
    "SELECT DP_COUNT(*) FROM people SEMI JOIN states ON people.zipcode = states.zipcode WITH (epsilon = 1)",
    "SELECT DP_COUNT(*), DP_SUM(age) FROM people ANTI JOIN states ON people.zipcode = states.zipcode WITH (epsilon = 1)",
    "SELECT DP_COUNT(*), DP_SUM(age) FROM people LEFT JOIN states ON people.zipcode = states.zipcode WITH (epsilon = 1)",
    "SELECT DP_COUNT(*) FROM people WHERE zipcode IN (SELECT zipcode FROM states WHERE state = 'NY') WITH (epsilon = 1)",
    "SELECT DP_COUNT(*) FROM people WHERE zipcode NOT IN (SELECT zipcode FROM states WHERE state = 'NY') WITH (epsilon = 1)",
    # a value that does not cast to the column's type matches nothing, on both
    "SELECT DP_COUNT(*) FROM people WHERE name IN (SELECT zipcode FROM states) WITH (epsilon = 1)",
    # bob is 40: a division by zero in ON fails on neither engine
    "SELECT DP_COUNT(*) FROM people JOIN states ON people.zipcode / (people.age - 40) = states.zipcode "
    "WITH (epsilon = 1, max_join_rows = 2)",
    "SELECT DP_SUM(CASE WHEN zipcode IN (SELECT zipcode FROM states) THEN 1 ELSE 0 END, 0, 1) FROM people WITH (epsilon = 1)",
    # a private join, then a public join on a column of the joined private table
    "SELECT DP_COUNT(*) FROM users u LEFT JOIN purchases p ON u.user_id = p.user_id JOIN states s ON p.user_id + 9999 = "
    "s.zipcode WITH (epsilon = 1, join_truncation = 'drop_non_unique')",
    # a flat map, then a public join on its elements
    "SELECT DP_COUNT(*) FROM movies CROSS JOIN UNNEST(string_split(genres, ',')) AS g(x) JOIN states s "
    "ON upper(substr(g.x, 1, 2)) = s.state WITH (epsilon = 1, max_rows = 3)",
    "SELECT state, DP_COUNT(*) FROM states JOIN people ON states.zipcode = people.zipcode "
    "GROUP BY state WITH (epsilon = 1, keys = ['TN', 'KY', 'NY'])",
    tj.PRIVATE_JOIN.format(options="join_truncation = 'drop_non_unique'"),
    "SELECT t, DP_COUNT(*) FROM lists CROSS JOIN UNNEST(tags[1:2]) AS u(t) GROUP BY t WITH (epsilon = 1, keys = ['a', 'b', 'c'])",
    "SELECT DP_COUNT(*), DP_SUM(id, 0, 10) FROM lists CROSS JOIN UNNEST(tags[2:]) AS u(t) WITH (epsilon = 1, max_rows = 2)",
    "SELECT DP_COUNT(*) FROM (SELECT id, unnest(tags) AS t FROM lists) WHERE t <> 'b' WITH (epsilon = 1, max_rows = 3)",
    # the brute-force cases (the mechanism does not change the statistics: Laplace only)
    *(query.format(mech=tj.MECHS["laplace"]) for name, (query, _) in sorted(tj.CASES.items())
      if name not in ("private drop_excess", "private mixed", "private left join")),
]

#: Truncation by the engine's hash: (query, statistics columns that do not depend on it).
HASHED = [
    (tj.PRIVATE_JOIN.format(options="join_truncation = 'drop_excess(2)'"), ["a0_n"]),
    (tj.PRIVATE_JOIN.format(options="left_truncation = 'drop_excess(1)', right_truncation = 'drop_excess(2)'"), ["a0_n"]),
    *((tj.CASES[name][0].format(mech=tj.MECHS["laplace"]), ["a0_n"])
      for name in ("private drop_excess", "private mixed", "private left join")),
    ("SELECT DP_COUNT(*) FROM people JOIN states ON people.zipcode = states.zipcode WITH (epsilon = 1, max_join_rows = 1)",
     ["a0_n"]),
]

#: Refused on both engines, with the same message (test_joins' refusals, and one of each kind here).
REFUSED = [
    *(query for query, _, _ in tj.test_refusals_name_the_problem_and_read_nothing.pytestmark[0].args[1]),
    "SELECT DP_COUNT(*) FROM people JOIN states ON people.zipcode = states.zip WITH (epsilon = 1)",
    "SELECT DP_COUNT(*) FROM people WHERE zipcode IN (SELECT user_id FROM users) WITH (epsilon = 1)",
    "SELECT DP_COUNT(*) FROM people WHERE zipcode IN (SELECT count(*) FROM states) WITH (epsilon = 1)",
    "SELECT DP_COUNT(*) FROM people JOIN states ON people.zipcode = states.zipcode WHERE zipcode > 1 WITH (epsilon = 1)",
]


def _load_spark(session: t.Any, data: tj.Tables) -> None:
    for name, schema in tj.SCHEMAS.items():
        ddl = ", ".join(f"{col} {_SPARK_TYPES[kind]}" for col, kind in (part.split() for part in schema.split(", ")))
        session.createDataFrame(data.get(name, []), ddl).createOrReplaceTempView(name)
    session.createDataFrame(LISTS, "id INT, tags ARRAY<STRING>").createOrReplaceTempView("lists")


def _load_duck(con: duckdb.DuckDBPyConnection, data: tj.Tables) -> None:
    tj.load(con, data)
    con.execute("CREATE TABLE lists (id INTEGER, tags VARCHAR[])")
    con.executemany("INSERT INTO lists VALUES (?, ?)", LISTS)


def _policy() -> dict:
    pol = tj.policy()
    pol["tables"]["lists"] = {}
    return pol


@pytest.fixture(scope="module")
def joined(spark):
    """(DuckDB connection, Spark connection) over the tables of tests/test_joins.py."""
    _load_spark(spark, DATA)
    duck = dpsql.connect(":memory:", _policy(), setup=lambda con: _load_duck(con, DATA), noise=SeededNoise(0))
    yield duck, dpsql.connect(spark, _policy(), noise=SeededNoise(0))
    duck.close()


@pytest.mark.parametrize("query", EQUAL)
def test_join_and_flat_map_statistics_are_the_same(joined, query: str) -> None:
    check_same_statistics(joined, query)
    duck, spark = joined
    assert duck.prepare(query).bound.join_steps == spark.prepare(query).bound.join_steps


@pytest.mark.parametrize("query,columns", HASHED)
def test_truncated_joins_keep_the_same_rows(joined, query: str, columns: list[str]) -> None:
    """drop_excess(k) and the cut of a public table keep the k rows of smallest hash per key:
    which rows follows the engine's hash, how many does not."""
    (names_d, rows_d), (names_s, rows_s) = (exact(con, query) for con in joined)
    assert names_d == names_s and len(rows_d) == len(rows_s) == 1
    for col in columns:
        i = names_d.index(col)
        assert rows_d[0][i] == rows_s[0][i], (query, col)


def test_join_refusals_are_the_same(joined) -> None:
    duck, spark = joined
    assert len(REFUSED) > 20
    for query in REFUSED:
        with pytest.raises(dpsql.Error) as on_duck:
            duck.prepare(query)
        with pytest.raises(dpsql.Error) as on_spark:
            spark.prepare(query)
        assert type(on_duck.value) is type(on_spark.value), query
        assert str(on_duck.value) == str(on_spark.value), query


def test_the_spark_forms_are_written_by_the_target(joined) -> None:
    _, spark = joined
    sql = spark.prepare(tj.FLAT_MAP).sql
    assert "CROSS JOIN LATERAL EXPLODE(SLICE(SPLIT(" in sql and "', -1), 1, 3))" in sql
    assert "LATERAL VIEW" not in sql and "LIST_SLICE" not in sql.upper().replace("__", "")
    sql = spark.prepare(tj.PUBLIC_JOIN).sql
    assert "ORDER BY XXHASH64(__j1.*)" in sql and "QUALIFY" not in sql and "EXCEPT (__keep)" in sql
    anti = "SELECT DP_COUNT(*) FROM people ANTI JOIN states ON people.zipcode = states.zipcode WITH (epsilon = 1)"
    assert "LEFT ANTI JOIN `states`" in spark.prepare(anti).sql


def test_slices_with_computed_bounds_are_refused_on_spark_only(joined) -> None:
    duck, spark = joined
    query = ("SELECT DP_COUNT(*) FROM movies CROSS JOIN UNNEST(list_slice(string_split(genres, ','), 1, id)) AS g(x) "
             "WITH (epsilon = 1, max_rows = 2)")
    duck.prepare(query)
    with pytest.raises(BindError, match="on Spark a list slice needs literal bounds"):
        spark.prepare(query)
    assert spark.ledger.spent().epsilon == 0
    with pytest.raises(BindError, match=r"not \[-2:\]"):
        spark.prepare(query.replace("list_slice(string_split(genres, ','), 1, id)", "string_split(genres, ',')[-2:]"))


def test_regex_splits_are_refused_on_spark_only(joined) -> None:
    """Java compiles a split's regular expression when a row reaches it (dpsql._sql.spark_gate)."""
    duck, spark = joined
    query = ("SELECT DP_COUNT(*) FROM movies CROSS JOIN UNNEST(str_split_regex(genres, '[,r]')) AS g(x) "
             "WITH (epsilon = 1, max_rows = 5)")
    duck.prepare(query)
    with pytest.raises(BindError, match="str_split_regex.*Spark"):
        spark.prepare(query)
    assert spark.ledger.spent().epsilon == 0


# -- tables that share an id unit: the truncation per unit after the join ------------------------

UNIT_QUERIES = [
    "SELECT DP_COUNT(*) FROM visits v JOIN patients p ON v.patient_id = p.patient_id WHERE p.sex = 'F' WITH (epsilon = 1)",
    "SELECT ward, DP_SUM(cost) FROM visits v JOIN patients p ON v.patient_id = p.patient_id "
    "WHERE p.sex = 'M' GROUP BY ward WITH (epsilon = 1)",
    "SELECT code, DP_COUNT(*) FROM visits CROSS JOIN UNNEST(string_split(codes, ';')) AS c(code) GROUP BY code "
    "WITH (epsilon = 1, keys = ['A09', 'I10', 'M54', 'Z00'])",
    "SELECT DP_COUNT(*) FROM visits v LEFT JOIN patients p ON v.patient_id = p.patient_id AND p.sex = 'F' WITH (epsilon = 1)",
    # TPC-H Q13's shape: a per-unit count over a LEFT JOIN with a filter in ON, clipped, as the key
    "SELECT n, DP_COUNT(*) FROM (SELECT p.patient_id, count(v.cost) FROM patients p LEFT JOIN visits v "
    "ON p.patient_id = v.patient_id AND v.ward <> 'emergency' GROUP BY p.patient_id) AS per (pid, n) "
    "GROUP BY n WITH (epsilon = 1)",
]


@pytest.fixture(scope="module")
def units(spark):
    """The visits fixture joined with a patients table on the shared unit: under bounds no
    patient reaches (all rows kept whichever hash orders them) and under the real ones."""
    patients = ("SELECT patient_id, CASE WHEN patient_id % 3 = 0 THEN 'F' ELSE 'M' END AS sex "
                "FROM visits GROUP BY patient_id")
    spark.sql(patients).createOrReplaceTempView("patients")
    base = tomllib.loads((ROOT / "fixtures" / "visits" / "visits.toml").read_text(encoding="utf-8"))
    base["tables"]["visits"]["unit_name"] = "patient"
    base["tables"]["patients"] = {"privacy_unit": "patient_id", "unit_name": "patient", "max_rows_per_unit": 1}
    loose = copy.deepcopy(base)
    loose["tables"]["visits"].update(max_rows_per_unit=1000)
    for key in ("max_groups_per_unit", "max_rows_per_group_per_unit"):
        loose["tables"]["visits"].pop(key)
    out = {}
    for name, pol in (("strict", base), ("loose", loose)):
        raw = duckdb.connect()
        raw.execute(f"CREATE TABLE visits AS SELECT * FROM '{VISITS}'")
        raw.execute(f"CREATE TABLE patients AS {patients}")
        out[name] = (dpsql.connect(raw, pol), dpsql.connect(spark, pol))
    yield out
    for duck, _ in out.values():
        duck.close()


@pytest.mark.parametrize("query", UNIT_QUERIES)
def test_joins_on_the_unit_are_the_same_when_nothing_is_truncated(units, query: str) -> None:
    check_same_statistics(units["loose"], query)


def test_joins_on_the_unit_truncate_the_same_rows_per_unit(units) -> None:
    """Under the real bounds (at most 5 visits per patient, after the join) the rows kept
    follow each engine's hash; their number does not: Σ min(rows of a patient, 5)."""
    duck, spark = units["strict"]
    raw = duck.engine.connection
    expected = raw.execute(
        "SELECT SUM(LEAST(n, 5)) FROM (SELECT COUNT(*) AS n FROM visits v JOIN patients p "
        "ON v.patient_id = p.patient_id WHERE p.sex = 'F' GROUP BY v.patient_id)").fetchone()[0]
    for con in (duck, spark):
        assert exact(con, UNIT_QUERIES[0])[1] == [(expected,)]
    names, rows = exact(spark, UNIT_QUERIES[2])
    assert same(sorted(r[0] for r in rows), ["A09", "I10", "M54", "Z00"])
