"""Bind a parsed query to the catalog and the policy, refusing every shape that could leak.

Binding decides from the query text, the policy and the catalog's column names alone (never from
data) whether the query is

* a **public** query: it reads only tables the policy marks public, and runs as plain DuckDB; or
* a **DP** query: one SELECT whose DP aggregates read one table through a chain of row-wise
  CTEs/subqueries, with WHERE, GROUP BY and HAVING / ORDER BY / LIMIT on the noisy output.

Anything else that touches a private table is refused with a :class:`PrivacyError` naming the
table: raw rows, non-DP aggregates, private values outside DP aggregates and group keys,
subqueries over private tables anywhere but the FROM chain, joins, set operations, windows.
"""

from __future__ import annotations

import math
import typing as t
from dataclasses import dataclass, field

from sqlglot import exp

from dpsql.dialect import DPAgg, DPAggregate, DPQuantile, DPQuery
from dpsql.errors import BindError, PrivacyError
from dpsql.guards import check_functions, check_post_processing, check_statement, check_total
from dpsql.options import Options, parse_options
from dpsql.postprocess import build_outer
from dpsql.policy import Policy, TablePolicy

Catalog = t.Callable[[str], "dict[str, str] | None"]
"""``catalog(table) -> {column: DuckDB type}`` (names lower-case), or ``None`` if no such table."""


@dataclass
class BoundAggregate:
    """One DP aggregate of the query, with its argument expressed over the source rows."""

    index: int
    node: DPAggregate
    statistic: str
    arg: exp.Expression | None  # None for DP_COUNT(*)
    lower: float | None
    upper: float | None
    quantile: float | None = None
    #: the source column the argument reads directly, if any (for policy bounds)
    column: str | None = None
    #: DuckDB type of that column (lets the rewrite clip without casting)
    column_type: str | None = None

    @property
    def label(self) -> str:
        if self._label is None:
            self._label = _label(self.node)
        return self._label

    _label: str | None = field(default=None, repr=False, compare=False)


@dataclass
class Bound:
    """The outcome of binding. ``public`` queries carry only ``query``."""

    query: exp.Expression
    options: Options
    explain: bool
    public: bool = False
    table: TablePolicy | None = None
    #: the FROM clause of the DP SELECT (row-wise chain ending at ``table``)
    from_: exp.Expression | None = None
    #: the query's own (row-wise) CTEs, which ``from_`` may name
    ctes: list[exp.CTE] = field(default_factory=list)
    where: exp.Expression | None = None
    group_by: list[exp.Expression] = field(default_factory=list)
    #: for each group expression, the source column it reads directly (for public key domains)
    group_columns: list[str | None] = field(default_factory=list)
    #: for each group expression, its DuckDB type (public key domains are cast to it)
    group_types: list[str] = field(default_factory=list)
    aggregates: list[BoundAggregate] = field(default_factory=list)
    #: post-processing SELECT over the noisy table ``__noisy(__k0.., __a0..)``
    outer: exp.Select | None = None
    output_names: list[str] = field(default_factory=list)
    #: when the post-processing only renames columns (and orders by the keys), the source
    #: column of each output name, so that it can be done without running ``outer``
    outer_columns: list[str] | None = None


def _label(node: exp.Expression) -> str:
    from dpsql.dialect import to_sql

    return to_sql(node)


def _refuse(msg: str) -> t.NoReturn:
    raise PrivacyError(msg)


def bind(parsed: DPQuery, policy: Policy, catalog: Catalog) -> Bound:
    """Bind ``parsed`` (from :func:`dpsql.dialect.parse`) or raise a dpsql error."""
    options = parse_options(parsed.option_items())
    query = parsed.this
    explain = bool(parsed.args.get("explain"))
    check_statement(query)
    check_functions(query)
    tables = _base_tables(query, policy, catalog)
    has_dp = any(isinstance(n, DPAggregate) for n in query.find_all(DPAggregate))
    private = sorted({tp.name for tp in tables if not tp.public})
    if not private and not has_dp:
        if options.given:
            _refuse("a query on public tables takes no WITH (...) privacy options")
        return Bound(query=query, options=options, explain=explain, public=True)
    if not has_dp:
        agg = next(query.find_all(exp.AggFunc), None)
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
            f"set operations (UNION, INTERSECT, EXCEPT) over private table {private[0]} "
            "are not allowed" if private else "DP aggregates must be in a single SELECT"
        )
    return _bind_select(query, options, explain, policy, catalog, private[0] if private else "")


def _base_tables(query: exp.Expression, policy: Policy, catalog: Catalog) -> list[TablePolicy]:
    """Every real table the query reads, checked against the policy (deny by default)."""
    cte_names = {cte.alias_or_name.lower() for cte in query.find_all(exp.CTE)}
    found: list[TablePolicy] = []
    for table in query.find_all(exp.Table):
        if isinstance(table.this, exp.Func) or isinstance(table.this, exp.Anonymous):
            _refuse(f"table function {table.this.sql()} is not allowed in dpsql queries")
        name = table.name.lower()
        if not table.args.get("db") and name in cte_names:
            continue
        if table.args.get("db") or table.args.get("catalog"):
            _refuse(f"table {table.sql()} is outside the policy: use unqualified table names")
        tp = policy.table(name)
        if tp is None:
            if catalog(name) is None:
                raise BindError(f"table {name} does not exist")
            _refuse(f"table {name} is not declared in the policy, so it cannot be read")
        if catalog(name) is None:
            raise BindError(f"table {name} is in the policy but does not exist in the database")
        found.append(tp)
    return found


# ---------------------------------------------------------------------------------------------
# DP SELECT


@dataclass
class _Source:
    """What a FROM item offers: its columns, mapped to base-table columns where passed through."""

    table: TablePolicy
    columns: dict[str, str | None]
    alias: str | None


def _bind_select(
    select: exp.Select, options: Options, explain: bool, policy: Policy, catalog: Catalog,
    private: str,
) -> Bound:
    ctes = {}
    if select.args.get("with_"):
        for cte in select.args["with_"].expressions:
            ctes[cte.alias_or_name.lower()] = cte.this
        if select.args["with_"].args.get("recursive"):
            _refuse("recursive CTEs are not allowed over private tables")
    for key in ("distinct", "qualify", "windows", "laterals", "joins", "pivots", "connect", "sample"):
        if select.args.get(key):
            what = {"joins": "JOIN", "laterals": "LATERAL", "distinct": "SELECT DISTINCT"}.get(key, key.upper())
            _refuse(f"{what} is not supported in a DP query over private table {private}")
    from_ = select.args.get("from_")
    if from_ is None:
        _refuse("a DP query needs a FROM clause")
    source = _from_item(from_.this, ctes, policy, catalog, depth=0)

    where = select.args.get("where")
    if where is not None:
        _check_rowwise(where.this, source, "WHERE")

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
            aggregates.append(_bind_aggregate(len(aggregates), node, source))
        index_of[id(node)] = by_label[label]

    group_exprs = _group_exprs(select)
    types = catalog(source.table.name) or {}
    for agg in aggregates:
        if agg.column is not None:
            agg.column_type = types.get(agg.column)
    group_columns: list[str | None] = []
    for g in group_exprs:
        _check_rowwise(g, source, "GROUP BY")
        group_columns.append(source.columns.get(g.name.lower()) if isinstance(g, exp.Column) else None)

    outer, names = build_outer(select, index_of, group_exprs, source)
    check_post_processing(select, source.table.name)
    trivial = not any(select.args.get(k) for k in ("having", "order", "limit", "offset")) and all(
        isinstance(p.this, exp.Column) for p in outer.expressions
    )
    outer_columns = [p.this.name for p in outer.expressions] if trivial else None
    return Bound(
        query=select,
        options=options,
        explain=explain,
        table=source.table,
        from_=from_.this,
        ctes=list(select.args["with_"].expressions) if select.args.get("with_") else [],
        where=where.this if where is not None else None,
        group_by=group_exprs,
        group_columns=group_columns,
        group_types=[(types.get(col) if col else None) or "VARCHAR" for col in group_columns],
        aggregates=aggregates,
        outer=outer,
        output_names=names,
        outer_columns=outer_columns,
    )


def _from_item(
    item: exp.Expression, ctes: dict[str, exp.Expression], policy: Policy, catalog: Catalog, depth: int
) -> _Source:
    if depth > 16:
        _refuse("the FROM chain is nested too deeply")
    alias = item.alias_or_name.lower() if item.alias else None
    if isinstance(item, exp.Table):
        name = item.name.lower()
        if name in ctes:
            inner = _rowwise_subquery(ctes[name], ctes, policy, catalog, depth)
            return _Source(inner.table, inner.columns, alias or name)
        tp = policy.table(name)
        assert tp is not None  # checked by _base_tables
        cols = catalog(name) or []
        return _Source(tp, {c: c for c in cols}, alias or name)
    if isinstance(item, exp.Subquery):
        inner = _rowwise_subquery(item.this, ctes, policy, catalog, depth)
        return _Source(inner.table, inner.columns, alias)
    _refuse(f"unsupported FROM item in a DP query: {item.sql()[:60]}")


def _rowwise_subquery(
    query: exp.Expression, ctes: dict[str, exp.Expression], policy: Policy, catalog: Catalog, depth: int
) -> _Source:
    if not isinstance(query, exp.Select):
        tables = sorted({tb.name for tb in query.find_all(exp.Table)})
        _refuse(
            f"only row-wise SELECTs may sit between private table {', '.join(tables)} and its "
            "DP aggregates (no set operations)"
        )
    if query.args.get("with_"):
        for cte in query.args["with_"].expressions:
            ctes = {**ctes, cte.alias_or_name.lower(): cte.this}
    from_ = query.args.get("from_")
    if from_ is None:
        _refuse("a subquery in the FROM chain needs a FROM clause")
    inner = _from_item(from_.this, ctes, policy, catalog, depth + 1)
    for key in ("group", "having", "distinct", "limit", "offset", "order", "qualify", "joins",
                "laterals", "windows", "sample", "pivots"):
        if query.args.get(key):
            what = {"group": "GROUP BY", "order": "ORDER BY", "joins": "JOIN"}.get(key, key.upper())
            _refuse(
                f"a subquery over private table {inner.table.name} may only transform rows "
                f"(no {what}) before the DP aggregates"
            )
    if query.args.get("where") is not None:
        _check_rowwise(query.args["where"].this, inner, "WHERE")
    columns: dict[str, str | None] = {}
    for proj in query.expressions:
        if isinstance(proj, exp.Star):
            columns.update(inner.columns)
            continue
        _check_rowwise(proj, inner, "a subquery's select list")
        expr = proj.this if isinstance(proj, exp.Alias) else proj
        name = proj.alias_or_name.lower()
        columns[name] = inner.columns.get(expr.name.lower()) if isinstance(expr, exp.Column) else None
    return _Source(inner.table, columns, None)


def _check_rowwise(node: exp.Expression, source: _Source, where: str) -> None:
    """A row-wise expression: columns of ``source``, no aggregates, windows or private subqueries."""
    for sub in node.find_all(exp.Subquery, exp.Exists, exp.Select):
        _refuse(f"subqueries are not allowed in {where} of a DP query over {source.table.name}")
    for fn in node.find_all(exp.AggFunc):
        if isinstance(fn, DPAggregate):
            _refuse(f"DP aggregates are not allowed in {where}")
        _refuse(f"aggregate {fn.sql_name().lower()}() is not allowed in {where} of a DP query")
    if node.find(exp.Window):
        _refuse(f"window functions are not allowed over private table {source.table.name}")
    check_total(node, source.table.name, where)
    for col in node.find_all(exp.Column):
        _check_column(col, source)


def _check_column(col: exp.Column, source: _Source) -> None:
    qual = col.table.lower() if col.table else None
    if qual and source.alias and qual != source.alias and qual != source.table.name:
        raise BindError(f"unknown table or alias {col.table} in {col.sql()}")
    if col.name.lower() not in source.columns:
        raise BindError(f"column {col.name} does not exist in {source.table.name}")


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
        return sign * float(node.this.this)
    _refuse(f"{what} must be a number literal, got {node.sql()}")


def _bind_aggregate(index: int, node: DPAggregate, source: _Source) -> BoundAggregate:
    label = _label(node)
    arg = node.this if not isinstance(node.this, exp.Star) else None
    lower = _literal_number(node.args.get("lower"), f"the lower bound of {label}")
    upper = _literal_number(node.args.get("upper"), f"the upper bound of {label}")
    column = None
    if arg is not None and not isinstance(node, DPAgg):
        _check_rowwise(arg, source, label)
        if isinstance(arg, exp.Column):
            column = source.columns.get(arg.name.lower())
    if isinstance(node, DPAgg):
        _bind_dp_agg_arg(node, source)
    if lower is not None and upper is not None and not lower < upper:
        _refuse(f"{label}: lower bound {lower:g} must be below upper bound {upper:g}")
    for what, bound in (("lower", lower), ("upper", upper)):  # new refusal: 1e999 parses as inf
        if bound is not None and not math.isfinite(bound):
            _refuse(f"{label}: the {what} bound must be a finite number, got {bound:g}")
    if lower is None and arg is not None and node.statistic != "count":
        bounds = source.table.column(column).bounds if column else None
        if bounds is None:
            what = f"column {arg.name}" if isinstance(arg, exp.Column) else "the expression"
            raise PrivacyError(
                f"{label}: no bounds for {what}; give them in the call, e.g. "
                f"{node._sql_names[0]}({arg.sql()}, 0, 100), or in the policy"
            )
        lower, upper = bounds
    quantile = None
    if isinstance(node, DPQuantile):
        quantile = _literal_number(node.args.get("quantile"), f"the quantile of {label}")
        if quantile is None or not 0 <= quantile <= 1:
            _refuse(f"{label}: the quantile must be between 0 and 1")
    elif node.statistic == "median":
        quantile = 0.5
    elif node.statistic == "min":
        quantile = 0.0
    elif node.statistic == "max":
        quantile = 1.0
    return BoundAggregate(index, node, node.statistic, arg, lower, upper, quantile, column)


def _bind_dp_agg_arg(node: DPAgg, source: _Source) -> None:
    inner = node.this
    if not isinstance(inner, exp.AggFunc) or isinstance(inner, DPAggregate):
        _refuse(f"{_label(node)}: the first argument must be a DuckDB aggregate, e.g. corr(x, y)")
    if node.args.get("lower") is None:
        _refuse(f"{_label(node)}: DP_AGG needs bounds for the aggregate's value: DP_AGG(agg, lower, upper)")
    for arg in inner.iter_expressions():
        _check_rowwise(arg, source, _label(node))


def _group_exprs(select: exp.Select) -> list[exp.Expression]:
    group = select.args.get("group")
    if not group:
        return []
    for key in ("rollup", "cube", "grouping_sets"):
        if group.args.get(key):
            _refuse(f"GROUP BY {key.upper().replace('_', ' ')} is not supported in DP queries")
    items = list(group.expressions)
    if group.args.get("all"):
        items = [p.this if isinstance(p, exp.Alias) else p for p in select.expressions
                 if not p.find(DPAggregate)]
    out = []
    aliases = {p.alias.lower(): p.this for p in select.expressions if isinstance(p, exp.Alias)}
    for g in items:
        if isinstance(g, exp.Literal) and not g.is_string:
            pos = int(g.this)
            if not 1 <= pos <= len(select.expressions):
                raise BindError(f"GROUP BY position {pos} is not in the select list")
            proj = select.expressions[pos - 1]
            g = proj.this if isinstance(proj, exp.Alias) else proj
        elif isinstance(g, exp.Column) and not g.table and g.name.lower() in aliases:
            g = aliases[g.name.lower()]
        if g.find(DPAggregate):
            _refuse("cannot GROUP BY a DP aggregate")
        out.append(g)
    return out


