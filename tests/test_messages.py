"""Errors that say how to fix them: the nearest name for a misspelled one, syntax errors that
point at the token to fix, and a numeric DP aggregate over a text column refused by name.

Every refusal here happens before data is read: nothing is charged."""

from __future__ import annotations

import typing as t

import duckdb
import pytest

import dpsql
from dpsql._privacy.noise import SeededNoise
from dpsql._sql.dialect import parse
from dpsql.errors import BindError, OptionError, ParseError
from dpsql.interfaces.demo import connect_demo


@pytest.fixture
def con() -> t.Iterator[dpsql.Connection]:
    c = connect_demo(noise=SeededNoise(0))
    yield c
    c.close()


def refused(con: dpsql.Connection, query: str, kind: type[Exception] = dpsql.Error) -> str:
    before = con.budget.spent
    with pytest.raises(kind) as info:
        con.sql(query)
    assert con.budget.spent == before  # a refusal charges nothing
    message = str(info.value)
    assert "\n" not in message
    return message


# -- did you mean ----------------------------------------------------------------------------


@pytest.mark.parametrize("query,expected", [
    ("SELECT DP_MEDAN(age) FROM adult WITH (epsilon = 1)",
     "unknown DP function DP_MEDAN; did you mean DP_MEDIAN?"),
    ("SELECT sex, dp_averge(age) FROM adult GROUP BY sex WITH (epsilon = 1)",
     "unknown DP function dp_averge; did you mean DP_AVG?"),
    ("SELECT DP_COUNTS(*) FROM adult WITH (epsilon = 1)",
     "unknown DP function DP_COUNTS; did you mean DP_COUNT?"),
])
def test_a_misspelled_dp_function_is_named_with_the_nearest(con, query: str, expected: str) -> None:
    assert refused(con, query, BindError) == expected


def test_a_dp_function_with_no_near_name_lists_them_all(con) -> None:
    message = refused(con, "SELECT DP_HISTOGRAM(age) FROM adult WITH (epsilon = 1)", BindError)
    assert message.startswith("unknown DP function DP_HISTOGRAM; the DP functions are DP_COUNT, DP_SUM")


def test_a_misspelled_dp_function_over_a_public_table_is_named_too(con) -> None:
    message = refused(con, "SELECT DP_MEDAN(education_num) FROM education_levels", BindError)
    assert "did you mean DP_MEDIAN?" in message


@pytest.mark.parametrize("query,expected", [
    ("SELECT DP_MEAN(agee) FROM adult WITH (epsilon = 1)", "column agee does not exist in adult; did you mean age?"),
    ("SELECT DP_MEAN(age) FROM adlt WITH (epsilon = 1)", "table adlt does not exist; did you mean adult?"),
    ("SELECT DP_MEAN(age) FROM adult WITH (epsilom = 1)", "unknown option 'epsilom'; did you mean epsilon?"),
    ("SELECT DP_MEAN(age) FROM adult WITH (epsilon = 1, mechanism = 'gausian')", "did you mean gaussian?"),
    ("SELECT DP_AGG(avg(age), 0, 100) FROM adult WITH (epsilon = 1, aggregator = 'winsorised')",
     "did you mean winsorized?"),
    ("SELECT sexx, DP_COUNT(*) AS n FROM adult GROUP BY sex WITH (epsilon = 1)",
     "column sexx does not exist in adult; did you mean sex?"),
])
def test_names_get_the_nearest_suggestion(con, query: str, expected: str) -> None:
    assert expected in refused(con, query)


def test_no_suggestion_when_nothing_is_near(con) -> None:
    message = refused(con, "SELECT DP_MEAN(zzzzqq) FROM adult WITH (epsilon = 1)", BindError)
    assert message == "column zzzzqq does not exist in adult"


# -- syntax errors ---------------------------------------------------------------------------


def test_a_misspelled_first_keyword_is_pointed_at() -> None:
    with pytest.raises(ParseError) as info:
        parse("SELEC DP_MEAN(age) FROM adult")
    err = info.value
    assert str(err) == "syntax error at line 1, column 1 near 'SELEC': unknown statement SELEC; did you mean SELECT?"
    assert err.pointer() == ["SELEC DP_MEAN(age) FROM adult", "^^^^^"]


@pytest.mark.parametrize("query,word,hint", [
    ("SELECT DP_COUNT(*) FORM adult WITH (epsilon = 1)", "FORM", "did you mean FROM?"),
    ("SELECT DP_COUNT(*) FROM adult GROUPBY sex WITH (epsilon = 1)", "GROUPBY", "did you mean GROUP BY?"),
    ("SELECT DP_MEAN(age FROM adult", "FROM", "expected ')'"),
    ("SELECT DP_MEAN(age) FROM adult WHERE", "WHERE", "WHERE needs a condition"),
])
def test_the_caret_is_under_the_token_to_fix(query: str, word: str, hint: str) -> None:
    with pytest.raises(ParseError) as info:
        parse(query)
    err = info.value
    line, caret = err.pointer()
    assert line == query
    assert caret == " " * query.index(word) + "^" * len(word)
    assert str(err).endswith(f"near '{word}': {hint}")
    assert err.column == query.index(word) + 1


def test_positions_are_those_of_the_statement_as_given() -> None:
    query = "  EXPLAIN SELECT sex,\n    DP_COUNT(*) FROM adult\n  WHERE age > GROUP BY sex;"
    with pytest.raises(ParseError) as info:
        parse(query)
    err = info.value
    assert (err.line, err.column) == (3, 15)
    assert err.pointer() == ["  WHERE age > GROUP BY sex;", " " * 14 + "^" * len("GROUP BY")]


def test_a_long_line_is_cut_around_the_token() -> None:
    query = "SELECT " + ", ".join(f"DP_COUNT(*) AS n{i}" for i in range(40)) + " FORM adult"
    with pytest.raises(ParseError) as info:
        parse(query)
    line, caret = info.value.pointer(width=80)
    assert len(line) <= 80 and line.startswith("…")
    assert line[caret.index("^"):].startswith("FORM")


def test_the_cli_draws_the_caret_under_the_error(capsys) -> None:
    from dpsql.interfaces.cli import main

    assert main(["--demo", "-c", "SELEC DP_MEAN(age) FROM adult"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "Error: syntax error at line 1, column 1 near 'SELEC': unknown statement SELEC; did you mean SELECT?",
        "  SELEC DP_MEAN(age) FROM adult",
        "  ^^^^^",
    ]


# -- argument types --------------------------------------------------------------------------


def test_a_numeric_dp_aggregate_over_text_is_refused_at_bind_time(con) -> None:
    message = refused(con, "SELECT DP_MEAN(education, 0, 10) FROM adult WITH (epsilon = 1)", BindError)
    assert message.startswith("education is VARCHAR; DP_MEAN needs a number")
    with pytest.raises(BindError):
        con.explain("SELECT DP_MEDIAN(education, 0, 10) FROM adult WITH (epsilon = 1)")


@pytest.mark.parametrize("query,expected", [
    ("SELECT DP_SUM(occupation) FROM adult WITH (epsilon = 1)", "occupation is VARCHAR; DP_SUM needs a number"),
    ("SELECT DP_MEAN(occupation) AS m FROM adult GROUP BY sex WITH (epsilon = 1)",
     "occupation is VARCHAR; DP_MEAN needs a number"),
    ("WITH x AS (SELECT occupation AS o FROM adult) SELECT DP_SUM(o) FROM x WITH (epsilon = 1)",
     "DP_SUM(o): occupation is VARCHAR; DP_SUM needs a number"),
])
def test_a_text_column_without_bounds_is_named_as_text_not_asked_for_bounds(con, query: str, expected: str) -> None:
    assert refused(con, query, BindError).startswith(expected)
    # a number without bounds is still asked for them
    assert "no bounds for the expression" in refused(con, "SELECT DP_SUM(sqrt(age)) FROM adult WITH (epsilon = 1)")


def test_through_a_cte_the_message_names_the_aggregate(con) -> None:
    message = refused(con, "WITH x AS (SELECT education AS e FROM adult) "
                           "SELECT DP_SUM(e, 0, 1) FROM x WITH (epsilon = 1)", BindError)
    assert message.startswith("DP_SUM(e, 0, 1): education is VARCHAR; DP_SUM needs a number")


def test_counts_casts_and_numbers_are_accepted(con) -> None:
    con.sql("SELECT DP_COUNT(education) FROM adult WITH (epsilon = 1)")
    con.sql("SELECT DP_MEAN(TRY_CAST(education AS DOUBLE), 0, 10) FROM adult WITH (epsilon = 1)")
    con.sql("SELECT DP_MEAN(age) FROM adult WITH (epsilon = 1)")


def test_booleans_and_decimals_count_as_numbers_dates_do_not() -> None:
    raw = duckdb.connect()
    raw.execute("CREATE TABLE t AS SELECT range % 2 = 0 AS b, (range % 7)::DECIMAL(6, 2) AS d, "
                "DATE '2020-01-01' + range::INTEGER AS day FROM range(100)")
    policy = {"budget": {"epsilon": 100}, "tables": {"t": {"privacy_unit": "row", "max_rows_per_unit": 1}}}
    with dpsql.connect(raw, policy, noise=SeededNoise(1)) as con:
        con.sql("SELECT DP_MEAN(b, 0, 1), DP_SUM(d, 0, 10) FROM t WITH (epsilon = 1)")
        with pytest.raises(BindError, match="day is DATE; DP_MAX needs a number"):
            con.sql("SELECT DP_MAX(day, 0, 1) FROM t WITH (epsilon = 1)")


def test_option_errors_stay_option_errors(con) -> None:
    with pytest.raises(OptionError):
        con.sql("SELECT DP_MEAN(age) FROM adult WITH (epsilon = 1, mechanism = 'lapalce')")


def test_the_shell_draws_the_caret_too(con, capsys) -> None:
    from dpsql.interfaces.repl.executor import run_input
    from dpsql.interfaces.repl.state import ReplState

    run_input(ReplState(con), "SELECT DP_COUNT(*)\n  FORM adult WITH (epsilon = 1);")
    assert capsys.readouterr().err.splitlines() == [
        "Error: syntax error at line 2, column 3 near 'FORM': did you mean FROM?",
        "    FORM adult WITH (epsilon = 1)",
        "    ^^^^",
    ]
