"""Re-weighting: a GROUP BY bounded per unit without a sort and without max_groups_per_unit.

Mode ``reweight`` (the ``contribution`` option and policy key; :func:`dpsql.sql.perunit.choose`
picks it for a grouped count, sum, mean or variance of an id unit with no g). The rows of each
(unit u, group g) are aggregated first, as in pre-aggregation (:mod:`dpsql.sql.perunit`; Wilson,
Zhang, Lam, Desfontaines, Simmons-Marengo, Gipson, "Differentially Private SQL with Bounded
User Contribution", PoPETs 2020), with c_ug the rows of u in g; n_u = Σ_g c_ug is all of u's
rows (after the WHERE). Every partial P of (u, g) is then weighted by w_u = min(1, k / n_u)
and rounded toward zero on its own grid (:func:`weighted`; k = max_rows_per_unit, every summed
value an integer d in [A, B] on the fixed-point grid of :mod:`dpsql.mechanisms.fixed`):

==========  ====================================================================================
partial     per (unit, group), n of the c_ug rows counted, with W(P) = trunc(P · k / n_u) when
            n_u > k, else P (exact integer arithmetic, :func:`weighted`)
==========  ====================================================================================
rows        c' = W(c_ug); a (unit, group) with c' = 0 is dropped (every partial of it)
count       n' = W(n)
total       SUM's W(Σd)
scaled      MEAN's and VAR's W(Σd) clipped to [A·n', B·n'], VAR's W(Σd²) to [0, max(A², B²)·n']
==========  ====================================================================================

Sensitivity (add/remove one unit). Since Σ_g c_ug = n_u, Σ_g n ≤ n_u and |Σd| ≤ n·max(|A|, |B|):
Σ_g c' ≤ Σ_g w_u·c_ug ≤ min(n_u, k) ≤ k, likewise Σ_g n' ≤ k, Σ_g |W(Σd)| ≤ w_u·n_u·max(|A|, |B|)
≤ k·max(|A|, |B|) (truncation toward zero never grows a magnitude), and a scaled partial lies
in n'·[A, B] (n'·[0, max(A², B²)]) so that its total over the groups, and MEAN's centred
partial 2Σd' − (A + B)·n' ∈ n'·[−(B − A), B − A], are bounded by k times a row's. At most k
groups keep a row (c' ≥ 1 in each, and they sum to at most k). So one unit moves the vector of
per-group statistics exactly as a unit of at most k rows in at most k groups does under row
truncation, in L1 by at most k times a row's sensitivity and in L2 by at most the same (an L2
norm is at most the L1 norm; truncation's L2 multiplier without g is k as well), and each
group's key count (units with c' ≥ 1) by 1 in at most k groups: the sensitivities, and the
noise, are those of row truncation. ``replace`` (SPEC §4.1) is a removal and an addition:
each coordinate moves by at most the width of its range (a partial of k rows' worth each
side), the rows of the truncation's ``replace`` table with m = k, as
:mod:`dpsql.sql.perunit`'s proof argues for clipped partials.

Why the weight is private to its unit: w_u, and every partial of u, is a deterministic function
of u's own rows (after the WHERE, over all groups), not of any other unit's, so adding or
removing another unit leaves u's partials as they were; the sums over units are exact
(HUGEINT; Spark's DECIMAL(38, 0)). Computing n_u within the group only (c_ug instead of n_u)
would let a unit put k rows' worth in every group; rounding half away from zero would let
Σ_g c' exceed k (``tests/test_reweight.py`` catches both by brute force).

The counts stay integers (rounded toward zero, the grid of 1 that the discrete count noise and
the report need); a unit over k rows loses less than one row per group it reaches, and nothing
when n_u ≤ k. Integer arithmetic, not a floating-point ratio: ``trunc(P·k/n)`` is
``(P quot n)·k + ((P rem n)·k quot n)`` (quotient and remainder truncated toward zero on
both engines), where no intermediate exceeds k times a row's bound, so it cannot overflow.
"""

from __future__ import annotations

import typing as t

from sqlglot import exp

if t.TYPE_CHECKING:
    from dpsql.privacy.units import UnitBounds

#: the mode's name
REWEIGHT = "reweight"

#: per-(unit, group) columns of the re-weighting: rows c_ug, the unit's rows n_u, weighted rows c'
ROWS, UNIT_ROWS, KEPT = "__c", "__nu", "__cw"

_BIG = "HUGEINT"


def _int(x: int) -> exp.Literal:
    return exp.Literal.number(str(int(x)))


def _big(x: exp.Expression) -> exp.Cast:
    return exp.Cast(this=x, to=exp.DataType.build(_BIG))


def weighted(x: exp.Expression, n: exp.Expression, k: int) -> exp.Expression:
    """``trunc(x·k/n)`` when n > k, else ``x``: a partial weighted by min(1, k/n) and rounded
    toward zero, exactly (module docstring); NULL stays NULL.

    >>> print(weighted(exp.column("s"), exp.column("__nu"), 5).sql("duckdb"))
    CASE WHEN __nu <= 5 THEN s ELSE CAST(s // __nu AS INT128) * 5 + CAST(s % __nu AS INT128) * 5 // __nu END
    >>> import duckdb
    >>> duckdb.sql("SELECT " + weighted(exp.column("s"), exp.column("n"), 3).sql("duckdb")
    ...            + " FROM (VALUES (7, 2), (7, 4), (-7, 4), (-8, 4), (NULL, 9)) v(s, n)").fetchall()
    [(7,), (5,), (-5,), (-6,), (None,)]
    """
    quot = exp.IntDiv(this=x.copy(), expression=n.copy())
    rem = exp.Mod(this=x.copy(), expression=n.copy())
    whole = exp.Mul(this=_big(quot), expression=_int(k))
    part = exp.IntDiv(this=exp.Mul(this=_big(rem), expression=_int(k)),
                      expression=n.copy())
    out = exp.Add(this=whole, expression=part)
    return exp.Case(ifs=[exp.If(this=exp.LTE(this=n.copy(), expression=_int(k)), true=x.copy())], default=out)


def within(x: exp.Expression, n: exp.Expression, lo: int, hi: int) -> exp.Expression:
    """``x`` clipped to [lo·n, hi·n] (a scaled partial to its weighted count's range); NULL stays NULL.

    >>> print(within(exp.column("s"), exp.column("n"), -3, 2).sql("duckdb"))
    CASE WHEN s < -3 * n THEN -3 * n WHEN s > 2 * n THEN 2 * n ELSE s END
    """
    low = exp.Mul(this=_int(lo), expression=n.copy())
    high = exp.Mul(this=_int(hi), expression=n.copy())
    return exp.Case(ifs=[exp.If(this=exp.LT(this=x.copy(), expression=low), true=low.copy()),
                         exp.If(this=exp.GT(this=x.copy(), expression=high), true=high.copy())], default=x.copy())


def bounded(kind: tuple[str, int, int], x: exp.Expression, n: exp.Expression | None) -> exp.Expression:
    """A weighted partial of ``kind`` (:data:`dpsql.sql.perunit.Kind`) as the module docstring
    bounds it: counts and totals as they are, scaled sums within their weighted count ``n``'s range.

    >>> bounded(("total", -2, 3), exp.column("s"), None).sql()
    's'
    >>> bounded(("scaled", -2, 3), exp.column("s"), exp.column("n")).sql()
    'CASE WHEN s < -2 * n THEN -2 * n WHEN s > 3 * n THEN 3 * n ELSE s END'
    """
    what, a, b = kind
    if what != "scaled":
        return x.copy()
    assert n is not None, kind
    return within(x, n, a, b)


def explain(units: "UnitBounds") -> list[str]:
    """EXPLAIN's lines on the unit (:meth:`dpsql.privacy.units.UnitBounds.explain`), with what
    re-weighting does in place of the truncation's line when it is the mode in force.

    >>> from dpsql.privacy.units import UnitBounds
    >>> import dataclasses
    >>> lines = explain(dataclasses.replace(UnitBounds("id", 5), mode=REWEIGHT, mode_reason="query"))
    >>> [line.split(":")[0] for line in lines if "re-weight" in line]
    ['bounding', 're-weighting (in the rewritten SQL, after the WHERE)']
    >>> any(line.startswith("truncation") for line in lines)
    False
    """
    lines = units.explain()
    if units.mode != REWEIGHT or not units.by_id:
        return lines
    out = []
    for line in lines:
        if line.startswith("truncation (in the rewritten SQL"):
            line = (f"re-weighting (in the rewritten SQL, after the WHERE): each {units.unit}'s rows are "
                    f"aggregated per group, then every count and sum of a {units.unit} with n > "
                    f"{units.max_rows} rows is weighted by {units.max_rows}/n and rounded toward zero "
                    f"(its groups whose rows round to 0 are dropped); no sort")
        elif line.startswith("bounding: row truncation"):
            line = line.replace("bounding: row truncation", "bounding: re-weighting", 1)
        out.append(line)
    return out


def note(units: "UnitBounds") -> str:
    """What the report's line says of the unit (:attr:`dpsql.privacy.units.UnitBounds.note`),
    re-weighting said.

    >>> import dataclasses
    >>> from dpsql.privacy.units import UnitBounds
    >>> note(dataclasses.replace(UnitBounds("id", 5), mode=REWEIGHT))
    'per id, ≤ 5 rows, re-weighted'
    """
    return units.note + (", re-weighted" if units.mode == REWEIGHT and units.by_id else "")
