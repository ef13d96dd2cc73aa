"""What every command-line entry shares: exit codes, the argument parser, one-line errors and
splitting a script into statements."""

from __future__ import annotations

import argparse
import sys
import typing as t

from dpsql.errors import Error

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
#: the exit status after Ctrl-C (128 + SIGINT), as shells report it
EXIT_INTERRUPTED = 130


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> t.NoReturn:
        self.print_usage(sys.stderr)
        print(f"Error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def split_statements(text: str) -> list[str]:
    """Split a script on semicolons outside strings, identifiers and comments."""
    from sqlglot.errors import TokenError
    from sqlglot.tokens import TokenType

    from dpsql._sql.dialect import DPSQL

    try:
        tokens = DPSQL().tokenize(text)
    except TokenError as err:
        raise Error(f"cannot read the statements: {err}") from None
    out, start = [], 0
    for tok in tokens:
        if tok.token_type == TokenType.SEMICOLON:
            out.append(text[start:tok.start])
            start = tok.end + 1
    out.append(text[start:])
    return [s.strip() for s in out if s.strip()]


def interrupted_line(err: BaseException) -> str:
    """The one line a Ctrl-C prints: a cancelled query's message (nothing was charged, or what
    was), or ``Interrupted`` when no query was running."""
    from dpsql.errors import QueryCancelled

    return one_line(err) if isinstance(err, QueryCancelled) else "Interrupted"


def one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return text or type(err).__name__


def pointer_lines(err: BaseException, indent: str = "  ") -> list[str]:
    """For a syntax error that knows where it is: the statement's line and a caret under the token."""
    pointer = getattr(err, "pointer", None)
    return [indent + line for line in pointer()] if callable(pointer) else []


class Item(t.NamedTuple):
    """One unit of a script: an SQL statement or a special command, and the line it starts on."""

    kind: str  # "sql" or "special"
    text: str
    line: int


def is_special(text: str) -> bool:
    """Whether ``text`` is a special command (``.tables``, ``\\dt``, ...) rather than SQL."""
    return text.lstrip().startswith((".", "\\"))


def split_script(text: str) -> list[Item]:
    """Split a script into SQL statements and special commands, with the line each starts on.

    A special command is a line of its own starting with ``.`` or ``\\`` outside a statement;
    statements end with ``;`` outside strings, identifiers and comments (the last one may not).
    """
    items: list[Item] = []
    pending: list[str] = []
    start = 1

    def flush() -> None:
        chunk = "".join(pending)
        if chunk.strip():
            items.extend(Item("sql", stmt, start + line - 1) for stmt, line in _statements(chunk))
        pending.clear()

    for number, line in enumerate(text.splitlines(keepends=True), 1):
        if not "".join(pending).strip():
            if is_special(line):
                pending.clear()
                items.append(Item("special", line.strip(), number))
                continue
            if not pending:
                start = number
        pending.append(line)
        if line.rstrip().endswith(";") and _ends_statement("".join(pending)):
            flush()
    flush()
    return items


def _ends_statement(chunk: str) -> bool:
    from sqlglot.errors import TokenError
    from sqlglot.tokens import TokenType

    from dpsql._sql.dialect import DPSQL

    try:
        tokens = DPSQL().tokenize(chunk)
    except TokenError:
        return False  # e.g. inside a string that goes on on the next line
    return bool(tokens) and tokens[-1].token_type == TokenType.SEMICOLON


def _statements(text: str) -> list[tuple[str, int]]:
    """``(statement, line of its first token)`` for each ``;``-separated statement of ``text``."""
    from sqlglot.errors import TokenError
    from sqlglot.tokens import TokenType

    from dpsql._sql.dialect import DPSQL

    try:
        tokens = DPSQL().tokenize(text)
    except TokenError:
        return [(text.strip(), 1)]  # one statement: parsing it says what cannot be read
    out: list[tuple[str, int | None]] = []
    first: int | None = None  # the line of the statement's first token
    begin = 0
    for tok in tokens:
        if tok.token_type == TokenType.SEMICOLON:
            out.append((text[begin:tok.start], first))
            begin, first = tok.end + 1, None
        elif first is None:
            first = tok.line
    out.append((text[begin:], first))
    return [(s.strip(), line or 1) for s, line in out if s.strip()]
