"""Re-weighting: a GROUP BY bounded per unit without max_groups_per_unit and without sorting its rows.

Mode ``reweight`` (the ``contribution`` option and policy key; :func:`dpsql._compile.perunit.choose`
picks it for a grouped count, sum, mean or variance of an id unit with no g). The rows of each
(unit u, group g) are aggregated first, as in pre-aggregation (:mod:`dpsql._compile.perunit`; Wilson,
Zhang, Lam, Desfontaines, Simmons-Marengo, Gipson, "Differentially Private SQL with Bounded
User Contribution", PoPETs 2020), with c_ug the rows of u in g; n_u = Σ_g c_ug is all of u's
rows (after the WHERE). A unit with n_u ≤ k keeps its partials as they are. A unit with more
has its rows weighted by k / n_u, and its k rows' worth apportioned to its groups in whole rows
by the largest remainders (Hamilton's method): c'_ug = ⌊c_ug·k / n_u⌋, plus 1 in the
k − Σ_g ⌊c_ug·k / n_u⌋ groups of largest remainder c_ug·k mod n_u (ties: the smaller keys), so
that Σ_g c'_ug = k exactly and c'_ug ≤ c_ug. Every other partial P of (u, g) is then weighted
as its rows are and rounded toward zero on its own grid (:func:`weighted`; every summed value
an integer d in [A, B] on the fixed-point grid of :mod:`dpsql.mechanisms.fixed`):

==========  ====================================================================================
partial     per (unit, group), n of the c_ug rows counted, W(P) = trunc(P · c' / c_ug) when
            n_u > k, else P (exact integer arithmetic, :func:`ratio`)
==========  ====================================================================================
rows        c' (above); a (unit, group) with c' = 0 is dropped (every partial of it)
count       n' = W(n)
total       SUM's W(Σd)
scaled      MEAN's and VAR's W(Σd) clipped to [A·n', B·n'], VAR's W(Σd²) to [0, max(A², B²)·n']
==========  ====================================================================================

Sensitivity (add/remove one unit). Σ_g c' = min(n_u, k) ≤ k; since n ≤ c_ug and
|Σd| ≤ n·max(|A|, |B|), and truncation toward zero never grows a magnitude, n' ≤ c' and
|W(Σd)| ≤ c'·max(|A|, |B|): Σ_g n' ≤ k and Σ_g |W(Σd)| ≤ k·max(|A|, |B|). A scaled partial lies
in n'·[A, B] (n'·[0, max(A², B²)]), so that its total over the groups, and MEAN's centred
partial 2Σd' − (A + B)·n' ∈ n'·[−(B − A), B − A], are bounded by k times a row's. At most k
groups keep a row (c' ≥ 1 in each, and they sum to at most k). So one unit moves the vector of
per-group statistics exactly as a unit of at most k rows in at most k groups does under row
truncation, in L1 by at most k times a row's sensitivity and in L2 by at most the same (an L2
norm is at most the L1 norm; truncation's L2 multiplier without g is k as well), and each
group's key count (units with c' ≥ 1) by 1 in at most k groups: the sensitivities, and the
noise, are those of row truncation. ``replace`` (SPEC §4.1) is a removal and an addition:
each coordinate moves by at most the width of its range (a partial of k rows' worth each
side), the rows of the truncation's ``replace`` table with m = k, as
:mod:`dpsql._compile.perunit`'s proof argues for clipped partials.

Why the weight is private to its unit: n_u, the apportionment and every partial of u are a
deterministic function of u's own rows (after the WHERE, over all groups: the remainders and
the keys that break ties are u's), not of any other unit's, so adding or removing another unit
leaves u's partials as they were; the sums over units are exact (HUGEINT; Spark's
DECIMAL(38, 0)). Computing n_u within the group only (c_ug instead of n_u) would let a unit
put k rows' worth in every group; giving every group with a remainder its extra row (rounding
up) would let Σ_g c' exceed k (``tests/test_reweight.py`` catches both by brute force).

The counts stay integers (the grid of 1 that the discrete count noise and the report need):
apportioned, a unit over k rows counts exactly k rows over its groups, as under truncation,
where rounding each group down alone would lose up to one row in every group it reaches. The
one sort is of each unit's (unit, group) partials by remainder (a window over the partials,
not over the rows). Integer arithmetic, not a floating-point ratio: ``trunc(P·a/b)`` is
``(P quot b)·a + ((P rem b)·a quot b)`` (quotient and remainder truncated toward zero on both
engines), where no intermediate exceeds a times a row's bound, so it cannot overflow.
"""

from __future__ import annotations

import typing as t

from sqlglot import exp

if t.TYPE_CHECKING:
    from dpsql._policy.units import UnitBounds

#: the mode's name
REWEIGHT = "reweight"

#: per-(unit, group) columns of the re-weighting: rows c_ug, the unit's rows n_u, weighted rows
#: c', and c_ug·k's quotient and remainder by n_u
ROWS, UNIT_ROWS, KEPT, FLOOR, REMAINDER = "__c", "__nu", "__cw", "__f", "__r"


def _int(x: int) -> exp.Literal:
    return exp.Literal.number(str(int(x)))


def _big(x: exp.Expression) -> exp.Cast:
    # the type node itself: DataType.build would parse the name each time
    return exp.Cast(this=x, to=exp.DataType(this=exp.DataType.Type.INT128))


def _num(x: "int | exp.Expression") -> exp.Expression:
    return _int(x) if isinstance(x, int) else x.copy()


def ratio(x: exp.Expression, num: "int | exp.Expression", den: exp.Expression) -> exp.Expression:
    """``trunc(x·num/den)`` exactly, for 0 <= num <= den and den > 0, as
    ``(x quot den)·num + ((x rem den)·num quot den)`` (module docstring); NULL stays NULL.

    >>> print(ratio(exp.column("s"), exp.column("cw"), exp.column("c")).sql("duckdb"))
    CAST(s // c AS INT128) * cw + CAST(s % c AS INT128) * cw // c
    >>> import duckdb
    >>> duckdb.sql("SELECT " + ratio(exp.column("s"), 3, exp.column("n")).sql("duckdb")
    ...            + " FROM (VALUES (7, 3), (7, 4), (-7, 4), (-8, 4), (NULL, 9)) v(s, n)").fetchall()
    [(7,), (5,), (-5,), (-6,), (None,)]
    """
    whole = exp.Mul(this=_big(exp.IntDiv(this=x.copy(), expression=den.copy())), expression=_num(num))
    part = exp.IntDiv(this=exp.Mul(this=_big(exp.Mod(this=x.copy(), expression=den.copy())), expression=_num(num)),
                      expression=den.copy())
    return exp.Add(this=whole, expression=part)


def kept_rows(k: int, keys: "t.Sequence[str]") -> exp.Expression:
    """c' of a (unit, group): ``__c`` when the unit has at most k rows, else ``__f`` (the floor
    of c·k/n) plus 1 in the (k − Σ_g __f) groups of the unit with the largest remainders ``__r``
    (ties: the smaller keys), so that Σ_g c' = k exactly (module docstring).

    >>> print(kept_rows(5, ["__k0"]).sql("duckdb"))
    CASE WHEN __nu <= 5 THEN __c ELSE __f + CASE WHEN ROW_NUMBER() OVER (PARTITION BY __u ORDER BY __r DESC, __k0) <= 5 - SUM(__f) OVER (PARTITION BY __u) THEN 1 ELSE 0 END END
    """
    return exp.Case(ifs=[exp.If(this=exp.LTE(this=exp.column(UNIT_ROWS), expression=_int(k)),
                                true=exp.column(ROWS))], default=apportioned(k, keys))


def apportioned(k: int, keys: "t.Sequence[str]") -> exp.Expression:
    """c' of a (unit, group) whose unit has more than k rows (:func:`kept_rows`): ``__f`` plus
    1 in the (k − Σ_g __f) groups of the unit with the largest remainders ``__r``.

    >>> print(apportioned(5, ["__k0"]).sql("duckdb"))
    __f + CASE WHEN ROW_NUMBER() OVER (PARTITION BY __u ORDER BY __r DESC, __k0) <= 5 - SUM(__f) OVER (PARTITION BY __u) THEN 1 ELSE 0 END
    """
    unit = [exp.column("__u")]
    order = exp.Order(expressions=[exp.Ordered(this=exp.column(REMAINDER), desc=True),
                                   *(exp.Ordered(this=exp.column(key)) for key in keys)])
    rank = exp.Window(this=exp.RowNumber(), partition_by=[u.copy() for u in unit], order=order)
    left = exp.Sub(this=_int(k), expression=exp.Window(this=exp.Sum(this=exp.column(FLOOR)),
                                                       partition_by=[u.copy() for u in unit]))
    extra = exp.Case(ifs=[exp.If(this=exp.LTE(this=rank, expression=left), true=_int(1))], default=_int(0))
    return exp.Add(this=exp.column(FLOOR), expression=extra)


def floor_and_remainder(k: int) -> tuple[exp.Expression, exp.Expression]:
    """``__f`` = c·k quot n and ``__r`` = c·k rem n of a (unit, group) (HUGEINT: c·k cannot overflow).

    >>> [e.sql("duckdb") for e in floor_and_remainder(5)]
    ['CAST(__c AS INT128) * 5 // __nu', 'CAST(__c AS INT128) * 5 % __nu']
    """
    ck = exp.Mul(this=_big(exp.column(ROWS)), expression=_int(k))
    return (exp.IntDiv(this=ck, expression=exp.column(UNIT_ROWS)),
            exp.Mod(this=ck.copy(), expression=exp.column(UNIT_ROWS)))


def weighted(x: exp.Expression, k: int) -> exp.Expression:
    """A partial weighted as its (unit, group)'s rows are, c'/c, rounded toward zero: ``x`` when
    the unit has at most k rows (module docstring).

    >>> print(weighted(exp.column("s"), 5).sql("duckdb"))
    CASE WHEN __nu <= 5 THEN s ELSE CAST(s // __c AS INT128) * __cw + CAST(s % __c AS INT128) * __cw // __c END
    """
    return exp.Case(ifs=[exp.If(this=exp.LTE(this=exp.column(UNIT_ROWS), expression=_int(k)), true=x.copy())],
                    default=ratio(x, exp.column(KEPT), exp.column(ROWS)))


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
    """A weighted partial of ``kind`` (:data:`dpsql._compile.perunit.Kind`) as the module docstring
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
    """EXPLAIN's lines on the unit (:meth:`dpsql._policy.units.UnitBounds.explain`), with what
    re-weighting does in place of the truncation's line when it is the mode in force.

    >>> from dpsql._policy.units import UnitBounds
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
                    f"aggregated per group; one with n > {units.max_rows} rows counts as {units.max_rows} "
                    f"whole rows shared among its groups in proportion (largest remainders), its counts "
                    f"and sums weighted alike, rounded toward zero; no sort of its rows")
        elif line.startswith("bounding: row truncation"):
            line = line.replace("bounding: row truncation", "bounding: re-weighting", 1)
        out.append(line)
    return out


def note(units: "UnitBounds") -> str:
    """What the report's line says of the unit (:attr:`dpsql._policy.units.UnitBounds.note`),
    re-weighting said.

    >>> import dataclasses
    >>> from dpsql._policy.units import UnitBounds
    >>> note(dataclasses.replace(UnitBounds("id", 5), mode=REWEIGHT))
    'per id, ≤ 5 rows, re-weighted'
    """
    return units.note + (", re-weighted" if units.mode == REWEIGHT and units.by_id else "")
