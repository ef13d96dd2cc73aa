"""Running what the user submits — SQL statements or special commands — and printing the outcome.

:class:`ReplState` holds what the special commands can change (output format, timer, output
file) and knows where text goes:

* results go to the *target*: standard output, or the file named by ``.output FILE``;
* the privacy report and the remaining budget follow a table on the target, and go to the
  terminal for CSV / JSON (so an ``.output`` file stays valid CSV or JSON);
* ``Error: ...`` goes to standard error, in red when that is a terminal.

A failing statement never ends the shell: the error is printed and the next one runs. Ctrl-C
while statements run (a ``.read`` file included) stops them and prints one line
(:func:`interrupted`); the shell goes on.
"""

from __future__ import annotations

import time
import typing as t

from dpsql.errors import Error, QueryCancelled
from dpsql.interfaces.console import interrupted_line, is_special, one_line, pointer_lines, split_statements
from dpsql.interfaces.output import render_result
from dpsql.interfaces.repl.state import ReplState


def run_input(state: ReplState, text: str) -> None:
    """Run one submission: a special command, or one or more ``;``-separated SQL statements."""
    from dpsql.interfaces.repl import special

    if state.script_runner is None:
        state.script_runner = run_script
    if not text.strip():
        return
    if is_special(text):
        try:
            guarded(state, special.dispatch, state, text.strip())
        finally:
            if not special.is_once(text):
                state.end_once()
        return
    try:
        statements = split_statements(text)
    except Error as err:
        state.error(one_line(err))
        return
    for stmt in statements:
        if state.quit:
            return
        if stmt.lower() in ("quit", "exit"):
            state.quit = True
            return
        run_statement(state, stmt)


def run_script(state: ReplState, text: str) -> None:
    """Run a script: SQL statements, and special commands each on a line of its own."""
    sql: list[str] = []

    def flush() -> None:
        if "".join(sql).strip():
            run_input(state, "".join(sql))
        sql.clear()

    for line in text.splitlines(keepends=True):
        if state.quit:
            return
        if is_special(line) and not "".join(sql).strip():
            run_input(state, line)
        else:
            sql.append(line)
            if line.rstrip().endswith(";"):
                flush()
    flush()


def run_statement(state: ReplState, stmt: str) -> None:
    """Run one SQL statement and print its result, report and remaining budget (to the
    ``.once`` file, if one waits for it: closed after the statement, whatever happened)."""
    try:
        _statement(state, stmt)
    finally:
        state.end_once()


def _statement(state: ReplState, stmt: str) -> None:
    start = time.perf_counter()
    try:
        result = state.con.sql(stmt)
    except Error as err:
        state.error(one_line(err), pointer_lines(err))
        return
    except QueryCancelled as err:
        if err.result is not None:  # Ctrl-C came after the charge: the released result is shown
            print_result(state, err.result)
        raise
    except Exception as err:  # a bug: one line, and the shell goes on
        state.error(f"internal error ({type(err).__name__}): {one_line(err)}")
        return
    finally:
        state.changed()
    elapsed = time.perf_counter() - start
    state.last = result
    print_result(state, result)
    if state.timer:
        state.echo(f"Run Time: {elapsed:.3f} s")


def print_result(state: ReplState, result: t.Any) -> None:
    """The rows in the current format, then (for a DP result) its report and the budget left."""
    state.emit(render_result(state.fmt, result, types=state.types, max_rows=state.max_rows))
    lines = [*result.report_lines(), *result.notes]
    if result.report or _spent(result.cost):
        lines.append(f"budget: {state.con.budget}")
    say = state.emit if state.fmt == "table" else state.echo
    for line in lines:
        say(f"-- {line}")


def guarded(state: ReplState, func: t.Callable[..., None], *args: t.Any) -> None:
    """Call ``func``; print an ``Error:`` line instead of raising."""
    try:
        func(*args)
    except Error as err:
        state.error(one_line(err))
    except Exception as err:
        state.error(f"internal error ({type(err).__name__}): {one_line(err)}")


def interrupted(state: ReplState, err: KeyboardInterrupt) -> None:
    """After Ctrl-C stopped a submission: its one line on standard error (not an error)."""
    import sys

    print(interrupted_line(err), file=sys.stderr, flush=True)


def _spent(cost: t.Any) -> bool:
    return bool(getattr(cost, "epsilon", 0) or getattr(cost, "delta", 0) or getattr(cost, "rho", 0))
