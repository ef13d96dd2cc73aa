"""The command on files and databases, the budget at a glance, and scripts: data files open as
the policy's one table, a missing database is not created, ``--budget`` and dot commands work
without the shell, ``--init-ledger`` says what it did, and script errors say where they are."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from dpsql.interfaces.cli import main

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
COUNT = "SELECT DP_COUNT(*) AS n FROM visits WITH (epsilon = 1)"
BUDGET_LINE = "-- budget: spent ε=1.000, δ=0 of ε=10.000, δ=1e-05; remaining ε=9.000, δ=1e-05"


def dpsql(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dpsql", *args], cwd=cwd, input=stdin, capture_output=True,
                          text=True, env=ENV, timeout=120)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """visits as Parquet (two parts), CSV and JSON, and policies with one and two tables."""
    monkeypatch.chdir(tmp_path)
    con = duckdb.connect()
    data = "SELECT range AS id, 20 + range % 60 AS age, ['a', 'b'][1 + range % 2] AS ward FROM range({})"
    (tmp_path / "parts").mkdir()
    con.execute(f"COPY ({data.format(600)} WHERE id < 300) TO 'parts/p1.parquet'")
    con.execute(f"COPY ({data.format(600)} WHERE id >= 300) TO 'parts/p2.parquet'")
    con.execute(f"COPY ({data.format(600)}) TO 'visits.parquet'")
    con.execute(f"COPY ({data.format(600)}) TO 'visits.csv'")
    con.execute(f"COPY ({data.format(600)}) TO 'visits.json'")
    one = ("[budget]\nepsilon = 10.0\ndelta = 1e-5\n{ledger}[tables.visits]\nprivacy_unit = \"row\"\n"
           "[tables.visits.columns]\nage = {{ lower = 0, upper = 100 }}\n")
    (tmp_path / "p.toml").write_text(one.format(ledger=""))
    (tmp_path / "led.toml").write_text(one.format(ledger='ledger = "visits.ledger"\n'))
    (tmp_path / "two.toml").write_text(one.format(ledger="") + "[tables.wards]\npublic = true\n")
    return tmp_path


# -- data files ------------------------------------------------------------------------------


@pytest.mark.parametrize("source", ["visits.parquet", "visits.csv", "visits.json", "parts/*.parquet"])
def test_a_data_file_opens_as_the_policys_one_table(files: Path, capsys, source: str) -> None:
    code, out, err = run(capsys, source, "--policy", "p.toml", "--format", "csv", "--no-report",
                         "-c", "SELECT DP_COUNT(*) AS n, DP_MEAN(age) AS mean_age FROM visits "
                               "WITH (epsilon = 5, delta = 1e-6)")
    assert code == 0, err
    header, row = out.strip().splitlines()
    n, mean = map(float, row.split(","))
    assert header == "n,mean_age" and abs(n - 600) < 10 and abs(mean - 49.5) < 3


def test_files_the_shell_expanded_are_one_table(files: Path, capsys) -> None:
    code, out, err = run(capsys, "parts/p1.parquet", "parts/p2.parquet", "--policy", "p.toml", "--no-report",
                         "--format", "csv", "-c", "SELECT DP_COUNT(*) AS n FROM visits WITH (epsilon = 5)")
    assert code == 0, err
    assert abs(float(out.split()[1]) - 600) < 10


def test_the_file_stays_behind_the_gate(files: Path, capsys) -> None:
    code, _, err = run(capsys, "visits.parquet", "--policy", "p.toml",
                       "-c", "SELECT * FROM visits", "-c", "SELECT count(*) FROM read_parquet('visits.parquet')",
                       "-c", "SELECT count(*) FROM read_csv('visits.csv')")
    assert code == 1
    lines = err.splitlines()
    assert lines[0].startswith("Error: table visits is private")
    assert lines[1] == "Error: function read_parquet() is not allowed in dpsql queries"
    assert lines[2] == "Error: function read_csv() is not allowed in dpsql queries"


def test_a_data_file_with_a_policy_of_two_tables_is_refused_naming_them(files: Path, capsys) -> None:
    (files / "data.parquet").write_bytes((files / "visits.parquet").read_bytes())
    code, out, err = run(capsys, "data.parquet", "--policy", "two.toml", "-c", COUNT)
    assert code == 1 and out == ""
    assert err.strip() == ("Error: data.parquet opens as the policy's table of the same name, or as its one "
                           "table; the policy declares 2 tables (visits, wards): name the file after one of "
                           "them (e.g. visits.parquet)")


@pytest.mark.parametrize("source", ["visits.parquet", "visits.csv", "parts/*.parquet"])
def test_a_data_file_opens_as_the_table_of_its_name(files: Path, capsys, source: str) -> None:
    """With several declared tables, the file's stem (or a glob's folder) names the table."""
    if source.startswith("parts"):
        (files / "parts").rename(files / "visits")
        source = "visits/*.parquet"
    code, out, err = run(capsys, source, "--policy", "two.toml", "--format", "csv", "--no-report",
                         "-c", "SELECT DP_COUNT(*) AS n FROM visits WITH (epsilon = 5)", "-c", ".tables")
    assert code == 0, err
    assert abs(float(out.split()[1]) - 600) < 10
    assert "│ visits │ private │" in out and "wards" not in out  # declared, but not in the database
    assert err == ""


@pytest.mark.parametrize("policy", ["p.toml", "two.toml"])  # two tables: no file name matches one
@pytest.mark.parametrize("source,message", [
    ("nosuch.parquet", "Error: data file nosuch.parquet does not exist"),
    ("none/*.parquet", "Error: no file matches none/*.parquet"),
])
def test_missing_data_files_are_named(files: Path, capsys, source: str, message: str, policy: str) -> None:
    code, _, err = run(capsys, source, "--policy", policy, "-c", COUNT)
    assert code == 1 and err.strip() == message


def test_connect_to_a_data_file_says_it_is_missing_or_opens_it_as_its_table(files: Path) -> None:
    import dpsql

    with pytest.raises(dpsql.Error, match="^data file nosuch.csv does not exist$"):
        dpsql.connect("nosuch.csv", "two.toml")
    assert not (files / "nosuch.csv").exists()  # no DuckDB database created under its name
    con = dpsql.connect("visits.csv", "two.toml")  # as the command opens it: the table of its name
    try:
        assert "visits" in con.tables()
    finally:
        con.close()


def test_a_data_file_through_the_installed_command(files: Path) -> None:
    proc = dpsql("visits.parquet", "--policy", "p.toml", "-c", COUNT, cwd=files)
    assert proc.returncode == 0, proc.stderr
    assert "│ n " in proc.stdout and "-- DP_COUNT(*): laplace" in proc.stdout
    assert proc.stderr.strip() == BUDGET_LINE


def test_output_cannot_overwrite_a_data_file(files: Path, capsys) -> None:
    code, _, err = run(capsys, "visits.csv", "--policy", "p.toml", "-c", ".output visits.csv")
    assert code == 1 and "it is a data file" in err
    assert (files / "visits.csv").read_text().startswith("id,age,ward")


# -- databases -------------------------------------------------------------------------------


def test_a_missing_database_is_not_created(files: Path, capsys) -> None:
    code, _, err = run(capsys, "nosuch.duckdb", "--policy", "p.toml", "-c", "SELECT 1")
    assert code == 1
    assert err.strip() == ("Error: database nosuch.duckdb does not exist; check the path, or give --create "
                           "to create an empty one")
    assert not (files / "nosuch.duckdb").exists()


def test_create_makes_the_database(files: Path, capsys) -> None:
    code, out, err = run(capsys, "new.duckdb", "--create", "--policy", "p.toml", "-c", "SELECT 41 + 1 AS x")
    assert code == 0, err
    assert "42" in out and (files / "new.duckdb").exists()


# -- the budget at a glance ------------------------------------------------------------------


def test_init_ledger_says_what_it_did(files: Path, capsys) -> None:
    code, out, err = run(capsys, "visits.parquet", "--policy", "led.toml", "--init-ledger")
    assert code == 0 and out == ""
    assert err.strip() == "created ledger visits.ledger with ε=10, δ=1e-05"
    code, _, err = run(capsys, "visits.parquet", "--policy", "led.toml", "--init-ledger")
    assert code == 0
    assert err.strip() == "ledger visits.ledger exists already (total ε=10, δ=1e-05); left as it is"
    code, _, err = run(capsys, "visits.parquet", "--policy", "p.toml", "--init-ledger")
    assert "names no budget.ledger" in err


def test_a_missing_ledger_gives_the_exact_command(files: Path, capsys) -> None:
    code, _, err = run(capsys, "visits.parquet", "--policy", "led.toml", "-c", COUNT)
    assert code == 1
    assert err.strip() == (
        "Error: budget ledger visits.ledger does not exist; create it once with: dpsql visits.parquet "
        "--policy led.toml --init-ledger (in Python: dpsql.connect(..., init_ledger=True)); dpsql never starts "
        "a fresh budget silently")
    assert not (files / "visits.ledger").exists()


def test_budget_prints_spent_remaining_and_the_history(files: Path, capsys) -> None:
    run(capsys, "visits.parquet", "--policy", "led.toml", "--init-ledger")
    code, _, _ = run(capsys, "visits.parquet", "--policy", "led.toml", "-c", COUNT)
    assert code == 0
    code, out, err = run(capsys, "visits.parquet", "--policy", "led.toml", "--budget")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == "spent ε=1.000, δ=0 of ε=10.000, δ=1e-05; remaining ε=9.000, δ=1e-05"
    assert any("│ 1 │" in line and "ε=1.000, δ=0" in line and "laplace" in line and COUNT[:40] in line
               for line in lines)


def test_budget_reads_a_ledger_it_may_not_write(files: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--budget`` opens the ledger read-only: a reader without write access (simulated for
    root, whom no file mode stops) sees it, and nothing is written next to it or into it."""
    import hashlib

    from dpsql._accounting import ledger_file

    run(capsys, "visits.parquet", "--policy", "led.toml", "--init-ledger")
    assert run(capsys, "visits.parquet", "--policy", "led.toml", "-c", COUNT)[0] == 0
    ledger = files / "visits.ledger"
    ledger.chmod(0o444)
    before = hashlib.sha256(ledger.read_bytes()).hexdigest()
    real_access = os.access
    monkeypatch.setattr(ledger_file.os, "access",
                        lambda path, mode: False if mode & os.W_OK else real_access(path, mode))
    code, _, err = run(capsys, "visits.parquet", "--policy", "led.toml", "-c", COUNT)
    assert code == 1 and "is not writable; queries charge it" in err  # a query still needs to write it
    code, out, err = run(capsys, "visits.parquet", "--policy", "led.toml", "--budget")
    assert code == 0 and err == ""
    assert out.startswith("spent ε=1.000, δ=0 of ε=10.000, δ=1e-05; remaining ε=9.000, δ=1e-05\n")
    assert "│ 1 │" in out
    assert hashlib.sha256(ledger.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in files.glob("visits.ledger*")) == ["visits.ledger"]  # no -wal, no -shm


def test_a_ledger_opened_read_only_refuses_charges(files: Path, capsys) -> None:
    from dpsql._accounting.budget import Cost
    from dpsql._accounting.ledger import Ledger
    from dpsql.errors import LedgerError

    run(capsys, "visits.parquet", "--policy", "led.toml", "--init-ledger")
    with Ledger.open(files / "visits.ledger", None, read_only=True) as ledger:
        assert ledger.spent() == Cost()
        with pytest.raises(LedgerError, match="could not be charged: attempt to write a readonly database"):
            ledger.charge(Cost(epsilon=1.0), query="q")


def test_c_output_ends_with_the_budget_line_on_stderr(files: Path, capsys) -> None:
    code, out, err = run(capsys, "visits.parquet", "--policy", "p.toml", "-c", COUNT)
    assert code == 0 and "-- DP_COUNT(*): laplace" in out and "budget" not in out
    assert err.splitlines() == [BUDGET_LINE]
    code, out, err = run(capsys, "visits.parquet", "--policy", "p.toml", "--no-report", "-c", COUNT)
    assert err == "" and "laplace" not in out
    code, out, err = run(capsys, "visits.parquet", "--policy", "p.toml", "-c", "SELECT 1 AS one")
    assert err == ""  # nothing spent, no budget line


def test_dot_commands_work_in_c(files: Path, capsys) -> None:
    code, out, err = run(capsys, "visits.parquet", "--policy", "p.toml", "-c", COUNT, "-c", ".budget", "-c", ".tables")
    assert code == 0, err
    assert "spent ε=1.000, δ=0 of ε=10.000" in out and "│ visits │ private │" in out


def test_dot_commands_work_in_piped_scripts(files: Path) -> None:
    proc = dpsql("--demo", cwd=files, stdin="SELECT DP_COUNT(*) FROM adult WITH (epsilon = 0.5);\n.budget\n"
                                              "\\dt\n.mode csv\nSELECT DP_COUNT(*) AS n FROM adult WITH (epsilon = 0.5);\n")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "spent ε=0.500, δ=0 of ε=10.000, δ=1e-05" in out and "│ adult" in out
    assert out.splitlines()[-2] == "n"  # .mode csv applied to the next statement
    assert proc.stderr.splitlines() == ["-- DP_COUNT(*): laplace, ε=0.5, ±5.99146 (95%)",
                                        "-- budget: spent ε=1.000, δ=0 of ε=10.000, δ=1e-05; "
                                        "remaining ε=9.000, δ=1e-05"]


def test_script_errors_name_the_statement_and_line(files: Path, capsys) -> None:
    (files / "q.sql").write_text(
        "-- counts\n"
        "SELECT DP_COUNT(*) FROM visits WITH (epsilon = 0.5);\n"
        "\n"
        "SELECT DP_MEAN(agee)\n"
        "  FROM visits WITH (epsilon = 0.5);\n"
        ".nope\n"
        "SELECT ward,\n"
        "       DP_COUNT(*) FORM visits GROUP BY ward;\n"
    )
    code, out, err = run(capsys, "visits.parquet", "--policy", "p.toml", "-f", "q.sql")
    assert code == 1 and "DP_COUNT(*)" in out
    assert err.splitlines() == [
        "Error: statement 2 (line 4 of q.sql): column agee does not exist in visits; did you mean age?",
        "Error: line 6 of q.sql: unknown command '.nope'; .help lists the commands",
        "Error: statement 3 (line 8 of q.sql): syntax error at column 20 near 'FORM': did you mean FROM?",
        "         DP_COUNT(*) FORM visits GROUP BY ward",
        "                     ^^^^",
        "-- budget: spent ε=0.500, δ=0 of ε=10.000, δ=1e-05; remaining ε=9.500, δ=1e-05",
    ]


def test_read_inside_a_script_names_that_file(files: Path, capsys) -> None:
    (files / "inner.sql").write_text("SELECT 1;\nSELECT DP_COUNT(*) FROM nowhere WITH (epsilon = 1);\n")
    (files / "outer.sql").write_text(".read inner.sql\n")
    code, _, err = run(capsys, "visits.parquet", "--policy", "p.toml", "-f", "outer.sql")
    assert code == 1
    assert err.strip() == "Error: statement 2 (line 2 of inner.sql): table nowhere does not exist"


def test_the_connection_knows_its_data_files_and_stays_usable(files: Path) -> None:
    import dpsql
    from dpsql._policy.policy import load_policy
    from dpsql.interfaces.files import view_setup

    policy = load_policy("p.toml")
    with dpsql.connect(":memory:", policy, setup=view_setup(["parts/*.parquet"], policy)) as con:
        assert sorted(con.data_files) == [str(files / "parts" / p) for p in ("p1.parquet", "p2.parquet")]
        assert con.data_files  # asked twice: no result is left unfinished on the connection
        assert con.sql("SELECT DP_COUNT(*) FROM visits WITH (epsilon = 1)").fetchall()


def test_asking_for_data_files_leaves_no_unfinished_result() -> None:
    from dpsql.interfaces.demo import connect_demo

    with connect_demo() as con:
        assert con.data_files == ()
        assert con.sql("SELECT education FROM education_levels WHERE education_num = 16").fetchall() == [("Doctorate",)]
