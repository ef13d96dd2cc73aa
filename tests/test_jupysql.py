"""jupysql's ``%sql`` through IPython's InteractiveShell, on the ``dpsql`` SQLAlchemy dialect."""

from __future__ import annotations

import os
import typing as t

os.environ.setdefault("PLOOMBER_STATS_ENABLED", "false")  # jupysql sends no usage statistics

import pytest
import sql  # noqa: F401  (jupysql: a missing install fails the run here)
from IPython.core.interactiveshell import InteractiveShell
from sqlalchemy.dialects import registry

registry.register("dpsql", "dpsql.interfaces.sqla", "DpsqlDialect")  # see tests/test_sqla.py

URL = "dpsql:///:memory:?demo=1"


@pytest.fixture
def shell() -> t.Iterator[InteractiveShell]:
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "sql")
    ip.run_line_magic("config", "SqlMagic.displaylimit = 0")
    ip.run_line_magic("sql", URL + " --alias dp")
    yield ip
    ip.run_line_magic("sql", "--close dp")


def run(ip: InteractiveShell, cell: str) -> t.Any:
    result = ip.run_cell(cell)
    if not result.success:
        raise result.error_in_exec or result.error_before_exec
    return result.result


def test_sql_magic_runs_a_dp_query(shell) -> None:
    result = run(shell, "%sql SELECT sex, DP_COUNT(*) AS n FROM adult GROUP BY sex WITH (epsilon = 1)")
    frame = result.DataFrame()
    assert list(frame.columns) == ["sex", "n"]
    assert list(frame["sex"]) == ["Female", "Male"] and frame["n"].between(9000, 23000).all()


def test_sql_magic_binds_python_variables_as_parameters(shell) -> None:
    shell.user_ns["who"] = "Female' OR '1'='1"
    shell.run_line_magic("config", 'SqlMagic.named_parameters = "enabled"')
    result = run(shell, "%sql SELECT DP_COUNT(*) AS n FROM adult WHERE sex = :who WITH (epsilon = 1)")
    assert result.DataFrame()["n"][0] < 50  # one value, not SQL: no row has that sex


def test_sql_magic_shows_a_refusal(shell) -> None:
    with pytest.raises(Exception, match="private"):
        run(shell, "%sql SELECT age FROM adult")


def test_sqlcmd_tables_lists_the_declared_tables(shell) -> None:
    text = str(run(shell, "%sqlcmd tables"))
    assert "adult" in text and "education_levels" in text


def test_describe_gives_the_columns(shell) -> None:
    frame = run(shell, "%sql DESCRIBE adult").DataFrame()
    assert "age" in list(frame.iloc[:, 0]) and "income" in list(frame.iloc[:, 0])


def test_zero_row_probe_is_answered_from_the_schema(shell) -> None:
    """jupysql asks ``SELECT * FROM t WHERE 1=0`` to see whether a table exists and which columns
    it has: dpsql answers such a probe with the names and types and no rows, reading nothing and
    charging nothing (README, "SQL as BI tools write it")."""
    frame = run(shell, "%sql SELECT * FROM adult WHERE 1=0").DataFrame()
    assert len(frame) == 0 and "age" in frame.columns
    text = str(run(shell, "%sqlcmd columns --table adult"))
    assert "age" in text and "income" in text
