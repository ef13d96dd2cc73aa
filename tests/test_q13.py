"""TPC-H Q13's shapes under customer-level DP: what it needed, each on its own.

* a column alias list on a FROM subquery (``AS c_orders (c_custkey, c_count)``) or a CTE;
* a condition in ON of a LEFT JOIN with a private table that reads that table alone
  (``o_comment NOT LIKE ...``): a filter of its rows before the join (dpsql.sql.onfilter);
* a per-unit subquery (GROUP BY the customer) over a join along the link;
* its count clipped to the policy's row bound k in the SQL, so that a GROUP BY of it has the
  public key domain 0..k (dpsql.sql.unitcount), checked by brute force over every unit neighbour
  of small data, with a negative control.
"""

from __future__ import annotations

import typing as t
from pathlib import Path

import duckdb
import pytest

import dpsql
from dpsql.errors import BindError, PrivacyError
from dpsql.privacy.noise import SeededNoise

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "fixtures" / "tpch"
POLICY = ROOT / "fixtures" / "policies" / "tpch.toml"


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
    assert sql.index("NOT LIKE") < sql.index("AS __j1 ON")  # a filter of orders' side, before the join


def test_conditions_in_on_that_read_the_left_table_stay_refused(tpch) -> None:
    text = _refused(tpch, "SELECT count(*) FROM customer LEFT JOIN orders ON c_custkey = o_custkey "
                          "AND o_totalprice > c_acctbal", PrivacyError, "only equalities of keys")
    assert "o_totalprice > c_acctbal" in text
    _refused(tpch, "SELECT count(*) FROM customer LEFT JOIN orders ON o_comment LIKE '%x%'", PrivacyError,
             "needs an equality of keys")
