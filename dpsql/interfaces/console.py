"""What every command-line entry shares: exit codes, the argument parser, one-line errors and
splitting a script into statements."""

from __future__ import annotations

import argparse
import sys
import typing as t

from dpsql.errors import Error

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> t.NoReturn:
        self.print_usage(sys.stderr)
        print(f"Error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def split_statements(text: str) -> list[str]:
    """Split a script on semicolons outside strings, identifiers and comments."""
    from dpsql.sql.dialect import DPSQL
    from sqlglot.errors import TokenError
    from sqlglot.tokens import TokenType

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


def one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return text or type(err).__name__
