"""LIKE, ILIKE and GLOB as RE2 expressions (dpsql._sql.likes, used before DuckDB 2.0, whose
matchers backtrack): the translation matches what DuckDB's own matcher matches, row by row,
over patterns with every wildcard, escapes, RE2's metacharacters, newlines and non-ASCII text."""

from __future__ import annotations

import duckdb
import pytest
import sqlglot

from dpsql._sql.likes import as_regexp

TEXTS = ["", "a", "ab", "aab", "a.b", "a\nb", "A_B", "100%", "x[y]z", "(a|b)", "é", "Éa", "a*b?c", "\\", "aa\\b",
         "a" * 40 + "b", "ba", "abcabc", "{1}", "$^"]
PATTERNS = ["%a%b", "%a_%b", "a%%", "%.%", "%\n%", "%_%_", "%(a|b)%", "%[y]%", "%\\%", "%$^%", "%é%", "%É%",
            "%a%b%c", "_%_%", "%{1}%"]
GLOBS = ["*a*b", "*a?*", "*[xy]*z*", "*[!a]*b*", "*.*b*", "*\\**", "*(*|*"]
ESCAPED = [("%!%%!%%", "!"), ("%a!_%b%", "!"), ("%#%%#_%", "#")]


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    c = duckdb.connect()
    c.execute("CREATE TABLE t(s VARCHAR)")
    c.executemany("INSERT INTO t VALUES (?)", [[x] for x in [*TEXTS, None]])
    return c


def _same(con: duckdb.DuckDBPyConnection, predicate: str) -> None:
    regexp = as_regexp(sqlglot.parse_one(predicate, read="duckdb"))
    assert regexp is not None, predicate
    got = con.execute(f"SELECT s, ({regexp.sql('duckdb')}) FROM t ORDER BY s").fetchall()
    want = con.execute(f"SELECT s, ({predicate}) FROM t ORDER BY s").fetchall()
    assert got == want, (predicate, regexp.sql("duckdb"))


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("op", ["LIKE", "NOT LIKE", "ILIKE", "NOT ILIKE"])
def test_like_patterns_match_as_duckdb_matches(pattern: str, op: str, con: duckdb.DuckDBPyConnection) -> None:
    _same(con, f"s {op} {_quoted(pattern)}")


@pytest.mark.parametrize("pattern", GLOBS)
def test_glob_patterns_match_as_duckdb_matches(pattern: str, con: duckdb.DuckDBPyConnection) -> None:
    _same(con, f"s GLOB {_quoted(pattern)}")


@pytest.mark.parametrize("pattern, escape", ESCAPED)
def test_escaped_patterns_match_as_duckdb_matches(pattern: str, escape: str, con: duckdb.DuckDBPyConnection) -> None:
    _same(con, f"s LIKE {_quoted(pattern)} ESCAPE {_quoted(escape)}")


def test_one_wildcard_keeps_like_and_escapes_are_read_with_their_like() -> None:
    assert as_regexp(sqlglot.parse_one("s LIKE '%a'", read="duckdb")) is None
    inner = sqlglot.parse_one("s LIKE 'a!%!%' ESCAPE '!'", read="duckdb")
    assert as_regexp(inner) is None  # no unescaped wildcard
    assert as_regexp(inner.this) is None  # the LIKE alone is never read without its ESCAPE
