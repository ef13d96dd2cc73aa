"""Bounds found privately: the histogram statement, the bounds, then the query with them.

A plan with bounds searches (:attr:`dpsql._plan.plan.Plan.searches`, one per aggregate that
opted in; the method and its guarantee are in :mod:`dpsql._privacy.approx_bounds`) runs in two
statements:

1. :func:`statement`: one log-scale histogram per such aggregate, over the same rows as the
   query (the FROM chain, every WHERE, and for an id unit the same truncation of each unit's
   rows), as ``UNION ALL`` of GROUP BYs: columns ``__agg`` (aggregate index), ``__bin`` and
   ``__n``. Like the statistics statement it reads private data and is total (no value can
   make it fail); its exact counts never leave.
2. After the charge of the whole query (both parts, one ledger transaction), :func:`choose` adds
   noise to every bin and picks the bounds, :func:`replan` plans and rewrites the query with
   them (the same cost: only the bounds change, which the plan checks), and the engine runs that
   statistics statement, released as any other and :func:`annotate`-d
   (:func:`dpsql._query.pipeline.release`).

The bin of a finite value v ≠ 0 with |v| ≥ 2^K_MIN is k = ⌊log2 |v|⌋, clamped to [K_MIN, K_MAX]:
``FLOOR(LOG2(a))`` corrected by one where the engine's logarithm rounds across a power of two
(exact powers of two decide), so that both engines put every value in the bin of
:func:`dpsql._privacy.approx_bounds.bin_of`.
"""

from __future__ import annotations

import functools
import typing as t

import sqlglot
from sqlglot import exp

from dpsql._compile import source as source_rule
from dpsql._compile.compiler import Compiler, compiler
from dpsql._compile.nodes import name, number
from dpsql._compile.plan import Column, Relation, Source, Truncation
from dpsql._compile.target import DUCKDB, Target
from dpsql._plan.rewrite import rewrite
from dpsql._privacy.approx_bounds import K_MAX, K_MIN, Found
from dpsql._sql import build
from dpsql._sql.total import total
from dpsql.errors import InternalError

if t.TYPE_CHECKING:
    from dpsql._plan.plan import Plan
    from dpsql._plan.rewrite import Rewritten
    from dpsql._policy.policy import Policy
    from dpsql._privacy.noise import NoiseSource
    from dpsql._release.release import Released

#: The columns of the histogram statement.
AGG, BIN, COUNT = "__agg", "__bin", "__n"
#: The largest finite double: ``BETWEEN -MAX AND MAX`` keeps finite values (NaN compares above
#: every number on both engines, so it is left out as ±inf are).
_MAX = "1.7976931348623157e308"

#: One search's bins, over its value ``__v`` in ``__src``: the value ``__x``, the exponent
#: ``__e`` of its magnitude, ⌊log2 |x|⌋ clamped to [K_MIN, K_MAX] for |x| ≥ 2^K_MIN, else NULL
#: (the zero bin), with the engine's FLOOR(LOG2(...)) corrected by one where its logarithm
#: rounded across a power of two; then the signed bin (k − K_MIN + 1 on the positive side).
#: The placeholders ``__kmin``, ``__kmax``, ``__tiny``, ``__shift``, ``__max`` and ``__i`` are
#: replaced by literals (:func:`_bins`).
_BINS = (
    "SELECT __i AS __agg, __bin, COUNT(*) AS __n FROM ("
    " SELECT CASE WHEN __e IS NULL THEN 0 WHEN __x > 0 THEN __e + __shift ELSE -(__e + __shift) END AS __bin"
    " FROM (SELECT __x, CASE WHEN ABS(__x) >= __tiny THEN LEAST(GREATEST("
    "  CAST(FLOOR(LOG2(ABS(__x))) AS INTEGER) + CASE WHEN POWER(2.0, CAST(FLOOR(LOG2(ABS(__x))) AS INTEGER) + 1)"
    "  <= ABS(__x) THEN 1 WHEN POWER(2.0, CAST(FLOOR(LOG2(ABS(__x))) AS INTEGER)) > ABS(__x) THEN -1 ELSE 0 END,"
    "  __kmin), __kmax) END AS __e"
    "  FROM (SELECT __v AS __x FROM __src WHERE __v BETWEEN -__max AND __max) AS __q) AS __q"
    ") AS __q GROUP BY __bin"
)


@functools.cache
def _template() -> exp.Select:
    """:data:`_BINS` parsed once, its constants in place."""
    constants = {"__kmin": number(K_MIN), "__kmax": number(K_MAX), "__tiny": number(2.0 ** K_MIN),
                 "__shift": number(1 - K_MIN), "__max": number(_MAX)}
    tree = sqlglot.parse_one(_BINS, read="duckdb")
    for c in list(tree.find_all(exp.Column)):
        if c.name in constants:
            c.replace(constants[c.name].copy())
    assert isinstance(tree, exp.Select)
    return tree


def _bins(index: int, value: str, comp: Compiler) -> exp.Select:
    """The bins of one search: :func:`_template` for aggregate ``index`` and value column
    ``value``, with the engine's base-2 logarithm (sqlglot reads ``LOG2(x)`` as ``LOG(2, x)``)."""
    tree = _template().copy()
    for c in list(tree.find_all(exp.Column)):
        if c.name == "__i":
            c.replace(number(index))
        elif c.name == "__v":
            c.set("this", name(value))
    for log in list(tree.find_all(exp.Log)):
        log.replace(comp.log2(log.expression))
    return tree


def _source(plan: "Plan") -> Source:
    """The rows the query reads, with the raw value of each searched aggregate as a DOUBLE:
    the rewrite's ``__src`` (same FROM chain, WHERE and truncation), before clipping."""
    bound, units = plan.bound, plan.units
    keys = build.keys(len(bound.group_by))
    by_id = units is not None and units.by_id and not bound.per_unit  # a per-unit subquery: one row per unit
    searched = {s.index for s in plan.searches}
    double = exp.DataType(this=exp.DataType.Type.DOUBLE)
    values = [Column(build.value(p.agg.index), exp.TryCast(this=total(p.agg.arg), to=double.copy()))
              for p in plan.prepared if p.agg.index in searched and p.agg.arg is not None]
    grouped: tuple[Column, ...] = ()
    truncation = None
    if by_id:
        assert bound.unit is not None and units is not None
        if units.by_groups:  # the truncation keeps g groups per unit: it needs the keys
            grouped = tuple(Column(k, total(g)) for k, g in zip(keys, bound.group_by))
        truncation = Truncation.of(units, keys if units.by_groups else ())
    assert bound.relation is not None
    return Source(Relation(bound.relation, tuple(bound.joins), bound.from_sql),
                  where=tuple(total(w) for w in bound.where), keys=grouped, values=tuple(values),
                  unit=total(bound.unit) if by_id and bound.unit is not None else None,
                  hashed=tuple(bound.hashed) if by_id else (), truncation=truncation)


def statement(plan: "Plan", target: Target | None = None) -> str:
    """The histogram statement of ``plan``'s searches, as ``target`` runs it (DuckDB's form by default)."""
    if not plan.searches:
        raise InternalError("the plan has no bounds to find")
    comp = compiler(target or DUCKDB)
    rows = source_rule.source(_source(plan), comp)
    parts = [_bins(s.index, build.value(s.index), comp) for s in plan.searches]
    tree: exp.Expression = parts[0]
    for part in parts[1:]:
        tree = exp.Union(this=tree, expression=part, distinct=False)
    tree.set("with_", exp.With(expressions=[comp.cte(build.SRC, rows)]))
    return comp.sql(comp.finish(tree))


def counts(names: list[str], rows: t.Any) -> dict[int, dict[int, int]]:
    """The exact counts of the histogram statement's rows: aggregate index → bin → rows."""
    from dpsql.backends.columns import Statistics

    if isinstance(rows, Statistics):
        rows = list(zip(*(rows.values(j).tolist() for j in range(len(names)))))
    at = {name.lower(): j for j, name in enumerate(names)}
    out: dict[int, dict[int, int]] = {}
    for row in rows:
        out.setdefault(int(row[at[AGG]]), {})[int(row[at[BIN]])] = int(row[at[COUNT]])
    return out


def choose(plan: "Plan", names: list[str], rows: t.Any, noise: "NoiseSource") -> dict[int, Found]:
    """The bounds of every search: noise on every bin, then the outermost passing bins. Call
    only after the whole query's budget is charged."""
    exact = counts(names, rows)
    return {s.index: s.choose(exact.get(s.index, {}), noise) for s in plan.searches}


def replan(first: "Plan", policy: "Policy", found: dict[int, Found],
           target: Target | None = None) -> tuple["Plan", "Rewritten"]:
    """``first`` planned and rewritten again with the bounds ``found``: the statement to run.

    The plan reads the bound query, the policy and the bounds only (no data). Its cost must
    equal the first plan's, which the ledger was charged: anything else is a bug (InternalError).
    """
    from dpsql._plan.plan import plan as make_plan

    p = make_plan(first.bound, policy, found=found, domain=first.public_keys)
    if p.cost != first.cost:
        raise InternalError("the plan with the bounds found costs other than what was charged")
    return p, (rewrite(p) if target is None else rewrite(p, target))


def annotate(plan: "Plan", released: "Released") -> None:
    """Each report entry of an aggregate whose bounds were searched: the bounds found, and the
    search's cost added to the entry's, so that the entries add up to what the query spent. An
    aggregate whose search found no bin above the threshold is released as NULL in every group
    (post-processing of the noisy counts; called before the released columns are read)."""
    column = {p.agg.index: j for j, p in enumerate(plan.prepared)}  # the report is in plan order
    for search in plan.searches:
        j, found = column.get(search.index), plan.found.get(search.index)
        if j is None or found is None or j >= len(released.report):
            continue
        entry = released.report[j]
        entry.epsilon += search.cost.epsilon
        entry.rho += search.cost.rho
        note = search.note(found)
        if not found.passed:
            released.values[j] = [None] * len(released.values[j])
            entry.sensitivity = entry.scale = entry.ci_half_width = None
            if j < len(released.widths):
                released.widths[j][:] = float("nan")
            entry.note = note
        else:
            entry.note = f"{note}; {entry.note}" if entry.note else note
