"""Audit cases for TPC-H Q13's shape (tests/test_q13.py): customers grouped by their number of
orders, a per-unit subquery over a LEFT JOIN along the link, its count clipped to the policy's
k = 2 orders per customer (dpsql._sql.unitcount), the orders filtered in ON
(dpsql._sql.onfilter), the columns named by an alias list (dpsql._sql.aliaslist).

Each pair is two datasets one customer apart. The customer added holds three plain orders (its
count, 3, is clipped to 2), or two plain orders and one the ON condition drops: either way it
adds 1 to one group and nothing to the others, the histogram's sensitivity, so the cases pass
only if nothing is underestimated. The brute force over every neighbour of small data, and its
negative controls (a join that mixes customers, no clip), are in tests/test_q13.py.
"""

from __future__ import annotations

import typing as t

from .harness import AuditCase, Pair, query_pair, values_of_keys

K = 2
Q13 = ("SELECT c_count, DP_COUNT(*) FROM (SELECT c_custkey, count(o_orderkey) FROM t "
       "LEFT OUTER JOIN orders ON c_custkey = o_custkey AND o_comment NOT LIKE '%special%' "
       "GROUP BY c_custkey) AS c_orders (c_custkey, c_count) GROUP BY c_count WITH (epsilon = 1)")
ORDERS = "o_orderkey BIGINT, o_custkey BIGINT, o_comment VARCHAR"


def policy() -> dict:
    return {"neighbouring": "add_remove", "budget": {"epsilon": 1e6, "delta": 0.5}, "tables": {
        "t": {"privacy_unit": "c_custkey", "max_rows_per_unit": 1},
        "orders": {"link": {"o_custkey": "t.c_custkey"}, "max_rows_per_unit": K}}}


#: six customers: none, one or two orders each, one of them a 'special requests' order
CUSTOMERS = [(c,) for c in range(1, 7)]
ORDERS_X = [(1, 2, "plain"), (2, 3, "plain"), (3, 3, "plain"), (4, 4, "special requests"), (5, 5, "plain")]


def _pair(added: list[tuple[str]]) -> t.Callable[[], Pair]:
    """Customer 9 added with the orders of ``added`` (their comments)."""
    orders_y = ORDERS_X + [(100 + i, 9, comment) for i, (comment,) in enumerate(added)]
    return lambda: query_pair(Q13, CUSTOMERS, CUSTOMERS + [(9,)], policy(), schema="c_custkey BIGINT",
                              pick=values_of_keys(list(range(K + 1))), extra={"orders": (ORDERS, ORDERS_X)},
                              extra_prime={"orders": (ORDERS, orders_y)})


Q13_CASES: list[AuditCase] = [
    AuditCase("laplace Q13 histogram: a customer with 3 orders, counted as k = 2",
              _pair([("plain",)] * 3), mechanism="laplace"),
    AuditCase("laplace Q13 histogram: a customer with 2 plain orders and 1 the ON condition drops",
              _pair([("plain",), ("plain",), ("special requests",)]), mechanism="laplace"),
]

__all__: t.Sequence[str] = ("Q13_CASES",)
