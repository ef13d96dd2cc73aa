"""SQL targets: the engine a statistics statement is written for.

The statistics statement is compiled for each target from its typed plan
(:mod:`dpsql._compile`: the DuckDB compiler writes the reference form the rewrite fixtures pin
down, the Spark compiler overrides the forms that differ). A target names the engine, its
flags, its gate, and the node forms below, which the Spark compiler applies to the tree it
builds and :meth:`SparkTarget.finish` to DuckDB SQL that dpsql did not compile (a public
query). Each form is written here on purpose, not left to a generic transpile (a generic transpile drops ``TRY``, loses the order of ``LIST(... ORDER
BY ...)``, keeps the sign of a signed hash in ``% k``, ...):

==================================  =================================================================
DuckDB form                          Spark form
==================================  =================================================================
``TRY(expr)`` (total expressions)    ``try_add``/``try_subtract``/``try_multiply``/``try_divide``/
                                     ``try_mod`` for the arithmetic inside, ``TRY_CAST`` for casts;
                                     the engine also runs every statement with
                                     ``spark.sql.ansi.enabled = false`` (see :mod:`dpsql.backends.spark`)
``HASH(__t)`` (whole row)            ``XXHASH64(__t.*)``
``HASH(a, ...)``                     ``XXHASH64(a, ...)`` (a signed 64-bit hash: only its order is used)
``HASH(a) % k`` (chunks)             ``PMOD(XXHASH64(a), k)``: never negative, so no chunk is lost
``HUGEINT`` / ``INT128``             ``DECIMAL(38, 0)``
``SUM(CAST(x AS BIGINT))`` (an exact  ``SUM(CAST(x AS DECIMAL(38, 0)))``: Spark's SUM of a BIGINT is a
sum of integers: HUGEINT)            BIGINT that can overflow (:meth:`SparkTarget.exact_sum`)
``CAST(x AS BIGINT)`` of a DOUBLE    ``CAST(RINT(x) AS BIGINT)``: Spark's CAST truncates; written so
(rounds, ties to even)               by the compiler (``integer``), for fixed-point values
``LIST(x ORDER BY y)``               ``TRANSFORM(ARRAY_SORT(COLLECT_LIST(STRUCT(y, x))), e -> e.x)``,
                                     or ``ARRAY_SORT(COLLECT_LIST(STRUCT(...)))`` when ``x`` is a
                                     struct whose first field is ``y``
``QUANTILE_CONT(x, p)``,             ``PERCENTILE_CONT(p) WITHIN GROUP (ORDER BY x)``
``MEDIAN(x)``
``range(k)`` (a table of 0..k−1)     ``(SELECT id AS range FROM range(k))``
order statistics: 4,096 buckets,     one bucket per distinct value (one aggregate and one window;
then the values of those that meet   Spark plans the second pass badly):
the window, in a second pass         :meth:`dpsql._compile.spark.SparkCompiler.value_histogram`
a public key domain: the table       ``(VALUES literals) AS __keys`` (``reads_data = False``: the
``__domain`` handed over as data,    compiler writes it so), with ``/*+ BROADCAST(__stats) */`` on the
its texts cast to the group types    outer join: :meth:`dpsql._compile.spark.SparkCompiler.key_source`
``__stats`` = ``COUNT(v)`` only,     each count read from the value histogram that the exponential
without GROUP BY                     mechanism returns as a list, and ``__stats`` not run:
                                     :meth:`dpsql._compile.spark.SparkCompiler.from_histograms`
``__hist``: one histogram for the    not generated (``shared_histogram = False``): the plan gives
statement, ``__stats`` read from it  Spark the statement whose subquery builds its own histogram
``"db"."main"."t"``                  ``t`` (schema ``main`` is the session's current database and
                                     its temporary views); ``"db"."s"."t"`` is ``s.t``
``QUALIFY``, ``UNNEST``, list        :mod:`dpsql._compile.target_joins` (truncation, joins, flat maps)
slices, splits, ``SEMI``/``ANTI``
==================================  =================================================================

Everything else (``GROUP BY ALL``, ``* EXCLUDE``, ``FILTER (WHERE ...)``, ``IS NOT
DISTINCT FROM``, struct literals) is syntax with one meaning on both engines and is printed by
sqlglot's Spark generator, with its hoisting of nested ``WITH`` clauses turned off (the
mechanisms' subqueries reuse CTE names, which Spark allows in nested scopes only).
``tests/test_spark.py`` runs every query shape on both engines and compares the statistics.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.dialects.spark import Spark

from dpsql._compile import target_joins as joins
from dpsql._sql import spark_gate, totalforms


class Target:
    """The DuckDB target: the reference SQL, unchanged."""

    name = "duckdb"
    #: the sqlglot dialect of the statements this target produces
    dialect = "duckdb"
    #: whether ``__stats`` may be read from an order-statistics histogram built once at the top
    #: of the statement (``dpsql._plan.rewrite``): on DuckDB a GROUP BY of the rows less
    shared_histogram = True
    #: whether the statement may read relations handed to the engine as data rather than as SQL
    #: text (a public key domain, ``dpsql._plan.keys``); else they are written in the statement
    reads_data = True
    #: whether an ungrouped statement with nothing joined may be one SELECT over the rows (DuckDB
    #: plans it faster than the CTEs; ``dpsql._compile.compiler``)
    single_select = True
    #: whether the range checks of :mod:`dpsql._sql.totalforms` are typed by DuckDB's binder
    #: (:mod:`dpsql._sql.leaftypes`): Spark's statement takes the checks back out, so its planning
    #: opens no DuckDB for them
    typed_checks = True

    def finish(self, sql: str) -> str:
        """The statement ``sql`` (DuckDB SQL generated by dpsql) as this target runs it."""
        return sql

    def check_query(self, query: exp.Expression) -> None:
        """Refuse what the query (already accepted by the binder) may not use on this engine."""

    def pretty(self, sql: str) -> str:
        """A statement of this target, indented for EXPLAIN."""
        return sqlglot.transpile(sql, read="duckdb", write="duckdb", pretty=True)[0]


class SparkSQL(Spark):
    """sqlglot's Spark dialect, without hoisting nested CTEs to the top level."""

    class Generator(Spark.Generator):
        EXPRESSIONS_WITHOUT_NESTED_CTES: set = set()


_TRY_ARITHMETIC = {
    exp.Add: "TRY_ADD", exp.Sub: "TRY_SUBTRACT", exp.Mul: "TRY_MULTIPLY", exp.Div: "TRY_DIVIDE",
    exp.Mod: "TRY_MOD",
}
_WIDE = (exp.DataType.Type.INT128, exp.DataType.Type.UINT128)
#: Spark's type of an exact sum of integers (built once: the builder parses its text)
_DECIMAL_38 = exp.DataType.build("DECIMAL(38, 0)")


def _fn(name: str, *args: exp.Expression) -> exp.Anonymous:
    return exp.Anonymous(this=name, expressions=list(args))


def _is_hash(node: exp.Expression) -> bool:
    return isinstance(node, exp.Anonymous) and node.name.upper() == "HASH"


class SparkTarget(Target):
    """Spark SQL (checked on Spark 4.x): the forms of the table in the module's docstring."""

    name = "spark"
    dialect = "spark"
    typed_checks = False
    #: Spark's forms (:meth:`value_histogram`, :meth:`counts_from_histograms`) start from the
    #: statement whose subqueries build their own histograms
    shared_histogram = False
    #: a key domain is a ``VALUES`` list of literals
    reads_data = False
    single_select = False

    def check_query(self, query: exp.Expression) -> None:
        """Only functions that cannot fail on a value on Spark (:mod:`dpsql._sql.spark_gate`)."""
        spark_gate.check(query)

    def finish(self, sql: str) -> str:
        """DuckDB SQL that dpsql did not compile (a public query, a public table's rows the
        binder reads) in Spark SQL. The statistics statement is compiled for Spark from its
        plan instead (:mod:`dpsql._compile.spark`)."""
        return self.tree(sqlglot.parse_one(sql, read="duckdb")).sql(dialect=SparkSQL)

    def tree(self, tree: exp.Expression) -> exp.Expression:
        """``tree`` (DuckDB's forms) with Spark's forms, in place: QUALIFY (innermost first: one
        nested in another one's FROM is rewritten before it is copied), then every node form of
        the module's table."""
        tree = totalforms.unguarded(tree)  # DuckDB's non-raising forms: Spark has its own
        for select in [n for n in tree.walk(bfs=False) if isinstance(n, exp.Select)][::-1]:
            if select.args.get("qualify") is not None:
                new = joins.qualify(select)
                tree = new if select is tree else tree
                select.replace(new)
        return tree.transform(self._form, copy=False)

    def pretty(self, sql: str) -> str:
        return sqlglot.parse_one(sql, read=SparkSQL).sql(dialect=SparkSQL, pretty=True)

    def _form(self, node: exp.Expression) -> exp.Expression:
        return self._any(node, lists=False)

    def _list_form(self, node: exp.Expression) -> exp.Expression:
        """The forms inside the list a flat map unnests: list slices and splits too."""
        return self._any(node, lists=True)

    def _any(self, node: exp.Expression, lists: bool) -> exp.Expression:
        form = self._list_form if lists else self._form
        if lists:
            listed = joins.list_form(node, form, self._form)
            if listed is not None:
                return listed
        if isinstance(node, exp.Try):
            # a replaced node's children are not visited by transform(): convert them here
            return self.total(node.this).transform(form, copy=False)
        if isinstance(node, exp.Join) and isinstance(node.this, exp.Unnest):
            return joins.flat_map(node, self._list_form)
        if isinstance(node, exp.Join) and (node.kind or "").upper() in ("SEMI", "ANTI"):
            return joins.semi(node)
        if isinstance(node, exp.Mod) and _is_hash(node.this):
            return _fn("PMOD", self.row_hash(node.this), node.expression)
        if _is_hash(node):
            return self.row_hash(node)
        if isinstance(node, exp.DataType) and node.this in _WIDE:
            return _DECIMAL_38.copy()
        if isinstance(node, exp.Sum) and isinstance(node.this, exp.Cast) and node.this.to.this == exp.DataType.Type.BIGINT:
            return self.exact_sum(node)
        if isinstance(node, exp.ArrayAgg) and isinstance(node.this, exp.Order):
            return self.ordered_list(node.this)
        if isinstance(node, exp.Filter) and isinstance(node.this, exp.ArrayAgg) \
                and isinstance(node.this.this, exp.Order):
            return self.ordered_list(node.this.this, node.expression)
        if isinstance(node, exp.Median) or (isinstance(node, exp.PercentileCont) and node.expression):
            return self.percentile(node)
        if isinstance(node, exp.Table):
            return self.table(node)
        if isinstance(node, exp.TryCast) and not node.args.get("safe"):
            node.set("safe", True)  # Spark's generator writes TRY_CAST only for a safe one
        return node

    # -- the forms ----------------------------------------------------------------------------

    def exact_sum(self, node: exp.Sum) -> exp.Expression:
        """``SUM(CAST(x AS BIGINT))``, an exact sum of integers (DuckDB sums BIGINT into HUGEINT):
        ``SUM(CAST(x AS DECIMAL(38, 0)))``, since Spark's SUM of a BIGINT is a BIGINT that can
        overflow. Every such sum dpsql writes stays below 2^126 < 10^38
        (:mod:`dpsql.mechanisms.fixed`)."""
        cast = node.this.copy()
        cast.set("to", _DECIMAL_38.copy())
        return exp.Sum(this=cast)

    def total(self, node: exp.Expression) -> exp.Expression:
        """``TRY(x)``: the arithmetic in ``x`` as ``try_*`` functions, casts as ``TRY_CAST``."""

        def one(n: exp.Expression) -> exp.Expression:
            if type(n) in _TRY_ARITHMETIC:
                return _fn(_TRY_ARITHMETIC[type(n)], n.this, n.expression)
            if type(n) is exp.Cast:
                return exp.TryCast(this=n.this, to=n.args["to"], safe=True)
            return n

        # children first: a replaced node keeps the (already converted) children it had
        for n in list(node.walk(bfs=False))[::-1]:
            if n is not node:
                n.replace(one(n))
        return one(node)

    def row_hash(self, node: exp.Anonymous) -> exp.Expression:
        """``HASH(...)``: ``XXHASH64``; the alias of a FROM item (the whole row: ``__t``, a
        joined table ``__j1``, a flat map ``__f1``) becomes ``alias.*``."""
        args = []
        for arg in node.expressions:
            if isinstance(arg, exp.Column) and not arg.table and joins.ROW_ALIAS.match(arg.name):
                args.append(exp.Column(this=exp.Star(), table=exp.to_identifier(arg.name)))
            else:
                args.append(arg)
        return _fn("XXHASH64", *args)

    def ordered_list(self, order: exp.Order, where: exp.Expression | None = None) -> exp.Expression:
        """``LIST(x ORDER BY y, ...) [FILTER (WHERE ...)]``: a list of structs sorted by their
        leading fields (the filter goes on ``COLLECT_LIST``), NULL when it would be empty (as
        DuckDB's LIST of no rows; Spark's COLLECT_LIST gives an empty array)."""
        if any(o.args.get("desc") for o in order.expressions):
            raise NotImplementedError("descending ordered lists have no Spark form yet")
        value, keys = order.this, [o.this for o in order.expressions]
        listed = self._sorted_list(value, keys, where)
        size = _fn("SIZE", self._sorted_list(value, keys, where, sort=False))
        return exp.Case(ifs=[exp.If(this=exp.GT(this=size, expression=exp.Literal.number(0)), true=listed)])

    def _sorted_list(self, value: exp.Expression, keys: list[exp.Expression],
                     where: exp.Expression | None, sort: bool = True) -> exp.Expression:
        """The sorted ``COLLECT_LIST`` of :meth:`ordered_list` (``sort=False``: the collection
        alone, which Spark computes once for both uses)."""
        value, keys = value.copy(), [k.copy() for k in keys]
        where = where.copy() if where is not None else None

        def collect(item: exp.Expression) -> exp.Expression:
            agg = _fn("COLLECT_LIST", item)
            return agg if where is None else exp.Filter(this=agg, expression=where)

        if isinstance(value, exp.Struct) and len(keys) == 1:
            first = value.expressions[0] if value.expressions else None
            first_value = first.expression if isinstance(first, exp.PropertyEQ) else first
            if first_value is not None and first_value == keys[0]:
                return _fn("ARRAY_SORT", collect(value)) if sort else collect(value)
        fields = [exp.PropertyEQ(this=exp.to_identifier(f"__o{j}"), expression=k) for j, k in enumerate(keys)]
        fields.append(exp.PropertyEQ(this=exp.to_identifier("__x"), expression=value))
        if not sort:
            return collect(exp.Struct(expressions=fields))
        pairs = _fn("ARRAY_SORT", collect(exp.Struct(expressions=fields)))
        element = exp.to_identifier("__e")
        pick = exp.Lambda(this=exp.Dot(this=exp.column(element), expression=exp.to_identifier("__x")),
                          expressions=[element])
        return _fn("TRANSFORM", pairs, pick)

    def percentile(self, node: exp.Expression) -> exp.Expression:
        """``QUANTILE_CONT(x, p)`` / ``MEDIAN(x)``: ``PERCENTILE_CONT(p) WITHIN GROUP (ORDER BY x)``."""
        if isinstance(node, exp.Median):
            x, p = node.this, exp.Literal.number("0.5")
        else:
            x, p = node.this, node.expression
        return exp.WithinGroup(this=_fn("PERCENTILE_CONT", p),
                               expression=exp.Order(expressions=[exp.Ordered(this=x)]))

    def table(self, node: exp.Table) -> exp.Expression:
        """A base table by its Spark name; ``range(k)`` as a table of ``range`` = 0..k−1."""
        fn = node.this
        if isinstance(fn, exp.GenerateSeries) and fn.args.get("is_end_exclusive"):
            return self._range(node, fn)
        if isinstance(fn, exp.Func):
            return node
        if not node.name:
            return node
        schema = node.db
        out = exp.Table(this=exp.to_identifier(node.name, quoted=True))
        if schema and schema.lower() != "main":
            out.set("db", exp.to_identifier(schema, quoted=True))
        if node.args.get("alias") is not None:
            out.set("alias", node.args["alias"])
        return out

    def _range(self, node: exp.Table, fn: exp.Expression) -> exp.Expression:
        start, end = fn.args.get("start"), fn.args["end"]
        series = exp.Anonymous(this="range", expressions=[b.copy() for b in (start, end) if b is not None])
        inner = exp.Select(expressions=[exp.Alias(this=exp.column("id"), alias=exp.to_identifier("range", quoted=True))])
        inner.set("from_", exp.From(this=exp.Table(this=series)))
        alias = node.args.get("alias")
        sub = exp.Subquery(this=inner)
        sub.set("alias", exp.TableAlias(this=exp.to_identifier(alias.name if alias else "__range")))
        return sub


#: The targets by name (``connect(..., engine=...)``, ``rewritten_sql(q, dialect)``).
DUCKDB = Target()
SPARK = SparkTarget()
TARGETS = {"duckdb": DUCKDB, "spark": SPARK}
