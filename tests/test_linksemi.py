"""EXISTS / IN between tables linked to one unit (TPC-H Q4, Q21, Q22; dpsql/_sql/insubquery.py).

The rewrite adds the unit equality through the links itself; the brute force checks, over every
customer's removal on small data where order keys are shared between customers, that one
customer moves each released part by at most its sensitivity, and a negative control (the unit
equality dropped, the link-key correlation alone) shows the check catches the leak.

``key IN (SELECT link_key ...)`` is the same semi join spelled with IN: its statistics equal
EXISTS's spelling (noise-free, on the fixture and on random data with shared keys and
orphans), a plain-Python oracle (SQL's three-valued IN over each unit's own rows) fixes what
NULL keys do, where NOT IN and NOT EXISTS part ways, and an IN that compares along no link is
refused in one line."""

from __future__ import annotations

import random
import typing as t

import pytest

import dpsql._sql.insubquery as insubquery
from dpsql.admin.bruteforce_links import ORPHAN, attribute
from dpsql.errors import PrivacyError
from tests.links_fixture import DATA, LINKS, UNITS, as_dicts, connect, released
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
    "IN on the link key alone": "SELECT o_orderstatus, DP_COUNT(*), DP_SUM(o_totalprice) FROM orders WHERE o_orderkey "
                                "IN (SELECT l_orderkey FROM lineitem WHERE l_quantity > 2) GROUP BY o_orderstatus "
                                "WITH (epsilon = 1, keys = ['F', 'O'])",
    "NOT IN on the link key": "SELECT DP_COUNT(*), DP_SUM(o_totalprice) FROM orders WHERE o_orderkey NOT IN (SELECT "
                              "l_orderkey FROM lineitem) WITH (epsilon = 1)",
    "line items IN orders": "SELECT DP_SUM(l_quantity) FROM lineitem WHERE l_orderkey IN (SELECT o_orderkey FROM "
                            "orders WHERE o_orderstatus = 'F') WITH (epsilon = 1)",
    "customers NOT IN orders": "SELECT DP_SUM(c_acctbal) FROM customer WHERE c_custkey NOT IN (SELECT o_custkey FROM "
                               "orders) WITH (epsilon = 1)",
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


# -- IN on a link key: EXISTS spelled with IN ------------------------------------------------------

#: (IN, EXISTS): the same semi join in both spellings
SPELLINGS = [
    ("SELECT o_orderstatus, DP_COUNT(*), DP_SUM(o_totalprice) FROM orders WHERE o_orderkey IN (SELECT l_orderkey "
     "FROM lineitem WHERE l_returnflag = 'R') GROUP BY o_orderstatus WITH (epsilon = 1, keys = ['F', 'O'])",
     "SELECT o_orderstatus, DP_COUNT(*), DP_SUM(o_totalprice) FROM orders WHERE EXISTS (SELECT * FROM lineitem "
     "WHERE l_orderkey = o_orderkey AND l_returnflag = 'R') GROUP BY o_orderstatus WITH (epsilon = 1, keys = ['F', 'O'])"),
    ("SELECT DP_COUNT(*) FROM orders WHERE o_orderkey NOT IN (SELECT l_orderkey FROM lineitem) WITH (epsilon = 1)",
     "SELECT DP_COUNT(*) FROM orders WHERE NOT EXISTS (SELECT 1 FROM lineitem WHERE l_orderkey = o_orderkey) "
     "WITH (epsilon = 1)"),
    ("SELECT DP_SUM(l_quantity) FROM lineitem WHERE l_orderkey IN (SELECT o_orderkey FROM orders WHERE "
     "o_orderstatus = 'F') WITH (epsilon = 1)",
     "SELECT DP_SUM(l_quantity) FROM lineitem WHERE EXISTS (SELECT * FROM orders WHERE o_orderkey = l_orderkey AND "
     "o_orderstatus = 'F') WITH (epsilon = 1)"),
    ("SELECT DP_COUNT(*) FROM customer WHERE c_custkey NOT IN (SELECT o_custkey FROM orders WHERE o_totalprice > 50) "
     "WITH (epsilon = 1)",
     "SELECT DP_COUNT(*) FROM customer WHERE NOT EXISTS (SELECT * FROM orders WHERE o_custkey = c_custkey AND "
     "o_totalprice > 50) WITH (epsilon = 1)"),
    ("SELECT DP_COUNT(*) FROM lineitem l1 WHERE l1.l_orderkey IN (SELECT l2.l_orderkey FROM lineitem l2 WHERE "
     "l2.l_quantity > l1.l_quantity) WITH (epsilon = 1)",
     "SELECT DP_COUNT(*) FROM lineitem l1 WHERE EXISTS (SELECT * FROM lineitem l2 WHERE l2.l_orderkey = l1.l_orderkey "
     "AND l2.l_quantity > l1.l_quantity) WITH (epsilon = 1)"),
    ("SELECT DP_COUNT(*) FROM orders JOIN customer ON o_custkey = c_custkey WHERE c_nationkey = 0 AND o_orderkey "
     "NOT IN (SELECT l_orderkey FROM lineitem WHERE l_quantity < 5) WITH (epsilon = 1)",
     "SELECT DP_COUNT(*) FROM orders JOIN customer ON o_custkey = c_custkey WHERE c_nationkey = 0 AND NOT EXISTS "
     "(SELECT * FROM lineitem WHERE l_orderkey = o_orderkey AND l_quantity < 5) WITH (epsilon = 1)"),
]


@pytest.mark.parametrize("spelled_in,spelled_exists", SPELLINGS, ids=range(len(SPELLINGS)))
def test_in_on_a_link_key_releases_what_exists_releases(spelled_in: str, spelled_exists: str) -> None:
    prepared = [_prepared(q) for q in (spelled_in, spelled_exists)]  # bounds that truncate customer 1
    rng = random.Random(7)
    for data in [DATA, SHARED, *(random_data(rng) for _ in range(12))]:  # no NULL key is compared here
        got = [released(p, data) for p in prepared]
        assert got[0] == got[1], data
    assert any(v for g in released(prepared[0], DATA).values() for v in g.values())  # not vacuous


#: NULL keys that are compared: an order without a key of customer 2 (status F, beside orders 200
#: and 201, which have line items) and one of customer 9 (no line items)
NULLS = {**DATA, "orders": [*DATA["orders"], (None, 2, 25.0, "F"), (None, 9, 35.0, "O")]}


def _oracle(data: dict, outer: str, key: str, inner: str, picked: str, negated: bool,
            keep: t.Callable[[dict], bool] = lambda s: True) -> int:
    """How many rows of ``outer`` ``key [NOT] IN (SELECT picked FROM inner WHERE keep)`` keeps,
    in plain Python: each row's unit by :func:`attribute`, the set of the selected values of
    its own unit's inner rows, SQL's three-valued IN over it (a row is kept when it is TRUE)."""
    tables = as_dicts(data)
    owners = attribute(tables, UNITS, LINKS)
    kept = 0
    for row, unit in zip(tables[outer], owners[outer]):
        if unit is ORPHAN:
            continue
        values = [s[picked] for s, u in zip(tables[inner], owners[inner]) if u is not ORPHAN and u == unit and keep(s)]
        x = row[key]
        result = (None if values else False) if x is None else \
            True if x in values else None if None in values else False
        kept += result is (not negated)
    return kept


ORACLE = [  # (query, the oracle's arguments)
    ("SELECT DP_COUNT(*) FROM orders WHERE o_orderkey IN (SELECT l_orderkey FROM lineitem) WITH (epsilon = 1)",
     ("orders", "o_orderkey", "lineitem", "l_orderkey", False)),
    ("SELECT DP_COUNT(*) FROM orders WHERE o_orderkey NOT IN (SELECT l_orderkey FROM lineitem) WITH (epsilon = 1)",
     ("orders", "o_orderkey", "lineitem", "l_orderkey", True)),
    ("SELECT DP_COUNT(*) FROM lineitem WHERE l_orderkey IN (SELECT o_orderkey FROM orders WHERE o_orderstatus = 'F') "
     "WITH (epsilon = 1)", ("lineitem", "l_orderkey", "orders", "o_orderkey", False)),
    ("SELECT DP_COUNT(*) FROM lineitem WHERE l_orderkey NOT IN (SELECT o_orderkey FROM orders WHERE "
     "o_orderstatus = 'F') WITH (epsilon = 1)", ("lineitem", "l_orderkey", "orders", "o_orderkey", True)),
    ("SELECT DP_COUNT(*) FROM customer WHERE c_custkey NOT IN (SELECT o_custkey FROM orders) WITH (epsilon = 1)",
     ("customer", "c_custkey", "orders", "o_custkey", True)),
]


@pytest.mark.parametrize("query,args", ORACLE, ids=range(len(ORACLE)))
def test_in_on_a_link_key_counts_as_the_oracle_with_null_keys(query: str, args: tuple) -> None:
    con = connect(orders=100, lineitem=100)  # bounds that drop nothing: the filter alone is counted
    prepared = con.prepare(query)
    con.close()
    keep = (lambda s: s["o_orderstatus"] == "F") if "'F'" in query else (lambda s: True)
    rng = random.Random(3)
    for data in [DATA, NULLS, SHARED, *(random_data(rng) for _ in range(12))]:
        (got,) = released(prepared, data).get((), {"n": 0.0}).values()
        assert got == _oracle(data, *args, keep=keep), data


def test_with_null_keys_not_in_keeps_what_sql_keeps_and_not_exists_more() -> None:
    """Customer 2's order without a key: NOT EXISTS keeps it, NOT IN (NULL against customer 2's
    non-empty set) does not; customer 9's, whose set is empty, both keep."""
    not_in, not_exists = (_exact_count(q) for q in SPELLINGS[1])
    assert (not_in, not_exists) == (2 + 1, 2 + 2)  # orders 300 (customer 4) and 500, and the NULL keys
    assert _oracle(NULLS, "orders", "o_orderkey", "lineitem", "l_orderkey", True) == not_in


def _exact_count(query: str) -> float:
    con = connect(orders=100, lineitem=100)
    prepared = con.prepare(query)
    con.close()
    ((got,),) = (g.values() for g in released(prepared, NULLS).values())
    return got


def test_negative_control_not_in_without_the_unit_equality_lets_one_customer_move_others(
        monkeypatch: pytest.MonkeyPatch) -> None:
    real = insubquery._linked_unit
    monkeypatch.setattr(insubquery, "_linked_unit", lambda *a: (real(*a)[0], []))
    prepared = _prepared(CASES["NOT IN on the link key"])
    worst, problems = _check(prepared, [SHARED])
    assert problems and worst > 1, (worst, problems[:1])


@pytest.mark.parametrize("query,match", [
    ("SELECT DP_COUNT(*) FROM orders WHERE o_orderkey IN (SELECT l_quantity FROM lineitem) WITH (epsilon = 1)",
     r"compare a link key with the column it links \(o_orderkey IN \(SELECT l_orderkey FROM lineitem"),
    ("SELECT DP_COUNT(*) FROM orders WHERE o_totalprice NOT IN (SELECT l_orderkey FROM lineitem) WITH (epsilon = 1)",
     "must compare within one person's rows"),
    ("SELECT DP_COUNT(*) FROM orders WHERE o_orderkey + 0 IN (SELECT l_orderkey FROM lineitem) WITH (epsilon = 1)",
     "must compare within one person's rows"),
    ("SELECT DP_COUNT(*) FROM customer WHERE c_custkey IN (SELECT l_orderkey FROM lineitem) WITH (epsilon = 1)",
     "must compare within one person's rows"),
    ("SELECT DP_COUNT(*) FROM lineitem WHERE l_orderkey IN (SELECT o_custkey FROM orders) WITH (epsilon = 1)",
     r"\(l_orderkey IN \(SELECT o_orderkey FROM orders"),
    ("SELECT DP_COUNT(*) FROM orders WHERE o_orderkey IN (SELECT l_orderkey FROM lineitem GROUP BY l_orderkey) "
     "WITH (epsilon = 1)", "no GROUP BY"),
])
def test_an_in_that_compares_along_no_link_is_refused_in_one_line(query: str, match: str) -> None:
    with connect() as con:
        with pytest.raises(PrivacyError, match=match) as info:
            con.sql(query)
        assert "\n" not in str(info.value) and con.ledger.spent().epsilon == 0
