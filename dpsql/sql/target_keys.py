"""Spark's form of a public key domain: the keys go into the aggregate, not into a join.

The rewrite (:mod:`dpsql.engine.rewrite`) writes a public key domain as

    WITH __src AS (...), __stats AS (SELECT k, aggs FROM __src GROUP BY k)
    SELECT __keys.k, __stats.* EXCLUDE (k)
    FROM (VALUES keys) AS __keys(k) LEFT JOIN __stats ON __keys.k IS NOT DISTINCT FROM __stats.k

On Spark that left join is a job and an exchange of its own after the aggregate (about a fifth
of a 1,000-key statement on local[2], even with the aggregate broadcast). When every aggregate
ignores NULL inputs, the same rows come from one aggregate over the data and the keys together:

    __kd AS (SELECT k, v..., 1 AS __d, NULL AS __kk FROM __src
             UNION ALL SELECT k, NULL..., NULL, 1 FROM (VALUES keys) AS __keys(k)),
    __stats AS (SELECT k, aggs' FROM __kd GROUP BY k HAVING MAX(__kk) = 1)
    SELECT __stats.k, __stats.* EXCLUDE (k) FROM __stats

* a key row adds NULL to every aggregate's input, which COUNT, SUM, MIN and MAX skip;
* ``HAVING MAX(__kk) = 1`` keeps the groups of the domain's keys and only those, as the left
  join from the keys does (GROUP BY puts NULL keys in one group, as IS NOT DISTINCT FROM does);
* a key without rows gets NULL for every statistic, as from the left join: each COUNT is
  written ``CASE WHEN COUNT(__d) > 0 THEN COUNT(...) END``, and COUNT(*) counts ``__d``.

The form applies only to that exact shape (one join, the aggregate's inputs plain columns of
one relation, every aggregate argument an expression that is NULL when its columns are); any
other statement keeps the join. ``tests/test_spark.py`` compares the statistics of both engines.
"""

from __future__ import annotations

from sqlglot import exp

__all__ = ["keys_in_aggregate"]

KEYS, STATS, UNION = "__keys", "__stats", "__kd"
#: 1 on data rows, NULL on key rows (what COUNT(*) counts); NULL on data rows, 1 on key rows.
DATA, KEY = "__d", "__kk"
#: Aggregates that skip NULL inputs, on both engines.
_SKIP_NULLS = (exp.Count, exp.Sum, exp.Min, exp.Max)
#: Operators whose result is NULL when one operand is.
_STRICT_BINARY = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod)
_STRICT_UNARY = (exp.Paren, exp.Neg, exp.Cast, exp.TryCast, exp.Try)


def _null_on_key_rows(node: exp.Expression, keys: list[str]) -> bool:
    """Whether ``node`` is NULL on a key row, where every column but the keys is NULL."""
    if isinstance(node, exp.Column):
        return isinstance(node.this, exp.Identifier) and not node.table and node.name not in keys
    if isinstance(node, _STRICT_UNARY):
        return _null_on_key_rows(node.this, keys)
    if isinstance(node, _STRICT_BINARY):
        return _null_on_key_rows(node.this, keys) or _null_on_key_rows(node.expression, keys)
    return False


def _aggregate(node: exp.Expression, keys: list[str]) -> bool:
    """COUNT(*), or COUNT/SUM/MIN/MAX (not DISTINCT) of an expression NULL on a key row."""
    if not isinstance(node, _SKIP_NULLS) or len(node.args.get("expressions") or []) > 0:
        return False
    arg = node.this
    if isinstance(node, exp.Count) and isinstance(arg, exp.Star):
        return True
    return arg is not None and not isinstance(arg, exp.Distinct) and _null_on_key_rows(arg, keys)


def _parts(select: exp.Select) -> tuple[exp.Values, exp.CTE, list[str]] | None:
    """The key domain, the aggregate's CTE and the key names, when the shape is the one above."""
    source, joins, with_ = select.args.get("from_"), select.args.get("joins") or [], select.args.get("with_")
    if source is None or len(joins) != 1 or with_ is None or not isinstance(source.this, exp.Values):
        return None
    values, join = source.this, joins[0]
    if values.alias != KEYS or join.side != "LEFT" or join.kind or not isinstance(join.this, exp.Table) \
            or join.this.name != STATS or join.this.alias:
        return None
    names = [c.name for c in values.args["alias"].columns]
    on = [join.args.get("on")]
    pairs = []
    while on:
        node = on.pop()
        if isinstance(node, exp.And):
            on += [node.this, node.expression]
        elif isinstance(node, exp.NullSafeEQ) and isinstance(node.this, exp.Column) \
                and isinstance(node.expression, exp.Column):
            pairs.append((node.this.table, node.this.name, node.expression.table, node.expression.name))
        else:
            return None
    if sorted(pairs) != sorted((KEYS, k, STATS, k) for k in names):
        return None
    ctes = [c for c in with_.expressions if c.alias == STATS]
    if len(ctes) != 1 or any(c.alias == UNION for c in with_.expressions):
        return None
    return values, ctes[0], names


def _grouped_on(stats: exp.Select, names: list[str]) -> bool:
    """A plain ``SELECT keys, aggregates FROM relation GROUP BY keys`` and nothing else."""
    group = stats.args.get("group")
    others = ("where", "having", "qualify", "joins", "windows", "distinct", "order", "limit", "with_")
    if group is None or any(stats.args.get(k) for k in others) or not isinstance(stats.args["from_"].this, exp.Table):
        return False
    if [g.name if isinstance(g, exp.Column) and not g.table else None for g in group.expressions] != names:
        return False
    for item in stats.expressions:
        if isinstance(item, exp.Column) and not item.table and item.name in names:
            continue
        if not (isinstance(item, exp.Alias) and _aggregate(item.this, names)):
            return False
    return True


def keys_in_aggregate(select: exp.Expression) -> bool:
    """Rewrite ``select`` (in place) into the form of the module's docstring; False, and nothing
    changed, when it is not of the shape that form covers."""
    if not isinstance(select, exp.Select):
        return False
    parts = _parts(select)
    if parts is None:
        return False
    values, cte, names = parts
    stats = cte.this
    if not isinstance(stats, exp.Select) or not _grouped_on(stats, names):
        return False
    read = [c.name for c in stats.find_all(exp.Column)]
    inputs = list(dict.fromkeys([*names, *(c for c in read if c not in names)]))
    data = exp.select(*inputs, exp.alias_(exp.Literal.number(1), DATA), exp.alias_(exp.Null(), KEY)) \
        .from_(stats.args["from_"].this.copy())
    keyed = exp.select(*[exp.column(c) if c in names else exp.Null() for c in inputs], exp.Null(),
                       exp.Literal.number(1)).from_(values.copy())
    union = exp.union(data, keyed, distinct=False)
    for item in stats.expressions:
        agg = item.this if isinstance(item, exp.Alias) else None
        if isinstance(agg, exp.Count):
            counted = exp.Count(this=exp.column(DATA)) if isinstance(agg.this, exp.Star) else agg.copy()
            rows = exp.GT(this=exp.Count(this=exp.column(DATA)), expression=exp.Literal.number(0))
            item.set("this", exp.Case(ifs=[exp.If(this=rows, true=counted)]))
    stats.set("from_", exp.From(this=exp.to_table(UNION)))
    stats.set("having", exp.Having(this=exp.EQ(this=exp.Max(this=exp.column(KEY)), expression=exp.Literal.number(1))))
    with_ = select.args["with_"]
    ctes = list(with_.expressions)
    at = next(i for i, c in enumerate(ctes) if c is cte)
    ctes.insert(at, exp.CTE(this=union, alias=exp.TableAlias(this=exp.to_identifier(UNION))))
    with_.set("expressions", ctes)
    for column in select.expressions:
        if isinstance(column, exp.Column) and column.table == KEYS:
            column.set("table", exp.to_identifier(STATS))
    select.set("joins", None)
    select.set("from_", exp.From(this=exp.to_table(STATS)))
    return True
