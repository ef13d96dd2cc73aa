"""The interactive dpsql shell (``dpsql`` with no ``-c``/``-f`` on a terminal).

Modules, one concern each: :mod:`~dpsql.interfaces.repl.lexer` (highlighting),
:mod:`~dpsql.interfaces.repl.completer` (completion), :mod:`~dpsql.interfaces.repl.special` (``.tables``,
``\\d``, ...), :mod:`~dpsql.interfaces.repl.executor` (running input, printing results) and
:mod:`~dpsql.interfaces.repl.shell` (the prompt session and :func:`run_repl`).
"""

from __future__ import annotations

import typing as t

__all__ = ["run_repl"]


def run_repl(
    con: t.Any,
    fmt: str = "table",
    input: t.Any = None,
    output: t.Any = None,
    history_file: t.Any = None,
) -> int:
    """Run the interactive shell on ``con``; see :func:`dpsql.interfaces.repl.shell.run_repl`."""
    from dpsql.interfaces.repl.shell import run_repl as _run

    return _run(con, fmt=fmt, input=input, output=output, history_file=history_file)
