"""Rewrite fixtures (sqlglot's style): each DP query in fixtures/rewrite/queries.txt is followed,
in fixtures/rewrite/expected.sql, by the single DuckDB statement dpsql must generate for it.

Regenerate after an intended change with:  python tests/test_rewrite_fixtures.py  (then review the diff)
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
QUERIES = ROOT / "fixtures" / "rewrite" / "queries.txt"
EXPECTED = ROOT / "fixtures" / "rewrite" / "expected.sql"


def load_queries() -> list[tuple[str, str]]:
    out, title = [], ""
    for line in QUERIES.read_text(encoding="utf-8").splitlines():
        if line.startswith("# title:"):
            title = line.split(":", 1)[1].strip()
        elif line.strip() and not line.startswith("#"):
            out.append((title, line.strip()))
    return out


def load_expected() -> dict[str, str]:
    """``expected.sql``: blocks of '-- <title>', the DP query as a comment, then the SQL."""
    blocks: dict[str, str] = {}
    title, lines = None, []
    for line in EXPECTED.read_text(encoding="utf-8").splitlines() + ["-- title: <end>"]:
        if line.startswith("-- title:"):
            if title is not None:
                blocks[title] = "\n".join(lines).strip().rstrip(";")
            title, lines = line.split(":", 1)[1].strip(), []
        elif not line.startswith("--"):
            lines.append(line)
    return blocks


def generate(con) -> str:
    parts = []
    for title, query in load_queries():
        prepared = con.prepare(query)
        rewritten = prepared.rewritten
        parts.append(f"-- title: {title}\n-- {query}\n{rewritten.sql};\n")
    return "\n".join(parts)


@pytest.fixture(scope="module")
def con():
    from dpsql.interfaces.demo import connect_demo

    c = connect_demo()
    yield c
    c.close()


@pytest.mark.parametrize("title,query", load_queries())
def test_rewrite_matches_fixture(con, title: str, query: str) -> None:
    expected = load_expected()
    assert title in expected, f"no expected SQL for '{title}'; regenerate the fixtures"
    prepared = con.prepare(query)
    rewritten = prepared.rewritten
    assert rewritten.sql == expected[title]


def test_fixture_sql_runs_in_duckdb(con) -> None:
    """Every expected statement is valid DuckDB SQL over the demo tables (bound, not run)."""
    import duckdb

    from dpsql.interfaces.demo import load_adult

    raw = duckdb.connect()
    load_adult(raw)
    for sql in load_expected().values():
        raw.execute("EXPLAIN " + sql)


if __name__ == "__main__":
    from dpsql.interfaces.demo import connect_demo

    EXPECTED.write_text(generate(connect_demo()), encoding="utf-8")
    sys.stdout.write(f"wrote {EXPECTED}\n")
