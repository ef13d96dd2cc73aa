"""The shell's commands from DuckDB's CLI: ``.types`` (column types under the names), ``.maxrows N``,
``.once FILE`` and ``.open FILE`` (another database, the same policy and budget); in the shell and
in ``-c`` scripts."""

from __future__ import annotations

import typing as t
from pathlib import Path

import duckdb
import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

import dpsql
from dpsql._privacy.noise import SeededNoise
from dpsql.interfaces.cli import main
from dpsql.interfaces.demo import connect_demo
from dpsql.interfaces.repl import run_repl

ROOT = Path(__file__).resolve().parents[1]
CTRL_D = "\x04"
COUNT = "SELECT DP_COUNT(*) AS n FROM adult WITH (epsilon = 0.5);\n"


@pytest.fixture
def con() -> t.Iterator[dpsql.Connection]:
    c = connect_demo(noise=SeededNoise(0))
    yield c
    c.close()


def shell(con: dpsql.Connection, keys: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    """Type ``keys`` into the shell on ``con``, then Ctrl-D; what it printed (out, err)."""
    capsys.readouterr()
    with create_pipe_input() as inp:
        inp.send_text(keys + CTRL_D)
        assert run_repl(con, input=inp, output=DummyOutput(), history_file=tmp_path / "history") == 0
    cap = capsys.readouterr()
    return cap.out, cap.err


def test_types_show_each_columns_type_under_its_name(con, tmp_path, capsys) -> None:
    query = "SELECT sex, DP_COUNT(*) AS n, DP_MEAN(age) AS a FROM adult GROUP BY sex WITH (epsilon = 1);\n"
    out, err = shell(con, query + ".types on\n" + query + ".types\n.types off\n.types\n", tmp_path, capsys)
    assert err == ""
    lines = out.splitlines()
    heads = [i for i, line in enumerate(lines) if line.startswith("│ sex ")]
    assert len(heads) == 2
    assert lines[heads[0] + 1].startswith("├")  # off by default: the documented tables stay as they are
    assert lines[heads[1] + 1] == "│ varchar │ int64 │ double  │"
    assert lines[heads[1] + 2].startswith("├")
    assert "types: on" in out and "types: off" in out
    public = shell(con, ".types on\nSELECT education_num, education FROM education_levels LIMIT 1;\n",
                   tmp_path, capsys)[0]
    assert "│ int32         │ varchar   │" in public


def test_maxrows_limits_the_rows_of_a_table_and_says_so(con, tmp_path, capsys) -> None:
    query = "SELECT education_num, education FROM education_levels ORDER BY 1;\n"
    out, err = shell(con, ".maxrows 3\n" + query + ".maxrows\n.maxrows 0\n.mode csv\n.maxrows 2\n" + query,
                     tmp_path, capsys)
    first, rest = out.split("maxrows: 3", 1)
    assert "│             3 │ 5th-6th   │" in first and "│             4 │" not in first
    assert "(16 rows, the first 3 shown; .maxrows changes how many)" in first
    assert "16,Doctorate" in rest  # CSV is data, not a display: every row
    assert err == ""
    assert shell(con, ".maxrows -1\n.maxrows many\n", tmp_path, capsys)[1].splitlines() == [
        "Error: usage: .maxrows N (a whole number of rows; 0 shows them all)"] * 2


def test_once_sends_only_the_next_result_to_the_file(con, tmp_path, capsys) -> None:
    once = tmp_path / "once.txt"
    out, err = shell(con, f".once {once}\n{COUNT}SELECT education FROM education_levels WHERE education_num = 16;\n",
                     tmp_path, capsys)
    text = once.read_text(encoding="utf-8")
    assert text.startswith("┌───") and "│ n " in text and "-- DP_COUNT(*): laplace" in text
    assert "Doctorate" not in text and "Doctorate" in out and "│ n " not in out
    assert err == ""
    out, _ = shell(con, f".once {once}\nSELECT * FROM adult;\n{COUNT}", tmp_path, capsys)
    assert "│ n " in out  # a refused statement used up the .once too
    assert once.read_text(encoding="utf-8") == ""


def test_once_refuses_the_files_of_the_connection(tmp_path, capsys) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text("[budget]\nepsilon = 1.0\n[tables.t]\n", encoding="utf-8")
    with dpsql.connect(":memory:", str(policy), setup=lambda c: c.execute("CREATE TABLE t AS SELECT 1 AS x")) as c:
        _, err = shell(c, f".once {policy}\n", tmp_path, capsys)
    assert err.startswith(f"Error: cannot write results to {policy}: it is the policy file")


@pytest.fixture
def other(tmp_path: Path) -> Path:
    """A DuckDB file with 1,000 rows of Adult."""
    path = tmp_path / "other.duckdb"
    with duckdb.connect(str(path)) as raw:
        raw.execute(f"CREATE TABLE adult AS SELECT * FROM '{ROOT / 'dpsql' / 'data' / 'adult.parquet'}' LIMIT 1000")
    return path


def test_open_reads_another_database_and_the_budget_goes_on(con, other, tmp_path, capsys) -> None:
    out, err = shell(con, f"{COUNT}.open {other}\n{COUNT}.budget\n", tmp_path, capsys)
    assert err == ""
    assert f"opened {other} (tables: adult); the budget goes on: remaining ε=9.500, δ=1e-05" in out
    counts = [int(line.split("│")[1]) for line in out.splitlines() if line.startswith("│ ") and "│ n " not in line
              and line.count("│") == 2]
    assert abs(counts[0] - 32561) < 100 and abs(counts[1] - 1000) < 100  # the second one read the new file
    assert "spent ε=1.000, δ=0 of ε=10.000" in out and "│ 2 │" in out  # one in-memory budget for both
    assert con.ledger.spent().epsilon == pytest.approx(1.0)


@pytest.mark.parametrize("target,message", [
    ("nosuch.duckdb", "database nosuch.duckdb does not exist; check the path (.open never creates one)"),
    ("visits.parquet", "visits.parquet is a data file; .open opens a DuckDB database"),
    ("", "usage: .open FILE"),
])
def test_open_refuses_what_it_cannot_open(con, tmp_path, capsys, target: str, message: str) -> None:
    out, err = shell(con, f".open {target}\n{COUNT}", tmp_path, capsys)
    assert err.startswith(f"Error: {message}")
    assert abs(int(out.split("│")[-2]) - 32561) < 100  # the shell goes on, on its database


def test_open_keeps_the_old_database_when_the_policy_does_not_fit_the_new_one(con, tmp_path, capsys) -> None:
    small = tmp_path / "small.duckdb"
    with duckdb.connect(str(small)) as raw:
        raw.execute("CREATE TABLE adult AS SELECT 30 AS age")
    out, err = shell(con, f".open {small}\n{COUNT}", tmp_path, capsys)
    assert err.startswith("Error: tables.adult.columns.capital_gain: table adult has no column capital_gain")
    assert abs(int(out.split("│")[-2]) - 32561) < 100


def test_the_commands_work_in_scripts(other, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    code = main(["--demo", "--no-report", "-c", ".types on", "-c", ".once once.txt",
                 "-c", "SELECT education_num FROM education_levels LIMIT 2", "-c", ".maxrows 1",
                 "-c", "SELECT education_num FROM education_levels ORDER BY 1", "-c", f".open {other}",
                 "-c", "SELECT DP_COUNT(*) AS n FROM adult WITH (epsilon = 1)"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "│ int32         │" in (tmp_path / "once.txt").read_text(encoding="utf-8")
    assert "(16 rows, the first 1 shown; .maxrows changes how many)" in out
    assert "│ int64 │" in out and f"opened {other}" in out
