"""TPC-H Q13's shapes under customer-level DP: what it needed, each on its own.

* a column alias list on a FROM subquery (``AS c_orders (c_custkey, c_count)``) or a CTE;
* a condition in ON of a LEFT JOIN with a private table that reads that table alone
  (``o_comment NOT LIKE ...``): a filter of its rows before the join (dpsql._sql.onfilter);
* a per-unit subquery (GROUP BY the customer) over a join along the link;
* its count clipped to the policy's row bound k in the SQL, so that a GROUP BY of it has the
  public key domain 0..k (dpsql._sql.unitcount), checked by brute force over every unit neighbour
  of small data, with a negative control.
"""

from __future__ import annotations

import itertools
import typing as t
from pathlib import Path

import duckdb
import pytest

import dpsql
from dpsql._privacy.noise import SeededNoise
from dpsql._sql.nonraising import OLDER
from dpsql.errors import BindError, PrivacyError

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "fixtures" / "tpch"
POLICY = ROOT / "fixtures" / "policies" / "tpch.toml"
Q13 = (DATA / "queries" / "q13.sql").read_text()


@pytest.fixture(scope="module")
def tpch() -> t.Iterator[dpsql.Connection]:
    con = dpsql.connect(":memory:", POLICY, noise=SeededNoise(13))
    yield con
    con.close()


@pytest.fixture(scope="module")
def exact() -> t.Iterator[duckdb.DuckDBPyConnection]:
    con = duckdb.connect()
    for table in ("customer", "orders"):
        con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{DATA / (table + '.parquet')}')")
    yield con
    con.close()


def _stats(con: dpsql.Connection, sql: str) -> dict[t.Any, dict[str, t.Any]]:
    """The exact statistics of a query's rewritten statement, by its first column."""
    names, rows = con.engine.statistics(con.prepare(sql).sql)
    return {row[0]: dict(zip(names, row)) for row in rows}


def _refused(con: dpsql.Connection, sql: str, error: type, fragment: str) -> str:
    before = con.ledger.spent()
    with pytest.raises(error) as info:
        con.sql(sql)
    text = str(info.value)
    assert fragment in text and "\n" not in text.strip(), text
    assert con.ledger.spent() == before
    return text


# -- 1. column alias lists ---------------------------------------------------------------------


def test_an_alias_list_names_the_subquerys_columns_as_written_aliases_would(tpch) -> None:
    listed = ("SELECT n, count(*) FROM (SELECT o_custkey, count(*) FROM orders GROUP BY o_custkey) "
              "AS c (k, n) GROUP BY n")
    written = ("SELECT n, count(*) FROM (SELECT o_custkey AS k, count(*) AS n FROM orders GROUP BY o_custkey) "
               "AS c GROUP BY n")
    assert tpch.prepare(listed).sql == tpch.prepare(written).sql
    shorter = "SELECT sum(p) FROM (SELECT o_totalprice AS x, o_orderkey FROM orders) AS c (p)"
    assert tpch.prepare(shorter).sql == tpch.prepare("SELECT sum(o_totalprice) FROM orders").sql
    with pytest.raises(BindError, match="column x does not exist"):  # the list renamed it
        tpch.prepare("SELECT sum(x) FROM (SELECT o_totalprice AS x FROM orders) AS c (p)")


def test_a_ctes_alias_list_renames_its_columns(tpch) -> None:
    """``WITH c (x) AS (...)`` was read as if the list were not there (its old names resolved)."""
    assert tpch.prepare("WITH c (p) AS (SELECT o_totalprice AS y FROM orders) SELECT sum(p) FROM c").sql == \
        tpch.prepare("SELECT sum(o_totalprice) FROM orders").sql
    _refused(tpch, "WITH c (p) AS (SELECT o_totalprice AS y FROM orders) SELECT sum(y) FROM c", BindError,
             "column y does not exist")


@pytest.mark.parametrize("sql,error,fragment", [
    ("SELECT count(*) FROM (SELECT o_custkey, o_totalprice FROM orders) AS c (a, b, z)", BindError,
     "c has 3 column aliases but its SELECT has 2 columns"),
    ("SELECT count(*) FROM (SELECT * FROM orders) AS c (a, b)", PrivacyError, "cannot name the columns of a *"),
])
def test_alias_lists_that_do_not_fit_are_refused_in_one_line(tpch, sql: str, error: type, fragment: str) -> None:
    _refused(tpch, sql, error, fragment)


# -- 2. ON conditions that read the joined private table alone ----------------------------------


LEFT_ON = ("SELECT count(*) FROM customer LEFT JOIN orders ON c_custkey = o_custkey "
           "AND o_comment NOT LIKE '%special%requests%'")


def test_a_condition_on_the_right_table_alone_keeps_left_join_semantics(tpch, exact) -> None:
    got = _stats(tpch, LEFT_ON)
    want = exact.execute(LEFT_ON).fetchone()[0]
    assert next(iter(got.values()))["a0_n"] == want
    # negative control: the same condition in WHERE drops the customers left without orders
    in_where = exact.execute("SELECT count(*) FROM customer LEFT JOIN orders ON c_custkey = o_custkey "
                             "WHERE o_comment NOT LIKE '%special%requests%'").fetchone()[0]
    assert in_where < want
    sql = tpch.prepare(LEFT_ON).sql
    # a filter of orders' side, before the join (before DuckDB 2.0 the LIKE runs on RE2: dpsql._sql.likes)
    like = "NOT REGEXP_FULL_MATCH" if OLDER else "NOT LIKE"
    assert sql.index(like) < sql.index("AS __j1 ON")


def test_conditions_in_on_that_read_the_left_table_stay_refused(tpch) -> None:
    text = _refused(tpch, "SELECT count(*) FROM customer LEFT JOIN orders ON c_custkey = o_custkey "
                          "AND o_totalprice > c_acctbal", PrivacyError, "only equalities of keys")
    assert "o_totalprice > c_acctbal" in text
    _refused(tpch, "SELECT count(*) FROM customer LEFT JOIN orders ON o_comment LIKE '%x%'", PrivacyError,
             "needs an equality of keys")


# -- 3 and 4. a per-unit count over the join, clipped, as a GROUP BY key ---------------------------


def test_q13_groups_each_customer_by_its_order_count_clipped_to_40(tpch, exact) -> None:
    got = {k: v["a0_n"] for k, v in _stats(tpch, Q13).items()}
    assert sorted(got) == list(range(41))  # the public domain 0..40, every key a row
    want = dict(exact.execute(
        "SELECT least(n, 40), count(*) FROM (SELECT c_custkey, count(o_orderkey) AS n FROM customer "
        "LEFT JOIN orders ON c_custkey = o_custkey AND o_comment NOT LIKE '%special%requests%' "
        "GROUP BY c_custkey) GROUP BY 1").fetchall())
    assert {k: v for k, v in got.items() if v} == want
    text = tpch.explain(Q13)
    assert "public domain of 41 keys (a per-unit count, clipped to 0..40" in text and "τ" not in text
    assert "LEAST(COUNT(" in tpch.prepare(Q13).sql
    res = tpch.sql(Q13)
    assert res.columns == ["c_count", "custdist"] and [e.sensitivity for e in res.report] == [1.0]


def test_a_per_unit_sum_as_a_key_gets_no_public_domain(tpch) -> None:
    """Only a clipped count has a domain the policy fixes; a per-unit SUM's keys are not public."""
    sql = ("SELECT s, count(*) FROM (SELECT c_custkey, sum(o_totalprice) AS s FROM customer "
           "JOIN orders ON c_custkey = o_custkey GROUP BY c_custkey) GROUP BY s")
    assert "public domain" not in tpch.explain(sql)
    _refused(tpch, sql + " WITH (delta = 0)", PrivacyError, "GROUP BY s needs public keys when delta = 0")


# -- brute force: every unit neighbour of small data ------------------------------------------------

#: a unit is a customer; its values are its orders: 0 none, 1 a plain one, 2 a 'special requests' one
UNIVERSE = (0, 1, 2)
K = 2  # orders per customer in the policy; units have up to 3 (over the bound: the clip matters)
SMALL = {
    "neighbouring": "add_remove", "budget": {"epsilon": 1e9, "delta": 0.5},
    "tables": {"customer": {"privacy_unit": "c_custkey", "max_rows_per_unit": 1},
               "orders": {"link": {"o_custkey": "customer.c_custkey"}, "max_rows_per_unit": K}},
}
SMALL_Q13 = ("SELECT c_count, DP_COUNT(*) FROM (SELECT c_custkey, count(o_orderkey) FROM customer "
             "LEFT OUTER JOIN orders ON c_custkey = o_custkey AND o_comment NOT LIKE '%special%' "
             "GROUP BY c_custkey) AS c_orders (c_custkey, c_count) GROUP BY c_count WITH (epsilon = 1)")


def _small_sql() -> str:
    def setup(c) -> None:  # type: ignore[no-untyped-def]
        c.execute("CREATE TABLE customer (c_custkey BIGINT)")
        c.execute("CREATE TABLE orders (o_orderkey BIGINT, o_custkey BIGINT, o_comment VARCHAR)")

    con = dpsql.connect(":memory:", SMALL, setup=setup, noise=SeededNoise(1))
    prepared = con.prepare(SMALL_Q13)
    assert [p.parts["n"].sensitivity for p in prepared.plan.prepared] == [1.0]
    return prepared.sql


def _histogram(sql: str) -> t.Callable[[t.Any], dict[t.Any, float]]:
    db = duckdb.connect()

    def counts(x: t.Any) -> dict[t.Any, float]:
        db.execute("CREATE OR REPLACE TABLE customer (c_custkey BIGINT)")
        db.execute("CREATE OR REPLACE TABLE orders (o_orderkey BIGINT, o_custkey BIGINT, o_comment VARCHAR)")
        key = itertools.count(1)
        for i, unit in enumerate(x):
            db.execute("INSERT INTO customer VALUES (?)", [i + 1])
            for v in unit:
                if v:
                    db.execute("INSERT INTO orders VALUES (?, ?, ?)",
                               [next(key), i + 1, "special requests" if v == 2 else "plain"])
        return {row[0]: float(row[1] or 0) for row in db.execute(sql).fetchall()}

    return counts


@pytest.mark.parametrize("units", [1, 2])
def test_every_unit_neighbour_moves_the_q13_histogram_by_at_most_one(units: int) -> None:
    from dpsql.admin import bruteforce

    sql = _small_sql()
    l1, _ = bruteforce.vector_sensitivity(_histogram(sql), UNIVERSE, units, "add_remove", max_rows=3)
    assert l1 == 1.0


def test_the_brute_force_catches_a_join_that_mixes_customers() -> None:
    """Negative control: without the join's key and unit equalities every customer counts every
    order, and adding one customer with an order moves every other customer's group."""
    from dpsql.admin import bruteforce

    sql = _small_sql()
    on = sql.index(" ON ", sql.index("AS __j1"))
    mixed = sql[:on] + " ON TRUE" + sql[sql.index(" GROUP BY", on):]
    l1, _ = bruteforce.vector_sensitivity(_histogram(mixed), UNIVERSE, 2, "add_remove", max_rows=3)
    assert l1 > 1.0


def test_the_clip_keeps_every_customer_in_the_domain() -> None:
    """Negative control for the clip: without LEAST(..., k) a customer with k + 1 orders has a
    count outside 0..k, and the key join of the public domain would drop it from every group."""
    sql = _small_sql()
    assert f", {K})" in sql
    counts = _histogram(sql)
    heavy = ((1, 1, 1),)  # one customer, three plain orders
    assert counts(heavy) == {**{k: 0.0 for k in range(K + 1)}, K: 1.0}
    unclipped = sql.replace("LEAST(", "COALESCE(")
    assert sum(_histogram(unclipped)(heavy).values()) == 0.0


def test_a_per_unit_count_as_a_value_is_not_clipped() -> None:
    """Only the GROUP BY key is clipped: the count as a value stays the unit's own (clamped by the
    aggregate's bounds), so a DP quantile of it can still show how far people go past the bound."""
    def setup(c) -> None:  # type: ignore[no-untyped-def]
        c.execute("CREATE TABLE customer AS SELECT 1::BIGINT AS c_custkey")
        c.execute("CREATE TABLE orders AS SELECT range::BIGINT AS o_orderkey, 1::BIGINT AS o_custkey, "
                  "'plain' AS o_comment FROM range(3)")

    con = dpsql.connect(":memory:", SMALL, setup=setup, noise=SeededNoise(1))
    sql = ("SELECT DP_SUM(n, 0, 10) FROM (SELECT c_custkey, count(o_orderkey) AS n FROM customer "
           "LEFT JOIN orders ON c_custkey = o_custkey GROUP BY c_custkey) WITH (epsilon = 1)")
    prepared = con.prepare(sql)
    names, rows = con.engine.statistics(prepared.sql)
    assert prepared.plan.prepared[0].exact({"s": dict(zip(names, rows[0]))["a0_s"]})["s"] == 3  # not K = 2
