"""Bounds found privately: the histogram statement, the bounds, then the query with them.

A plan with bounds searches (:attr:`dpsql.engine.plan.Plan.searches`, one per aggregate that
opted in; the method and its guarantee are in :mod:`dpsql.privacy.approx_bounds`) runs in two
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
   (:func:`dpsql.engine.pipeline.release`).

The bin of a finite value v ≠ 0 with |v| ≥ 2^K_MIN is k = ⌊log2 |v|⌋, clamped to [K_MIN, K_MAX]:
``FLOOR(LOG2(a))`` corrected by one where the engine's logarithm rounds across a power of two
(exact powers of two decide), so that both engines put every value in the bin of
:func:`dpsql.privacy.approx_bounds.bin_of`.
"""

from __future__ import annotations

import typing as t

from dpsql.engine.rewrite import rewrite, truncate
from dpsql.errors import InternalError
from dpsql.privacy.approx_bounds import K_MAX, K_MIN, Found
from dpsql.sql import build
from dpsql.sql.target import DUCKDB, Target
from dpsql.sql.total import total

if t.TYPE_CHECKING:
    from dpsql.engine.plan import Plan
    from dpsql.engine.release import Released
    from dpsql.engine.rewrite import Rewritten
    from dpsql.privacy.noise import NoiseSource
    from dpsql.privacy.policy import Policy

#: The columns of the histogram statement.
AGG, BIN, COUNT = "__agg", "__bin", "__n"
#: Inner names: the value, and the exponent k of its magnitude (its bin is k - K_MIN + 1, signed).
_X, _E = "__x", "__e"
#: The largest finite double: ``BETWEEN -MAX AND MAX`` keeps finite values (NaN compares above
#: every number on both engines, so it is left out as ±inf are).
_MAX = "1.7976931348623157e308"


def _exponent(x: str) -> str:
    """⌊log2 |x|⌋ clamped to [K_MIN, K_MAX] for |x| ≥ 2^K_MIN, else NULL (the zero bin): the
    engine's FLOOR(LOG2(...)) corrected by one where its logarithm rounded across a power of two."""
    a, e = f"ABS({x})", f"CAST(FLOOR(LOG2(ABS({x}))) AS INTEGER)"
    k = f"{e} + CASE WHEN POWER(2.0, {e} + 1) <= {a} THEN 1 WHEN POWER(2.0, {e}) > {a} THEN -1 ELSE 0 END"
    return f"CASE WHEN {a} >= {2.0 ** K_MIN!r} THEN LEAST(GREATEST({k}, {K_MIN}), {K_MAX}) END"


def _source(plan: "Plan") -> str:
    """The rows the query reads, with the raw value of each searched aggregate as a DOUBLE:
    the rewrite's ``__src`` (same FROM chain, WHERE and truncation), before clipping."""
    bound, units = plan.bound, plan.units
    keys = build.keys(len(bound.group_by))
    by_id = units is not None and units.by_id and not bound.per_unit  # a per-unit subquery: one row per unit
    searched = {s.index for s in plan.searches}
    projections = [f"TRY_CAST({total(p.agg.arg).sql(dialect='duckdb')} AS DOUBLE) AS {build.value(p.agg.index)}"
                   for p in plan.prepared if p.agg.index in searched and p.agg.arg is not None]
    if by_id:
        assert bound.unit is not None and units is not None
        if units.by_groups:  # the truncation keeps g groups per unit: it needs the keys
            projections += [f"{total(g).sql(dialect='duckdb')} AS {k}" for k, g in zip(keys, bound.group_by)]
        projections.append(f"{total(bound.unit).sql(dialect='duckdb')} AS {build.UNIT}")
        projections.append(f"HASH({', '.join(bound.hashed)}) AS {build.ROW_HASH}")
    src = f"SELECT {', '.join(projections)} FROM {bound.from_sql}"
    if bound.where:
        src += " WHERE " + " AND ".join(total(w).sql(dialect="duckdb") for w in bound.where)
    if by_id:
        assert units is not None
        src = truncate(src, units, keys if units.by_groups else [])
    return src


def statement(plan: "Plan", target: Target | None = None) -> str:
    """The histogram statement of ``plan``'s searches, as ``target`` runs it (DuckDB's form by default)."""
    if not plan.searches:
        raise InternalError("the plan has no bounds to find")
    parts = []
    shift = 1 - K_MIN  # bin j = k - K_MIN + 1 on the positive side
    for search in plan.searches:
        v = build.value(search.index)
        values = f"SELECT {v} AS {_X} FROM {build.SRC} WHERE {v} BETWEEN -{_MAX} AND {_MAX}"
        exponents = f"SELECT {_X}, {_exponent(_X)} AS {_E} FROM ({values}) AS {build.RAW}"
        bins = (f"SELECT CASE WHEN {_E} IS NULL THEN 0 WHEN {_X} > 0 THEN {_E} + {shift} ELSE -({_E} + {shift}) END "
                f"AS {BIN} FROM ({exponents}) AS {build.RAW}")
        parts.append(f"SELECT {search.index} AS {AGG}, {BIN}, COUNT(*) AS {COUNT} FROM ({bins}) AS {build.RAW} "
                     f"GROUP BY {BIN}")
    sql = f"WITH {build.SRC} AS ({_source(plan)}) " + " UNION ALL ".join(parts)
    return (target or DUCKDB).finish(sql)


def counts(names: list[str], rows: t.Any) -> dict[int, dict[int, int]]:
    """The exact counts of the histogram statement's rows: aggregate index → bin → rows."""
    from dpsql.engine.columns import Statistics

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
    from dpsql.engine.plan import plan as make_plan

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
