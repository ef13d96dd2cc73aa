"""The compilers: a typed statement (:mod:`dpsql._compile.plan`) to one sqlglot tree, per engine.

:class:`Compiler` writes DuckDB's form, the reference the rewrite fixtures pin down; an engine
whose SQL differs subclasses it and overrides only the forms that differ (ibis's
``SQLGlotCompiler`` subclasses are the model), and is registered under its target's name
(:func:`register`; :func:`compiler` finds it). The shape, for DuckDB::

    WITH __src AS (<source rows>),                    -- dpsql._compile.source (+ truncate or preaggregate)
         __hist AS (<histogram>),                     -- dpsql._compile.histogram, when shared
         __stats AS (SELECT keys, stats FROM __src GROUP BY keys),
         __cut AS (<units over the bound>),           -- dpsql._compile.preaggregate, report_dropped
         __sq<i> AS (<a mechanism's subquery>)
    SELECT ... FROM <__keys LEFT JOIN> __stats ...   -- dpsql._compile.keyjoin (+ domain)

and, with nothing joined to the statistics, one SELECT over the rows (derived table), or over
the FROM chain itself with the values' expressions in the aggregates (dpsql._compile.inline):
DuckDB runs the same plan and plans it faster (0.06 ms, then 0.1 ms less per query).

Each rule's constant part is built from node classes, not parsed; the tree is serialised once
per statement (:meth:`Compiler.sql`).
"""

from __future__ import annotations

import typing as t
from dataclasses import replace

from sqlglot import exp

from dpsql._compile import domain, histogram, inline, keyjoin, perunit, preaggregate, source, truncate
from dpsql._compile.nodes import PRINTED, Shared, alias, col, fn, name, select, subquery, table, verbatim
from dpsql._compile.plan import Clipped, KeyDomain, PreAggregation, Relation, Statement, Subquery, Truncation
from dpsql._sql import build

if t.TYPE_CHECKING:
    from dpsql._compile.target import Target

_BIGINT = exp.DataType(this=exp.DataType.Type.BIGINT)


class Compiled(t.NamedTuple):
    """A compiled statement: its tree, and the node of the key domain handed over as data
    (``__domain``, which :meth:`Compiler.standalone` writes in as ``VALUES``), if any."""

    tree: exp.Expression
    domain_table: exp.Table | None = None


class Compiler:
    """DuckDB's statement (see the module's docstring)."""

    #: the sqlglot dialect the tree is printed in
    dialect: t.Any = "duckdb"
    #: whether an ungrouped statement with nothing joined may be one SELECT over the rows
    single_select = True

    def __init__(self, target: "Target") -> None:
        self.target = target

    # -- the statement ------------------------------------------------------------------------

    def compile(self, st: Statement) -> Compiled:
        """The tree of ``st`` (``st`` built with ``target.shared_histogram``)."""
        st = self.summed(st)
        values = source.named(st.source, self)
        if self.single_select and self.target.single_select \
                and not (st.keys or st.subqueries or st.histogram or st.domain is not None or st.dropped):
            return Compiled(self.finish(self.single(st, values)))
        rows = source.source(st.source, self, values)
        ctes = self.hoisted(rows)
        ctes.append(self.cte(build.SRC, rows, materialized=None if st.histogram is None or not st.histogram.separate
                             else False))
        if st.histogram is not None:
            ctes.append(self.cte(build.HIST, histogram.histogram(st.histogram.values)))
        ctes.append(self.cte(build.STATS, self.grouped(st)))
        if st.dropped is not None:  # report_dropped: one row of counts, joined to every group
            ctes.append(self.cte(perunit.CUT, preaggregate.dropped(source.unbounded(st.source, self, values),
                                                                  st.dropped)))
        ctes += [self.cte(sq.alias, self.mechanism(sq)) for sq in st.subqueries]
        keys, domain_table = self.key_source(st.domain, st.keys)
        top = self.final(st, keys)
        if st.dropped is not None:
            top = preaggregate.report(top)
        top.set("with_", exp.With(expressions=ctes))
        return Compiled(self.finish(top), domain_table)

    def summed(self, st: Statement) -> Statement:
        """``st`` with each exact sum of a signed integer column's clip written ``SUM(v)``: the
        plan marks an exact sum of integers ``SUM(CAST(v AS BIGINT))`` (Spark's form sums it as
        a DECIMAL(38, 0)), and DuckDB sums every signed integer type exactly into a HUGEINT,
        where the cast cost 6% of a SUM over 10M rows. Only for a column read as it is, of a
        catalog type whose clip by whole bounds stays that signed type or a BIGINT
        (:func:`_integer_column`)."""
        whole = {v.name for v in st.source.values if _integer_column(v)}
        if not whole:
            return st
        stats = tuple(replace(s, expr=exp.Sum(this=s.expr.this.this.copy()))
                      if isinstance(s.expr, exp.Sum) and isinstance(s.expr.this, exp.Cast)
                      and s.expr.this.to.this == exp.DataType.Type.BIGINT
                      and isinstance(s.expr.this.this, exp.Column) and not s.expr.this.this.table
                      and s.expr.this.this.name in whole else s for s in st.stats)
        return replace(st, stats=stats)

    def single(self, st: Statement, values: dict[str, exp.Expression]) -> exp.Select:
        """The ungrouped statement with nothing joined: over the FROM chain with the values
        inlined (:mod:`dpsql._compile.inline`; not for an id unit, whose rows are truncated),
        else over ``__src`` as a derived table."""
        if st.source.unit is None:
            inlined = inline.inlined(st.stats, values)
            if inlined is not None:
                return source.rows_only(st.source, self, inlined)
        stats = [alias(s.expr, s.column) for s in st.stats]
        return select(stats, subquery(source.source(st.source, self, values), build.SRC))

    def grouped(self, st: Statement) -> exp.Select:
        """``__stats``: the keys and every statistic per group, over ``__src`` or read from the
        shared histogram (:func:`dpsql._compile.histogram.counted`)."""
        keys = [col(k) for k in st.keys]
        if st.histogram is not None:
            stats = [alias(histogram.counted(s.expr), s.column) for s in st.stats]
            return select([*keys, *stats], table(build.HIST), group=st.keys)
        return select([*keys, *(alias(s.expr, s.column) for s in st.stats)], table(build.SRC), group=st.keys)

    def final(self, st: Statement, keys: exp.Expression | None) -> exp.Select:
        """The final SELECT (:mod:`dpsql._compile.keyjoin`)."""
        return keyjoin.key_join(st.keys, st.subqueries, keys)

    def hoisted(self, rows: exp.Select) -> list[exp.CTE]:
        """The CTEs a rule wrote in ``rows`` (re-weighting's, :mod:`dpsql._compile.reweight`),
        taken out of it to stand before ``__src`` in the statement's own WITH."""
        with_ = rows.args.get("with_")
        if with_ is None:
            return []
        rows.set("with_", None)
        return [self.cte(c.alias, c.this, c.args.get("materialized")) for c in with_.expressions]

    def cte(self, alias_: str, body: exp.Expression, materialized: bool | None = None) -> exp.CTE:
        node = exp.CTE(this=body, alias=exp.TableAlias(this=name(alias_)))
        if materialized is not None:
            node.set("materialized", materialized)
        return node

    # -- the forms an engine may write otherwise ----------------------------------------------

    def relation(self, rel: Relation) -> tuple[exp.Expression, list[exp.Join]]:
        """The FROM chain and its joins: DuckDB's text as the binder wrote it."""
        return verbatim(rel.text), []

    def integer(self, x: exp.Expression) -> exp.Expression:
        """A DOUBLE in BIGINT's range rounded to the nearest integer (ties to even) as a
        BIGINT: DuckDB's CAST rounds so (:mod:`dpsql.mechanisms.fixed`)."""
        return exp.Cast(this=x, to=_BIGINT.copy())

    def once(self, x: exp.Expression) -> exp.Expression:
        """An operand a clip writes three times (``CASE WHEN x < L THEN L WHEN x > U THEN U
        ELSE x END``), as a node the statement's one print prints once
        (:class:`dpsql._compile.nodes.Shared`): the same text, without printing the operand
        thrice. Nothing after this compiler's own rules reads inside it (DuckDB's
        :meth:`finish` changes nothing). An engine printed in another dialect gets the tree."""
        return Shared.of(x) if self.dialect == "duckdb" else x

    def row_hash(self, aliases: t.Sequence[str]) -> exp.Expression:
        """The hash of the whole rows of the FROM items ``aliases``: ``HASH(__t, ...)``."""
        return fn("HASH", *(col(a) for a in aliases))

    def log2(self, x: exp.Expression) -> exp.Expression:
        """log2 of ``x`` as the engine computes it (the bounds search corrects its rounding)."""
        return fn("LOG2", x)

    def truncated(self, rows: exp.Select, cut: Truncation) -> exp.Select:
        """:func:`dpsql._compile.truncate.truncate` (QUALIFY)."""
        return truncate.truncate(rows, cut)

    def preaggregated(self, rows: exp.Select, pre: PreAggregation) -> exp.Select:
        """:func:`dpsql._compile.preaggregate.preaggregate` (QUALIFY)."""
        return preaggregate.preaggregate(rows, pre)

    def key_source(self, keys: KeyDomain | None, names: t.Sequence[str]) -> tuple[exp.Expression | None, exp.Table | None]:
        """``__keys`` (or None without a public domain) and the node that reads the domain
        handed over as data: the typed texts of ``__domain`` (:mod:`dpsql._compile.domain`)."""
        if keys is None:
            return None, None
        typed = domain.typed_keys(keys.types)
        return typed, typed.this.args["from_"].this

    def finish(self, tree: exp.Expression) -> exp.Expression:
        """The whole tree, once built (an engine may rewrite forms throughout it)."""
        return tree

    def mechanism(self, sq: Subquery) -> exp.Expression:
        """A mechanism's subquery as it is, its own query (``FROM (query) AS __q``,
        :func:`dpsql.mechanisms.base.raw_select`) printed once per tree: a mechanism keeps the
        trees it built and hands the same (never changed) tree to every plan that asks for the
        same subquery, so its text is kept with it (printing a window of order statistics is
        most of the time of planning a quantile)."""
        source = sq.select.args.get("from_")
        inner = source.this if source is not None else None
        if not (isinstance(inner, exp.Subquery) and inner.alias == build.RAW):
            return sq.select
        key = f"sql.{self.dialect}"
        text = inner.this.meta.get(key)
        if text is None:
            text = inner.this.meta[key] = inner.this.sql(dialect=self.dialect)
        out = exp.Select(expressions=[e.copy() for e in sq.select.expressions])
        out.set("from_", exp.From(this=exp.Table(this=verbatim(f"({text})"), alias=exp.TableAlias(this=name(build.RAW)))))
        return out

    # -- text -------------------------------------------------------------------------------------

    def sql(self, tree: exp.Expression) -> str:
        """The statement's text (the one serialisation of the tree). The tree is the compiler's
        own, built for this statement: sqlglot need not copy it first (most of the time of
        printing it)."""
        return tree.sql(dialect=PRINTED if self.dialect == "duckdb" else self.dialect, copy=False)

    def standalone(self, compiled: Compiled, keys: KeyDomain) -> str:
        """The statement with the domain handed over as data written in as ``VALUES`` (on a
        copy of the tree: a prepared statement may be shared by threads)."""
        assert compiled.domain_table is not None
        return self.sql(self.inlined(Compiled(compiled.tree.copy(), compiled.domain_table), keys).tree)

    def inlined(self, compiled: Compiled, keys: KeyDomain) -> Compiled:
        """``compiled`` with its domain written in as ``VALUES``, in place (a tree not yet
        shared), and no table to hand over."""
        assert compiled.domain_table is not None
        name_ = compiled.domain_table.name
        node = compiled.domain_table if compiled.domain_table.parent is not None and \
            compiled.domain_table.root() is compiled.tree else \
            next(n for n in compiled.tree.find_all(exp.Table) if n.name == name_)
        node.replace(domain.values(zip(*keys.texts), len(keys.types), name_))
        return Compiled(compiled.tree)


#: signed integer types: DuckDB's clip of one by whole bounds (below 2^62) is a signed integer
#: type of at most 64 bits, whose SUM is an exact HUGEINT
_SIGNED = frozenset({"TINYINT", "SMALLINT", "INTEGER", "BIGINT"})


def _integer_column(v: t.Any) -> bool:
    """Whether a value column is a signed integer column, read as it is, clipped by whole bounds."""
    return isinstance(v, Clipped) and isinstance(v.arg, exp.Column) and (v.dtype or "").upper() in _SIGNED \
        and float(v.lower).is_integer() and float(v.upper).is_integer() and max(abs(v.lower), abs(v.upper)) <= 2.0**62


#: compiler classes by target name (:func:`register`)
COMPILERS: dict[str, type[Compiler]] = {"duckdb": Compiler}


def register(target_name: str) -> t.Callable[[type[Compiler]], type[Compiler]]:
    """Class decorator: the compiler of the target named ``target_name``."""

    def add(cls: type[Compiler]) -> type[Compiler]:
        COMPILERS[target_name] = cls
        return cls

    return add


def compiler(target: "Target") -> Compiler:
    """The compiler of ``target`` (by its name; its flags are read from it)."""
    return COMPILERS.get(target.name, Compiler)(target)

