"""``x IN (SELECT c FROM public_table [WHERE ...])`` in a DP query: a filter by public values.

The subquery reads one public table: its rows are public, and whether a private row is in the set
depends on that row and public values only, like any WHERE. Everything else in a subquery over
private rows stays refused (see :mod:`dpsql.sql.allow`).
"""

from __future__ import annotations

import typing as t
import zlib

from sqlglot import exp

from dpsql.errors import PrivacyError
from dpsql.sql.joins import Catalog, Declared, qualified
from dpsql.sql.relation import Columns, Relation
from dpsql.sql.total import total


def _refuse(msg: str) -> t.NoReturn:
    raise PrivacyError(msg)


def _sql(node: exp.Expression) -> str:
    return node.sql(dialect="duckdb")


def public_in(declared: Declared, catalog: Catalog, database: str | None) -> t.Callable[[exp.In, Relation], exp.Expression]:
    """A binder of ``x IN (SELECT c FROM public_table [WHERE p])`` for :class:`Relation`.

    The subquery reads one public table: its rows are public, and whether a private row is in
    the set depends on that row and public values only, like any WHERE. ``x`` is bound over the
    private rows (allowed expressions only) and cast to ``c``'s type, so that no value can make
    the comparison fail; ``p`` is checked like a private predicate and made total too.
    """
    def bind(node: exp.In, rel: Relation) -> exp.Expression:
        sub = node.args["query"]
        query = sub.this if isinstance(sub, exp.Subquery) else sub
        what = "IN (SELECT ...)"
        if not isinstance(query, exp.Select) or any(
                v for k, v in query.args.items() if k not in ("expressions", "from_", "where")):
            _refuse(f"{what} in a DP query may only be SELECT column FROM public_table [WHERE ...]")
        source = query.args.get("from_")
        table = source.this if source is not None else None
        if not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier) or \
                len(query.expressions) != 1 or not isinstance(query.expressions[0], exp.Column):
            _refuse(f"{what} in a DP query may only be SELECT column FROM public_table [WHERE ...]")
        if any(v for k, v in table.args.items() if k not in ("this", "db", "catalog", "alias")):
            _refuse(f"{what}: table-level operators (TABLESAMPLE, PIVOT, ...) are not allowed in a DP query")
        tp = declared(table)
        if not tp.public:
            _refuse(f"{what} over private table {tp.name} is not allowed: its rows would decide which "
                    "private rows are kept; only public tables may filter a DP query this way")
        types = catalog(tp.name) or {}
        alias = (table.alias_or_name or table.name).lower()
        name = f"__i{zlib.crc32(node.sql().encode()) % 10**8}"
        columns: Columns = {c: exp.column(c, table=name, quoted=True) for c in types}
        inner = Relation(tp, columns, alias)
        col = inner.column(query.expressions[0], what)
        where = ""
        if query.args.get("where") is not None:
            where = " WHERE " + _sql(total(inner.substitute(query.args["where"].this, what)))
        value = rel.substitute(node.this, what)
        ctype = types.get(col.name, "VARCHAR")
        text = (f"TRY_CAST({_sql(total(value))} AS {ctype}) IN (SELECT {_sql(col)} FROM "
                f"{_sql(qualified(tp, database))} AS {name}{where})")
        return exp.Paren(this=exp.maybe_parse(text, dialect="duckdb"))

    return bind
