"""Suggestions ("did you mean ...?"): the nearest known name to a misspelled one.

Used by the messages that name something unknown (a DP function, a column, a table, an option,
a mechanism). Names are compared case-insensitively and without underscores or spaces
(``DP_MEDAN`` is near ``DP_MEDIAN``, ``GROUPBY`` near ``GROUP BY``), with :mod:`difflib`.
"""

from __future__ import annotations

import difflib
import typing as t

from sqlglot import exp

from dpsql.errors import BindError
from dpsql.sql.keywords import DP_FUNCTION_NAMES


def _key(name: str) -> str:
    return name.upper().replace("_", "").replace(" ", "")


def nearest(word: str, candidates: t.Iterable[str], cutoff: float = 0.7) -> str | None:
    """The candidate closest to ``word``, or None if none is close enough."""
    keyed: dict[str, str] = {}
    for c in candidates:
        keyed.setdefault(_key(c), c)
    found = difflib.get_close_matches(_key(word), list(keyed), n=1, cutoff=cutoff)
    return keyed[found[0]] if found else None


def did_you_mean(word: str, candidates: t.Iterable[str], cutoff: float = 0.7) -> str:
    """``"; did you mean NAME?"`` for the nearest candidate, or ``""``."""
    names = [c for c in candidates if _key(c) != _key(word)]
    guess = nearest(word, names, cutoff)
    return f"; did you mean {guess}?" if guess else ""


def check_dp_function_names(query: exp.Expression) -> None:
    """Refuse a call of ``DP_<something>`` that is not a DP aggregate, naming the nearest one.

    Without this, ``DP_MEDAN(age)`` is an unknown plain function, and the query reads as one
    that selects private rows.
    """
    known = set(DP_FUNCTION_NAMES)
    for node in query.find_all(exp.Anonymous):
        name = node.name.upper()
        if _key(name).startswith("DP") and name not in known:
            hint = did_you_mean(name, DP_FUNCTION_NAMES, cutoff=0.6) or \
                f"; the DP functions are {', '.join(DP_FUNCTION_NAMES)}"
            raise BindError(f"unknown DP function {node.name}{hint}")
