"""Deeply nested statements: refused in one line and charged nothing, wherever the caller stands.

sqlglot works on a tree by recursion; without :mod:`dpsql._sql.depth` a statement nested 40
levels deep raised a bare ``RecursionError`` from the parser (found by CI, where the hostile
corpus's ``to_base64()`` 25 deep ran on a fresh worker).
"""

from __future__ import annotations

import sys
import threading

import pytest

import dpsql
from dpsql._sql.depth import FRAMES

SHAPES = {
    "calls": lambda n: "abs(" * n + "age" + ")" * n + " > 0",
    "cases": lambda n: "CASE WHEN age > 1 THEN " * n + "1" + " END" * n + " = 1",
    "nots": lambda n: "NOT " * n + "age > 1",
    "parentheses": lambda n: "(" * n + "age > 1" + ")" * n,
    "ors": lambda n: " OR ".join(["age = 1"] * (n * 10)),
}


def _sql(shape: str, n: int) -> str:
    return f"SELECT DP_COUNT(*) FROM adult WHERE {SHAPES[shape](n)} WITH (epsilon = 0.01)"


@pytest.fixture
def con(seeded_demo) -> dpsql.Connection:
    return seeded_demo()


def _deep(frames: int, work):  # the caller itself deep: a notebook, a test runner, a server
    return work() if frames == 0 else _deep(frames - 1, work)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_nested_hundreds_deep_is_answered(shape: str, con: dpsql.Connection) -> None:
    rows = _deep(200, lambda: con.sql(_sql(shape, 200)).fetchall())
    assert len(rows) == 1


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_nested_too_deep_is_one_line_and_free(shape: str, con: dpsql.Connection) -> None:
    before = con.budget.spent
    with pytest.raises(dpsql.ParseError, match="nested too deeply for dpsql.*as a CTE") as info:
        con.sql(_sql(shape, 2000))
    assert "\n" not in str(info.value)
    assert con.budget.spent == before
    assert sys.getrecursionlimit() == _initial < FRAMES


def test_explain_and_prepare_refuse_alike(con: dpsql.Connection) -> None:
    for call in (con.explain, con.prepare):
        with pytest.raises(dpsql.ParseError, match="nested too deeply"):
            call(_sql("calls", 2000))


def test_the_hostile_entry_reaches_the_size_model(con: dpsql.Connection) -> None:
    inner = "age"
    for _ in range(25):
        inner = f"to_base64(CAST({inner} AS BLOB))"
    with pytest.raises(dpsql.PrivacyError, match="past dpsql's limit of"):
        con.sql(f"SELECT DP_COUNT(*) FROM adult WHERE length({inner}) > 0 WITH (epsilon = 0.001)")


@pytest.mark.slow  # 14 s: the default run's longest test
def test_threads_share_the_raised_limit_and_give_it_back(con: dpsql.Connection) -> None:
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(3):
                con.prepare(_sql("calls", 250).replace("0.01", f"0.0{threading.get_ident() % 97 + 1}"))
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sys.getrecursionlimit() == _initial


_initial = sys.getrecursionlimit()
