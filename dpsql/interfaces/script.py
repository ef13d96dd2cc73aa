"""Running a script without a prompt: ``dpsql -c``, ``dpsql -f FILE`` and piped input.

SQL statements and special commands (``.budget``, ``.tables``, ... each on a line of its own)
run in order, as in the shell, and a failing one does not stop the others:

* results go to standard output, or to the file named by ``.output FILE``;
* a table's privacy report follows it; for CSV and JSON the report goes to standard error, so
  that standard output stays valid CSV or JSON;
* an error prints ``Error: ...`` on standard error, prefixed in a file (or piped input) with the
  statement's number and line; a syntax error adds the line and a caret under the token;
* after the last statement, if any spent budget, one ``-- budget: ...`` line goes to standard
  error, like the shell's line after each result;
* Ctrl-C stops the script: :class:`~dpsql.errors.QueryCancelled` goes on to the caller (the
  command prints its line and exits with status 130), after showing a result it charged.
"""

from __future__ import annotations

import sys
import typing as t

from dpsql.errors import Error, ParseError, QueryCancelled
from dpsql.interfaces.console import Item, one_line, pointer_lines, split_script
from dpsql.interfaces.output import render_result
from dpsql.interfaces.repl.state import ReplState


class ScriptRunner:
    """Runs scripts on a connection; :attr:`failed` tells whether anything failed."""

    def __init__(self, con: t.Any, fmt: str = "table", report: bool = True) -> None:
        self.con = con
        self.state = ReplState(con, fmt=fmt)
        self.state.script_runner = self._read
        self.report = report
        self.failed = False
        self.spent = False

    # -- running --------------------------------------------------------------------------------

    def run(self, text: str, source: str | None = None, numbered: bool = True) -> None:
        """Run every statement and special command of ``text``.

        ``numbered``: prefix errors with the statement's number and line (and ``source``, the
        file's name, when given).
        """
        number = 0
        for item in split_script(text):
            if self.state.quit:
                return
            if item.kind == "sql":
                number += 1
            where = (item, number, source) if numbered else None
            if item.kind == "special":
                self._special(item, where)
            elif item.text.lower() in ("quit", "exit"):
                self.state.quit = True
            else:
                self._statement(item, where)

    def finish(self) -> None:
        """The budget line on standard error, if any statement spent budget; close ``.output``."""
        try:
            if self.spent and self.report:
                print(f"-- budget: {self.state.con.budget}", file=sys.stderr, flush=True)
        finally:
            self.state.close_output()
            self.state.close_opened(self.con)

    def _read(self, state: ReplState, text: str) -> None:
        """``.read FILE`` inside a script: the file's statements, numbered in that file."""
        files = state.read_files
        self.run(text, source=files[-1] if files else None)

    def _special(self, item: Item, where: Where) -> None:
        from dpsql.interfaces.repl import special

        try:
            special.dispatch(self.state, item.text)
        except Error as err:
            self._error(err, where)
        finally:
            if not special.is_once(item.text):
                self.state.end_once()

    def _statement(self, item: Item, where: Where) -> None:
        try:
            self._answer(item, where)
        finally:
            self.state.end_once()

    def _answer(self, item: Item, where: Where) -> None:
        try:
            result = self.state.con.sql(item.text)
        except Error as err:
            self._error(err, where)
            return
        except QueryCancelled as err:
            if err.result is not None:  # Ctrl-C came after the charge: the released result is shown
                self._show(err.result)
            raise
        self._show(result)

    # -- printing -------------------------------------------------------------------------------

    def _show(self, result: t.Any) -> None:
        state = self.state
        if result.columns == ["explain"]:  # EXPLAIN: plain text, whatever the format
            state.emit("\n".join(row[0] for row in result.fetchall()))
            return
        state.emit(render_result(state.fmt, result, types=state.types, max_rows=state.max_rows))
        if result.report or _spent(result.cost):
            self.spent = True
        if not self.report:
            return
        for line in [*result.report_lines(), *result.notes]:
            if state.fmt == "table":
                state.emit(f"-- {line}")
            else:
                print(f"-- {line}", file=sys.stderr, flush=True)

    def _error(self, err: Error, where: Where) -> None:
        self.failed = True
        print(f"Error: {_located(err, where)}", file=sys.stderr, flush=True)
        for line in pointer_lines(err):
            print(line, file=sys.stderr, flush=True)


#: (the item, its statement number, the file's name) when errors say where they are
Where = tuple[Item, int, "str | None"] | None


def _located(err: Error, where: Where) -> str:
    """The error's line, prefixed with where in the script it happened.

    A syntax error's own line number is within its statement: in a script it is turned into
    the script's line (``statement 3 (line 9 of q.sql): syntax error at column 14 near ...``).
    """
    if where is None:
        return one_line(err)
    item, number, source = where
    line, text = item.line, one_line(err)
    if isinstance(err, ParseError) and err.line is not None and err.reason:
        line += err.line - 1
        text = f"syntax error at column {err.column} {one_line(ParseError(err.reason))}"
    at = f"line {line}" + (f" of {source}" if source else "")
    if item.kind == "special":
        return f"{at}: {text}"
    return f"statement {number} ({at}): {text}"


def _spent(cost: t.Any) -> bool:
    return bool(getattr(cost, "epsilon", 0) or getattr(cost, "delta", 0) or getattr(cost, "rho", 0))
