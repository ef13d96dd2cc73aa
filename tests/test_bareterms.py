"""WHERE terms left without TRY (dpsql._sql.bareterms): the same rows pass as through the guarded
term, nothing raises over edge values, and what could raise keeps its guard."""

from __future__ import annotations

import duckdb
import pytest
from sqlglot import parse_one

import dpsql
from dpsql._sql.bareterms import bare
from dpsql._sql.total import total

TYPES = {"d": "DATE", "q": "DECIMAL(15,2)", "n": "INTEGER", "t": "TINYINT", "s": "VARCHAR", "x": "DOUBLE",
         "b": "BOOLEAN", "h": "HUGEINT"}
ROWS = """SELECT * FROM (VALUES
    (DATE '1994-01-01', 0.05, 24, 127, 'a', 'nan'::DOUBLE, TRUE, 170141183460469231731687303715884105727),
    (DATE '5881580-07-10', 9999999999999.99, 2147483647, -128, '', 'inf'::DOUBLE, FALSE, -1),
    (DATE '-5877641-06-25', -9999999999999.99, -2147483648, 0, 'Ä', -1e308, NULL, 0),
    (NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
    (DATE '1995-06-30', 0.07, 23, 1, '1994-01-01', 0.0, TRUE, 5),
    (DATE '1994-12-31', 0.06, 1, 2, 'b', 0.5, FALSE, 1),
    (DATE '1994-12-30', 0.06, 2, 2, 'b', 0.5, FALSE, 2)
) AS v(d, q, n, t, s, x, b, h)"""
TERMS = [
    "d >= CAST('1994-01-01' AS DATE)", "d < '1995-01-01'", "d = 'not a date'", "d BETWEEN '1994-01-01' AND '1996-01-01'",
    "q BETWEEN 0.05 AND 0.07", "q < 24", "q > -9999999999999.99", "q = 0.050", "q < 0.051", "q < 1e20",
    "n < 24", "n IN (1, 23, -2147483648)", "n < 2147483648", "n < 1.5", "n <= 1.5", "24 >= n",
    "t < 200", "t IN (-128, 127)", "s <> 'a'", "s = 1", "s IN ('a', '')", "x > 0.5", "x < 1e308", "b = TRUE",
    "h > 170141183460469231731687303715884105726", "h < 1.5",
    "d IS NULL", "NOT q IS NULL", "n + 1 > 2", "q < n", "s LIKE 'a%'",
]


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    c = duckdb.connect()
    c.execute(f"CREATE TABLE r AS {ROWS}")
    return c


@pytest.mark.parametrize("term", TERMS)
def test_a_bare_term_passes_the_rows_the_guarded_term_passes_and_raises_nothing(con, term: str) -> None:
    node = parse_one(term, read="duckdb")
    out = bare(node, TYPES)
    guarded = total(node).sql(dialect="duckdb")
    want = con.execute(f"SELECT list(rowid ORDER BY rowid) FROM r WHERE {guarded}").fetchone()
    if out is None:
        return
    got = con.execute(f"SELECT list(rowid ORDER BY rowid) FROM r WHERE {out.sql(dialect='duckdb')}").fetchone()
    assert got == want, (term, out.sql(dialect="duckdb"))


def test_what_could_raise_keeps_its_guard() -> None:
    kept = [t for t in TERMS if bare(parse_one(t, read="duckdb"), TYPES) is None]
    assert kept == ["q < 0.051", "q < 1e20", "n < 2147483648", "n < 1.5", "n <= 1.5", "t < 200", "s = 1", "h < 1.5",
                    "n + 1 > 2", "q < n", "s LIKE 'a%'"]
    assert bare(parse_one("n < 24"), None) is None and bare(parse_one("n < 24"), {}) is None  # types not known


def test_the_statement_filters_by_bare_terms_where_they_cannot_raise() -> None:
    policy = {"budget": {"epsilon": 10}, "tables": {"r": {"privacy_unit": "row", "max_rows_per_unit": 1,
                                                          "columns": {"n": {"lower": 0, "upper": 10}}}}}
    c = dpsql.connect(":memory:", policy, setup=lambda d: d.execute(f"CREATE TABLE r AS {ROWS}"))
    sql = c.prepare("SELECT DP_SUM(n) FROM r WHERE d >= DATE '1994-01-01' AND q BETWEEN 0.05 AND 0.07 "
                    "AND CAST(s AS INT) > 0 WITH (epsilon = 1)").rewritten.sql
    c.close()
    where = sql[sql.index(" WHERE "):]
    assert "TRY(\"__t\".\"d\"" not in where and "\"__t\".\"d\" >= TRY_CAST('1994-01-01' AS DATE)" in where
    assert "BETWEEN CAST(0.05 AS DECIMAL(15, 2))" in where
    assert "TRY(" in where  # the cast of s keeps its guard
