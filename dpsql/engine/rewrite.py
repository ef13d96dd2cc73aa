"""Rewrite a plan into ONE DuckDB query that computes every exact statistic the release needs.

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
k rows (or r rows in each of at most g groups), chosen by window functions (:func:`truncate`).
Everything after ``__src`` (the statistics and every mechanism's subquery) reads only the
truncated rows. With pre-aggregation (``UnitBounds.mode`` ``clip``, :mod:`dpsql.sql.perunit`)
``__src`` is instead one row per (unit, group) of clipped partial statistics, and the statistics
are their sums. A row unit's ``__src`` is exactly as above.

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

import re
import typing as t
from dataclasses import dataclass, field, replace

from sqlglot import exp

from dpsql.engine.keys import KeyDomain
from dpsql.engine.plan import Plan
from dpsql.mechanisms.base import Prepared
from dpsql.privacy.units import UnitBounds
from dpsql.sql import build, perunit
from dpsql.sql.build import BASE, DOMAIN, KEYS, SRC, STATS
from dpsql.sql.target import DUCKDB, Target
from dpsql.sql.total import total

if t.TYPE_CHECKING:
    import pyarrow as pa


@dataclass
class Rewritten:
    #: the statement the engine runs, which may read :attr:`tables`
    statement: str
    keys: list[str] = field(default_factory=list)
    #: (aggregate index, stat name) -> result column name
    columns: dict[tuple[int, str], str] = field(default_factory=dict)
    key_selection_column: str | None = None
    #: relations the statement reads by name that the engine is handed as data: the public key
    #: domain, ``__domain`` (DuckDB's text of each key; :mod:`dpsql.engine.keys`)
    tables: dict[str, KeyDomain] = field(default_factory=dict)

    @property
    def sql(self) -> str:
        """The statement with every table of :attr:`tables` written in as a ``VALUES`` list: the
        same rows, from one statement that runs on its own."""
        sql = self.statement
        for name, domain in self.tables.items():
            # the domain is read once, in the last FROM, after every piece of the query's text
            head, found, tail = sql.rpartition(f" FROM {name}) AS {KEYS} ")
            assert found, name
            sql = f"{head} FROM {domain.values(name)}) AS {KEYS} {tail}"
        return sql

    @sql.setter
    def sql(self, text: str) -> None:
        """Set the statement, one that reads no table handed over as data."""
        self.statement, self.tables = text, {}

    @property
    def arrow_tables(self) -> dict[str, "pa.Table"]:
        """:attr:`tables` as the engine is handed them: Arrow tables, by name."""
        return {name: domain.table for name, domain in self.tables.items()}


_INTEGER_TYPES = {
    "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT",
    "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT",
}
_FLOAT_TYPES = {"FLOAT", "DOUBLE", "REAL"}


def clip(arg: exp.Expression, lower: float, upper: float, dtype: str | None = None) -> str:
    """``CASE WHEN x < L THEN L WHEN x > U THEN U ELSE x END``, as SQL.

    ``x`` is the argument itself when its type is known to be numeric (integers keep integer
    arithmetic when the bounds are whole numbers), ``CAST(arg AS DOUBLE)`` for decimals, and
    ``TRY_CAST(arg AS DOUBLE)`` otherwise, so that no value can make the query fail. NULL stays
    NULL (DuckDB's GREATEST/LEAST would turn it into a bound). The text is what sqlglot makes
    of that CASE, with ``x`` generated once rather than copied three times.
    """
    dtype = (dtype or "").upper()
    # Integer arithmetic only while no sum can overflow: 2**63 rows of at most 2**62 each stay
    # below HUGEINT's 2**127; with wider bounds the literals are DOUBLE, and so is the CASE.
    integral = (float(lower).is_integer() and float(upper).is_integer()
                and max(abs(lower), abs(upper)) <= 2.0**62)
    x = operand(arg, dtype)
    if dtype in _INTEGER_TYPES and integral:
        lo, hi = str(int(lower)), str(int(upper))
    else:
        lo, hi = repr(float(lower)), repr(float(upper))
    return f"CASE WHEN {x} < {lo} THEN {lo} WHEN {x} > {hi} THEN {hi} ELSE {x} END"


def operand(arg: exp.Expression, dtype: str | None = None) -> str:
    """The argument as a number, as :func:`clip` reads it: as it is (an integer or float column),
    ``CAST(... AS DOUBLE)`` (a decimal), or ``TRY_CAST(... AS DOUBLE)`` (any other type)."""
    dtype = (dtype or "").upper()
    x = _sql(arg)
    if dtype.startswith("DECIMAL") and dtype not in _INTEGER_TYPES:
        return f"CAST({x} AS DOUBLE)"
    if dtype not in _INTEGER_TYPES and dtype not in _FLOAT_TYPES:
        return f"TRY_CAST({x} AS DOUBLE)"
    return x


def value(prep: Prepared, target: Target = DUCKDB) -> str:
    """The value column of an aggregate: its argument clipped to the bounds (:func:`clip`), its
    integer on a fixed-point grid (``prep.fixed``, :mod:`dpsql.mechanisms.fixed`: the clamp to
    the integers' range replaces the clip), or the argument as it is (``prep.clips`` false)."""
    agg = prep.agg
    assert agg.arg is not None
    if not prep.clips:
        return _sql(agg.arg)
    if prep.fixed is not None and not prep.fixed.integer:
        return prep.fixed.sql(operand(agg.arg, agg.column_type), target.integer)
    assert agg.lower is not None and agg.upper is not None  # a clipped value has both bounds
    return clip(agg.arg, agg.lower, agg.upper, agg.column_type)


def _sql(node: exp.Expression) -> str:
    return node.sql(dialect="duckdb")


def truncate(rows: str, units: UnitBounds, keys: list[str]) -> str:
    """The rows of ``rows`` (a SELECT with the unit ``__u``, the row hash ``__h`` and the group
    keys) that an id unit may contribute under ``units`` (see :mod:`dpsql.privacy.units`).

    Without max_groups_per_unit: per unit, the k rows of smallest row hash. With it: per unit,
    the g groups of smallest HASH(unit, keys) (the keys themselves break ties, so g distinct
    groups at most), and in each the r rows of smallest row hash. The row hash is of the whole
    row of the base table: which rows survive depends on the unit's rows after the WHERE, not
    on which columns the query reads. Ties (identical rows) are broken arbitrarily by
    ROW_NUMBER: the rows are interchangeable, and never more than k survive.

    With g, one sort of each unit's rows by (HASH(unit, keys), keys, row hash) serves all three
    windows: the rank of a row in its group ``__r`` is its ROW_NUMBER in that order minus the
    RANK of its group, plus 1, and DENSE_RANK numbers the groups. (Two windows partitioned
    differently, by unit and by unit and group, sort the rows twice: about 1.7× slower on 10M
    rows.) ``__r`` stays in ``__src``: the rows with ``__r = 1`` are the units of a group.

    The filters are written ``BETWEEN 1 AND k``: DuckDB rewrites ``ROW_NUMBER() ... <= k`` into
    a per-unit top-k aggregate that is several times slower with millions of small units.

    Forms that keep the same rows and were measured slower on 10M rows (docs/benchmarks.md,
    issue 29): counting each unit's rows by GROUP BY and ranking only the rows of units over k
    (1.8× the window with 1M units of ~10 rows, 1.6× with 2.5M units of ~4 rows: the count, the
    two semi-joins and a second scan cost more than the sort they save), the k smallest hashes
    per unit by ``MIN(__h, k)`` as an aggregate or a window (2–3×), and fewer, larger partitions
    ordered by (unit, hash) (2–3×).
    """
    u, h = build.UNIT, build.ROW_HASH
    if units.max_groups is not None and keys:
        assert units.max_rows_per_group is not None
        groups = f"HASH({u}, {', '.join(keys)}), {', '.join(keys)}"
        r = build.ROW_IN_GROUP
        rank = (f"ROW_NUMBER() OVER (PARTITION BY {u} ORDER BY {groups}, {h}) "
                f"- RANK() OVER (PARTITION BY {u} ORDER BY {groups}) + 1")
        return (f"SELECT * EXCLUDE ({h}), {rank} AS {r} FROM ({rows}) AS {build.UNTRUNCATED} "
                f"QUALIFY {r} BETWEEN 1 AND {int(units.max_rows_per_group)} "
                f"AND DENSE_RANK() OVER (PARTITION BY {u} ORDER BY {groups}) BETWEEN 1 AND {int(units.max_groups)}")
    keep = f"ROW_NUMBER() OVER (PARTITION BY {u} ORDER BY {h}) BETWEEN 1 AND {int(units.max_rows)}"
    return f"SELECT * EXCLUDE ({h}) FROM ({rows}) AS {build.UNTRUNCATED} QUALIFY {keep}"


def _shared_histogram(plan: Plan, keys: list[str],
                      counts: list[tuple[str, str, exp.Expression | None]]) -> tuple[Prepared, build.Values] | None:
    """The aggregate whose order-statistics histogram ``__stats`` can be read from, with its
    values, or None.

    A subquery of order statistics (:meth:`Prepared.order_values`) aggregates the rows into a
    histogram per group and bucket anyway. When every column of ``__stats`` is ``COUNT(*)`` or
    ``COUNT(v)`` of that aggregate's value ``v``, the same histogram with the NULL values in a
    bucket of their own (:func:`dpsql.sql.build.histogram`) holds them all as sums, and the
    groups are the same: the statistics are then one aggregate of the rows, not two. The first
    such aggregate is taken; any other statistic (a sum, a distinct count of units) leaves the
    statement as it was.
    """
    for prep in plan.prepared:
        if prep.agg.arg is None:
            continue
        v = build.value(prep.agg.index)
        values = prep.order_values(SRC, keys, v)
        if values is None:
            continue
        for _, _, expr in counts:
            arg = expr.this if isinstance(expr, exp.Count) else None
            if not (isinstance(arg, exp.Star) or (isinstance(arg, exp.Column) and not arg.table and arg.name == v)):
                return None
        return prep, values
    return None


def _counted(count: exp.Expression | None) -> str:
    """``COUNT(*)`` or ``COUNT(v)`` of the rows, from the histogram :func:`_shared_histogram`
    found: the sum of the counts of all buckets, or of the non-NULL ones (0 and BIGINT, as
    COUNT)."""
    assert isinstance(count, exp.Count)
    only = "" if isinstance(count.this, exp.Star) else " FILTER (WHERE __b IS NOT NULL)"
    return f"CAST(COALESCE(SUM(__c){only}, 0) AS BIGINT)"


def _inlined(counts: list[tuple[str, str, exp.Expression | None]], named: dict[str, str]) -> list[str] | None:
    """The statistics' select list over the rows themselves: each column of ``__src`` replaced by
    its expression (``named``: name → SQL). None unless every statistic's expression is known
    and reads only columns of ``named``, each at most once over all of them (an expression read
    twice would be computed twice)."""
    seen: set[str] = set()
    for _, _, expr in counts:
        if expr is None:
            return None
        for col in expr.find_all(exp.Column):
            if col.table or col.name not in named or col.name in seen:
                return None
            seen.add(col.name)
    # The statistics' SQL is already generated: the reserved names are replaced in its text,
    # where they must occur exactly as often as in the expressions.
    found = [_RESERVED_NAME.findall(sql) for _, sql, _ in counts]
    if sorted(name for names in found for name in names) != sorted(seen):
        return None
    return [f"{_RESERVED_NAME.sub(lambda m: f'({named[m.group(0)]})', sql)} AS {col}" for col, sql, _ in counts]


#: a reserved column name in generated SQL (``__v0``, ``__i0_1``): never a user's name
_RESERVED_NAME = re.compile(r"(?<![\w.\"])__[A-Za-z0-9_]+\b")


#: (column, its SQL over __src, its expression when it may be read from a histogram)
_Count = tuple[str, str, "exp.Expression | None"]


def rewrite(plan: Plan, target: Target = DUCKDB) -> Rewritten:
    """Build the single DuckDB statement for ``plan``, as ``target`` runs it (see
    :mod:`dpsql.sql.target`: the DuckDB statement is the reference form).

    Pieces are generated once each and joined as text: the shapes are fixed, and building one
    big tree with sqlglot's builders (which copy and re-parse) cost most of the planning time.
    """
    bound = plan.bound
    keys = build.keys(len(bound.group_by))
    # Every expression over private rows is made total (see dpsql.sql.total); the aggregates'
    # arguments in place, so that the mechanisms' stats() and subquery() see the total forms.
    for prep in plan.prepared:
        if prep.agg.arg is not None:
            prep.agg.arg = total(prep.agg.arg)
    by_id = plan.units is not None and plan.units.by_id
    src, named, rows = _source(plan, keys, target, by_id)

    out = Rewritten(statement="", keys=keys)
    counts = _counts(plan, out, by_id)
    shared = _shared_histogram(plan, keys, counts) if target.shared_histogram else None
    stats, grouped = _grouped(keys, counts, shared is not None)

    ctes = [f"{SRC} AS ({src})"]
    if shared is not None:
        if not shared[1].one_per_bucket and not (by_id or bound.joined or bound.per_unit):
            # Two readers of __src, the histogram and the second pass that waits for it: DuckDB
            # would buffer every row of __src for the second; reading the table again is cheaper
            # (10M rows: about 15% of the statement's time and a fifth of its memory).
            ctes[0] = f"{SRC} AS NOT MATERIALIZED ({src})"
        ctes.append(f"{build.HIST} AS ({build.histogram(shared[1])})")
    ctes.append(f"{STATS} AS ({grouped})")
    if plan.dropped is not None and plan.units is not None:  # report_dropped: one row of counts, joined to every group
        ctes.append(f"{perunit.CUT} AS ({perunit.dropped(rows, keys, build.UNIT, plan.units).sql(dialect='duckdb')})")
    subqueries = _subqueries(plan, keys, shared, ctes, out)

    if (not keys and not subqueries and shared is None and plan.public_keys is None and target.name == DUCKDB.name
            and plan.dropped is None):
        # Nothing is joined to the statistics: one SELECT over the rows, as a derived table, or,
        # when each value column is read once (a sum, a count), with the values' expressions in
        # the aggregates: DuckDB runs the same plan and plans it faster (about 0.06 ms less per
        # query than two CTEs, 0.1 ms less again without the derived table).
        out.statement = _single_select(plan, src, stats, counts, None if by_id else named)
        return out
    select, from_ = _joined(plan, keys, subqueries, target, out)
    out.statement = target.finish(f"WITH {', '.join(ctes)} SELECT {', '.join(select)} FROM {from_}")
    return out


def _source(plan: Plan, keys: list[str], target: Target, by_id: bool) -> tuple[str, dict[str, str], str]:
    """The SELECT of ``__src``: the group keys, every aggregate's value column and inner
    arguments, the unit (and row hash) when one is needed, over the FROM chain and the WHERE;
    for an id unit, truncated to what each unit may contribute (:func:`truncate`).

    Also the value columns' SQL by name (what :func:`_inlined` puts back into the aggregates),
    and the rows before any per-unit bound (what ``report_dropped`` counts).
    __src holds only what the statistics need, under reserved names: no user name reaches it.
    """
    bound = plan.bound
    projections = [f"{_sql(total(g))} AS {k}" for k, g in zip(keys, bound.group_by)]
    named: dict[str, str] = {}  # the value columns of __src and their expressions' SQL
    for prep in plan.prepared:
        agg = prep.agg
        if agg.arg is not None:
            named[build.value(agg.index)] = value(prep, target)
            projections.append(f"{named[build.value(agg.index)]} AS {build.value(agg.index)}")
        for name, expr in agg.inner_args:
            named[name] = _sql(total(expr))
            projections.append(f"{named[name]} AS {name}")
    units = plan.units
    if by_id:
        assert bound.unit is not None
        projections.append(f"{_sql(total(bound.unit))} AS {build.UNIT}")
        # The hash of the whole row: of the private table's row and of every joined row.
        if not _clips(plan):
            projections.append(f"HASH({', '.join(bound.hashed)}) AS {build.ROW_HASH}")
    elif any(prep.needs_unit for prep in plan.prepared):
        projections.append(f"HASH({BASE}) AS {build.UNIT}")
    if not projections:  # DP_COUNT(*) alone: the rows are all that is needed
        projections.append(f"TRUE AS {build.ROW}")
    src = rows = f"SELECT {', '.join(projections)} FROM {bound.from_sql}{_where(plan)}"
    if by_id and not bound.per_unit:  # a per-unit subquery already holds one row per unit
        assert units is not None
        src = (perunit.source(src, keys, build.UNIT, perunit.aggregates(plan.prepared, build.value), units)
               .sql(dialect="duckdb") if _clips(plan) else truncate(src, units, keys))
    return src, named, rows


def _clips(plan: Plan) -> bool:
    """Whether an id unit is bounded by pre-aggregation (:mod:`dpsql.sql.perunit`)."""
    return plan.units is not None and plan.units.mode == perunit.CLIP and not plan.bound.per_unit


def _where(plan: Plan) -> str:
    """`` WHERE <every condition, made total>``, or nothing."""
    where = plan.bound.where
    return " WHERE " + " AND ".join(_sql(total(w)) for w in where) if where else ""


def _counts(plan: Plan, out: Rewritten, by_id: bool) -> list[_Count]:
    """The columns of ``__stats``: every mechanism's statistics (recorded in ``out.columns``),
    the count a key's selection reads (units for an id unit, else rows), or a row count when
    there is nothing else."""
    counts: list[_Count] = []
    for prep in plan.prepared:
        i = prep.agg.index
        v = exp.column(build.value(i)) if prep.agg.arg is not None else None
        for name, expr in (perunit.sums(i, prep.stats(v)) if _clips(plan) else prep.stats(v)).items():
            col = build.stat(i, name)
            out.columns[(i, name)] = col
            counts.append((col, _sql(expr), expr))
    if plan.selection is not None:
        # What a key's count counts is what is protected: units for an id unit, else rows.
        units = plan.units
        out.key_selection_column = build.KEY_COUNT
        if _clips(plan):  # one row per unit in each group
            counts.append((build.KEY_COUNT, "COUNT(*)", None))
        elif by_id and units is not None and units.by_groups:  # the first row of each unit in the group
            counts.append((build.KEY_COUNT, f"COUNT(*) FILTER (WHERE {build.ROW_IN_GROUP} = 1)", None))
        elif by_id:
            counts.append((build.KEY_COUNT, f"COUNT(DISTINCT {build.UNIT})", None))
        else:
            counts.append((build.KEY_COUNT, "COUNT(*)", exp.Count(this=exp.Star())))
    if not counts:  # nothing but keys: still count rows so the query is valid
        counts.append((build.ROWS, "COUNT(*)", exp.Count(this=exp.Star())))
    return counts


def _grouped(keys: list[str], counts: list[_Count], from_histogram: bool) -> tuple[list[str], str]:
    """The select list of ``__stats`` and its grouped SELECT: over ``__src``, or over the shared
    histogram (each count a sum of its buckets, :func:`_counted`)."""
    if from_histogram:
        stats = [*keys, *(f"{_counted(expr)} AS {col}" for col, _, expr in counts)]
        grouped = f"SELECT {', '.join(stats)} FROM {build.HIST}"
    else:
        stats = [*keys, *(f"{sql} AS {col}" for col, sql, _ in counts)]
        grouped = f"SELECT {', '.join(stats)} FROM {SRC}"
    if keys:
        grouped += f" GROUP BY {', '.join(keys)}"
    return stats, grouped


def _subqueries(plan: Plan, keys: list[str], shared: tuple[Prepared, build.Values] | None,
                ctes: list[str], out: Rewritten) -> list[tuple[str, list[str]]]:
    """Every mechanism's per-group subquery, appended to ``ctes`` (the one of the shared
    histogram reads it); their columns are recorded in ``out.columns``. Returns each
    subquery's alias and the columns it adds besides the keys."""
    subqueries: list[tuple[str, list[str]]] = []
    for prep in plan.prepared:
        i = prep.agg.index
        q: exp.Select | None
        if shared is not None and shared[0] is prep:
            q = prep.order_subquery(replace(shared[1], histogram=build.HIST))
        else:
            q = prep.subquery(SRC, keys, build.value(i))
        if q is not None:
            subqueries.append((build.subquery(i), [c for c in q.named_selects if c not in keys]))
            ctes.append(f"{build.subquery(i)} AS ({_sql(q)})")
            for col in subqueries[-1][1]:
                out.columns[(i, col)] = col
    return subqueries


def _single_select(plan: Plan, src: str, stats: list[str], counts: list[_Count],
                   named: dict[str, str] | None) -> str:
    """The statement when nothing is joined to the statistics: the aggregates over the table
    itself when :func:`_inlined` can put the values' expressions into them (``named`` None: it
    may not), else over ``__src`` as a derived table."""
    inlined = None if named is None else _inlined(counts, named)
    if inlined is not None:
        return f"SELECT {', '.join(inlined)} FROM {plan.bound.from_sql}{_where(plan)}"
    return f"SELECT {', '.join(stats)} FROM ({src}) AS {SRC}"


def _joined(plan: Plan, keys: list[str], subqueries: list[tuple[str, list[str]]], target: Target,
            out: Rewritten) -> tuple[list[str], str]:
    """The final select list and FROM: ``__stats`` (or the public key domain left-joined to it,
    handed over in ``out.tables`` or written in as ``VALUES``), and every subquery joined on
    the keys (or, ungrouped, cross-joined)."""
    if plan.public_keys is not None:
        domain = plan.public_keys
        if target.reads_data:
            source = build.typed_keys(domain.types, DOMAIN)
            out.tables[DOMAIN] = domain
        else:
            source = f"(VALUES {build.value_rows(domain.rows)}) AS {KEYS}({', '.join(keys)})"
        select = [f"{KEYS}.{k}" for k in keys] + [f"{STATS}.* EXCLUDE ({', '.join(keys)})"]
        from_ = f"{source} LEFT JOIN {STATS} ON {build.same_keys(KEYS, STATS, keys)}"
        base = KEYS
    else:
        select, from_, base = ["*"], STATS, STATS
    if plan.dropped is not None:
        select = [f"{STATS}.*" if c == "*" else c for c in select]
        select += [f"{perunit.CUT}.{perunit.UNITS_N}", f"{perunit.CUT}.{perunit.CUT_N}"]
        from_ += f" CROSS JOIN {perunit.CUT}"
    for alias, cols in subqueries:
        select += [f"{alias}.{c}" for c in cols]
        if keys:
            from_ += f" LEFT JOIN {alias} ON {build.same_keys(base, alias, keys)}"
        else:
            from_ += f" CROSS JOIN {alias}"
    return select, from_
