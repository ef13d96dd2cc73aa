"""SQL as BI tools write it: the policy's ``[defaults]`` applied to a parsed query, before binding.

Two opt-in rewrites, both pure functions of the query text and the policy (no catalog, no data):

* **plain aggregates** (``plain_aggregates = true``): in the SELECT that reads a private table
  (the statement's main SELECT, whose FROM chain of CTEs and subqueries ends at a private
  table, or whose FROM joins tables of which one is private: the binder then judges the join as
  it would for DP aggregates written by hand), ``COUNT``, ``SUM``, ``AVG``, ``MEDIAN``, ``QUANTILE_CONT`` / ``PERCENTILE_CONT ...
  WITHIN GROUP``, ``VAR_*``, ``STDDEV_*``, ``MIN`` and ``MAX`` become the DP aggregates of the
  same meaning, with no bounds in the call (the binder takes them from the policy). Anything
  else (a FILTER clause, ``QUANTILE_DISC``, a quantile that is not a number literal, an
  aggregate in a nested subquery) is left as written, and the binder refuses it as before.
* **default budget** (``epsilon`` / ``delta`` / ``rho`` in ``[defaults]``): a query with DP
  aggregates (after the mapping above) that gives neither ``epsilon`` nor ``rho`` in
  ``WITH (...)`` gets the default ones added to its options (and the default ``delta`` unless
  it gives its own). A query without DP aggregates gets no options.

Each change is described in a line (``COUNT(*) → DP_COUNT(*)``) that EXPLAIN and the result's
report show. Nothing is changed when the policy does not opt in.
"""

from __future__ import annotations

from sqlglot import exp

from dpsql._policy.policy import Policy
from dpsql._sql import dialect as d

__all__ = ["apply_defaults"]


def apply_defaults(parsed: d.DPQuery, policy: Policy) -> list[str]:
    """Apply ``policy.defaults`` to ``parsed`` in place; return one line per change made."""
    notes: list[str] = []
    defaults = policy.defaults
    if defaults.plain_aggregates and parsed.find(d.DPAggregate) is None:
        main = _main_select(parsed.this)
        if main is not None and _reads_private(main, policy):
            notes += _map_aggregates(main)
    if defaults.budget_given and parsed.find(d.DPAggregate) is not None:
        notes += _default_budget(parsed, policy)
    return notes


# ---------------------------------------------------------------------------------------------
# which SELECT reads the private table


def _main_select(query: exp.Expression) -> exp.Select | None:
    return query if isinstance(query, exp.Select) else None


def _ctes(select: exp.Expression) -> dict[str, exp.Expression]:
    with_ = select.args.get("with_")
    if with_ is None:
        return {}
    return {cte.alias_or_name.lower(): cte.this for cte in with_.expressions}


def _reads_private(select: exp.Select, policy: Policy) -> bool:
    """Whether ``select``'s FROM chain (through CTEs and subqueries) ends at a private table."""
    scopes: list[dict[str, exp.Expression]] = []
    node: exp.Expression | None = select
    for _ in range(64):  # a chain deeper than this is not a BI tool's; leave it as written
        if not isinstance(node, exp.Select):
            return False
        scopes.insert(0, _ctes(node))
        from_ = node.args.get("from_")
        if from_ is None:
            return False
        joins = node.args.get("joins") or []
        if joins:  # a join (comma or JOIN ... ON) of tables: private if one of them is
            return any(_private_table(j.this, scopes, policy) for j in [from_, *joins])
        source = from_.this
        if isinstance(source, exp.Subquery):
            node = source.this
            continue
        if not isinstance(source, exp.Table) or not isinstance(source.this, exp.Identifier):
            return False
        name = source.name.lower()
        if not source.db:
            cte = next((s[name] for s in scopes if name in s), None)
            if cte is not None:
                node = cte
                continue
        return _private_table(source, scopes, policy)
    return False


def _private_table(source: exp.Expression, scopes: list[dict[str, exp.Expression]], policy: Policy) -> bool:
    """Whether ``source``, one table of a FROM, is a table the policy declares private (a CTE's
    name or a subquery is not: the binder judges those, and an aggregate stays as written)."""
    if not isinstance(source, exp.Table) or not isinstance(source.this, exp.Identifier):
        return False
    name = source.name.lower()
    if not source.db and any(name in s for s in scopes):
        return False
    found = [policy.table(key) for key in policy.resolve(name, source.db or None, source.catalog or None)]
    return any(tp is not None and not tp.public for tp in found)


# ---------------------------------------------------------------------------------------------
# the aggregates


_SIMPLE: dict[type[exp.Expression], type[d.DPAggregate]] = {
    exp.Sum: d.DPSum,
    exp.Avg: d.DPMean,
    exp.Median: d.DPMedian,
    exp.Variance: d.DPVar,
    exp.VariancePop: d.DPVar,
    exp.Stddev: d.DPStddev,
    exp.StddevPop: d.DPStddev,
    exp.StddevSamp: d.DPStddev,
    exp.Min: d.DPMin,
    exp.Max: d.DPMax,
}


def literal_quantile(node: exp.Expression | None) -> float | None:
    """A quantile written as a number literal in [0, 1], or None."""
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            p = float(node.this)
        except ValueError:
            return None
        return p if 0 <= p <= 1 else None
    return None


def _convert(node: exp.Expression) -> d.DPAggregate | None:
    """The DP aggregate that stands for the plain aggregate ``node``, or None to keep it."""
    if isinstance(node, exp.Count):
        arg = node.this
        if arg is None or isinstance(arg, exp.Star):
            return d.DPCount(this=exp.Star())
        if node.expressions:
            return None
        return d.DPCount(this=arg.copy())
    for plain, dp in _SIMPLE.items():
        if type(node) is plain and node.this is not None and not node.expressions and \
                not any(v for k, v in node.args.items() if k != "this"):
            return dp(this=node.this.copy())
    if isinstance(node, exp.Anonymous) and node.name.lower() == "mean" and len(node.expressions) == 1:
        return d.DPMean(this=node.expressions[0].copy())
    if isinstance(node, exp.PercentileCont) and node.this is not None:
        p = literal_quantile(node.expression)
        if p is not None and not isinstance(node.parent, exp.WithinGroup):
            return d.DPQuantile(this=node.this.copy(), quantile=exp.Literal.number(p))
    if isinstance(node, exp.WithinGroup) and isinstance(node.this, exp.PercentileCont):
        p = literal_quantile(node.this.this)
        order = node.expression
        items = order.expressions if isinstance(order, exp.Order) else []
        if p is not None and len(items) == 1 and isinstance(items[0], exp.Ordered):
            if items[0].args.get("desc"):
                p = 1.0 - p
            return d.DPQuantile(this=items[0].this.copy(), quantile=exp.Literal.number(p))
    return None


def duckdb_name(node: exp.Expression) -> str:
    """The column name DuckDB gives an unaliased aggregate (``count_star()`` for ``COUNT(*)``)."""
    if isinstance(node, exp.Count) and (node.this is None or isinstance(node.this, exp.Star)):
        return "count_star()"
    return node.sql(dialect="duckdb", normalize_functions="lower")


def _map_aggregates(select: exp.Select) -> list[str]:
    notes: list[str] = []
    targets = (exp.Count, exp.Anonymous, exp.PercentileCont, exp.WithinGroup, *_SIMPLE)
    for node in list(select.find_all(*targets)):
        if node.parent is None or not d.own_scope(node, select):
            continue
        if isinstance(node, exp.PercentileCont) and isinstance(node.parent, exp.WithinGroup):
            continue
        dp = _convert(node)
        if dp is None:
            continue
        before = node.sql(dialect="duckdb")
        name = duckdb_name(node)
        if node.parent is select and node.arg_key == "expressions":
            node.replace(exp.alias_(dp, name, quoted=True))  # keep DuckDB's column name
        else:
            node.replace(dp)
        notes.append(f"plain aggregate {before} → {d.to_sql(dp)} (policy [defaults] plain_aggregates)")
    return list(dict.fromkeys(notes))


# ---------------------------------------------------------------------------------------------
# the budget


def _default_budget(parsed: d.DPQuery, policy: Policy) -> list[str]:
    given = {key.lower() for key, _ in parsed.option_items()}
    if given & {"epsilon", "rho"}:
        return []
    defaults = policy.defaults
    added: list[tuple[str, float]] = []
    if defaults.rho is not None:
        added.append(("rho", defaults.rho))
    elif defaults.epsilon is not None:
        added.append(("epsilon", defaults.epsilon))
    if defaults.delta is not None and "delta" not in given:
        added.append(("delta", defaults.delta))
    if not added:
        return []
    options = parsed.args.get("options")
    if options is None:
        options = d.DPOptions(expressions=[])
        parsed.set("options", options)
    for key, value in added:
        options.append("expressions", exp.EQ(this=exp.var(key), expression=_number(value)))
    what = ", ".join(f"{key} = {value:g}" for key, value in added)
    return [f"budget {what} from the policy's [defaults] (the query gives none)"]


def _number(value: float) -> exp.Expression:
    return exp.Literal.number(repr(float(value)))

