"""The exponential mechanism's regions on whole-number candidates, with DuckDB's quantile.

On an integer column clipped to whole-number bounds (:func:`dpsql._sql.argtypes.whole_numbers`,
within ±2^53) the candidates are the whole numbers y of [L, U], and the utility is

    u(y) = −min(dist(p·n, [A(y), C(y)]), B),   A(y) = #{x < y},  C(y) = #{x ≤ y},

the distance from the target rank p·n to the ranks the value y spans: 0 for the y whose rank
range holds p·n. That y is DuckDB's ``quantile_disc(x, p)`` (the value at rank ⌈p·n⌉, 1-based)
and, for whole numbers, what ``quantile_cont`` gives whenever its interpolation stays within one
value: on Adult's age, 58 for p = 0.9, where both DuckDB functions say 58.

Between two data values, and for y that is no data value, A(y) = C(y) and u is the grid form's
−|c(y) − p·n| (:func:`dpsql.mechanisms.exponential.regions`, which draws on the grid of real
numbers and keeps Smith's intervals [x_t, x_{t+1}) with c = #{x ≤ y}). Before, whole numbers took
those intervals too, so that a data value y counted only as c(y) = #{x ≤ y}: with ties, the
value just below the quantile (57, whose C = 29300 is 4.9 ranks short of p·n = 29304.9) beat the
quantile itself (58, whose C = 29600 is 295 ranks past it).

Privacy: A(y) and C(y) move by 0 or 1 when a row is added or removed and p·n by p, so each of
A(y) − p·n and p·n − C(y) moves by at most max(p, 1 − p), and so does their maximum with 0 and its
minimum with B: Δu is the grid form's (×m for units, 1 under ``replace``, twice that with GROUP
BY), and ε' = ε/(2Δu) as there. For p = 0 the utility is −min(A(y), B), a count of the rows
below y, and for p = 1 it is −min(n − C(y), B), a count of the rows above: the monotone
utilities of the grid form, for which ε' = ε/Δu. Brute-forced in ``tests/test_perf_paths.py``.

The clip at B needs no D: the rank ranges [A, C] of the data values cover [0, n], so some value
is at distance 0 (for n = 0 every y is). The tails are then the y with C(y) ≤ R = ⌊p·n − B⌋ and
those with A(y) ≥ R' = ⌈p·n + B⌉, inside the window of ranks the SQL returns (its D is at
least 0, so its window is at least as wide).
"""

from __future__ import annotations

import typing as t

from dpsql.errors import InternalError

Point = tuple[float, int, int]
"""A distinct value v, its multiplicity c and its cumulative rank r = #{x_j ≤ v}."""


def whole_regions(points: t.Sequence[Point], n: int, p: float, eps_prime: float, lower: float,
                  upper: float, b: int) -> list[tuple[float, float, float]]:
    """The draw's regions ``(lo, hi, score)`` over the whole numbers of [L, U]: the candidates
    lo, lo + 1, ..., hi − 1 each weigh e^score; together they are every whole number of [L, U]
    once (the last region ends at U + 1). ``points``: consecutive distinct values (in rank
    order) that cover every rank in [R + 1, R'] ∩ [1, n]; extra points are ignored. Ranks are
    compared in integers (p·n = num/den exactly), each score one correctly rounded division."""
    for (_, _, r0), (_, c1, r1) in zip(points, points[1:]):
        if r1 - c1 != r0:
            raise InternalError("the order statistics are not contiguous")
    num, den = float(p).as_integer_ratio()
    num *= n  # p·n = num/den
    cap = b * den  # B, in units of 1/den
    lo_rank = (num - cap) // den  # R: C(y) <= R is the left tail
    hi_rank = -((-num - cap) // den)  # R': A(y) >= R' is the right tail

    def score(a: int, c: int) -> float:
        """−ε'·min(dist(p·n, [a, c]), B)."""
        return -eps_prime * (min(max(0, a * den - num, num - c * den), cap) / den)

    def holder(rank: int) -> float:
        """x_(rank): the value whose rank range (r − c, r] holds ``rank`` (1-based)."""
        for v, c, r in points:
            if r - c < rank <= r:
                return v
        raise InternalError("an order statistic of the window is missing")

    out: list[tuple[float, float, float]] = []
    if lo_rank >= 0:
        out.append((lower, holder(lo_rank + 1), -eps_prime * (cap / den)))
    else:  # y below the smallest value: A = C = 0
        if points and points[0][1] != points[0][2]:
            raise InternalError("the smallest value is missing")
        out.append((lower, points[0][0] if points else upper + 1.0, score(0, 0)))
    last = len(points) - 1
    for j, (v, c, r) in enumerate(points):
        if lo_rank < r and r - c < hi_rank:  # the value itself: A = r − c, C = r
            out.append((v, v + 1.0, score(r - c, r)))
        if lo_rank < r < hi_rank:  # the whole numbers after it, up to the next value: A = C = r
            if j < last:
                nxt = points[j + 1][0]
            elif r == n:
                nxt = upper + 1.0
            else:
                raise InternalError("an order statistic of the window is missing")
            if v + 1.0 < nxt:
                out.append((v + 1.0, nxt, score(r, r)))
    if hi_rank <= n:
        out.append((holder(hi_rank) + 1.0, upper + 1.0, -eps_prime * (cap / den)))
    return out
