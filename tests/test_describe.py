"""DESCRIBE, SHOW and information_schema over declared tables, answered from the policy and the
catalog; the shell's .schema with types; mechanism values completed as SQL strings."""

from __future__ import annotations

import typing as t

import duckdb
import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document

import dpsql
from dpsql._privacy.noise import SeededNoise
from dpsql.interfaces.demo import connect_demo
from dpsql.interfaces.repl.completer import DPSQLCompleter
from dpsql.interfaces.repl.special import dispatch
from dpsql.interfaces.repl.state import ReplState


@pytest.fixture
def con() -> t.Iterator[dpsql.Connection]:
    c = connect_demo(noise=SeededNoise(0))
    # Nothing here may reach the engine's own paths for data: make them fail loudly.
    def fail(*args: t.Any) -> t.NoReturn:
        raise AssertionError("the engine was asked to run something")

    c.engine.statistics = fail  # type: ignore[method-assign]
    c.engine.public = fail  # type: ignore[method-assign]
    c.engine.describe = fail  # type: ignore[method-assign]
    yield c
    c.close()


@pytest.mark.parametrize("statement", ["DESCRIBE adult", "describe adult;", "DESC adult", "SHOW adult",
                                       "SHOW COLUMNS FROM adult", "show columns in \"adult\"", "DESCRIBE main.adult",
                                       "DESCRIBE TABLE adult"])
def test_describe_gives_names_types_bounds_and_keys(con, statement: str) -> None:
    res = con.sql(statement)
    assert res.columns == ["column_name", "column_type", "bounds", "keys"]
    rows = {r[0]: r[1:] for r in res.fetchall()}
    assert rows["age"] == ("BIGINT", "[0, 100]", None)
    assert rows["sex"] == ("VARCHAR", None, "Female, Male")
    assert rows["education"] == ("VARCHAR", None, None)
    assert len(rows) == 15 and res.report == [] and con.budget.spent.epsilon == 0


def test_show_tables_lists_the_declared_tables(con) -> None:
    assert con.sql("SHOW TABLES").fetchall() == [("adult", "private"), ("education_levels", "public")]
    rows = con.sql("SHOW ALL TABLES").fetchall()
    assert [(r[0], r[1], r[2]) for r in rows] == [("memory", "main", "adult"), ("memory", "main", "education_levels")]
    assert rows[1][3:] == (["education_num", "education"], ["INTEGER", "VARCHAR"], False)


def test_information_schema_answers_for_declared_tables_only() -> None:
    raw = duckdb.connect()
    raw.execute("CREATE TABLE visits (age INTEGER, ward VARCHAR); CREATE TABLE secret (x INTEGER)")
    policy = {"budget": {"epsilon": 1}, "tables": {"visits": {"privacy_unit": "row"}}}
    with dpsql.connect(raw, policy) as con:
        rows = con.sql("SELECT table_name, column_name, data_type FROM information_schema.columns "
                       "ORDER BY ordinal_position").fetchall()
        assert rows == [("visits", "age", "INTEGER"), ("visits", "ward", "VARCHAR")]
        assert con.sql("SELECT table_name FROM information_schema.tables").fetchall() == [("visits",)]
        assert con.sql("SELECT count(*) FROM information_schema.schemata").fetchall() == [(1,)]
        with pytest.raises(dpsql.PrivacyError, match="not declared"):
            con.sql("DESCRIBE secret")


def test_information_schema_queries_take_ctes_aliases_and_filters(con) -> None:
    rows = con.sql("WITH c AS (SELECT * FROM information_schema.columns AS cols WHERE cols.data_type = 'VARCHAR') "
                   "SELECT table_name, count(*) AS n FROM c GROUP BY ALL ORDER BY 1").fetchall()
    assert rows == [("adult", 9), ("education_levels", 1)]


@pytest.mark.parametrize("statement,message", [
    ("SELECT * FROM information_schema.columns JOIN adult USING (age)",
     "an information_schema query cannot also read adult; it reads information_schema.tables, columns and schemata only"),
    ("SELECT * FROM information_schema.key_column_usage", "information_schema.key_column_usage is not available"),
    ("SELECT * FROM information_schema.tables WITH (epsilon = 1)", "takes no WITH (...) privacy options"),
    ("SELECT read_csv('x.csv') FROM information_schema.tables", "function read_csv() is not allowed"),
    ("SELECT * FROM other.information_schema.tables", "information_schema.tables is not available"),
    ("DESCRIBE adlt", "table adlt does not exist; did you mean adult?"),
])
def test_refused_catalog_queries(con, statement: str, message: str) -> None:
    with pytest.raises(dpsql.Error) as info:
        con.sql(statement)
    assert message in str(info.value)
    assert con.budget.spent.epsilon == 0


def test_describe_of_a_query_is_still_refused(con) -> None:
    with pytest.raises(dpsql.PrivacyError, match="DESCRIBE statements are not allowed"):
        con.sql("DESCRIBE SELECT age FROM adult")


def test_the_shells_schema_shows_types(con, capsys) -> None:
    dispatch(ReplState(con), ".schema adult")
    out = capsys.readouterr().out
    assert "│ column         │ type    │ bounds       │ keys" in out
    assert "│ age            │ BIGINT  │ [0, 100]     │" in out


def _offered(con: dpsql.Connection, text: str, cursor: int | None = None) -> list[tuple[str, str]]:
    doc = Document(text, len(text) if cursor is None else cursor)
    found = DPSQLCompleter(con).get_completions(doc, CompleteEvent(completion_requested=True))
    return [(c.text, c.display_text) for c in found]


def test_mechanism_values_are_completed_as_strings(con) -> None:
    assert ("'gaussian'", "'gaussian'") in _offered(con, "SELECT DP_SUM(age) FROM adult WITH (mechanism = ")
    assert _offered(con, "SELECT DP_SUM(age) FROM adult WITH (mechanism = gau") == [("'gaussian'", "'gaussian'")]
    # a quote already typed is kept, and so is a closing one after the cursor
    assert _offered(con, "SELECT DP_SUM(age) FROM adult WITH (mechanism = 'gau") == [("gaussian'", "'gaussian'")]
    text = "SELECT DP_SUM(age) FROM adult WITH (mechanism = 'gau')"
    assert _offered(con, text, cursor=text.index("')")) == [("gaussian", "'gaussian'")]
    assert _offered(con, "SELECT DP_AGG(avg(age), 0, 1) FROM adult WITH (aggregator = w") == \
        [("'winsorized'", "'winsorized'")]


def test_a_completed_value_parses(con) -> None:
    text = "SELECT DP_SUM(age) FROM adult WITH (epsilon = 1, delta = 1e-6, mechanism = gau"
    completion = _offered(con, text)[0][0]
    full = text[: -len("gau")] + completion + ")"
    assert con.explain(full).splitlines()[0] == "DP query"
