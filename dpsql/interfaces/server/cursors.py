"""Cursors declared in SQL: ``DECLARE name CURSOR FOR query``, ``FETCH``, ``MOVE``, ``CLOSE``.

``DECLARE`` runs its query once, through dpsql, when it executes (so it is charged once, like
any execution of the query); the rows are kept with the cursor, ``FETCH`` and ``MOVE`` move over
them, and ``CLOSE`` (or the end of the transaction, for a cursor declared without ``WITH HOLD``)
frees them. The cursor is also a portal of the connection, under its name, so that a client can
Describe it (psycopg's named cursors do). The statements are recognised on sqlglot's PostgreSQL
tokens (:mod:`.utility`).
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass

from pg_mimic import Portal, ResultColumn, Statement
from pg_mimic.connection import PortalEntry
from pg_mimic.errors import PgError
from sqlglot.tokens import TokenType

from .utility import Words

if t.TYPE_CHECKING:
    from .session import DPSession


@dataclass
class Cursor:
    name: str
    columns: list[ResultColumn]
    rows: list[tuple[t.Any, ...]]
    hold: bool
    #: 0 before the first row, k on row k, len(rows) + 1 after the last
    position: int = 0

    def fetch(self, direction: str, count: float) -> list[tuple[t.Any, ...]]:
        """Move as ``FETCH direction count`` does; the rows it passes over, in order met."""
        n = len(self.rows)
        if direction == "ABSOLUTE":
            target = int(count) if count >= 0 else n + 1 + int(count)
            self.position = max(0, min(target, n + 1))
            return [self.rows[self.position - 1]] if 1 <= self.position <= n else []
        if direction == "RELATIVE":
            if count == 0:
                return [self.rows[self.position - 1]] if 1 <= self.position <= n else []
            direction, count = ("FORWARD", count) if count > 0 else ("BACKWARD", -count)
            out = self.fetch(direction, count)
            return out[-1:] if len(out) == count else []
        if direction == "BACKWARD":
            start = min(self.position, n + 1) - 1  # the row before the current position
            taken = [self.rows[i - 1] for i in range(start, max(0, start - int(min(count, n + 1))), -1)]
            self.position = start - len(taken) + 1 if len(taken) == count else 0
            return taken
        start = self.position  # FORWARD: the rows after the current position
        taken = self.rows[start:start + int(min(count, n))] if start < n else []
        self.position = start + len(taken) if len(taken) == count else n + 1
        return taken


def _count(w: Words, i: int) -> float | None:
    tok = w.tokens[i] if i < len(w.tokens) else None
    if tok is None:
        return None
    if tok.token_type == TokenType.NUMBER:
        return float(tok.text)
    if tok.token_type == TokenType.DASH and i + 1 < len(w.tokens) and w.tokens[i + 1].token_type == TokenType.NUMBER:
        return -float(w.tokens[i + 1].text)
    return None


def _direction(w: Words) -> tuple[str, float, str | None]:
    """``FETCH [direction] [FROM | IN] name`` → (FORWARD / BACKWARD / ABSOLUTE / RELATIVE, count, name)."""
    i, word = 1, w.keyword(1)
    simple = {"NEXT": ("FORWARD", 1.0), "PRIOR": ("BACKWARD", 1.0), "FIRST": ("ABSOLUTE", 1.0),
              "LAST": ("ABSOLUTE", -1.0), "ALL": ("FORWARD", float("inf"))}
    if word in simple:
        direction, count = simple[word]
        i += 1
    elif word in ("ABSOLUTE", "RELATIVE"):
        given = _count(w, 2)
        if given is None:
            raise PgError("42601", f"FETCH {word} takes a number: FETCH {word} 1 " + "FROM name")
        direction, count = word, given
        i += 3 if w.tokens[2].token_type == TokenType.DASH else 2
    elif word in ("FORWARD", "BACKWARD"):
        given = _count(w, 2)
        i += 1
        if w.keyword(i) == "ALL":
            given, i = float("inf"), i + 1
        elif given is not None:
            i += 2 if w.tokens[i].token_type == TokenType.DASH else 1
        direction, count = word, 1.0 if given is None else given
    elif (given := _count(w, 1)) is not None:
        direction, count = ("FORWARD", given) if given >= 0 else ("BACKWARD", -given)
        i += 2 if w.tokens[1].token_type == TokenType.DASH else 1
    else:
        direction, count = "FORWARD", 1.0
    if w.keyword(i) in ("FROM", "IN"):
        i += 1
    return direction, count, w.name(i) if i == len(w.tokens) - 1 else None


class _NoRows(Statement):
    """DECLARE, MOVE and CLOSE: no rows; what they do happens when they execute."""

    def __init__(self, sql: str, param_oids: list[int | None], run: t.Callable[[list[t.Any]], t.Awaitable[None]]):
        self.sql = sql
        self.param_oids = param_oids
        self._run = run

    async def describe(self) -> list[ResultColumn] | None:
        return None

    def bind(self, values: list[t.Any]) -> Portal:
        return _Once(lambda: self._run(values))


class _Once(Portal):
    def __init__(self, run: t.Callable[[], t.Awaitable[t.Any]]) -> None:
        self._run = run
        self._rows: list[tuple[t.Any, ...]] | None = None
        self._at = 0

    async def execute(self, max_rows: int) -> tuple[list[tuple[t.Any, ...]], bool]:
        if self._rows is None:
            self._rows = list(await self._run() or [])
        end = len(self._rows) if max_rows <= 0 else min(len(self._rows), self._at + max_rows)
        rows = self._rows[self._at:end]
        self._at = end
        return rows, max_rows > 0 and end < len(self._rows)


class _Fetch(Statement):
    def __init__(self, sql: str, cursor: Cursor, direction: str, count: float) -> None:
        self.sql = sql
        self.param_oids: list[int | None] = []
        self.cursor, self.direction, self.count = cursor, direction, count

    async def describe(self) -> list[ResultColumn] | None:
        return self.cursor.columns

    def bind(self, values: list[t.Any]) -> Portal:
        async def run() -> list[tuple[t.Any, ...]]:
            return self.cursor.fetch(self.direction, self.count)

        return _Once(run)


def _declare(session: DPSession, w: Words, param_oids: list[int | None]) -> Statement:
    name = w.name(1)
    at = 2
    while w.keyword(at) in ("BINARY", "ASENSITIVE", "INSENSITIVE", "NO", "SCROLL"):
        if w.keyword(at) == "BINARY":
            raise PgError("0A000", "binary cursors are not supported by dpsql serve; DECLARE the cursor without BINARY")
        at += 1
    if name is None or w.keyword(at) != "CURSOR":
        raise PgError("42601", "DECLARE takes a name and a query: DECLARE name CURSOR FOR SELECT ...")
    at += 1
    hold = False
    if w.keyword(at) in ("WITH", "WITHOUT") and w.keyword(at + 1) == "HOLD":
        hold, at = w.keyword(at) == "WITH", at + 2
    if w.keyword(at) != "FOR" or at + 1 >= len(w.tokens):
        raise PgError("42601", "DECLARE takes a query after FOR: DECLARE name CURSOR FOR SELECT ...")
    body = w.rest(at + 1)

    async def run(values: list[t.Any]) -> None:
        connection = session._connection
        if not hold and connection.tx_status == b"I":
            raise PgError("25P01", "DECLARE CURSOR can only be used in transaction blocks; BEGIN first, "
                                   "or DECLARE name CURSOR WITH HOLD FOR ...")
        if name in session.cursors:
            raise PgError("42P03", f'cursor "{name}" already exists; CLOSE it first')
        statement = await session.prepare(body, param_oids)
        columns = await statement.describe()
        if columns is None:
            raise PgError("42601", "DECLARE ... CURSOR FOR takes a query that returns rows")
        rows, _ = await statement.bind(values).execute(0)
        cursor = Cursor(name, columns, rows, hold)
        session.cursors[name] = cursor
        connection.portals[name] = PortalEntry(_Once(lambda: _all(cursor)), columns, "FETCH", [])

    return _NoRows(w.sql, param_oids, run)


async def _all(cursor: Cursor) -> list[tuple[t.Any, ...]]:
    return cursor.fetch("FORWARD", float("inf"))


def _cursor(session: DPSession, name: str | None) -> Cursor:
    if name is None or name not in session.cursors:
        raise PgError("34000", f'cursor "{name}" does not exist; DECLARE it first')
    return session.cursors[name]


def statement(session: DPSession, w: Words | None, param_oids: list[int | None]) -> Statement | None:
    """The statement for DECLARE, FETCH, MOVE or CLOSE, or None when ``w`` is none of them."""
    head = w.keyword(0) if w is not None else ""
    if w is None or head not in ("DECLARE", "FETCH", "MOVE", "CLOSE"):
        return None
    if head == "DECLARE":
        return _declare(session, w, param_oids)
    if head == "CLOSE":
        everything = w.keyword(1) == "ALL" and len(w.tokens) == 2
        name = None if everything else w.name(1)
        if not everything:
            _cursor(session, name)

        async def close(values: list[t.Any]) -> None:
            session.close_cursors(None if everything else name)

        return _NoRows(w.sql, [], close)
    direction, count, name = _direction(w)
    cursor = _cursor(session, name)
    if head == "MOVE":
        async def move(values: list[t.Any]) -> None:
            cursor.fetch(direction, count)

        return _NoRows(w.sql, [], move)
    return _Fetch(w.sql, cursor, direction, count)
