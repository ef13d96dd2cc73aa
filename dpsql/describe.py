"""``DESCRIBE t``, ``SHOW TABLES``, ``SHOW COLUMNS FROM t`` and ``information_schema`` queries,
answered from the policy and the catalog.

Table and column names and types are not private, and analysts (and tools) look for them this
way. None of these statements reaches DuckDB's own DESCRIBE or SHOW on the analyst's
connection: the answer is built from the tables the policy declares and the database holds
(their names and types only), and an ``information_schema`` query runs on a copy of those
tables' rows of ``information_schema.tables``, ``columns`` and ``schemata``, in a separate,
locked-down in-memory DuckDB that holds nothing else. Tables the policy does not declare do not
appear. A statement that is none of these returns ``None`` and goes on to the binder.
"""

from __future__ import annotations

import re
import typing as t

from sqlglot import exp

from dpsql.errors import BindError, PrivacyError
from dpsql.result import Result

if t.TYPE_CHECKING:
    import pyarrow as pa

_PART = r'(?:"(?:[^"]|"")+"|[A-Za-z_][\w$]*)'
#: a table name of one to three parts (``t``, ``s.t``, ``c.s.t``), each bare or quoted
_NAME = rf'(?P<name>{_PART}(?:\s*\.\s*{_PART}){{0,2}})'
_END = r"\s*;?\s*$"
_SHOW_TABLES = re.compile(r"^\s*SHOW\s+(?P<all>ALL\s+)?TABLES" + _END, re.IGNORECASE)
_SHOW_COLUMNS = re.compile(r"^\s*SHOW\s+COLUMNS\s+(?:FROM|IN)\s+" + _NAME + _END, re.IGNORECASE)
_DESCRIBE = re.compile(r"^\s*(?:DESCRIBE|DESC|SHOW)\s+(?:TABLE\s+)?" + _NAME + _END, re.IGNORECASE)
#: information_schema views an analyst may query (their rows for the declared tables)
INFORMATION_SCHEMA = ("tables", "columns", "schemata")
_SCRATCH_SCHEMA = "dpsql_information_schema"


def answer(con: t.Any, query: str) -> Result | None:
    """The answer to a catalog statement on ``con`` (a :class:`dpsql.Connection`), or None."""
    if query.lstrip()[:4].upper() not in ("SHOW", "DESC"):  # what every pattern below starts with
        return information_schema(con, query) if "information_schema" in query.lower() else None
    m = _SHOW_TABLES.match(query)
    if m:
        return show_all_tables(con) if m.group("all") else show_tables(con)
    m = _SHOW_COLUMNS.match(query) or _DESCRIBE.match(query)
    if m:
        name = _unquote(m.group("name"))
        # SHOW DATABASES, SHOW SETTINGS, ...: only SHOW of a declared table is a DESCRIBE
        if not query.lstrip()[:4].upper() == "SHOW" or _SHOW_COLUMNS.match(query) or _resolve(con, name):
            return describe(con, name)
    if "information_schema" in query.lower():
        return information_schema(con, query)
    return None


def _unquote(name: str) -> str:
    """``"a"."b"`` → ``a.b`` (a name's parts, unquoted and joined by dots)."""
    parts = re.findall(_PART, name)
    return ".".join(p[1:-1].replace('""', '"') if p.startswith('"') else p for p in parts)


def _resolve(con: t.Any, name: str) -> list[str]:
    """The policy keys a table name ``[[catalog.]schema.]table`` can mean (:meth:`Policy.resolve`)."""
    parts = name.lower().split(".")
    if len(parts) > 3:
        return []
    return con.policy.resolve(*reversed(parts), exists=con.columns)


def _arrow(columns: list[str], rows: list[tuple[t.Any, ...]]) -> pa.Table:
    import pyarrow as pa

    return pa.table({c: [r[i] for r in rows] for i, c in enumerate(columns)})


def _declared(con: t.Any, name: str) -> tuple[t.Any, dict[str, str]]:
    """The policy of table ``name`` and its columns, or the error a query on it would raise."""
    from dpsql._sql.suggest import did_you_mean

    found = _resolve(con, name)
    if len(found) > 1:
        raise BindError(f"table {name} is ambiguous: it can mean {' or '.join(found)}; name it in full")
    tp = con.policy.table(found[0]) if found else None
    columns = con.columns(found[0]) if found else None
    if tp is None and columns is None:
        raise BindError(f"table {name} does not exist" + did_you_mean(name, con.tables()))
    if tp is None:
        raise PrivacyError(f"table {name} is not declared in the policy, so it cannot be read")
    if columns is None:
        raise BindError(f"table {name} is in the policy but does not exist in the database")
    return tp, columns


def describe(con: t.Any, name: str) -> Result:
    """``DESCRIBE t``: each column's name and DuckDB type, and the policy's bounds and keys."""
    tp, columns = _declared(con, name)
    rows = []
    for col, dtype in columns.items():
        cp = tp.column(col)
        bounds = f"[{cp.lower:g}, {cp.upper:g}]" if cp.bounds else None
        keys = ", ".join(map(str, cp.keys)) if cp.keys else None
        rows.append((col, dtype, bounds, keys))
    return Result(table=_arrow(["column_name", "column_type", "bounds", "keys"], rows))


def show_tables(con: t.Any) -> Result:
    """``SHOW TABLES``: the declared tables the database holds, private or public."""
    rows = [(name, "public" if con.policy.tables[name].public else "private") for name in con.tables()]
    return Result(table=_arrow(["name", "access"], rows))


def show_all_tables(con: t.Any) -> Result:
    """``SHOW ALL TABLES``: DuckDB's columns, for the declared tables."""
    rows = []
    for name in con.tables():
        columns = con.columns(name) or {}
        tp = con.policy.tables[name]
        catalog = con.engine.catalog_of(name)
        rows.append((catalog, tp.schema, tp.table_name, list(columns), list(columns.values()), catalog == "temp"))
    return Result(table=_arrow(["database", "schema", "name", "column_names", "column_types", "temporary"], rows))


def information_schema(con: t.Any, query: str) -> Result | None:
    """An ``information_schema`` query, run over the declared tables' rows only; None if the
    query reads no ``information_schema`` view."""
    from sqlglot import exp

    from dpsql._sql import dialect
    from dpsql._sql.guards import check_functions, check_statement

    parsed = dialect.parse(query)
    tree = parsed.this
    tables = list(tree.find_all(exp.Table))
    views = [tb for tb in tables if tb.db.lower() == "information_schema"]
    if not views:
        return None
    if parsed.args.get("options") is not None or parsed.args.get("explain"):
        raise PrivacyError("an information_schema query takes no WITH (...) privacy options and no EXPLAIN")
    if tree.args.get("hint") is not None:
        raise PrivacyError("an information_schema query takes no WITH DIFFERENTIAL_PRIVACY clause: it reads "
                           "no private table")
    check_statement(tree)
    check_functions(tree)
    ctes = {cte.alias.lower() for cte in tree.find_all(exp.CTE)}
    for tb in tables:
        if tb in views:
            if tb.name.lower() not in INFORMATION_SCHEMA or tb.catalog not in ("", con.engine.database):
                raise PrivacyError(f"information_schema.{tb.name} is not available; the views that are: "
                                   + ", ".join(f"information_schema.{v}" for v in INFORMATION_SCHEMA))
        elif tb.db or tb.name.lower() not in ctes:
            raise PrivacyError(f"an information_schema query cannot also read {tb.sql(dialect='duckdb')}; "
                               "it reads information_schema.tables, columns and schemata only")
    for tb in views:
        alias = tb.args.get("alias")
        new = exp.table_(tb.name.lower(), db=_SCRATCH_SCHEMA, quoted=True)
        new.set("alias", alias.copy() if alias is not None else exp.TableAlias(this=exp.to_identifier(tb.name)))
        tb.replace(new)
    return Result(table=_run_on_copy(con, tree.sql(dialect="duckdb")))


def _run_on_copy(con: t.Any, sql: str) -> pa.Table:
    """Run ``sql`` in a locked-down in-memory DuckDB holding the declared tables' catalog rows
    (:meth:`~dpsql.backends.backend.Backend.catalog_rows`)."""
    import duckdb

    from dpsql.backends.sandbox import harden

    engine = con.engine
    declared = [(n, engine.catalog_of(n) or "", con.policy.tables[n].schema, con.policy.tables[n].table_name)
                for n in con.tables()]
    copies = engine.catalog_rows(declared)
    scratch = duckdb.connect(":memory:")
    try:
        scratch.execute(f'CREATE SCHEMA "{_SCRATCH_SCHEMA}"')
        for view in INFORMATION_SCHEMA:
            scratch.register("__rows", copies[view])
            copy = exp.Create(kind="TABLE", this=exp.table_(view, db=_SCRATCH_SCHEMA, quoted=True),
                              expression=exp.select("*").from_("__rows"))
            scratch.execute(copy.sql(dialect="duckdb"))
            scratch.unregister("__rows")
        harden(scratch)
        try:
            return scratch.sql(sql).to_arrow_table()
        except duckdb.Error as err:  # the copy holds names and types only: the message may be shown
            raise BindError(f"DuckDB cannot run the query: {str(err).splitlines()[0]}") from None
    finally:
        scratch.close()
