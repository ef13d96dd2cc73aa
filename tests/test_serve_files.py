"""What ``dpsql`` opens, ``dpsql serve`` opens too, and the ledger commands need no database.

* ``dpsql DB --policy P --budget`` (and ``--init-ledger``, ``--set-budget``) read or create the
  ledger alone: they work while a server holds the database file's lock.
* ``dpsql serve visits.csv --policy P`` serves the file as the policy's table, and ``dpsql serve
  --policy P`` the tables the policy names files for (``source``), each to a psycopg client.
"""

from __future__ import annotations

import os
import subprocess
import sys
import typing as t
from pathlib import Path

import duckdb
import psycopg
import pytest

from dpsql.interfaces.cli import main as cli
from tests.serve.harness import PASSWORDS, launch, start

ROOT = Path(__file__).resolve().parents[1]
VISITS = ROOT / "fixtures" / "visits" / "visits.parquet"
WARDS = ["cardiology", "emergency", "maternity", "oncology", "orthopaedics"]
POLICY = """
[budget]
epsilon = 10
delta = 1e-5
ledger = "serve.ledger"
[tables.visits]
privacy_unit = "patient_id"
max_rows_per_unit = 5
{source}
[tables.visits.columns]
stay = {{ lower = 0, upper = 30 }}
ward = {{ keys = {wards} }}
"""
COUNT = "SELECT ward, DP_COUNT(*) AS n FROM visits GROUP BY ward ORDER BY ward WITH (epsilon = 1)"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -- the ledger commands while a server holds the database ----------------------------------------


def test_budget_and_ledger_commands_work_while_a_server_holds_the_database(tmp_path: Path, capsys) -> None:
    srv = start(tmp_path)
    database, policy = str(tmp_path / "adult.duckdb"), str(tmp_path / "policy.toml")
    try:
        with psycopg.connect(f"host={srv.host} port={srv.port} dbname=adult user=alice "
                             f"password={PASSWORDS['alice']}") as con:
            con.execute("SELECT DP_COUNT(*) AS n FROM adult WITH (epsilon = 0.5)").fetchall()
        # the database is locked: opening it for statements fails while the server runs
        code, _, err = run(capsys, database, "--policy", policy, "-c", "SELECT 1")
        assert code == 1 and "lock" in err.lower(), err
        code, budget, err = run(capsys, database, "--policy", policy, "--budget")
        assert (code, err) == (0, "")
        assert budget.startswith("spent ε=0.500, δ=0 of ε=100.000, δ=1e-05; remaining ε=99.500, δ=1e-05\n")
        assert "│ 1 │" in budget and "SELECT DP_COUNT(*) AS n FROM adult" in budget
        code, out, err = run(capsys, database, "--policy", policy, "--init-ledger")
        assert (code, out) == (0, "") and err == (f"ledger {srv.ledger} exists already (total ε=100, δ=1e-05); "
                                                  "left as it is\n")
        other = tmp_path / "other.toml"  # a second policy with a ledger of its own, created now
        other.write_text(Path(policy).read_text(encoding="utf-8").replace("serve.ledger", "other.ledger"),
                         encoding="utf-8")
        code, out, err = run(capsys, database, "--policy", str(other), "--init-ledger", "--budget")
        assert code == 0 and err == f"created ledger {tmp_path / 'other.ledger'} with ε=100, δ=1e-05\n"
        assert out.splitlines() == ["spent ε=0.000, δ=0 of ε=100.000, δ=1e-05; remaining ε=100.000, δ=1e-05",
                                    "no query has spent budget yet"]
        code, out, _ = run(capsys, database, "--policy", policy, "--set-budget")
        assert (code, out) == (0, f"ledger {srv.ledger}: total unchanged (ε=100, δ=1e-05)\n")
        assert len(srv.entries()) == 1  # nothing of this was charged
    finally:
        srv.stop()
    # the same report as the shell's .budget on the opened database
    code, shown, _ = run(capsys, database, "--policy", policy, "-c", ".budget")
    assert code == 0 and shown == budget


def test_ledger_commands_check_their_arguments_as_before(tmp_path: Path, capsys) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text(POLICY.format(source="", wards=WARDS), encoding="utf-8")
    code, _, err = run(capsys, str(tmp_path / "missing.duckdb"), "--policy", str(policy), "--init-ledger")
    assert code == 1 and err.startswith("Error: database ") and "does not exist" in err
    code, _, err = run(capsys, str(tmp_path / "adult.duckdb"), "--policy", str(policy), "--budget")
    assert code == 1 and "does not exist" in err and not (tmp_path / "serve.ledger").exists()
    duckdb.connect(str(tmp_path / "adult.duckdb")).close()
    code, _, err = run(capsys, str(tmp_path / "adult.duckdb"), "--policy", str(policy), "--budget")
    assert code == 1 and err.startswith("Error: budget ledger ") and "--init-ledger" in err
    code, _, err = run(capsys, "adult.duckdb", "--policy", str(policy), "--engine", "spark", "--budget")
    assert (code, err) == (1, "Error: --engine spark reads data files (.parquet, .csv, .json) and the Spark "
                              "catalog, not a DuckDB database: adult.duckdb\n")
    assert not (tmp_path / "serve.ledger").exists()


def test_budget_on_spark_reads_the_ledger_without_starting_spark(tmp_path: Path) -> None:
    duckdb.execute(f"COPY (SELECT * FROM '{VISITS}') TO '{tmp_path / 'visits.csv'}' (HEADER)")
    policy = tmp_path / "p.toml"
    policy.write_text(POLICY.format(source='source = "visits.csv"', wards=WARDS), encoding="utf-8")
    hidden = "sys.modules['pyspark'] = None  # import pyspark fails: Spark cannot start"
    code = f"import sys\n{hidden}\nfrom dpsql.interfaces.cli import main\nsys.exit(main(sys.argv[1:]))"
    done = subprocess.run([sys.executable, "-c", code, "--policy", str(policy), "--engine", "spark",
                           "--init-ledger", "--budget"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env=_env())
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("created ledger ") and "no query has spent budget yet" in done.stdout


# -- dpsql serve on data files and source tables --------------------------------------------------


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def _visits_csv(directory: Path) -> None:
    duckdb.execute(f"COPY (SELECT * FROM '{VISITS}') TO '{directory / 'visits.csv'}' (HEADER)")


def _ask(srv: t.Any) -> list[tuple[t.Any, ...]]:
    with psycopg.connect(f"host={srv.host} port={srv.port} dbname=visits user=ann password={srv.password}",
                         autocommit=True) as con:
        tables = con.execute("SELECT table_name FROM information_schema.tables").fetchall()
        assert tables == [("visits",)]
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            con.execute("SELECT * FROM visits")
        return con.execute(COUNT).fetchall()


@pytest.mark.parametrize("form", ["data file", "source"])
def test_serve_opens_what_the_command_opens(tmp_path: Path, form: str) -> None:
    _visits_csv(tmp_path)
    policy = tmp_path / "p.toml"
    if form == "data file":  # dpsql serve visits.csv --policy p.toml
        policy.write_text(POLICY.format(source="", wards=WARDS), encoding="utf-8")
        args = ["visits.csv", "--policy", str(policy)]
    else:  # dpsql serve --policy p.toml, the table's files named in the policy
        policy.write_text(POLICY.format(source='source = "visits.csv"', wards=WARDS), encoding="utf-8")
        args = ["--policy", str(policy)]
    kept = duckdb.execute(f"SELECT SUM(LEAST(n, 5)) FROM (SELECT COUNT(*) AS n FROM '{VISITS}' "
                          "GROUP BY patient_id)").fetchone()[0]
    srv = launch([*args, "--init-ledger"], tmp_path)
    try:
        assert "tables: visits" in srv.log[0] and srv.password
        rows = _ask(srv)
        assert [r[0] for r in rows] == WARDS and abs(sum(r[1] for r in rows) - kept) < 200
        assert [(e.user, round(e.cost.epsilon, 6)) for e in srv.entries()] == [("ann", 1.0)]
    finally:
        srv.stop()


@pytest.mark.parametrize(("args", "message"), [
    (["--policy", "p.toml"], "Error: nothing to serve: give a database or data files (dpsql serve DATABASE "
                             "--policy FILE), or name the tables' files in the policy (source = ...) of p.toml"),
    (["gone.duckdb", "--policy", "p.toml"], "Error: database gone.duckdb does not exist; check the path (dpsql "
                                            "serve opens a DuckDB file, or data files: .parquet, .csv, .json)"),
    (["gone.csv", "--policy", "p.toml"], "Error: data file gone.csv does not exist"),
    (["visits.csv"], "Error: dpsql serve needs a policy: dpsql serve DATABASE --policy FILE, dpsql serve DATA "
                     "FILE --policy FILE, dpsql serve --policy FILE with source tables (or --demo)"),
])
def test_serve_refuses_what_it_cannot_open_in_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "p.toml").write_text(POLICY.format(source="", wards=WARDS), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "dpsql", "serve", *args, "--port", "0", "--init-ledger"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, env=_env())
    assert (done.returncode, done.stderr) == (1, message + "\n")
    assert not (tmp_path / "serve.ledger").exists()  # refused before the ledger was created


def test_a_master_from_the_policy_stays_off_the_command_lines_of_more_processes(tmp_path: Path) -> None:
    """A Spark Connect URL may hold a token: the processes of --processes read it from the policy,
    as the first one did, rather than from a command line every local user can list."""
    from dpsql._policy.policy import load_policy
    from dpsql.interfaces.engines import choose
    from dpsql.interfaces.server.main import build_parser, child_command

    url = "sc://spark.example:443/;token=secret;x-databricks-cluster-id=c1"
    policy = tmp_path / "p.toml"
    policy.write_text(f'[budget]\nepsilon = 1\nledger = "l.ledger"\n[engine]\nname = "spark"\nmaster = "{url}"\n',
                      encoding="utf-8")
    args = build_parser().parse_args(["--policy", str(policy), "--processes", "2"])
    command = child_command(args, 5555, load_policy(policy))
    assert command[command.index("--engine") + 1] == "spark" and "--spark-master" not in command
    assert not any("secret" in part for part in command)
    # the child resolves the same master from the same policy
    child = build_parser().parse_args(command[command.index("serve") + 1:])
    assert choose(child.engine, child.spark_master, load_policy(policy)) == ("spark", url)
