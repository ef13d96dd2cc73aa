"""Rewrite a plan into ONE DuckDB query that computes every exact statistic the release needs.

Shape (one scan of the private table; clipping in SQL)::

    WITH __src AS (                                  -- row-wise: FROM chain + WHERE
      SELECT *, <group expr> AS __k0, ...,
             CASE WHEN x < L THEN L WHEN x > U THEN U ELSE x END AS __v0, ...
      FROM <from> WHERE <where>
    ), __stats AS (                                  -- one row per group
      SELECT __k0, ..., COUNT(__v0) AS a0_n, SUM(__v0) AS a0_s, ...
      FROM __src GROUP BY __k0, ...
    )
    SELECT ... FROM (VALUES <public keys>) AS __keys(__k0, ...)   -- public key domain only
      LEFT JOIN __stats ON __keys.__k0 IS NOT DISTINCT FROM __stats.__k0 ...

``x`` is the argument (numeric columns) or TRY_CAST(argument AS DOUBLE), so that no value can
make the query fail (a failure would reveal that such a value exists); a value that does not
cast is NULL and is skipped like NULL.
NaN clips to the upper bound (DuckDB orders NaN above every number); ±inf clip to the bounds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from dpsql.plan import Plan

SRC = "__src"
STATS = "__stats"


@dataclass
class Rewritten:
    sql: str
    keys: list[str] = field(default_factory=list)
    #: (aggregate index, stat name) -> result column name
    columns: dict[tuple[int, str], str] = field(default_factory=dict)
    key_selection_column: str | None = None


_INTEGER_TYPES = {
    "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT",
    "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT",
}
_FLOAT_TYPES = {"FLOAT", "DOUBLE", "REAL"}


def clip(arg: exp.Expression, lower: float, upper: float, dtype: str | None = None) -> exp.Expression:
    """``CASE WHEN x < L THEN L WHEN x > U THEN U ELSE x END``.

    ``x`` is the argument itself when its type is known to be numeric (integers keep integer
    arithmetic when the bounds are whole numbers), ``CAST(arg AS DOUBLE)`` for decimals, and
    ``TRY_CAST(arg AS DOUBLE)`` otherwise, so that no value can make the query fail. NULL stays
    NULL (DuckDB's GREATEST/LEAST would turn it into a bound).
    """
    dtype = (dtype or "").upper()
    double = exp.DataType(this=exp.DataType.Type.DOUBLE)
    integral = float(lower).is_integer() and float(upper).is_integer()

    def x() -> exp.Expression:
        if dtype in _INTEGER_TYPES or dtype in _FLOAT_TYPES:
            return arg.copy()
        if dtype.startswith("DECIMAL"):
            return exp.Cast(this=arg.copy(), to=double.copy())
        return exp.TryCast(this=arg.copy(), to=double.copy())

    if dtype in _INTEGER_TYPES and integral:
        lo, hi = str(int(lower)), str(int(upper))
    else:
        lo, hi = repr(float(lower)), repr(float(upper))
    return exp.Case(
        ifs=[
            exp.If(this=exp.LT(this=x(), expression=exp.Literal.number(lo)), true=exp.Literal.number(lo)),
            exp.If(this=exp.GT(this=x(), expression=exp.Literal.number(hi)), true=exp.Literal.number(hi)),
        ],
        default=x(),
    )


def _sql(node: exp.Expression) -> str:
    return node.sql(dialect="duckdb")


# -- total expressions ------------------------------------------------------------------------
# An error raised while DuckDB evaluates an expression over private rows tells the analyst that
# some row makes it fail (`WHERE CAST(name AS INT) > 0` fails iff a name is not a number), even
# when the message is withheld and nothing is charged. So every such expression is made total:
# CAST becomes TRY_CAST, and every maximal subexpression that DuckDB accepts inside TRY(...)
# (no aggregate, window, subquery or volatile function) is wrapped in it. A row whose expression
# would fail gets NULL instead: a WHERE drops it, a GROUP BY puts it in the NULL group, an
# aggregate skips it. Volatile functions that can fail (error(), setseed(), ...) are refused by
# the binder; DuckDB refuses TRY around the harmless ones (random(), uuid()).

#: Nodes that cannot fail, or are parts of syntax rather than values: never wrapped.
_LEAVES = (exp.Column, exp.Literal, exp.Null, exp.Boolean, exp.Star, exp.DataType, exp.Identifier,
           exp.Var, exp.Placeholder, exp.Parameter, exp.Try)
#: Clauses inside an aggregate or window call: not values, so only their contents are wrapped.
_CLAUSES = (exp.Distinct, exp.Order, exp.Ordered, exp.Where, exp.Filter, exp.Kwarg, exp.PropertyEQ,
            exp.IgnoreNulls, exp.RespectNulls, exp.WindowSpec, exp.Lambda)
#: DuckDB's volatile functions (duckdb_functions() with stability 'VOLATILE'); TRY refuses them.
_VOLATILE = {"random", "uuid", "gen_random_uuid", "uuidv4", "uuidv7", "current_query",
             "current_query_id", "current_connection_id", "current_transaction_id", "stats",
             "vector_type", "error", "setseed", "setval", "nextval", "currval", "sleep_ms", "write_log"}


def _blocks_try(node: exp.Expression) -> bool:
    for n in node.walk():
        if isinstance(n, (exp.AggFunc, exp.Window, exp.Subquery, exp.Select, exp.Any, exp.All, exp.Rand,
                          exp.Uuid, exp.Lambda)):
            return True
        if isinstance(n, exp.Anonymous) and n.name.lower() in _VOLATILE:
            return True
    return False


def _wrap(node: exp.Expression) -> exp.Expression:
    if isinstance(node, _LEAVES):
        return node
    if not isinstance(node, _CLAUSES) and not _blocks_try(node):
        return exp.Try(this=node)
    for key, value in list(node.args.items()):
        if isinstance(value, exp.Expression):
            node.set(key, _wrap(value))
        elif isinstance(value, list):
            node.set(key, [_wrap(v) if isinstance(v, exp.Expression) else v for v in value])
    return node


def total(node: exp.Expression) -> exp.Expression:
    """A copy of ``node`` that no value can make fail (TRY_CAST for CAST, TRY(...) around the rest)."""
    copy = node.copy().transform(
        lambda n: exp.TryCast(this=n.this, to=n.args["to"]) if type(n) is exp.Cast else n, copy=False
    )
    return _wrap(copy)


def total_query(node: exp.Expression) -> exp.Expression:
    """A copy of a FROM item or CTE body with every select-list expression and WHERE made total."""
    out = node.copy()
    for select in list(out.find_all(exp.Select)):
        select.set("expressions", [
            p if isinstance(p, (exp.Star, exp.Column)) else (
                exp.alias_(total(p.this), p.args["alias"]) if isinstance(p, exp.Alias) else total(p))
            for p in select.expressions
        ])
        if select.args.get("where") is not None:
            select.args["where"].set("this", total(select.args["where"].this))
    return out


def rewrite(plan: Plan) -> Rewritten:
    """Build the single DuckDB statement for ``plan``.

    Pieces are generated once each and joined as text: the shapes are fixed, and building one
    big tree with sqlglot's builders (which copy and re-parse) cost most of the planning time.
    """
    bound = plan.bound
    keys = [f"__k{j}" for j in range(len(bound.group_by))]
    # Expressions over private rows are made total (see ``total``); the aggregates' arguments in
    # place, so that the mechanisms' stats() and subquery() use the total forms too.
    for prep in plan.prepared:
        if prep.agg.arg is not None:
            prep.agg.arg = total(prep.agg.arg)
        inner = getattr(prep, "inner", None)  # DP_AGG's aggregate, run per chunk by saa
        if isinstance(inner, exp.Expression):
            prep.inner = total(inner)
    projections = ["*"] + [f"{_sql(total(g))} AS {k}" for k, g in zip(keys, bound.group_by)]
    for prep in plan.prepared:
        agg = prep.agg
        if agg.arg is None:
            continue
        value = clip(agg.arg, agg.lower, agg.upper, agg.column_type) if prep.clips else agg.arg
        projections.append(f"{_sql(value)} AS __v{agg.index}")
    src = f"SELECT {', '.join(projections)} FROM {_sql(total_query(bound.from_))}"
    if bound.where is not None:
        src += f" WHERE {_sql(total(bound.where))}"

    out = Rewritten(sql="", keys=keys)
    stats = list(keys)
    for prep in plan.prepared:
        i = prep.agg.index
        v = exp.column(f"__v{i}") if prep.agg.arg is not None else None
        for name, expr in prep.stats(v).items():
            col = f"a{i}_{name}"
            out.columns[(i, name)] = col
            stats.append(f"{_sql(expr)} AS {col}")
    if plan.selection is not None:
        out.key_selection_column = "__keys_n"
        stats.append("COUNT(*) AS __keys_n")
    if len(stats) == len(keys):  # nothing but keys: still count rows so the query is valid
        stats.append("COUNT(*) AS __rows")
    grouped = f"SELECT {', '.join(stats)} FROM {SRC}"
    if keys:
        grouped += f" GROUP BY {', '.join(keys)}"

    ctes = [f"{_sql(cte.args['alias'])} AS ({_sql(total_query(cte.this))})" for cte in bound.ctes]
    ctes += [f"{SRC} AS ({src})", f"{STATS} AS ({grouped})"]
    subqueries = []
    for prep in plan.prepared:
        q = prep.subquery(SRC, keys, f"__v{prep.agg.index}")
        if q is not None:
            i = prep.agg.index
            subqueries.append((f"__sq{i}", [c for c in q.named_selects if c not in keys]))
            ctes.append(f"__sq{i} AS ({_sql(q)})")
            for col in subqueries[-1][1]:
                out.columns[(i, col)] = col

    if plan.public_keys is not None:
        rows = ", ".join(f"({', '.join(_sql(_lit(v)) for v in key)})" for key in plan.public_keys)
        select = [f"__keys.{k}" for k in keys] + [f"{STATS}.* EXCLUDE ({', '.join(keys)})"]
        from_ = f"(VALUES {rows}) AS __keys({', '.join(keys)}) LEFT JOIN {STATS} ON {_key_match('__keys', STATS, keys)}"
        base = "__keys"
    else:
        select, from_, base = ["*"], STATS, STATS
    for alias, cols in subqueries:
        select += [f"{alias}.{c}" for c in cols]
        if keys:
            from_ += f" LEFT JOIN {alias} ON {_key_match(base, alias, keys)}"
        else:
            from_ += f" CROSS JOIN {alias}"
    out.sql = f"WITH {', '.join(ctes)} SELECT {', '.join(select)} FROM {from_}"
    return out


def _key_match(left: str, right: str, keys: list[str]) -> str:
    return " AND ".join(f"{left}.{k} IS NOT DISTINCT FROM {right}.{k}" for k in keys)


def _lit(value: object) -> exp.Expression:
    if value is None:
        return exp.Null()
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, (int, float)):
        return exp.Literal.number(repr(value))
    return exp.Literal.string(str(value))
