"""Catalog queries, answered from the policy: the declared tables (in schema ``public``) and
their columns with PostgreSQL types, never the data.

A client's ``pg_catalog`` and ``information_schema`` queries (psql's ``\\d``, SQLAlchemy's
inspector, the JDBC driver's ``DatabaseMetaData``, Grafana's table list, ...) and its table-less
session queries (``SELECT pg_catalog.version()``, ``current_schemas(true)``, ...) are recognised
on the parsed statement (:mod:`.pgrewrite`) and run on the scratch catalog (:mod:`.pgtables`):
an in-memory DuckDB that holds the declared tables' catalog rows and nothing else. Bound
parameters are inlined as literals when the statement runs; its columns are described by
binding it with stand-ins, before any value exists. A catalog query the scratch catalog cannot
evaluate (a relation it does not emulate) gets no rows, never an error a client would stop on;
one that also reads a table of the database is refused. dpsql's own catalog statements
(``SHOW TABLES``, ``DESCRIBE t``, ...) go to dpsql.
"""

from __future__ import annotations

import asyncio
import logging
import typing as t

import duckdb
from pg_mimic import Portal, ResultColumn, Statement
from pg_mimic.arrays import ARRAY_OID
from pg_mimic.errors import PgError
from sqlglot import exp

from . import pgrewrite
from .columns import TEXT, Column, conform, oid_of_duckdb
from .scratch import Scratch

if t.TYPE_CHECKING:
    from dpsql.connection import Connection

log = logging.getLogger("dpsql.serve")


def tables(con: Connection) -> dict[str, dict[str, int]]:
    """Declared table → column → PostgreSQL type OID, for the tables the database holds."""
    out = {}
    for name in con.tables():
        out[name] = {col: oid_of_duckdb(dtype) for col, dtype in (con.columns(name) or {}).items()}
    return out


def context(connection: t.Any) -> pgrewrite.Context:
    """What a catalog query may ask of the connection (user, database, settings)."""
    from .utility import setting

    version = connection.server.parameter_status.get("server_version", "16.0")
    return pgrewrite.Context(user=connection.username, database=connection.database, pid=connection.pid,
                             settings=lambda name: setting(connection, name), version=f"PostgreSQL {version}")


def _oid(dtype: str) -> int:
    if dtype.endswith("[]"):
        return ARRAY_OID.get(_oid(dtype[:-2]), TEXT)
    return oid_of_duckdb(dtype)


def _bound(tree: exp.Expr, values: list[t.Any] | None, oids: list[int | None]) -> str:
    """``tree`` as DuckDB SQL, its parameters replaced by literals of ``values`` (None: stand-ins
    that only serve to bind it)."""
    from .params import literal

    tree = tree.copy()
    for node in list(tree.find_all(exp.Parameter)):
        n = int(str(node.this.this)) if isinstance(node.this, exp.Literal) else 0
        if values is None:
            stand_in = node.find_ancestor(exp.Limit, exp.Offset) is not None
            node.replace(exp.Literal.number(1) if stand_in else exp.null())
        elif 1 <= n <= len(values):
            node.replace(literal(values[n - 1], oids[n - 1] if n - 1 < len(oids) else None, False))
        else:
            raise PgError("08P01", f"the statement takes parameter ${n}, but {len(values)} were bound")
    return tree.sql(dialect="duckdb")


class CatalogStatement(Statement):
    """A catalog query: described by binding it on the scratch catalog, run there per execution."""

    def __init__(self, scratch: Scratch, sql: str, tree: exp.Expr | None, names: list[str],
                 param_oids: list[int | None], effects: t.Callable[[], None] | None = None) -> None:
        self.scratch = scratch
        self.sql = sql
        self.tree = tree  # None: not answerable, no rows
        self.names = names
        count = len(list(tree.find_all(exp.Parameter))) if tree is not None else 0
        numbers = [int(str(p.this.this)) for p in tree.find_all(exp.Parameter)
                   if isinstance(p.this, exp.Literal)] if tree is not None else []
        wanted = max(numbers or [count])
        self.param_oids = list(param_oids) + [None] * max(0, wanted - len(param_oids))
        self.effects = effects
        self._columns: list[ResultColumn] | None = None

    async def describe(self) -> list[ResultColumn] | None:
        if self._columns is None:
            self._columns = self._describe()
        return self._columns

    def _describe(self) -> list[ResultColumn]:
        if self.tree is not None:
            try:
                return [ResultColumn(n, _oid(d)) for n, d in self.scratch.describe(_bound(self.tree, None, []))]
            except duckdb.Error as err:
                log.info("catalog query answered with no rows (%s): %s", str(err).splitlines()[0], self.sql)
                self.tree = None
        return [ResultColumn(n, TEXT) for n in self.names]

    def bind(self, values: list[t.Any]) -> Portal:
        return CatalogPortal(self, values)


class CatalogPortal(Portal):
    def __init__(self, statement: CatalogStatement, values: list[t.Any]) -> None:
        self.statement = statement
        self.values = values
        self._rows: list[tuple[t.Any, ...]] | None = None
        self._at = 0

    async def _run(self, columns: list[ResultColumn]) -> list[tuple[t.Any, ...]]:
        st = self.statement
        if st.effects is not None:
            st.effects()
        if st.tree is None:
            return []
        try:  # off the event loop: other connections go on while it runs
            table = await asyncio.to_thread(st.scratch.run, _bound(st.tree, self.values, st.param_oids))
        except duckdb.Error as err:
            log.info("catalog query answered with no rows (%s): %s", str(err).splitlines()[0], st.sql)
            return []
        return conform(table, [Column(c.name, c.oid) for c in columns])

    async def execute(self, max_rows: int) -> tuple[list[tuple[t.Any, ...]], bool]:
        if self._rows is None:
            self._rows = await self._run(await self.statement.describe() or [])
        end = len(self._rows) if max_rows <= 0 else min(len(self._rows), self._at + max_rows)
        rows = self._rows[self._at:end]
        self._at = end
        return rows, max_rows > 0 and end < len(self._rows)


def answer(connection: t.Any, scratch: t.Callable[[], Scratch], sql: str, param_oids: list[int | None],
           words: t.Iterable[str] | None = None) -> Statement | None:
    """The statement answering a catalog query, or None when ``sql`` is not one (``words``: its
    tokens' texts, when known; a statement without a catalog word is not parsed)."""
    if words is not None and not pgrewrite.may_be_catalog_query(words):
        return None
    tree = pgrewrite.parse(sql)
    if not pgrewrite.is_catalog_query(tree):
        return None
    assert tree is not None
    ctx = context(connection)
    names = pgrewrite.output_names(tree)
    try:
        rewritten: exp.Expr | None = pgrewrite.rewrite(tree, ctx)
    except pgrewrite.NotCatalog as err:
        raise PgError("42501", f"a catalog query cannot also read {err}: pg_catalog and information_schema "
                               "queries read the catalog only; query the table on its own") from None
    except pgrewrite.Unanswerable as err:
        log.info("catalog query answered with no rows (%s is not emulated): %s", err, sql)
        rewritten = None
    effects = None
    if ctx.effects:
        def effects() -> None:
            for name, value in ctx.effects:
                if value is None:
                    connection.session_vars.pop(name, None)
                else:
                    connection.session_vars[name] = value
    return CatalogStatement(scratch(), sql, rewritten, names, param_oids, effects)

