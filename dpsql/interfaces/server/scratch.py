"""The scratch catalog: an in-memory DuckDB holding the relations of :mod:`.pgtables`, filled in
from the declared tables' names and column types, and nothing else.

It is locked down like an analyst connection (no files, network or extensions), built once per
server on the first catalog query, and used under a lock. :mod:`.pgrewrite` turns a client's
catalog query into a query over it; the macros here stand in for the catalog functions that
look names and OIDs up (``format_type``, ``to_regclass``, ...). Relations that depend on the
connection are table macros of the user and the database.
"""

from __future__ import annotations

import functools
import threading
import typing as t

import duckdb
import sqlglot
from sqlglot import exp

from .pgtables import (
    FIRST_TABLE,
    INFO,
    INFORMATION_SCHEMA,
    PG,
    PG_CATALOG,
    PSEUDO,
    PUBLIC,
    SCHEMAS,
    SETTINGS,
    TEXT_COLLATION,
    TYPE_NAMES,
    TYPES,
    column_specs,
    display,
)


def _value(default: t.Any, dtype: str) -> t.Any:
    if isinstance(default, str) and dtype in ("INTEGER", "SMALLINT", "BIGINT"):
        return int(default)
    if isinstance(default, str) and dtype == "REAL":
        return float(default)
    if isinstance(default, str):
        return default.strip("'")
    return default


def _type_rows() -> list[dict[str, t.Any]]:
    rows = []
    elements = {array: oid for oid, _, _, _, array, _ in TYPES if array}
    for oid, name, length, category, array, _shown in TYPES:
        rows.append({"oid": oid, "typname": name, "typlen": length, "typdelim": ",", "typbyval": length in (1, 2, 4, 8),
                     "typtype": "p" if name in PSEUDO else "b", "typcategory": category, "typarray": array,
                     "typinput": f"{name}in", "typoutput": f"{name}out", "typreceive": f"{name}recv",
                     "typsend": f"{name}send", "typcollation": 950 if name == "name" else
                     TEXT_COLLATION if category == "S" else 0,
                     "typispreferred": name in ("bool", "text", "float8", "oid", "timestamptz", "interval")})
    for array, element in elements.items():
        name = TYPE_NAMES[element]
        rows.append({"oid": array, "typname": f"_{name}", "typlen": -1, "typdelim": ",", "typbyval": False, "typcategory": "A",
                     "typelem": element, "typinput": "array_in", "typoutput": "array_out",
                     "typreceive": "array_recv", "typsend": "array_send", "typalign": "d", "typstorage": "x",
                     "typsubscript": "array_subscript_handler"})
    return rows


def catalog_rows(declared: dict[str, dict[str, int]]) -> dict[str, list[dict[str, t.Any]]]:
    """The rows of the relations that have any, from the declared tables' names and column types."""
    classes, attributes, tables, columns = [], [], [], []
    for index, (table, cols) in enumerate(sorted(declared.items())):
        oid = FIRST_TABLE + index
        classes.append({"oid": oid, "relname": table, "relnatts": len(cols)})
        tables.append({"schemaname": "public", "tablename": table})
        for position, (col, type_oid) in enumerate(cols.items(), start=1):
            length = next((n for o, _, n, *_ in TYPES if o == type_oid), -1)
            text = type_oid in (25, 1043, 1042)
            attributes.append({"attrelid": oid, "attname": col, "atttypid": type_oid, "attlen": length,
                               "attnum": position, "attbyval": length in (1, 2, 4, 8),
                               "attcollation": TEXT_COLLATION if text else 0})
            columns.append({"table_name": table, "column_name": col, "ordinal_position": position,
                            "data_type": display(type_oid), "udt_name": TYPE_NAMES.get(type_oid, "text"),
                            "dtd_identifier": str(position), "numeric_precision_radix":
                            2 if type_oid in (20, 21, 23, 700, 701) else 10 if type_oid == 1700 else None,
                            "collation_name": None})
    namespaces = [{"oid": PG_CATALOG, "nspname": "pg_catalog"}, {"oid": PUBLIC, "nspname": "public"},
                  {"oid": INFORMATION_SCHEMA, "nspname": "information_schema"}]
    return {
        "pg_namespace": namespaces, "pg_class": classes, "pg_attribute": attributes, "pg_type": _type_rows(),
        "pg_tables": tables, "pg_roles": [{}], "pg_user": [{}], "pg_database": [{}],
        "pg_am": [{"oid": 2, "amname": "heap", "amhandler": "heap_tableam_handler", "amtype": "t"},
                  {"oid": 403, "amname": "btree", "amhandler": "bthandler", "amtype": "i"},
                  {"oid": 405, "amname": "hash", "amhandler": "hashhandler", "amtype": "i"}],
        "pg_tablespace": [{"oid": 1663, "spcname": "pg_default"}, {"oid": 1664, "spcname": "pg_global"}],
        "pg_language": [{"oid": 12, "lanname": "internal", "lanowner": 10, "lanispl": False, "lanpltrusted": False},
                        {"oid": 14, "lanname": "sql", "lanowner": 10, "lanispl": False, "lanpltrusted": True}],
        "pg_settings": [{"name": name, "setting": value, "reset_val": value, "boot_val": value}
                        for name, value in sorted(SETTINGS.items())],
        "tables": [{"table_name": row["relname"]} for row in classes],
        "columns": columns,
        "schemata": [{"schema_name": n["nspname"]} for n in namespaces],
    }


def _create(con: duckdb.DuckDBPyConnection, schema: str, name: str, spec: str, rows: list[dict[str, t.Any]]) -> None:
    columns = column_specs(spec)
    filled = [(c, d.replace("@user", "").replace("@db", "").strip(), v) for c, d, v in columns]
    base = f"_{name}" if "@" in spec else name
    table = exp.table_(base, db=schema, quoted=True)
    defs = [exp.ColumnDef(this=exp.to_identifier(c, quoted=True), kind=exp.DataType.build(d, dialect="duckdb"))
            for c, d, _ in filled]
    con.execute(exp.Create(kind="TABLE", this=exp.Schema(this=table, expressions=defs)).sql(dialect="duckdb"))
    if rows:
        con.executemany(_insert(table, len(filled)),
                        [[row.get(c, _value(v, d)) for c, d, v in filled] for row in rows])
    if "@" in spec:  # a table macro of the connection's user and database
        replaced = [(c, "u" if "@user" in d else "d") for c, d, _ in columns if "@" in d]
        con.execute(_macro(exp.table_(name, db=schema, quoted=True), table, replaced))


def _insert(table: exp.Table, width: int) -> str:
    """``INSERT INTO table VALUES (?, ...)``, ``width`` bound parameters.

    >>> _insert(exp.table_("t", db="s", quoted=True), 2)
    'INSERT INTO "s"."t" VALUES (?, ?)'
    """
    return exp.insert(exp.values([tuple(exp.Placeholder() for _ in range(width))]), table).sql(dialect="duckdb")


@functools.cache
def _macro_template() -> exp.Create:
    return t.cast(exp.Create, sqlglot.parse_one("CREATE MACRO m(u, d) AS TABLE SELECT * REPLACE (u AS c) FROM b",
                                                read="duckdb"))


def _macro(name: exp.Table, base: exp.Table, replaced: list[tuple[str, str]]) -> str:
    """A table macro of the user ``u`` and database ``d``: ``base`` with these columns replaced.

    >>> print(_macro(exp.table_("m", db="s", quoted=True), exp.table_("_m", db="s", quoted=True), [("c", "u")]))
    CREATE MACRO "s"."m"(u, d) AS TABLE SELECT * REPLACE (u AS "c") FROM "s"."_m"
    """
    tree = _macro_template().copy()
    tree.this.set("this", name)
    select = tree.expression
    select.expressions[0].set("replace", [exp.alias_(exp.column(arg), column, quoted=True) for column, arg in replaced])
    select.args["from_"].set("this", base)
    return tree.sql(dialect="duckdb")


_MACROS = """
CREATE MACRO {pg}.format_type(t, m) AS (SELECT any_value(shown) FROM {pg}._type_names WHERE oid = t);
CREATE MACRO {pg}.to_regtype(n) AS (SELECT any_value(oid) FROM {pg}._type_names
    WHERE typname = lower(trim(regexp_replace(n, '^pg_catalog\\.', ''), '"')) OR shown = lower(n));
CREATE MACRO {pg}.to_regclass(n) AS (SELECT any_value(oid) FROM {pg}._class_names
    WHERE name = trim(regexp_replace(n, '^.*\\.', ''), '"'));
CREATE MACRO {pg}.to_regnamespace(n) AS (SELECT any_value(oid) FROM {pg}.pg_namespace WHERE nspname = trim(n, '"'));
CREATE MACRO {pg}.regtype_name(o) AS (SELECT any_value(shown) FROM {pg}._type_names WHERE oid = o);
CREATE MACRO {pg}.regclass_name(o) AS (SELECT any_value(name) FROM {pg}._class_names WHERE oid = o);
CREATE MACRO {pg}.regnamespace_name(o) AS (SELECT any_value(nspname) FROM {pg}.pg_namespace WHERE oid = o);
CREATE MACRO {pg}.quote_ident(s) AS CASE WHEN regexp_full_match(s, '[a-z_][a-z0-9_$]*') THEN s
    ELSE '"' || replace(s, '"', '""') || '"' END;
CREATE MACRO {pg}.array_upper(a, d) AS CASE WHEN len(a) > 0 THEN len(a) END;
CREATE MACRO {pg}.array_lower(a, d) AS CASE WHEN len(a) > 0 THEN 1 END;
CREATE MACRO {pg}._pg_expandarray(a) AS unnest(list_transform(a, lambda x, i: {{'x': x, 'n': i}}));
CREATE MACRO {pg}.pg_get_keywords() AS TABLE SELECT keyword_name AS word,
    CASE keyword_category WHEN 'reserved' THEN 'R' WHEN 'unreserved' THEN 'U' WHEN 'type_function' THEN 'T'
    ELSE 'C' END AS catcode, keyword_category AS catdesc, keyword_category AS barelabel FROM duckdb_keywords();
"""


def build(declared: dict[str, dict[str, int]]) -> duckdb.DuckDBPyConnection:
    """The scratch DuckDB: every relation of :data:`PG` and :data:`INFO`, with the rows of
    :func:`catalog_rows`, and the macros :mod:`.pgrewrite` calls; then locked down."""
    from dpsql.backends.sandbox import harden

    con = duckdb.connect(":memory:")
    try:
        rows = catalog_rows(declared)
        for schema, specs in (("pg_catalog", PG), ("information_schema", INFO)):
            con.execute(f'CREATE SCHEMA "{SCHEMAS[schema]}"')
            for name, spec in specs.items():
                _create(con, SCHEMAS[schema], name, spec, rows.get(name, []))
        pg = SCHEMAS["pg_catalog"]
        types, classes = exp.table_("_type_names", db=pg, quoted=True), exp.table_("_class_names", db=pg, quoted=True)
        con.execute(f'CREATE TABLE "{pg}"._type_names (oid INTEGER, typname VARCHAR, shown VARCHAR)')
        con.executemany(_insert(types, 3), [(r["oid"], r["typname"], display(r["oid"])) for r in rows["pg_type"]])
        con.execute(f'CREATE TABLE "{pg}"._class_names (oid INTEGER, name VARCHAR)')
        names = [(r["oid"], r["relname"]) for r in rows["pg_class"]]
        names += [(oid, name) for name, oid in _CATALOG_OIDS.items()]
        con.executemany(_insert(classes, 2), names)
        for statement in _MACROS.format(pg=pg).split(";"):
            if statement.strip():
                con.execute(statement)
        for name, value in _LIMITS:  # a catalog query is small; one that is not must not take the server
            con.execute(f"SET {name} = '{value}'")
        harden(con)
    except BaseException:
        con.close()
        raise
    return con


#: the OIDs PostgreSQL gives its catalog relations (``'pg_class'::regclass``)
_CATALOG_OIDS = {"pg_class": 1259, "pg_type": 1247, "pg_proc": 1255, "pg_attribute": 1249, "pg_namespace": 2615,
                 "pg_constraint": 2606, "pg_index": 2610, "pg_description": 2609, "pg_database": 1262,
                 "pg_trigger": 2620, "pg_rewrite": 2618, "pg_am": 2601, "pg_attrdef": 2604, "pg_collation": 3456,
                 "pg_roles": 1260, "pg_authid": 1260, "pg_tablespace": 1213, "pg_extension": 3079}


#: what one catalog query may use of the machine
_LIMITS = (("memory_limit", "256MB"), ("threads", "1"))
#: seconds a catalog query may run before it is interrupted (and answered with no rows)
TIMEOUT = 10.0


class Scratch:
    """The server's scratch catalog: one DuckDB, used under a lock; a query that runs longer
    than :data:`TIMEOUT` is interrupted."""

    def __init__(self, declared: dict[str, dict[str, int]]) -> None:
        self.declared = declared
        self._con = build(declared)
        self._lock = threading.Lock()

    def describe(self, sql: str) -> list[tuple[str, str]]:
        """Names and DuckDB types of what ``sql`` returns (bound, not run)."""
        with self._lock:
            rel = self._con.sql(sql)
            return list(zip(rel.columns, [str(d) for d in rel.types]))

    def run(self, sql: str) -> t.Any:
        """The rows of ``sql`` as an Arrow table (a DuckDB error when it is interrupted)."""
        with self._lock:
            timer = threading.Timer(TIMEOUT, self._con.interrupt)
            timer.start()
            try:
                return self._con.sql(sql).to_arrow_table()
            finally:
                timer.cancel()


_SHARED: dict[int, tuple[dict[str, dict[str, int]], Scratch]] = {}
_SHARED_LOCK = threading.Lock()


def scratch_for(declared: dict[str, dict[str, int]]) -> Scratch:
    """The scratch catalog of a server's declared tables (built once, on first use)."""
    with _SHARED_LOCK:
        found = _SHARED.get(id(declared))
        if found is None or found[0] is not declared:
            found = (declared, Scratch(declared))
            _SHARED[id(declared)] = found
        return found[1]


__all__ = ["TIMEOUT", "Scratch", "build", "catalog_rows", "scratch_for"]
