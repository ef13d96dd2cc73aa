"""Number tokens as DuckDB reads them: ``1e9+0.001`` is ``1e9 + 0.001``, not one number.

sqlglot's tokenizer (30.x) takes a sign after an exponent's digits as part of the number, so
``1e9+0.001`` became one literal whose text is not a number, and ``1.5e3+2e1`` became that
literal ``1.5e3+2`` aliased ``e1``. DuckDB reads a sign as part of a number only right after its
``e``. A literal dpsql reads (a bound such as ``DP_MEAN(x, 1e9, 1e9+0.001)``) must mean what
the engine reads, and a malformed one must be a one-line refusal, not a Python ``ValueError``.
:func:`retokenize` cuts such a number after its exponent's digits, keeps the sign as an operator
and tokenizes the rest of the text afresh.

>>> from sqlglot.dialects.duckdb import DuckDB
>>> scan = DuckDB.Tokenizer().tokenize
>>> [(t.token_type.name, t.text) for t in retokenize("1e9+0.001", scan)]
[('NUMBER', '1e9'), ('PLUS', '+'), ('NUMBER', '0.001')]
>>> [t.text for t in retokenize("1.5e3+2e1-1e-2 AS x", scan)]
['1.5e3', '+', '2e1', '-', '1e-2', 'AS', 'x']
>>> [(t.text, t.start, t.end) for t in retokenize("SELECT 1e9-1", scan)][1:]
[('1e9', 7, 9), ('-', 10, 10), ('1', 11, 11)]
"""

from __future__ import annotations

import re
import typing as t

from sqlglot.tokens import Token, TokenType

__all__ = ["retokenize"]

#: a number with an exponent, then a sign and more: the sign is an operator
_GLUED = re.compile(r"^([0-9_.]*[eE][+-]?[0-9_]+)([+-])")
_SIGNS = {"+": TokenType.PLUS, "-": TokenType.DASH}


def _shifted(token: Token, at: int, line: int, col: int) -> Token:
    """``token`` of a text that starts at offset ``at`` (line ``line``, column ``col``)."""
    first = token.line == 1
    return Token(token.token_type, token.text, token.line + line - 1, token.col + col if first else token.col,
                 token.start + at, token.end + at, token.comments)


def retokenize(sql: str, scan: t.Callable[[str], list[Token]]) -> list[Token]:
    """The tokens of ``sql`` by ``scan`` (sqlglot's tokenizer), with a number glued to a following
    sign cut as DuckDB reads it (module docstring)."""
    tokens = list(scan(sql))
    for i, token in enumerate(tokens):
        match = _GLUED.match(token.text) if token.token_type == TokenType.NUMBER else None
        if match is None:
            continue
        head, sign = match.groups()
        cut = token.start + len(head)  # the sign's offset
        col = token.col - (token.end - cut)
        out = tokens[:i] + [Token(TokenType.NUMBER, head, token.line, col - 1, token.start, cut - 1, token.comments),
                            Token(_SIGNS[sign], sign, token.line, col, cut, cut)]
        return out + [_shifted(tok, cut + 1, token.line, col) for tok in retokenize(sql[cut + 1:], scan)]
    return tokens
