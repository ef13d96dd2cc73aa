"""Completion for the interactive shell: catalog names, DP functions, options, keywords, commands.

The completer looks at the text before the cursor to guess what may come next:

* a special command name (``.sch`` → ``.schema``), then its argument (a table, a mode, a file);
* after ``FROM`` / ``JOIN`` a table name; after ``adult.`` a column of ``adult``;
* inside the trailing ``WITH (...)`` clause an option key, or after ``mechanism =`` its values
  (the registered mechanisms, read when first needed), quoted: ``mechanism = 'gaussian'``;
* otherwise columns of the tables the statement names (all columns if it names none), DP
  aggregate functions, table names and SQL keywords, in that order.

The catalog is read from the connection on first use and cached; :meth:`refresh` reloads it.
"""

from __future__ import annotations

import re
import typing as t

from prompt_toolkit.completion import CompleteEvent, Completer, Completion, PathCompleter
from prompt_toolkit.document import Document

from dpsql.interfaces.repl.lexer import DP_FUNCTION_NAMES, OPTION_KEYS, OPTION_VALUES

#: SQL keywords offered by the completer (DuckDB's common ones).
KEYWORDS: tuple[str, ...] = (
    "SELECT", "FROM", "WHERE", "GROUP BY", "HAVING", "ORDER BY", "LIMIT", "OFFSET", "WITH",
    "AS", "AND", "OR", "NOT", "IN", "IS", "NULL", "BETWEEN", "LIKE", "ILIKE", "CASE", "WHEN",
    "THEN", "ELSE", "END", "DISTINCT", "JOIN", "LEFT JOIN", "INNER JOIN", "ON", "USING", "UNION",
    "ALL", "ASC", "DESC", "CAST", "EXPLAIN", "TRUE", "FALSE", "COUNT", "SUM", "AVG", "MIN", "MAX",
    "COALESCE", "DESCRIBE", "SHOW TABLES",
)

_TABLE_CONTEXT = re.compile(r"\b(from|join|describe|table)\s+(?:[\w\"]+\s*,\s*)*$", re.IGNORECASE)
_QUALIFIED = re.compile(r"([A-Za-z_]\w*)\.(\w*)$")
_OPTION_VALUE = re.compile(r"\b(\w+)\s*=\s*'?(\w*)$")
_TABLE_REFS = re.compile(r"\b(?:from|join)\s+([A-Za-z_]\w*)(?:\s+(?:as\s+)?([A-Za-z_]\w*))?", re.IGNORECASE)
_NOT_ALIAS = {"where", "group", "order", "limit", "join", "left", "right", "inner", "outer", "full",
              "cross", "on", "using", "with", "having", "union", "natural", "as", "offset"}


class DPSQLCompleter(Completer):
    """A prompt_toolkit completer backed by a :class:`dpsql.Connection`'s catalog and policy.

    ``commands`` maps each special command name (and alias) to the kind of argument it takes:
    ``"table"``, ``"file"``, a tuple of words, or ``None``.
    """

    def __init__(self, con: t.Any, commands: t.Mapping[str, t.Any] | None = None) -> None:
        self.con = con
        self.commands: dict[str, t.Any] = dict(commands or {})
        self._catalog: dict[str, list[str]] | None = None
        self._paths = PathCompleter(expanduser=True)

    # -- catalog --------------------------------------------------------------------------------

    def refresh(self) -> None:
        """Forget the cached catalog; it is read again on the next completion."""
        self._catalog = None

    @property
    def catalog(self) -> dict[str, list[str]]:
        """``{table: [columns]}`` for the tables the policy declares and the database holds."""
        if self._catalog is None:
            catalog: dict[str, list[str]] = {}
            try:
                for table in self.con.tables():
                    catalog[table] = list(self.con.columns(table) or [])
            except Exception:  # a closed or failing connection: complete without the catalog
                catalog = {}
            self._catalog = catalog
        return self._catalog

    # -- completion -----------------------------------------------------------------------------

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> t.Iterable[Completion]:
        text = document.text_before_cursor
        stripped = text.lstrip()
        if stripped.startswith((".", "\\")):
            yield from self._special(stripped, document, complete_event)
            return
        yield from self._sql(text, document.text, complete_event)

    def _special(self, text: str, document: Document, event: CompleteEvent) -> t.Iterable[Completion]:
        if not re.search(r"\s", text):
            yield from _matches(text, [(name, "command") for name in sorted(self.commands)], keep_case=True)
            return
        name, _, arg = text.partition(" ")
        kind = self.commands.get(name.lower())
        arg = arg.lstrip()
        if kind == "table":
            yield from _matches(arg, [(name, "table") for name in self.catalog])
        elif kind == "file":
            yield from self._paths.get_completions(Document(arg, len(arg)), event)
        elif isinstance(kind, tuple):
            yield from _matches(arg, [(word, "") for word in kind], keep_case=True)

    def _sql(self, before: str, whole: str, event: CompleteEvent) -> t.Iterable[Completion]:
        word = re.search(r"\w*$", before).group(0)  # type: ignore[union-attr]
        head = before[: len(before) - len(word)]
        if _in_options(head):
            value = _OPTION_VALUE.search(before)
            words = option_values(value.group(1)) if value else None
            if value and words is not None:
                yield from _quoted(_matches(value.group(2), [(v, value.group(1)) for v in words]),
                                   opened=head.endswith("'"), closed=whole[len(before):].startswith("'"))
                return
            if not re.search(r"=\s*\w*$", before):
                yield from _matches(word, [(k, "option") for k in OPTION_KEYS], keep_case=True)
            return
        qualified = _QUALIFIED.search(before)
        if qualified:
            table = self._resolve(qualified.group(1), whole)
            cols = self.catalog.get(table, []) if table else []
            yield from _matches(qualified.group(2), [(c, f"column of {table}") for c in cols])
            return
        if _TABLE_CONTEXT.search(head):
            yield from _matches(word, [(name, "table") for name in self.catalog])
            return
        if not word and not event.completion_requested:
            return
        referenced = [tbl for tbl in (self._resolve(m.group(1), whole) for m in _TABLE_REFS.finditer(whole)) if tbl]
        tables = referenced or list(self.catalog)
        candidates: list[tuple[str, str]] = []
        for table in tables:
            candidates += [(c, f"column of {table}") for c in self.catalog.get(table, [])]
        candidates += [(name, "DP aggregate") for name in DP_FUNCTION_NAMES]
        candidates += [(name, "table") for name in self.catalog]
        candidates += [(kw, "keyword") for kw in KEYWORDS]
        yield from _matches(word, candidates)

    def _resolve(self, name: str, whole: str) -> str | None:
        """The table ``name`` refers to: itself, or the table it is an alias of in ``whole``."""
        low = name.lower()
        if low in self.catalog:
            return low
        for m in _TABLE_REFS.finditer(whole):
            alias = m.group(2)
            if alias and alias.lower() == low and alias.lower() not in _NOT_ALIAS:
                table = m.group(1).lower()
                return table if table in self.catalog else None
        return None


def option_values(key: str) -> tuple[str, ...] | None:
    """The word values option ``key`` takes, or None if it takes no words.

    Mechanism names come from the mechanisms' registry, imported on the first completion that
    needs them (not at start-up: importing the mechanisms takes longer than the first prompt).
    """
    key = key.lower()
    if key == "mechanism":
        from dpsql.mechanisms import choices

        return choices()
    return OPTION_VALUES.get(key)


def _quoted(completions: t.Iterable[Completion], opened: bool, closed: bool) -> t.Iterator[Completion]:
    """Word values of options as SQL strings: ``mechanism = 'gaussian'`` (the quotes typed so
    far are kept, the missing ones added)."""
    for c in completions:
        text = ("" if opened else "'") + c.text + ("" if closed else "'")
        yield Completion(text, start_position=c.start_position, display=f"'{c.text}'",
                         display_meta=c.display_meta)


def _in_options(head: str) -> bool:
    """Whether ``head`` ends inside an unclosed ``WITH (`` options clause."""
    found = None
    for m in re.finditer(r"\bWITH\s*\(", head, re.IGNORECASE):
        found = m
    if found is None:
        return False
    depth = 0
    for ch in head[found.end():]:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                return False
    return True


def _matches(word: str, candidates: t.Iterable[tuple[str, str]], keep_case: bool = False) -> t.Iterator[Completion]:
    """Completions whose text starts with ``word`` (case-insensitively), then those containing it.

    Upper-case candidates (keywords, functions) follow the case of ``word``: ``sel`` → ``select``.
    """
    low = word.lower()
    seen: set[str] = set()
    prefix: list[Completion] = []
    inner: list[Completion] = []
    for text, meta in candidates:
        key = text.lower()
        if key in seen:
            continue
        if key.startswith(low):
            bucket = prefix
        elif len(low) >= 2 and low in key:
            bucket = inner
        else:
            continue
        seen.add(key)
        shown = text.lower() if (not keep_case and word and word.islower() and text.isupper()) else text
        bucket.append(Completion(shown, start_position=-len(word), display_meta=meta))
    yield from prefix
    yield from inner
