"""A clip's guarded operand computed once, beneath the clip (dpsql._compile.operands): the
statement gives the same rows as with the operand written into the clip three times, over
values whose product overflows, NULLs, signs and the bounds themselves, with and without units."""

from __future__ import annotations

import duckdb
import pytest

import dpsql
from dpsql._compile import operands, source

ROWS = """SELECT * FROM (VALUES
    (1, 'a', 100.00, 0.05, 7),
    (1, 'a', 9999999999999.99, 0.99, 7),
    (2, 'b', 9999999999999.99, -9999999999999.99, 7),
    (2, 'a', NULL, 0.10, NULL),
    (3, 'b', 105000.00, 0.00, 5),
    (3, 'b', -5.00, 0.50, 2),
    (4, 'a', 0.01, 1.00, 0),
    (4, NULL, 50000.00, 0.07, 1)
) AS v(id, k, price, discount, n)"""
POLICY = {"budget": {"epsilon": 1e9}, "tables": {"r": {
    "privacy_unit": "id", "max_rows_per_unit": 2,
    "columns": {"price": {"lower": 0, "upper": 105000}, "discount": {"lower": 0, "upper": 1},
                "n": {"lower": 0, "upper": 10}, "k": {"keys": ["a", "b"]}}}}}
QUERIES = [
    "SELECT k, DP_SUM(price * (1 - discount)), DP_MEAN(price * discount), DP_SUM(n) FROM r GROUP BY k",
    "SELECT DP_VAR(price * (1 - discount)), DP_COUNT(*) FROM r",
    "SELECT k, DP_SUM(price * (1 - discount), bounds => (0, 1000)) FROM r WHERE n < 7 GROUP BY k",
    "SELECT DP_SUM(n / 3, bounds => (0, 5)) FROM r",
]


@pytest.fixture(scope="module")
def con():
    c = dpsql.connect(":memory:", POLICY, setup=lambda d: d.execute(f"CREATE TABLE r AS {ROWS}"))
    yield c
    c.close()


@pytest.mark.parametrize("query", QUERIES)
def test_operands_computed_once_give_the_rows_of_the_clip_written_out(con, query: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    text = query + " WITH (epsilon = 1)"
    once = con.prepare(text).rewritten.sql
    assert operands.OPERANDS in once  # a guarded operand was split off: the test compares two forms
    monkeypatch.setattr(source.operands, "operands_once", lambda rows, guarded: rows)
    other = dpsql.connect(":memory:", POLICY, setup=lambda d: d.execute(f"CREATE TABLE r AS {ROWS}"))
    written = other.prepare(text).rewritten.sql
    other.close()
    assert operands.OPERANDS not in written
    raw = duckdb.connect()
    raw.execute(f"CREATE TABLE r AS {ROWS}")
    got, want = (sorted(raw.execute(s).fetchall(), key=repr) for s in (once, written))
    assert got == want and got
