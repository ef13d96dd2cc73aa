"""Syntax highlighting of the dpsql dialect for the interactive shell.

:class:`DPSQLLexer` is pygments' ANSI SQL lexer plus the dialect's additions: the DP aggregate
functions (``DP_COUNT``, ``DP_MEAN``, ...) are ``Name.Builtin``, the keys of the trailing
``WITH (key = value, ...)`` options clause are ``Name.Attribute``, their word values
(``winsorized``, and any word after ``mechanism =``) ``Name.Constant``, and decimal numbers
are numbers.
A line that starts with ``.`` or ``\\`` is a special command and is shown as one.
"""

from __future__ import annotations

import typing as t

from pygments.lexer import bygroups, include, inherit, words
from pygments.lexers.sql import SqlLexer
from pygments.token import Keyword, Name, Number, Operator, Punctuation, String, Text, Whitespace

from dpsql._sql.keywords import AGGREGATORS, SMOOTH_NOISE
from dpsql._sql.keywords import DP_FUNCTION_NAMES as _DP_NAMES
from dpsql._sql.keywords import OPTION_KEYS as _OPTION_KEYS

#: Names of the DP aggregate functions (with their aliases), upper-case.
DP_FUNCTION_NAMES: tuple[str, ...] = _DP_NAMES

#: Keys of the ``WITH (...)`` options clause, in the order the documentation lists them.
OPTION_KEYS: tuple[str, ...] = _OPTION_KEYS

#: Word values some options take (``aggregator = winsorized``). The values of ``mechanism`` are
#: the names in the mechanisms' registry: the completer reads them there when first needed,
#: and the lexer shows any word after ``mechanism =`` as one (no import at start-up).
OPTION_VALUES: dict[str, tuple[str, ...]] = {
    "aggregator": tuple(AGGREGATORS),
    "noise": tuple(SMOOTH_NOISE),
}

_WORD_VALUES = tuple(sorted({v for values in OPTION_VALUES.values() for v in values}))


class DPSQLLexer(SqlLexer):  # type: ignore[misc]
    """Pygments lexer for dpsql: DuckDB SQL with DP aggregates and an options clause."""

    name = "dpsql"
    aliases = ["dpsql"]
    filenames: t.ClassVar[list[str]] = []
    mimetypes: t.ClassVar[list[str]] = []

    tokens = {
        "root": [
            (r"^[ \t]*[.\\][^\s;]*", Keyword.Pseudo, "special"),
            (words(DP_FUNCTION_NAMES, prefix=r"\b", suffix=r"\b"), Name.Builtin),
            (r"(WITH)(\s*)(\()", bygroups(Keyword, Whitespace, Punctuation), "options"),
            (r"[0-9]+\.[0-9]*(e[+-]?[0-9]+)?|\.[0-9]+(e[+-]?[0-9]+)?|[0-9]+e[+-]?[0-9]+", Number.Float),
            inherit,
        ],
        "options": [
            (r"(\bmechanism\b)(\s*)(=)(\s*)([A-Za-z_]\w*\b)",
             bygroups(Name.Attribute, Whitespace, Operator, Whitespace, Name.Constant)),
            (words(OPTION_KEYS, prefix=r"\b", suffix=r"\b(?=\s*=)"), Name.Attribute),
            (words(_WORD_VALUES, prefix=r"\b", suffix=r"\b"), Name.Constant),
            (r"\(", Punctuation, "#push"),
            (r"\)", Punctuation, "#pop"),
            include("root"),
        ],
        "special": [
            (r"[^\n]+", String),
            (r"\n", Text, "#pop"),
        ],
    }
