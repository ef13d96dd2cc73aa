"""A client's catalog query, rewritten to run on the scratch catalog (:mod:`.scratch`).

The query is parsed as PostgreSQL (sqlglot, ``read="postgres"``). It is a catalog query when it
reads ``pg_catalog`` or ``information_schema`` relations (``pg_catalog.pg_class``, a bare
``pg_class``, ``information_schema.tables``), or reads no table and calls a catalog or session
function (``version()``, ``pg_catalog.current_schemas(true)``, ``to_regtype('hstore')``, ...).
Such a query may read nothing else: one that also names a table of the database is refused.

The rewrite keeps the query and changes how it is spelled for DuckDB: relations become the
scratch catalog's tables (or table macros of the connection's user and database); session
functions become the connection's values; catalog functions PostgreSQL answers from data the
emulation does not model (definitions, comments, sizes) become NULL, 0 or true, and the others
(``format_type``, ``to_regclass``, ``quote_ident``, ...) macros of the scratch catalog;
``x::regclass`` and friends become lookups of names and OIDs; ``OPERATOR(pg_catalog.~)``,
``COLLATE pg_catalog.default`` and ``LIKE`` without ``ESCAPE`` (a backslash escapes in
PostgreSQL) are spelled as DuckDB reads them; unquoted names fold to lower case, and the
output columns get the names PostgreSQL would give them.
"""

from __future__ import annotations

import typing as t

import sqlglot
from sqlglot import exp

from .pgfunctions import (
    FUNCTIONS,
    MACROS,
    REG_TYPES,
    SESSION_CLASSES,
    Context,
    Unanswerable,
    call,
    function_name,
    is_macro,
    is_user,
    macro,
    session_value,
)
from .pgtables import SCHEMAS, per_connection, relations

_RELATIONS = relations()


class NotCatalog(Exception):
    """A catalog query that also reads a table of the database (the message names it)."""


def parse(sql: str) -> exp.Expr | None:
    try:
        return sqlglot.parse_one(sql, read="postgres")
    except Exception:  # not PostgreSQL sqlglot reads: not a catalog query (dpsql has its say)
        return None


# -- what makes a query a catalog query -----------------------------------------------------

def _type_name(cast: exp.Cast) -> str:
    to = cast.to
    if isinstance(to, exp.ObjectIdentifier):
        return str(to.this).lower()
    if isinstance(to, exp.DataType) and to.this == exp.DType.USERDEFINED:
        kind = to.args.get("kind")
        name = kind.name if isinstance(kind, exp.Identifier) else str(kind or "")
    else:
        name = to.sql(dialect="postgres") if to is not None else ""
    return name.lower().split(".")[-1].strip('"')


def _ctes(tree: exp.Expr) -> set[str]:
    return {cte.alias.lower() for cte in tree.find_all(exp.CTE)}


def _schema_of(table: exp.Table, ctes: set[str]) -> str | None:
    """``pg_catalog`` / ``information_schema`` for a catalog relation, ``""`` for a CTE, else None."""
    db = table.db.lower()
    if db in SCHEMAS and not table.catalog:
        return db
    if not db and table.name.lower() in ctes:
        return ""
    if not db and table.name.lower().startswith("pg_"):
        return "pg_catalog"
    return None


def _is_catalog_call(node: exp.Expr) -> bool:
    if isinstance(node, SESSION_CLASSES) or is_user(node):
        return True
    if isinstance(node, exp.Dot) and isinstance(node.this, exp.Identifier) and node.this.name.lower() in SCHEMAS:
        return isinstance(node.expression, exp.Func)
    if isinstance(node, exp.Cast):
        return _type_name(node) in REG_TYPES
    return function_name(node) in FUNCTIONS


#: words without which a statement is no catalog query (a cheap test before parsing it)
_MARKS = FUNCTIONS | REG_TYPES | {"information_schema", "user", "current_user", "session_user", "current_role",
                                   "current_schema", "current_schemas", "current_database", "current_catalog"}


def may_be_catalog_query(words: t.Iterable[str]) -> bool:
    """Whether a statement of these words (its tokens' texts) can be a catalog query: it names
    a ``pg_`` relation or function, ``information_schema``, or a session or catalog function."""
    return any(w.lower().startswith("pg_") or w.lower() in _MARKS for w in words)


def is_catalog_query(tree: exp.Expr | None) -> bool:
    """Whether ``tree`` reads catalog relations, or reads no table and calls a catalog function."""
    if not isinstance(tree, exp.Query):
        return False
    ctes = _ctes(tree)
    schemas = [_schema_of(tb, ctes) for tb in tree.find_all(exp.Table) if not isinstance(tb.this, exp.Func)]
    if any(s in SCHEMAS for s in schemas):
        return True
    if any(s is None for s in schemas):
        return False
    return any(_is_catalog_call(node) for node in tree.walk())


# -- the names PostgreSQL gives output columns --------------------------------------------------

def _pg_name(node: exp.Expr) -> str:
    return _named(node)[0]


def _named(node: exp.Expr) -> tuple[str, int]:
    """PostgreSQL's name for an output column and how strongly it holds (a cast's type name
    replaces a weaker one: ``$1::regtype::oid`` is ``oid``, ``x::text`` stays ``x``)."""
    if isinstance(node, exp.Alias):
        return node.alias, 3
    if isinstance(node, exp.Column):
        return node.name, 2
    if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Identifier):
        return node.expression.name, 2
    if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Func):
        return _named(node.expression)
    if isinstance(node, exp.Cast):
        inner = _named(node.this)
        return inner if inner[1] > 1 else (_type_name(node).split("(")[0], 1)
    if isinstance(node, (exp.Paren, exp.Bracket)):
        return _named(node.this)
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower(), 2
    if isinstance(node, (exp.Case, exp.Array)):
        return ("case" if isinstance(node, exp.Case) else "array"), 1
    if isinstance(node, exp.Func):
        names = {exp.CurrentVersion: "version", exp.GroupConcat: "string_agg"}
        return names.get(type(node)) or type(node).sql_names()[0].lower(), 2
    if isinstance(node, exp.Subquery) and isinstance(node.this, exp.Select) and len(node.this.expressions) == 1:
        return _named(node.this.expressions[0])
    return "?column?", 0


def _first_select(tree: exp.Expr) -> exp.Select | None:
    while isinstance(tree, (exp.SetOperation, exp.Subquery)):
        tree = tree.this
    return tree if isinstance(tree, exp.Select) else None


def _name_outputs(tree: exp.Expr) -> None:
    select = _first_select(tree)
    if select is None:
        return
    for node in list(select.expressions):
        if isinstance(node, exp.Alias) or isinstance(node, exp.Star) or \
                (isinstance(node, exp.Column) and isinstance(node.this, exp.Star)):
            continue
        node.replace(exp.alias_(node.copy(), exp.to_identifier(_pg_name(node), quoted=True)))


# -- the rewrite -------------------------------------------------------------------------------

def rewrite(tree: exp.Expr, ctx: Context) -> exp.Expr:
    """``tree`` (a catalog query) spelled for the scratch catalog; raises :class:`NotCatalog`
    when it also reads a table of the database, :class:`Unanswerable` when it reads a relation
    or calls a table function the scratch catalog does not have."""
    tree = _normalized(tree)
    _name_outputs(tree)
    _relations(tree, ctx)
    _reg_names(tree)
    for node in reversed(list(tree.walk(bfs=False))):
        if node is not tree and node.parent is None:
            continue  # replaced with an ancestor
        replacement = _replacement(node, ctx)
        if replacement is not None and replacement is not node:
            node.replace(replacement)
    return tree


def _normalized(tree: exp.Expr) -> exp.Expr:
    """A copy of ``tree`` with unqualified catalog functions and unquoted names in lower case."""
    tree = tree.copy()
    _unqualify_functions(tree)
    for ident in tree.find_all(exp.Identifier):
        if not ident.quoted:
            ident.set("this", ident.name.lower())
    return tree


def output_names(tree: exp.Expr) -> list[str]:
    """The names PostgreSQL gives the columns ``tree`` returns (``?column?`` where it has none)."""
    select = _first_select(_normalized(tree))
    return [_pg_name(node) for node in select.expressions] if select is not None else []


def _unqualify_functions(tree: exp.Expr) -> None:
    """``pg_catalog.f(...)`` → ``f(...)`` (as the unqualified call would parse), innermost first."""
    for node in reversed(list(tree.find_all(exp.Dot))):
        if isinstance(node.this, exp.Identifier) and node.this.name.lower() in SCHEMAS \
                and isinstance(node.expression, exp.Func):
            func = node.expression
            if isinstance(func, exp.Anonymous):
                try:
                    func = exp.func(str(func.this), *func.expressions, dialect="postgres")
                except Exception:
                    pass
            node.replace(func)


def _relations(tree: exp.Expr, ctx: Context) -> None:
    ctes = _ctes(tree)
    user, database = exp.Literal.string(ctx.user), exp.Literal.string(ctx.database)
    for table in list(tree.find_all(exp.Table)):
        if isinstance(table.this, exp.Func):
            _table_function(table)
            continue
        schema = _schema_of(table, ctes)
        if schema == "":
            continue
        if schema is None:
            raise NotCatalog(table.sql(dialect="postgres"))
        name = table.name.lower()
        if name not in _RELATIONS[schema]:
            raise Unanswerable(f"{schema}.{name}")
        this: exp.Expr = exp.to_identifier(name)
        if per_connection(schema, name):
            this = exp.Anonymous(this=name, expressions=[user.copy(), database.copy()])
        alias = table.args.get("alias") or exp.TableAlias(this=exp.to_identifier(name))
        table.replace(exp.Table(this=this, db=exp.to_identifier(SCHEMAS[schema]), alias=alias.copy()))
    for column in tree.find_all(exp.Column):
        column.set("db", None)
        column.set("catalog", None)


_SET_RETURNING = {"generate_series", "exploding_generate_series", "generate_subscripts", "unnest", "explode", "range"}


def _table_function(table: exp.Table) -> None:
    """A function in FROM: a macro of the scratch catalog, a set-returning function DuckDB
    has, or a function of one value (``FROM string_to_array(...) AS s``: one row, its column s)."""
    func = table.this
    name = function_name(func) or type(func).sql_names()[0].lower()
    table.set("db", None)
    table.set("catalog", None)
    alias = table.args.get("alias")
    if name in MACROS:
        table.set("db", exp.to_identifier(SCHEMAS["pg_catalog"]))
    elif name not in _SET_RETURNING:
        column = exp.to_identifier(alias.name if alias is not None and alias.name else name)
        select = exp.select(exp.alias_(func.copy(), column))
        table.replace(exp.Subquery(this=select, alias=alias.copy() if alias is not None
                                   else exp.TableAlias(this=column.copy())))
        return
    if alias is not None and alias.name and not alias.columns:  # FROM f(...) AS s: its column is s too
        alias.set("columns", [exp.to_identifier(alias.name)])


def _reg_names(tree: exp.Expr) -> None:
    """``oid::regclass::text`` and friends: the name an OID stands for."""
    for cast in list(tree.find_all(exp.Cast)):
        inner = cast.this
        if not isinstance(inner, exp.Cast) or _type_name(cast) not in ("text", "varchar", "name"):
            continue
        kind = _type_name(inner)
        if kind in ("regclass", "regtype", "regnamespace"):
            oid = inner.this.copy()
            cast.replace(macro(f"{kind}_name", macro(f"to_{kind}", oid) if _is_name_value(oid) else oid))
        elif kind in ("regproc", "regprocedure", "regrole") and not _is_name_value(inner.this):
            cast.replace(exp.Cast(this=inner.this.copy(), to=exp.DataType.build("VARCHAR")))


def _is_name_value(node: exp.Expr) -> bool:
    """A literal or a bound parameter: a name to look up (anything else is an OID)."""
    while isinstance(node, exp.Cast) and _type_name(node) in ("text", "varchar", "name", "cstring"):
        node = node.this
    if isinstance(node, exp.Literal):
        return node.is_string and not str(node.this).isdigit()  # '16384'::regclass is an OID
    return isinstance(node, (exp.Parameter, exp.Placeholder))


def _replacement(node: exp.Expr, ctx: Context) -> exp.Expr | None:
    found = session_value(node, ctx)
    if found is not None:
        return found
    if isinstance(node, exp.Anonymous) and not isinstance(node.parent, exp.Table) and not is_macro(node):
        return call(node, str(node.this).lower(), ctx)
    if isinstance(node, exp.Cast):
        return _cast(node)
    if isinstance(node, exp.Operator):
        return _operator(node)
    if isinstance(node, exp.Collate):
        return node.this.copy()
    if isinstance(node, exp.Div):  # PostgreSQL divides integers into an integer (DuckDB's //)
        return exp.IntDiv(this=node.this.copy(), expression=node.expression.copy())
    if isinstance(node, (exp.EQ, exp.NEQ)):
        return _any_all(node)
    if isinstance(node, (exp.Like, exp.ILike)) and not isinstance(node.parent, exp.Escape):
        return exp.Escape(this=node.copy(), expression=exp.Literal.string("\\"))
    return None


def _any_all(node: exp.EQ | exp.NEQ) -> exp.Expr | None:
    """``x = ANY(array)`` / ``x <> ALL(array)`` (not over a subquery): ``list_contains``, which
    DuckDB also takes in an outer join's condition."""
    wanted = (exp.Any, "any") if isinstance(node, exp.EQ) else (exp.All, "all")
    right = node.expression
    if isinstance(right, wanted[0]):
        array = right.this
    elif function_name(right) == wanted[1] and len(right.expressions) == 1:
        array = right.expressions[0]
    else:
        return None
    array = array.this if isinstance(array, exp.Paren) else array
    if isinstance(array, (exp.Query, exp.Subquery)):
        return None
    contains = exp.Anonymous(this="list_contains", expressions=[array.copy(), node.this.copy()])
    return contains if isinstance(node, exp.EQ) else exp.Not(this=contains)


_PLAIN_TYPES = {"oid": "BIGINT", "name": "VARCHAR", "char": "VARCHAR", "bpchar": "VARCHAR", "xid": "BIGINT",
                "cid": "BIGINT", "tid": "VARCHAR", "aclitem": "VARCHAR", "int2vector": "SMALLINT[]",
                "oidvector": "INTEGER[]", "pg_node_tree": "VARCHAR", "cstring": "VARCHAR", "anyarray": "VARCHAR[]",
                "regclass[]": "INTEGER[]", "regtype[]": "INTEGER[]", "oid[]": "INTEGER[]", "name[]": "VARCHAR[]"}


def _cast(node: exp.Cast) -> exp.Expr | None:
    kind = _type_name(node)
    inner = node.this
    if kind in REG_TYPES:
        if not _is_name_value(inner):
            return inner.copy()  # already an OID
        if kind in ("regclass", "regtype", "regnamespace"):
            return macro(f"to_{kind}", inner.copy())
        if kind in ("regproc", "regprocedure") and isinstance(inner, exp.Literal):
            return exp.Literal.string(str(inner.this).split(".")[-1].split("(")[0])
        return exp.null() if kind != "regrole" else exp.Literal.number(10)
    if kind in _PLAIN_TYPES:
        return exp.Cast(this=inner.copy(), to=exp.DataType.build(_PLAIN_TYPES[kind], dialect="duckdb"))
    if "." in node.to.sql(dialect="postgres"):  # pg_catalog.int2[], pg_catalog.text, ...
        try:
            to = exp.DataType.build(kind, dialect="postgres")
        except Exception:
            to = exp.DataType.build("VARCHAR")
        return exp.Cast(this=inner.copy(), to=to)
    if isinstance(inner, exp.Literal) and inner.is_string and node.to.is_type(exp.DType.ARRAY):
        element = node.to.expressions[0] if node.to.expressions else exp.DataType.build("TEXT")
        return exp.Array(expressions=[exp.null() if v is None else exp.Cast(this=exp.Literal.string(v), to=element.copy())
                                      for v in array_items(str(inner.this))])
    return None


def array_items(text: str) -> list[str | None]:
    """The items of a PostgreSQL array literal (``{a,"b c",NULL}``), one dimension."""
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise Unanswerable(f"array literal {text!r}")
    items: list[str | None] = []
    current, quoted, escaped, was_quoted = "", False, False, False
    for ch in body[1:-1]:
        if escaped:
            current, escaped = current + ch, False
        elif ch == "\\":
            escaped = True
        elif ch == '"':
            quoted, was_quoted = not quoted, True
        elif ch == "," and not quoted:
            items.append(None if current.strip().upper() == "NULL" and not was_quoted else current.strip())
            current, was_quoted = "", False
        else:
            current += ch
    if body[1:-1].strip():
        items.append(None if current.strip().upper() == "NULL" and not was_quoted else current.strip())
    return items


def _operator(node: exp.Operator) -> exp.Expr | None:
    op = str(node.args.get("operator") or "").split(".")[-1].strip()
    left, right = node.this.copy(), node.expression.copy()
    regex = {"~": exp.RegexpLike, "~*": exp.RegexpILike, "!~": exp.RegexpLike, "!~*": exp.RegexpILike}
    if op in regex:
        like = regex[op](this=left, expression=right)
        return exp.Not(this=like) if op.startswith("!") else like
    binary = {"=": exp.EQ, "<>": exp.NEQ, "!=": exp.NEQ, "<": exp.LT, "<=": exp.LTE, ">": exp.GT, ">=": exp.GTE,
              "~~": exp.Like, "~~*": exp.ILike}
    if op in binary:
        return binary[op](this=left, expression=right)
    return None


__all__ = ["Context", "FUNCTIONS", "MACROS", "NotCatalog", "Unanswerable", "array_items", "is_catalog_query",
           "may_be_catalog_query",
           "output_names", "parse", "rewrite"]
