"""The post-processing SELECT: HAVING, ORDER BY, LIMIT and select-list expressions, run on the
noisy rows only.

The binder hands over the user's SELECT; DP aggregate calls become columns ``__a<i>`` and group
expressions ``__k<j>`` of the table ``__noisy`` that the release step fills. What is left must
be on the allowlist of :mod:`dpsql._sql.allow` (no subquery, window, non-DP aggregate or unknown
function), may name no other column (output aliases excepted, in HAVING and ORDER BY), and is
made total (:mod:`dpsql._sql.total`), because it runs after the budget is charged: nothing there
may fail. LIMIT and OFFSET are integer literals.
"""

from __future__ import annotations

import typing as t

from sqlglot import exp

from dpsql._sql import build
from dpsql._sql.allow import check_rowwise
from dpsql._sql.build import NOISY
from dpsql._sql.dialect import DPAggregate
from dpsql._sql.suggest import did_you_mean
from dpsql._sql.total import total
from dpsql.errors import BindError, PrivacyError

if t.TYPE_CHECKING:
    from dpsql._sql.scope import Relation


def _label(node: exp.Expression) -> str:
    from dpsql._sql.dialect import to_sql

    return to_sql(node)


def _refuse(msg: str) -> t.NoReturn:
    raise PrivacyError(msg)


def _same(node: exp.Expression) -> str:
    """The text of ``node`` with identifiers lower-cased: DuckDB resolves names without regard
    to case, so ``sex`` in the select list is the GROUP BY key ``SEX``."""
    copy = node.copy()
    for ident in copy.find_all(exp.Identifier):
        ident.set("this", str(ident.this).lower())
        ident.set("quoted", False)
    return copy.sql(dialect="duckdb", copy=False)  # the copy is this function's own


class _Replacer:
    """Rewrites an expression of the user's SELECT into one over ``__noisy``: each DP aggregate
    call becomes its column ``__a<i>`` and each GROUP BY expression its key ``__k<j>``; what is
    left is checked (nothing that is not post-processing, no column of the private table)."""

    def __init__(self, index_of: dict[int, int], group_exprs: list[exp.Expression], rel: "Relation",
                 aliases: set[str]) -> None:
        self.index_of = index_of
        self.group_keys = [_same(g) for g in group_exprs]
        self.rel = rel
        self.table = rel.table.name
        self.aliases = aliases

    def __call__(self, node: exp.Expression, where: str) -> exp.Expression:
        """``node`` over ``__noisy``, or a refusal naming ``where`` (the clause it is in)."""
        made: set[int] = set()
        out = self._swapped(node, made)
        _refuse_nested(out, where, self.table)
        check_rowwise(out, where, self.table)
        self._check_columns(out, where, made)
        return out

    def _swapped(self, node: exp.Expression, made: set[int]) -> exp.Expression:
        """A copy of ``node`` with its DP aggregates and group expressions replaced by columns
        of ``__noisy`` (their ids added to ``made``)."""
        if id(node) in self.index_of:  # the aggregate alone: its column, without copying the call
            col = exp.column(build.agg(self.index_of[id(node)]))
            made.add(id(col))
            return col
        out = node.copy()
        # The copy's DP aggregate nodes, matched to the originals by walking both trees in step.
        # Kept per call: ids of nodes a previous call discarded may be reused by new objects.
        copies = {id(new): self.index_of[id(orig)] for orig, new in zip(node.walk(), out.walk())
                  if id(orig) in self.index_of}

        def swap(n: exp.Expression) -> exp.Expression:
            if id(n) in copies:
                col = exp.column(build.agg(copies[id(n)]))
            elif not isinstance(n, exp.Literal) and _same(n) in self.group_keys:
                col = exp.column(build.key(self.group_keys.index(_same(n))))
            else:
                return n
            made.add(id(col))
            return col

        return out.transform(swap, copy=False)

    def _check_columns(self, out: exp.Expression, where: str, made: set[int]) -> None:
        """Refuse any column left in ``out`` but those made by :meth:`_swapped` and, outside the
        select list, the output aliases: a private column, or one that does not exist."""
        table, columns = self.table, self.rel.columns
        for col in out.find_all(exp.Column):
            if id(col) in made:
                continue
            if where != "the select list" and not col.table and col.name.lower() in self.aliases:
                continue
            if col.name.lower() in columns or col.table:
                _refuse(f"column {col.name} of private table {table} appears in {where} outside a DP aggregate "
                        + "and the GROUP BY keys")
            raise BindError(f"column {col.name} does not exist in {table}"
                            + did_you_mean(col.name, [*columns, *self.aliases]))


def _refuse_nested(out: exp.Expression, where: str, table: str) -> None:
    """Refuse what may not run on the noisy rows: a subquery, a window function, a non-DP
    aggregate, a FILTER clause."""
    for n in out.walk():
        if isinstance(n, (exp.Subquery, exp.Select, exp.Exists)):
            _refuse(f"subqueries are not allowed in {where} of a DP query over {table}")
        if isinstance(n, exp.Window):
            _refuse(f"window functions are not allowed in {where} of a DP query over {table}")
    for n in out.walk():
        if isinstance(n, exp.AggFunc) and not isinstance(n, DPAggregate):
            _refuse(
                f"aggregate {n.sql_name().lower()}() over private table {table} is not "
                "differentially private; use a DP aggregate (DP_COUNT, DP_SUM, DP_MEAN, ...)"
            )
        if isinstance(n, exp.Filter):
            _refuse("FILTER (WHERE ...) is not supported on DP aggregates; put the condition in WHERE")


def build_outer(
    select: exp.Select, index_of: dict[int, int], group_exprs: list[exp.Expression], rel: "Relation",
    labels: t.Sequence[str] = (),
) -> tuple[exp.Select, list[str]]:
    """Build the post-processing SELECT over ``__noisy`` and the output column names;
    ``labels``: the text of each aggregate (by index), printed already, the name of a select
    item that is that aggregate alone."""
    table = rel.table.name
    aliases = {p.alias.lower() for p in select.expressions if isinstance(p, exp.Alias)}
    replace = _Replacer(index_of, group_exprs, rel, aliases)
    projections, names = _projections(select, replace, {k: labels[i] for k, i in index_of.items() if i < len(labels)})
    # the FROM built as a node: a string would be parsed by sqlglot on every query
    outer = exp.Select(expressions=projections, from_=exp.From(this=exp.table_(NOISY)))
    if select.args.get("having"):
        outer = outer.where(total(replace(select.args["having"].this, "HAVING")))
    outer = _ordered(outer, select, group_exprs, replace)
    _limits(outer, select, table)
    return outer, names


#: Key types whose order DuckDB's ORDER BY and Arrow's sort agree on: numbers (NaN above every
#: number), text by its bytes, dates, timestamps and truth values, NULLs last in both.
_SORTED_ALIKE = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
                 "UBIGINT", "FLOAT", "DOUBLE", "DECIMAL", "VARCHAR", "DATE", "TIMESTAMP", "BOOLEAN")


def renamed_columns(outer: exp.Select, key_types: t.Sequence[str]) -> list[str] | None:
    """The ``__noisy`` columns ``outer`` selects, in order, when all it does is rename them and
    sort by the keys in their own order (what the release does without a round trip through
    an engine); None when it does more: HAVING, LIMIT, an expression, another order.

    >>> import sqlglot
    >>> q = lambda s: sqlglot.parse_one(s, read="duckdb")
    >>> renamed_columns(q('SELECT __k0 AS "a", __a0 AS "n" FROM __noisy ORDER BY __k0'), ["VARCHAR"])
    ['__k0', '__a0']
    >>> renamed_columns(exp.select("__k0").from_("__noisy").order_by(exp.column("__k0")), ["DATE"])
    ['__k0']
    >>> renamed_columns(q('SELECT __k0 AS "a" FROM __noisy ORDER BY __k0 DESC'), ["VARCHAR"]) is None
    True
    >>> renamed_columns(q('SELECT __k0 AS "a" FROM __noisy ORDER BY __k0'), ["INTERVAL"]) is None
    True
    >>> renamed_columns(q('SELECT __a0 + 1 AS "a" FROM __noisy'), []) is None
    True
    """
    if any(outer.args.get(k) for k in ("where", "having", "limit", "offset")):
        return None
    if not all(isinstance(p.this if isinstance(p, exp.Alias) else p, exp.Column) for p in outer.expressions):
        return None
    order = outer.args.get("order")
    if order is not None:
        names = build.keys(len(key_types))
        for j, o in enumerate(order.expressions):
            term = o.this if isinstance(o, exp.Ordered) else o  # the keys' own order: bare columns
            if not (j < len(names) and isinstance(term, exp.Column) and term.name == names[j]
                    and not o.args.get("desc") and not o.args.get("nulls_first")):
                return None
        if not all(kind.split("(")[0].split(" ")[0] in _SORTED_ALIKE for kind in key_types):
            return None
    return [(p.this if isinstance(p, exp.Alias) else p).name for p in outer.expressions]


def _projections(select: exp.Select, replace: _Replacer,
                 labels: dict[int, str]) -> tuple[list[exp.Expression], list[str]]:
    """The select list over ``__noisy``, each expression made total under its output name, and
    the names (``labels``: the text of the aggregate nodes, by id); ``SELECT *`` is refused."""
    projections: list[exp.Expression] = []
    names: list[str] = []
    for proj in select.expressions:
        if isinstance(proj, exp.Star) or (isinstance(proj, exp.Column) and isinstance(proj.this, exp.Star)):
            _refuse("SELECT * would return raw rows of private table " + str(replace.table))
        expr = proj.this if isinstance(proj, exp.Alias) else proj
        name = proj.alias if isinstance(proj, exp.Alias) else (
            expr.name if isinstance(expr, exp.Column) else labels.get(id(expr)) or _label(expr)
        )
        new = replace(expr, "the select list")
        projections.append(exp.alias_(new if isinstance(new, exp.Column) else total(new), name, quoted=True))
        names.append(name)
    return projections, names


def _ordered(outer: exp.Select, select: exp.Select, group_exprs: list[exp.Expression],
             replace: _Replacer) -> exp.Select:
    """``outer`` with the query's ORDER BY over ``__noisy`` (made total), or, grouped and
    without one, ordered by the keys."""
    if select.args.get("order"):
        order = select.args["order"].copy()
        order.set("expressions", [
            o.__class__(**{**o.args, "this": total(replace(o.this, "ORDER BY"))})
            for o in select.args["order"].expressions
        ])
        outer.set("order", order)
    elif group_exprs:
        # Without ORDER BY, rows come back in key order rather than hash-join order.
        outer = outer.order_by(*[exp.column(k) for k in build.keys(len(group_exprs))])
    return outer


def _limits(outer: exp.Select, select: exp.Select, table: str) -> None:
    """Copy LIMIT and OFFSET onto ``outer``, refusing anything but a whole number literal."""
    for key in ("limit", "offset"):
        clause = select.args.get(key)
        if clause:
            value = clause.args.get("expression")
            if not (isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit()):
                what = key.upper()
                if value is not None and value.find(exp.Subquery, exp.Select, exp.Exists):
                    _refuse(f"subqueries are not allowed in {what} of a DP query over {table}")
                _refuse(f"{what} must be a whole number literal in a DP query over {table}")
            outer.set(key, clause.copy())
