"""Query parameters bound as literal nodes of the parsed statement, never pasted into its text.

``bind_parameters(text, params)`` parses ``text`` with the dpsql dialect, replaces each
placeholder node by a literal node built from its Python value, and renders the statement back
to SQL. A value therefore always stays one literal (a quote in a string is escaped by the SQL
generator), and a placeholder that stands where a name goes (a table, a column, an alias, a type)
or where a literal number would change meaning (an ORDER BY or GROUP BY position) is refused.

Styles: a sequence binds ``?`` placeholders in the order they appear in the text (or ``$1``,
``$2``, ... by number); a mapping binds ``$name`` (and ``:name`` where DuckDB's syntax has no
other use for the colon: not at the start of a select item, which DuckDB reads as an alias). The
styles are never mixed in one statement.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import re
import typing as t
from collections.abc import Mapping, Sequence

from sqlglot import exp
from sqlglot.tokens import TokenType

from dpsql._sql.dialect import DPSQL, parse, to_sql
from dpsql.errors import Error, ParseError


class ParameterError(Error):
    """The parameters do not fit the statement's placeholders (count, names, style or position)."""


class ParameterValueError(Error):
    """A parameter's value has a type or value that cannot be a SQL literal."""


_EXPLAIN = re.compile(r"^\s*EXPLAIN\b", re.IGNORECASE)

#: parents under which a placeholder would stand for a name, not a value
_NAME_PARENTS = (exp.Table, exp.Column, exp.Identifier, exp.TableAlias, exp.Aliases, exp.Dot,
                 exp.DataType, exp.Var, exp.Schema, exp.ColumnDef)


def bind_parameters(text: str, params: Sequence[t.Any] | Mapping[str, t.Any]) -> str:
    """``text`` with every placeholder replaced by the literal of its parameter, as SQL."""
    numbered = isinstance(params, Sequence) and not isinstance(params, (str, bytes, bytearray))
    if not numbered and not isinstance(params, Mapping):
        raise ParameterError(f"parameters must be a sequence or a mapping, not {type(params).__name__}")
    if not params and not _has_placeholders(text):
        return text  # nothing to bind (SQLAlchemy passes () with every statement): the text as given
    text, marks = _number_question_marks(text, len(params) if numbered else None)
    tree = parse(text)
    placeholders = list(tree.find_all(exp.Placeholder))
    if any(p.this is None for p in placeholders):
        raise ParameterError("a ? placeholder could not be located in the statement's tokens; "
                             "put the statement first, without a comment before it")
    if marks and len(placeholders) != marks:
        raise ParameterError("the statement mixes ? placeholders with $n or $name ones: use one style")
    used: set[str] = set()
    for node in placeholders:
        key = str(node.this)
        _check_position(node, key)
        used.add(key)
        node.replace(literal(_value(params, key, numbered), key))
    if numbered and len(used) != len(params):
        raise ParameterError(f"the statement has {len(used)} placeholders but {len(params)} parameters were given")
    return to_sql(tree)


def _value(params: Sequence[t.Any] | Mapping[str, t.Any], key: str, numbered: bool) -> t.Any:
    """The parameter of placeholder ``$key``: by position (from 1) when ``params`` is a
    sequence (``numbered``), else by name.

    >>> _value([10, 20], "2", True), _value({"a": 1}, "a", False)
    (20, 1)
    >>> _value({"a": 1}, "1", False)
    Traceback (most recent call last):
    dpsql.params.ParameterError: placeholder $1 is numbered, but the parameters are a mapping; use $name placeholders, or pass a sequence
    """
    if numbered and isinstance(params, Sequence):
        if not key.isdigit():
            raise ParameterError(f"placeholder ${key} is named, but the parameters are a sequence; "
                                 "pass a mapping, or use ? placeholders")
        index = int(key)
        if not 1 <= index <= len(params):
            raise ParameterError(f"placeholder ${key} has no parameter: {len(params)} given")
        return params[index - 1]
    if not isinstance(params, Mapping):  # bind_parameters refuses it before any placeholder
        raise ParameterError(f"parameters must be a sequence or a mapping, not {type(params).__name__}")
    if key.isdigit():
        raise ParameterError(f"placeholder ${key} is numbered, but the parameters are a mapping; "
                             "use $name placeholders, or pass a sequence")
    if key not in params:
        raise ParameterError(f"placeholder ${key} has no parameter in the mapping")
    return params[key]


def _has_placeholders(text: str) -> bool:
    try:
        tokens = DPSQL().tokenize(text)
    except Exception:  # the parser reports it, with a position
        return False
    return any(tok.token_type in (TokenType.PLACEHOLDER, TokenType.PARAMETER) for tok in tokens)


def _number_question_marks(text: str, count: int | None) -> tuple[str, int]:
    """``?`` placeholders renamed ``$1``, ``$2``, ... in the order of the text (the tokenizer finds
    them, so a ``?`` inside a string or a comment is left alone)."""
    head = _EXPLAIN.match(text)  # the tokenizer reads what follows EXPLAIN as one raw command
    skip = head.end() if head else 0
    try:
        tokens = DPSQL().tokenize(text[skip:])
    except Exception as err:  # sqlglot's TokenError: the parser reports it with a position
        raise ParseError(f"cannot tokenize the statement: {err}") from None
    marks = [tok for tok in tokens if tok.token_type == TokenType.PLACEHOLDER and tok.text == "?"]
    if not marks:
        return text, 0
    if count is None:
        raise ParameterError("? placeholders need a sequence of parameters, not a mapping")
    if len(marks) != count:
        raise ParameterError(f"the statement has {len(marks)} placeholders but {count} parameters were given")
    out, last = [], 0
    for k, tok in enumerate(marks, start=1):
        out.append(text[last:skip + tok.start])
        out.append(f"${k}")
        last = skip + tok.end + 1
    out.append(text[last:])
    return "".join(out), len(marks)


def _check_position(node: exp.Expression, key: str) -> None:
    parent = node.parent
    shown = f"parameter {key}" if key.isdigit() else f"placeholder ${key}"
    if isinstance(parent, _NAME_PARENTS) or node.arg_key == "alias":
        raise ParameterError(f"{shown} stands for a name (table, column, alias or type): "
                             "parameters can only be values")
    if isinstance(parent, (exp.Ordered, exp.Group)) or (isinstance(parent, exp.Order) and node.arg_key == "expressions"):
        raise ParameterError(shown + " is an ORDER BY or GROUP BY item, where a literal number "
                             "means a column position: parameters can only be values")


def literal(value: t.Any, key: str = "?") -> exp.Expression:
    """The SQL literal node of a Python value (None, bool, int, float, Decimal, str, bytes, date,
    time, datetime)."""
    if value is None:
        return exp.Null()
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, int):
        return _number(str(value))
    if isinstance(value, float):
        if math.isfinite(value):
            return _number(repr(value))
        word = "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
        return exp.cast(exp.Literal.string(word), "DOUBLE")
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise ParameterValueError(f"parameter {key}: the decimal {value} is not a finite number")
        return _number(format(value, "f"))
    if isinstance(value, str):
        return exp.Literal.string(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        hexed = "".join(f"\\x{b:02X}" for b in bytes(value))
        return exp.cast(exp.Literal.string(hexed), "BLOB")
    if isinstance(value, dt.datetime):
        kind = "TIMESTAMPTZ" if value.tzinfo is not None else "TIMESTAMP"
        return exp.cast(exp.Literal.string(value.isoformat(sep=" ")), kind)
    if isinstance(value, dt.date):
        return exp.cast(exp.Literal.string(value.isoformat()), "DATE")
    if isinstance(value, dt.time):
        if value.tzinfo is not None:
            raise ParameterValueError(f"parameter {key}: a time with a time zone cannot be bound")
        return exp.cast(exp.Literal.string(value.isoformat()), "TIME")
    raise ParameterValueError(f"parameter {key}: values of type {type(value).__name__} cannot be bound "
                              "(use None, bool, int, float, Decimal, str, bytes, date, time or datetime)")


def _number(text: str) -> exp.Expression:
    if text.startswith("-"):
        return exp.Paren(this=exp.Neg(this=exp.Literal.number(text[1:])))
    return exp.Literal.number(text)
