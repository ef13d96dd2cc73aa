"""The dpsql command: output formats, and every error path prints one line with the right status."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dpsql.interfaces.cli import main
from dpsql.interfaces.console import split_statements

DEMO_MEAN = "SELECT DP_MEAN(age) FROM adult WITH (epsilon = 1)"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_readme_first_command_prints_mean_near_truth() -> None:
    """The README's demo command, as a separate process through the console script's module."""
    out = subprocess.run(
        [sys.executable, "-c", "import sys; from dpsql.interfaces.cli import main; sys.exit(main())", "--demo", "-c", DEMO_MEAN],
        capture_output=True, text=True, check=True,
    )
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("│") and "DP_MEAN" not in ln][0]
    value = float(line.strip("│ "))
    assert abs(value - 38.58) < 0.2
    assert "laplace" in out.stdout
    # the budget line follows on stderr, like the shell's, so that stdout stays the result
    assert out.stderr == "-- budget: spent ε=1.000, δ=0 of ε=10.000, δ=1e-05; remaining ε=9.000, δ=1e-05\n"


def test_json_is_a_list_of_row_objects(capsys) -> None:
    code, out, err = run(capsys, "--demo", "--format", "json", "-c",
                         "SELECT sex, DP_COUNT(*) AS n FROM adult GROUP BY sex WITH (epsilon = 1)")
    assert code == 0
    rows = json.loads(out)
    assert [r["sex"] for r in rows] == ["Female", "Male"] and all(isinstance(r["n"], int) for r in rows)
    assert "laplace" in err  # the report goes to stderr in machine-readable formats


def test_csv_output(capsys) -> None:
    code, out, _ = run(capsys, "--demo", "--format", "csv", "--no-report", "-c", DEMO_MEAN)
    header, value = out.strip().splitlines()
    assert code == 0 and header == "DP_MEAN(age)" and abs(float(value) - 38.58) < 0.2


def test_public_table_and_explain(capsys) -> None:
    code, out, _ = run(capsys, "--demo", "-c", "SELECT education FROM education_levels WHERE education_num = 16")
    assert code == 0 and "Doctorate" in out
    code, out, _ = run(capsys, "--demo", "-c", "EXPLAIN " + DEMO_MEAN)
    assert code == 0 and "rewritten SQL" in out and "┌" not in out


@pytest.mark.parametrize(
    "argv,fragment",
    [
        (["--demo", "-c", "SELECT * FROM adult"], "table adult is private"),
        (["--demo", "-c", "SELEC 1"], "syntax error"),
        (["--demo", "-c", "SELECT DP_COUNT(*) FROM adult WITH (epsilon = 0)"], "option 'epsilon' must be > 0"),
        (["--demo", "-c", "SELECT DP_COUNT(*) FROM adult WITH (epsilon = 11)"], "Requested: ε=11.000"),
        (["--demo", "-c", "SELECT DP_SUM(nope) FROM adult WITH (epsilon = 1)"], "column nope does not exist"),
        (["x.duckdb"], "a policy is required"),
        (["--policy", "missing.toml", "-c", "SELECT 1"], "policy file missing.toml does not exist"),
        (["--demo", "-f", "no-such-file.sql"], "cannot read no-such-file.sql"),
        (["--demo", "--policy", "p.toml"], "--demo uses its own"),
        (["--demo", "-c", "SELECT 1", "-f", "x.sql"], "either -c or -f"),
    ],
)
def test_error_paths_print_one_line_and_exit_1(capsys, argv: list[str], fragment: str) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 1
    lines = err.strip().splitlines()
    assert lines[0].startswith("Error: ") and fragment in lines[0]
    # one line; a syntax error adds the statement's line and a caret under the token
    assert len(lines) == (3 if fragment == "syntax error" else 1)
    assert "Traceback" not in out + err


def test_bad_policy_file(tmp_path, capsys) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[budget\nepsilon = ")
    code, _, err = run(capsys, "--policy", str(bad), "-c", "SELECT 1")
    assert code == 1 and err.startswith("Error: policy file") and len(err.strip().splitlines()) == 1
    wrong = tmp_path / "wrong.toml"
    wrong.write_text("[budget]\nepsilon = -1\n")
    code, _, err = run(capsys, "--policy", str(wrong), "-c", "SELECT 1")
    assert code == 1 and "budget.epsilon must be > 0" in err


@pytest.mark.parametrize("argv", [["--bogus"], ["--format", "xml", "--demo"], ["a", "b"]])
def test_usage_errors_exit_2(capsys, argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    _, err = capsys.readouterr()
    assert err.strip().splitlines()[-1].startswith("Error: ")
    assert "Traceback" not in err


def test_a_failed_statement_does_not_stop_the_script(tmp_path, capsys) -> None:
    script = tmp_path / "q.sql"
    script.write_text("SELECT * FROM adult;\n" + DEMO_MEAN + ";\n")
    code, out, err = run(capsys, "--demo", "-f", str(script))
    assert code == 1 and "DP_MEAN(age)" in out and err.count("Error:") == 1


def test_split_statements_respects_strings_and_comments() -> None:
    text = "SELECT ';' AS a; -- x; y\nSELECT 2 /* ; */;  "
    assert split_statements(text) == ["SELECT ';' AS a", "-- x; y\nSELECT 2 /* ; */"]


def test_file_database_with_policy_and_ledger(tmp_path, capsys) -> None:
    import duckdb

    db = tmp_path / "t.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE t AS SELECT range AS x FROM range(100)")
    con.close()
    pol = tmp_path / "p.toml"
    pol.write_text('[budget]\nepsilon = 1.0\nledger = "t.ledger"\n[defaults]\nreuse_releases = "off"\n[tables.t]\n[tables.t.columns]\nx = { lower = 0, upper = 100 }\n')
    q = "SELECT DP_SUM(x) FROM t WITH (epsilon = 0.6)"
    code, _, err = run(capsys, str(db), "--policy", str(pol), "-c", q)
    assert code == 1 and "does not exist" in err  # the ledger must be created explicitly
    code, out, _ = run(capsys, str(db), "--policy", str(pol), "--init-ledger", "-c", q)
    assert code == 0 and "DP_SUM(x)" in out
    code, _, err = run(capsys, str(db), "--policy", str(pol), "-c", q)
    assert code == 1 and "Remaining: ε=0.400" in err


def _ledger_policy(tmp_path, epsilon: float, delta: float = 1e-5):
    """A file database, and a policy with a ledger file (not yet created) and budget ``epsilon``."""
    import duckdb

    db = tmp_path / "t.duckdb"
    if not db.exists():
        con = duckdb.connect(str(db))
        con.execute("CREATE TABLE t AS SELECT range AS x FROM range(100)")
        con.close()
    pol = tmp_path / "p.toml"
    pol.write_text(f'[budget]\nepsilon = {epsilon}\ndelta = {delta}\nledger = "t.ledger"\n'
                   '[defaults]\nreuse_releases = "off"\n'  # each query is charged
                   "[tables.t]\n[tables.t.columns]\nx = { lower = 0, upper = 100 }\n")
    return str(db), str(pol), tmp_path / "t.ledger"


def test_a_larger_policy_budget_is_refused_until_set_budget(tmp_path, capsys) -> None:
    from dpsql._accounting.budget import Cost
    from dpsql._accounting.ledger import Ledger

    q = "SELECT DP_SUM(x) FROM t WITH (epsilon = 6)"
    db, pol, ledger = _ledger_policy(tmp_path, 10)
    assert run(capsys, db, "--policy", pol, "--init-ledger", "-c", q)[0] == 0
    before = ledger.read_bytes()
    _ledger_policy(tmp_path, 20)  # the policy file now claims twice the budget
    for extra in ([], ["--init-ledger"]):
        code, out, err = run(capsys, db, "--policy", pol, *extra, "-c", q)
        assert code == 1 and out == "" and len(err.strip().splitlines()) == 1
        assert err.startswith(f"Error: budget ledger {ledger} has a total of ε=10, δ=1e-05 but the "
                              "policy's budget is ε=20, δ=1e-05;") and "--set-budget" in err
    assert ledger.read_bytes() == before  # nothing charged, nothing changed
    code, out, err = run(capsys, db, "--policy", pol, "--set-budget")
    assert code == 0 and err == ""
    assert out == f"ledger {ledger}: total changed from ε=10, δ=1e-05 to ε=20, δ=1e-05\n"
    code, out, err = run(capsys, db, "--policy", pol, "-c", q, "-c", q)
    assert code == 0 and "Remaining" not in err
    code, out, _ = run(capsys, db, "--policy", pol, "--set-budget")
    assert code == 0 and out == f"ledger {ledger}: total unchanged (ε=20, δ=1e-05)\n"
    with Ledger.open(ledger, None) as led:
        history = led.history()
        assert led.spent().epsilon == 18 and [e.cost.epsilon for e in history] == [6, 0, 6, 6]
        assert history[1].cost == Cost() and history[1].query == f"dpsql --set-budget --policy {pol}"
        assert history[1].detail == "total changed from ε=10, δ=1e-05 to ε=20, δ=1e-05"
    _ledger_policy(tmp_path, 10)  # a smaller budget is refused the same way
    code, _, err = run(capsys, db, "--policy", pol, "-c", q)
    assert code == 1 and "has a total of ε=20, δ=1e-05 but the policy's budget is ε=10, δ=1e-05" in err


@pytest.mark.parametrize("argv,fragment", [
    (["--set-budget"], "--set-budget needs the policy"),
    (["--demo", "--set-budget"], "--set-budget only changes the ledger's total"),
    (["--policy", "{pol}", "--set-budget", "-c", "SELECT 1"], "--set-budget only changes the ledger's total"),
    (["--policy", "{pol}", "--set-budget"], "does not exist"),
    (["--policy", "{mem}", "--set-budget"], "names no budget.ledger"),
])
def test_set_budget_errors_are_one_line(tmp_path, capsys, argv: list[str], fragment: str) -> None:
    _, pol, ledger = _ledger_policy(tmp_path, 10)
    mem = tmp_path / "memory.toml"
    mem.write_text("[budget]\nepsilon = 1.0\n")
    code, out, err = run(capsys, *[a.format(pol=pol, mem=mem) for a in argv])
    assert code == 1 and out == "" and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and err.startswith("Error: ") and fragment in err
    assert not ledger.exists()
