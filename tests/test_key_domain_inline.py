"""A small public key domain is written into the statement as ``VALUES`` (no table is handed
over: registering one cost DuckDB about 0.5 ms a statement); a larger one is handed over as a
table (``dpsql._plan.rewrite.INLINE_KEYS``). Both forms give the same statistics
(tests/test_key_domain_table.py checks the two forms against each other for every key type)."""

from __future__ import annotations

import duckdb
import pytest

import dpsql
from dpsql._plan import rewrite as rewrite_module
from tests.conftest import demo_policy


def _connect(keys: list[int]) -> dpsql.Connection:
    pol = demo_policy(epsilon=1000.0)
    pol["tables"]["t"] = {"columns": {"x": {"lower": 0, "upper": 10}, "k": {"keys": keys}}}

    def setup(raw: duckdb.DuckDBPyConnection) -> None:
        raw.execute("CREATE TABLE t AS SELECT i % 50 AS k, 1.0 AS x FROM range(1000) AS r(i)")
        raw.execute("CREATE TABLE __domain AS SELECT 'not the domain' AS __k0")  # a user's table of that name

    return dpsql.connect(":memory:", pol, setup=setup)


@pytest.mark.parametrize("size", [1, rewrite_module.INLINE_KEYS, rewrite_module.INLINE_KEYS + 1, 500])
def test_a_small_domain_is_written_in_and_a_large_one_handed_over(size: int) -> None:
    con = _connect(list(range(size)))
    try:
        query = "SELECT k, DP_COUNT(*), DP_SUM(x) FROM t GROUP BY k WITH (epsilon = 1)"
        rewritten = con.prepare(query).rewritten
        small = size <= rewrite_module.INLINE_KEYS
        assert (not rewritten.tables) == small
        assert ("VALUES" in rewritten.statement) == small and ("FROM __domain" in rewritten.statement) != small
        rows = con.sql(query).fetchall()
        assert sorted(k for k, *_ in rows) == list(range(size))  # every key of the domain, none else
        assert con.engine.connection.execute("SELECT * FROM __domain").fetchall() == [("not the domain",)]
        explained = con.explain(query)
        assert ("read by DuckDB as a table" in explained) != small
    finally:
        con.close()


def test_both_forms_give_the_same_statistics(monkeypatch: pytest.MonkeyPatch) -> None:
    con = _connect(list(range(40)))
    try:
        query = "SELECT k, DP_COUNT(*), DP_SUM(x) FROM t GROUP BY k WITH (epsilon = 1)"
        handed = con.prepare(query).rewritten
        assert handed.tables
        monkeypatch.setattr(rewrite_module, "INLINE_KEYS", 40)
        written = con.prepare(query + " ").rewritten
        assert not written.tables and written.statement == handed.sql
        assert sorted(con.engine.statistics(written.statement)[1]) == \
            sorted(con.engine.statistics(handed.statement, handed.arrow_tables)[1])
    finally:
        con.close()


NASTY = ["it's", "a\\b", "x'); SELECT * FROM t; --", "line\nbreak", "tab\there", "$$dollar$$", "ünï, code", "",
         "' OR '1'='1", "\\'", "end\\"]


def test_string_keys_written_in_read_back_as_themselves() -> None:
    """Keys written into the statement are literals sqlglot's DuckDB quoting makes of them:
    whatever a key holds, it reads back as itself and nothing else is read."""
    pol = demo_policy(epsilon=1000.0)
    pol["tables"]["t"] = {"columns": {"x": {"lower": 0, "upper": 10}, "s": {"keys": NASTY}}}

    def setup(raw: duckdb.DuckDBPyConnection) -> None:
        raw.execute("CREATE TABLE t AS SELECT UNNEST(?::VARCHAR[]) AS s, 1.0 AS x", [NASTY])

    con = dpsql.connect(":memory:", pol, setup=setup)
    try:
        query = "SELECT s, DP_COUNT(*) FROM t GROUP BY s WITH (epsilon = 1)"
        rewritten = con.prepare(query).rewritten
        assert not rewritten.tables and "VALUES" in rewritten.statement
        names, rows = con.engine.statistics(rewritten.statement)
        assert sorted(r[0] for r in rows) == sorted(NASTY)
        assert all(r[names.index("a0_n")] == 1 for r in rows)  # each key its own row, counted once
    finally:
        con.close()
