"""A hostile analyst: every query of tests/corpus/hostile.toml gets exactly its expected outcome.

Refusals must be the named dpsql error, name what they refuse in one line, and charge nothing.
Entries marked ``total`` hold expressions that fail on some values in plain DuckDB: their outcome
must be the same on the full table, on an empty one and on a one-row one, so that neither an
error nor its absence tells the analyst whether some row exists.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import dpsql
from dpsql.interfaces.demo import load_adult
from dpsql.privacy.noise import SeededNoise
from tests.conftest import demo_policy

CORPUS = Path(__file__).parent / "corpus" / "hostile.toml"
ENTRIES: list[dict] = tomllib.loads(CORPUS.read_text(encoding="utf-8"))["query"]

VISITS = [(1, 120.0, "a"), (1, 80.5, "b"), (2, 999.0, "a"), (3, 15.0, "c"), (3, 15.0, "c"), (3, 40.0, "a")]


def _policy() -> dict:
    pol = demo_policy(epsilon=1e9, delta=0.5)
    pol["tables"]["visits"] = {
        "privacy_unit": "patient_id",
        "max_rows_per_unit": 3,
        "columns": {"cost": {"lower": 0, "upper": 1000}},
    }
    return pol


def _connect(rows: str) -> dpsql.Connection:
    """The demo with all of adult (``rows='all'``), none of it, or only its first row."""

    def setup(con) -> None:  # type: ignore[no-untyped-def]
        load_adult(con)
        if rows == "none":
            con.execute("DELETE FROM adult")
        elif rows == "one":
            con.execute("DELETE FROM adult WHERE fnlwgt <> 77516 OR age <> 39")
        con.execute("CREATE TABLE visits (patient_id INTEGER, cost DOUBLE, ward VARCHAR)")
        con.executemany("INSERT INTO visits VALUES (?, ?, ?)", VISITS)

    return dpsql.connect(":memory:", _policy(), setup=setup, noise=SeededNoise(0))


@pytest.fixture(scope="module")
def cons() -> dict[str, dpsql.Connection]:
    out = {rows: _connect(rows) for rows in ("all", "none", "one")}
    yield out
    for con in out.values():
        con.close()


def _outcome(con: dpsql.Connection, sql: str) -> str:
    try:
        con.sql(sql).fetchall()
    except dpsql.Error as err:
        return type(err).__name__
    return "ok"


def _is_dp(sql: str) -> bool:
    return "DP_" in sql.upper() and "WITH (" in sql.upper()


def _id(entry: dict) -> str:
    return f"{ENTRIES.index(entry):03d}-{entry['why'][:50]}"


def test_corpus_is_large_and_well_formed() -> None:
    assert len(ENTRIES) >= 100
    for entry in ENTRIES:
        assert entry["expect"] in ("ok", "refused"), entry
        assert entry.get("why"), entry
        if entry["expect"] == "refused":
            assert entry["error"] in dpsql.__all__ and entry.get("match"), entry
    sqls = [e["sql"] for e in ENTRIES]
    assert len(sqls) == len(set(sqls)), "duplicate queries"
    assert sum(1 for e in ENTRIES if e.get("total")) >= 25


@pytest.mark.parametrize("entry", ENTRIES, ids=_id)
def test_hostile_query(entry: dict, cons: dict[str, dpsql.Connection]) -> None:
    con, sql = cons["all"], entry["sql"]
    before = con.budget.spent
    if entry["expect"] == "ok":
        result = con.sql(sql)
        assert result.fetchall() is not None
        if _is_dp(sql):
            assert con.budget.spent != before, "a DP answer must be charged"
        else:
            assert con.budget.spent == before, "a public query must not be charged"
    else:
        with pytest.raises(dpsql.Error) as info:
            con.sql(sql)
        message = str(info.value)
        assert type(info.value).__name__ == entry["error"], message
        assert entry["match"] in message
        assert "\n" not in message and message.strip()
        assert con.budget.spent == before, "a refusal must not be charged"
    if entry.get("total"):
        outcomes = {rows: _outcome(c, sql) for rows, c in cons.items()}
        assert len(set(outcomes.values())) == 1, f"the outcome depends on the data: {outcomes}"


def test_the_totality_check_would_catch_a_rewrite_that_can_fail(
    cons: dict[str, dpsql.Connection], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without TRY/TRY_CAST in the rewrite, a failing CAST errs on the full table only."""
    import dpsql.engine.rewrite

    monkeypatch.setattr(dpsql.engine.rewrite, "total", lambda node: node.copy())
    sql = "SELECT DP_COUNT(*) FROM adult WHERE CAST(workclass AS INT) > 0 WITH (epsilon = 1)"
    assert _outcome(cons["all"], sql) == "ExecutionError"
    assert _outcome(cons["none"], sql) == "ok"
