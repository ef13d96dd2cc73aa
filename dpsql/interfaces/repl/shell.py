"""The interactive shell: a prompt_toolkit session wired to a :class:`dpsql.Connection`.

* multi-line input: Enter submits once the statement ends with ``;`` (special commands,
  ``quit`` and ``exit`` submit at once; Esc-Enter submits anything), otherwise starts a new line;
* highlighting with :class:`~dpsql.interfaces.repl.lexer.DPSQLLexer`, completion with
  :class:`~dpsql.interfaces.repl.completer.DPSQLCompleter`, suggestions from history;
* history in ``$XDG_CONFIG_HOME/dpsql/history`` (default ``~/.config/dpsql/history``);
* Ctrl-C clears the current input; while a statement runs it cancels it (nothing is charged)
  and the shell goes on; Ctrl-D on an empty line exits;
* a bottom toolbar shows the remaining budget and the output mode.
"""

from __future__ import annotations

import os
import typing as t
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.auto_suggest import AutoSuggestFromHistory
from prompt_toolkit.enums import DEFAULT_BUFFER
from prompt_toolkit.filters import has_focus, in_paste_mode
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.lexers import PygmentsLexer
from prompt_toolkit.styles import Style, merge_styles, style_from_pygments_dict
from pygments.token import Keyword, Name

from dpsql.interfaces.repl import special
from dpsql.interfaces.repl.completer import DPSQLCompleter
from dpsql.interfaces.repl.executor import interrupted, is_special, run_input
from dpsql.interfaces.repl.lexer import DPSQLLexer
from dpsql.interfaces.repl.state import ReplState

PROMPT = "dpsql> "
CONTINUATION = "..> "

STYLE = merge_styles([
    style_from_pygments_dict({
        Name.Builtin: "bold ansimagenta",
        Name.Attribute: "ansicyan",
        Name.Constant: "ansiyellow",
        Keyword.Pseudo: "bold ansiblue",
    }),
    Style.from_dict({
        "prompt": "bold",
        "continuation": "ansibrightblack",
        "bottom-toolbar": "noreverse bg:ansibrightblack ansiwhite",
    }),
])


def default_history_path() -> Path:
    """``$XDG_CONFIG_HOME/dpsql/history``, or ``~/.config/dpsql/history``."""
    base = os.environ.get("XDG_CONFIG_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".config"
    return root / "dpsql" / "history"


def open_history(path: str | os.PathLike[str] | None) -> History:
    """A :class:`FileHistory` at ``path`` (default :func:`default_history_path`), creating its
    directory; an in-memory history if the file cannot be created."""
    target = Path(path) if path is not None else default_history_path()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch(exist_ok=True)
    except OSError:
        return InMemoryHistory()
    return FileHistory(str(target))


def statement_complete(text: str) -> bool:
    """Whether Enter should submit ``text``: empty, a special command, ``quit``/``exit``, or SQL
    whose last token is ``;`` (a ``;`` inside a string or comment does not count)."""
    stripped = text.strip()
    if not stripped or is_special(stripped) or stripped.lower() in ("quit", "exit"):
        return True
    if not stripped.endswith(";") and "--" not in stripped and "*/" not in stripped:
        return False
    from sqlglot import TokenType
    from sqlglot.errors import TokenError

    from dpsql._sql.dialect import DPSQL

    try:
        tokens = DPSQL().tokenize(stripped)
    except TokenError:
        return False
    return bool(tokens) and tokens[-1].token_type == TokenType.SEMICOLON


def key_bindings() -> KeyBindings:
    """Enter submits a complete statement and otherwise inserts a newline."""
    kb = KeyBindings()

    @kb.add("enter", filter=has_focus(DEFAULT_BUFFER))
    def _enter(event: KeyPressEvent) -> None:
        buf = event.current_buffer
        if buf.complete_state is not None and buf.complete_state.current_completion is not None:
            buf.complete_state = None  # keep the highlighted completion, close the menu
            return
        if statement_complete(buf.text):
            buf.validate_and_handle()
        else:
            buf.newline(copy_margin=not in_paste_mode())

    return kb


class Toolbar:
    """The bottom toolbar's text, recomputed only after a statement ran."""

    def __init__(self, state: ReplState) -> None:
        self.state = state
        self._budget: str | None = None

    def invalidate(self) -> None:
        self._budget = None

    def __call__(self) -> str:
        if self._budget is None:
            try:
                from dpsql._accounting.budget import format_cost

                status = self.state.con.budget
                self._budget = (f"remaining {format_cost(status.remaining, status.kind)} "
                                f"of {format_cost(status.total, status.kind)}")
            except Exception:
                self._budget = "budget unavailable"
        out = f" to {self.state.target_name}" if self.state.target_name else ""
        return f" budget: {self._budget} │ mode: {self.state.fmt}{out} │ .help  Ctrl-D exits "


def make_session(
    state: ReplState,
    input: t.Any = None,
    output: t.Any = None,
    history_file: str | os.PathLike[str] | None = None,
) -> PromptSession[str]:
    """The prompt_toolkit session of the shell."""
    toolbar = Toolbar(state)
    completer = DPSQLCompleter(state.con, special.completion_kinds())
    state.on_change.append(toolbar.invalidate)

    def reopened() -> None:
        completer.con = state.con
        completer.refresh()

    state.on_open.append(reopened)
    return PromptSession(
        message=[("class:prompt", PROMPT)],
        multiline=True,
        prompt_continuation=lambda width, line, wrap: [("class:continuation", CONTINUATION.rjust(width))],
        lexer=PygmentsLexer(DPSQLLexer),
        completer=completer,
        complete_while_typing=True,
        auto_suggest=AutoSuggestFromHistory(),
        history=open_history(history_file),
        key_bindings=key_bindings(),
        bottom_toolbar=toolbar,
        style=STYLE,
        input=input,
        output=output,
    )


def run_repl(
    con: t.Any,
    fmt: str = "table",
    input: t.Any = None,
    output: t.Any = None,
    history_file: str | os.PathLike[str] | None = None,
) -> int:
    """Run the interactive shell on ``con`` until ``.quit`` or Ctrl-D; return the exit status (0).

    ``input`` / ``output`` are prompt_toolkit ``Input`` / ``Output`` objects (default: the
    terminal); ``history_file`` overrides :func:`default_history_path`.
    """
    from dpsql import __version__

    state = ReplState(con, fmt=fmt)
    session = make_session(state, input=input, output=output, history_file=history_file)
    state.echo(f"dpsql {__version__}: differentially private SQL on DuckDB")
    state.echo("Statements end with ';'. Enter .help for commands, Ctrl-D to exit.")
    try:
        while not state.quit:
            try:
                text = session.prompt()
            except KeyboardInterrupt:
                continue
            except EOFError:
                break
            try:
                run_input(state, text)
            except KeyboardInterrupt as err:  # Ctrl-C while it ran: stopped, and the shell goes on
                interrupted(state, err)
    finally:
        state.close_output()
        state.close_opened(con)
    return 0
