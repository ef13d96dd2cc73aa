"""dpsql.dbapi: the DB-API 2.0 (PEP 249) driver over dpsql.connect()."""

from __future__ import annotations

import datetime as dt
import decimal
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpsql
from dpsql import dbapi
from dpsql._privacy.noise import SeededNoise
from dpsql.interfaces.demo import load_adult
from tests.conftest import demo_policy

GROUPED = "SELECT sex, DP_COUNT(*) AS n, DP_MEAN(age) AS a FROM adult WHERE age > ? GROUP BY sex WITH (epsilon = ?)"


@pytest.fixture
def con():
    c = dbapi.connect(":memory:", demo_policy(epsilon=100.0, delta=1e-5), setup=load_adult, noise=SeededNoise(1))
    yield c
    c.close()


def spent(c: dbapi.Connection) -> float:
    return c.dpsql.budget.spent.epsilon


def test_module_globals() -> None:
    assert dbapi.apilevel == "2.0"
    assert dbapi.threadsafety in (0, 1, 2, 3)
    assert dbapi.paramstyle == "qmark"
    assert dpsql.dbapi is dbapi


def test_exception_hierarchy() -> None:
    assert issubclass(dbapi.Warning, Exception)
    assert issubclass(dbapi.Error, Exception)
    for name in ("InterfaceError", "DatabaseError"):
        assert issubclass(getattr(dbapi, name), dbapi.Error)
    for name in ("DataError", "OperationalError", "IntegrityError", "InternalError", "ProgrammingError",
                 "NotSupportedError"):
        assert issubclass(getattr(dbapi, name), dbapi.DatabaseError)
    assert issubclass(dbapi.PrivacyError, dbapi.ProgrammingError)
    assert issubclass(dbapi.PrivacyError, dpsql.PrivacyError)
    assert issubclass(dbapi.BudgetError, dpsql.BudgetError) and issubclass(dbapi.BudgetError, dbapi.ProgrammingError)
    assert issubclass(dbapi.LedgerError, dpsql.LedgerError) and issubclass(dbapi.LedgerError, dbapi.OperationalError)
    for cls in (dbapi.Connection.Error, dbapi.Connection.ProgrammingError):
        assert issubclass(cls, dbapi.Error)


def test_type_objects_and_constructors() -> None:
    assert dbapi.NUMBER == "BIGINT" and dbapi.NUMBER == "DOUBLE" and dbapi.NUMBER != "VARCHAR"
    assert dbapi.STRING == "VARCHAR" and dbapi.BINARY == "BLOB" and dbapi.DATETIME == "DATE"
    assert dbapi.ROWID != "BIGINT"
    assert dbapi.Date(2020, 1, 2) == dt.date(2020, 1, 2)
    assert dbapi.Timestamp(2020, 1, 2, 3, 4, 5).hour == 3
    assert dbapi.Time(1, 2, 3).second == 3
    assert dbapi.Binary(b"\x00") == b"\x00"
    assert isinstance(dbapi.DateFromTicks(0), dt.date)
    assert isinstance(dbapi.TimeFromTicks(0), dt.time)
    assert isinstance(dbapi.TimestampFromTicks(0), dt.datetime)


def test_execute_with_parameters_and_description(con) -> None:
    cur = con.cursor()
    assert cur.description is None and cur.rowcount == -1
    assert cur.execute(GROUPED, [30, 1.0]) is cur
    names = [d[0] for d in cur.description]
    assert names == ["sex", "n", "a"]
    assert all(len(d) == 7 for d in cur.description)
    assert cur.description[0][1] == dbapi.STRING
    assert cur.description[1][1] == dbapi.NUMBER and cur.description[2][1] == dbapi.NUMBER
    assert cur.rowcount == 2
    rows = cur.fetchall()
    assert [r[0] for r in rows] == ["Female", "Male"]
    assert spent(con) == pytest.approx(1.0)
    assert any("laplace" in line for _, line in cur.messages)


def test_fetch_methods_arraysize_and_iteration(con) -> None:
    cur = con.cursor()
    cur.execute("SELECT education_num, education FROM education_levels ORDER BY education_num")
    assert cur.rowcount == 16
    assert cur.fetchone() == (1, "Preschool")
    assert cur.arraysize == 1 and len(cur.fetchmany()) == 1
    cur.arraysize = 3
    assert [r[0] for r in cur.fetchmany()] == [3, 4, 5]
    assert [r[0] for r in cur.fetchmany(2)] == [6, 7]
    assert [r[0] for r in cur] == list(range(8, 17))
    assert cur.fetchone() is None and cur.fetchall() == [] and cur.fetchmany(5) == []


def test_refusals_are_programming_errors_and_privacy_errors_and_charge_nothing(con) -> None:
    cur = con.cursor()
    before = spent(con)
    with pytest.raises(dbapi.ProgrammingError) as info:
        cur.execute("SELECT * FROM adult WHERE age > ?", [30])
    assert isinstance(info.value, dpsql.PrivacyError) and isinstance(info.value, dbapi.PrivacyError)
    assert "private" in str(info.value)
    assert spent(con) == before
    with pytest.raises(dbapi.ProgrammingError) as info:
        cur.execute("SELECT DP_COUNT(*) FROM nosuch WITH (epsilon = 1)")
    assert isinstance(info.value, dpsql.BindError)
    with pytest.raises(dbapi.ProgrammingError) as info:
        cur.execute("SELECT DP_COUNT(*) FROM adult WITH (epsilon = ?)", [-1])
    assert isinstance(info.value, dpsql.OptionError)
    assert spent(con) == before


def test_parse_errors_keep_their_position(con) -> None:
    with pytest.raises(dbapi.ProgrammingError) as info:
        con.cursor().execute("SELECT DP_COUNT(*)\nFORM adult")
    assert isinstance(info.value, dpsql.ParseError)
    assert info.value.line == 2 and info.value.pointer()


def test_budget_refusal_is_both_budget_error_and_programming_error() -> None:
    c = dbapi.connect(":memory:", demo_policy(epsilon=1.0, delta=1e-5), setup=load_adult, noise=SeededNoise(0))
    cur = c.cursor()
    with pytest.raises(dbapi.ProgrammingError) as info:
        cur.execute("SELECT DP_COUNT(*) FROM adult WHERE age > 30 WITH (epsilon = 2)")
    assert isinstance(info.value, dpsql.BudgetError)
    assert spent(c) == 0
    c.close()


def test_missing_ledger_is_an_operational_error(tmp_path) -> None:
    pol = demo_policy(epsilon=1.0, delta=1e-5)
    pol["budget"]["ledger"] = str(tmp_path / "budget.ledger")
    with pytest.raises(dbapi.OperationalError) as info:
        dbapi.connect(":memory:", pol, setup=load_adult)
    assert isinstance(info.value, dpsql.LedgerError)
    with pytest.raises(dbapi.OperationalError) as info:
        dbapi.connect(":memory:", None)
    assert isinstance(info.value, dpsql.PolicyError)


@pytest.fixture(scope="module")
def public():
    """A connection with no declared table: statements without a table run as plain DuckDB."""
    c = dbapi.connect(":memory:", {"budget": {"epsilon": 1.0}, "tables": {}})
    yield c
    c.close()


@settings(max_examples=60, deadline=None)
@given(value=st.text())
def test_any_string_parameter_comes_back_unchanged(public, value: str) -> None:
    cur = public.cursor()
    cur.execute("SELECT ? AS v, '?' AS q -- ?", [value.replace("\x00", "")])
    assert cur.fetchall() == [(value.replace("\x00", ""), "?")]


@pytest.mark.parametrize("value", [
    None, True, False, 0, -7, 2**62, 1.5, -2.25, 1e-300, float("inf"), float("-inf"),
    decimal.Decimal("-12.50"), b"\x00'\xff", dt.date(2020, 2, 29), dt.datetime(2020, 1, 2, 3, 4, 5, 6),
    dt.time(23, 59, 1), "it's", "",
])
def test_values_of_each_type_round_trip(public, value) -> None:
    cur = public.cursor()
    cur.execute("SELECT ? AS v", (value,))
    assert cur.fetchall() == [(value,)]
    cur.execute("SELECT ? AS v", [float("nan")])
    assert math.isnan(cur.fetchone()[0])


def test_named_and_numbered_parameters(public) -> None:
    cur = public.cursor()
    cur.execute("SELECT $b AS b, $a AS a, $a + 1 AS c", {"a": 1, "b": "x"})
    assert cur.fetchall() == [("x", 1, 2)]
    cur.execute("SELECT $2 AS b, $1 AS a", ["a", "b"])
    assert cur.fetchall() == [("b", "a")]


@pytest.mark.parametrize("sql, params, words", [
    ("SELECT DP_COUNT(*) FROM ? WITH (epsilon = 1)", ["adult"], "name"),
    ("SELECT DP_COUNT(*) AS ? FROM adult WITH (epsilon = 1)", ["n"], "name"),
    ("SELECT DP_MEAN(a.?) FROM adult a WITH (epsilon = 1)", ["age"], "name"),
    ("SELECT DP_COUNT(*) FROM adult AS ? WITH (epsilon = 1)", ["a"], "name"),
    ("SELECT sex, DP_COUNT(*) FROM adult GROUP BY ? WITH (epsilon = 1)", [1], "GROUP BY"),
    ("SELECT sex, DP_COUNT(*) FROM adult GROUP BY sex ORDER BY ? WITH (epsilon = 1)", [1], "ORDER BY"),
    ("SELECT DP_COUNT(*) FROM adult WHERE age > ? WITH (epsilon = 1)", [1, 2], "2 parameters"),
    ("SELECT DP_COUNT(*) FROM adult WHERE age > ? AND age < ? WITH (epsilon = 1)", [1], "1 parameters"),
    ("SELECT DP_COUNT(*) FROM adult WHERE age > ? WITH (epsilon = 1)", {"x": 1}, "sequence"),
    ("SELECT DP_COUNT(*) FROM adult WHERE age > $x WITH (epsilon = 1)", [1], "mapping"),
    ("SELECT DP_COUNT(*) FROM adult WHERE age > $x WITH (epsilon = 1)", {"y": 1}, "no parameter"),
    ("SELECT DP_COUNT(*) FROM adult WHERE age > $1 AND age < ? WITH (epsilon = 1)", [1], "one style"),
    ("SELECT DP_COUNT(*) FROM adult WHERE age > ? WITH (epsilon = 1)", [], "0 parameters"),
    ("SELECT DP_COUNT(*) FROM adult WHERE age > $1 WITH (epsilon = 1)", (), "no parameter"),
])
def test_parameters_that_do_not_fit_are_refused_and_charge_nothing(con, sql, params, words) -> None:
    with pytest.raises(dbapi.ProgrammingError, match=words):
        con.cursor().execute(sql, params)
    assert spent(con) == 0


def test_unsupported_parameter_types_are_data_errors(con) -> None:
    with pytest.raises(dbapi.DataError, match="type object"):
        con.cursor().execute("SELECT DP_COUNT(*) FROM adult WHERE age > ? WITH (epsilon = 1)", [object()])
    with pytest.raises(dbapi.DataError, match="finite"):
        con.cursor().execute("SELECT DP_COUNT(*) FROM adult WHERE age > ? WITH (epsilon = 1)",
                             [decimal.Decimal("NaN")])
    assert spent(con) == 0


def test_a_string_parameter_cannot_become_sql(con) -> None:
    cur = con.cursor()
    cur.execute("SELECT DP_COUNT(*) AS n FROM adult WHERE sex = ? WITH (epsilon = 1)", ["x' OR '1'='1"])
    assert cur.fetchone()[0] < 50  # no row has that sex: the noisy count of nothing


def test_explain_with_parameters_spends_nothing(con) -> None:
    cur = con.cursor()
    cur.execute("EXPLAIN SELECT DP_MEAN(age) FROM adult WHERE sex = ? WITH (epsilon = ?)", ["Male", 0.5])
    text = "\n".join(r[0] for r in cur.fetchall())
    assert "'Male'" in text and spent(con) == 0


def test_executemany_runs_each_set_and_charges_each(con) -> None:
    cur = con.cursor()
    cur.executemany("SELECT DP_COUNT(*) FROM adult WHERE age > ? WITH (epsilon = 0.5)", [[20], [30], [40]])
    assert spent(con) == pytest.approx(1.5)
    assert cur.rowcount == -1 and cur.description is None
    with pytest.raises(dbapi.ProgrammingError, match="no result set"):
        cur.fetchall()


def test_commit_and_rollback_never_restore_budget(con) -> None:
    cur = con.cursor()
    cur.execute("SELECT DP_COUNT(*) FROM adult WHERE age > 30 WITH (epsilon = 1)")
    con.rollback()
    con.commit()
    assert spent(con) == pytest.approx(1.0)


def test_closed_cursor_and_connection(con) -> None:
    cur = con.cursor()
    cur.close()
    with pytest.raises(dbapi.InterfaceError):
        cur.execute("SELECT 1")
    cur2 = con.cursor()
    cur2.setinputsizes([None])
    cur2.setoutputsize(10)
    with pytest.raises(dbapi.NotSupportedError):
        cur2.callproc("f")
    con.close()
    con.close()
    with pytest.raises(dbapi.InterfaceError):
        cur2.execute("SELECT 1")
    with pytest.raises(dbapi.InterfaceError):
        con.commit()


def test_catalog_statements_pass_through(con) -> None:
    cur = con.cursor()
    cur.execute("SHOW TABLES", ())  # SQLAlchemy passes an empty sequence with every statement
    assert sorted(r[0] for r in cur.fetchall()) == ["adult", "education_levels"]
    cur.execute("SELECT column_name FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position",
                ["adult"])
    assert cur.fetchone() == ("age",)


def test_the_error_table_of_docs_bi_matches_the_mapping() -> None:
    import re
    from pathlib import Path

    from dpsql import errors

    text = (Path(__file__).resolve().parent.parent / "docs" / "bi.md").read_text(encoding="utf-8")
    section = text.split("| dpsql error | DB-API class | also a |", 1)[1].split("\n\n", 1)[0]
    checked = set()
    for row in section.splitlines()[2:]:
        first, second = row.split("|")[1:3]
        cls = getattr(dbapi, re.search(r"`(\w+)`", second).group(1))
        for name in re.findall(r"`(\w+)`", first):
            mapped = dbapi.as_dbapi_error(getattr(errors, name)("message"))
            assert isinstance(mapped, cls) and isinstance(mapped, getattr(errors, name)), name
            checked.add(name)
    assert {"ParseError", "OptionError", "BindError", "PrivacyError", "BudgetError", "LedgerError", "PolicyError",
            "ExecutionError"} <= checked
