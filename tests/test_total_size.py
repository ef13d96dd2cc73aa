"""The forms that cannot raise stay linear in the size of what they guard (dpsql._sql.totalforms).

A guard reads its argument twice; pasting guarded arguments at every level of a nested call
doubled the statement per level (16 levels took minutes to plan). Here each nesting shape is
guarded at two depths: doubling the depth must not much more than double the text, the nested
forms must raise nothing without TRY over edge values and equal TRY of the raw expression row
by row, and Spark's form (the guards taken back out) must be the raw expression again.
"""

from __future__ import annotations

import sys
import typing as t

import duckdb
import pytest
import sqlglot

from dpsql._sql import leaftypes
from dpsql._sql.total import unwrapped
from dpsql._sql.totalforms import unguarded

#: Each shape nests its call n levels deep around the columns of :data:`ROWS`.
SHAPES = {
    "abs": lambda n: "abs(" * n + "i" + ")" * n,
    "sums": lambda n: "(" * n + "i" + "".join(f" + i * {k})" for k in range(n)),
    "alternating": lambda n: "i / (i + " * n + "1" + ")" * n,
    "json": lambda n: "json_extract(" * n + "s" + "".join(f", '$.k{k}')" for k in range(n)),
    "chr": lambda n: "ascii(chr(" * n + "CAST(i % 1000 AS INTEGER)" + "))" * n,
    "arithmetic in calls": lambda n: "abs(i + " * n + "i" + ")" * n,
    "make_date": lambda n: _nest("year(make_date(2000, 1, 1 + ({}) % 40))", "i % 30", n),
}


def _nest(form: str, inner: str, n: int) -> str:
    for _ in range(n):
        inner = form.format(inner)
    return inner

#: Edge values: BIGINT's minimum, values whose sums and products overflow, NULL, JSON that
#: nests, text that is none. A result within 1e-12 of BIGINT's limits is NULL by design (the range
#: check is in DOUBLE), so the minimum's row is held to raising nothing, not to TRY's value.
ROWS = "(VALUES (0, '{\"k0\": {\"k1\": 1}}'), (1, 'x'), (-9223372036854775808, '{'), " \
       "(6000000000000000000, ''), (NULL, NULL), (-7, '{\"k0\": [1, 2]}')) AS t(i, s)"
EXTREME = 2


@pytest.fixture(autouse=True)
def _deep_enough() -> t.Iterator[None]:
    """sqlglot parses and prints by recursion: room for the deepest shape here (dpsql's own
    entry points raise the limit the same way, dpsql._sql.depth)."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 20_000))
    yield
    sys.setrecursionlimit(old)


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    return duckdb.connect()


def _text(shape: str, n: int) -> str:
    return unwrapped(sqlglot.parse_one(SHAPES[shape](n), read="duckdb")).sql("duckdb")


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_doubling_the_depth_at_most_doubles_the_text(shape: str) -> None:
    small, large = len(_text(shape, 8)), len(_text(shape, 16))
    assert large <= 2.3 * small, (small, large)


def test_deep_nesting_is_planned_in_linear_size() -> None:
    assert len(_text("abs", 200)) < 400 * len(_text("abs", 1))


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("n", [1, 3, 9])
def test_nested_forms_raise_nothing_and_equal_try(shape: str, n: int, con: duckdb.DuckDBPyConnection) -> None:
    raw = SHAPES[shape](n)
    guarded = _text(shape, n)
    got = con.execute(f"SELECT ({guarded})::VARCHAR FROM {ROWS}").fetchall()  # no TRY: must not raise
    want = con.execute(f"SELECT TRY({raw})::VARCHAR FROM {ROWS}").fetchall()
    del got[EXTREME], want[EXTREME]
    assert got == want, (raw, guarded[:400])


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_spark_gets_the_raw_expression_back(shape: str) -> None:
    raw = sqlglot.parse_one(SHAPES[shape](9), read="duckdb")
    back = unguarded(unwrapped(raw))
    assert back.sql("duckdb") == raw.transform(
        lambda n: sqlglot.exp.TryCast(this=n.this, to=n.args["to"]) if type(n) is sqlglot.exp.Cast else n
    ).sql("duckdb")


def test_lambda_parameters_do_not_capture_columns() -> None:
    """A bound argument's own columns are read outside the lambda; only the guard reads the
    parameter, whose name starts with the reserved ``__``."""
    text = _text("json", 9)
    assert "LAMBDA __dpsql_p" in text
    tree = sqlglot.parse_one(text, read="duckdb")
    for lam in tree.find_all(sqlglot.exp.Lambda):
        names = {p.name for p in lam.expressions}
        assert all(n.startswith("__dpsql_p") for n in names)
        assert not any(c.name in ("s", "i") for c in lam.this.find_all(sqlglot.exp.Column)
                       if c.name in names), lam.sql("duckdb")


def test_a_type_the_catalog_got_wrong_gives_null_not_an_error(con: duckdb.DuckDBPyConnection) -> None:
    """The range checks read the columns' types from the catalog (dpsql._sql.leaftypes) and assert
    them: where the expression's real type differs (a name the catalog types BIGINT, read here as
    TINYINT), the value is NULL rather than left unchecked."""
    with leaftypes.columns({"i": "BIGINT"}):
        text = unwrapped(sqlglot.parse_one("i * 100", read="duckdb")).sql("duckdb")
    assert "TYPEOF(" not in text.upper().replace("TYPEOF(I * 100) = 'BIGINT'", "")
    rows = con.execute(f"SELECT ({text}) FROM (VALUES (1::TINYINT), (2::TINYINT)) AS t(i)").fetchall()
    assert rows == [(None,), (None,)]
    with leaftypes.columns({"i": "TINYINT"}):
        right = unwrapped(sqlglot.parse_one("i * 100", read="duckdb")).sql("duckdb")
    rows = con.execute(f"SELECT ({right}) FROM (VALUES (1::TINYINT), (2::TINYINT)) AS t(i)").fetchall()
    assert rows == [(100,), (None,)]  # TINYINT's 200 overflows: NULL, as TRY gives


def test_known_types_make_short_checks() -> None:
    with leaftypes.columns({"p": "DECIMAL(15,2)", "d": "DECIMAL(15,2)", "n": "INTEGER"}):
        decimal = unwrapped(sqlglot.parse_one("p * (1 - d)", read="duckdb")).sql("duckdb")
        integer = unwrapped(sqlglot.parse_one("n * 2 + 1", read="duckdb")).sql("duckdb")
    assert len(decimal) < 300 and "BETWEEN" not in decimal, decimal  # no narrow DECIMAL can overflow
    assert "BETWEEN -2147483648 AND 2147483647" in integer and "TINYINT" not in integer, integer


def test_a_catalog_type_sqlglot_cannot_read_keeps_the_general_check() -> None:
    with leaftypes.columns({"e": "ENUM('a', 'b''c')", "w": "NOT A TYPE"}):
        for column in ("e", "w"):
            text = unwrapped(sqlglot.parse_one(f"{column} + 1", read="duckdb")).sql("duckdb")
            assert "TYPEOF(" in text and "'TINYINT'" in text  # the typeof CASE, not a crash
