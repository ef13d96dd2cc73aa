"""Zero-row probes: ``LIMIT 0`` or a constant-false ``WHERE``, answered from the schema alone.

BI tools and notebooks ask for a query's columns by running it so that it returns no rows
(``SELECT * FROM t WHERE 1=0``, ``SELECT ... LIMIT 0``). Such a statement is answered with the
column names and types and no rows: nothing is read and nothing is charged.

* A DP query that is a probe must be accepted as it stands (the whole pipeline up to the plan
  runs, so it needs a budget, from ``WITH (...)`` or the policy's ``[defaults]``); its types
  come from the plan: group keys keep their column's type, a count is ``BIGINT`` and every other
  DP aggregate ``DOUBLE``, then the post-processing SELECT is bound over them. A constant-false
  WHERE is a probe only in a SELECT without aggregates in its select list: an aggregate over no
  rows is one row in SQL, and a DP query keeps its meaning (and its charge).
* A query that would be refused only because it selects rows of a private table (no aggregate,
  every table declared, every expression allowed over private rows) is answered with its column
  names and types, from dpsql's own resolution of the query: columns keep the catalog's types,
  and other expressions are typed by the engine over empty stand-ins of the tables, never over a
  private table (a dynamic ``PIVOT`` bound by DuckDB would read the table: its column names are
  data). What dpsql cannot resolve is refused, charging nothing.
* A query on public tables runs as it is.
"""

from __future__ import annotations

import re
import typing as t

import duckdb
from sqlglot import exp

from dpsql._policy.policy import Policy
from dpsql._query.pipeline import PreparedQuery, prepare
from dpsql._sql import dialect
from dpsql._sql.build import NOISY
from dpsql._sql.statistics import Statistic
from dpsql.backends.backend import Backend
from dpsql.backends.sandbox import harden
from dpsql.errors import BindError, PrivacyError

if t.TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["is_probe", "answer_probe", "parse_if_probe_like"]

_KEYWORDS = re.compile(r"\b(limit|where)\b", re.IGNORECASE)

NOTE = "zero-row probe: answered from the schema (names and types), nothing read or charged"


def _literal(node: exp.Expression) -> t.Any:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Literal):
        return float(node.this) if not node.is_string else node.this
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    raise ValueError("not a literal")


def _constant(node: exp.Expression) -> bool | None:
    """The truth value of a condition written with literals only (``1=0``, ``false``), or None."""
    while isinstance(node, exp.Paren):
        node = node.this
    try:
        if isinstance(node, exp.Boolean):
            return bool(node.this)
        if isinstance(node, exp.Not):
            inner = _constant(node.this)
            return None if inner is None else not inner
        if isinstance(node, exp.And):
            parts = [_constant(node.this), _constant(node.expression)]
            return False if False in parts else (True if parts == [True, True] else None)
        if isinstance(node, exp.Or):
            parts = [_constant(node.this), _constant(node.expression)]
            return True if True in parts else (False if parts == [False, False] else None)
        if isinstance(node, (exp.EQ, exp.NEQ)):
            left, right = _literal(node.this), _literal(node.expression)
            if type(left) is not type(right):
                return None
            return (left == right) == isinstance(node, exp.EQ)
    except ValueError:
        return None
    return None


def is_probe(query: exp.Expression) -> bool:
    """``LIMIT 0`` on the statement, or a constant-false WHERE on a SELECT without aggregates
    in its select list (which selects rows: ``SELECT * FROM (...) WHERE 1=0``)."""
    limit = query.args.get("limit")
    if isinstance(limit, exp.Limit):
        try:
            if _literal(limit.expression) == 0:
                return True
        except ValueError:
            pass
    if not isinstance(query, exp.Select) or any(e.find(exp.AggFunc) for e in query.expressions):
        return False  # an aggregate over no rows is one row in SQL: not a probe, a query
    where = query.args.get("where")
    return where is not None and _constant(where.this) is False


def _empty(columns: list[tuple[str, str]], outer: exp.Select | None = None) -> "pa.Table":
    """An empty table of these (name, DuckDB type) columns; with ``outer``, the post-processing
    SELECT bound over it (in a DuckDB that holds nothing else)."""
    con = duckdb.connect(":memory:")
    try:
        harden(con)
        select = exp.select(*(exp.alias_(exp.cast(exp.null(), exp.DataType.build(ty, dialect="duckdb")), name, quoted=True)
                              for name, ty in columns)).limit(0)
        if outer is None:
            return con.sql(select.sql(dialect="duckdb")).to_arrow_table()
        noisy = exp.Create(kind="TABLE", this=exp.to_table(NOISY), expression=select,
                           properties=exp.Properties(expressions=[exp.TemporaryProperty()]))
        con.execute(noisy.sql(dialect="duckdb"))
        return con.sql(outer.sql(dialect="duckdb")).to_arrow_table()
    finally:
        con.close()


def _dp_answer(prepared: PreparedQuery) -> "pa.Table":
    plan, bound = prepared.plan, prepared.bound
    assert plan is not None and prepared.rewritten is not None and bound.outer is not None
    from dpsql._sql import build

    columns = [(build.key(j), ty) for j, ty in enumerate(bound.group_types)]
    columns += [(build.agg(p.agg.index), "BIGINT" if p.agg.statistic is Statistic.COUNT else "DOUBLE")
                for p in plan.prepared]
    if bound.outer_columns is not None:
        types = dict(columns)
        return _empty([(name, types[col]) for name, col in zip(bound.output_names, bound.outer_columns)])
    return _empty(columns, bound.outer)


def _row_answer(text: str, policy: Policy, engine: Backend) -> "pa.Table | None":
    """Names and types of a probe that only selects rows, or None if it is not such a query.

    The probe is resolved as one more row-wise level of its FROM chain (the allowlist applies to
    every expression), so its columns are expressions over the tables' columns: a column's type
    is the catalog's, any other expression's is the engine's type of it over typed empty
    stand-ins of the tables (:mod:`dpsql._sql.shadow`). The engine never binds the analyst's
    statement, nor anything that names a private table.
    """
    from dpsql._query.pipeline import database_of
    from dpsql._sql.guards import check_functions, check_statement
    from dpsql._sql.joins import JoinContext, qualified
    from dpsql._sql.options import parse_options
    from dpsql._sql.scope import check_reserved, resolve_rows
    from dpsql._sql.shadow import describe_over, policy_types

    parsed = dialect.parse(text)
    query = parsed.this
    if parsed.option_items() or query.find(exp.AggFunc, exp.Window, dialect.DPAggregate) is not None:
        return None
    check_statement(query)
    check_functions(query)
    check_reserved(query)
    database = database_of(query, policy, engine)
    jc = JoinContext(parse_options([]), engine.public_rows, database)
    rel, outputs = resolve_rows(query, policy, engine.columns, database, jc)
    types: list[str | None] = []
    for name, expr in outputs:
        if expr is None:
            raise BindError(f"column {name} is ambiguous: more than one column has that name; "
                            "select the columns by their tables")
        owner = rel.owner(expr)
        types.append((engine.columns(owner[0].name) or {}).get(owner[1]) if owner is not None else None)
    missing = [j for j, ty in enumerate(types) if ty is None]
    if missing:
        relation = rel.source if rel.source is not None else qualified(rel.table, database)
        found = describe_over([t.cast(exp.Expression, outputs[j][1]) for j in missing], relation, rel.joins,
                              engine.describe, policy_types(policy, engine.columns))
        for j, ty in zip(missing, found):
            types[j] = ty
    return _empty([(name, str(ty)) for (name, _), ty in zip(outputs, types)])


def parse_if_probe_like(text: str) -> "dialect.DPQuery | None":
    """``text`` parsed when it has a LIMIT or a WHERE (it may be a probe), else None: most
    statements are not parsed here at all. The caller hands the tree on to the pipeline, so a
    statement is parsed once."""
    low = text.lower()
    if ("limit" not in low and "where" not in low) or not _KEYWORDS.search(text):
        return None
    return dialect.parse(text)


def answer_probe(text: str, policy: Policy, engine: Backend, parsed: "dialect.DPQuery | None" = None
                 ) -> "pa.Table | None":
    """The empty, typed answer of a zero-row probe, or None if ``text`` is not one (or reads
    public tables only, and so simply runs). Raises the query's refusal if it has one.
    ``parsed``: ``text`` already parsed (by :func:`parse_if_probe_like`); it is not changed."""
    if parsed is None:
        parsed = parse_if_probe_like(text)
    if parsed is None or parsed.args.get("explain") or not is_probe(parsed.this):
        return None
    try:
        prepared = prepare(text, policy, engine)
    except PrivacyError:
        answer = _row_answer(text, policy, engine)
        if answer is None:
            raise
        return answer
    if prepared.public:
        return None
    return _dp_answer(prepared)
