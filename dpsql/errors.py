"""The exceptions dpsql raises.

Every error carries one line that names the problem (the key, the column, the
table). The CLI prints ``Error: <message>`` and nothing else.
"""

from __future__ import annotations

import difflib
import typing as t


def _key(name: str) -> str:
    return name.upper().replace("_", "").replace(" ", "")


def nearest(word: str, candidates: t.Iterable[str], cutoff: float = 0.7) -> str | None:
    """The candidate closest to ``word`` (compared case-insensitively, without underscores or
    spaces), or None if none is close enough."""
    keyed: dict[str, str] = {}
    for c in candidates:
        keyed.setdefault(_key(c), c)
    found = difflib.get_close_matches(_key(word), list(keyed), n=1, cutoff=cutoff)
    return keyed[found[0]] if found else None


def did_you_mean(word: str, candidates: t.Iterable[str], cutoff: float = 0.7, *, exact: bool = False) -> str:
    """``"; did you mean NAME?"`` for the nearest candidate, or ``""`` (for messages that name
    something unknown: :mod:`dpsql._sql.suggest`). A candidate that differs from ``word`` only in
    case, underscores or spaces is left out, unless ``exact`` (names that must match exactly,
    such as the policy's column names: ``patientid`` for ``patient_id``)."""
    names = [c for c in candidates if (c != word if exact else _key(c) != _key(word))]
    guess = nearest(word, names, cutoff)
    return f"; did you mean {guess}?" if guess else ""


class Error(Exception):
    """Base class of every dpsql error.

    In IPython and Jupyter a dpsql error is shown as its one line (``PrivacyError: ...``, and
    for a syntax error the statement's line with a caret), not a traceback: it is the analyst's
    to fix, and the frames inside dpsql say nothing to them. :class:`InternalError` keeps its
    traceback.
    """

    def _render_traceback_(self) -> list[str]:
        """The lines IPython shows for this error instead of a traceback."""
        text = " ".join(str(self).split()) or type(self).__name__
        pointer = getattr(self, "pointer", None)
        return [f"{type(self).__name__}: {text}", *("  " + line for line in (pointer() if pointer else []))]


class ParseError(Error):
    """The statement is not valid dpsql SQL.

    When the position of the offending token is known, ``line`` and ``column`` (1-based, in
    the statement as given) and ``length`` locate it, and ``source`` is that line of the
    statement; :meth:`pointer` draws it with a caret under the token. ``reason`` is the message
    without the position (``near 'FORM': did you mean FROM?``), for callers that say where the
    statement is themselves.
    """

    def __init__(self, message: str, *, line: int | None = None, column: int | None = None,
                 length: int = 1, source: str | None = None, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.line = line
        self.column = column
        self.length = max(1, length)
        self.source = source

    def pointer(self, width: int = 100) -> list[str]:
        """The statement's line and a caret line under the token (``[]`` without a position).

        A line longer than ``width`` is cut to a window around the token, marked with ``…``.
        """
        if self.source is None or self.column is None:
            return []
        text = self.source.expandtabs(1).rstrip()
        start = min(self.column - 1, len(text))
        length = min(self.length, max(1, len(text) - start))
        if len(text) > width:
            cut = max(0, min(start - width // 3, len(text) - width))
            end = cut + width
            shown = text[cut:end]
            if cut:
                shown = "…" + shown[1:]
            if end < len(text):
                shown = shown[:-1] + "…"
            text, start = shown, start - cut
            length = min(length, max(1, width - start))
        return [text, " " * start + "^" * length]


class OptionError(Error):
    """A key or value of the trailing ``WITH (...)`` options clause is wrong."""


class PolicyError(Error):
    """The policy file is missing, malformed or inconsistent."""


class BindError(Error):
    """A table, column or function the query names does not exist."""


class PrivacyError(Error):
    """The query is refused because answering it could expose private data."""


class BudgetError(PrivacyError):
    """The query would exceed the remaining privacy budget (nothing was charged)."""


class LedgerError(PrivacyError):
    """The budget ledger is missing, corrupted or unwritable; dpsql refuses to answer."""


class ExecutionError(Error):
    """DuckDB failed while computing the statistics of an accepted query."""


class InternalError(Error):
    """An invariant of dpsql's own code does not hold (a bug, never the analyst's fault).

    Its message is fixed text and never holds a value computed from the data: raised while
    releasing a result, it is reported as :class:`ExecutionError` without any details.
    """

    def _render_traceback_(self) -> list[str]:
        """The whole traceback: this is a bug to report, and where it happened matters."""
        import traceback

        return "".join(traceback.format_exception(self)).rstrip("\n").splitlines()

#: What a query stopped by Ctrl-C says (the REPL, ``-c``/``-f`` and notebooks show this line).
CANCELLED = "Query cancelled; nothing was charged"


class QueryCancelled(KeyboardInterrupt):
    """Ctrl-C (SIGINT, a notebook's interrupt) stopped a query.

    A :class:`KeyboardInterrupt`, not an :class:`Error`: ``except Exception`` and
    ``except dpsql.Error`` in the caller's code do not swallow it, so Ctrl-C stops a loop of
    queries as it stops any Python code, and ``except KeyboardInterrupt`` catches it.

    Nothing is charged when the query is stopped before its release. If Ctrl-C comes after
    the charge, the release is finished, the message says what was charged and ``result``
    holds the released :class:`dpsql.Result` (it is ``None`` otherwise).
    """

    def __init__(self, message: str = CANCELLED, result: object = None) -> None:
        super().__init__(message)
        self.result = result

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else CANCELLED

    def _render_traceback_(self) -> list[str]:
        """IPython shows this line instead of a traceback."""
        return [str(self)]
