"""Bounds found privately: a noisy log-scale histogram of a column, and its outermost full bins.

A DP aggregate over a column without declared bounds may opt in (``DP_MEAN(x, bounds =>
'auto')``, the query option ``bounds = 'auto'``, or the policy's ``[defaults] bounds =
"auto"``). A share of the aggregate's budget (:data:`SHARE`) then buys a DP estimate of the
clipping range, and the rest answers the aggregate with it. The method is ApproxBounds of
Wilson, Zhang, Lam, Desfontaines, Simmons-Marengo and Gipson (2020, "Differentially Private SQL
with Bounded User Contribution", PoPETs 2020(2), §4 and Appendix; Google's differential-privacy
library, ``ApproxBounds``):

* **Bins fixed before any data is seen.** For k = :data:`K_MIN` .. :data:`K_MAX`, the positive
  bins [2^k, 2^(k+1)) (the last one, k = K_MAX, reaches to +inf) and their mirrors
  (−2^(k+1), −2^k] (the first reaches to −inf), and a zero bin (−2^K_MIN, 2^K_MIN): 189 bins,
  numbered −94 .. 94 (:func:`bin_of`). Every row whose value is a finite number counts in
  exactly one bin; NULL, NaN and ±inf count nowhere.
* **Noisy counts.** Every bin's count, those of empty bins included, gets independent discrete
  Laplace noise Z, P[Z = z] ∝ q^|z|, q = e^(−1/b), b = Δ/ε_b (exact sampler of Canonne, Kamath
  and Steinke 2020, :mod:`dpsql._privacy.noise`).
* **Threshold.** A bin *passes* when its noisy count reaches τ. For integer s ≥ 1,
  P[Z ≥ s] = q^s/(1 + q); τ is the least integer with q^τ/(1 + q) ≤ β/189, so that, with
  probability at least 1 − β (:data:`FAILURE` = 10⁻⁶), no bin without rows passes (union bound
  over the bins). A bin needs about τ rows to pass reliably (EXPLAIN shows τ).
* **Bounds.** The lower bound is the lower edge of the lowest passing bin, the upper bound the
  upper edge of the highest (:func:`edges`): values in passing bins are never clipped by more
  than a factor 2 of their own size. When no bin passes (too few rows for τ) there are no
  bounds: the aggregate is released as NULL (⊥, as PTR's), never an error after the charge.

Guarantee and neighbouring relation
    The histogram is a vector of counts of L1 sensitivity Δ = m under ``add_remove`` (a
    protected change adds or removes at most m rows, each counted in one bin) and Δ = 2m under
    ``replace`` (m rows may each leave one bin and join another); m is the rows one protected
    change alters (``Context.max_rows``: per-unit bounds, group privacy, joins). Discrete
    Laplace noise of scale Δ/ε_b on every coordinate makes it ε_b-DP (Dwork, McSherry, Nissim,
    Smith 2006, for the Laplace mechanism; Ghosh, Roughgarden, Sundararajan 2009 for its
    geometric form); the bounds are post-processing of the noisy counts. Under a ρ-zCDP
    budget the share ρ_b is spent as ε_b = sqrt(2·ρ_b): ε-DP implies (ε²/2)-zCDP (Bun and
    Steinke 2016, Proposition 1.4).
    The aggregate is then answered with the bounds found by its mechanism, for the rest of its
    share: sequential composition, which holds when the second mechanism is chosen from the
    first's output (Dwork and Roth 2014, Theorem 3.16 and §3.5; Bun and Steinke 2016, Lemma
    2.3), makes the whole release (ε_b + ε_rest, δ_rest)-DP (or ρ_b + ρ_rest). Both parts are
    charged in one ledger transaction before the noisy counts are used.
    ``tests/test_found_bounds.py`` checks the histogram's sensitivity against every neighbour
    of small datasets run through the statement, and the statistical audit
    (``tests/audit/found_bounds.py``) the whole release.

Declared public bounds are always better when they are known: they cost nothing and are not
widened to a power of two.
"""

from __future__ import annotations

import math
import typing as t
from dataclasses import dataclass

from dpsql._accounting.budget import Cost
from dpsql._privacy.noise import laplace_scale
from dpsql._privacy.report import fmt

if t.TYPE_CHECKING:
    from dpsql._privacy.noise import NoiseSource

#: The share of an aggregate's ε (or ρ) spent finding its bounds.
SHARE = 0.25
#: The smallest and largest exponent of the bins [2^k, 2^(k+1)) (and their mirrors).
K_MIN, K_MAX = -30, 63
#: Bins on each side of zero; bin j > 0 is [2^(K_MIN + j − 1), 2^(K_MIN + j)).
SIDE = K_MAX - K_MIN + 1
#: Every bin: −SIDE .. SIDE, zero included.
NBINS = 2 * SIDE + 1
#: The probability that some bin without rows passes the threshold.
FAILURE = 1e-6
#: The widest bounds a search can return: the planner checks the aggregate with them.
WIDEST = (-(2.0 ** (K_MAX + 1)), 2.0 ** (K_MAX + 1))


def bin_of(x: float) -> int | None:
    """The bin of a value (None for NaN and ±inf): what the histogram statement computes."""
    if not math.isfinite(x):
        return None
    a = abs(x)
    if a < 2.0 ** K_MIN:
        return 0
    k = min(max(math.frexp(a)[1] - 1, K_MIN), K_MAX)  # 2^k <= a < 2^(k+1)
    j = k - K_MIN + 1
    return j if x > 0 else -j


def edges(j: int) -> tuple[float, float]:
    """The lower and upper edge of bin ``j``, as bounds: the top bin ends at 2^(K_MAX + 1)."""
    if j == 0:
        return -(2.0 ** K_MIN), 2.0 ** K_MIN
    k = K_MIN + abs(j) - 1
    if j > 0:
        return 2.0 ** k, 2.0 ** (k + 1)
    return -(2.0 ** (k + 1)), -(2.0 ** k)


def threshold(scale: float, failure: float = FAILURE) -> int:
    """The least integer τ ≥ 1 with P[Z ≥ τ] = q^τ/(1 + q) ≤ failure/NBINS, q = e^(−1/scale)."""
    q = math.exp(-1.0 / scale)
    per_bin = failure / NBINS
    tau = max(1, math.ceil(scale * math.log(1.0 / ((1.0 + q) * per_bin))))
    while tau > 1 and q ** (tau - 1) / (1.0 + q) <= per_bin:  # the float log may overshoot by one
        tau -= 1
    while q ** tau / (1.0 + q) > per_bin:
        tau += 1
    return tau


@dataclass(frozen=True)
class Found:
    """The bounds a search found, and how."""

    lower: float
    upper: float
    #: whether some bin passed the threshold; if not, ``lower`` and ``upper`` are the edges of
    #: the fullest noisy bin, which the query is planned with, and the aggregate is released as NULL
    passed: bool

    def text(self) -> str:
        return f"[{fmt(self.lower)}, {fmt(self.upper)}]" if self.passed else "none (no bin reached the threshold)"


@dataclass(frozen=True)
class BoundsSearch:
    """The noisy log-scale histogram of one aggregate's value (see the module docstring).

    Guarantee: ε_b-DP (pure; ρ_b = ε_b²/2 under zCDP) for the noisy counts and every bound
    chosen from them, under ``add_remove`` (Δ = m) and ``replace`` (Δ = 2m), m rows per
    protected change. Wilson et al. 2020 (ApproxBounds); CKS20 for the sampler.
    """

    #: the aggregate's index (``BoundAggregate.index``) and label
    index: int
    label: str
    #: L1 sensitivity of the histogram
    sensitivity: float
    #: the ε the noise is calibrated for (sqrt(2ρ_b) under zCDP)
    epsilon: float
    #: what the search spends: ε_b, or ρ_b
    cost: Cost
    scale: float
    threshold: int

    @classmethod
    def build(cls, index: int, label: str, rows: int, neighbouring: str, share: Cost) -> "BoundsSearch":
        """The search for an aggregate whose protected change alters ``rows`` rows, spending
        ``share`` (its ε, or its ρ, is used)."""
        sensitivity = float(2 * rows if neighbouring == "replace" else rows)
        if share.rho > 0:
            epsilon, cost = math.sqrt(2.0 * share.rho), Cost(rho=share.rho)
        else:
            epsilon, cost = share.epsilon, Cost(epsilon=share.epsilon)
        scale = laplace_scale(sensitivity, epsilon, integer=True)
        return cls(index, label, sensitivity, epsilon, cost, scale, threshold(scale))

    def choose(self, counts: t.Mapping[int, int], noise: "NoiseSource") -> Found:
        """The bounds from the exact ``counts`` (bin → rows; absent bins hold none): every bin
        gets its noise, then the outermost passing bins give the bounds."""
        bins = list(range(-SIDE, SIDE + 1))
        noisy = noise.add_many("laplace_int", [int(counts.get(j, 0)) for j in bins], self.scale)
        passing = [j for j, c in zip(bins, noisy) if c >= self.threshold]
        if passing:
            return Found(edges(passing[0])[0], edges(passing[-1])[1], True)
        best = max(range(len(bins)), key=lambda i: noisy[i])  # the first of the largest
        lower, upper = edges(bins[best])
        return Found(lower, upper, False)

    def explain(self) -> str:
        """EXPLAIN's line on the search."""
        spent = f"ρ={fmt(self.cost.rho)} (as ε={fmt(self.epsilon)})" if self.cost.rho else f"ε={fmt(self.epsilon)}"
        return (f"{self.label} bounds: found privately, {spent} ({SHARE:.0%} of its share): noisy counts of a "
                f"log-scale histogram of the value ({NBINS} bins ±[2^k, 2^(k+1)), k from {K_MIN} to {K_MAX}, and "
                f"[-2^{K_MIN}, 2^{K_MIN}]), Δ={fmt(self.sensitivity)} discrete Laplace(b={fmt(self.scale)}); the "
                f"bounds are the outer edges of the outermost bins whose noisy count reaches τ={self.threshold} "
                f"(a bin without rows does with probability ≤ {FAILURE:g} in all; if none does, NULL is released)")

    def note(self, found: Found) -> str:
        """The report's words on the bounds found and their cost."""
        spent = f"ρ={fmt(self.cost.rho)}" if self.cost.rho else f"ε={fmt(self.cost.epsilon)}"
        if not found.passed:
            return (f"no bounds found privately with {spent} of it: no bin of the noisy histogram reached "
                    f"τ={self.threshold} (too few rows), so NULL is released; give bounds, or more ε")
        return f"bounds {found.text()} found privately with {spent} of it"
