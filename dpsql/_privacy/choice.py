"""Exact draws of an index from log weights: the choice step of the exponential mechanism.

Given floats w_1..w_K (−inf for weight zero), :func:`weighted` returns i with probability
exactly e^(w_i)/Σ_j e^(w_j), each w_i taken as the real number its float holds. The method is
inversion (Devroye 1986, §III.2): with C_i = Σ_{j≤i} e^(w_j − t) (t = max w) and S = C_K, i is
the first index with V·S < C_i for V uniform in [0, 1), so P[i] = (C_i − C_{i−1})/S.

V is read 53 bits first, V ∈ [a, a + 2^−53) with a = u·2^−53 for a uniform word u, and the
index is returned only when every V of that interval gives the same one: the floats certify it.
Their error has a bound E (below), and i is certain when C_{i−1} ≤ a·S and (a + 2^−53)·S < C_i
hold with every float widened by E. The bound, for u = 2^−53 the unit roundoff:

* d_i = fl(w_i − t) = (w_i − t)(1 + θ), |θ| ≤ u, and ``math.exp`` is within 2u of e^(d_i) (glibc
  documents an error below one unit in the last place), so |fl(e^(d_i)) − e^(w_i − t)| ≤
  (|d_i| + 4)·u·e^(d_i)·(1 + 2^−40) ≤ 5u while |d_i| ≤ 746, because x·e^(−x) ≤ 1/e and
  e^(d_i) ≤ 1; past that, both the weight and its float are below 2^−1074;
* the running sums add at most (K − 1)·u·(1 + 2^−40) of the total (Higham 2002, §4.2);
* the two products with a and a + 2^−53 round once each, by at most u of S.

The top weight is e^0 = 1 exactly, so S ≥ 1, and E = (10·K + 16)·2^−52·S + K·2^−1070 covers all
three with room to spare. An undecided draw (its probability is about 2·K·E/S, below 2^−40 for
K below 10^3) is settled in :mod:`decimal`, where ``exp`` is correctly rounded: more bits of V and
more digits until the index is certain. The float path never rounds a probability, it only
certifies an index that the exact inversion gives, so the law is exact (Mironov 2012 does not
apply). ``tests/test_choice.py`` checks the law on both paths and that they agree draw by draw.
"""

from __future__ import annotations

import bisect
import decimal
import itertools
import math
import os
import typing as t

if t.TYPE_CHECKING:  # the type only: dlaplace imports numpy, which this module does not need
    from dpsql._privacy.dlaplace import RandomBytes

__all__ = ["weighted", "finite_scores"]

#: Bits of V read at once: a word below 2^53 times 2^-53 is an exact float.
WORD = 53
#: The float error bound's factor: E = (FACTOR·K + 16)·2^−52·S (see the module's docstring).
FACTOR = 10


def finite_scores(log_weights: t.Sequence[float]) -> list[tuple[int, float]]:
    """(index, weight) of the entries other than −inf; refuses NaN, +inf and all −inf."""
    out = []
    for i, w in enumerate(map(float, log_weights)):
        if math.isnan(w) or w == math.inf:
            raise ValueError(f"log weight {i} must be finite or -inf, got {w!r}")
        if w != -math.inf:
            out.append((i, w))
    if not out:
        raise ValueError("choice_weighted needs at least one finite log weight")
    return out


def weighted(log_weights: t.Sequence[float], source: RandomBytes = os.urandom) -> int:
    """Index i with probability exactly e^(w_i)/Σ_j e^(w_j) (−inf entries never); see the module."""
    finite = finite_scores(log_weights)
    if len(finite) == 1:
        return finite[0][0]
    w = [x for _, x in finite]
    top = max(w)
    cum = list(itertools.accumulate(math.exp(x - top) for x in w))
    total = cum[-1]
    err = (FACTOR * len(w) + 16) * 2.0**-52 * total + len(w) * 2.0**-1070
    word = int.from_bytes(source(8), "little") >> (64 - WORD)
    a = word * 2.0**-WORD
    low, high = a * total, (a + 2.0**-WORD) * total
    i = _certain(cum, low, high, err)
    return finite[_exact(w, top, word, source) if i is None else i][0]


def _certain(cum: list[t.Any], low: t.Any, high: t.Any, err: t.Any) -> int | None:
    """The index i with cum[i−1] ≤ low and high < cum[i] however each value moves by up to
    ``err`` (floats or decimals), or None when the interval [low, high] is not certainly in one step."""
    i = bisect.bisect_right(cum, low)
    if i < len(cum) and (i == 0 or cum[i - 1] + 2 * err <= low) and high + 2 * err < cum[i]:
        return i
    return None


def _exact(w: list[float], top: float, word: int, source: RandomBytes) -> int:
    """The inversion in decimal arithmetic for V in [word·2^−53, (word + 1)·2^−53): more bits of
    V and more digits until one index holds for the whole interval. Each operation is within
    δ = 10^(1−prec) relative and ``exp`` is correctly rounded, so a term e^d (d ≤ 0) is within
    (|d|·e^d + 1)·δ·(1 + δ) ≤ 2δ of e^(w − t) (its exponent's rounding, |d|·δ, moves it by a
    factor e^(|d|·δ); a term too small for that to be linear is below δ whichever way it
    moves); with the sums and products the error is below (3K + 10)·δ of the total, and
    E = (4K + 20)·10^(2−prec)·S is used."""
    num, width, prec = word, WORD, 40
    while True:
        with decimal.localcontext() as ctx:
            ctx.prec, ctx.Emin, ctx.Emax = prec, decimal.MIN_EMIN, decimal.MAX_EMAX
            ctx.traps[decimal.Underflow] = ctx.traps[decimal.Overflow] = False
            base = decimal.Decimal(top)
            d = [decimal.Decimal(x) - base for x in w]
            cum = list(itertools.accumulate(x.exp() for x in d))
            total = cum[-1]
            err = (4 * len(w) + 20) * decimal.Decimal(10) ** (2 - prec) * total
            scale = decimal.Decimal(2) ** -width
            low = decimal.Decimal(num) * scale * total
            high = decimal.Decimal(num + 1) * scale * total
            i = _certain(cum, low, high, err)
            if i is not None:
                return i
        num = (num << 64) | int.from_bytes(source(8), "little")
        width, prec = width + 64, prec + 25
