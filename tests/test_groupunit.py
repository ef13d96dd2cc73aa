"""GROUP BY a unit column or a link key over linked tables is refused: each group lists one
person's rows (TPC-H Q3, Q10). Over a table with its own id unit the GROUP BY stays as before."""

from __future__ import annotations

import pytest

from dpsql.errors import PrivacyError
from tests.links_fixture import connect


@pytest.mark.parametrize("query,key", [
    ("SELECT l_orderkey, DP_COUNT(*) FROM lineitem GROUP BY l_orderkey", "l_orderkey"),
    ("SELECT o_custkey, DP_COUNT(*) FROM orders GROUP BY o_custkey", "o_custkey"),
    ("SELECT c_custkey, DP_SUM(l_quantity) FROM lineitem JOIN orders ON l_orderkey = o_orderkey JOIN customer "
     "ON o_custkey = c_custkey GROUP BY c_custkey", "c_custkey"),
    ("SELECT c_custkey, DP_COUNT(*) FROM lineitem, orders, customer WHERE l_orderkey = o_orderkey AND "
     "o_custkey = c_custkey GROUP BY 1", "c_custkey"),
])
def test_a_group_per_person_or_order_over_linked_tables_is_refused_in_one_line(query: str, key: str) -> None:
    with connect() as con:
        with pytest.raises(PrivacyError, match=f"GROUP BY {key} would release individual") as info:
            con.sql(query + " WITH (epsilon = 1, delta = 1e-6)")
        assert "\n" not in str(info.value) and con.ledger.spent().epsilon == 0


def test_a_group_of_a_shared_column_answers() -> None:
    with connect() as con:
        rows = con.sql("SELECT o_orderstatus, DP_COUNT(*) FROM orders GROUP BY o_orderstatus "
                       "WITH (epsilon = 1, keys = ['F', 'O'])").fetchall()
    assert [r[0] for r in rows] == ["F", "O"]


def test_over_a_table_with_its_own_unit_the_unit_may_still_be_grouped_on() -> None:
    with connect() as con:  # the unit table alone: τ-thresholding, as before links
        con.sql("SELECT c_custkey, DP_COUNT(*) FROM customer GROUP BY c_custkey WITH (epsilon = 1, delta = 1e-6)")
