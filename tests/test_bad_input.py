"""Bad input: every case of tests/corpus/bad_input.toml gets its one-line error or its documented
result, and a refusal charges nothing. Bad policies are refused when connecting."""

from __future__ import annotations

import copy
import math
import tomllib
from pathlib import Path

import pytest

import dpsql
from dpsql._privacy.noise import SeededNoise
from dpsql.interfaces.demo import load_adult
from tests.conftest import demo_policy

CORPUS = Path(__file__).parent / "corpus" / "bad_input.toml"
CASES: list[dict] = tomllib.loads(CORPUS.read_text(encoding="utf-8"))["case"]


def _policy() -> dict:
    pol = demo_policy(epsilon=1e15, delta=0.5)
    pol["tables"].update({
        "vals": {"columns": {"x": {"lower": 0, "upper": 10}, "g": {"keys": ["a", "b", "c"]}}},
        "nothing": {"columns": {"x": {"lower": 0, "upper": 10}, "g": {"keys": ["a", "b"]}}},
        "straße": {"columns": {"größe": {"lower": 0, "upper": 250}, "farbe": {"keys": ["grün", "blau"]}}},
        "数据": {"columns": {"值": {"lower": 0, "upper": 10}}},
    })
    return pol


def _setup(con) -> None:  # type: ignore[no-untyped-def]
    load_adult(con)
    con.execute("CREATE TABLE vals (x DOUBLE, g VARCHAR)")
    con.execute("INSERT INTO vals VALUES (1, 'a'), (2, 'a'), (NULL, 'a'), ('nan', 'b'), ('inf', 'b'), "
                "('-inf', 'b')")
    con.execute("CREATE TABLE nothing (x DOUBLE, g VARCHAR)")
    con.execute('CREATE TABLE "straße" ("größe" DOUBLE, farbe VARCHAR)')
    con.execute("""INSERT INTO "straße" VALUES (180, 'grün'), (160, 'blau'), (300, 'grün')""")
    con.execute('CREATE TABLE "数据" ("值" DOUBLE)')
    con.execute('INSERT INTO "数据" VALUES (1), (2), (3)')


@pytest.fixture(scope="module")
def con() -> dpsql.Connection:
    c = dpsql.connect(":memory:", _policy(), setup=_setup, noise=SeededNoise(5))
    yield c
    c.close()


def _id(case: dict) -> str:
    return f"{CASES.index(case):03d}-{case['why'][:50]}"


def _same(got: object, want: object, tol: float) -> bool:
    if isinstance(want, (int, float)) and not isinstance(want, bool):
        return isinstance(got, (int, float)) and math.isfinite(got) and abs(got - want) <= tol
    return got == want


def test_corpus_is_well_formed() -> None:
    assert len(CASES) >= 80
    for case in CASES:
        assert case["expect"] in ("ok", "refused") and case.get("why"), case
        if case["expect"] == "refused":
            assert case["error"] in dpsql.__all__ and case.get("match"), case
        else:
            assert ("rows" in case) != ("between" in case), case


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_bad_input(case: dict, con: dpsql.Connection) -> None:
    before = con.budget.spent
    if case["expect"] == "refused":
        with pytest.raises(dpsql.Error) as info:
            con.sql(case["sql"])
        message = str(info.value)
        assert type(info.value).__name__ == case["error"], message
        assert case["match"] in message
        assert "\n" not in message
        assert con.budget.spent == before, "a refusal must not be charged"
        return
    rows = con.sql(case["sql"]).fetchall()
    assert con.budget.spent != before
    if "between" in case:
        lo, hi = case["between"]
        assert len(rows) == 1 and lo <= rows[0][-1] <= hi, rows
        return
    want = case["rows"]
    tol = case.get("tol", 0.01)
    assert len(rows) == len(want), rows
    for got_row, want_row in zip(sorted(rows, key=str), sorted(want, key=str)):
        assert len(got_row) == len(want_row) and all(
            _same(g, w, tol) for g, w in zip(got_row, want_row)), (got_row, want_row)


# -- policies ----------------------------------------------------------------------------------

def _bad_policy(path: tuple[str, ...], value: object) -> dict:
    pol = copy.deepcopy(demo_policy())
    node = pol
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return pol


@pytest.mark.parametrize(("path", "value", "match"), [
    (("tables", "adult", "columns", "age"), {"lower": 100, "upper": 0}, "age: lower (100) must be below upper (0)"),
    (("tables", "adult", "columns", "age"), {"lower": 0, "upper": math.nan}, "age.upper must be finite"),
    (("tables", "adult", "columns", "age"), {"lower": -math.inf, "upper": 0}, "age.lower must be finite"),
    (("tables", "adult", "columns", "age"), {"lower": "0", "upper": 10}, "age.lower must be a number"),
    (("tables", "adult", "max_rows_per_unit"), 0, "max_rows_per_unit must be an integer >= 1"),
    (("budget",), {"epsilon": -1}, "budget.epsilon must be > 0"),
    (("budget",), {"epsilon": 1, "delta": 1}, "budget.delta must be in [0, 1)"),
    (("budget",), {"epsilon": math.nan}, "budget.epsilon must be finite"),
    (("neighbouring",), "bounded", "neighbouring must be"),
])
def test_bad_policy_is_refused_when_connecting(path: tuple[str, ...], value: object, match: str) -> None:
    with pytest.raises(dpsql.PolicyError) as info:
        dpsql.connect(":memory:", _bad_policy(path, value))
    assert match in str(info.value) and "\n" not in str(info.value)
