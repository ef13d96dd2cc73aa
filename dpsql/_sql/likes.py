"""LIKE, ILIKE and GLOB as RE2 regular expressions, for DuckDB before 2.0.

DuckDB 1.4 and 1.5 match ``LIKE``, ``ILIKE`` and ``GLOB`` patterns by backtracking: with several
``%`` (or ``*``) the time grows as a power of the text's length. ``'a' * 640 LIKE
'%a_%a_%a_%b'`` took 226 ms a row, ``ILIKE`` and ``GLOB`` over a second, where a row that does not
reach the match takes microseconds, so the run time would count the rows a predicate selects.
DuckDB 2.0's matchers are linear (``tests/test_oracles.py``), and RE2, which DuckDB runs for
``regexp_full_match``, never backtracks. So with an older DuckDB a literal pattern with more than
one ``%`` (``*``) becomes ``regexp_full_match(text, '(?s)...')`` (``(?si)`` for ILIKE), the same
match; a pattern read from a row is refused by the size model (:mod:`dpsql._sql.sizerules`), as a
regular expression's pattern is.
"""

from __future__ import annotations

from sqlglot import exp

#: RE2's metacharacters, written with a backslash to stand for themselves.
_META = set("\\.+*?()|[]{}^$")


def _char(ch: str) -> str:
    return "\\" + ch if ch in _META else ch


def like_regex(pattern: str, escape: str | None = None) -> str:
    r"""The RE2 form of a LIKE pattern (``%`` any text, ``_`` one character, ``escape`` quoting).

    >>> like_regex("%a_%b.")
    '.*a..*b\\.'
    >>> like_regex("100!%%", "!")
    '100%.*'
    """
    out: list[str] = []
    chars = iter(pattern)
    for ch in chars:
        if escape is not None and ch == escape:
            out.append(_char(next(chars, "")))
        elif ch == "%":
            out.append(".*")
        elif ch == "_":
            out.append(".")
        else:
            out.append(_char(ch))
    return "".join(out)


def glob_regex(pattern: str) -> str | None:
    r"""The RE2 form of a GLOB pattern (``*``, ``?``, ``[...]``, ``[!...]``, a backslash quoting
    the next character), or None for one whose brackets do not close.

    >>> glob_regex("*a?[!x-z]*")
    '.*a.[^x-z].*'
    """
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "[":
            end = pattern.find("]", i + 2)
            if end < 0:
                return None
            body = pattern[i + 1:end]
            body = "^" + body[1:] if body.startswith("!") else body
            out.append("[" + body.replace("\\", "\\\\").replace("[", "\\[") + "]")
            i = end + 1
            continue
        if ch == "\\" and i + 1 < len(pattern):  # GLOB's backslash quotes the next character
            out.append(_char(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if ch == "*" else "." if ch == "?" else _char(ch))
        i += 1
    return "".join(out)


def _wildcards(pattern: str, star: str, escape: str | None) -> int:
    count, chars = 0, iter(pattern)
    for ch in chars:
        if escape is not None and ch == escape:
            next(chars, None)
        elif ch == star:
            count += 1
    return count


def as_regexp(node: exp.Expression) -> exp.Expression | None:
    """``node`` (a LIKE, ILIKE or GLOB, or one with ESCAPE) as ``regexp_full_match`` when its
    pattern is a literal with more than one ``%`` (``*``), else None.

    >>> import sqlglot
    >>> as_regexp(sqlglot.parse_one("s NOT ILIKE '%A_%b'", read="duckdb")).sql("duckdb")
    "NOT REGEXP_FULL_MATCH(s, '(?si).*A..*b')"
    >>> as_regexp(sqlglot.parse_one("s LIKE 'a%'", read="duckdb")) is None
    True
    """
    escape = None
    if isinstance(node, exp.Escape):
        if not isinstance(node.expression, exp.Literal) or len(node.expression.this) != 1:
            return None
        escape, node = node.expression.this, node.this
    elif isinstance(node.parent, exp.Escape):  # its ESCAPE is read with it, at the parent
        return None
    if not isinstance(node, (exp.Like, exp.ILike, exp.Glob)):
        return None
    pattern = node.expression
    if not (isinstance(pattern, exp.Literal) and pattern.is_string):
        return None
    star = "*" if isinstance(node, exp.Glob) else "%"
    if _wildcards(pattern.this, star, "\\" if star == "*" else escape) < 2:
        return None
    regex = glob_regex(pattern.this) if isinstance(node, exp.Glob) else like_regex(pattern.this, escape)
    if regex is None:
        return None
    flags = "(?si)" if isinstance(node, exp.ILike) else "(?s)"
    out: exp.Expression = exp.RegexpFullMatch(this=node.this.copy(), expression=exp.Literal.string(flags + regex))
    return exp.Not(this=out) if node.args.get("negate") else out
