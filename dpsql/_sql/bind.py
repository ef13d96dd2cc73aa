"""Bind a parsed query to the catalog and the policy: an allowlist, refusing everything else.

Binding decides from the query text, the policy and the catalog's names and types alone (never
from data) whether the query is

* a **public** query: every table it reads (resolved with DuckDB's scoping rules, see
  :mod:`dpsql._sql.scope`) is public in the policy; it runs as plain DuckDB with each table named by
  its qualified name; or
* a **DP** query: one SELECT whose DP aggregates read one private table through a chain of
  row-wise CTEs and subqueries (inlined over the base table's columns), with WHERE and GROUP BY
  on the rows and HAVING / ORDER BY / LIMIT / expressions on the noisy output.

Everything else that touches a private table is refused with a one-line
:class:`~dpsql.errors.PrivacyError`. Inside a DP query, each clause is checked against an
explicit list of what it may hold (:data:`_TOP_ARGS`; expressions: :mod:`dpsql._sql.allow`).
"""

from __future__ import annotations

import math
import typing as t
from dataclasses import dataclass, field

from sqlglot import exp

from dpsql._policy.policy import Policy, TablePolicy
from dpsql._privacy.approx_bounds import SHARE
from dpsql._sql import build
from dpsql._sql.allow import SAFE_ANY_AGGREGATES, SAFE_NUMERIC_AGGREGATES, aggregate_name
from dpsql._sql.argtypes import check_argument_type, check_argument_types
from dpsql._sql.build import BASE
from dpsql._sql.dialect import DPAgg, DPAggregate, DPQuantile, DPQuery
from dpsql._sql.guards import check_functions, check_statement
from dpsql._sql.intervals import derive_argument
from dpsql._sql.joins import JoinContext, ReadPublic, check_used, qualified
from dpsql._sql.keysource import KeySource, key_sources
from dpsql._sql.options import Options, parse_options
from dpsql._sql.postprocess import build_outer, renamed_columns
from dpsql._sql.relation import Relation
from dpsql._sql.scope import (
    Catalog,
    check_reserved,
    real_tables,
    resolve_select_from,
    with_env,
)
from dpsql._sql.shadow import TypesOf, describe_over, policy_types
from dpsql._sql.statistics import Statistic
from dpsql._sql.unitcount import clipped_key
from dpsql.errors import BindError, OptionError, PrivacyError

__all__ = ["Bound", "BoundAggregate", "Catalog", "bind"]

Describe = t.Callable[[str], "list[str]"]
"""``describe(select_sql) -> [DuckDB type of each column]``: binds a query without running it."""


@dataclass
class BoundAggregate:
    """One DP aggregate of the query, with its argument expressed over the base table (``__t``)."""

    index: int
    node: DPAggregate
    statistic: Statistic
    arg: exp.Expression | None  # None for DP_COUNT(*) and DP_AGG
    lower: float | None
    upper: float | None
    quantile: float | None = None
    #: the base table column the argument reads directly, if any (for policy bounds)
    column: str | None = None
    #: DuckDB type of that column (lets the rewrite clip without casting)
    column_type: str | None = None
    #: the policy table that column belongs to (the private table, or a joined one)
    column_table: str | None = None
    #: DP_AGG: the aggregate run per chunk, over the source columns ``inner_args`` name
    inner: exp.Expression | None = None
    #: DP_AGG: (source column name, expression over ``__t``) for each argument of ``inner``
    inner_args: list[tuple[str, exp.Expression]] = field(default_factory=list)
    #: DP_COUNT(DISTINCT x): count distinct values of the argument
    distinct: bool = False
    #: ... and the argument is the privacy unit itself (it counts units)
    distinct_unit: bool = False
    #: the bounds are found privately before the release (dpsql._privacy.approx_bounds): ``lower``
    #: and ``upper`` are None here, and the planner fills them in
    auto_bounds: bool = False
    #: how the bounds were derived from the columns' (dpsql._sql.intervals), for EXPLAIN; None otherwise
    bounds_note: str | None = None

    @property
    def label(self) -> str:
        if self._label is None:
            self._label = _label(self.node)
        return self._label

    _label: str | None = field(default=None, repr=False, compare=False)


@dataclass
class Bound:
    """The outcome of binding. ``public`` queries carry only ``query`` (with qualified tables)."""

    query: exp.Expression
    options: Options
    explain: bool
    public: bool = False
    table: TablePolicy | None = None
    #: the base table by its qualified name, read under the alias ``__t``
    relation: exp.Table | None = None
    #: every WHERE of the FROM chain and of the DP SELECT, over ``__t`` (their conjunction applies)
    where: list[exp.Expression] = field(default_factory=list)
    #: the GROUP BY expressions over ``__t``
    group_by: list[exp.Expression] = field(default_factory=list)
    #: each GROUP BY expression as the query wrote it (for messages)
    group_labels: list[str] = field(default_factory=list)
    #: for each group expression, the base column it reads directly (for public key domains)
    group_columns: list[str | None] = field(default_factory=list)
    #: for each group expression, its DuckDB type (public key domains are cast to it)
    group_types: list[str] = field(default_factory=list)
    #: for each group expression, a public domain besides the policy's keys (dpsql._sql.keysource)
    group_sources: list[KeySource | None] = field(default_factory=list)
    aggregates: list[BoundAggregate] = field(default_factory=list)
    #: post-processing SELECT over the noisy table ``__noisy(__k0.., __a0..)``
    outer: exp.Select | None = None
    output_names: list[str] = field(default_factory=list)
    #: when the post-processing only renames columns (and orders by the keys), the source
    #: column of each output name, so that it can be done without running ``outer``
    outer_columns: list[str] | None = None

    #: the privacy unit as an expression over ``__t`` (``None`` for row-level privacy)
    unit: exp.Expression | None = None
    #: whether ``relation`` is a per-unit subquery (one row per privacy unit)
    per_unit: bool = False
    #: the FROM clause after ``relation AS __t``: joins and flat maps (dpsql._sql.joins), trees never changed
    joins: list[exp.Join] = field(default_factory=list)
    #: the FROM clause of the statistics query, ``relation AS __t`` and the joins: DuckDB's text,
    #: printed once when bound
    from_sql: str = ""
    #: the reserved aliases whose rows together identify one row (the row hash)
    hashed: tuple[str, ...] = (BASE,)
    #: whether a join or flat map is in the FROM chain
    joined: bool = False
    #: row units: rows of the joined relation one protected change alters (None: no join)
    joined_rows: int | None = None
    #: EXPLAIN lines on the joins and flat maps
    join_steps: list[str] = field(default_factory=list)
    #: id units: the joined table of the unit whose bounds apply to the joined rows (None: ``table``'s)
    bounds_table: TablePolicy | None = None

    @property
    def filtered(self) -> bool:
        """Whether some WHERE, at any level of the FROM chain, can drop a row (a per-unit
        subquery counts as one: its rows are units, not the table's rows; so does a join,
        which can drop or multiply rows)."""
        return bool(self.where) or self.per_unit or self.joined


def _label(node: exp.Expression) -> str:
    from dpsql._sql.dialect import to_sql

    return to_sql(node)


def _refuse(msg: str) -> t.NoReturn:
    raise PrivacyError(msg)


def bind(
    parsed: DPQuery,
    policy: Policy,
    catalog: Catalog,
    *,
    database: str | None = None,
    describe: Describe | None = None,
    read_public: ReadPublic | None = None,
) -> Bound:
    """Bind ``parsed`` (from :func:`dpsql._sql.dialect.parse`) or raise a dpsql error.

    ``database`` is the DuckDB catalog the tables live in (their names are qualified with it);
    ``describe`` gives the types of GROUP BY expressions that are not plain columns;
    ``read_public`` runs a query on public tables (a public join's key multiplicity).
    """
    options = parse_options(parsed.option_items())
    query = parsed.this
    explain = bool(parsed.args.get("explain"))
    check_statement(query)
    check_functions(query)
    check_reserved(query)
    tables = real_tables(query, policy, catalog)
    has_dp = query.find(DPAggregate) is not None
    private = sorted({tp.name for _, tp in tables if not tp.public})
    if not private and not has_dp:
        if options.given:
            _refuse("a query on public tables takes no WITH (...) privacy options")
        for node, tp in tables:
            alias = node.args.get("alias")
            new = qualified(tp, database)
            new.set("alias", alias.copy() if alias is not None else exp.TableAlias(this=exp.to_identifier(node.name)))
            node.replace(new)
        return Bound(query=query, options=options, explain=explain, public=True)
    if not has_dp:
        agg = next((a for a in query.find_all(exp.AggFunc)), None)
        if agg is not None:
            _refuse(
                f"aggregate {agg.sql_name().lower()}() over private table {private[0]} is not "
                "differentially private; use a DP aggregate (DP_COUNT, DP_SUM, DP_MEAN, ...)"
            )
        _refuse(
            f"table {private[0]} is private: its rows cannot be selected; only DP aggregates "
            "(DP_COUNT, DP_SUM, DP_MEAN, ...) may read it"
        )
    if not isinstance(query, exp.Select):
        _refuse(
            f"set operations (UNION, INTERSECT, EXCEPT) over private table {private[0]} are not allowed"
            if private else "DP aggregates must be in a single SELECT"
        )
    return _bind_select(query, options, explain, policy, catalog, database, describe, read_public)


# ---------------------------------------------------------------------------------------------
# DP SELECT

#: Clauses the DP SELECT may use; any other clause is refused by name.
_TOP_ARGS = {"expressions", "from_", "where", "group", "having", "order", "limit", "offset", "with_", "joins"}
_CLAUSE = {"distinct": "SELECT DISTINCT", "joins": "JOIN", "laterals": "LATERAL",
           "qualify": "QUALIFY", "windows": "WINDOW", "sample": "USING SAMPLE", "pivots": "PIVOT"}


def _bind_select(
    select: exp.Select, options: Options, explain: bool, policy: Policy, catalog: Catalog,
    database: str | None, describe: Describe | None, read_public: ReadPublic | None = None,
) -> Bound:
    env, _ = with_env(select, (), catalog, policy)
    from_ = select.args.get("from_")
    if from_ is None:
        _refuse("a DP query needs a FROM clause")
    jc = JoinContext(options, read_public, database)
    rel = resolve_select_from(select, env, policy, catalog, database=database, jc=jc)
    check_used(rel, options)
    for key, value in select.args.items():
        if value and key not in _TOP_ARGS:
            what = _CLAUSE.get(key, key.upper())
            _refuse(f"{what} is not supported in a DP query over private table {rel.table.name}")

    where = list(rel.where)
    if select.args.get("where") is not None:
        where.append(rel.substitute(select.args["where"].this, "WHERE"))

    # bounds found privately for aggregates that have none: opted in by the query or the policy
    auto = options.bounds == "auto" or policy.defaults.bounds == "auto"
    aggregates: list[BoundAggregate] = []
    index_of: dict[int, int] = {}  # id(node) -> aggregate index; equal calls share one release
    by_label: dict[str, int] = {}
    for node in list(select.find_all(DPAggregate)):
        for inner in node.find_all(DPAggregate):
            if inner is not node:
                _refuse(f"DP aggregates cannot be nested: {_label(node)}")
        label = _label(node)
        if label not in by_label:
            by_label[label] = len(aggregates)
            aggregates.append(_bind_aggregate(len(aggregates), node, rel, catalog, auto, label))
        index_of[id(node)] = by_label[label]
    if "bounds" in options.given and not any(a.auto_bounds for a in aggregates):
        raise OptionError("option 'bounds' has nothing to find: every DP aggregate has bounds (in the call or "
                          "the policy) or takes none; leave the option out")

    types = catalog(rel.table.name) or {}
    for agg in aggregates:
        if agg.column is not None:
            agg.column_type = (catalog(agg.column_table or rel.table.name) or {}).get(agg.column)
    check_argument_types(aggregates)
    user_groups, group_by = _group_exprs(select, rel)
    group_by = [clipped_key(g, rel) for g in group_by]  # a per-unit count's key: clipped to 0..k
    group_columns = [rel.base_column(g) for g in group_by]
    relation = rel.source if rel.source is not None else qualified(rel.table, database)
    chain = rel.from_sql(relation)
    group_types = _group_types(group_by, group_columns, types, (relation, rel.joins), describe,
                               policy_types(policy, catalog))

    outer, names = build_outer(select, index_of, user_groups, rel, [a.label for a in aggregates])
    return Bound(
        query=select,
        options=options,
        explain=explain,
        table=rel.table,
        relation=relation,
        where=where,
        group_by=group_by,
        group_labels=[g.sql(dialect="duckdb") for g in user_groups],
        group_columns=group_columns,
        group_types=group_types,
        group_sources=key_sources(group_by, rel, database),
        aggregates=aggregates,
        outer=outer,
        output_names=names,
        outer_columns=renamed_columns(outer, group_types),
        unit=rel.unit,
        per_unit=rel.per_unit,
        joins=list(rel.joins),
        hashed=rel.hashed,
        joined=rel.joined,
        joined_rows=rel.rows if rel.joined and rel.table.privacy_unit == "row" else None,
        join_steps=list(rel.steps),
        bounds_table=rel.bounds_table(),
        from_sql=chain,
    )


def _group_types(
    group_by: list[exp.Expression], columns: list[str | None], types: dict[str, str],
    chain: tuple[exp.Expression, t.Sequence[exp.Join]], describe: Describe | None, types_of: TypesOf,
) -> list[str]:
    """The type of each GROUP BY key: its column's, else the engine's type of the expression
    over typed empty stand-ins of the tables (:mod:`dpsql._sql.shadow`): no private table is
    bound."""
    out = [types.get(c, "") if c else "" for c in columns]
    missing = [j for j, ty in enumerate(out) if not ty]
    if missing and describe is not None:
        found = describe_over([group_by[j] for j in missing], *chain, describe, types_of)
        for j, ty in zip(missing, found):
            out[j] = ty
    return [ty or "VARCHAR" for ty in out]


def _literal_number(node: exp.Expression | None, what: str) -> float | None:
    if node is None:
        return None
    sign = 1.0
    while isinstance(node, (exp.Neg, exp.Paren)):
        sign = -sign if isinstance(node, exp.Neg) else sign
        node = node.this
    if isinstance(node, exp.Literal) and not node.is_string:
        return sign * float(node.this)
    if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal):
        try:
            return sign * float(node.this.this)
        except ValueError:
            pass
    _refuse(f"{what} must be a number literal, got {node.sql(dialect='duckdb')}")


def _bind_aggregate(index: int, node: DPAggregate, rel: Relation, catalog: Catalog,
                    auto: bool = False, label: str | None = None) -> BoundAggregate:
    """One DP aggregate; ``auto``: an aggregate without bounds finds them privately; ``label``:
    ``node``'s text, when the caller has printed it already (printing copies the node)."""
    label = _label(node) if label is None else label
    found = node.args.get("bounds") is not None  # bounds => 'auto' in the call
    if found and isinstance(node, DPAgg):
        _refuse(f"{label}: DP_AGG's bounds are those of the aggregate's value; give them: DP_AGG(agg, lower, upper)")
    arg = node.this if not isinstance(node.this, exp.Star) else None
    lower = _literal_number(node.args.get("lower"), f"the lower bound of {label}")
    upper = _literal_number(node.args.get("upper"), f"the upper bound of {label}")
    inner, inner_args, column, column_table, note = None, [], None, None, None
    distinct = distinct_unit = False
    if isinstance(node, DPAgg):
        inner, inner_args = _bind_dp_agg(node, rel, index)
        arg = None
    elif arg is not None:
        if isinstance(arg, exp.Distinct):
            if node.statistic != "count" or len(arg.expressions) != 1:
                _refuse(f"{label}: DISTINCT is supported in DP_COUNT(DISTINCT x) only")
            distinct, arg = True, arg.expressions[0]
        arg = rel.substitute(arg, label)
        owner = rel.owner(arg)
        column, column_table = (owner[1], owner[0].name) if owner else (None, None)
        distinct_unit = distinct and rel.unit is not None and \
            arg.sql(dialect="duckdb") == rel.unit.sql(dialect="duckdb")
    if lower is not None and upper is not None and not lower < upper:
        _refuse(f"{label}: lower bound {lower:g} must be below upper bound {upper:g}")
    for what, bound in (("lower", lower), ("upper", upper)):  # 1e999 parses as inf
        if bound is not None and not math.isfinite(bound):
            _refuse(f"{label}: the {what} bound must be a finite number, got {bound:g}")
    if lower is None and arg is not None and node.statistic is not Statistic.COUNT and not found:
        owner_table = rel.owner(arg)
        bounds = owner_table[0].column(column).bounds if column and owner_table else None
        derived = derive_argument(arg, rel, catalog) if bounds is None and not column else None
        bounds, note = ((derived.lower, derived.upper), derived.note) if derived else (bounds, None)
        found = bounds is None and auto
        if bounds is None and column and owner_table:  # a text column needs converting first, not bounds
            check_argument_type(label, node, column, (catalog(owner_table[0].name) or {}).get(column))
        if bounds is None and not auto:
            what = f"column {node.this.name}" if isinstance(node.this, exp.Column) else "the expression"
            call = f"{node._sql_names[0]}({node.this.sql(dialect='duckdb')}"
            raise PrivacyError(
                f"{label}: no bounds for {what}; give them in the call, e.g. {call}, 0, 100), or in the policy, "
                f"or opt in to bounds found privately with {call}, bounds => 'auto') "
                f"(spends {SHARE:.0%} of its ε)"
            )
        if bounds is not None:
            lower, upper = bounds
    quantile = None
    if isinstance(node, DPQuantile):
        quantile = _literal_number(node.args.get("quantile"), f"the quantile of {label}")
        if quantile is None or not 0 <= quantile <= 1:
            _refuse(f"{label}: the quantile must be between 0 and 1")
    else:
        quantile = node.statistic.quantile
    return BoundAggregate(index, node, node.statistic, arg, lower, upper, quantile, column,
                          inner=inner, inner_args=inner_args, distinct=distinct, distinct_unit=distinct_unit,
                          column_table=column_table, auto_bounds=found, bounds_note=note, _label=label)


#: The literal (second) argument of these is a quantile, not a value.
_QUANTILE_ARG = {"quantile_cont": "expression", "quantile_disc": "expression", "approx_quantile": "quantile"}


def _bind_dp_agg(node: DPAgg, rel: Relation, index: int) -> tuple[exp.Expression, list[tuple[str, exp.Expression]]]:
    """Check DP_AGG's aggregate and move its arguments into source columns ``__i<index>_<j>``."""
    label = _label(node)
    inner = node.this
    if not isinstance(inner, (exp.AggFunc, exp.Anonymous)) or isinstance(inner, DPAggregate):
        _refuse(f"{label}: the first argument must be a DuckDB aggregate, e.g. corr(x, y)")
    if node.args.get("lower") is None:
        _refuse(f"{label}: DP_AGG needs bounds for the aggregate's value: DP_AGG(agg, lower, upper)")
    name = aggregate_name(inner)
    if name not in SAFE_NUMERIC_AGGREGATES and name not in SAFE_ANY_AGGREGATES:
        _refuse(f"{label}: aggregate {name}() is not available in DP_AGG (it can fail or is not "
                f"supported); available: {', '.join(sorted(SAFE_NUMERIC_AGGREGATES | SAFE_ANY_AGGREGATES))}")
    numeric = name in SAFE_NUMERIC_AGGREGATES
    quantile_slot = _QUANTILE_ARG.get(name)
    out = inner.copy()
    args: list[tuple[str, exp.Expression]] = []
    for key, value in list(out.args.items()):
        values = value if isinstance(value, list) else [value]
        if not any(isinstance(v, exp.Expression) for v in values):
            continue
        if key == quantile_slot:
            p = _literal_number(value, f"the quantile of {label}")
            if p is None or not 0 <= p <= 1:
                _refuse(f"{label}: the quantile must be between 0 and 1")
            continue
        if key not in ("this", "expression", "expressions"):
            _refuse(f"{label}: {name}() with {key.upper()} is not supported in DP_AGG")
        new = []
        for v in values:
            if isinstance(v, exp.Star) and name == "count":
                new.append(v)
                continue
            if isinstance(v, exp.Distinct):
                _refuse(f"{label}: DISTINCT is not supported in DP_AGG")
            expr = rel.substitute(v, label)
            if numeric:
                expr = exp.TryCast(this=expr, to=exp.DataType.build("DOUBLE"))
            col = build.argument(index, len(args))
            args.append((col, expr))
            new.append(exp.column(col))
        out.set(key, new if isinstance(value, list) else new[0])
    return out, args


def _group_exprs(select: exp.Select, rel: Relation) -> tuple[list[exp.Expression], list[exp.Expression]]:
    """The GROUP BY expressions as the user wrote them (for the output) and over ``__t``."""
    group = select.args.get("group")
    if not group:
        return [], []
    for key, value in group.args.items():
        if value and key not in ("expressions", "all"):
            _refuse(f"GROUP BY {key.upper().replace('_', ' ')} is not supported in DP queries")
    items = list(group.expressions)
    if group.args.get("all"):
        items = [p.this if isinstance(p, exp.Alias) else p for p in select.expressions
                 if not p.find(DPAggregate)]
    user, resolved = [], []
    aliases = {p.alias.lower(): p.this for p in select.expressions if isinstance(p, exp.Alias)}
    for g in items:
        if isinstance(g, exp.Literal) and not g.is_string:
            pos = int(g.this)
            if not 1 <= pos <= len(select.expressions):
                raise BindError(f"GROUP BY position {pos} is not in the select list")
            proj = select.expressions[pos - 1]
            g = proj.this if isinstance(proj, exp.Alias) else proj
        elif isinstance(g, exp.Column) and not g.table and g.name.lower() not in rel.columns \
                and g.name.lower() in aliases:
            g = aliases[g.name.lower()]
        if g.find(DPAggregate):
            _refuse("cannot GROUP BY a DP aggregate")
        user.append(g)
        resolved.append(rel.substitute(g, "GROUP BY"))
        _not_one_unit(g, resolved[-1], rel)
    return user, resolved


def _not_one_unit(written: exp.Expression, key: exp.Expression, rel: Relation) -> None:
    """Refuse, in a query over linked tables, a group key that is a private table's unit column
    or link key: each group would hold one person's rows (or one order of one person), a list of
    individuals, not a statistic (TPC-H Q3, Q10). Over a table with its own id unit, such a
    GROUP BY stays as before (τ-thresholding releases no group of one person)."""
    owner = rel.owner(key)
    if owner is None or owner[0].public:
        return
    tp, column = owner
    if tp.link is None and rel.table.link is None and not any(j.link for j in rel.joined_tables.values()):
        return
    if column == tp.privacy_unit or (tp.link is not None and column == tp.link.column):
        _refuse(f"GROUP BY {written.sql(dialect='duckdb')} would release individual "
                f"{tp.unit_name or 'privacy unit'}s (each group holds one person's rows); group by a column "
                "many people share")
