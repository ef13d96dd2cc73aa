"""Comma joins with their equalities in WHERE are bound as the INNER JOINs they are (dpsql/_sql/commajoin.py).

The sensitivity argument is the written JOIN's (the rewrite changes no row), so the check is
that both spellings release the same values from the same draws and the same SQL, and that
what is not a join condition stays refused."""

from __future__ import annotations

import pytest

from dpsql.errors import PrivacyError
from tests.links_fixture import connect

PAIRS = [
    ("SELECT DP_COUNT(*) FROM orders, lineitem WHERE o_orderkey = l_orderkey AND l_quantity > 2",
     "SELECT DP_COUNT(*) FROM lineitem JOIN orders ON o_orderkey = l_orderkey WHERE l_quantity > 2"),
    ("SELECT n_name, DP_SUM(l_quantity) FROM nation, customer, orders, lineitem WHERE c_custkey = o_custkey "
     "AND l_orderkey = o_orderkey AND c_nationkey = n_nationkey GROUP BY n_name ORDER BY n_name",
     "SELECT n_name, DP_SUM(l_quantity) FROM lineitem JOIN orders ON l_orderkey = o_orderkey JOIN customer ON "
     "c_custkey = o_custkey JOIN nation ON c_nationkey = n_nationkey GROUP BY n_name ORDER BY n_name"),
    # Q19's shape: the join equality repeated in every branch of an OR
    ("SELECT DP_COUNT(*) FROM lineitem, orders WHERE (l_orderkey = o_orderkey AND l_quantity > 2) OR "
     "(o_orderkey = l_orderkey AND o_totalprice > 50)",
     "SELECT DP_COUNT(*) FROM lineitem JOIN orders ON l_orderkey = o_orderkey WHERE (l_quantity > 2) OR "
     "(o_totalprice > 50)"),
]


@pytest.mark.parametrize("comma,written", PAIRS)
def test_a_comma_join_releases_what_the_written_join_releases(comma: str, written: str) -> None:
    opts = " WITH (epsilon = 1, delta = 1e-6)"
    with connect() as one, connect() as two:
        a = one.sql(comma + opts).fetchall()
        b = two.sql(written + opts).fetchall()
        assert a == b and a


def test_the_rewrite_is_the_join_in_the_rewritten_sql() -> None:
    with connect() as con:
        comma = con.sql("EXPLAIN " + PAIRS[0][0] + " WITH (epsilon = 1)").fetchall()
        written = con.sql("EXPLAIN " + PAIRS[0][1] + " WITH (epsilon = 1)").fetchall()
    sql = [r for r in comma if r[0].strip().startswith(("JOIN", "ON", "AND", "FROM"))]
    assert sql == [r for r in written if r[0].strip().startswith(("JOIN", "ON", "AND", "FROM"))] and sql


@pytest.mark.parametrize("query,match", [
    ("SELECT DP_COUNT(*) FROM lineitem, orders WITH (epsilon = 1)", "CROSS JOIN"),
    ("SELECT DP_COUNT(*) FROM lineitem, orders WHERE l_orderkey = o_orderkey OR l_quantity > 0 WITH (epsilon = 1)",
     "CROSS JOIN"),
    ("SELECT DP_COUNT(*) FROM lineitem, orders WHERE l_quantity = o_orderkey WITH (epsilon = 1)", "orders"),
    ("SELECT DP_COUNT(*) FROM lineitem, orders WHERE (l_orderkey = o_orderkey AND l_quantity > 2) OR l_quantity > 5 "
     "WITH (epsilon = 1)", "CROSS JOIN"),
    ("SELECT DP_COUNT(*) FROM lineitem, orders JOIN customer ON o_custkey = c_custkey WHERE l_orderkey = o_orderkey "
     "WITH (epsilon = 1)", "CROSS JOIN"),
])
def test_what_is_not_a_join_condition_stays_refused_in_one_line(query: str, match: str) -> None:
    with connect() as con:
        with pytest.raises(PrivacyError, match=match) as info:
            con.sql(query)
        assert "\n" not in str(info.value)
        assert con.ledger.spent().epsilon == 0
