"""The compilers (dpsql._compile): the statement is built from its typed plan and printed once;
Spark's compiler reads no SQL text of the statement (only the binder's joins, which these queries
do not have): the mechanisms' subqueries (order statistics, PTR and smooth windows, SAA chunks)
are trees built from templates parsed once."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from dpsql._compile.target import DUCKDB, SPARK
from dpsql._plan.rewrite import rewrite
from dpsql.interfaces.demo import connect_demo

QUERIES = [
    "SELECT DP_SUM(age) FROM adult WITH (epsilon = 1)",
    "SELECT DP_MEAN(hours_per_week, 10, 80) FROM adult WHERE age >= 30 OR sex = 'Male' WITH (epsilon = 1)",
    "SELECT sex, DP_COUNT(*), DP_VAR(age) FROM adult GROUP BY sex WITH (epsilon = 1)",
    "SELECT occupation, DP_COUNT(*) FROM adult GROUP BY occupation WITH (epsilon = 1, delta = 1e-6)",
    "SELECT race, DP_SUM(age / 10, 0, 10) FROM adult GROUP BY race WITH (epsilon = 1, keys = ['Black', 'White'])",
    # the mechanisms' own subqueries
    "SELECT DP_MEDIAN(age) FROM adult WITH (epsilon = 1)",
    "SELECT sex, DP_QUANTILE(fnlwgt, 0.9, 0, 1500000) FROM adult GROUP BY sex WITH (epsilon = 1)",
    "SELECT DP_MEDIAN(age) FROM adult WITH (mechanism = 'ptr', bound = 5, epsilon = 1, delta = 1e-6)",
    "SELECT sex, DP_QUANTILE(fnlwgt, 0.5, 0, 1500000) FROM adult GROUP BY sex "
    "WITH (mechanism = 'smooth', epsilon = 1, delta = 1e-6)",
    "SELECT sex, DP_MEAN(age) FROM adult GROUP BY sex WITH (mechanism = 'saa', epsilon = 1, chunks = 20)",
]


@pytest.fixture(scope="module")
def con():
    c = connect_demo()
    yield c
    c.close()


@pytest.mark.parametrize("query", QUERIES)
def test_spark_is_compiled_from_the_plan_not_from_text(con, query: str, monkeypatch) -> None:
    plan = con.prepare(query).plan
    rewrite(plan, SPARK)  # the templates are parsed on first use, once per process: not per statement
    parse_one, parse = sqlglot.parse_one, sqlglot.parse

    def refuse(real):
        def parsed(sql, *args, **kwargs):
            # sqlglot's Spark generator reads type names (``json``) with its parser: allowed
            assert " " not in str(sql).strip(), f"SQL text was parsed: {sql}"
            return real(sql, *args, **kwargs)

        return parsed

    monkeypatch.setattr(sqlglot, "parse_one", refuse(parse_one))
    monkeypatch.setattr(sqlglot, "parse", refuse(parse))
    out = rewrite(plan, SPARK)
    assert "`" in out.statement and "HASH(" not in out.statement.replace("XXHASH64(", "")


@pytest.mark.parametrize("query", QUERIES)
def test_the_statement_is_printed_once(con, query: str, monkeypatch) -> None:
    """One print of the tree: DuckDB's text of the bound FROM chain was printed once, when it
    was bound (:attr:`dpsql._sql.bind.Bound.from_sql`), and is not printed again."""
    plan = con.prepare(query).plan
    calls = []
    printed = exp.Expression.sql

    def counted(self, *args, **kwargs):
        calls.append(type(self).__name__)
        return printed(self, *args, **kwargs)

    monkeypatch.setattr(exp.Expression, "sql", counted)
    rewrite(plan, DUCKDB)
    assert len(calls) == 1, calls
