"""Rewrite a plan into ONE DuckDB query that computes every exact statistic the release needs.

Shape (one scan of the private table; clipping in SQL)::

    WITH __src AS (                                  -- row-wise: FROM chain + WHERE
      SELECT *, <group expr> AS __k0, ...,
             CASE WHEN x < L THEN L WHEN x > U THEN U ELSE x END AS __v0, ...
                                                     -- x = TRY_CAST(<arg> AS DOUBLE)
      FROM <from> WHERE <where>
    ), __stats AS (                                  -- one row per group
      SELECT __k0, ..., COUNT(__v0) AS a0_n, SUM(__v0 - c) AS a0_s1, ...
      FROM __src GROUP BY __k0, ...
    )
    SELECT ... FROM (VALUES <public keys>) AS __keys(__k0, ...)   -- public key domain only
      LEFT JOIN __stats ON __keys.__k0 IS NOT DISTINCT FROM __stats.__k0 ...

Arguments are cast with TRY_CAST so that no value can make the query fail (a failure would
reveal that such a value exists); a value that does not cast is NULL and is skipped like NULL.
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


def clip(arg: exp.Expression, lower: float, upper: float) -> exp.Expression:
    """``CASE WHEN x < L THEN L WHEN x > U THEN U ELSE x END`` with ``x = TRY_CAST(arg AS DOUBLE)``.

    NULL stays NULL (DuckDB's GREATEST/LEAST would turn it into a bound).
    """

    def x() -> exp.Expression:
        return exp.TryCast(this=arg.copy(), to=exp.DataType(this=exp.DataType.Type.DOUBLE))

    lo, hi = repr(float(lower)), repr(float(upper))
    return exp.Case(
        ifs=[
            exp.If(this=exp.LT(this=x(), expression=exp.Literal.number(lo)), true=exp.Literal.number(lo)),
            exp.If(this=exp.GT(this=x(), expression=exp.Literal.number(hi)), true=exp.Literal.number(hi)),
        ],
        default=x(),
    )


def rewrite(plan: Plan) -> Rewritten:
    """Build the single DuckDB statement for ``plan``."""
    bound = plan.bound
    keys = [f"__k{j}" for j in range(len(bound.group_by))]
    projections: list[exp.Expression] = [exp.Star()]
    for key, g in zip(keys, bound.group_by):
        projections.append(exp.alias_(g.copy(), key))
    for prep in plan.prepared:
        agg = prep.agg
        if agg.arg is None or not prep.clips:
            if agg.arg is not None:
                projections.append(exp.alias_(agg.arg.copy(), f"__v{agg.index}"))
            continue
        projections.append(exp.alias_(clip(agg.arg, agg.lower, agg.upper), f"__v{agg.index}"))
    src = exp.select(*projections).from_(bound.from_.copy())
    if bound.where is not None:
        src = src.where(bound.where.copy())

    out = Rewritten(sql="", keys=keys)
    stats: list[exp.Expression] = [exp.column(k) for k in keys]
    for prep in plan.prepared:
        i = prep.agg.index
        v = exp.column(f"__v{i}") if prep.agg.arg is not None else None
        for name, expr in prep.stats(v).items():
            col = f"a{i}_{name}"
            out.columns[(i, name)] = col
            stats.append(exp.alias_(expr, col))
    if plan.selection is not None:
        out.key_selection_column = "__keys_n"
        stats.append(exp.alias_(exp.Count(this=exp.Star()), "__keys_n"))
    if len(stats) == len(keys):  # nothing but keys: still count rows so the query is valid
        stats.append(exp.alias_(exp.Count(this=exp.Star()), "__rows"))
    grouped = exp.select(*stats).from_(SRC)
    if keys:
        grouped = grouped.group_by(*[exp.column(k) for k in keys])

    final: exp.Select
    subqueries = [
        (prep.agg.index, prep.subquery(SRC, keys, f"__v{prep.agg.index}")) for prep in plan.prepared
    ]
    subqueries = [(i, q) for i, q in subqueries if q is not None]
    ctes = [(cte.alias_or_name, cte.this) for cte in bound.ctes]
    ctes += [(SRC, src), (STATS, grouped)]
    for i, q in subqueries:
        ctes.append((f"__sq{i}", q))
        for col in q.named_selects:
            if col not in keys:
                out.columns[(i, col)] = col
    if plan.public_keys is not None:
        values = exp.values(
            [exp.tuple_(*[_lit(v) for v in key]) for key in plan.public_keys],
            alias="__keys",
            columns=keys,
        )
        final = exp.select(
            *[exp.column(k, table="__keys") for k in keys],
            f"{STATS}.* EXCLUDE ({', '.join(keys)})",
            dialect="duckdb",
        ).from_(values)
        final = final.join(STATS, on=_key_match("__keys", STATS, keys), join_type="left")
        base = "__keys"
    else:
        final = exp.select(exp.Star()).from_(STATS)
        base = STATS
    for i, q in subqueries:
        alias = f"__sq{i}"
        extra = [exp.column(c, table=alias) for c in q.named_selects if c not in keys]
        final = final.select(*extra)
        if keys:
            final = final.join(alias, on=_key_match(base, alias, keys), join_type="left")
        else:
            final = final.join(alias, join_type="cross")
    for name, q in ctes:
        final = final.with_(name, as_=q)
    out.sql = final.sql(dialect="duckdb")
    return out


def _key_match(left: str, right: str, keys: list[str]) -> exp.Expression:
    cond: exp.Expression | None = None
    for k in keys:
        part = exp.NullSafeEQ(this=exp.column(k, table=left), expression=exp.column(k, table=right))
        cond = part if cond is None else exp.And(this=cond, expression=part)
    assert cond is not None
    return cond


def _lit(value: object) -> exp.Expression:
    if value is None:
        return exp.Null()
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, (int, float)):
        return exp.Literal.number(repr(value))
    return exp.Literal.string(str(value))
