"""Total expressions: no value of a row can make DuckDB raise while evaluating them.

An error raised while DuckDB evaluates an expression over private rows tells the analyst that
some row makes it fail (``WHERE CAST(name AS INT) > 0`` fails iff a name is not a number), even
when the message is withheld and nothing is charged. So every such expression is made total:
CAST becomes TRY_CAST, and every maximal subexpression that DuckDB accepts inside TRY(...) is
wrapped in it. A row whose expression would fail gets NULL instead: a WHERE drops it, a GROUP BY
puts it in the NULL group, an aggregate skips it. The allowlist of :mod:`dpsql._sql.allow` keeps out
what TRY cannot wrap (aggregates, windows, subqueries, volatile functions), so over private rows
every expression is wrapped whole. Post-processing uses the same wrapping, so that nothing run
after the budget charge can fail either.
"""

from __future__ import annotations

from sqlglot import exp

from dpsql._sql.totalforms import guarded

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
    if isinstance(node, (exp.Subquery, exp.Query)):
        # Only a bound ``IN (SELECT ... FROM public_table)`` gets here (dpsql._sql.joins.public_in),
        # built total already; TRY cannot wrap a subquery.
        return node
    if not isinstance(node, _CLAUSES) and not _blocks_try(node):
        return exp.Try(this=node)
    for key, value in list(node.args.items()):
        if isinstance(value, exp.Expression):
            node.set(key, _wrap(value))
        elif isinstance(value, list):
            node.set(key, [_wrap(v) if isinstance(v, exp.Expression) else v for v in value])
    return node


def unwrapped(node: exp.Expression) -> exp.Expression:
    """A copy of ``node`` in the forms that cannot raise, before TRY(...) wraps it: every call
    that could raise in its guarded form (:mod:`dpsql._sql.totalforms`), TRY_CAST for CAST."""
    casts = node.copy().transform(
        lambda n: exp.TryCast(this=n.this, to=n.args["to"]) if type(n) is exp.Cast else n, copy=False
    )
    return guarded(casts)  # after the casts, so that Spark's form (the guards' originals) has them too


def total(node: exp.Expression) -> exp.Expression:
    """A copy of ``node`` that no value can make fail: :func:`unwrapped`, and TRY(...) around the
    rest as the last safety net."""
    return _wrap(unwrapped(node))
