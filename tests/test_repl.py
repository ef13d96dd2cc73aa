"""Tests of the interactive shell (dpsql.interfaces.repl): driven through prompt_toolkit's pipe input, the
completer and lexer called directly, the non-interactive ``dpsql --demo < file`` path, and one
session on a real pseudo-terminal inside tmux."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import typing as t
from pathlib import Path

import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from pygments.token import Name

import dpsql
from dpsql._privacy.noise import SeededNoise
from dpsql.interfaces.demo import connect_demo
from dpsql.interfaces.repl import run_repl
from dpsql.interfaces.repl.completer import DPSQLCompleter
from dpsql.interfaces.repl.lexer import DPSQLLexer
from dpsql.interfaces.repl.shell import default_history_path, open_history, statement_complete
from dpsql.interfaces.repl.special import ALIASES, COMMANDS, completion_kinds

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ,
       "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
COUNT_QUERY = "SELECT DP_COUNT(*)\nFROM adult\nWITH (epsilon=0.1);\n"
CTRL_C, CTRL_D = "\x03", "\x04"


@pytest.fixture
def con() -> t.Iterator[dpsql.Connection]:
    c = connect_demo(noise=SeededNoise(0))
    yield c
    c.close()


class Session(t.NamedTuple):
    status: int
    out: str
    err: str
    history: str


@pytest.fixture
def drive(con: dpsql.Connection, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> t.Callable[..., Session]:
    """Type ``keys`` into the shell (ending with Ctrl-D unless ``eof`` is false); return what it
    printed and the history file it wrote."""

    def run(keys: str, eof: bool = True, fmt: str = "table") -> Session:
        history = tmp_path / "history"
        capsys.readouterr()
        with create_pipe_input() as inp:
            inp.send_text(keys + (CTRL_D if eof else ""))
            status = run_repl(con, fmt=fmt, input=inp, output=DummyOutput(), history_file=history)
        cap = capsys.readouterr()
        return Session(status, cap.out, cap.err, history.read_text(encoding="utf-8") if history.exists() else "")

    return run


def completions(con: dpsql.Connection, text: str, tab: bool = True, cursor: int | None = None) -> list[str]:
    """What the completer offers for ``text`` with the cursor at ``cursor`` (default: the end)."""
    completer = DPSQLCompleter(con, completion_kinds())
    doc = Document(text, len(text) if cursor is None else cursor)
    return [c.text for c in completer.get_completions(doc, CompleteEvent(completion_requested=tab))]


# -- the shell through pipe input ----------------------------------------------------------------


def test_multiline_query_runs_with_report_and_budget(drive: t.Callable[..., Session]) -> None:
    s = drive(COUNT_QUERY)
    assert s.status == 0
    assert "│ DP_COUNT(*) │" in s.out
    assert "-- DP_COUNT(*): laplace, ε=0.1, ±" in s.out
    assert "-- budget: spent ε=0.100" in s.out and "remaining ε=9.900" in s.out
    assert s.err == ""


def test_budget_shows_spend_and_history_after_two_queries(drive: t.Callable[..., Session]) -> None:
    s = drive(COUNT_QUERY + "SELECT sex, DP_MEAN(age) FROM adult GROUP BY sex WITH (epsilon = 0.5);\n.budget\n")
    budget = s.out[s.out.rindex("spent ε=0.600"):]
    assert budget.startswith("spent ε=0.600, δ=0 of ε=10.000, δ=1e-05; remaining ε=9.400")
    assert "│ 1 │" in budget and "ε=0.100, δ=0" in budget and "SELECT DP_COUNT(*) FROM adult WITH (epsilon=0.1)" in budget
    assert "│ 2 │" in budget and "ε=0.500, δ=0" in budget and "SELECT sex, DP_MEAN(age)" in budget


def test_refused_query_prints_error_and_shell_goes_on(drive: t.Callable[..., Session], con: dpsql.Connection) -> None:
    s = drive("SELECT * FROM adult;\n" + COUNT_QUERY)
    assert s.status == 0
    assert s.err.startswith("Error: table adult is private")
    assert len(s.err.strip().splitlines()) == 1
    assert "│ DP_COUNT(*) │" in s.out
    assert len(con.budget.history) == 1  # the refusal charged nothing


def test_history_is_written_to_the_file(drive: t.Callable[..., Session]) -> None:
    s = drive(COUNT_QUERY + ".tables\n")
    assert "+SELECT DP_COUNT(*)\n+FROM adult\n+WITH (epsilon=0.1);\n" in s.history
    assert "+.tables\n" in s.history


def test_ctrl_d_exits_with_status_zero(drive: t.Callable[..., Session]) -> None:
    s = drive("", eof=True)
    assert s.status == 0
    assert "Ctrl-D to exit" in s.out


def test_ctrl_c_cancels_the_current_input(drive: t.Callable[..., Session], con: dpsql.Connection) -> None:
    s = drive("SELECT DP_COUNT(*) FROM adult" + CTRL_C + "\\dt\n")
    assert "│ adult" in s.out and "DP_COUNT" not in s.out
    assert con.budget.history == []
    assert "DP_COUNT" not in s.history


@pytest.mark.parametrize("quit_keys", [".quit\n", "\\q\n", ".exit\n", "quit\n"])
def test_quit_commands_end_the_shell(drive: t.Callable[..., Session], quit_keys: str) -> None:
    s = drive(quit_keys + COUNT_QUERY, eof=False)  # nothing after the quit runs
    assert s.status == 0 and "DP_COUNT" not in s.out


def test_public_query_has_no_report(drive: t.Callable[..., Session]) -> None:
    s = drive("SELECT education FROM education_levels WHERE education_num = 13;\n")
    assert "│ Bachelors │" in s.out and "--" not in s.out.split("Bachelors")[1]


def test_schema_tables_policy_and_aliases(drive: t.Callable[..., Session]) -> None:
    s = drive(".schema adult\n\\d education_levels\n\\dt\n.policy\n\\?\n")
    assert "adult: private; privacy unit row, at most 1 row(s) per unit" in s.out
    assert "│ age            │ BIGINT  │ [0, 100]" in s.out
    assert "Female, Male" in s.out
    assert "education_levels: public" in s.out
    assert "│ education_levels │ public" in s.out
    assert "budget: ε=10.000, δ=1e-05 (approx)" in s.out
    assert ".budget" in s.out and "[\\dt]" in s.out  # the help lists commands and aliases
    assert s.err == ""


def test_unknown_command_and_bad_arguments_are_errors(drive: t.Callable[..., Session]) -> None:
    s = drive(".nope\n.schema nosuch\n.mode xml\n.timer maybe\n.read no/such/file.sql\n")
    lines = s.err.strip().splitlines()
    assert lines[0] == "Error: unknown command '.nope'; .help lists the commands"
    assert lines[1].startswith("Error: no table 'nosuch'")
    assert lines[2] == "Error: usage: .mode table|csv|json"
    assert lines[3] == "Error: usage: .timer on|off"
    assert lines[4].startswith("Error: cannot read no/such/file.sql")


def test_mode_output_read_timer_explain(drive: t.Callable[..., Session], tmp_path: Path) -> None:
    script = tmp_path / "script.sql"
    script.write_text(".mode csv\nSELECT education_num, education FROM education_levels\n"
                      "WHERE education_num <= 2 ORDER BY 1;\n", encoding="utf-8")
    out = tmp_path / "out.csv"
    s = drive(f".output {out}\n.read {script}\n.output\n.timer on\n.mode json\n"
              "SELECT sex, DP_COUNT(*) AS n FROM adult GROUP BY sex WITH (epsilon = 1);\n"
              ".explain SELECT DP_SUM(age) FROM adult WITH (epsilon = 1)\n")
    assert out.read_text(encoding="utf-8") == "education_num,education\n1,Preschool\n2,1st-4th\n"
    assert '"sex": "Male"' in s.out and "-- DP_COUNT(*): laplace, ε=1" in s.out and "Run Time: " in s.out
    assert "DP_SUM(age): mechanism laplace" in s.out and "rewritten SQL:" in s.out
    assert s.err == ""


def test_output_refuses_the_ledger_database_and_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import duckdb

    from dpsql._accounting.budget import Budget, Cost
    from dpsql._accounting.ledger import Ledger

    db, ledger, policy = tmp_path / "t.duckdb", tmp_path / "t.ledger", tmp_path / "p.toml"
    raw = duckdb.connect(str(db))
    raw.execute("CREATE TABLE t AS SELECT range AS x FROM range(100)")
    raw.close()
    policy.write_text('[budget]\nepsilon = 5.0\nledger = "t.ledger"\n'
                      "[tables.t]\n[tables.t.columns]\nx = { lower = 0, upper = 100 }\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "link").symlink_to(ledger)
    os.link(policy, tmp_path / "hard.toml")
    with dpsql.connect(str(db), str(policy), init_ledger=True) as con:
        con.sql("SELECT DP_SUM(x) FROM t WITH (epsilon = 1)")
    before = {f: f.read_bytes() for f in (db, ledger, policy)}
    con = dpsql.connect(str(db), str(policy))
    targets = [str(ledger), "t.ledger", "sub/../t.ledger", str(tmp_path / "link"), str(ledger) + "-wal",
               str(ledger) + "-journal", str(db), str(db) + ".wal", str(policy), str(tmp_path / "hard.toml")]
    keys = "".join(f".output {target}\n" for target in targets) + ".output ok.csv\n"
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        capsys.readouterr()
        with create_pipe_input() as inp:
            inp.send_text(keys + CTRL_D)
            status = run_repl(con, input=inp, output=DummyOutput(), history_file=tmp_path / "history")
    finally:
        os.chdir(cwd)
    err = capsys.readouterr().err.splitlines()
    assert status == 0 and len(err) == len(targets)
    for line, target in zip(err, targets):
        assert line.startswith(f"Error: cannot write results to {target}: it is the "), line
    assert "it is the budget ledger" in err[0] and "it is the -wal file of the budget ledger" in err[4]
    assert "it is the database" in err[6] and "it is the policy file" in err[8]
    assert (tmp_path / "ok.csv").exists() and not Path(str(ledger) + "-journal").exists()
    con.close()
    assert {f: f.read_bytes() for f in (db, ledger, policy)} == before
    with Ledger.open(ledger, Budget(Cost(epsilon=5.0))) as led:  # intact: it opens, with its charge
        assert led.spent() == Cost(epsilon=1.0)


# -- completion, highlighting, input handling ------------------------------------------------------


def test_completes_column_name(con: dpsql.Connection) -> None:
    assert completions(con, "SELECT DP_MEAN(ag")[0] == "age"


def test_completes_tables_functions_options_commands(con: dpsql.Connection) -> None:
    assert completions(con, "SELECT DP_MEAN(age) FROM ad") == ["adult"]
    assert completions(con, "SELECT DP_ME")[:2] == ["DP_MEAN", "DP_MEDIAN"]
    assert completions(con, "select dp_me")[:2] == ["dp_mean", "dp_median"]
    assert completions(con, "SELECT DP_COUNT(*) FROM adult WITH (eps") == ["epsilon"]
    assert "'laplace'" in completions(con, "SELECT DP_SUM(age) FROM adult WITH (mechanism = ")
    assert completions(con, "SELECT a.hours FROM adult a", cursor=14) == ["hours_per_week"]
    assert completions(con, "SELECT educ FROM education_levels", cursor=11)[:2] == ["education_num", "education"]
    assert completions(con, "SEL")[0] == "SELECT"
    assert completions(con, ".sch") == [".schema"]
    assert completions(con, "\\d ad") == ["adult"]
    assert completions(con, ".mode c") == ["csv"]
    assert completions(con, "SELECT ", tab=False) == []  # nothing pops up on a bare space


def test_lexer_highlights_dp_functions_and_option_keys() -> None:
    tokens = list(DPSQLLexer().get_tokens("SELECT DP_MEAN(age) FROM adult WITH (epsilon = 0.5, mechanism = laplace);"))
    kinds = {text: tok for tok, text in tokens}
    assert kinds["DP_MEAN"] is Name.Builtin
    assert kinds["epsilon"] is Name.Attribute and kinds["mechanism"] is Name.Attribute
    assert kinds["laplace"] is Name.Constant
    assert kinds["age"] is Name and kinds["adult"] is Name  # plain names are not option keys


@pytest.mark.parametrize(("text", "complete"), [
    ("SELECT DP_COUNT(*)", False),
    ("SELECT DP_COUNT(*)\nFROM adult;", True),
    ("SELECT ';'", False),
    ("SELECT 'a;", False),
    ("SELECT 1; -- done", True),
    ("SELECT 1 -- not yet;", False),
    ("", True),
    (".tables", True),
    ("\\d adult", True),
    ("exit", True),
])
def test_enter_submits_only_complete_statements(text: str, complete: bool) -> None:
    assert statement_complete(text) is complete


def test_special_commands_are_registered_in_one_registry() -> None:
    for name in (".help", ".tables", ".schema", ".policy", ".budget", ".explain", ".mode", ".read",
                 ".output", ".timer", ".quit"):
        assert name in COMMANDS and COMMANDS[name].help
    assert ALIASES == {"\\?": ".help", "\\dt": ".tables", "\\d": ".schema", ".exit": ".quit", "\\q": ".quit"}


def test_history_lives_in_the_xdg_config_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    assert default_history_path() == tmp_path / "cfg" / "dpsql" / "history"
    open_history(None)
    assert (tmp_path / "cfg" / "dpsql" / "history").is_file()
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_history_path() == tmp_path / "home" / ".config" / "dpsql" / "history"


# -- the command without a terminal: statements from a pipe ---------------------------------------


def dpsql_cmd(*args: str, stdin: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dpsql", *args], input=stdin, capture_output=True,
                          text=True, env=ENV, timeout=120)


def test_piped_statements_run_and_exit() -> None:
    proc = dpsql_cmd("--demo", stdin="SELECT DP_COUNT(*)\nFROM adult WITH (epsilon = 0.1);\n"
                                     "SELECT education FROM education_levels WHERE education_num = 16;\n")
    assert proc.returncode == 0, proc.stderr
    assert "│ DP_COUNT(*) │" in proc.stdout and "-- DP_COUNT(*): laplace" in proc.stdout
    assert "Doctorate" in proc.stdout
    assert proc.stderr.startswith("-- budget: spent ε=0.100") and len(proc.stderr.splitlines()) == 1
    assert "dpsql>" not in proc.stdout  # no prompt without a terminal


def test_piped_refusal_exits_one_after_running_the_rest() -> None:
    proc = dpsql_cmd("--demo", stdin="SELECT * FROM adult; SELECT DP_COUNT(*) FROM adult WITH (epsilon = 0.1);")
    assert proc.returncode == 1
    assert proc.stderr.startswith("Error: statement 1 (line 1): table adult is private")
    assert "│ DP_COUNT(*) │" in proc.stdout


# -- a real terminal ----------------------------------------------------------------------------------


class Tmux:
    """A private tmux server running one command in a 120×50 window."""

    def __init__(self, sock: Path) -> None:
        self.sock = str(sock)

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["tmux", "-S", self.sock, *args], capture_output=True, text=True, timeout=30)

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "repl").stdout

    def wait_for(self, text: str, timeout: float = 90.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.05)
        raise AssertionError(f"{text!r} did not appear; screen:\n{self.screen()}")

    def type(self, line: str) -> None:
        """Type ``line`` and press Enter (a trailing ';' is escaped: tmux reads it as a separator)."""
        keys = line[:-1] + "\\;" if line.endswith(";") else line
        self("send-keys", "-t", "repl", keys, "Enter")

    def alive(self) -> bool:
        return self("has-session", "-t", "repl").returncode == 0


# Skipped only outside CI: .ci/run installs tmux, and there a missing tmux is a failure.
@pytest.mark.skipif(shutil.which("tmux") is None and not os.environ.get("CI"),
                    reason="tmux is not installed: no pseudo-terminal to drive")
def test_interactive_session_in_a_real_terminal(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    tmux = Tmux(tmp_path / "tmux.sock")
    cmd = (f"env HOME={home} XDG_CONFIG_HOME={home / '.config'} PYTHONPATH={ENV['PYTHONPATH']} "
           f"{sys.executable} -m dpsql --demo")
    assert tmux("new-session", "-d", "-s", "repl", "-x", "120", "-y", "50", "-c", str(ROOT), cmd).returncode == 0
    try:
        tmux.wait_for("dpsql>")
        tmux.type("SELECT sex, DP_COUNT(*) AS n")
        tmux.type("FROM adult GROUP BY sex")
        tmux.type("WITH (epsilon = 0.5);")
        screen = tmux.wait_for("-- budget:")
        assert "..> FROM adult GROUP BY sex" in screen  # continuation prompt: one statement, three lines
        assert "│ sex    │" in screen and "│ Female │" in screen and "│ Male   │" in screen
        assert "-- DP_COUNT(*): laplace, ε=0.5, ±" in screen
        assert "remaining ε=9.500" in screen
        tmux.type(".budget")
        screen = tmux.wait_for("│ mechanisms │")
        assert "spent ε=0.500" in screen
        tmux("send-keys", "-t", "repl", "C-d")
        deadline = time.monotonic() + 30
        while tmux.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not tmux.alive(), "Ctrl-D did not end the shell"
        history = (home / ".config" / "dpsql" / "history").read_text(encoding="utf-8")
        assert "+WITH (epsilon = 0.5);" in history and "+.budget" in history
    finally:
        tmux("kill-server")


@pytest.mark.skipif(shutil.which("tmux") is None and not os.environ.get("CI"),
                    reason="tmux is not installed: no pseudo-terminal to drive")
def test_ctrl_c_cancels_a_running_query_and_the_shell_goes_on(tmp_path: Path) -> None:
    import duckdb

    from tests.test_cancel import BIG, FAST, POLICY_TOML, SLOW

    with duckdb.connect(str(tmp_path / "big.duckdb")) as raw:
        raw.execute(BIG)  # a view DuckDB needs minutes to read
    (tmp_path / "p.toml").write_text(POLICY_TOML, encoding="utf-8")
    dpsql.connect(str(tmp_path / "big.duckdb"), str(tmp_path / "p.toml"), init_ledger=True, read_only=True).close()
    home = tmp_path / "home"
    home.mkdir()
    tmux = Tmux(tmp_path / "tmux.sock")
    cmd = (f"env HOME={home} XDG_CONFIG_HOME={home / '.config'} PYTHONPATH={ENV['PYTHONPATH']} "
           f"{sys.executable} -m dpsql big.duckdb --policy p.toml")
    assert tmux("new-session", "-d", "-s", "repl", "-x", "120", "-y", "50", "-c", str(tmp_path), cmd).returncode == 0
    try:
        tmux.wait_for("dpsql>")
        tmux.type(FAST + ";")  # the first query imports the pipeline: then the slow one starts at once
        tmux.wait_for("-- budget:")
        tmux.type(SLOW + ";")
        time.sleep(1.0)  # the statistics statement is running
        sent = time.monotonic()
        tmux("send-keys", "-t", "repl", "C-c")
        screen = tmux.wait_for("Query cancelled; nothing was charged", timeout=10)
        assert time.monotonic() - sent < 2.0, "the query went on after Ctrl-C"
        assert "Error" not in screen and "interrupted" not in screen
        tmux.type(FAST.replace("epsilon = 1", "epsilon = 0.5") + ";")  # the shell is still open: it runs
        tmux.wait_for("remaining ε=8.500")  # 1 + 0.5 spent: the cancelled query charged nothing
        tmux.type(".budget")
        history = tmux.wait_for("│ mechanisms │").split("dpsql> .budget")[1]
        assert "│ 2 │" in history and "│ 3 │" not in history and "FROM big" not in history
    finally:
        tmux("kill-server")
