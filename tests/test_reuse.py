"""Reuse of releases: the same query gets its earlier noisy answer again, for no charge."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import duckdb
import pytest

import dpsql
from dpsql._accounting.budget import Budget, Cost
from dpsql._accounting.ledger import Ledger
from dpsql._privacy.noise import SeededNoise

QUERY = "SELECT sex, DP_COUNT(*) AS n, DP_MEAN(age) AS m FROM people GROUP BY sex WITH (epsilon = 0.5)"


def _files(tmp_path: Path, reuse: str | None = None, bounds: int = 100, plain: bool = False) -> tuple[str, str]:
    db = tmp_path / "people.duckdb"
    if not db.exists():
        con = duckdb.connect(str(db))
        con.execute("CREATE TABLE people AS SELECT (range % 90)::INT AS age, "
                    "CASE WHEN range % 3 = 0 THEN 'a' ELSE 'b' END AS sex FROM range(3000)")
        con.close()
    defaults = ""
    if reuse is not None or plain:
        defaults = "[defaults]\n" + (f'reuse_releases = "{reuse}"\n' if reuse else "") + \
            ("epsilon = 0.5\nplain_aggregates = true\n" if plain else "")
    policy = tmp_path / "policy.toml"
    policy.write_text(f"""
[budget]
epsilon = 1000.0
delta = 1e-5
ledger = "budget.ledger"
{defaults}
[tables.people.columns]
age = {{ lower = 0, upper = {bounds} }}
sex = {{ keys = ["a", "b"] }}
""")
    return str(db), str(policy)


def _open(tmp_path: Path, **kw) -> dpsql.Connection:
    db, policy = _files(tmp_path, **{k: v for k, v in kw.items() if k != "user"})
    return dpsql.connect(db, policy, init_ledger=True, read_only=True, user=kw.get("user"))


def _charges(con: dpsql.Connection) -> int:
    return len(con.budget.history)


def test_a_hundred_identical_queries_charge_once(tmp_path: Path) -> None:
    con = _open(tmp_path)
    first = con.sql(QUERY)
    assert first.cost.epsilon == pytest.approx(0.5)
    rows = first.fetchall()
    for _ in range(99):
        again = con.sql(QUERY)
        assert again.fetchall() == rows  # the release as published, not fresh noise
        assert again.cost.is_zero()
    assert _charges(con) == 1
    assert con.budget.spent.epsilon == pytest.approx(0.5)
    note = again.notes[-1]
    assert note.startswith("reused release of ") and note.endswith(", no charge")
    assert [e.as_dict() for e in again.report] == [e.as_dict() for e in first.report]
    assert again.columns == first.columns and again.sources == first.sources


def test_whitespace_and_case_only_differences_are_the_same_query(tmp_path: Path) -> None:
    con = _open(tmp_path)
    con.sql(QUERY)
    for text in (
        "select   sex, dp_count(*) as n, dp_mean(AGE) as m\nfrom PEOPLE group by sex with (EPSILON = 0.50);",
        "SELECT sex,DP_COUNT(*) AS n,DP_MEAN(age) AS m FROM people GROUP BY sex WITH(epsilon=5e-1)",
    ):
        assert con.sql(text).cost.is_zero()
    assert _charges(con) == 1


@pytest.mark.parametrize("other", [
    QUERY.replace("0.5", "0.6"),  # another epsilon
    QUERY.replace("GROUP BY sex", "WHERE age > 3 GROUP BY sex"),  # another query
    QUERY.replace("AS m", "AS mean"),  # another output name
    QUERY.replace("WITH (", "WITH (confidence = 0.9, "),  # another option
    QUERY.replace("'a'", "'b'").replace("people", "people AS p"),  # an alias: a different text, charged
])
def test_a_different_query_is_charged(tmp_path: Path, other: str) -> None:
    con = _open(tmp_path)
    con.sql(QUERY)
    assert con.sql(other).cost.epsilon > 0
    assert con.sql(other).cost.is_zero()  # and is itself reused afterwards
    assert _charges(con) == 2


def test_another_user_is_charged(tmp_path: Path) -> None:
    alice = _open(tmp_path, user="alice")
    alice.sql(QUERY)
    alice.close()
    bob = _open(tmp_path, user="bob")
    assert bob.sql(QUERY).cost.epsilon > 0
    bob.close()
    nobody = _open(tmp_path)
    assert nobody.sql(QUERY).cost.epsilon > 0
    alice = _open(tmp_path, user="alice")
    assert alice.sql(QUERY).cost.is_zero()
    assert _charges(alice) == 3


def test_another_policy_is_charged(tmp_path: Path) -> None:
    con = _open(tmp_path)
    con.sql(QUERY)
    con.close()
    con = _open(tmp_path, bounds=120)  # other bounds: another release
    assert con.sql(QUERY).cost.epsilon > 0
    con.close()


def test_the_reuse_survives_reopening_the_ledger(tmp_path: Path) -> None:
    con = _open(tmp_path)
    rows = con.sql(QUERY).fetchall()
    con.close()
    con = _open(tmp_path)
    again = con.sql(QUERY)
    assert again.fetchall() == rows and again.cost.is_zero()
    assert _charges(con) == 1


def _age_releases(tmp_path: Path, seconds: float) -> None:
    """Make every charge look ``seconds`` older."""
    conn = sqlite3.connect(tmp_path / "budget.ledger")
    with conn:
        for (i, when) in conn.execute("SELECT id, time FROM ledger_entries").fetchall():
            from datetime import datetime, timedelta

            old = (datetime.fromisoformat(when) - timedelta(seconds=seconds)).isoformat()
            conn.execute("UPDATE ledger_entries SET time = ? WHERE id = ?", (old, i))
    conn.close()


def test_an_expired_release_is_charged_again(tmp_path: Path) -> None:
    con = _open(tmp_path, reuse="1h")
    con.sql(QUERY)
    assert con.sql(QUERY).cost.is_zero()
    con.close()
    _age_releases(tmp_path, 3599 - 60)
    con = _open(tmp_path, reuse="1h")
    assert con.sql(QUERY).cost.is_zero()  # 58 minutes old: still reused
    con.close()
    _age_releases(tmp_path, 120)
    con = _open(tmp_path, reuse="1h")
    assert con.sql(QUERY).cost.epsilon > 0  # over an hour old: charged again
    assert con.sql(QUERY).cost.is_zero()  # the new release is reused
    assert _charges(con) == 2


def test_reuse_off_charges_every_time(tmp_path: Path) -> None:
    con = _open(tmp_path, reuse="off")
    for _ in range(3):
        assert con.sql(QUERY).cost.epsilon > 0
    assert _charges(con) == 3


def test_dashboard_with_plain_sql_charges_once(tmp_path: Path) -> None:
    con = _open(tmp_path, plain=True)
    for _ in range(100):
        con.sql("SELECT sex, COUNT(*) AS n FROM (SELECT * FROM people) AS virtual_table GROUP BY sex LIMIT 10000")
    assert _charges(con) == 1


def test_test_noise_neither_stores_nor_reads_releases() -> None:
    def setup(c) -> None:
        c.execute("CREATE TABLE people AS SELECT (range % 90)::INT AS age, 'a' AS sex FROM range(100)")

    policy = {"budget": {"epsilon": 100.0},
              "tables": {"people": {"columns": {"age": {"lower": 0, "upper": 100}, "sex": {"keys": ["a", "b"]}}}}}
    seeded = dpsql.connect(":memory:", policy, setup=setup, noise=SeededNoise(1))
    for _ in range(3):
        assert seeded.sql(QUERY).cost.epsilon > 0
    assert seeded.ledger.find_release("anything", float("inf")) is None
    real = dpsql.connect(":memory:", policy, setup=setup)
    real.sql(QUERY)
    assert real.sql(QUERY).cost.is_zero()


def test_a_release_needs_its_charge(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path / "l.ledger", Budget(Cost(epsilon=1.0)), create=True)
    assert not ledger.store_release("k", 0, b"x")  # nothing was charged
    assert not ledger.store_release("k", 7, b"x")  # no such charge
    assert ledger.find_release("k", float("inf")) is None
    entry = ledger.charge(Cost(epsilon=0.1), query="q")
    assert ledger.store_release("k", entry, b"x")
    stored = ledger.find_release("k", float("inf"))
    assert stored is not None and stored.entry == entry and stored.payload == b"x"
    assert ledger.find_release("k", 0) is None
    ledger.close()


def test_a_failed_store_only_means_charging_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    con = _open(tmp_path)

    def fail(*args: object) -> bool:
        raise OSError("disk full")

    monkeypatch.setattr(con.ledger, "store_release", fail)
    assert con.sql(QUERY).rowcount == 2  # the answer is still given
    monkeypatch.undo()
    assert con.sql(QUERY).cost.epsilon > 0  # nothing was stored: charged again
    assert con.sql(QUERY).cost.is_zero()
    assert _charges(con) == 2


def test_unreadable_stored_release_is_charged_again(tmp_path: Path) -> None:
    con = _open(tmp_path)
    con.sql(QUERY)
    conn = sqlite3.connect(tmp_path / "budget.ledger")
    with conn:
        conn.execute("UPDATE ledger_releases SET payload = x'00000002'")
    conn.close()
    assert con.sql(QUERY).cost.epsilon > 0
    assert _charges(con) == 2
