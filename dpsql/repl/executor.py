"""Running what the user submits — SQL statements or special commands — and printing the outcome.

:class:`ReplState` holds what the special commands can change (output format, timer, output
file) and knows where text goes:

* results go to the *target*: standard output, or the file named by ``.output FILE``;
* the privacy report and the remaining budget follow a table on the target, and go to the
  terminal for CSV / JSON (so an ``.output`` file stays valid CSV or JSON);
* ``Error: ...`` goes to standard error, in red when that is a terminal.

A failing statement never ends the shell: the error is printed and the next one runs.
"""

from __future__ import annotations

import os
import sys
import time
import typing as t
from dataclasses import dataclass, field

from dpsql.cli import one_line, split_statements
from dpsql.errors import Error
from dpsql.output import render

#: How deep ``.read`` may nest (a file that reads itself stops here).
MAX_READ_DEPTH = 16
#: Files SQLite and DuckDB keep next to a database: overwriting one damages the database too.
SIDE_FILES = ("-wal", "-shm", "-journal", ".wal")


@dataclass
class ReplState:
    """The shell's mutable state and its output streams."""

    con: t.Any
    fmt: str = "table"
    timer: bool = False
    quit: bool = False
    #: the file ``.output FILE`` opened, or ``None`` for standard output
    target_file: t.TextIO | None = None
    target_name: str | None = None
    read_depth: int = 0
    #: called after every statement that may have spent budget (the shell refreshes its toolbar)
    on_change: list[t.Callable[[], None]] = field(default_factory=list)

    # -- streams --------------------------------------------------------------------------------

    @property
    def target(self) -> t.TextIO:
        """Where results go: the ``.output`` file or standard output."""
        return self.target_file if self.target_file is not None else sys.stdout

    def echo(self, text: str = "") -> None:
        """Print ``text`` on the terminal (standard output), whatever ``.output`` says."""
        print(text, file=sys.stdout, flush=True)

    def emit(self, text: str) -> None:
        """Print ``text`` on the target."""
        print(text, file=self.target, flush=True)

    def error(self, message: str) -> None:
        """Print ``Error: message`` on standard error, in red on a terminal."""
        text = f"Error: {message}"
        stream = sys.stderr
        if _isatty(stream):
            from prompt_toolkit import print_formatted_text
            from prompt_toolkit.formatted_text import FormattedText

            print_formatted_text(FormattedText([("ansired", text)]), file=stream)
            stream.flush()
        else:
            print(text, file=stream, flush=True)

    def set_output(self, path: str | None) -> None:
        """Send results to ``path`` (truncated) or, with ``None``, back to standard output.

        Refuses (Error) a path that is, or resolves to, a file of the connection: see
        :func:`refuse_connection_file`.
        """
        if path is not None:
            refuse_connection_file(self.con, path)
            try:
                fh = open(path, "w", encoding="utf-8")  # noqa: SIM115 - kept open until .output
            except OSError as err:
                raise Error(f"cannot write {path}: {err.strerror}") from None
        self.close_output()
        if path is not None:
            self.target_file, self.target_name = fh, path

    def close_output(self) -> None:
        """Close the ``.output`` file, if any."""
        if self.target_file is not None:
            self.target_file.close()
        self.target_file, self.target_name = None, None

    def changed(self) -> None:
        for callback in self.on_change:
            callback()


def connection_files(con: t.Any) -> list[tuple[str, str]]:
    """``(what, path)`` of the files ``con`` depends on: its budget ledger, database and policy."""
    files = []
    ledger = getattr(getattr(con, "ledger", None), "path", None)
    if ledger:
        files.append(("the budget ledger", ledger))
    files += [("the database", path) for path in getattr(con, "database_files", ())]
    source = getattr(getattr(con, "policy", None), "source", None)
    if source:
        files.append(("the policy file", source))
    return files


def refuse_connection_file(con: t.Any, path: str) -> None:
    """Raise Error if writing ``path`` would write over a file of ``con`` or one of its side files
    (``-wal``, ``-shm``, ``-journal``, ``.wal``), also through symbolic or hard links."""
    real = os.path.realpath(path)
    try:
        stat = os.stat(path)
    except OSError:
        stat = None  # does not exist (yet): only its resolved path can match
    for what, file in connection_files(con):
        for suffix in ("", *SIDE_FILES):
            guarded = file + suffix
            same = os.path.realpath(guarded) == real
            if not same and stat is not None:
                try:
                    same = os.path.samestat(stat, os.stat(guarded))
                except OSError:
                    pass
            if same:
                which = f"the {suffix} file of {what}" if suffix else what
                raise Error(f"cannot write results to {path}: it is {which} {file} of this connection; "
                            "choose another file")


def is_special(text: str) -> bool:
    """Whether ``text`` is a special command (``.tables``, ``\\dt``, ...) rather than SQL."""
    return text.lstrip().startswith((".", "\\"))


def run_input(state: ReplState, text: str) -> None:
    """Run one submission: a special command, or one or more ``;``-separated SQL statements."""
    from dpsql.repl import special

    if not text.strip():
        return
    if is_special(text):
        guarded(state, special.dispatch, state, text.strip())
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
    """Run one SQL statement and print its result, report and remaining budget."""
    start = time.perf_counter()
    try:
        result = state.con.sql(stmt)
    except Error as err:
        state.error(one_line(err))
        return
    except KeyboardInterrupt:
        state.error("interrupted")
        return
    except Exception as err:  # a bug: one line, and the shell goes on
        state.error(f"internal error ({type(err).__name__}): {one_line(err)}")
        return
    finally:
        state.changed()
    elapsed = time.perf_counter() - start
    print_result(state, result)
    if state.timer:
        state.echo(f"Run Time: {elapsed:.3f} s")


def print_result(state: ReplState, result: t.Any) -> None:
    """The rows in the current format, then (for a DP result) its report and the budget left."""
    state.emit(render(state.fmt, result.columns, result.fetchall()))
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
    except KeyboardInterrupt:
        state.error("interrupted")
    except Exception as err:
        state.error(f"internal error ({type(err).__name__}): {one_line(err)}")


def _spent(cost: t.Any) -> bool:
    return bool(getattr(cost, "epsilon", 0) or getattr(cost, "delta", 0) or getattr(cost, "rho", 0))


def _isatty(stream: t.Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
