"""EXISTS / IN between tables linked to one unit (TPC-H Q4, Q21, Q22; dpsql/sql/insubquery.py).

The rewrite adds the unit equality through the links itself; the brute force checks, over every
customer's removal on small data where order keys are shared between customers, that one
customer moves each released part by at most its sensitivity, and a negative control (the unit
equality dropped, the link-key correlation alone) shows the check catches the leak."""

from __future__ import annotations

import random
import typing as t

import pytest

import dpsql.sql.insubquery as insubquery
from dpsql.errors import PrivacyError
from tests.links_fixture import DATA, connect
from tests.test_links import _check, random_data

CASES = {
    "Q4: orders with a line item": "SELECT o_orderstatus, DP_COUNT(*) FROM orders WHERE EXISTS (SELECT * FROM "
                                   "lineitem WHERE l_orderkey = o_orderkey AND l_quantity > 0) GROUP BY "
                                   "o_orderstatus WITH (epsilon = 1, keys = ['F', 'O'])",
    "orders without one": "SELECT DP_COUNT(*), DP_SUM(o_totalprice) FROM orders WHERE NOT EXISTS (SELECT * FROM "
                          "lineitem WHERE l_orderkey = o_orderkey) WITH (epsilon = 1)",
    "Q21: line items of one order": "SELECT DP_COUNT(*) FROM lineitem l1 WHERE EXISTS (SELECT * FROM lineitem l2 "
                                    "WHERE l2.l_orderkey = l1.l_orderkey AND l2.l_quantity <> l1.l_quantity) "
                                    "WITH (epsilon = 1)",
    "Q22: customers without orders": "SELECT DP_COUNT(*) FROM customer WHERE NOT EXISTS (SELECT * FROM orders "
                                     "WHERE o_custkey = c_custkey) WITH (epsilon = 1)",
    "IN on the link key": "SELECT DP_COUNT(*) FROM orders WHERE o_orderkey IN (SELECT l_orderkey FROM lineitem "
                          "WHERE l_orderkey = o_orderkey AND l_returnflag = 'R') WITH (epsilon = 1)",
}

#: order key 10 under customers 1 to 4; its line item is customer 1's (the smallest unit), so
#: without the unit equality removing customer 1 would switch three other customers' orders
SHARED = {"customer": [(c, 0, 10.0) for c in (1, 2, 3, 4)], "orders": [(10, c, 50.0, "F") for c in (1, 2, 3, 4)],
          "lineitem": [(10, 3, "A")], "nation": DATA["nation"]}


def _prepared(query: str) -> t.Any:
    con = connect(orders=2, lineitem=3)
    prepared = con.prepare(query)
    con.close()
    return prepared


@pytest.mark.parametrize("case", sorted(CASES))
def test_one_customer_moves_a_linked_semi_join_at_most_its_sensitivity(case: str) -> None:
    prepared = _prepared(CASES[case])
    rng = random.Random(len(case))
    worst, problems = _check(prepared, [DATA, SHARED, *(random_data(rng) for _ in range(12))])
    assert not problems, problems[:3]
    assert worst >= 0.5, worst  # the neighbours come near the bound: the check can fail


def test_each_row_is_tested_against_its_own_customers_rows_only() -> None:
    with connect() as con:
        sql = con.sql("EXPLAIN " + CASES["Q4: orders with a line item"]).fetchall()
    text = "\n".join(r[0] for r in sql)
    assert '.__u = "__t"."o_custkey"' in text, text


def test_negative_control_the_link_key_alone_lets_one_customer_move_another(monkeypatch: pytest.MonkeyPatch) -> None:
    real = insubquery._linked_unit
    monkeypatch.setattr(insubquery, "_linked_unit", lambda *a: (real(*a)[0], []))
    prepared = _prepared(CASES["orders without one"])
    worst, problems = _check(prepared, [SHARED])
    assert problems and worst > 1, (worst, problems[:1])


@pytest.mark.parametrize("query,match", [
    ("SELECT DP_COUNT(*) FROM orders WHERE EXISTS (SELECT * FROM lineitem WHERE l_quantity = o_orderkey) "
     "WITH (epsilon = 1)", "correlated on the privacy unit or a link key"),
    ("SELECT DP_COUNT(*) FROM orders WHERE EXISTS (SELECT * FROM lineitem WHERE l_orderkey = o_orderkey OR "
     "l_quantity > 0) WITH (epsilon = 1)", "correlated"),
    ("SELECT DP_COUNT(*) FROM orders WHERE EXISTS (SELECT * FROM lineitem) WITH (epsilon = 1)", "correlated"),
])
def test_a_semi_join_not_correlated_on_a_link_is_refused_in_one_line(query: str, match: str) -> None:
    with connect() as con:
        with pytest.raises(PrivacyError, match=match) as info:
            con.sql(query)
        assert "\n" not in str(info.value) and con.ledger.spent().epsilon == 0
