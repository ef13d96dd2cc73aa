"""Names a user gives tables and columns never reach the rewritten SQL as SQL: every join form
(public, semi, private of row units, of one id unit, ``IN`` and ``EXISTS`` subqueries) over
tables and columns whose names hold quotes, semicolons and comments releases exactly what the
same query over tame names releases (the same noise), and the canary table survives.
"""

from __future__ import annotations

import typing as t

import duckdb
import pytest

import dpsql
from dpsql._privacy.noise import SeededNoise

#: each tame name and its hostile spelling
HOSTILE = {
    "people": 'pe"ople; DROP TABLE canary; --',
    "states": "st'ates\"; DROP TABLE canary; --",
    "buys": 'bu"ys',
    "zip": 'zi"p; DROP TABLE canary; --',
    "uid": "u'id\"--",
    "amount": 'am"ount;',
}
ROWS = {
    "people": ("uid INTEGER, zip INTEGER", [(1, 10), (2, 10), (3, 20), (4, 30)]),
    "states": ("zip INTEGER", [(10,), (10,), (20,)]),
    "buys": ("uid INTEGER, amount DOUBLE", [(1, 5.0), (1, 6.0), (2, 7.0), (4, 1.0), (4, 2.0), (4, 3.0)]),
}


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _names(hostile: bool) -> dict[str, str]:
    return {k: (v if hostile else k) for k, v in HOSTILE.items()}


def _connect(hostile: bool, unit: str) -> dpsql.Connection:
    n = _names(hostile)

    def setup(con: duckdb.DuckDBPyConnection) -> None:
        con.execute("CREATE TABLE canary (x INTEGER)")
        for table, (schema, rows) in ROWS.items():
            cols = ", ".join(f"{_q(n[c.split()[0]])} {c.split()[1]}" for c in schema.split(", "))
            con.execute(f"CREATE TABLE {_q(n[table])} ({cols})")
            con.executemany(f"INSERT INTO {_q(n[table])} VALUES ({', '.join('?' * len(rows[0]))})", rows)

    private = {"privacy_unit": n["uid"], "unit_name": "person", "max_rows_per_unit": 3} if unit == "id" else {}
    tables = {n["people"]: dict(private), n["states"]: {"public": True},
              n["buys"]: {**private, "columns": {n["amount"]: {"lower": 0, "upper": 10}}}}
    pol = {"budget": {"epsilon": 1e9, "delta": 0.5}, "defaults": {"reuse_releases": "off"}, "tables": tables}
    return dpsql.connect(":memory:", pol, setup=setup, noise=SeededNoise(0))


QUERIES = {
    "public join": ("row", "SELECT DP_COUNT(*) FROM {people} p JOIN {states} s ON p.{zip} = s.{zip} WITH (epsilon = 1)"),
    "left public join": ("row", "SELECT DP_COUNT(*) FROM {people} p LEFT JOIN {states} s ON p.{zip} = s.{zip} "
                                "WITH (epsilon = 1, max_join_rows = 1)"),
    "semi join": ("row", "SELECT DP_COUNT(*) FROM {people} p SEMI JOIN {states} s ON p.{zip} = s.{zip} WITH (epsilon = 1)"),
    "private join": ("row", "SELECT DP_SUM({amount}) FROM {people} p JOIN {buys} b ON p.{uid} = b.{uid} "
                            "WITH (epsilon = 1, join_truncation = 'drop_excess(2)')"),
    "non-unique join": ("row", "SELECT DP_COUNT(*) FROM {people} p JOIN {buys} b ON p.{uid} = b.{uid} "
                               "WITH (epsilon = 1, join_truncation = 'drop_non_unique')"),
    "id join": ("id", "SELECT DP_SUM({amount}) FROM {people} p JOIN {buys} b ON p.{uid} = b.{uid} WITH (epsilon = 1)"),
    "in public": ("row", "SELECT DP_COUNT(*) FROM {people} WHERE {zip} IN (SELECT {zip} FROM {states}) WITH (epsilon = 1)"),
    "exists": ("id", "SELECT DP_COUNT(*) FROM {people} p WHERE EXISTS (SELECT 1 FROM {buys} b WHERE b.{uid} = p.{uid}) "
                     "WITH (epsilon = 1)"),
    "in same unit": ("id", "SELECT DP_COUNT(*) FROM {people} WHERE {uid} IN (SELECT {uid} FROM {buys}) WITH (epsilon = 1)"),
}


def _run(hostile: bool, case: str) -> tuple[list[tuple[t.Any, ...]], str]:
    unit, query = QUERIES[case]
    con = _connect(hostile, unit)
    try:
        rows = con.sql(query.format(**{k: _q(v) for k, v in _names(hostile).items()})).fetchall()
        con.engine.public_rows("SELECT COUNT(*) FROM canary")  # still there
        return rows, con.prepare(query.format(**{k: _q(v) for k, v in _names(hostile).items()})).sql
    finally:
        con.close()


@pytest.mark.parametrize("case", sorted(QUERIES))
def test_hostile_names_release_what_tame_names_release(case: str) -> None:
    tame, _ = _run(False, case)
    hostile, sql = _run(True, case)
    assert hostile == tame and tame
    used = [v for k, v in HOSTILE.items() if "{" + k + "}" in QUERIES[case][1]]
    assert all(_q(name.lower()) in sql.lower() for name in used)  # in the statement, quoted
