"""Spark's compiler: DuckDB's (:class:`dpsql._compile.compiler.Compiler`) with the forms that
differ on Spark, built from the plan, never from DuckDB's text of the statement.

Overridden here: the FROM chain (the private table by its Spark name; the binder's joins are
read from its text once), fixed-point integers (``CAST(RINT(x) AS BIGINT)``: Spark's CAST
truncates), truncation and pre-aggregation (no QUALIFY: :func:`dpsql._compile.target_joins.qualify`),
the public key domain (``VALUES`` of literals with a broadcast of ``__stats``: :meth:`SparkCompiler.key_source`),
no shared histogram and no single SELECT, ``COUNT(v)`` read from a value histogram a
mechanism returns (:meth:`SparkCompiler.from_histograms`), and the order statistics with one
bucket per value (:meth:`SparkCompiler.value_histogram`). Every node form of
:mod:`dpsql._compile.target` (``TRY``, ``HASH``, exact sums, ordered lists, ...) is then applied to
the whole tree (:meth:`SparkCompiler.finish`).

A mechanism's subquery is a tree too (:func:`dpsql.mechanisms.base.raw_select`, built from
templates parsed once per process): it is taken as it is, never parsed from text.
"""

from __future__ import annotations

import functools
import re
import typing as t

import sqlglot
from sqlglot import exp

from dpsql._compile import preaggregate as preaggregate_rule
from dpsql._compile import target_joins as joins
from dpsql._compile.compiler import Compiled, Compiler, register
from dpsql._compile.domain import values as value_list
from dpsql._compile.keyjoin import key_join
from dpsql._compile.nodes import alias, col, fn, name, table
from dpsql._compile.plan import KeyDomain, PreAggregation, Relation, Statement, Subquery, Truncation
from dpsql._compile.target import SPARK, SparkSQL
from dpsql._compile.truncate import truncate
from dpsql._sql import build

_BIGINT = exp.DataType(this=exp.DataType.Type.BIGINT)
#: a number written alike in DuckDB and Spark SQL
_PLAIN_NUMBER = re.compile(r"-?\d+(\.\d+)?")


def _plain(value: t.Any) -> bool:
    """Whether a key is written alike by :func:`dpsql._sql.build.literal` in both dialects."""
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, (int, float)):
        return _PLAIN_NUMBER.fullmatch(repr(value)) is not None
    return isinstance(value, str) and "'" not in value and "\\" not in value


@functools.cache
def _histogram_count() -> exp.Expression:
    """The sum of the counts ``c`` of a list ``[{v, c}]`` (0 for an empty or NULL list)."""
    return t.cast(exp.Expression, sqlglot.parse_one(
        "COALESCE(AGGREGATE(__sq.__col, CAST(0 AS BIGINT), (__a, __e) -> __a + __e.c), 0)", read="duckdb"))


@register("spark")
class SparkCompiler(Compiler):
    """Spark SQL (checked on Spark 4.x): see the module's docstring."""

    dialect = SparkSQL
    single_select = False

    def compile(self, st: Statement) -> Compiled:
        counted = self.from_histograms(st)
        return Compiled(counted) if counted is not None else super().compile(st)

    def cte(self, alias_: str, body: exp.Expression, materialized: bool | None = None) -> exp.CTE:
        """A CTE without DuckDB's MATERIALIZED (Spark's grammar has none)."""
        return super().cte(alias_, body)

    def relation(self, rel: Relation) -> tuple[exp.Expression, list[exp.Join]]:
        """The private relation as ``__t``; copies of the binder's joins and flat maps (trees:
        no text is parsed)."""
        node = rel.table.copy()
        node.set("alias", exp.TableAlias(this=name(build.BASE)))
        return node, [j.copy() for j in rel.joins]

    def integer(self, x: exp.Expression) -> exp.Expression:
        """``CAST(RINT(x) AS BIGINT)``: ``RINT`` (Java's Math.rint, ties to even) rounds as
        DuckDB's CAST does; Spark's CAST truncates."""
        return exp.Cast(this=fn("RINT", x), to=_BIGINT.copy())

    def summed(self, st: Statement) -> Statement:
        """``st`` as it is: Spark's SUM of an integer is a BIGINT that can overflow, and the
        plan's ``SUM(CAST(v AS BIGINT))`` is what its exact DECIMAL(38, 0) form rewrites."""
        return st

    def once(self, x: exp.Expression) -> exp.Expression:
        """The operand as a tree: Spark's :meth:`finish` rewrites forms throughout the tree."""
        return x

    def log2(self, x: exp.Expression) -> exp.Expression:
        """``LOG(2, x)``: ln x / ln 2, as the bounds search has always read it on Spark."""
        return exp.Log(this=exp.Literal.number(2), expression=x)

    def truncated(self, rows: exp.Select, cut: Truncation) -> exp.Select:
        """The truncation without QUALIFY (Spark's refuses the ``alias.*`` of a row hash)."""
        return joins.qualify(truncate(rows, cut))

    def preaggregated(self, rows: exp.Select, pre: PreAggregation) -> exp.Select:
        """The pre-aggregation, its groups-per-unit window without QUALIFY, re-weighting's CTEs
        without MATERIALIZED."""
        out = preaggregate_rule.preaggregate(rows, pre)
        for cte in (out.args["with_"].expressions if out.args.get("with_") is not None else []):
            cte.set("materialized", None)
        return joins.qualify(out) if out.args.get("qualify") is not None else out

    def key_source(self, keys: KeyDomain | None, names: t.Sequence[str]) -> tuple[exp.Expression | None, exp.Table | None]:
        """``(VALUES literals) AS __keys(__k0, ...)``: rows of plain literals written as text
        once (thousands of keys as a node each made most of the time of writing the statement),
        any other literal by sqlglot's Spark generator."""
        if keys is None:
            return None, None
        if all(_plain(v) for row in keys.rows for v in row):
            return value_list(keys.rows, len(names), build.KEYS), None
        rows = [exp.Tuple(expressions=[exp.convert(v) for v in row]) for row in keys.rows]
        return exp.Values(expressions=rows, alias=exp.TableAlias(this=name(build.KEYS),
                                                                 columns=[name(k) for k in names])), None

    def final(self, st: Statement, keys: exp.Expression | None) -> exp.Select:
        """With a key domain, ``BROADCAST(__stats)``: the aggregate holds a row per group and is
        the right side of a left outer join, which Spark may then broadcast (no shuffle of both
        sides: about a fifth of the statement's time on local[2]). A hint changes the plan only."""
        top = super().final(st, keys)
        if keys is not None:
            top.set("hint", exp.Hint(expressions=[fn("BROADCAST", col(build.STATS))]))
        return top

    def mechanism(self, sq: Subquery) -> exp.Expression:
        """The subquery (a tree: no text is parsed), its order statistics one bucket per value."""
        select = sq.select.copy()
        for with_ in list(select.find_all(exp.With)):
            self.value_histogram(with_)
        return select

    def finish(self, tree: exp.Expression) -> exp.Expression:
        return SPARK.tree(tree)

    def sql(self, tree: exp.Expression) -> str:
        return tree.sql(dialect=SparkSQL, copy=False)

    # -- Spark's own forms ------------------------------------------------------------------------

    def from_histograms(self, st: Statement) -> exp.Expression | None:
        """An ungrouped statement whose statistics are only ``COUNT(v)`` of values whose value
        histogram a subquery returns as a list (:meth:`dpsql.mechanisms.base.Prepared.value_counts`):
        each count is the sum of that list's counts (0 for no rows, as COUNT) and ``__stats``
        is not run (a whole pass over the rows less). The same columns in the same order:
        the counts, every subquery's columns (``*``), then each subquery's columns. None for
        any other statement."""
        lists = {sq.value: sq for sq in st.subqueries if sq.value_counts is not None}
        if st.keys or st.domain is not None or st.dropped is not None or not st.subqueries or not lists:
            return None
        counts: list[exp.Expression] = []
        for s in st.stats:
            arg = s.expr.this if isinstance(s.expr, exp.Count) and s.plain else None
            if not (isinstance(arg, exp.Column) and not arg.table and arg.name in lists):
                return None
            sq = lists[arg.name]
            total = _histogram_count().copy()
            t.cast(exp.Column, total.find(exp.Column)).replace(col(t.cast(str, sq.value_counts), sq.alias))
            counts.append(alias(total, s.column))
        body = self.rows(st)
        hoisted = self.hoisted(body)  # a rule's own CTEs (re-weighting's), before __src
        rows = self.cte(build.SRC, body)
        every = [exp.Column(this=exp.Star(), table=name(sq.alias)) for sq in st.subqueries]
        top = key_join((), st.subqueries, None)
        top.set("expressions", [*counts, *every, *top.expressions[1:]])
        top.set("from_", exp.From(this=table(st.subqueries[0].alias)))
        top.set("joins", top.args["joins"][1:] or None)
        ctes = [*hoisted, rows, *(self.cte(sq.alias, self.mechanism(sq)) for sq in st.subqueries)]
        top.set("with_", exp.With(expressions=ctes))
        return self.finish(top)

    def rows(self, st: Statement) -> exp.Select:
        from dpsql._compile import source

        return source.source(st.source, self)

    def value_histogram(self, with_: exp.With) -> None:
        """The order-statistics CTEs of :func:`dpsql._sql.build.order_statistics` with one bucket
        per distinct value: one aggregate and one window over the rows, where the bucketed form
        (a histogram, then a second pass over the values of the buckets that meet the window)
        makes Spark scan and re-plan the histogram several times.

        ``_h`` groups by the value itself (``__b`` = ``__lo`` = ``__hi`` = the value), so every
        bucket that meets the window holds one value and ``_pts`` is the single-value branch of
        the bucketed form; ``_multi``, ``_vals0`` and ``_vals`` go. The distinct values in
        ``_pts``, with their counts and ranks, are the same for any bucketing (the contract of
        ``order_statistics``), so the statistics equal DuckDB's. A WITH of another shape is left
        as it is.
        """
        ctes = {c.alias: c for c in with_.expressions}
        heads = [a[:-len("_pts")] for a in ctes if a.startswith("__") and a.endswith("_pts")]
        for head in heads:
            parts = {p: ctes.get(f"{head}_{p}") for p in ("h", "hist", "need", "multi", "vals0", "vals", "pts")}
            if any(c is None for c in parts.values()):
                continue
            self._one_bucket_per_value(t.cast(dict[str, exp.CTE], parts))

    @staticmethod
    def _one_bucket_per_value(parts: dict[str, exp.CTE]) -> None:
        h, pts = parts["h"].this, parts["pts"].this
        low = next((e for e in h.expressions if e.alias == "__lo"), None)
        bucket = next((e for e in h.expressions if e.alias == "__b"), None)
        source = pts.args.get("from_") if isinstance(pts, exp.Select) else None
        inner = source.this.this if source is not None else None
        if not (isinstance(h, exp.Select) and isinstance(low, exp.Alias) and isinstance(low.this, exp.Min)
                and isinstance(bucket, exp.Alias) and isinstance(inner, exp.Union)
                and isinstance(inner.this, exp.Select)):
            return
        value = low.this.this
        bucket.set("this", value.copy())
        for end in ("__lo", "__hi"):
            e = next(e for e in h.expressions if e.alias == end)
            e.set("this", value.copy())
        single = inner.this.copy()
        single.set("where", None)  # __lo = __hi in every bucket now
        assert source is not None
        source.this.set("this", single)
        for gone in ("multi", "vals0", "vals"):
            parts[gone].pop()
