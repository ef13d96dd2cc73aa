"""Name resolution with DuckDB's scoping rules, and the FROM chain of a DP query, inlined.

Two jobs, both on the query text, the policy and the catalog's column names alone:

* :func:`real_tables` finds every table a statement reads, resolving each name the way DuckDB
  does: a CTE is visible in the body of its WITH and in the CTEs *after* it in the same list
  (a forward reference, or a CTE's reference to its own name, is the real table); an inner
  WITH hides an outer one. A CTE may not take the name of a table of the database or the
  policy, and one WITH may not define a name twice, so no name has two readings.
* :func:`resolve_chain` turns the FROM chain of a DP query (a private table seen through
  row-wise CTEs and subqueries) into a :class:`Relation`: every output column as an expression
  over the base table's columns, qualified by the reserved alias ``__t``, and every WHERE of
  every level as a predicate over the same columns. The rewrite then reads the base table
  directly by its qualified name and never emits a user's CTE, alias or column name, so no
  user name can stand in for an internal one.
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass

from sqlglot import exp

from dpsql._policy.policy import Policy, TablePolicy
from dpsql._sql import links
from dpsql._sql.aliaslist import apply_alias_list, renamed
from dpsql._sql.build import BASE, RESERVED_PREFIX
from dpsql._sql.insubquery import public_in
from dpsql._sql.joins import JoinContext, flat_map, qualified, resolve_from
from dpsql._sql.links import link_unit, linked_source, reads_unit, selective
from dpsql._sql.relation import Relation, base_columns
from dpsql._sql.suggest import did_you_mean
from dpsql._sql.unitcount import clipped_counts, rows_bound
from dpsql.errors import BindError, PolicyError, PrivacyError

Catalog = t.Callable[[str], "dict[str, str] | None"]
"""``catalog(table) -> {column: DuckDB type}`` (names lower-case), or ``None`` if no such table."""

#: Levels of CTEs and subqueries a FROM chain may have.
MAX_DEPTH = 16


def _refuse(msg: str) -> t.NoReturn:
    raise PrivacyError(msg)


@dataclass(frozen=True)
class _Cte:
    name: str
    body: exp.Expression
    env: "Env"


Env = tuple[_Cte, ...]
"""The CTEs visible at a point of the query, innermost last."""


def _lookup(env: Env, name: str) -> _Cte | None:
    for cte in reversed(env):
        if cte.name == name:
            return cte
    return None


def check_reserved(query: exp.Expression) -> None:
    """Refuse identifiers in the reserved form (``__...``): the rewrite's names are those."""
    for ident in query.find_all(exp.Identifier):
        if str(ident.this).startswith(RESERVED_PREFIX):
            _refuse(f"names starting with {RESERVED_PREFIX} are reserved for dpsql: rename {ident.this}")


def with_env(query: exp.Expression, env: Env, catalog: Catalog, policy: Policy) -> tuple[Env, list[tuple[_Cte, Env]]]:
    """The environment inside ``query`` after its WITH, and each CTE with the env of its body."""
    with_ = query.args.get("with_")
    if not with_:
        return env, []
    if with_.args.get("recursive"):
        names = ", ".join(cte.alias_or_name for cte in with_.expressions)
        _refuse(f"recursive CTEs are not allowed in dpsql queries (WITH RECURSIVE {names})")
    seen: set[str] = set()
    out = []
    for cte in with_.expressions:
        name = cte.alias_or_name.lower()
        if name in seen:
            raise BindError(f"CTE {name} is defined twice in one WITH")
        if policy.table(name) is not None or catalog(name) is not None:
            _refuse(f"CTE {name} has the name of a table; give the CTE another name")
        seen.add(name)
        item = _Cte(name, renamed(cte.this, cte.args.get("alias")), env)  # name (a, b) AS ...
        out.append((item, env))
        env = env + (item,)
    return env, out


def real_tables(query: exp.Expression, policy: Policy, catalog: Catalog) -> list[tuple[exp.Table, TablePolicy]]:
    """Every reference to a real table in ``query``, resolved with DuckDB's scoping rules.

    A table the policy does not declare is refused; one the database lacks is a BindError.
    """
    found: list[tuple[exp.Table, TablePolicy]] = []

    def visit(node: exp.Expression, env: Env) -> None:
        if isinstance(node, exp.Query) and node.args.get("with_"):
            inner, ctes = with_env(node, env, catalog, policy)
            for cte, cte_env in ctes:
                visit(cte.body, cte_env)
            for key, value in node.args.items():
                if key != "with_":
                    for child in _children(value):
                        visit(child, inner)
            return
        if isinstance(node, exp.Table):
            _check_table(node)
            if node.args.get("db") or _lookup(env, node.name.lower()) is None:
                found.append((node, _declared(node, policy, catalog)))
        for value in node.args.values():
            for child in _children(value):
                visit(child, env)

    visit(query, ())
    return found


def _children(value: t.Any) -> list[exp.Expression]:
    if isinstance(value, exp.Expression):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, exp.Expression)]
    return []


def _check_table(table: exp.Table) -> None:
    if not isinstance(table.this, exp.Identifier):
        _refuse(f"table function {table.this.sql(dialect='duckdb')[:60]} is not allowed in dpsql queries")


def _declared(table: exp.Table, policy: Policy, catalog: Catalog) -> TablePolicy:
    """The policy's table for a reference ``[[catalog.]schema.]name``, resolved as DuckDB would
    (:meth:`Policy.resolve`); the catalog lookup uses the policy's key."""
    name, schema, cat = table.name.lower(), table.text("db").lower() or None, table.text("catalog").lower() or None
    shown = ".".join(p for p in (cat, schema, name) if p)
    found = policy.resolve(name, schema, cat, exists=catalog)
    if len(found) > 1:
        raise BindError(f"table {shown} is ambiguous: it can mean {' or '.join(found)}; name it in full")
    if not found:
        raise BindError(f"table {shown} does not exist" + did_you_mean(name, [t.table_name for t in policy.tables.values()]))
    tp = policy.table(found[0])
    if tp is None:
        _refuse(f"table {shown} is not declared in the policy, so it cannot be read")
    name = tp.name
    columns = catalog(name)
    if columns is None:
        raise BindError(f"table {name} is in the policy but does not exist in the database")
    if tp.link is None and tp.privacy_unit != "row" and tp.privacy_unit not in columns:
        raise PolicyError(f"tables.{name}.privacy_unit: table {name} has no column {tp.privacy_unit}"
                          f"{did_you_mean(tp.privacy_unit, columns, exact=True)}")
    return tp


# ---------------------------------------------------------------------------------------------
# The FROM chain of a DP query


#: SELECT clauses a row-wise level of the FROM chain may use.
_ROWWISE_ARGS = {"expressions", "from_", "where", "with_", "joins"}
_CLAUSE = {"group": "GROUP BY", "order": "ORDER BY", "joins": "JOIN", "laterals": "LATERAL",
           "distinct": "DISTINCT", "sample": "TABLESAMPLE", "pivots": "PIVOT", "windows": "WINDOW"}


def resolve_chain(
    item: exp.Expression, env: Env, policy: Policy, catalog: Catalog, depth: int = 0,
    database: str | None = None, jc: JoinContext | None = None,
) -> Relation:
    """Resolve a FROM item of a DP query (a table, CTE or subquery) into a :class:`Relation`."""
    if depth > MAX_DEPTH:
        _refuse("the FROM chain is nested too deeply")
    if isinstance(item, exp.Table):
        _check_table(item)
        _no_operators(item)
        name = item.name.lower()
        alias = _alias(item) or name
        cte = None if item.args.get("db") else _lookup(env, name)
        if cte is not None:
            inner = _rowwise(cte.body, cte.env, policy, catalog, depth + 1, database, jc)
            return inner.carried(inner.columns, alias, inner.where)
        tp = _declared(item, policy, catalog)
        cols = catalog(tp.name) or {}
        unit = None if tp.privacy_unit == "row" else exp.column(tp.privacy_unit, table=BASE, quoted=True)
        # A row unit: one protected change is max_rows_per_unit rows (AddMaxRows(m)).
        rows = tp.max_rows_per_unit if tp.privacy_unit == "row" else 1
        rel = Relation(tp, base_columns(cols), alias, unit=unit, rows=rows,
                       public_in=public_in(lambda t: _declared(t, policy, catalog), catalog, database, policy))
        return _linked(rel, policy, catalog, database, jc) if tp.link is not None else rel
    if isinstance(item, exp.Subquery):
        _no_operators(item)
        item = apply_alias_list(item)  # AS name (a, b): the names go onto its select list
        inner = _rowwise(item.this, env, policy, catalog, depth + 1, database, jc)
        return inner.carried(inner.columns, _alias(item), inner.where)
    if isinstance(item, exp.Lateral):
        _refuse("LATERAL is not supported in a DP query")
    _refuse(f"unsupported FROM item in a DP query: {item.sql(dialect='duckdb')[:60]}")


def _linked(rel: Relation, policy: Policy, catalog: Catalog, database: str | None,
            jc: JoinContext | None) -> Relation:
    """A linked table's rows with their unit (:mod:`dpsql._sql.links`): the link column, or the
    target's unit, per row under a selective WHERE, else by a join to the grouped target."""
    counter = jc if jc is not None else JoinContext(None)  # type: ignore[arg-type]
    form = links.LINK_FORM if links.LINK_FORM != "auto" else "correlated" if counter.selective else "grouped"
    if reads_unit(rel.table, policy) or form == "grouped":
        found = link_unit(rel.table, BASE, policy, catalog, database, lambda: counter.alias("l"))
        rel.joined = bool(found.joins)  # a link to the unit column itself joins nothing
    else:
        rel.source, found = linked_source(rel.table, qualified(rel.table, database), policy, catalog, database,
                                          lambda: counter.alias("l"), BASE)
        rel.joined = True  # the unit is another table's: like the join it stands for, it drops orphans
    # The row hash stays HASH(__t): a link adds only a key and the unit the truncation partitions by.
    rel.unit = found.unit
    rel.joins = list(found.joins)
    rel.where = list(found.where)
    rel.steps = list(found.steps)
    return rel


def resolve_select_from(query: exp.Select, env: Env, policy: Policy, catalog: Catalog, depth: int = 0,
                        database: str | None = None, jc: JoinContext | None = None) -> Relation:
    """The FROM clause of ``query`` (its FROM item and JOINs) as one :class:`Relation`."""
    outer = jc.selective if jc is not None else False
    if jc is not None:  # the linked tables of this FROM read their unit by the form its WHERE suits
        jc.selective = outer or selective(query.args.get("where"))
    try:
        return resolve_from(
            query, lambda item: resolve_chain(item, env, policy, catalog, depth, database, jc),
            lambda table: _declared(table, policy, catalog), catalog, jc)
    finally:
        if jc is not None:
            jc.selective = outer


def _alias(item: exp.Expression) -> str | None:
    alias = item.args.get("alias")
    if alias is None:
        return None
    if alias.args.get("columns"):
        _refuse(f"column aliases in {item.sql(dialect='duckdb')[:60]} are not supported in a DP query; "
                "rename columns in a SELECT instead")
    return alias.name.lower() or None


def _no_operators(item: exp.Expression) -> None:
    """Table-level operators (PIVOT, UNPIVOT, TABLESAMPLE, ...) change which rows exist."""
    for key, value in item.args.items():
        if key in ("this", "alias", "db", "catalog") or not value:
            continue
        what = {"pivots": "PIVOT/UNPIVOT", "sample": "TABLESAMPLE", "joins": "JOIN",
                "laterals": "LATERAL"}.get(key, key.upper())
        names = ", ".join(sorted({tb.name for tb in item.find_all(exp.Table)}))
        _refuse(f"{what} is not allowed in a DP query (it changes which rows of {names} exist)")


def _rowwise(query: exp.Expression, env: Env, policy: Policy, catalog: Catalog, depth: int,
             database: str | None, jc: JoinContext | None = None) -> Relation:
    """A row-wise SELECT between the private table and its DP aggregates."""
    if not isinstance(query, exp.Select):
        names = ", ".join(sorted({tb.name for tb in query.find_all(exp.Table)})) or "a private table"
        if isinstance(query, exp.Pivot):
            _refuse(f"PIVOT/UNPIVOT is not allowed over {names}: its rows and columns would come from the data")
        _refuse(f"only row-wise SELECTs may sit between {names} and its DP aggregates "
                "(no set operations)")
    env, _ = with_env(query, env, catalog, policy)
    from_ = query.args.get("from_")
    if from_ is None:
        _refuse("a subquery in the FROM chain needs a FROM clause")
    inner = resolve_select_from(query, env, policy, catalog, depth, database, jc)
    if query.args.get("group"):
        return _per_unit(query, inner, database)
    for key, value in query.args.items():
        if value and key not in _ROWWISE_ARGS:
            what = _CLAUSE.get(key, key.upper())
            _refuse(f"a subquery over private table {inner.table.name} may only transform rows "
                    f"(no {what}) before the DP aggregates")
    where = list(inner.where)
    if query.args.get("where") is not None:
        where.append(inner.substitute(query.args["where"].this, "WHERE"))
    inner, flat = _flat_map(query, inner, jc)
    columns: dict[str, exp.Expression | None] = {}
    for name, expr in projections(query, inner, flat):
        columns[name] = None if name in columns else expr  # None: the name is ambiguous
    return inner.carried(columns, None, where)


Flat = tuple[exp.Expression, str, exp.Expression]
"""A level's ``unnest()``: its projection, its output name and the element over the flat map."""


def _flat_map(query: exp.Select, inner: Relation, jc: JoinContext | None) -> tuple[Relation, Flat | None]:
    """The level below with the flat map of the select list's ``unnest()`` applied, if any."""
    unnests = [p for p in query.expressions if isinstance(p.this if isinstance(p, exp.Alias) else p,
                                                          (exp.Unnest, exp.Explode))]
    if len(unnests) > 1:
        _refuse("one unnest() per SELECT is supported in a DP query")
    if not unnests:
        return inner, None
    proj = unnests[0]  # a flat map: the level's rows are (row, element) pairs
    call = proj.this if isinstance(proj, exp.Alias) else proj
    if isinstance(call, exp.Explode) and call.expressions:
        _refuse(f"unnest() with options (recursive := ..., ...) is not supported in a DP query: "
                f"{call.sql(dialect='duckdb')[:60]}")
    args = list(call.expressions) if isinstance(call, exp.Unnest) else [call.this]
    name = proj.alias_or_name.lower() if isinstance(proj, exp.Alias) else "unnest"
    inner = flat_map(inner, args, None, jc, "unnest()", column=f"__unnest_{id(proj)}")
    return inner, (proj, name, inner.columns.pop(f"__unnest_{id(proj)}"))


def projections(query: exp.Select, inner: Relation, flat: Flat | None = None, *, lower: bool = True
                ) -> t.Iterator[tuple[str, exp.Expression | None]]:
    """Each output column of ``query``'s select list (stars expanded) as (name, expression over
    the reserved aliases); ``lower``: names lower-cased, as the next level resolves them."""
    for proj in query.expressions:
        if flat is not None and proj is flat[0]:
            yield flat[1], flat[2]
            continue
        if isinstance(proj, exp.Star) or (isinstance(proj, exp.Column) and isinstance(proj.this, exp.Star)):
            yield from _star(proj, inner).items()
            continue
        value = proj.this if isinstance(proj, exp.Alias) else proj
        if isinstance(value, exp.Star):
            _refuse(f"{proj.sql(dialect='duckdb')[:40]} is not allowed in a DP query")
        name = proj.alias_or_name
        if not lower:
            name = name or proj.sql(dialect="duckdb")  # as a probe's answer names it
        yield name.lower() if lower else name, inner.substitute(value, "a subquery's select list")


#: clauses a zero-row probe of a private table may use besides a row-wise level's
_PROBE_ARGS = _ROWWISE_ARGS | {"order", "limit", "offset", "distinct"}


def resolve_rows(query: exp.Expression, policy: Policy, catalog: Catalog, database: str | None,
                 jc: JoinContext) -> tuple[Relation, list[tuple[str, exp.Expression | None]]]:
    """A SELECT of rows of a private table, resolved as one more row-wise level of its FROM chain:
    the relation it reads and its output columns over the reserved aliases.

    For the answer to a zero-row probe: every expression passes the allowlist, and the output's
    names and types follow from the policy and the catalog alone. A statement that is not one
    such SELECT is refused.
    """
    if not isinstance(query, exp.Select) or query.args.get("from_") is None:
        _refuse("only a SELECT ... FROM of a private table, with row-wise expressions, can be "
                "described without its rows")
    env, _ = with_env(query, (), catalog, policy)
    inner = resolve_select_from(query, env, policy, catalog, 0, database, jc)
    for key, value in query.args.items():
        if value and key not in _PROBE_ARGS:
            what = _CLAUSE.get(key, key.upper())
            _refuse(f"{what} over private table {inner.table.name} cannot be described without reading its rows")
    if query.args.get("where") is not None:
        inner.substitute(query.args["where"].this, "WHERE")
    for key in ("limit", "offset"):
        clause = query.args.get(key)
        if clause is not None and clause.find(exp.Column) is not None:
            _refuse(f"{key.upper()} may not read columns of private table {inner.table.name}")
    inner, flat = _flat_map(query, inner, jc)
    outputs = list(projections(query, inner, flat, lower=False))
    order = query.args.get("order")
    if order is not None:
        names = {name.lower() for name, _ in outputs}
        for ordered in order.expressions:
            key = ordered.this
            if not (isinstance(key, exp.Column) and not key.table and key.name.lower() in names):
                inner.substitute(key, "ORDER BY")
    return inner, outputs


def _per_unit(query: exp.Select, inner: Relation, database: str | None) -> Relation:
    """A level that GROUPs BY the privacy unit: one row per unit (visits per patient, ...).

    Its select list holds the unit and aggregates that cannot raise (arguments cast to DOUBLE
    where they add up), over row-wise expressions of the level below. The level becomes a
    subquery that the rewrite reads as ``__t``, with its columns ``__p0, __p1, ...``; since it
    holds one row per unit, a unit contributes one row to everything above it. Any other
    GROUP BY below the DP aggregates stays refused: it would mix units in one row.
    """
    table = inner.table.name
    where_ = f"a subquery over private table {table}"
    if inner.unit is None:
        _refuse(f"{where_} may only transform rows (no GROUP BY) before the DP aggregates: "
                "its privacy unit is a row")
    if inner.table.link is not None and (inner.unit is None or
                                         inner.unit.sql(dialect="duckdb") != f'"{BASE}"."{inner.table.link.column}"'):
        _refuse(f"{where_} may not GROUP BY: its unit {inner.table.privacy_unit} is reached through the link "
                f"{inner.table.link}, not a column of {table}; aggregate {table}'s rows directly")
    if inner.per_unit:
        _refuse(f"{where_} groups by {inner.table.privacy_unit} twice")
    for key, value in query.args.items():
        if value and key not in _ROWWISE_ARGS | {"group"}:
            _refuse(f"{where_} that groups by {inner.table.privacy_unit} may not use "
                    f"{_CLAUSE.get(key, key.upper())}")
    group = query.args["group"]
    unit_sql = inner.unit.sql(dialect="duckdb")
    keys = [inner.substitute(g, "GROUP BY") for g in group.expressions]
    if any(v for k, v in group.args.items() if k != "expressions") or len(keys) != 1 or \
            keys[0].sql(dialect="duckdb") != unit_sql:
        _refuse(f"{where_} may GROUP BY its privacy unit {inner.table.privacy_unit} only, so that "
                "each row is one unit; any other GROUP BY mixes units in one row")
    from dpsql._sql.total import total

    where = list(inner.where)
    if query.args.get("where") is not None:
        where.append(inner.substitute(query.args["where"].this, "WHERE"))
    out_cols: dict[str, exp.Expression | None] = {}
    selects = [exp.alias_(total(inner.unit), "__p0")]
    for proj in query.expressions:
        value = proj.this if isinstance(proj, exp.Alias) else proj
        name = proj.alias_or_name.lower()
        if isinstance(value, exp.Column) and inner.substitute(value, "GROUP BY").sql(dialect="duckdb") == unit_sql:
            out_cols[name] = None if name in out_cols else exp.column("__p0", table=BASE)
            continue
        column = f"__p{len(selects)}"
        selects.append(exp.alias_(_unit_aggregate(value, inner), column))
        out_cols[name] = None if name in out_cols else exp.column(column, table=BASE)
    extra, counts = clipped_counts(selects[1:], rows_bound(inner))  # keys 0..k (dpsql._sql.unitcount)
    base = exp.table_(inner.table.table_name, db=inner.table.schema, catalog=database, quoted=True)
    source = inner.source.copy() if inner.source is not None else base
    sub = exp.select(*selects, *extra).from_(exp.alias_(source, BASE, table=True)).group_by(total(inner.unit))
    for join in inner.joins:  # one unit's rows: a join along the link carries the unit equality
        sub = sub.join(join.copy())
    for w in where:
        sub = sub.where(total(w))
    return Relation(inner.table, out_cols, None, [], exp.Subquery(this=sub), exp.column("__p0", table=BASE),
                    per_unit=True, count_keys=counts)


def _unit_aggregate(value: exp.Expression, inner: Relation) -> exp.Expression:
    """One aggregate of a per-unit level, checked and made total, over ``__t``."""
    from dpsql._sql.allow import SAFE_ANY_AGGREGATES, SAFE_NUMERIC_AGGREGATES, aggregate_name
    from dpsql._sql.total import total

    table = inner.table.name
    if not isinstance(value, (exp.AggFunc, exp.Anonymous)):
        _refuse(f"in a subquery that groups {table} by its privacy unit, each column must be the "
                f"unit or an aggregate, not {value.sql(dialect='duckdb')[:40]}")
    name = aggregate_name(value)
    if name not in SAFE_NUMERIC_AGGREGATES and name not in SAFE_ANY_AGGREGATES:
        _refuse(f"aggregate {name}() is not allowed in a subquery that groups {table} by its "
                "privacy unit (it can fail or is not supported)")
    out = value.copy()
    for key, arg in list(out.args.items()):
        if not isinstance(arg, exp.Expression) and not (isinstance(arg, list) and arg):
            continue
        if key not in ("this", "expression", "expressions"):
            _refuse(f"aggregate {name}() with {key.upper()} is not allowed in a per-unit subquery of {table}")
        items = arg if isinstance(arg, list) else [arg]
        new = []
        for item in items:
            if isinstance(item, exp.Star) and name == "count":
                new.append(item)
                continue
            distinct = isinstance(item, exp.Distinct)
            if distinct and name != "count":
                _refuse(f"DISTINCT is only allowed in count() in a per-unit subquery of {table}")
            parts = item.expressions if distinct else [item]
            done = []
            for part in parts:
                expr = total(inner.substitute(part, f"{name}()"))
                if name in SAFE_NUMERIC_AGGREGATES:
                    expr = exp.TryCast(this=expr, to=exp.DataType.build("DOUBLE"))
                done.append(expr)
            new.append(exp.Distinct(expressions=done) if distinct else done[0])
        out.set(key, new if isinstance(arg, list) else new[0])
    return out


def _star(proj: exp.Expression, inner: Relation) -> dict[str, exp.Expression | None]:
    """``*``, ``t.*``, ``* EXCLUDE (...)`` and ``* REPLACE (... AS c)`` over the level below."""
    star = proj if isinstance(proj, exp.Star) else proj.this
    columns = inner.columns
    if isinstance(proj, exp.Column) and inner.scopes is not None and proj.table.lower() in inner.scopes:
        columns = inner.scopes[proj.table.lower()]
    elif isinstance(proj, exp.Column) and proj.table.lower() != inner.alias:
        raise BindError(f"unknown table or alias {proj.table} in {proj.sql(dialect='duckdb')}")
    for key, value in star.args.items():
        if value and key not in ("except_", "replace"):
            _refuse(f"* {key.upper()} is not supported in a DP query over {inner.table.name}")
    out = dict(columns)
    for col in star.args.get("except_") or []:
        name = col.name.lower()
        if not isinstance(col, exp.Column) or name not in out:
            raise BindError(f"* EXCLUDE: column {col.sql(dialect='duckdb')} does not exist in {inner.table.name}")
        del out[name]
    for alias in star.args.get("replace") or []:
        if not isinstance(alias, exp.Alias):
            _refuse("* REPLACE needs expressions of the form expr AS column")
        name = alias.alias.lower()
        if name not in out:
            raise BindError(f"* REPLACE: column {alias.alias} does not exist in {inner.table.name}")
        out[name] = inner.substitute(alias.this, "* REPLACE")
    return out
