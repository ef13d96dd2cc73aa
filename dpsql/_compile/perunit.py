"""Per-unit pre-aggregation: a unit's contribution bounded by clipping its partial statistics.

Two ways bound what one privacy unit (an id column, :mod:`dpsql._policy.units`) contributes:

* ``truncate`` (row truncation, Tumult's MaxRowsPerID): each unit keeps its k rows of smallest
  whole-row hash (with g: its g groups of smallest hash of unit and keys, r rows in each), by
  window functions (:mod:`dpsql._compile.truncate`); every mechanism reads those rows.
* ``clip`` (pre-aggregation; Wilson, Zhang, Lam, Desfontaines, Simmons-Marengo, Gipson,
  "Differentially Private SQL with Bounded User Contribution", PoPETs 2020): the rows of each
  (unit, group) are aggregated first, each partial statistic is clipped to the per-unit bounds,
  each unit keeps at most g of its groups (those of smallest hash of unit and keys: the choice
  depends on the unit and the keys, never on the values), and the statistics are the sums of
  the clipped partials. One GROUP BY of the unit (and keys), then the sums: hash aggregation,
  no sort of each unit's rows. The statement's form: :mod:`dpsql._compile.preaggregate`.

The per-unit bounds (c = k without GROUP BY, c = r with g; every summed value is an integer d of
its row on the fixed-point grid, in [A, B], :mod:`dpsql.mechanisms.fixed`):

==========  =====================================================================================
partial     per (unit, group), over the unit's rows there (n of them counted)
==========  =====================================================================================
count       n' = min(n, c)
total       SUM's Σd clipped to [c·min(A, 0), c·max(B, 0)] (the unit's total, not each row)
scaled      MEAN's and VAR's Σd (in [n·A, n·B]) and VAR's Σd² (in [0, n·max(A², B²)]): as they
            are when n ≤ c, else ``round(Σ·c/n)`` clipped to c·[A, B] (c·[0, max(A², B²)]): the
            unit's moments re-weighted to c rows, an integer on the same grid
==========  =====================================================================================

Sensitivity (the proof the mechanisms' docstrings cite). Each partial of one (unit, group) is a
deterministic function of that unit's rows there, and lies in a range R_p: count [0, c], total
c·[min(A, 0), max(B, 0)], scaled c·[A, B] (squares: c·[0, max(A², B²)]), and a MEAN's centred
partial 2Σd' − (A + B)·n' in [−n'(B − A), n'(B − A)] ⊂ c·[−(B − A), B − A]. A unit reaches one
group without GROUP BY, at most g with it. So adding or removing a unit moves the vector of
per-group statistics in at most G coordinates (G = 1 or g), each by at most the largest
magnitude in R_p: exactly what a unit of c rows (c per group in at most g groups) of values in
[A, B] moves it by under row truncation. Replacing a unit's rows moves each of at most 2G
coordinates as removing one and adding another, and a coordinate kept by both by at most the
width of R_p: the truncation's table under ``replace`` (SPEC §4.1) with c·G rows, each bound
again. The two modes therefore have the same L1 multiplier (c·G) and L2 multiplier (c·√G) and
the same sensitivities (times the policy's group size), which
``tests/test_perunit.py`` checks by brute force over every unit neighbour of small tables.

Which to use (:func:`choose`): the query's ``contribution`` option, else the table's policy,
else the one with less noise for the statistics: pre-aggregation when every aggregate is a
count, sum, mean or variance of the additive mechanisms and (with GROUP BY) a groups-per-unit
bound is in force; row truncation otherwise (order statistics, and the data-dependent
mechanisms, need rows; a GROUP BY without g would need g = k groups of c = k rows each, k times
the noise of truncation). At equal noise pre-aggregation is chosen: it drops nothing of a unit
under the bound, clips only what lies over it, and runs as hash aggregation. A GROUP BY of
those statistics without g is re-weighted instead (``reweight``, :mod:`dpsql._sql.reweight`):
each unit's partials weighted by min(1, k / its rows), the noise of row truncation without the
sort of each unit's rows.
"""

from __future__ import annotations

import dataclasses
import typing as t

from sqlglot import exp

from dpsql._policy.units import CLIP, TRUNCATE, UnitBounds
from dpsql._sql.reweight import REWEIGHT
from dpsql.errors import OptionError

#: the values of the ``contribution`` option and policy key
MODES = (TRUNCATE, CLIP, REWEIGHT, "auto")

#: the per-(unit, group) relation read by the clipping SELECT
PER_UNIT = "__per"

#: ``report_dropped``: the one-row CTE of the counts of units, and of units over the bound
CUT, UNITS_N, CUT_N = "__cut", "__units_n", "__cut_n"

#: (partial kind, A, B): how a statistic is clipped per unit (module docstring)
Kind = tuple[str, int, int]


def partial(i: int, name: str) -> str:
    """The column of statistic ``name`` of DP aggregate ``i`` computed per unit.

    >>> partial(0, "n")
    '__p0_n'
    """
    return f"__p{i}_{name}"


def _int(x: int) -> exp.Expression:
    return exp.Literal.number(str(int(x)))


def _case(ifs: list[tuple[exp.Expression, exp.Expression]], default: exp.Expression) -> exp.Case:
    return exp.Case(ifs=[exp.If(this=c, true=v) for c, v in ifs], default=default)


def clamp(x: exp.Expression, lo: int, hi: int) -> exp.Case:
    """``x`` clipped to the integers [lo, hi]; NULL stays NULL (DuckDB's LEAST would not).

    >>> clamp(exp.column("s"), -5, 10).sql()
    'CASE WHEN s < -5 THEN -5 WHEN s > 10 THEN 10 ELSE s END'
    """
    return _case([(exp.LT(this=x.copy(), expression=_int(lo)), _int(lo)),
                  (exp.GT(this=x.copy(), expression=_int(hi)), _int(hi))], x.copy())


def clipped(kind: Kind, x: exp.Expression, n: exp.Expression | None, cap: int) -> exp.Expression:
    """The partial ``x`` of one (unit, group) clipped as its ``kind`` says (module docstring);
    ``n`` is the aggregate's count partial (for ``scaled``), ``cap`` is c.

    >>> clipped(("count", 0, 1), exp.column("n"), None, 5).sql()
    'CASE WHEN n < 0 THEN 0 WHEN n > 5 THEN 5 ELSE n END'
    >>> clipped(("total", 2, 7), exp.column("s"), None, 5).sql()
    'CASE WHEN s < 0 THEN 0 WHEN s > 35 THEN 35 ELSE s END'
    >>> print(clipped(("scaled", -3, 3), exp.column("s"), exp.column("n"), 5).sql("duckdb"))
    CASE WHEN n <= 5 THEN s ELSE LEAST(GREATEST(CAST(ROUND(CAST(s AS DOUBLE) * 5 / n) AS INT128), -15), 15) END
    """
    what, a, b = kind
    if what == "count":
        return clamp(x, 0, cap)
    if what == "total":
        return clamp(x, cap * min(a, 0), cap * max(b, 0))
    assert what == "scaled" and n is not None, kind
    # n > c >= 1 here, so Σ is not NULL and |Σ·c/n| <= c·max(|A|, |B|): the cast cannot fail.
    ratio = exp.Div(this=exp.Mul(this=exp.Cast(this=x.copy(), to=exp.DataType.build("DOUBLE")), expression=_int(cap)),
                    expression=n.copy())
    scaled = exp.Cast(this=exp.Round(this=ratio), to=exp.DataType(this=exp.DataType.Type.INT128))
    # not NULL here: LEAST and GREATEST clip it (and the rounded value is computed once)
    bounded = exp.Anonymous(this="LEAST", expressions=[
        exp.Anonymous(this="GREATEST", expressions=[scaled, _int(cap * a)]), _int(cap * b)])
    return _case([(exp.LTE(this=n.copy(), expression=_int(cap)), x.copy())], bounded)


@dataclasses.dataclass(frozen=True)
class Aggregate:
    """One DP aggregate as pre-aggregation sees it: its index, the statistics over the rows it
    needs (name → aggregate expression, a mechanism's ``stats(v)``) and how each is clipped."""

    index: int
    stats: t.Mapping[str, exp.Expression]
    kinds: t.Mapping[str, Kind]


def aggregates(prepared: t.Iterable[t.Any], value: t.Callable[[int], str]) -> list[Aggregate]:
    """:class:`Aggregate` of each prepared aggregate (a mechanism's ``Prepared``: its ``stats``
    over its value column ``value(index)`` and its ``per_unit()`` kinds)."""
    out = []
    for prep in prepared:
        i = prep.agg.index
        stats = prep.stats(exp.column(value(i)) if prep.agg.arg is not None else None)
        kinds = prep.per_unit()
        out.append(Aggregate(i, {name: _partial_sum(expr, kinds[name]) for name, expr in stats.items()}, kinds))
    return out


def _partial_sum(expr: exp.Expression, kind: Kind) -> exp.Expression:
    """A unit's partial of ``SUM(CAST(d AS BIGINT))`` written ``SUM(d)`` when every d is below
    2^31 in magnitude: DuckDB sums it exactly (HUGEINT) as before; Spark sums it in a BIGINT,
    not in the DECIMAL(38, 0) the exact total needs (with ANSI off, as dpsql runs it, only a unit
    of more than 2^32 rows could wrap it, and its partial is still a function of its own rows,
    clipped after). The total over the units is exact on both engines (:func:`sums`).

    >>> d = exp.Sum(this=exp.Cast(this=exp.column("d"), to=exp.DataType.build("BIGINT")))
    >>> _partial_sum(d, ("total", 0, 2**31 - 1)).sql(), _partial_sum(d, ("scaled", 0, 2**62)).sql()
    ('SUM(d)', 'SUM(CAST(d AS BIGINT))')
    """
    cast = expr.this if isinstance(expr, exp.Sum) else None
    small = max(abs(kind[1]), abs(kind[2])) < 2**31
    if small and isinstance(cast, exp.Cast) and cast.to.is_type(exp.DataType.Type.BIGINT):
        return exp.Sum(this=cast.this.copy())
    return expr


def sums(i: int, stats: t.Mapping[str, exp.Expression]) -> dict[str, exp.Expression]:
    """The statistics of aggregate ``i`` over the pre-aggregated ``__src``: each the SUM of its
    clipped partial, exact (HUGEINT; Spark's DECIMAL(38, 0)).

    >>> {k: v.sql("duckdb") for k, v in sums(2, {"n": exp.Count(this=exp.Star())}).items()}
    {'n': 'SUM(CAST(__p2_n AS INT128))'}
    """
    return {name: exp.Sum(this=exp.Cast(this=exp.column(partial(i, name)), to=exp.DataType(this=exp.DataType.Type.INT128)))
            for name in stats}


def refusal(units: UnitBounds, grouped: bool, per_unit: bool,
            needs_rows: t.Sequence[str]) -> str | None:
    """Why pre-aggregation cannot bound this query (None: it can). ``needs_rows`` are the
    labels of the aggregates that need rows.

    >>> refusal(UnitBounds("id", 5), True, False, [])
    'a GROUP BY needs max_groups_per_unit to pre-aggregate (how many groups one id may reach)'
    >>> refusal(UnitBounds("id", 5), False, False, ["DP_MEDIAN(x)"])
    'DP_MEDIAN(x) needs rows'
    """
    if not units.by_id or per_unit:
        return "the query reads one row per unit" if per_unit else "the privacy unit is a row"
    if needs_rows:
        return f"{', '.join(needs_rows)} need{'s' if len(needs_rows) == 1 else ''} rows"
    if grouped and units.max_groups is None:
        return (f"a GROUP BY needs max_groups_per_unit to pre-aggregate (how many groups one "
                f"{units.unit} may reach)")
    return None


def choose(units: UnitBounds, asked: str | None, policy: str | None, grouped: bool, per_unit: bool,
           needs_rows: t.Sequence[str]) -> UnitBounds:
    """``units`` with the bounding mode in force and why: the query's ``contribution`` (``asked``),
    else the table policy's, else the one with less noise (module docstring; a GROUP BY without
    g: re-weighting, :mod:`dpsql._sql.reweight`, the noise of truncation without its sort). An
    explicit ``clip`` or ``reweight`` that cannot bound the query is refused (OptionError)
    before anything runs.

    >>> choose(UnitBounds("id", 5), None, None, False, False, []).mode
    'clip'
    >>> choose(UnitBounds("id", 5), None, None, False, False, ["DP_MEDIAN(x)"]).mode_reason
    'chosen: DP_MEDIAN(x) needs rows'
    >>> choose(UnitBounds("id", 5), None, None, True, False, []).mode_reason
    'chosen: a GROUP BY without max_groups_per_unit: the noise of row truncation, weighted by hash aggregation, no sort of its rows'
    """
    if not units.by_id or per_unit:
        return units  # a row unit, or one row per unit: nothing to bound either way
    why = refusal(units, grouped, per_unit, needs_rows)
    weighs = refusal(units, False, per_unit, needs_rows)  # re-weighting needs no g, and bounds none
    if weighs is None and grouped and units.max_groups is not None:
        weighs = "max_groups_per_unit is in force (its noise is r·g, not k)"
    given = asked if asked not in (None, "auto") else policy if policy not in (None, "auto") else None
    if (given == CLIP and why is not None) or (given == REWEIGHT and weighs is not None):
        where = "option 'contribution'" if asked == given else f"the policy's contribution = '{given}'"
        what = "pre-aggregation" if given == CLIP else "re-weighting"
        raise OptionError(f"{where}: {what} cannot bound this query: {why if given == CLIP else weighs}; "
                          "use contribution = 'truncate' (row truncation)")
    if given is not None:
        reason = "query" if asked == given else "policy"
        return dataclasses.replace(units, mode=given, mode_reason=reason)
    if why is None:
        return dataclasses.replace(units, mode=CLIP, mode_reason="chosen: the same noise as row truncation, "
                                   "and it drops nothing of a unit under its bound")
    if weighs is None:
        return dataclasses.replace(units, mode=REWEIGHT, mode_reason="chosen: a GROUP BY without max_groups_per_unit: "
                                   "the noise of row truncation, weighted by hash aggregation, no sort of its rows")
    return dataclasses.replace(units, mode=TRUNCATE, mode_reason=f"chosen: {why}")
