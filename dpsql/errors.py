"""The exceptions dpsql raises.

Every error carries one line that names the problem (the key, the column, the
table). The CLI prints ``Error: <message>`` and nothing else.
"""

from __future__ import annotations


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
