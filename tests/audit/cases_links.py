"""Audit cases for tables linked to their privacy unit (dpsql._policy.links, issue 29).

Table ``t`` (line items: ``x`` in [0, 100], order key ``k``) links to ``o`` (orders: key
``ok``, customer ``cid``), which links to ``c`` (customers, unit ``cid``). Each pair is two
datasets one customer apart: the second holds that customer's order rows and line items, the
first does not (:func:`dpsql.admin.bruteforce_links.unit_neighbours` finds the same pairs).
The sum moves by exactly its sensitivity, k·100 with ``max_rows_per_unit`` = k = 2: the cases
pass only if nothing is underestimated.

The amplification pair puts one order key under ten customers: a join of the orders as they
are would read each of the key's line items ten times, once as each customer's. The negative
control releases that pair from SQL whose link target is not grouped by key (everything else,
the plan and its noise included, as dpsql has it) and must be caught.
"""

from __future__ import annotations

import typing as t
from unittest import mock

import dpsql._sql.links
import dpsql._sql.scope

from .harness import AuditCase, Pair, query_pair

SCHEMA = "x DOUBLE, k BIGINT"
SUM = "SELECT DP_SUM(x) FROM t WITH (epsilon = 1)"
#: the same sum under a WHERE that reads as selective: the unit is read per row, by a correlated
#: subquery in a derived table (dpsql._sql.links.linked_source), not by the grouped join
SELECTIVE = "SELECT DP_SUM(x) FROM t WHERE k IN (1, 2, 3, 7) WITH (epsilon = 1)"


def policy() -> dict:
    return {"budget": {"epsilon": 1e6, "delta": 0.5}, "tables": {
        "c": {"privacy_unit": "cid", "max_rows_per_unit": 1},
        "o": {"link": {"cid": "c.cid"}, "max_rows_per_unit": 5},
        "t": {"link": {"k": "o.ok"}, "max_rows_per_unit": 2, "columns": {"x": {"lower": 0, "upper": 100}}}}}


def _tables(orders: list[tuple[int, int]], customers: list[int]) -> dict[str, tuple[str, list[tuple]]]:
    return {"o": ("ok BIGINT, cid BIGINT", orders), "c": ("cid BIGINT", [(c,) for c in customers])}


#: customer 9 adds two orders and five line items (three on one order, two on the other)
MANY_X = ([(50.0, 1)], _tables([(1, 1)], [1]))
MANY_Y = ([(50.0, 1)] + [(100.0, 2)] * 3 + [(100.0, 3)] * 2, _tables([(1, 1), (2, 9), (3, 9)], [1, 9]))
#: order key 7 under customers 1..10, three line items on it: customer 1's (the smallest)
SHARED_Y = ([(100.0, 7)] * 3, _tables([(7, c) for c in range(1, 11)], list(range(1, 11))))
SHARED_X = ([], _tables([(7, c) for c in range(2, 11)], list(range(2, 11))))


def _pair(x: tuple, y: tuple, sql: str = SUM) -> t.Callable[[], Pair]:
    return lambda: query_pair(sql, x[0], y[0], policy(), schema=SCHEMA, extra=x[1], extra_prime=y[1])


def _ungrouped(table: t.Any, key: t.Any, below: t.Any) -> t.Any:
    from sqlglot import exp

    out = exp.select(exp.alias_(key, dpsql._sql.links.KEY), exp.alias_(below.unit, dpsql._sql.links.UNIT)).from_(table)
    for w in below.where:
        out = out.where(w)
    return out


def _ungrouped_pair(x: tuple, y: tuple) -> t.Callable[[], Pair]:
    def build() -> Pair:
        with mock.patch.object(dpsql._sql.links, "target_by_key", _ungrouped):
            return _pair(x, y)()
    return build


def multiplying_source(tp: t.Any, table: t.Any, policy: t.Any, catalog: t.Any, database: t.Any,
                       alias: t.Any, base: str) -> t.Any:
    """The negative control's linked table: its rows joined to every target row of their key
    (each with that row's unit), not given the one smallest unit of the key."""
    from sqlglot import exp

    links = dpsql._sql.links
    source, found = links.linked_source(tp, table, policy, catalog, database, alias, base)
    rows = source.this
    lookup = rows.expressions[1].find(exp.Select)  # (SELECT MIN(unit) FROM target ... WHERE ... AND key = value)
    conditions = list(lookup.args["where"].this.flatten())
    match = conditions.pop()  # key = value: the last condition
    target = exp.select(exp.alias_(match.this.copy(), "__k"), exp.alias_(lookup.expressions[0].this.copy(), "__u"))
    target = target.from_(lookup.args["from_"].this.copy())
    for c in conditions:
        target = target.where(c.copy())
    joined = exp.select(rows.expressions[0].copy(), exp.alias_(exp.column("__u", table="__m"), links.ROW_UNIT))
    joined = joined.from_(rows.args["from_"].this.copy()).join(
        exp.Subquery(this=target, alias=exp.TableAlias(this=exp.to_identifier("__m"))),
        on=exp.EQ(this=exp.column("__k", table="__m"), expression=match.expression.copy()))
    return exp.Subquery(this=joined), found


def _multiplying_pair(x: tuple, y: tuple) -> t.Callable[[], Pair]:
    def build() -> Pair:
        with mock.patch.object(dpsql._sql.scope, "linked_source", multiplying_source):
            return _pair(x, y, SELECTIVE)()
    return build


LINK_CASES = [
    AuditCase("laplace sum over line items linked through orders: one customer, two orders, five items",
              _pair(MANY_X, MANY_Y), mechanism="laplace"),
    AuditCase("laplace sum over line items linked through orders: one order key under ten customers",
              _pair(SHARED_X, SHARED_Y), mechanism="laplace"),
    AuditCase("laplace sum over links read per row (a selective WHERE): one customer, two orders, five items",
              _pair(MANY_X, MANY_Y, SELECTIVE), mechanism="laplace"),
    AuditCase("laplace sum over links read per row (a selective WHERE): one order key under ten customers",
              _pair(SHARED_X, SHARED_Y, SELECTIVE), mechanism="laplace"),
]
LINK_CONTROLS = [
    AuditCase("laplace sum over links, calibrated for one row per key, the link target read ungrouped",
              _ungrouped_pair(SHARED_X, SHARED_Y), mechanism="laplace", expect="violation"),
    AuditCase("laplace sum over links read per row, the line items joined to every order row on their key",
              _multiplying_pair(SHARED_X, SHARED_Y), mechanism="laplace", expect="violation"),
]
