"""Errors that say how to fix them: the nearest name for a misspelled one, syntax errors that
point at the token to fix, and a numeric DP aggregate over a text column refused by name.

Every refusal here happens before data is read: nothing is charged."""

from __future__ import annotations

import typing as t

import duckdb
import pytest

import dpsql
from dpsql.errors import BindError, OptionError, ParseError
from dpsql.interfaces.demo import connect_demo
from dpsql.privacy.noise import SeededNoise
from dpsql.sql.dialect import parse


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
