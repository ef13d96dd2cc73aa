"""Protocol glue: a pg_mimic session whose statements all go through dpsql.

pg_mimic drives both the simple and the extended protocol through one Statement / Portal
interface: ``describe()`` may be called at Parse, Bind or Describe time and must never run
anything; ``Portal.execute()`` is the only place a statement runs. Here, in this order:

* session statements (:mod:`.utility`: ``SET``, ``SHOW``, transactions, savepoints; ``COPY`` and
  ``LISTEN`` refused), prepared statements in SQL (``PREPARE``/``EXECUTE``/``DEALLOCATE``) and
  cursors (:mod:`.cursors`: ``DECLARE``/``FETCH``/``MOVE``/``CLOSE``), all recognised on sqlglot's
  PostgreSQL tokens;
* catalog queries (:mod:`.catalog`): ``pg_catalog``, ``information_schema`` and session
  functions, answered from the policy's declared tables on a scratch catalog;
* every other statement is a :class:`DPStatement`: ``describe()`` prepares it with dpsql (parse,
  bind, plan, rewrite: no data read, nothing charged) and derives its columns from the plan;
  ``execute()`` inlines the bound parameters and runs it with ``Connection.sql``, charging the
  budget once per execution, as the connected user.
"""

from __future__ import annotations

import logging
import typing as t

from pg_mimic import Portal, Session, Statement
from pg_mimic import connection as pg_connection
from pg_mimic.errors import PgError
from pg_mimic.middleware import asyncpg_typeinfo, resolve
from pg_mimic.results import ResultColumn

from dpsql.errors import BindError, BudgetError, Error, OptionError, ParseError, PrivacyError

from . import catalog, cursors, params, utility
from .columns import Column, conform, oid_of_duckdb

if t.TYPE_CHECKING:
    from .cursors import Cursor
    from .pool import Pool, Worker
    from .scratch import Scratch
    from .users import User

log = logging.getLogger("dpsql.serve")

# A simple query of several statements: pg_mimic splits it by parsing it with sqlglot and hands
# on each statement re-rendered by sqlglot, which respells what it does not know ("CLOSE c"
# becomes "CLOSE AS c") and cannot split text it does not parse (dpsql's WITH (...) options).
# Splitting on the semicolons between sqlglot's tokens keeps each statement's own text.
pg_connection.split_statements = utility.split

INTERNAL = "internal error; the details are withheld because they could depend on private values"


def sqlstate(err: Error) -> str:
    """The SQLSTATE a client sees for a dpsql error (the message is dpsql's one line)."""
    if isinstance(err, BudgetError):
        return "53400"  # configuration_limit_exceeded: the budget is spent
    if isinstance(err, PrivacyError):
        return "42501"  # insufficient_privilege: refused by the policy
    if isinstance(err, ParseError):
        return "42601"  # syntax_error
    if isinstance(err, OptionError):
        return "22023"  # invalid_parameter_value
    if isinstance(err, BindError):
        return "42P01" if "table" in str(err).split(":")[0] else "42703"
    return "XX000"


def as_pg_error(err: BaseException) -> PgError:
    if isinstance(err, PgError):
        return err
    if isinstance(err, Error):
        return PgError(sqlstate(err), " ".join(str(err).split()))
    log.exception("unexpected failure", exc_info=err)
    return PgError("XX000", INTERNAL)


class DPSession(Session):
    """One client connection."""

    def __init__(self, pool: Pool, users: dict[str, User], declared: dict[str, dict[str, int]]) -> None:
        #: SQL-level prepared statements (PREPARE name AS ...): name → (text, parameter types)
        self.named: dict[str, tuple[str, list[int | None]]] = {}
        #: cursors declared in SQL (DECLARE name CURSOR FOR ...), by name
        self.cursors: dict[str, Cursor] = {}
        #: savepoints of the open transaction, oldest first
        self.savepoints: list[str] = []
        self.pool = pool
        self.users = users
        self.declared = declared
        #: what is left to pg_mimic: asyncpg's type introspection
        self.middleware = (asyncpg_typeinfo,)

    @property
    def user(self) -> str:
        return self._connection.username if self._connection is not None else ""

    def scratch(self) -> Scratch:
        from .scratch import scratch_for

        return scratch_for(self.declared)

    async def prepare(self, sql: str, param_oids: list[int | None]) -> Statement:
        words = utility.words(sql)
        if utility.is_dpsql_statement(words):
            return DPStatement(self, sql, param_oids)
        answered = sql_prepared(self, words) or cursors.statement(self, words, param_oids) \
            or utility.answer(self._connection, words) \
            or catalog.answer(self._connection, self.scratch, sql, param_oids,
                              None if words is None else [tok.text for tok in words.tokens])
        if answered is not None:
            return answered
        try:
            answered = await resolve(self._connection, sql, param_oids, self.middleware)
        except Error as err:
            raise as_pg_error(err) from None
        if answered is not None:
            return answered
        return DPStatement(self, sql, param_oids)

    # -- session state the statements of .utility and .cursors change --------------------------

    def close_cursors(self, name: str | None = None, holdable: bool = True) -> None:
        """Close cursor ``name`` (all of them when None; only those without HOLD unless
        ``holdable``)."""
        for found in [n for n, c in self.cursors.items() if (name is None or n == name) and (holdable or not c.hold)]:
            del self.cursors[found]
            if self._connection is not None:
                self._connection.portals.pop(found, None)

    def end_transaction(self) -> None:
        self.savepoints.clear()
        self.close_cursors(holdable=False)

    def discard(self) -> None:
        """DISCARD ALL: prepared statements and cursors go (the settings are the caller's)."""
        self.named.clear()
        self.close_cursors()

    def savepoint(self, name: str | None) -> None:
        if self._connection.tx_status == b"I":
            raise PgError("25P01", "SAVEPOINT can only be used in transaction blocks; BEGIN first")
        self.savepoints.append(name or "")

    def _find_savepoint(self, name: str | None) -> int:
        if name not in self.savepoints:
            raise PgError("3B001", f'savepoint "{name}" does not exist')
        return len(self.savepoints) - 1 - self.savepoints[::-1].index(name)

    def rollback_to(self, name: str | None) -> None:
        """ROLLBACK TO SAVEPOINT: the transaction goes on (it is no longer failed)."""
        if self._connection.tx_status == b"I":
            raise PgError("25P01", "ROLLBACK TO SAVEPOINT can only be used in transaction blocks")
        del self.savepoints[self._find_savepoint(name) + 1:]
        self._connection.tx_status = b"T"

    def release(self, name: str | None) -> None:
        if self._connection.tx_status == b"I":
            raise PgError("25P01", "RELEASE SAVEPOINT can only be used in transaction blocks")
        del self.savepoints[self._find_savepoint(name):]

    async def run(self, fn: t.Callable[[Worker], t.Any]) -> t.Any:
        try:
            return await self.pool.run(fn)
        except Exception as err:
            raise as_pg_error(err) from None


class DPStatement(Statement):
    """A statement that dpsql prepares (Describe) and runs (Execute)."""

    def __init__(self, session: DPSession, sql: str, param_oids: list[int | None]) -> None:
        self.session = session
        self.sql = sql
        declared = list(param_oids)
        n = params.count(sql)
        self.param_oids = declared + [None] * max(0, n - len(declared))
        self._columns: list[Column] | None = None

    def _describe(self, worker: Worker) -> list[Column]:
        con = worker.connection
        text = params.stand_ins(self.sql, self.param_oids) if self.param_oids else params.inline(self.sql, [], [])
        from dpsql._query.probe import answer_probe
        from dpsql.describe import answer

        from .columns import oid_of_arrow

        shown = answer(con, text)  # DESCRIBE t, SHOW TABLES, ...: from the policy, free
        # a zero-row probe: names and types from dpsql's resolution, as Connection.sql answers it
        empty = shown.table if shown is not None else answer_probe(text, con.policy, con.engine)
        if empty is not None:
            return [Column(f.name, oid_of_arrow(f.type)) for f in empty.schema]
        return worker.binder.columns(con, con.prepare(text))

    async def columns(self) -> list[Column]:
        if self._columns is None:
            self._columns = await self.session.run(self._describe)
        return self._columns

    async def describe(self) -> list[ResultColumn] | None:
        return [ResultColumn(c.name, c.oid) for c in await self.columns()]

    def bind(self, values: list[t.Any]) -> Portal:
        return DPPortal(self, values)


class ExecuteStatement(DPStatement):
    """``EXECUTE name(args)``: the named statement, bound to the literal arguments."""

    def __init__(self, session: DPSession, sql: str, oids: list[int | None], values: list[t.Any]) -> None:
        super().__init__(session, sql, oids)
        self.values = values

    def bind(self, values: list[t.Any]) -> Portal:
        return DPPortal(self, self.values)


def sql_prepared(session: DPSession, w: utility.Words | None) -> Statement | None:
    """``PREPARE name [(types)] AS statement``, ``EXECUTE name(args)`` and ``DEALLOCATE name``:
    prepared statements for clients that have no extended protocol (psql). Arguments must be
    literals; they are inlined like bound parameters, and each EXECUTE is charged."""
    from pg_mimic import StaticStatement

    head = w.keyword(0) if w is not None else ""
    if w is None or head not in ("PREPARE", "EXECUTE", "DEALLOCATE"):
        return None
    if head == "DEALLOCATE":
        at = 2 if w.keyword(1) == "PREPARE" else 1
        if w.keyword(at) == "ALL" and len(w.tokens) == at + 1:
            return StaticStatement(w.sql, None, [], session.named.clear)
        name = w.name(at)
        return StaticStatement(w.sql, None, [], lambda: session.named.pop(name or "", None))
    name = w.name(1)
    if head == "PREPARE":
        return _prepare(session, w, name)
    if name not in session.named:
        raise PgError("26000", f'prepared statement "{name}" does not exist; PREPARE it first')
    body, oids = session.named[name]
    values = _literal_args(w.rest(3)[:-1] if w.keyword(2) == "(" and w.keyword(len(w.tokens) - 1) == ")" else "")
    return ExecuteStatement(session, body, oids + [None] * max(0, len(values) - len(oids)), values)


def _prepare(session: DPSession, w: utility.Words, name: str | None) -> Statement:
    from pg_mimic import StaticStatement

    at, types = 2, []
    if w.keyword(2) == "(":
        close = next((i for i in range(3, len(w.tokens)) if w.keyword(i) == ")"), None)
        if close is None:
            raise PgError("42601", "PREPARE name (types) AS statement: the list of types is not closed")
        text = w.sql[w.tokens[2].end + 1:w.tokens[close].start]
        types = [part.strip() for part in text.split(",") if part.strip()]
        at = close + 1
    if name is None or w.keyword(at) != "AS" or at + 1 >= len(w.tokens):
        raise PgError("42601", "PREPARE takes a name and a statement: PREPARE name [(types)] AS SELECT ...")
    if name in session.named:
        raise PgError("42P05", f'prepared statement "{name}" already exists; DEALLOCATE it first')
    # EXECUTE pads them with None (a type to infer) for parameters the list does not name
    oids: list[int | None] = [oid_of_duckdb(_DUCKDB_NAMES.get(" ".join(ty.lower().split()), ty)) for ty in types]
    body = w.rest(at + 1)

    def store() -> None:
        session.named[name] = (body, oids)

    return StaticStatement(w.sql, None, [], store)


_DUCKDB_NAMES = {"int": "INTEGER", "int4": "INTEGER", "int8": "BIGINT", "int2": "SMALLINT", "float8": "DOUBLE",
                 "double precision": "DOUBLE", "float4": "REAL", "text": "VARCHAR", "numeric": "DECIMAL",
                 "bool": "BOOLEAN"}


def _literal_args(text: str) -> list[t.Any]:
    """The values of ``EXECUTE``'s arguments, which must be literals (or NULL)."""
    import sqlglot
    from sqlglot import exp

    if not text.strip():
        return []
    try:
        # parsed, never run: only literals are read off the tree below, anything else is refused
        select = sqlglot.parse_one(f"SELECT {text}", read="postgres")
    except Exception:
        raise PgError("42601", "EXECUTE takes literal arguments: EXECUTE name(30, 'text')") from None
    values: list[t.Any] = []
    for node in select.expressions:
        negative = isinstance(node, exp.Neg)
        inner = node.this if negative else node
        if isinstance(inner, exp.Null) and not negative:
            values.append(None)
        elif isinstance(inner, exp.Boolean) and not negative:
            values.append("true" if inner.this else "false")
        elif isinstance(inner, exp.Literal) and (inner.is_number or not negative):
            values.append(("-" if negative else "") + str(inner.this))
        else:
            raise PgError("42601", "EXECUTE takes literal arguments: EXECUTE name(30, 'text')")
    return values


class DPPortal(Portal):
    def __init__(self, statement: DPStatement, values: list[t.Any]) -> None:
        self.statement = statement
        self.values = values
        self._rows: list[tuple[t.Any, ...]] | None = None
        self._at = 0

    def _run(self, worker: Worker, columns: list[Column]) -> list[tuple[t.Any, ...]]:
        st = self.statement
        session = st.session
        text = params.inline(st.sql, self.values, st.param_oids)
        con = worker.connection
        con.ledger = session.pool.ledger_for(session.users.get(session.user), session.user)
        con.user = session.user  # releases are reused per user
        result = con.sql(text)
        return conform(result.table, columns)

    async def execute(self, max_rows: int) -> tuple[list[tuple[t.Any, ...]], bool]:
        if self._rows is None:
            columns = await self.statement.columns()
            self._rows = await self.statement.session.run(lambda w: self._run(w, columns))
        end = len(self._rows) if max_rows <= 0 else min(len(self._rows), self._at + max_rows)
        rows = self._rows[self._at:end]
        self._at = end
        return rows, max_rows > 0 and end < len(self._rows)
