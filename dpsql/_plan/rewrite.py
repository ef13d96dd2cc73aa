"""Rewrite a plan into ONE statement that computes every exact statistic the release needs.

Shape (one scan of the private table; clipping in SQL)::

    WITH __src AS (                        -- row-wise: the FROM chain inlined, every WHERE
      SELECT <group expr> AS __k0, ...,
             CASE WHEN x < L THEN L WHEN x > U THEN U ELSE x END AS __v0, ...
      FROM "db"."main"."table" AS __t WHERE <where> AND ...
    ), __stats AS (                                  -- one row per group
      SELECT __k0, ..., COUNT(__v0) AS a0_n, SUM(CAST(__v0 AS BIGINT)) AS a0_s, ...
      FROM __src GROUP BY __k0, ...
    )
    SELECT ... FROM (SELECT CAST(__k0 AS <type>) AS __k0, ... FROM __domain) AS __keys
      LEFT JOIN __stats ON __keys.__k0 IS NOT DISTINCT FROM __stats.__k0 ...  -- public keys only

``__domain`` is the public key domain, DuckDB's text of each key, handed to DuckDB as a table
(:attr:`Rewritten.tables`; written in as ``VALUES`` in :attr:`Rewritten.sql`). Spark's
statement has ``(VALUES <keys>) AS __keys(__k0, ...)`` instead.

An ungrouped query with no per-mechanism subquery is one SELECT, the same plan in fewer
words (DuckDB plans it faster): ``SELECT COUNT(__v0) AS a0_n, ... FROM (<__src>) AS __src``;
when every value column is read once (a sum, a count), the values' expressions go into the
aggregates and the rows are read directly:
``SELECT SUM((CASE ... END)) AS a0_s FROM "db"."main"."table" AS __t WHERE <where>``.

For a table whose privacy unit is an id column, ``__src`` is the truncated relation: the rows
above with the unit ``__u`` and a hash of the whole row ``__h``, of which each unit keeps at most
k rows (or r rows in each of at most g groups), chosen by window functions (:mod:`dpsql._compile.truncate`).
Everything after ``__src`` (the statistics and every mechanism's subquery) reads only the
truncated rows. With pre-aggregation (``UnitBounds.mode`` ``clip``, :mod:`dpsql._compile.perunit`,
:mod:`dpsql._compile.preaggregate`) ``__src`` is instead one row per (unit, group) of clipped
partial statistics, and the statistics are their sums; with re-weighting (``reweight``,
:mod:`dpsql._sql.reweight`, :mod:`dpsql._compile.reweight`) the partials are weighted by the
unit's rows instead of clipped. ``report_dropped`` adds ``__cut``, one
row of counts over the rows before the bound, cross-joined to the result. A row unit's
``__src`` is exactly as above.

Only the columns the statistics need are projected, under reserved names, and every column of
the table is read as ``__t."name"``: no name a user writes reaches the statement.
``x`` is the argument (numeric columns) or TRY_CAST(argument AS DOUBLE), so that no value can
make the query fail (a failure would reveal that such a value exists); a value that does not
cast is NULL and is skipped like NULL.
NaN clips to the upper bound (DuckDB orders NaN above every number); ±inf clip to the bounds.
A value that is summed (``prep.fixed``) is instead its integer on a public fixed-point grid
(:mod:`dpsql.mechanisms.fixed`), clamped to the integers' range after every floating-point
step, so that its sums are exact (an integer column with whole bounds keeps its integer clip).
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field, replace

from sqlglot import exp

import dpsql._compile.spark  # noqa: F401  (registers Spark's compiler)
from dpsql._compile import perunit
from dpsql._compile.compiler import Compiled, Compiler, compiler
from dpsql._compile.plan import (
    Clipped,
    Column,
    Fixed,
    PreAggregation,
    Relation,
    SharedHistogram,
    Source,
    Stat,
    Statement,
    Subquery,
    Truncation,
    Value,
)
from dpsql._compile.target import DUCKDB, Target
from dpsql._plan.keys import KeyDomain
from dpsql._plan.plan import Plan
from dpsql._sql import build
from dpsql._sql.reweight import REWEIGHT
from dpsql._sql.total import total

if t.TYPE_CHECKING:
    import pyarrow as pa

    from dpsql.mechanisms.base import Prepared


@dataclass
class Rewritten:
    #: the statement the engine runs, which may read :attr:`tables`
    statement: str
    keys: list[str] = field(default_factory=list)
    #: (aggregate index, stat name) -> result column name
    columns: dict[tuple[int, str], str] = field(default_factory=dict)
    key_selection_column: str | None = None
    #: relations the statement reads by name that the engine is handed as data: the public key
    #: domain, ``__domain`` (DuckDB's text of each key; :mod:`dpsql._plan.keys`)
    tables: dict[str, KeyDomain] = field(default_factory=dict)
    #: the compiled tree and its compiler (:attr:`sql` writes the domain in from it)
    compiled: Compiled | None = field(default=None, repr=False, compare=False)
    compiler: Compiler | None = field(default=None, repr=False, compare=False)

    @property
    def sql(self) -> str:
        """The statement with every table of :attr:`tables` written in as a ``VALUES`` list: the
        same rows, from one statement that runs on its own (written from the tree)."""
        if not self.tables:
            return self.statement
        assert self.compiled is not None and self.compiler is not None and len(self.tables) == 1
        (domain,) = self.tables.values()
        return self.compiler.standalone(self.compiled, domain)

    @sql.setter
    def sql(self, text: str) -> None:
        """Set the statement, one that reads no table handed over as data."""
        self.statement, self.tables, self.compiled = text, {}, None

    @property
    def arrow_tables(self) -> dict[str, "pa.Table"]:
        """:attr:`tables` as the engine is handed them: Arrow tables, by name."""
        return {name: domain.table for name, domain in self.tables.items()}


#: A public key domain of at most this many keys is written into the statement as ``VALUES``;
#: a larger one is handed to the engine as a table. Registering a table and dropping it cost
#: DuckDB about 0.5 ms a statement; a ``VALUES`` row about 10 µs to read (docs/benchmarks.md).
INLINE_KEYS = 32


def rewrite(plan: Plan, target: Target = DUCKDB) -> Rewritten:
    """The statistics statement of ``plan`` as ``target`` runs it: the typed statement
    (:func:`statement`) compiled by the target's compiler
    (:mod:`dpsql._compile`) into one tree, serialised once. A public key domain is handed over
    as a table, or written in when it is small (:data:`INLINE_KEYS`)."""
    comp = compiler(target)
    st = statement(plan, target.shared_histogram)
    compiled = comp.compile(st)
    domain = plan.public_keys if compiled.domain_table is not None else None  # st.domain is this domain
    if domain is not None and len(domain) <= INLINE_KEYS:
        compiled = comp.inlined(compiled, domain)
        domain = None
    out = Rewritten(statement=comp.sql(compiled.tree), keys=list(st.keys), columns=dict(st.columns),
                    key_selection_column=st.key_selection_column, compiled=compiled, compiler=comp)
    if domain is not None and compiled.domain_table is not None:
        out.tables[compiled.domain_table.name] = domain
    return out


def statement(plan: Plan, shared_histogram: bool = True) -> Statement:
    """The typed statement of ``plan``; ``shared_histogram``: whether the engine reads the
    statistics from an order-statistics histogram when it can (:func:`_shared`).

    Every expression over private rows is made total (:mod:`dpsql._sql.total`); the aggregates'
    arguments in place, so that the mechanisms' ``stats()`` and ``subquery()`` see them.
    """
    bound = plan.bound
    keys = tuple(build.keys(len(bound.group_by)))
    for prep in plan.prepared:
        if prep.agg.arg is not None:
            prep.agg.arg = total(prep.agg.arg)
    values, names = _values(plan)
    source = _source(plan, keys, values, names)
    columns: dict[tuple[int, str], str] = {}
    stats = _stats(plan, columns, names, source.unit is not None, source.preaggregation is not None)
    shared = _shared(plan, keys, stats, names) if shared_histogram and source.preaggregation is None else None
    histogram = None
    if shared is not None:
        by_id = source.unit is not None
        separate = not shared[1].one_per_bucket and not (by_id or bound.joined or bound.per_unit)
        histogram = SharedHistogram(replace(shared[1], histogram=build.HIST), separate)
    subqueries = tuple(_subqueries(plan, keys, shared, columns, names))
    return Statement(source=source, keys=keys, stats=tuple(stats), subqueries=subqueries,
                     histogram=histogram, domain=plan.public_keys, columns=tuple(columns.items()),
                     key_selection_column=build.KEY_COUNT if plan.selection is not None else None,
                     dropped=_dropped(plan, keys))


def _clips(plan: Plan) -> bool:
    """Whether an id unit is bounded by pre-aggregation (:mod:`dpsql._compile.perunit`)."""
    return plan.units is not None and plan.units.mode in (perunit.CLIP, REWEIGHT) and not plan.bound.per_unit


def _dropped(plan: Plan, keys: tuple[str, ...]) -> Truncation | None:
    """``report_dropped``: the bounds whose cut units are counted (the planner refuses it for a
    row unit and for a per-unit subquery)."""
    if plan.dropped is None or plan.units is None:
        return None
    return Truncation.of(plan.units, keys)


def _values(plan: Plan) -> tuple[list[Value], dict[int, str]]:
    """The value columns of ``__src`` (each aggregate's argument, clipped as its mechanism
    says, and the inner arguments), and the column each aggregate reads: aggregates whose
    values are the same expression clipped alike (``SUM(x)`` and ``AVG(x)`` on one grid,
    :meth:`dpsql.mechanisms.fixed.FixedPoint.of_mean`) read one column, so that the engine
    computes it, and the statistics over it, once."""
    values: list[Value] = []
    names: dict[int, str] = {}
    for prep in plan.prepared:
        if prep.agg.arg is not None:
            v = _value(prep)
            same = next((w for w in values if _same(v, w)), None)
            names[prep.agg.index] = v.name if same is None else same.name
            if same is None:
                values.append(v)
        values += [Column(name, total(expr)) for name, expr in prep.agg.inner_args]
    return values, names


def _same(v: Value, w: Value) -> bool:
    """Whether two value columns hold the same values (all but the name alike; the argument
    trees compared last, only when the rest is equal)."""
    if type(v) is not type(w) or v.name == w.name:
        return False
    rest = {k: x for k, x in vars(v).items() if k not in ("name", "arg", "expr")}
    return rest == {k: x for k, x in vars(w).items() if k not in ("name", "arg", "expr")} \
        and (identical(v.expr, w.expr) if isinstance(v, Column) else identical(v.arg, w.arg))  # type: ignore[union-attr]


def identical(a: t.Any, b: t.Any) -> bool:
    """Whether two trees are the same node for node (sqlglot's ``==`` compares hashes only:
    two columns are merged only when they are equal, not when their hashes are).

    >>> from sqlglot import parse_one
    >>> identical(parse_one("f(x, 1)"), parse_one("f(x, 1)")), identical(parse_one("x + 1"), parse_one("x + 2"))
    (True, False)
    """
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, exp.Expression):
        if hash(a) != hash(b):
            return False
        keys = {k for k, x in a.args.items() if not _unset(x)}
        if keys != {k for k, x in b.args.items() if not _unset(x)}:
            return False
        return all(identical(a.args[k], b.args[k]) for k in keys)
    if isinstance(a, list):
        return len(a) == len(b) and all(identical(x, y) for x, y in zip(a, b))
    return bool(a == b)


def _unset(x: t.Any) -> bool:
    """An argument sqlglot treats as absent: None, False or an empty list (never 0 or "")."""
    return x is None or x is False or (isinstance(x, list) and not x)


def _value(prep: "Prepared") -> Value:
    agg = prep.agg
    assert agg.arg is not None
    name = build.value(agg.index)
    if not prep.clips:
        return Column(name, agg.arg)
    if prep.fixed is not None and not prep.fixed.integer:
        return Fixed(name, agg.arg, prep.fixed, agg.column_type)
    assert agg.lower is not None and agg.upper is not None  # a clipped value has both bounds
    return Clipped(name, agg.arg, agg.lower, agg.upper, agg.column_type)


def _conjuncts(node: exp.Expression) -> list[exp.Expression]:
    """The terms of a WHERE's top-level ``AND`` (through parentheses), in order: each is made
    total on its own, ``TRY(a) AND TRY(b)`` keeps the rows ``TRY(a AND b)`` keeps (those where
    both are true without error), and DuckDB can then filter by each term apart (as it does
    the query's own conjunction) instead of evaluating one guarded whole.

    >>> from sqlglot import parse_one
    >>> [c.sql() for c in _conjuncts(parse_one("(a > 1 AND (b < 2 AND c = 3)) AND (d OR e)"))]
    ['a > 1', 'b < 2', 'c = 3', 'd OR e']
    """
    out: list[exp.Expression] = []
    stack = [node]
    while stack:
        term = t.cast(exp.Expression, stack.pop().unnest())
        if isinstance(term, exp.And):
            stack += [term.expression, term.this]
        else:
            out.append(term)
    return out


def _filter(term: exp.Expression) -> exp.Expression:
    """A WHERE term as the statement filters by it: bare where it cannot raise (so that DuckDB
    filters in its scan: :mod:`dpsql._sql.bareterms`), else made total."""
    from dpsql._sql import bareterms, leaftypes

    found = bareterms.bare(term, leaftypes.known())
    return found if found is not None else total(term)


def _source(plan: Plan, keys: tuple[str, ...], values: list[Value], names: dict[int, str]) -> Source:
    """``__src``: only what the statistics need, under reserved names (no user name reaches it)."""
    bound, units = plan.bound, plan.units
    by_id = units is not None and units.by_id
    truncation = pre = None
    if by_id and not bound.per_unit:  # a per-unit subquery already holds one row per unit
        assert units is not None
        if _clips(plan):
            pre = PreAggregation.of(units, keys, perunit.aggregates(plan.prepared, names.__getitem__))
        else:
            truncation = Truncation.of(units, keys)
    assert bound.relation is not None
    return Source(
        relation=Relation(bound.relation, tuple(bound.joins), bound.from_sql),
        where=tuple(_filter(c) for w in bound.where for c in _conjuncts(w)),
        keys=tuple(Column(k, total(g)) for k, g in zip(keys, bound.group_by)),
        values=tuple(values),
        unit=total(bound.unit) if by_id and bound.unit is not None else None,
        hashed=tuple(bound.hashed) if by_id else (),
        row_unit=not by_id and any(prep.needs_unit for prep in plan.prepared),
        truncation=truncation,
        preaggregation=pre,
    )


def _stats(plan: Plan, columns: dict[tuple[int, str], str], names: dict[int, str], by_id: bool,
           clips: bool) -> list[Stat]:
    """Every mechanism's statistics (pre-aggregated: the sums of its partials), the count a
    key's selection reads (units for an id unit, else rows: what a key's count counts is what
    is protected), or a row count when there is nothing else (the statement still needs a column)."""
    stats: list[Stat] = []
    for prep in plan.prepared:
        i = prep.agg.index
        v = exp.column(names[i]) if prep.agg.arg is not None else None
        own = prep.stats(v)
        others = len(stats)  # an aggregate's own statistics differ from one another
        for stat, expr in (perunit.sums(i, own) if clips else own).items():
            same = None if clips else next((s for s in stats[:others] if identical(s.expr, expr)), None)
            columns[(i, stat)] = build.stat(i, stat) if same is None else same.column
            if same is None:  # a statistic computed once however many aggregates read it
                stats.append(Stat(build.stat(i, stat), expr, plain=not clips))
    units = plan.units
    if plan.selection is not None:
        if clips:  # one row per unit in each group
            stats.append(Stat(build.KEY_COUNT, exp.Count(this=exp.Star()), plain=False))
        elif by_id and units is not None and units.by_groups:  # the first row of each unit in the group
            first = exp.EQ(this=exp.column(build.ROW_IN_GROUP), expression=exp.Literal.number(1))
            stats.append(Stat(build.KEY_COUNT, exp.Filter(this=exp.Count(this=exp.Star()),
                                                          expression=exp.Where(this=first)), plain=False))
        elif by_id:
            distinct = exp.Count(this=exp.Distinct(expressions=[exp.column(build.UNIT)]))
            stats.append(Stat(build.KEY_COUNT, distinct, plain=False))
        else:
            stats.append(Stat(build.KEY_COUNT, exp.Count(this=exp.Star())))
    if not stats:
        stats.append(Stat(build.ROWS, exp.Count(this=exp.Star())))
    return stats


def _shared(plan: Plan, keys: tuple[str, ...], stats: list[Stat],
            names: dict[int, str]) -> tuple["Prepared", build.Values] | None:
    """The aggregate whose order-statistics histogram the statistics can be read from, with its
    values, or None: every statistic is ``COUNT(*)`` or ``COUNT(v)`` of that aggregate's value
    ``v`` (the histogram, NULLs in a bucket of their own, holds them as sums, and its groups are
    the same). The first such aggregate is taken."""
    for prep in plan.prepared:
        if prep.agg.arg is None:
            continue
        v = names[prep.agg.index]
        values = prep.order_values(build.SRC, list(keys), v)
        if values is None:
            continue
        for stat in stats:
            arg = stat.expr.this if isinstance(stat.expr, exp.Count) and stat.plain else None
            if not (isinstance(arg, exp.Star) or (isinstance(arg, exp.Column) and not arg.table and arg.name == v)):
                return None
        return prep, values
    return None


def _subqueries(plan: Plan, keys: tuple[str, ...], shared: tuple["Prepared", build.Values] | None,
                columns: dict[tuple[int, str], str], names: dict[int, str]) -> t.Iterator[Subquery]:
    """Every mechanism's per-group subquery (the one of the shared histogram reads it)."""
    for prep in plan.prepared:
        i = prep.agg.index
        v = names.get(i, build.value(i))
        q: exp.Select | None
        if shared is not None and shared[0] is prep:
            q = prep.order_subquery(replace(shared[1], histogram=build.HIST))
        else:
            q = prep.subquery(build.SRC, list(keys), v)
        if q is None:
            continue
        added = tuple(c for c in q.named_selects if c not in keys)
        for c in added:
            columns[(i, c)] = c
        yield Subquery(build.subquery(i), q, added, v, prep.value_counts())
