"""A tiny TPC-H-like schema for tests of links: customer ← orders ← lineitem, and a public nation.

Customer 1 has six orders and nine line items; order key 300 is held by customers 3 and 4 (the
target column is not a key in the data); order 400 has no customer (NULL), order 500 a customer
the customer table lacks (9: a unit all the same); line items on key 400, on key 999 (no such
order) and on NULL are orphans.
"""

from __future__ import annotations

import typing as t

import duckdb

import dpsql
from dpsql._privacy.noise import SeededNoise
from dpsql.admin.bruteforce_links import Link

Rows = list[tuple[t.Any, ...]]

SCHEMAS = {
    "customer": "c_custkey BIGINT, c_nationkey INTEGER, c_acctbal DOUBLE",
    "orders": "o_orderkey BIGINT, o_custkey BIGINT, o_totalprice DOUBLE, o_orderstatus VARCHAR",
    "lineitem": "l_orderkey BIGINT, l_quantity INTEGER, l_returnflag VARCHAR",
    "nation": "n_nationkey INTEGER, n_name VARCHAR",
}
COLUMNS = {name: [c.split()[0] for c in schema.split(", ")] for name, schema in SCHEMAS.items()}

DATA: dict[str, Rows] = {
    "customer": [(1, 0, 10.0), (2, 1, 20.0), (3, 0, 30.0), (4, 1, 40.0)],
    "orders": [(100, 1, 50.0, "F"), (101, 1, 60.0, "O"), (102, 1, 70.0, "F"), (103, 1, 80.0, "F"),
               (104, 1, 90.0, "O"), (105, 1, 100.0, "F"), (200, 2, 10.0, "O"), (201, 2, 20.0, "F"),
               (300, 3, 30.0, "F"), (300, 4, 40.0, "O"), (400, None, 5.0, "F"), (500, 9, 15.0, "O")],
    "lineitem": [(100, 1, "A"), (100, 2, "N"), (100, 3, "R"), (101, 4, "A"), (101, 5, "N"), (102, 6, "R"),
                 (103, 7, "A"), (104, 8, "N"), (105, 9, "R"), (200, 1, "A"), (200, 2, "A"), (201, 3, "N"),
                 (300, 4, "R"), (300, 5, "R"), (400, 6, "A"), (999, 7, "N"), (None, 8, "R")],
    "nation": [(0, "FRANCE"), (1, "GERMANY")],
}

#: the oracle's view of the policy (dpsql.admin.bruteforce_links)
UNITS = {"customer": "c_custkey"}
LINKS = {"orders": Link("o_custkey", "customer", "c_custkey"), "lineitem": Link("l_orderkey", "orders", "o_orderkey")}


def policy(orders: int = 3, lineitem: int = 4, **extra: t.Any) -> dict:
    """The issue's policy form, with bounds small enough that customer 1 is truncated."""
    return {"budget": {"epsilon": 1e9, "delta": 0.5}, "defaults": {"reuse_releases": "off"}, **extra,
            "tables": {
                "customer": {"privacy_unit": "c_custkey", "max_rows_per_unit": 1,
                             "columns": {"c_acctbal": {"lower": 0, "upper": 100}}},
                "orders": {"link": {"o_custkey": "customer.c_custkey"}, "max_rows_per_unit": orders,
                           "columns": {"o_totalprice": {"lower": 0, "upper": 100}}},
                "lineitem": {"link": {"l_orderkey": "orders.o_orderkey"}, "max_rows_per_unit": lineitem,
                             "columns": {"l_quantity": {"lower": 0, "upper": 10}}},
                "nation": {"public": True}}}


def load(con: t.Any, data: dict[str, Rows]) -> None:
    for name, schema in SCHEMAS.items():
        con.execute(f"CREATE OR REPLACE TABLE {name} ({schema})")
        if data.get(name):
            marks = ", ".join("?" * len(COLUMNS[name]))
            con.executemany(f"INSERT INTO {name} VALUES ({marks})", data[name])


def connect(data: dict[str, Rows] | None = None, **kw: t.Any) -> dpsql.Connection:
    return dpsql.connect(":memory:", policy(**kw), setup=lambda con: load(con, DATA if data is None else data),
                         noise=SeededNoise(0))


def as_dicts(data: dict[str, Rows]) -> dict[str, list[dict[str, t.Any]]]:
    return {name: [dict(zip(COLUMNS[name], row)) for row in rows] for name, rows in data.items()}


def as_rows(tables: dict[str, list[dict[str, t.Any]]]) -> dict[str, Rows]:
    return {name: [tuple(r[c] for c in COLUMNS[name]) for r in rows] for name, rows in tables.items()}


def released(prepared: t.Any, data: dict[str, Rows]) -> dict[tuple[t.Any, ...], dict[str, float]]:
    """The exact parts ("label part" -> value) of each group that ``prepared`` releases on ``data``."""
    plan, rw = prepared.plan, prepared.rewritten
    raw = duckdb.connect()
    load(raw, data)
    cur = raw.execute(prepared.sql.replace('"memory"."main".', ""))
    names = [d[0] for d in cur.description]
    out: dict[tuple[t.Any, ...], dict[str, float]] = {}
    for values in cur.fetchall():
        row = dict(zip(names, values))
        group = out.setdefault(tuple(row[k] for k in rw.keys), {})
        for prep in plan.prepared:
            got = prep.centred({s: row[c] for (i, s), c in rw.columns.items() if i == prep.agg.index})
            group.update({f"{prep.label} {n}": v for n, v in got.items()})
    raw.close()
    return out
