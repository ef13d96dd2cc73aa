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
  every table declared, every function allowed) is answered with its column names and types,
  bound by DuckDB without running it: names and types are public, as DESCRIBE shows them.
* A query on public tables runs as it is.
"""

from __future__ import annotations

import re
import typing as t

import duckdb
from sqlglot import exp

from dpsql.engine.duck import BIND_ERRORS
from dpsql.engine.pipeline import Engine, PreparedQuery, prepare
from dpsql.engine.sandbox import harden
from dpsql.errors import BindError, PrivacyError
from dpsql.privacy.policy import Policy
from dpsql.sql import dialect
from dpsql.sql.build import NOISY
from dpsql.sql.statistics import Statistic

if t.TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["is_probe", "answer_probe"]

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
        select = ", ".join(
            f"CAST(NULL AS {ty}) AS \"{name.replace(chr(34), chr(34) * 2)}\"" for name, ty in columns)
        if outer is None:
            return con.sql(f"SELECT {select} LIMIT 0").to_arrow_table()
        con.execute(f"CREATE TEMP TABLE {NOISY} AS SELECT {select} LIMIT 0")
        return con.sql(outer.sql(dialect="duckdb")).to_arrow_table()
    finally:
        con.close()


def _dp_answer(prepared: PreparedQuery) -> "pa.Table":
    plan, bound = prepared.plan, prepared.bound
    assert plan is not None and prepared.rewritten is not None and bound.outer is not None
    from dpsql.sql import build

    columns = [(build.key(j), ty) for j, ty in enumerate(bound.group_types)]
    columns += [(build.agg(p.agg.index), "BIGINT" if p.agg.statistic is Statistic.COUNT else "DOUBLE")
                for p in plan.prepared]
    if bound.outer_columns is not None:
        types = dict(columns)
        return _empty([(name, types[col]) for name, col in zip(bound.output_names, bound.outer_columns)])
    return _empty(columns, bound.outer)


def _row_answer(text: str, policy: Policy, engine: Engine) -> "pa.Table | None":
    """Names and types of a probe that only selects rows, or None if it is not such a query."""
    from dpsql.sql.bind import qualified
    from dpsql.sql.guards import check_functions, check_statement
    from dpsql.sql.scope import check_reserved, real_tables

    parsed = dialect.parse(text)
    query = parsed.this
    if parsed.option_items() or query.find(exp.AggFunc, exp.Window, dialect.DPAggregate) is not None:
        return None
    check_statement(query)
    check_functions(query)
    check_reserved(query)
    for node, tp in real_tables(query, policy, engine.columns):
        alias = node.args.get("alias")
        new = qualified(tp, engine.database)
        new.set("alias", alias.copy() if alias is not None else exp.TableAlias(this=exp.to_identifier(node.name)))
        node.replace(new)
    connection = getattr(engine, "connection", None)
    if connection is None:
        return None
    try:
        rows = connection.execute(f"DESCRIBE {query.sql(dialect='duckdb')}").fetchall()
    except BIND_ERRORS as err:
        raise BindError(f"DuckDB cannot bind the query: {str(err).splitlines()[0]}") from None
    return _empty([(str(r[0]), str(r[1])) for r in rows])


def answer_probe(text: str, policy: Policy, engine: Engine) -> "pa.Table | None":
    """The empty, typed answer of a zero-row probe, or None if ``text`` is not one (or reads
    public tables only, and so simply runs). Raises the query's refusal if it has one."""
    low = text.lower()
    if ("limit" not in low and "where" not in low) or not _KEYWORDS.search(text):
        return None  # no LIMIT and no WHERE: not a probe, and no second parse of every query
    parsed = dialect.parse(text)
    if parsed.args.get("explain") or not is_probe(parsed.this):
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
