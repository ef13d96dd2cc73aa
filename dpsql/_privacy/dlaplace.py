"""Exact discrete Laplace noise for whole arrays: CKS20's Algorithm 2, run on every lane at once.

Canonne, Kamath and Steinke 2020 ("The Discrete Gaussian for Differential Privacy", CKS20)
give an exact sampler of the discrete Laplace law P[y] ∝ exp(−|y|·s/t) on the integers for a
rational scale t/s, built from uniform integers only (no floating point, so no Mironov 2012
attack). This module runs that algorithm on n independent lanes with numpy: each lane is one run
of the algorithm, every loop is a loop over the lanes still running, and each lane reads its
own fresh random words. A lane's result is therefore exactly distributed as one run of the scalar
algorithm, independently of the other lanes (which lane finishes in which round does not
depend on anything but that lane's own draws).

Randomness: bytes from a ChaCha20 stream keyed by the operating system's CSPRNG
(:func:`dpsql._privacy.csprng.random_bytes`) for releases, read as
little-endian 8-, 32- or 64-bit words; tests pass a seeded source of bytes. Integers stay in int64 while they provably fit; a lane whose
intermediate would not (a geometric count past 2^63/t, probability about e^(−2^63/t)) finishes
in Python integers, so the law is exact for every lane.

The building blocks, as in CKS20:

* Bernoulli(1/k) for a whole number 1 ≤ k < 2^32: a uniform 32-bit word below the largest
  multiple of k under 2^32 (rejection), true when the word is divisible by k;
* a uniform integer in [0, t): the low ⌈log₂ t⌉ bits of a 32- or 64-bit word, rejected when ≥ t;
* Bernoulli(exp(−γ)) for rational γ = u/t ∈ [0, 1] (CKS20 Algorithm 1): K = 1; while
  Bernoulli(γ/K): K += 1; true iff K is odd. Bernoulli(γ/K) is the product of the independent
  events {uniform in [0, t) < u} and Bernoulli(1/K), whose probabilities multiply to u/(tK);
* discrete Laplace (CKS20 Algorithm 2): draw U uniform in [0, t) and keep it with probability
  exp(−U/t); draw V, the number of successes of Bernoulli(exp(−1)) before the first failure;
  X = U + t·V; Y = ⌊X/s⌋; a sign bit B; reject (B = 1, Y = 0); return (1 − 2B)·Y.

For scales up to 2^32 (every grid release: their scale is 2^30–2^31 units of the grid; counts)
:func:`discrete_laplace` draws the same law by inversion instead, about ten times faster on
arrays, exact as well: the magnitude G = ⌊b·(−ln V)⌋ of a uniform V in (0, 1] has
P[G ≥ g] = P[V ≤ e^(−g/b)] = e^(−g/b), the geometric law of Algorithm 2's Y (b = t/s; Devroye
1986, §II.2 and §X.4.2). V is read 53 bits first: V ∈ (w·2^−53, (w + 1)·2^−53] for a word w, so
G lies between ⌊x(end)⌋ and ⌊x(start)⌋ of that interval, x(v) = −b·ln v. Both ends are exact
floats, and floating point evaluates x there with a relative error below 2^−50: ``log`` of an
exact argument is within about one unit in the last place of its result, near V = 1 too (there is
no subtraction to cancel; measured against 50-digit logarithms in every region of V by
``tests/test_dlaplace.py``, on the machine that runs the tests). A lane takes G from the
floats only when both ends, each widened by 2^−46 of its size (a 16-fold margin, checked against
decimal arithmetic in ``tests/test_dlaplace.py``), have the same floor; the few others
(about 2^−13 of them at a grid scale) decide in Python's ``decimal`` (``ln`` is correctly
rounded there), reading 64 more bits of V and 25 more digits whenever the interval still
straddles an integer. The float path never rounds a probability: it only certifies a floor
that the exact value has, so the law is exactly discrete Laplace (Mironov 2012 does not apply).
Sign and zero as in Algorithm 2.
"""

from __future__ import annotations

import decimal
import functools
import math
import typing as t
from fractions import Fraction

import numpy as np

from dpsql._privacy.csprng import random_bytes

__all__ = ["RandomBytes", "secure_bytes", "discrete_laplace", "cks20", "one", "place_one", "fits", "add_on_grid", "add_int", "place", "BLOCK"]

#: A source of ``n`` independent uniform random bytes.
RandomBytes = t.Callable[[int], bytes]

#: Most lanes drawn at once by inversion. Every numpy step of a draw makes a temporary array;
#: at 8,192 lanes those are 64 KiB, which malloc hands back and forth from memory already
#: mapped (and they stay in cache), where a 100,000-lane step's 800 KB arrays are mapped afresh
#: and page-faulted on every call: half the time of a long column (``docs/benchmarks.md``).
BLOCK = 8192
#: Largest int64: lanes whose X = U + t·V would pass it finish in Python integers.
INT64_MAX = 2**63 - 1
#: Largest numerator t handled on arrays (U and the uniform draw below t are int64).
T_MAX = 2**62
#: Largest scale drawn by inversion (:func:`_inversion`); larger ones by CKS20's rounds.
INVERSION_MAX = 2**32
#: Relative margin on each float end of a lane's interval (the floats are within 2^-50; about 2^-52 measured).
MARGIN = 2.0**-46
#: Largest k of Bernoulli(1/k) drawn from 32-bit words (k counts rounds of a loop that ends
#: with probability at least 1 − 1/k at each: it never comes near).
K_MAX = 2**32 - 1


def secure_bytes(n: int) -> bytes:
    """``n`` uniform bytes for a release: a ChaCha20 stream keyed by the operating system's
    CSPRNG (:mod:`dpsql._privacy.csprng`)."""
    return random_bytes(n)


def fits(scale: Fraction) -> bool:
    """Whether :func:`discrete_laplace` takes this scale on arrays (numerator below 2^62)."""
    return 0 < scale.numerator < T_MAX


class _Bits:
    """Uniform words of 8, 32 or 64 bits read from a byte source."""

    def __init__(self, source: RandomBytes) -> None:
        self.source = source

    def u8(self, n: int) -> np.ndarray:
        return np.frombuffer(self.source(n), dtype=np.uint8)

    def u32(self, n: int) -> np.ndarray:
        return np.frombuffer(self.source(4 * n), dtype="<u4")

    def u64(self, n: int) -> np.ndarray:
        return np.frombuffer(self.source(8 * n), dtype="<u8")


def _one_in(k: np.ndarray, bits: _Bits) -> np.ndarray:
    """Bernoulli(1/k) for each 1 ≤ k ≤ K_MAX (uint32 array): a 32-bit word uniform below the
    largest multiple of k under 2^32 is divisible by k with probability exactly 1/k."""
    if k.size and int(k.max()) > K_MAX:
        raise OverflowError("Bernoulli(1/k) with k past 2^32")  # unreachable in practice
    k = k.astype(np.uint32, copy=False)
    limit = np.uint32(K_MAX) - (np.uint32(0) - k) % k  # accept w <= limit: 2^32 − (2^32 mod k) words
    w = bits.u32(k.size)
    ok = w <= limit
    out = w % k == 0
    if not ok.all():
        redo = np.flatnonzero(~ok)
        out[redo] = _one_in(k[redo], bits)
    return out


def _below(bound: int, n: int, bits: _Bits) -> np.ndarray:
    """``n`` uniform integers in [0, bound), 1 ≤ bound ≤ 2^62, as int64 (rejection on low bits)."""
    if bound == 1:
        return np.zeros(n, dtype=np.int64)
    width = (bound - 1).bit_length()
    if width <= 32:
        w = (bits.u32(n) & np.uint32((1 << width) - 1)).astype(np.int64)
    else:
        w = (bits.u64(n) & np.uint64((1 << width) - 1)).astype(np.int64)
    ok = w < bound
    if not ok.all():
        redo = np.flatnonzero(~ok)
        w[redo] = _below(bound, redo.size, bits)
    return w


def _bernoulli_exp_fraction(u: np.ndarray, denom: int, bits: _Bits) -> np.ndarray:
    """Bernoulli(exp(−u/denom)) per lane, 0 ≤ u ≤ denom (CKS20 Algorithm 1). The first round
    has K = 1, where Bernoulli(1/K) is certain."""
    k = np.ones(u.size, dtype=np.uint32)
    live = np.flatnonzero(_below(denom, u.size, bits) < u)
    while live.size:
        k[live] += np.uint32(1)
        live = live[(_below(denom, live.size, bits) < u[live]) & _one_in(k[live], bits)]
    return k % np.uint32(2) == 1


def _bernoulli_exp_one(n: int, bits: _Bits) -> np.ndarray:
    """Bernoulli(exp(−1)) per lane: Algorithm 1 with γ = 1 (its first step always succeeds)."""
    k = np.full(n, 2, dtype=np.uint32)
    live = np.flatnonzero(_one_in(k, bits))
    while live.size:
        k[live] += np.uint32(1)
        live = live[_one_in(k[live], bits)]
    return k % np.uint32(2) == 1


def _geometric_exp_one(n: int, bits: _Bits) -> np.ndarray:
    """Per lane, the number of successes of Bernoulli(exp(−1)) before the first failure."""
    v = np.zeros(n, dtype=np.int64)
    live = np.flatnonzero(_bernoulli_exp_one(n, bits))
    while live.size:
        v[live] += 1
        live = live[_bernoulli_exp_one(live.size, bits)]
    return v


def _attempts(num: int, den: int, m: int, bits: _Bits) -> tuple[np.ndarray, np.ndarray, dict[int, int]]:
    """``m`` independent runs of one round of CKS20 Algorithm 2: whether each run returns, its
    value in int64, and the values of the runs whose X passed int64 (in Python integers)."""
    u = _below(num, m, bits)
    kept = np.flatnonzero(_bernoulli_exp_fraction(u, num, bits))
    u = u[kept]
    v = _geometric_exp_one(kept.size, bits)
    negative = (bits.u8(kept.size) & np.uint8(1)).astype(bool)
    small = v <= (INT64_MAX - num) // num  # X = U + t·V < 2^63
    y = np.zeros(kept.size, dtype=np.int64)  # a denominator past int64 makes ⌊X/s⌋ = 0
    if den <= INT64_MAX:
        y[small] = (u[small] + num * v[small]) // den
    returns = np.zeros(m, dtype=bool)
    returns[kept] = ~(negative & (y == 0)) & small
    values = np.zeros(m, dtype=np.int64)
    values[kept] = np.where(negative, -y, y)
    wide = {}
    for i in np.flatnonzero(~small):  # X past int64: finish this run in Python integers
        big = (int(u[i]) + num * int(v[i])) // den
        if not (negative[i] and big == 0):
            returns[kept[i]] = True
            wide[int(kept[i])] = -big if negative[i] else big
    return returns, values, wide


#: Bits of V read at once: a word below 2^53 is exact as a float, and so is w·2^-53.
WORD = 53


def _ends(w: np.ndarray, b: float) -> tuple[np.ndarray, np.ndarray]:
    """x = −b·ln v at both ends of V's interval (w·2^−53, (w + 1)·2^−53] (w: int64 below 2^53),
    as floats: (x at the end, x at the start), both ≥ 0; the start of w = 0 gives +inf. Both ends
    are exact floats, so ``log`` rounds only its result (see the module's docstring)."""
    start = w.astype(np.float64) * 2.0**-WORD
    with np.errstate(divide="ignore"):
        x_start = np.log(start) * -b
    return np.log(start + 2.0**-WORD) * -b, x_start


def _exact_magnitude(w: int, b: Fraction, bits: _Bits) -> int:
    """⌊−b·ln V⌋ for V uniform in (w·2^−53, (w + 1)·2^−53], in decimal arithmetic: more bits of
    V and more digits until the interval's two ends have the same floor, with margins that cover
    every rounding (each operation is within 10^(1−prec) relative; ``ln`` is correctly rounded)."""
    num, width, prec = w, WORD, 40
    while True:
        with decimal.localcontext() as ctx:
            ctx.prec = prec
            scale = decimal.Decimal(b.numerator) / decimal.Decimal(b.denominator)

            def x(v: int) -> decimal.Decimal:
                return -(decimal.Decimal(v) / decimal.Decimal(1 << width)).ln() * scale  # noqa: B023

            if num > 0:
                at_end, at_start = x(num + 1), x(num)
                margin = (abs(at_start) + scale + 1) * decimal.Decimal(10) ** (10 - prec)
                lo = int((at_end - margin).to_integral_value(rounding=decimal.ROUND_FLOOR))
                hi = int((at_start + margin).to_integral_value(rounding=decimal.ROUND_FLOOR))
                if lo == hi:
                    return lo
        num, width, prec = (num << 64) | int(bits.u64(1)[0]), width + 64, prec + 25


def _magnitudes(b: Fraction, n: int, bits: _Bits) -> tuple[np.ndarray, dict[int, int], np.ndarray]:
    """``n`` draws of G = ⌊−b·ln V⌋ (P[G ≥ g] = e^(−g/b)): int64, the lanes whose G does not
    fit int64 (never seen: V below e^(−2^63/b)) as Python integers, and a sign bit per lane (the
    lowest bit of the lane's 64-bit word, which V's 53 bits do not use: independent of G)."""
    raw = bits.u64(n)
    w = (raw >> np.uint64(64 - WORD)).view(np.int64)
    x_end, x_start = _ends(w, float(b))
    lo = np.floor(x_end * (1.0 - MARGIN))  # x ≥ 0: widened by MARGIN of its size
    hi = np.floor(x_start * (1.0 + MARGIN))
    g = lo.astype(np.int64)  # lo is finite and below 2^38 (x ≤ 53·ln 2·b); unsure lanes are redone
    wide = {}
    for i in np.flatnonzero((lo != hi) | np.isinf(hi)).tolist():
        value = _exact_magnitude(int(w[i]), b, bits)
        if value > INT64_MAX:
            wide[i] = value
            g[i] = INT64_MAX  # a stand-in that is not zero: the lane's sign is not a rejection
        else:
            g[i] = value
    return g, wide, (raw & np.uint64(1)).astype(bool)


def _one_ends(w: int, b: float) -> tuple[float, float]:
    """:func:`_ends` for one word, in Python floats (``math.log``)."""
    start = w * 2.0**-WORD
    return -b * math.log(start + 2.0**-WORD), (-b * math.log(start) if w else math.inf)


@functools.lru_cache(maxsize=256)
def inversion_scale(scale: Fraction) -> float | None:
    """``float(scale)`` when :func:`one` takes ``scale`` (0 < scale ≤ :data:`INVERSION_MAX`),
    else None; kept, as a query's scales repeat."""
    return float(scale) if 0 < scale <= INVERSION_MAX else None


def one(scale: Fraction, source: RandomBytes = secure_bytes) -> int:
    """One draw of :func:`discrete_laplace`'s law by inversion, in Python numbers (a single
    release: no array to set up). ``scale`` must be at most :data:`INVERSION_MAX`."""
    b = inversion_scale(scale)
    if b is None:
        raise ValueError(f"one() needs a scale in (0, 2^32], got {scale}")
    while True:
        raw = source(8)
        w = int.from_bytes(raw[:7], "little") >> (56 - WORD)
        x_end, x_start = _one_ends(w, b)
        lo = math.floor(x_end - abs(x_end) * MARGIN)
        g = lo if math.isfinite(x_start) and lo == math.floor(x_start + abs(x_start) * MARGIN) \
            else _exact_magnitude(w, scale, _Bits(source))
        if raw[7] & 1:
            if g:
                return -g
        else:
            return g


def place_one(value: float, z: int, k: int) -> float:
    """:func:`place` for one value: (round(value/2^k) + z)·2^k rounded once to a float."""
    try:
        n = round(math.ldexp(value, -k)) + int(z)
    except OverflowError:  # value/2^k past the float range
        return _exact_on_grid(value, z, k)
    if abs(n) >= 2**53:
        return _exact_on_grid(value, z, k)
    try:
        return math.ldexp(float(n), k)
    except OverflowError:  # past the float range: ±inf, as the column form gives
        return _exact_on_grid(value, z, k)


def _returned(g: np.ndarray, negative: np.ndarray) -> np.ndarray:
    """The lanes that return: all but a negative zero (Algorithm 2's rejection of B = 1, Y = 0)."""
    return np.flatnonzero(~(negative & (g == 0)))


def _inversion(scale: Fraction, n: int, bits: _Bits) -> tuple[np.ndarray, dict[int, int]]:
    """``n`` draws of the discrete Laplace law by inversion (the module's docstring): int64 values
    and, by index, those that do not fit int64 (Python integers)."""
    out = np.zeros(n, dtype=np.int64)
    wide: dict[int, int] = {}
    filled = 0
    reject = -math.expm1(-1.0 / float(scale)) / 2.0  # P[G = 0 and negative]
    while filled < n:
        m = min(math.ceil((n - filled) / (1.0 - reject) * 1.01) + 16, BLOCK)  # rarely an extra round
        g, big, negative = _magnitudes(scale, m, bits)
        kept = _returned(g, negative)[:n - filled]
        out[filled:filled + kept.size] = (g * (1 - 2 * negative.view(np.int8)))[kept]  # ±G
        if big:  # almost never: no per-lane Python loop otherwise
            for j, i in enumerate(kept.tolist()):
                if i in big:
                    wide[filled + j] = -big[i] if negative[i] else big[i]
        filled += kept.size
    return out, wide


def discrete_laplace(scale: Fraction, n: int, source: RandomBytes = secure_bytes) -> np.ndarray:
    """``n`` independent draws of P[y] ∝ exp(−|y|/scale) on the integers, exactly: by inversion
    up to :data:`INVERSION_MAX`, by CKS20's Algorithm 2 (:func:`cks20`) above."""
    if not fits(scale):
        raise ValueError(f"discrete_laplace needs a scale with a numerator in (0, 2^62), got {scale}")
    if scale > INVERSION_MAX:
        return cks20(scale, n, source)
    out, wide = _inversion(scale, n, _Bits(source))
    return _with_wide(out, wide)


def _with_wide(out: np.ndarray, wide: dict[int, int]) -> np.ndarray:
    if not wide:
        return out
    result = out.astype(object)
    for i, value in wide.items():
        result[i] = value
    return result


def cks20(scale: Fraction, n: int, source: RandomBytes = secure_bytes) -> np.ndarray:
    """``n`` independent draws of P[y] ∝ exp(−|y|/scale) on the integers by CKS20's Algorithm 2.

    Runs of the algorithm are independent and identically distributed, and whether a run
    returns does not depend on the other runs, so the values of the first n runs that return
    are n independent draws of the law: runs are made in batches a little larger than what is
    still missing (a run returns with probability about 1 − 1/e).

    ``scale`` = t/s must satisfy :func:`fits`. The result is int64, or an object array of Python
    integers in the (astronomically rare) case that a draw does not fit in int64.
    """
    if not fits(scale):
        raise ValueError(f"discrete_laplace needs a scale with a numerator in (0, 2^62), got {scale}")
    bits = _Bits(source)
    num, den = scale.numerator, scale.denominator
    out = np.zeros(n, dtype=np.int64)
    wide: dict[int, int] = {}
    filled = 0
    while filled < n:
        missing = n - filled
        returns, values, big = _attempts(num, den, missing + missing * 3 // 4 + 16, bits)
        took = np.flatnonzero(returns)[:missing]
        out[filled:filled + took.size] = values[took]
        if big:  # almost never: no per-lane Python loop otherwise
            for j, i in enumerate(took.tolist()):
                if i in big:
                    wide[filled + j] = big[i]
        filled += took.size
    return _with_wide(out, wide)


def _exact_on_grid(value: float, z: int, k: int) -> float:
    """float((round(value/2^k) + z)·2^k) in rationals: for values whose grid index or noisy
    point is past what the float arrays hold exactly (±inf past the float range)."""
    point = (round(Fraction(value) / Fraction(2) ** k) + int(z)) * Fraction(2) ** k
    try:
        return float(point)
    except OverflowError:
        return math.inf if point > 0 else -math.inf


def add_on_grid(values: t.Sequence[float], unit: Fraction, k: int,
                source: RandomBytes = secure_bytes) -> list[float]:
    """Each (finite) value rounded to the nearest multiple of 2^k (ties to even), plus 2^k·Z with
    Z discrete Laplace of scale ``unit`` (the noise scale divided by 2^k; :func:`fits` must
    hold): ``SecureNoise.laplace`` on the grid 2^k for a whole column (a numpy array of
    ``values`` gives a float64 array, a sequence a list), :data:`BLOCK` values at a time."""
    if not isinstance(values, np.ndarray) or len(values) <= BLOCK:
        return place(values, discrete_laplace(unit, len(values), source), k)
    out = np.empty(len(values), dtype=np.float64)
    for i in range(0, len(values), BLOCK):
        part = values[i:i + BLOCK]
        out[i:i + len(part)] = place(part, discrete_laplace(unit, len(part), source), k)
    return out


def place(values: t.Sequence[float], z: np.ndarray, k: int) -> list[float]:
    """(round(value/2^k) + z)·2^k for each value and integer z, rounded once to a float: the
    released float is a function of the integer round(value/2^k) + z alone."""
    x = np.asarray(values, dtype=np.float64)
    if z.dtype == object:
        exact = [_exact_on_grid(v, d, k) for v, d in zip(x.tolist(), z.tolist())]
        return np.array(exact, dtype=np.float64) if isinstance(values, np.ndarray) else exact
    with np.errstate(over="ignore"):  # overflowing entries are redone exactly below
        base = np.rint(np.ldexp(x, -k))  # the nearest integer, exact while finite
        out = np.ldexp(base + z.astype(np.float64), k)  # both terms exact: one rounding
    for i in np.flatnonzero(~np.isfinite(base) | (np.abs(z) >= 2**53)):  # not exact as floats
        out[i] = _exact_on_grid(float(x[i]), int(z[i]), k)
    return out if isinstance(values, np.ndarray) else out.tolist()


def add_int(values: t.Sequence[int], unit: Fraction, source: RandomBytes = secure_bytes) -> list[int]:
    """Each integer plus discrete Laplace noise of scale ``unit`` (:func:`fits` must hold):
    ``SecureNoise.laplace_int`` for a whole column (an int64 array of ``values`` gives an int64
    array, or a list of Python integers in the rare case the sums pass 2^62; a sequence a list)."""
    z = discrete_laplace(unit, len(values), source)
    fit = z.dtype != object and (not z.size or int(np.abs(z).max()) < 2**62)
    if isinstance(values, np.ndarray) and values.dtype == np.int64:
        if fit and (not values.size or (-2**62 < int(values.min()) and int(values.max()) < 2**62)):
            z += values  # |sum| < 2^63; z is this call's own array
            return z
        return [int(v) + int(d) for v, d in zip(values.tolist(), z.tolist())]
    if fit and -2**62 < min(values, default=0) and max(values, default=0) < 2**62:
        return (np.asarray(values, dtype=np.int64) + z).tolist()  # |sum| < 2^63
    return [int(v) + int(d) for v, d in zip(values, z.tolist())]
