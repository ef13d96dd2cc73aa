"""Joins and flat maps in the FROM clause of a DP query, bound and bounded (seed 004, SPEC §6).

:func:`resolve_from` binds a SELECT's FROM item and its JOINs into one :class:`Relation`:
public joins (× M rows per key of the public table, kept to M in the SQL), semi and anti joins
with public tables (a filter), flat maps (``UNNEST``, × F elements per row, lists cut to F),
joins of two private row-unit tables (each side truncated on its key, ``T_l·S_r·R_r +
T_r·S_l·R_l``) and of two tables sharing an id unit on it (truncated per unit after the join).
The factors and their proofs are in :mod:`dpsql._privacy.joins`; the rules and what is refused,
with the fix, in docs/joins.md. ``IN (SELECT ... FROM public)`` is :mod:`dpsql._sql.insubquery`.
"""

from __future__ import annotations

__all__ = ["Catalog", "Declared", "JoinContext", "ReadPublic", "check_used", "qualified", "resolve_from"]

import functools
import typing as t
from dataclasses import replace

from sqlglot import exp
from sqlglot.errors import ParseError

from dpsql._policy.policy import TablePolicy
from dpsql._policy.units import unit_key_problem
from dpsql._privacy.joins import Truncation, private_join_rows, right_stability
from dpsql._sql.build import BASE
from dpsql._sql.casts import as_is
from dpsql._sql.commajoin import comma_joins
from dpsql._sql.flatmap import flat_map
from dpsql._sql.links import is_link_pair
from dpsql._sql.onfilter import right_filters
from dpsql._sql.relation import Columns, JoinContext, ReadPublic, Relation
from dpsql._sql.template import conjunction, fill, number
from dpsql._sql.total import total
from dpsql.errors import BindError, OptionError, PrivacyError

if t.TYPE_CHECKING:
    from dpsql._sql.options import Options


def _refuse(msg: str) -> t.NoReturn:
    raise PrivacyError(msg)


def _sql(node: exp.Expression) -> str:
    return node.sql(dialect="duckdb")


Resolve = t.Callable[[exp.Expression], Relation]
Declared = t.Callable[[exp.Table], TablePolicy]
Catalog = t.Callable[[str], "dict[str, str] | None"]


def qualified(table: TablePolicy, database: str | None) -> exp.Table:
    """The policy's table by its full name: database (when known), schema and name, quoted."""
    return exp.table_(table.table_name, db=table.schema, catalog=database, quoted=True)


def resolve_from(select: exp.Select, resolve: Resolve, declared: Declared, catalog: Catalog,
                 jc: JoinContext | None) -> Relation:
    """The FROM item of ``select`` and its JOINs as one relation (``resolve`` binds one item)."""
    comma_joins(select, declared, catalog)  # FROM a, b WHERE a.k = b.k: the INNER JOIN it is
    from_ = select.args["from_"]
    joins = select.args.get("joins") or []
    if select.args.get("laterals"):
        _refuse("LATERAL JOIN is not supported in a DP query: a subquery per private row could multiply it")
    first = from_.this
    if joins and isinstance(first, exp.Table) and _is_public(first, declared):
        # ``public JOIN private``: an inner join is symmetric; read it from the private side.
        join = joins[0]
        if join.side or join.kind or not isinstance(join.this, (exp.Table, exp.Subquery)):
            _refuse(f"put the private table first: {_sql(first)} is public, and only INNER JOIN may "
                    "start from it")
        swapped = exp.Join(this=first.copy(), on=join.args.get("on"), using=join.args.get("using"))
        first, joins = join.this, [swapped, *joins[1:]]
    rel = resolve(first)
    if not joins:
        return rel
    if jc is None:
        _refuse("JOIN is not supported here")
    if rel.per_unit:
        _refuse(f"a subquery that groups {rel.table.name} by its privacy unit cannot be joined; "
                "join first, then group by the unit")
    scopes: dict[str, Columns] = {rel.alias or rel.table.name: dict(rel.columns)}
    rel = replace(rel, scopes=scopes, columns=dict(rel.columns), joined=True)
    for join in joins:
        rel = _join(rel, join, resolve, declared, catalog, jc)
    return rel


def _is_public(table: exp.Table, declared: Declared) -> bool:
    try:
        return declared(table).public
    except (BindError, PrivacyError):
        return False


def _join(rel: Relation, join: exp.Join, resolve: Resolve, declared: Declared, catalog: Catalog,
          jc: JoinContext) -> Relation:
    item = join.this
    kind, side = (join.kind or "").upper(), (join.side or "").upper()
    if isinstance(item, exp.Unnest):
        if side or kind not in ("", "CROSS") or join.args.get("on") or join.args.get("using"):
            _refuse("a flat map is written CROSS JOIN UNNEST(list) AS name(column)")
        if any(v for k, v in item.args.items() if k not in ("expressions", "alias")):
            _refuse(f"unnest() with options (WITH ORDINALITY, ...) is not supported in a DP query: {_sql(item)[:60]}")
        return flat_map(rel, item.expressions, item.args.get("alias"), jc, "unnest()")
    if isinstance(item, exp.Lateral) or kind == "LATERAL":
        _refuse("LATERAL JOIN is not supported in a DP query: a subquery per private row could multiply it")
    if join.args.get("method"):
        method = str(join.args["method"]).upper()
        _refuse(f"{method} JOIN is not supported in a DP query; join on equal keys with JOIN ... ON a = b")
    if not isinstance(item, exp.Table):
        _refuse(f"join a table by its name, not {_sql(item)[:60]}: subqueries and table functions "
                "cannot be joined in a DP query")
    if not isinstance(item.this, exp.Identifier):
        _refuse(f"table function {_sql(item.this)[:60]} is not allowed in dpsql queries")
    if side in ("RIGHT", "FULL"):
        _refuse(f"{side} JOIN is not supported in a DP query: it keeps rows of {item.name} that match no "
                "private row; put the private table first and use JOIN or LEFT JOIN")
    if kind == "CROSS" or (not join.args.get("on") and not join.args.get("using")):
        _refuse(f"a CROSS JOIN (a JOIN without ON) with {item.name} is not allowed in a DP query: it "
                "multiplies every private row; join on keys with ON a = b")
    if kind not in ("", "INNER", "OUTER", "SEMI", "ANTI"):
        _refuse(f"{kind} JOIN is not supported in a DP query")
    extra = [k for k, v in item.args.items() if v and k not in ("this", "db", "catalog", "alias")]
    if extra:
        what = {"sample": "TABLESAMPLE", "pivots": "PIVOT/UNPIVOT"}.get(extra[0], extra[0].upper())
        _refuse(f"{what} on joined table {item.name} is not allowed in a DP query")
    try:
        tp = declared(item)
    except BindError as err:
        raise BindError(f"{err} (a DP query joins declared tables by name, not CTEs)") from None
    alias = (item.alias_or_name or item.name).lower()
    if item.args.get("alias") is not None and item.args["alias"].args.get("columns"):
        _refuse(f"column aliases on {item.name} are not supported in a DP query")
    if tp.public:
        return _public_join(rel, item, tp, alias, join, kind, side, catalog, jc)
    if kind in ("SEMI", "ANTI"):
        _refuse(f"{kind} JOIN with private table {tp.name} is not supported: its rows would decide "
                "which private rows are kept; only public tables may filter a DP query this way")
    return _private_join(rel, item, tp, alias, join, side, resolve, catalog, jc)


# ---------------------------------------------------------------------------------------------
# Join conditions


def _conditions(rel: Relation, join: exp.Join, alias: str, columns: Columns, what: str
                ) -> list[tuple[exp.Expression, str]]:
    """The ON (or USING) equalities as (expression over the relation so far, column of the
    joined table); anything else is refused."""
    using = join.args.get("using")
    if using:
        out = []
        for ident in using:
            name = ident.name.lower()
            if name not in columns:
                raise BindError(f"USING: column {ident.name} does not exist in {what}")
            out.append((rel.column(exp.column(name), "USING"), name))
        return out
    on = join.args["on"]
    parts = list(on.flatten()) if isinstance(on, exp.And) else [on]
    out = []
    for part in parts:
        while isinstance(part, exp.Paren):
            part = part.this
        if not isinstance(part, exp.EQ):
            _refuse(f"only equalities joined by AND are supported in ON of a join with {what}, not "
                    f"{_sql(part)[:60]}; move other conditions to WHERE")
        sides = [part.this, part.expression]
        own = [s for s in sides if _reads_only(s, alias, columns, rel)]
        if len(own) != 1 or not isinstance(own[0], exp.Column):
            _refuse(f"each condition of a join with {what} must equate a column of {what} with an "
                    f"expression of the other tables, not {_sql(part)[:60]}")
        other = sides[1] if own[0] is sides[0] else sides[0]
        name = own[0].name.lower()
        if name not in columns:
            raise BindError(f"column {own[0].name} does not exist in {what}")
        out.append((rel.substitute(other, f"ON of a join with {what}"), name))
    return out


def _reads_only(node: exp.Expression, alias: str, columns: Columns, rel: Relation) -> bool:
    """Whether every column of ``node`` belongs to the joined table (qualified by its alias, or
    unqualified and not a column of the relation so far)."""
    cols = list(node.find_all(exp.Column))
    if not cols:
        return False
    for col in cols:
        qual = col.table.lower() if col.table else None
        if qual is not None:
            if qual != alias:
                return False
        elif col.name.lower() not in columns or col.name.lower() in rel.columns:
            return False
    return True


def _on(pairs: list[tuple[exp.Expression, str]], alias: str, types: dict[str, str]) -> list[exp.Expression]:
    """``TRY_CAST(expr AS type) = alias."col"`` for each pair: the private side is cast to the
    joined column's type, so that no value can make the comparison fail."""
    return [exp.EQ(this=try_cast(total(expr), types.get(col, "VARCHAR")), expression=_quoted([col], alias)[0])
            for expr, col in pairs]


@functools.cache
def _type(name: str) -> exp.DataType:
    """A type the catalog names, as a tree (parsed once; the catalog's own text if sqlglot
    cannot read it: DuckDB then reads it as it always did)."""
    try:
        return exp.DataType.build(name, dialect="duckdb")
    except ParseError:
        return as_is(name)


def try_cast(expr: exp.Expression, name: str) -> exp.TryCast:
    """``TRY_CAST(expr AS name)``, ``name`` a type as the catalog writes it."""
    return exp.TryCast(this=expr, to=_type(name).copy(), safe=True)


def _joined(this: exp.Expression, alias: str, on: list[exp.Expression], side: str = "", kind: str = "") -> exp.Join:
    """``[LEFT|SEMI|ANTI] JOIN this AS alias ON on``."""
    this.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
    return exp.Join(this=this, on=conjunction(on), **({"side": "LEFT"} if side == "LEFT" else {}),
                    **({"kind": kind} if kind else {}))


def _quoted(names: t.Iterable[str], table: str | None = None) -> list[exp.Expression]:
    """Columns by their names, quoted (a name a user wrote is never read as SQL), of the
    reserved alias ``table``."""
    return [exp.Column(this=exp.to_identifier(c, quoted=True), table=exp.to_identifier(table)) for c in names]


# ---------------------------------------------------------------------------------------------
# Public joins


def _public_join(rel: Relation, item: exp.Table, tp: TablePolicy, alias: str, join: exp.Join, kind: str,
                 side: str, catalog: Catalog, jc: JoinContext) -> Relation:
    types = catalog(tp.name) or {}
    columns: Columns = {}
    name = jc.alias("j")
    for col in types:
        columns[col] = exp.column(col, table=name, quoted=True)
    pairs = _conditions(rel, join, alias, columns, f"public table {tp.name}")
    table = qualified(tp, jc.database)
    on = _on(pairs, name, types)
    keys = [c for _, c in pairs]
    key_text = ", ".join(keys)
    out = replace(rel, joins=list(rel.joins), steps=list(rel.steps), used=set(rel.used))
    if kind in ("SEMI", "ANTI"):
        out.joins.append(_joined(table, name, on, kind=kind))
        out.steps.append(f"{kind.lower()} join with public table {tp.name} on {key_text}: a filter, × 1")
        return out
    opts = jc.options
    if opts.max_join_rows is not None:
        m, source = opts.max_join_rows, "option max_join_rows"
        out.used.add("max_join_rows")
    else:
        m, source = _multiplicity(tp, keys, jc), f"the most rows of one key in {tp.name}, read at plan time"
    kept = exp.alias_(table, name, table=True)
    kept = exp.Select(expressions=[exp.Star()], from_=exp.From(this=kept),
                      qualify=exp.Qualify(this=first_rows(_quoted(keys), name, m)))
    out.joins.append(_joined(exp.Subquery(this=kept), name, on, side))
    out.hashed = (*rel.hashed, name)
    rows = max(m, 1)
    by_id = rel.table.privacy_unit != "row"
    effect = "truncation per unit after the join bounds it" if by_id else f"× {rows}"
    out.steps.append(f"{'left ' if side == 'LEFT' else ''}join with public table {tp.name} on {key_text}: at most "
                     f"{m} rows per key ({source}; the rewritten SQL keeps at most {m}): {effect}")
    if not by_id:
        out.rows = rel.rows * rows
    out.scopes = dict(rel.scopes or {})
    out.columns = dict(rel.columns)
    out.joined_tables = {**rel.joined_tables, name: tp}
    out.add_scope(alias, columns)
    return out


#: the most rows of one key of a public table (at least 1)
_MOST = "SELECT COALESCE(MAX(n), 1) FROM (SELECT COUNT(*) AS n FROM _Z_table GROUP BY _Z_keys)"


def _multiplicity(tp: TablePolicy, keys: list[str], jc: JoinContext) -> int:
    if jc.read_public is None:
        raise OptionError("the public table cannot be read to bound this join; give max_join_rows = n")
    rows = jc.read_public(_most_sql(tp.table_name, tp.schema, jc.database, tuple(keys)))
    return max(int(rows[0][0]), 1)


@functools.lru_cache(maxsize=256)
def _most_sql(name: str, schema: str | None, database: str | None, keys: tuple[str, ...]) -> str:
    """The text of :data:`_MOST` for a public table and its join keys (a function of the names
    only: kept, so that planning the same join again prints nothing)."""
    table = exp.table_(name, db=schema, catalog=database, quoted=True)
    return fill(_MOST, table=table, keys=_quoted(keys)).sql(dialect="duckdb", copy=False)


# ---------------------------------------------------------------------------------------------
# Private joins


def _strategy(jc: JoinContext, side: str, tp: TablePolicy, rel: Relation) -> Truncation:
    opts = jc.options
    own = opts.left_truncation if side == "left" else opts.right_truncation
    if own is not None:
        rel.used.add(f"{side}_truncation")
        return own
    if opts.join_truncation is not None:
        rel.used.add("join_truncation")
        return opts.join_truncation
    if tp.join_truncation is not None:
        return tp.join_truncation
    raise PrivacyError(
        f"the join of private table {tp.name} needs a truncation strategy for each side: add "
        f"{side}_truncation = 'drop_excess(k)' or 'drop_non_unique' (or join_truncation for both) to "
        "WITH (...), or join_truncation to the table in the policy")


def _private_join(rel: Relation, item: exp.Table, tp: TablePolicy, alias: str, join: exp.Join, side: str,
                  resolve: Resolve, catalog: Catalog, jc: JoinContext) -> Relation:
    left = rel.table
    join, right = right_filters(join, alias, resolve(item), rel)  # ON conditions on tp alone: its WHERE
    if right.per_unit or (right.joins and tp.link is None):
        _refuse(f"private table {tp.name} can only be joined directly")
    name = jc.alias("j")
    right_columns: Columns = {c: _retarget(e, name) if e is not None else None for c, e in right.columns.items()}
    by_id = left.privacy_unit != "row" or tp.privacy_unit != "row"
    if by_id:  # before the conditions: no way of writing them can join units of two types
        _shared_unit(left, tp, catalog)
    pairs = _conditions(rel, join, alias, right_columns, f"private table {tp.name}")
    types = catalog(tp.name) or {}
    on = _on(pairs, name, types)
    key_text = ", ".join(c for _, c in pairs)
    out = replace(rel, joins=list(rel.joins), steps=list(rel.steps), used=set(rel.used))
    if by_id:
        linked = _follows_link(rel, tp, pairs) if left.link is not None or tp.link is not None else None
        if linked:
            assert rel.unit is not None
            on.append(exp.EQ(this=total(rel.unit), expression=exp.column(LINKED_UNIT, table=name)))
        else:
            _equates_units(rel, left, tp, pairs)
        out.joins.append(_joined(_private_side(right, qualified(tp, jc.database), bool(linked)), name, on, side))
        how = (f"along the link {linked}: the ON adds the equality of the units, so each joined row is one "
               "person's" if linked else f"on the privacy unit {left.unit_name or left.privacy_unit}")
        out.steps.append(f"{'left ' if side == 'LEFT' else ''}join with private table {tp.name} {how}: the joined rows "
                         "keep the unit; truncation per unit after the join bounds them")
    else:
        if rel.joins or rel.source is not None:
            _refuse(f"a join of two private tables must come first in the FROM clause ({left.name} and {tp.name})")
        lt, rt = _strategy(jc, "left", left, out), _strategy(jc, "right", tp, out)
        # Partition by the values the join compares: two values that cast to one key are one key.
        left_keys = [try_cast(total(e), types.get(c, "VARCHAR")) for e, c in pairs]
        out.source = exp.Subquery(this=_truncated(qualified(left, jc.database), rel.where, _keep(lt, left_keys)))
        out.where = []
        right_keys = _quoted((c for _, c in pairs), BASE)
        rsrc = _truncated(qualified(tp, jc.database), right.where, _keep(rt, right_keys))
        out.joins.append(_joined(exp.Subquery(this=rsrc), name, on, side))
        out.rows = private_join_rows(lt, rt, rel.rows, right.rows, left_join=side == "LEFT")
        rs = right_stability(rt, left_join=side == "LEFT")
        out.steps.append(
            f"{'left ' if side == 'LEFT' else ''}join of private tables {left.name} ({lt}: T={lt.threshold}, "
            f"S={lt.stability}) and {tp.name} ({rt}: T={rt.threshold}, S={rs}"
            f"{' in a LEFT join' if rs != rt.stability else ''}) on {key_text}, both "
            f"truncated in the rewritten SQL: rows per change T_l·S_r·R_r + T_r·S_l·R_l = {lt.threshold}·"
            f"{rs}·{right.rows} + {rt.threshold}·{lt.stability}·{rel.rows} = {out.rows}")
    out.hashed = (*rel.hashed, name)
    out.scopes = dict(rel.scopes or {})
    out.columns = dict(rel.columns)
    out.joined_tables = {**rel.joined_tables, name: tp}
    out.add_scope(alias, right_columns)
    return out


def _truncated(table: exp.Table, where: list[exp.Expression], keep: exp.Expression) -> exp.Select:
    """``SELECT * FROM table AS __t WHERE ... QUALIFY keep``: a private side of a join of row
    units, its rows cut by the truncation strategy."""
    out = exp.select(exp.Star()).from_(exp.alias_(table, BASE, table=True), copy=False)
    if where:
        out.set("where", exp.Where(this=conjunction([total(w) for w in where])))
    out.set("qualify", exp.Qualify(this=keep))
    return out


def _keep(strategy: Truncation, keys: list[exp.Expression]) -> exp.Expression:
    """Which rows a truncation strategy keeps (:mod:`dpsql._privacy.joins`), over the join keys.

    >>> _keep(Truncation("drop_non_unique", 1), _quoted(["k"], BASE)).sql("duckdb")
    'COUNT(*) OVER (PARTITION BY __t."k") = 1'
    """
    if strategy.name == "drop_excess":
        return first_rows(keys, BASE, strategy.threshold)
    count = exp.Window(this=exp.Count(this=exp.Star(), big_int=True), partition_by=keys, over="OVER")
    return exp.EQ(this=count, expression=number(1))


def first_rows(keys: list[exp.Expression], alias: str, m: int) -> exp.Between:
    """The first ``m`` rows of each key in the order of their hashes (a function of the rows
    alone), built as DuckDB's parser reads it (no text: planning builds it per join).

    >>> first_rows(_quoted(["k"]), "__j1", 2).sql("duckdb")
    'ROW_NUMBER() OVER (PARTITION BY "k" ORDER BY HASH(__j1)) BETWEEN 1 AND 2'
    """
    order = exp.Ordered(this=exp.Anonymous(this="HASH", expressions=[exp.column(alias)]), nulls_first=False)
    window = exp.Window(this=exp.RowNumber(), partition_by=keys, order=exp.Order(expressions=[order]), over="OVER")
    return exp.Between(this=window, low=number(1), high=number(m))


#: the unit of a linked table's rows, as a column of its side of a private join
LINKED_UNIT = "__lu"


def _private_side(right: Relation, table: exp.Table, linked: bool) -> exp.Subquery:
    """The joined private table's rows after its WHEREs; with links, with its unit ``__lu``."""
    rows = right.source.copy() if right.source is not None else table  # a linked table's derived rows
    side = exp.select(exp.Star()).from_(exp.alias_(rows, BASE, table=True))
    if linked:  # with its unit, the joins that reach it inside
        assert right.unit is not None
        side = exp.select(exp.Column(this=exp.Star(), table=exp.to_identifier(BASE)),
                          exp.alias_(total(right.unit), LINKED_UNIT)).from_(exp.alias_(rows, BASE, table=True))
        for join in right.joins:
            side = side.join(join)
    for w in right.where:
        side = side.where(total(w))
    return exp.Subquery(this=side)


def _root(tp: TablePolicy) -> str:
    return tp.unit_root or tp.name


def _shared_unit(left: TablePolicy, right: TablePolicy, catalog: Catalog) -> None:
    """Refuse a join by id unless both tables have one id unit, its columns of one type."""
    if left.privacy_unit == "row" or right.privacy_unit == "row":
        row = left if left.privacy_unit == "row" else right
        _refuse(f"cannot join {left.name} and {right.name}: {row.name}'s privacy unit is a row and the "
                "other's is an id; both must be rows (with truncation strategies) or share one id unit")
    if left.link is not None or right.link is not None:
        if _root(left) != _root(right):
            _refuse(f"cannot join private tables {left.name} and {right.name}: their links reach different "
                    f"privacy units ({_root(left)} and {_root(right)})")
        return  # the link joins compare every unit in the unit column's type (dpsql._sql.links)
    if left.name != right.name and (left.unit_name is None or left.unit_name != right.unit_name):
        _refuse(f"cannot join private tables {left.name} and {right.name}: they do not share a privacy unit; "
                f"if {left.privacy_unit} and {right.privacy_unit} identify the same individuals, give both "
                "tables the same unit_name in the policy")
    if problem := unit_key_problem([(f"{tp.name}.{tp.privacy_unit}", (catalog(tp.name) or {}).get(tp.privacy_unit))
                                    for tp in (left, right)]):
        _refuse(problem)


def _equates_units(rel: Relation, left: TablePolicy, right: TablePolicy, pairs: list[tuple[exp.Expression, str]]) -> None:
    """Refuse a join by id whose ON does not equate the unit columns themselves."""
    assert rel.unit is not None
    unit = _sql(rel.unit)
    if not any(_sql(e) == unit and c == right.privacy_unit for e, c in pairs):
        _refuse(f"a join of {left.name} and {right.name} must equate their privacy units: add "
                f"{left.privacy_unit} = {right.name}.{right.privacy_unit} to ON")


def _follows_link(rel: Relation, right: TablePolicy, pairs: list[tuple[exp.Expression, str]]) -> str:
    """The link a join with a linked table follows (``lineitem.l_orderkey = orders.o_orderkey``,
    as text), or the unit columns it equates; refused if neither: the join then adds the unit
    equality itself."""
    for expr, column in pairs:
        owner = rel.owner(expr)
        if owner is None:
            continue
        if is_link_pair(owner[0], owner[1], right, column):
            child = owner[0] if owner[0].link is not None and owner[0].link.column == owner[1] else right
            return str(child.link)
        if owner[0].link is None and owner[1] == owner[0].privacy_unit and right.link is None and \
                column == right.privacy_unit:
            return f"{owner[0].name}.{owner[1]} = {right.name}.{column}"
    links = [f"{tp.name}.{tp.link.column} = {tp.link.table}.{tp.link.target}"
             for tp in (*rel.joined_tables.values(), rel.table, right) if tp.link is not None]
    _refuse(f"a join of linked tables {rel.table.name} and {right.name} must follow a link in ON, e.g. "
            f"{links[0] if links else 'their unit columns'}; the join then keeps each person's rows together")


def _retarget(expr: exp.Expression, alias: str) -> exp.Expression:
    """``expr`` with its ``__t`` columns read from ``alias`` instead."""
    def swap(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Column) and n.table == BASE:
            return exp.column(n.name, table=alias, quoted=True)
        return n
    return expr.copy().transform(swap, copy=False)


def check_used(rel: Relation, options: "Options") -> None:
    """Refuse a join option the FROM clause did not use: it would bound nothing."""
    from dpsql._sql.keywords import JOIN_OPTIONS

    for key in JOIN_OPTIONS:
        if key in options.given and key not in rel.used:
            raise OptionError(f"option '{key}' has nothing to bound: the query has no "
                              + ("flat map (UNNEST)" if key == "max_rows" else
                                 "join with a public table" if key == "max_join_rows" else
                                 "join of two private tables whose privacy unit is a row"))
