"""Suggestions ("did you mean ...?"): the nearest known name to a misspelled one.

Used by the messages that name something unknown (a DP function, a column, a table, an option,
a mechanism). Names are compared case-insensitively and without underscores or spaces
(``DP_MEDAN`` is near ``DP_MEDIAN``, ``GROUPBY`` near ``GROUP BY``), with :mod:`difflib`.
:func:`nearest` and :func:`did_you_mean` live in :mod:`dpsql.errors`, so that the policy's
checks (a layer below this one) use them too.
"""

from __future__ import annotations

from sqlglot import exp

from dpsql._sql.keywords import DP_FUNCTION_NAMES
from dpsql.errors import BindError, did_you_mean, nearest

__all__ = ["check_dp_function_names", "did_you_mean", "nearest"]


def _key(name: str) -> str:
    return name.upper().replace("_", "").replace(" ", "")


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
