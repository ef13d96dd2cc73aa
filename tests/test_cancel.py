"""Ctrl-C while a query runs (dpsql._query.cancel): the engine stops within a second, the caller
gets QueryCancelled (a KeyboardInterrupt, not an Exception) and nothing is charged; after the
charge the release finishes and is kept. The Python API, ``-c`` and the notebook magic here; the
shell in a real terminal is in tests/test_repl.py.

The slow query reads a view over a cross join of two ``range(100000)`` (10^10 rows): DuckDB
needs minutes for it, so a test that does not cancel it fails on its time limit, not by luck."""

from __future__ import annotations

import _thread
import os
import select
import signal
import subprocess
import sys
import threading
import time
import typing as t
from pathlib import Path

import duckdb
import pytest

import dpsql
from dpsql._privacy.noise import SeededNoise
from dpsql._query import cancel
from dpsql.errors import CANCELLED, QueryCancelled

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ,
       "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
BIG = ("CREATE VIEW big AS SELECT (a.range * 7 + b.range) % 100 AS x FROM range(100000) a, range(100000) b; "
       "CREATE TABLE small AS SELECT 1 AS x")
TABLE = {"privacy_unit": "row", "max_rows_per_unit": 1, "columns": {"x": {"lower": 0, "upper": 100}}}
POLICY = {"budget": {"epsilon": 10.0, "delta": 1e-5}, "tables": {"big": TABLE, "small": TABLE}}
SLOW = "SELECT DP_SUM(x) AS s, DP_COUNT(*) AS n FROM big WITH (epsilon = 1)"
FAST = "SELECT DP_COUNT(*) AS n FROM small WITH (epsilon = 1)"
POLICY_TOML = """[budget]
epsilon = 10.0
delta = 1e-5
ledger = "ledger.db"

[tables.big]
privacy_unit = "row"
max_rows_per_unit = 1
columns = { x = { lower = 0, upper = 100 } }

[tables.small]
privacy_unit = "row"
max_rows_per_unit = 1
columns = { x = { lower = 0, upper = 100 } }
"""


@pytest.fixture
def con() -> t.Iterator[dpsql.Connection]:
    c = dpsql.connect(":memory:", POLICY, setup=lambda d: d.execute(BIG))
    yield c
    c.close()


#: one event per signal sender: set when its test is over, so that no Ctrl-C lands in a later test
SENDERS: list[threading.Event] = []


@pytest.fixture(autouse=True)
def _no_ctrl_c_outlives_its_test() -> t.Iterator[None]:
    yield
    for over in SENDERS:
        over.set()
    SENDERS.clear()


def _wait_for_the_query(over: threading.Event) -> None:
    """Wait (at most 10 s) until a query's Ctrl-C handling is in place on the main thread: a
    loaded machine can stall the main thread before ``con.sql`` is reached, and a Ctrl-C then
    would be Python's own. Should it never be in place, the Ctrl-C is sent anyway, and fails the
    test."""
    deadline = time.monotonic() + 10
    while not over.is_set() and time.monotonic() < deadline:
        watcher = cancel._WATCHER
        if watcher is not None and watcher.active is not None:
            return
        time.sleep(0.005)


def interrupt_after(delay: float, how: str, con: dpsql.Connection) -> list[float]:
    """Send Ctrl-C to this process ``delay`` seconds after the query started (``os.kill`` or
    ``interrupt_main``); the returned list gets the time it was sent. Should the cancellation not
    work, the query is stopped after 20 s by DuckDB's own interrupt, so that the test fails
    instead of hanging. Nothing is sent once the test is over."""
    sent: list[float] = []
    over = threading.Event()
    SENDERS.append(over)

    def fire() -> None:
        _wait_for_the_query(over)
        if over.wait(delay):
            return
        sent.append(time.monotonic())
        if how == "kill":
            os.kill(os.getpid(), signal.SIGINT)
        else:
            _thread.interrupt_main()
        if over.wait(20):
            return
        try:
            con.engine.connection.interrupt()
        except Exception:  # noqa: BLE001 - the test is over and its connection closed
            pass

    threading.Thread(target=fire, daemon=True).start()
    return sent


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT is sent with os.kill")
@pytest.mark.parametrize("how", ["kill", "interrupt_main"])
def test_ctrl_c_stops_a_running_query_at_once_and_charges_nothing(con: dpsql.Connection, how: str) -> None:
    sent = interrupt_after(0.5, how, con)
    with pytest.raises(QueryCancelled) as caught:
        con.sql(SLOW)
    waited = time.monotonic() - sent[0]
    assert waited < 2.0, f"the query stopped {waited:.1f} s after Ctrl-C"
    err = caught.value
    assert isinstance(err, KeyboardInterrupt) and not isinstance(err, Exception)  # `except Exception` lets it by
    assert str(err) == CANCELLED == "Query cancelled; nothing was charged" and err.result is None
    assert con.budget.spent.epsilon == 0 and con.budget.history == []
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
    assert signal.set_wakeup_fd(-1) == -1  # no wakeup descriptor left behind
    assert con.sql(FAST).columns == ["n"] and len(con.budget.history) == 1  # the connection goes on


def test_ctrl_c_before_the_statistics_run_stops_the_query(con: dpsql.Connection, monkeypatch) -> None:
    prepare = dpsql.Connection.prepare

    def slow_planning(self: dpsql.Connection, query: str, parsed: t.Any = None) -> t.Any:
        prepared = prepare(self, query, parsed)
        signal.raise_signal(signal.SIGINT)  # while planning: the statistics must not run at all
        return prepared

    monkeypatch.setattr(dpsql.Connection, "prepare", slow_planning)
    start = time.monotonic()
    with pytest.raises(QueryCancelled, match="nothing was charged"):
        con.sql(SLOW)
    assert time.monotonic() - start < 2.0
    assert con.budget.history == []


def test_ctrl_c_after_the_charge_keeps_the_release_and_says_what_it_cost() -> None:
    c = dpsql.connect(":memory:", POLICY, setup=lambda d: d.execute(BIG), noise=SeededNoise(0))
    charge = c.ledger.charge

    def charge_then_ctrl_c(*args: t.Any, **kwargs: t.Any) -> t.Any:
        entry = charge(*args, **kwargs)
        signal.raise_signal(signal.SIGINT)
        return entry

    c.ledger.charge = charge_then_ctrl_c  # type: ignore[method-assign]
    with pytest.raises(QueryCancelled) as caught:
        c.sql("SELECT DP_COUNT(*) AS n FROM small WITH (epsilon = 0.5)")
    assert str(caught.value) == "Query cancelled after its release: ε=0.500, δ=0 was charged; the result is kept"
    assert caught.value.result is not None and caught.value.result.columns == ["n"]
    assert c.budget.spent.epsilon == pytest.approx(0.5)
    c.close()


def test_an_ignored_sigint_is_left_alone(con: dpsql.Connection) -> None:
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        assert con.sql(FAST).columns == ["n"]
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_query_on_another_thread_runs_as_before(con: dpsql.Connection) -> None:
    out: list[t.Any] = []
    worker = threading.Thread(target=lambda: out.append(con.sql(FAST).columns))
    worker.start()
    worker.join(30)
    assert out == [["n"]]


def test_the_notebook_shows_one_line(con: dpsql.Connection, capsys: pytest.CaptureFixture[str]) -> None:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "dpsql")
    shell.user_ns["con"] = con
    try:
        interrupt_after(0.5, "kill", con)
        capsys.readouterr()
        out = shell.run_cell(f"%%dpsql con\n{SLOW}\n")
        shown = capsys.readouterr()
    finally:
        shell.user_ns.pop("con", None)
    assert isinstance(out.error_in_exec, QueryCancelled)
    assert (shown.out + shown.err).strip() == CANCELLED
    assert con.budget.history == []


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT is sent with send_signal")
@pytest.mark.parametrize("form", ["-c", "-f"])
def test_the_command_line_exits_130_with_one_line(tmp_path: Path, form: str) -> None:
    database = tmp_path / "big.duckdb"
    with duckdb.connect(str(database)) as raw:
        raw.execute(BIG)
    (tmp_path / "p.toml").write_text(POLICY_TOML, encoding="utf-8")
    base = [sys.executable, "-m", "dpsql", str(database), "--policy", "p.toml"]
    subprocess.run([*base, "--init-ledger"], cwd=tmp_path, env=ENV, capture_output=True, timeout=60, check=True)
    if form == "-c":
        statements = ["-c", ".tables", "-c", SLOW, "-c", FAST]
    else:  # a script: the statements after the cancelled one do not run either
        (tmp_path / "q.sql").write_text(f".tables\n{SLOW};\n{FAST};\n", encoding="utf-8")
        statements = ["-f", "q.sql"]
    proc = subprocess.Popen([*base, *statements], cwd=tmp_path, env=ENV, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 60)  # .tables printed: the slow query is next
        assert ready, "the command printed nothing"
        time.sleep(1.5)  # the slow query has started, even on a loaded machine (before it: "Interrupted")
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert time.monotonic() - sent < 2.5  # the query stopped and the process exited
    assert proc.returncode == 130
    assert err == CANCELLED + "\n"  # one line
    assert "│ big   │ private │" in out and "│ n " not in out  # the -c after the cancelled one did not run
    budget = subprocess.run([*base, "--budget"], cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=60)
    assert "spent ε=0.000" in budget.stdout and "no query has spent budget yet" in budget.stdout


def test_a_ctrl_c_the_watcher_reads_late_is_not_the_next_querys(con: dpsql.Connection, monkeypatch) -> None:
    """One Ctrl-C reaches the handler and the watcher thread, in either order. On a loaded
    machine the handler can stop the query before the watcher wakes; the watcher must then not
    take the signal's byte for a Ctrl-C on the next query (it raised QueryCancelled there, after
    that query's charge). The watcher is held back here until the next query has been charged."""
    watcher = cancel._watcher()
    release, read = threading.Event(), threading.Event()
    dispatch = watcher.dispatch

    def late(data: bytes) -> None:
        release.wait(10)
        dispatch(data)
        read.set()

    monkeypatch.setattr(watcher, "dispatch", late)
    prepare = dpsql.Connection.prepare

    def ctrl_c_while_planning(self: dpsql.Connection, query: str, parsed: t.Any = None) -> t.Any:
        prepared = prepare(self, query, parsed)
        if "big" in query:
            signal.raise_signal(signal.SIGINT)
        return prepared

    monkeypatch.setattr(dpsql.Connection, "prepare", ctrl_c_while_planning)
    with pytest.raises(QueryCancelled, match="nothing was charged"):
        con.sql(SLOW)
    charge = con.ledger.charge

    def charge_then_let_the_watcher_read(*args: t.Any, **kwargs: t.Any) -> t.Any:
        entry = charge(*args, **kwargs)
        release.set()
        assert read.wait(10), "the watcher never read the byte"
        return entry

    monkeypatch.setattr(con.ledger, "charge", charge_then_let_the_watcher_read)
    assert con.sql(FAST).columns == ["n"]  # not cancelled by the first query's Ctrl-C
    assert len(con.budget.history) == 1 and watcher.barriers == 0
    monkeypatch.undo()
    sent = interrupt_after(0.5, "kill", con)  # the watcher still cancels the query after at once
    with pytest.raises(QueryCancelled):
        con.sql(SLOW)
    assert time.monotonic() - sent[0] < 2.0
