"""Syntax errors that point at the token to fix.

sqlglot reports where it gave up, which is often a token after the mistake: in
``SELEC DP_MEAN(age) FROM adult`` it stops at ``(``, because ``SELEC DP_MEAN`` reads as a column
with an alias. :func:`syntax_error` looks at the tokens around that point for the usual
culprits (a misspelled first keyword, a misspelled clause keyword just before the stop) and
builds a :class:`~dpsql.errors.ParseError` whose line and column are those of the statement as
the caller gave it, with the line itself, so that a caret can be drawn under the token.
"""

from __future__ import annotations

import re
import typing as t

from sqlglot.dialects.duckdb import DuckDB
from sqlglot.errors import ParseError as SqlglotParseError
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from dpsql._sql.suggest import nearest
from dpsql.errors import ParseError

#: Words a statement may start with (the suggestions for a misspelled first word).
STATEMENT_STARTS = ("SELECT", "WITH", "FROM", "EXPLAIN", "VALUES", "DESCRIBE", "SHOW")
#: Clause keywords a misspelled word just before the stop is compared with.
CLAUSE_KEYWORDS = ("SELECT", "FROM", "WHERE", "GROUP BY", "ORDER BY", "HAVING", "LIMIT", "OFFSET",
                   "DISTINCT", "BETWEEN", "UNION", "EXCEPT", "INTERSECT")
_WORDS = (TokenType.VAR,)


def syntax_error(err: SqlglotParseError, sql: str, text: str) -> ParseError:
    """The :class:`ParseError` for sqlglot's ``err`` on ``text``, a stripped part of ``sql``.

    ``text`` is what was parsed: ``sql`` without surrounding blanks, trailing semicolons and a
    leading ``EXPLAIN``. Line and column in the result are positions in ``sql``.
    """
    offset = _offset(sql, text)
    details = (getattr(err, "errors", None) or [{}])[0]
    description = plain(str(details.get("description", "")).strip() or str(err).splitlines()[0])
    try:
        tokens = DuckDB().tokenize(text)  # dpsql's dialect adds no tokens to DuckDB's
    except TokenError:
        tokens = []
    at = _token_at(tokens, details.get("line"), details.get("col"))
    token, hint = _culprit(tokens, at)
    if token is None:
        return ParseError(f"syntax error: {description}")
    position = offset + token.start
    line, column, source = _locate(sql, position)
    word = sql[position:offset + token.end + 1]
    reason = f"near '{word}': {hint or description}"
    return ParseError(f"syntax error at line {line}, column {column} {reason}", line=line, column=column,
                      length=len(word), source=source, reason=reason)


#: sqlglot's node class names in "Required keyword ... missing" → what is missing, in words
_MISSING = {
    "Where": "WHERE needs a condition", "Having": "HAVING needs a condition",
    "Limit": "LIMIT needs a number", "Offset": "OFFSET needs a number",
}
_OPERATORS = {"GT", "GTE", "LT", "LTE", "EQ", "NEQ", "Add", "Sub", "Mul", "Div", "Mod", "And", "Or",
              "Like", "ILike", "Is", "In", "Between", "DPipe"}


def plain(description: str) -> str:
    """sqlglot's description of a syntax error, in the words of a SQL user."""
    if description.startswith("Invalid expression / Unexpected token"):
        return "unexpected token"
    if description.startswith("Expecting "):
        return f"expected '{description[len('Expecting '):].strip()}'"
    m = re.match(r"Required keyword: '\w+' missing for <class '[\w.]*?(\w+)'>", description)
    if m:
        name = m.group(1)
        if name in _MISSING:
            return _MISSING[name]
        if name in _OPERATORS:
            return "an operator is missing its operand"
        return f"incomplete {name.upper()}"
    return description


def _offset(sql: str, text: str) -> int:
    """Where ``text`` starts in ``sql``: it ends where ``sql`` does, without blanks and ``;``."""
    body = sql.strip()
    while body.endswith(";"):
        body = body[:-1].rstrip()
    end = len(sql) - len(sql.lstrip()) + len(body)
    return max(0, end - len(text))


def _token_at(tokens: list[Token], line: t.Any, col: t.Any) -> int | None:
    for i, tok in enumerate(tokens):
        if tok.line == line and tok.col == col:
            return i
    return len(tokens) - 1 if tokens else None


def _culprit(tokens: list[Token], at: int | None) -> tuple[Token | None, str | None]:
    """The token to point at, and a hint to give instead of sqlglot's description."""
    if at is None:
        return None, None
    first = tokens[0]
    if first.token_type in _WORDS:
        guess = nearest(first.text, STATEMENT_STARTS, cutoff=0.6)
        hint = f"did you mean {guess}?" if guess else f"a query starts with {', '.join(STATEMENT_STARTS[:3])}"
        return first, f"unknown statement {first.text}; {hint}"
    for i in (at, at - 1):
        if 0 < i < len(tokens) and tokens[i].token_type in _WORDS:
            guess = nearest(tokens[i].text, CLAUSE_KEYWORDS, cutoff=0.75)
            if guess is not None and guess != tokens[i].text.upper():
                return tokens[i], f"did you mean {guess}?"
    return tokens[at], None


def _locate(sql: str, position: int) -> tuple[int, int, str]:
    """1-based line and column of ``position`` in ``sql``, and that line's text."""
    before = sql[:position]
    line = before.count("\n") + 1
    start = before.rfind("\n") + 1
    end = sql.find("\n", position)
    return line, position - start + 1, sql[start:end if end >= 0 else len(sql)]
