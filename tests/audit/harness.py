"""A statistical privacy audit: does a mechanism keep its promise on neighbouring inputs?

For a mechanism M that claims (ε, δ)-DP and two neighbouring inputs x, x', every event E must
satisfy P[M(x) ∈ E] ≤ e^ε·P[M(x') ∈ E] + δ (and the same with x, x' swapped). The audit

1. runs M on x and on x' ``pilot`` times each and picks the ``events`` (event, direction) pairs
   that come closest to breaking the inequality (threshold events {out > t}, {out ≤ t}, interval
   events {a < out ≤ b}, quadrants for two-dimensional outputs, and the ⊥ event {out is None});
2. runs M ``trials`` more times on each input with a fresh seed, and for each chosen pair
   computes a Clopper–Pearson lower bound for P[M(x) ∈ E] and an upper bound for P[M(x') ∈ E],
   each at level α/(2·events) (Bonferroni over everything tested, so the whole audit wrongly
   reports a violation with probability at most α);
3. reports a violation when lower > e^ε·upper + δ.

Only the noise is sampled. For a dpsql query (:func:`query_pair`) the rewritten SQL runs once on
each input in DuckDB; the exact statistics are then released ``trials`` times through
:func:`dpsql._release.release.release`, the function the connection uses after the ledger charge. The
claimed (ε, δ) is the plan's cost, i.e. what the ledger would charge.

:class:`FastNoise` is a seeded source (a :class:`~dpsql._privacy.noise.SeededNoise`) that draws its
Laplace, Gaussian, discrete Laplace and discrete Gaussian noise in numpy blocks: same laws,
fifty times faster per draw than the exact integer samplers. :class:`ScaledNoise` shrinks every
noise scale by a factor, for the negative controls.
"""

from __future__ import annotations

import math
import typing as t
from dataclasses import dataclass, field
from fractions import Fraction

import duckdb
import numpy as np
from scipy.stats import beta as _beta

from dpsql._accounting.budget import to_kind
from dpsql._policy.policy import load_policy
from dpsql._privacy import dlaplace
from dpsql._privacy.noise import NoiseSource, SeededNoise, grid_exponent
from dpsql._query.pipeline import prepare
from dpsql._release.release import Released, release
from dpsql.backends.duck import DuckDBEngine

#: Quick mode (the default test run) and thorough mode (``pytest -m thorough``).
QUICK = {"trials": 8_000, "pilot": 2_000, "events": 8}
THOROUGH = {"trials": 100_000, "pilot": 20_000, "events": 12}
#: Probability that an audit of a correct mechanism reports a violation (over all its events).
ALPHA = 1e-3

Output = float | int | None | tuple


# ---------------------------------------------------------------------------------------------
# noise


class FastNoise(SeededNoise):
    """Seeded, vectorised noise for audits (insecure). Laws equal :class:`SeededNoise`'s.

    Continuous Laplace and Gaussian are drawn in blocks of unit noise and scaled. The discrete
    Laplace with P[y] ∝ exp(−|y|/b) is G₁ − G₂ for independent geometric G on {0, 1, ...} with
    ratio q = e^(−1/b); the discrete Gaussian is CKS20's Algorithm 3 (rejection from a discrete
    Laplace of scale ⌊σ⌋ + 1) run on whole blocks. Every other draw (uniform, weighted choice,
    Cauchy-like, Bernoulli) is SeededNoise's exact algorithm on the same generator.
    """

    BLOCK = 1 << 14

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self._buffers: dict[t.Hashable, list[t.Any]] = {}

    def _draw(self, key: t.Hashable, make: t.Callable[[int], np.ndarray]) -> t.Any:
        buf = self._buffers.get(key)
        if buf is None or buf[1] >= len(buf[0]):
            buf = [make(self.BLOCK).tolist(), 0]
            self._buffers[key] = buf
        value = buf[0][buf[1]]
        buf[1] += 1
        return value

    def _discrete_laplace_block(self, scale: float, n: int) -> np.ndarray:
        p = -math.expm1(-1.0 / scale)  # 1 − q
        return self._gen.geometric(p, n) - self._gen.geometric(p, n)

    def _discrete_gaussian_block(self, sigma: float, n: int) -> np.ndarray:
        t_ = math.floor(sigma) + 1
        s2 = sigma * sigma
        out: list[np.ndarray] = []
        have = 0
        while have < n:
            y = self._discrete_laplace_block(t_, 2 * n)
            keep = self._gen.random(2 * n) < np.exp(-((np.abs(y) - s2 / t_) ** 2) / (2 * s2))
            out.append(y[keep])
            have += int(keep.sum())
        return np.concatenate(out)[:n]

    def laplace(self, value: float, scale: float, *, k: int | None = None) -> float:
        return float(value) + scale * self._draw("lap", lambda n: self._gen.laplace(0.0, 1.0, n))

    def gaussian(self, value: float, sigma: float, *, k: int | None = None) -> float:
        return float(value) + sigma * self._draw("gauss", lambda n: self._gen.normal(0.0, 1.0, n))

    def laplace_int(self, value: int, scale: float) -> int:
        return int(value) + int(self._draw(("dlap", scale), lambda n: self._discrete_laplace_block(scale, n)))

    def gaussian_int(self, value: int, sigma: float) -> int:
        return int(value) + int(self._draw(("dgauss", sigma), lambda n: self._discrete_gaussian_block(sigma, n)))

    def _unit(self) -> float:
        # (randbits(53) + ½)·2⁻⁵³, as NoiseSource._unit, in blocks
        return self._draw("unit", lambda n: (self._gen.integers(0, 1 << 53, n) + 0.5) * 2.0**-53)


class ArrayNoise(FastNoise):
    """Laplace noise from the release's array sampler (:mod:`dpsql._privacy.dlaplace`: inversion
    on whole arrays at these scales) on the inner source's generator; every other draw as :class:`FastNoise`.
    Draws come from blocks of the array sampler: its draws are independent, so handing them out
    one at a time has the law of one call per release."""

    def __init__(self, inner: NoiseSource) -> None:
        assert isinstance(inner, SeededNoise)
        self.seed, self._gen, self._buffers = inner.seed, inner._gen, {}

    def _z(self, unit: Fraction) -> int:
        return self._draw(("cks", unit), lambda n: dlaplace.discrete_laplace(unit, n, self._gen.bytes))

    def laplace(self, value: float, scale: float, *, k: int | None = None) -> float:
        k = grid_exponent(scale) if k is None else k
        unit = Fraction(scale) / Fraction(2) ** k
        return dlaplace.place([value], np.asarray([self._z(unit)], dtype=np.int64), k)[0]

    def laplace_int(self, value: int, scale: float) -> int:
        return int(value) + self._z(Fraction(scale))


class ScaledNoise(NoiseSource):
    """Every noise scale divided by ``factor`` (a broken calibration, for negative controls)."""

    def __init__(self, inner: NoiseSource, factor: float) -> None:
        self.inner = inner
        self.factor = float(factor)

    def laplace(self, value: float, scale: float, *, k: int | None = None) -> float:
        return self.inner.laplace(value, scale / self.factor)

    def gaussian(self, value: float, sigma: float, *, k: int | None = None) -> float:
        return self.inner.gaussian(value, sigma / self.factor)

    def laplace_int(self, value: int, scale: float) -> int:
        return self.inner.laplace_int(value, scale / self.factor)

    def gaussian_int(self, value: int, sigma: float) -> int:
        return self.inner.gaussian_int(value, sigma / self.factor)

    def cauchy_like(self, gamma: float) -> float:
        return self.inner.cauchy_like(gamma) / self.factor

    # draws without a scale pass through unchanged
    def _randbits(self, n: int) -> int:
        return self.inner._randbits(n)

    def _unit(self) -> float:
        return self.inner._unit()

    def uniform(self, low: float, high: float, *, k: int | None = None) -> float:
        return self.inner.uniform(low, high, k=k)

    def choice_weighted(self, log_weights: t.Sequence[float]) -> int:
        return self.inner.choice_weighted(log_weights)

    def bernoulli_exp(self, x: float) -> bool:
        return self.inner.bernoulli_exp(x)


# ---------------------------------------------------------------------------------------------
# what is audited


@dataclass
class Pair:
    """A mechanism on two neighbouring inputs: ``x(noise)`` and ``y(noise)`` each give one output.

    An output is a number, a tuple of numbers (a vector release), or ``None`` (⊥: no answer, or
    the audited group key was not released).
    """

    x: t.Callable[[NoiseSource], Output]
    y: t.Callable[[NoiseSource], Output]
    epsilon: float
    delta: float
    description: str = ""
    #: the statistics SQL that ran on both inputs (for a dpsql query)
    sql: str = ""


@dataclass
class AuditCase:
    """One audit: a name, how to build the :class:`Pair`, and what the result must be.

    ``expect`` is ``"pass"`` for a correct mechanism and ``"violation"`` for a negative control.
    ``noise`` wraps the audit's noise source (e.g. ``lambda n: ScaledNoise(n, 3)``).
    ``mechanism`` names the registered mechanism the case covers (for the coverage check).
    ``trials`` and ``thorough_trials`` override the trial counts of the two modes (more power
    for a small effect, fewer trials for a slow release). ``known_issue`` marks a case that finds
    a real, not yet fixed violation: its test is an expected failure until the fix lands.
    """

    name: str
    build: t.Callable[[], Pair]
    mechanism: str = ""
    expect: str = "pass"
    noise: t.Callable[[NoiseSource], NoiseSource] | None = None
    trials: int | None = None
    thorough_trials: int | None = None
    known_issue: str = ""


# ---------------------------------------------------------------------------------------------
# dpsql queries as pairs


def _load(con: duckdb.DuckDBPyConnection, schema: str, rows: t.Sequence[tuple], name: str = "t") -> None:
    con.execute(f"CREATE TABLE {name} ({schema})")
    if rows:
        marks = ", ".join("?" * len(rows[0]))
        con.executemany(f"INSERT INTO {name} VALUES ({marks})", [list(r) for r in rows])


def first_value(out: Released) -> Output:
    """The first DP aggregate of the single output row; ``None`` if no row was released."""
    if not out.rows:
        return None
    nkeys = sum(1 for c in out.columns if c.startswith("__k"))
    return out.rows[0][nkeys]


def value_of_key(key: t.Any, column: int = 0) -> t.Callable[[Released], Output]:
    """The ``column``-th DP aggregate of the group ``key``; ``None`` if that group was not released."""

    def pick(out: Released) -> Output:
        nkeys = sum(1 for c in out.columns if c.startswith("__k"))
        for row in out.rows:
            if row[0] == key:
                return row[nkeys + column]
        return None

    return pick


def values_of_keys(keys: t.Sequence[t.Any], column: int = 0) -> t.Callable[[Released], Output]:
    """A vector: the ``column``-th DP aggregate of each group in ``keys`` (all must be released)."""

    def pick(out: Released) -> Output:
        nkeys = sum(1 for c in out.columns if c.startswith("__k"))
        by_key = {row[0]: row[nkeys + column] for row in out.rows}
        return tuple(by_key[k] for k in keys)

    return pick


def sum_of_keys(keys: t.Sequence[t.Any], column: int = 0) -> t.Callable[[Released], Output]:
    """The sum of the ``column``-th DP aggregate over the groups ``keys`` (all must be released):
    the direction along which a change of every group at once (a unit in g groups) shows its
    whole L2 privacy loss, which no event on one or two groups would."""
    one = values_of_keys(keys, column)

    def pick(out: Released) -> Output:
        values = one(out)
        assert isinstance(values, tuple)
        return float(sum(values))

    return pick


def released_of_keys(keys: t.Sequence[t.Any]) -> t.Callable[[Released], Output]:
    """How many of the group ``keys`` were released; ``None`` (⊥) if none was."""
    wanted = set(keys)

    def pick(out: Released) -> Output:
        nkeys = sum(1 for c in out.columns if c.startswith("__k"))
        n = sum(1 for row in out.rows if nkeys and row[0] in wanted)
        return n or None

    return pick


def query_pair(
    sql: str,
    x: t.Sequence[tuple],
    y: t.Sequence[tuple],
    policy: dict,
    *,
    schema: str = "x DOUBLE",
    pick: t.Callable[[Released], Output] = first_value,
    statistics_policy: dict | None = None,
    extra: dict[str, tuple[str, t.Sequence[tuple]]] | None = None,
    statistics_query: str | None = None,
    extra_prime: dict[str, tuple[str, t.Sequence[tuple]]] | None = None,
) -> Pair:
    """Audit pair for a dpsql query on table ``t`` holding rows ``x`` versus rows ``y``.

    The query is parsed, bound, planned and rewritten once (all data-independent); the
    rewritten SQL runs once on each table; each draw releases those exact statistics with
    fresh noise. The claimed (ε, δ) is the plan's cost in (ε, δ) terms.

    ``statistics_policy`` (negative controls): the exact statistics come from the SQL that the
    same query gets under this other policy, while the plan, the noise and the claimed cost are
    ``policy``'s. A row-level policy with ``group_size`` m, for instance, gives SQL that reads
    every row of a unit (no truncation) with the same data-dependent constants as a unit policy
    with ``max_rows_per_unit`` m. Both rewrites must name the same statistics columns.
    ``statistics_query`` does the same with another query text under the same policy (a join
    or flat map with a looser bound than the one the noise is calibrated for).

    ``extra``: other tables, ``{name: (schema, rows)}``, the same on both sides (a public table
    to join, or the other private table of a join whose neighbours differ in ``t``).
    ``extra_prime``: the same tables as x' holds them, where they differ from ``extra`` (one
    protected change with rows in both tables of a private join).
    """
    pol = load_policy(policy)
    engines = []
    for rows, tables in ((x, extra or {}), (y, {**(extra or {}), **(extra_prime or {})})):
        con = duckdb.connect(":memory:")
        _load(con, schema, rows)
        for name, (extra_schema, extra_rows) in tables.items():
            _load(con, extra_schema, extra_rows, name)
        engines.append(DuckDBEngine(con))
    # The same pipeline as dpsql.Connection: prepared once against x's catalog (x and y share
    # the schema), then the statistics query runs on each table.
    prepared = prepare(sql, pol, engines[0])
    p, rw = prepared.plan, prepared.rewritten
    assert p is not None and rw is not None
    stats_sql = prepared.sql
    if statistics_policy is not None or statistics_query is not None:
        other = prepare(statistics_query or sql, load_policy(statistics_policy or policy), engines[0])
        assert other.rewritten is not None
        if (other.rewritten.columns, other.rewritten.keys) != (rw.columns, rw.keys):
            raise ValueError("the statistics policy's rewrite names other columns: the pair would not release")
        stats_sql = other.sql
    for prep in p.prepared:  # the label is re-rendered from sqlglot on every release: freeze it
        agg = prep.agg
        agg.__class__ = type(type(agg).__name__, (type(agg),), {"label": agg.label})
    stats = []
    for engine in engines:
        stats.append(engine.statistics(stats_sql))
        engine.close()
    cost = p.cost
    if cost.rho > 0:
        cost = to_kind(cost, "approx", p.conversion_delta)

    def runner(names: list[str], rows: list[tuple]) -> t.Callable[[NoiseSource], Output]:
        return lambda noise: pick(release(p, rw, names, rows, noise))

    return Pair(
        x=runner(*stats[0]),
        y=runner(*stats[1]),
        epsilon=cost.epsilon,
        delta=cost.delta,
        description=f"{sql}  [x: {len(x)} rows, x': {len(y)} rows; mechanisms {', '.join(p.mechanisms)}]",
        sql=stats_sql,
    )


# ---------------------------------------------------------------------------------------------
# sampling and events


def sample(run: t.Callable[[NoiseSource], Output], noise: NoiseSource, n: int) -> np.ndarray:
    """``n`` outputs as an (n, d) float array; a ⊥ output is a row of NaN."""
    rows: list[t.Any] = [run(noise) for _ in range(n)]
    d = next((len(r) if isinstance(r, tuple) else 1 for r in rows if r is not None), 1)
    out = np.full((n, d), np.nan)
    for i, r in enumerate(rows):
        if r is None:
            continue
        out[i] = r if isinstance(r, tuple) else (r,)
    return out


@dataclass(frozen=True)
class Event:
    """A measurable set of outputs. ``kind``: none, some, gt, le, in, quad."""

    kind: str
    dim: int = 0
    a: float = math.nan
    b: float = math.nan
    dim2: int = 0
    upper2: bool = False  # quad: second coordinate > b (else ≤ b)

    def mask(self, out: np.ndarray) -> np.ndarray:
        none = np.isnan(out).any(axis=1)
        v = out[:, self.dim]
        with np.errstate(invalid="ignore"):
            if self.kind == "none":
                return none
            if self.kind == "some":
                return ~none
            if self.kind == "gt":
                return v > self.a
            if self.kind == "le":
                return v <= self.a
            if self.kind == "in":
                return (v > self.a) & (v <= self.b)
            if self.kind == "quad":
                w = out[:, self.dim2]
                return (v <= self.a) & ((w > self.b) if self.upper2 else (w <= self.b))
        raise ValueError(self.kind)

    def __str__(self) -> str:
        o = f"out[{self.dim}]"
        return {
            "none": "{out = ⊥}",
            "some": "{out ≠ ⊥}",
            "gt": f"{{{o} > {self.a:.6g}}}",
            "le": f"{{{o} ≤ {self.a:.6g}}}",
            "in": f"{{{self.a:.6g} < {o} ≤ {self.b:.6g}}}",
            "quad": f"{{{o} ≤ {self.a:.6g}, out[{self.dim2}] {'>' if self.upper2 else '≤'} {self.b:.6g}}}",
        }[self.kind]


_LEVELS = (0.001, 0.003, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95,
           0.98, 0.99, 0.997, 0.999)


def _thresholds(values: np.ndarray) -> list[float]:
    values = values[np.isfinite(values)]
    if values.size == 0:
        return []
    distinct = np.unique(values)
    if distinct.size <= 60:  # a discrete output: every value (and the gaps) is a threshold
        return distinct.tolist()
    return np.unique(np.quantile(values, _LEVELS)).tolist()


def candidate_events(px: np.ndarray, py: np.ndarray) -> list[Event]:
    """Events suggested by the pooled pilot outputs of both inputs."""
    both = np.vstack([px, py])
    events: list[Event] = []
    if np.isnan(both).any():
        events += [Event("none"), Event("some")]
    d = both.shape[1]
    cuts = [_thresholds(both[:, j]) for j in range(d)]
    for j in range(d):
        ts = cuts[j]
        events += [Event("gt", j, a) for a in ts] + [Event("le", j, a) for a in ts]
        for step in (1, 2, 4):
            events += [Event("in", j, ts[i], ts[i + step]) for i in range(len(ts) - step)]
    for j in range(d):
        for k in range(j + 1, d):
            sub_j, sub_k = cuts[j][:: max(1, len(cuts[j]) // 9)], cuts[k][:: max(1, len(cuts[k]) // 9)]
            for a in sub_j:
                for b in sub_k:
                    events += [Event("quad", j, a, b, k, True), Event("quad", j, a, b, k, False)]
                    events += [Event("quad", k, b, a, j, True), Event("quad", k, b, a, j, False)]
    return events


@dataclass
class EventTest:
    event: Event
    direction: str  # "x|x'" tests P[M(x) ∈ E] ≤ e^ε P[M(x') ∈ E] + δ; "x'|x" the reverse
    hits1: int
    hits2: int
    trials: int
    lower1: float
    upper2: float
    bound: float  # e^ε·upper2 + δ
    violated: bool

    def __str__(self) -> str:
        a, b = self.direction.split("|")
        return (
            f"{str(self.event):<40} P[M({a})∈E] = {self.hits1 / self.trials:.5f} (≥ {self.lower1:.5f})  "
            f"P[M({b})∈E] = {self.hits2 / self.trials:.5f} (≤ {self.upper2:.5f})  "
            f"e^ε·upper + δ = {self.bound:.5f}{'  VIOLATED' if self.violated else ''}"
        )


@dataclass
class AuditResult:
    name: str
    description: str
    epsilon: float
    delta: float
    trials: int
    pilot: int
    tests: list[EventTest] = field(default_factory=list)

    @property
    def violated(self) -> bool:
        return any(tst.violated for tst in self.tests)

    def __str__(self) -> str:
        head = (
            f"audit {self.name}: claims ε={self.epsilon:.6g}, δ={self.delta:.3g}; {self.trials} trials "
            f"per input after {self.pilot} pilot runs; α={ALPHA:g} over {len(self.tests)} tests\n"
            f"  {self.description}"
        )
        return head + "".join(f"\n  {tst}" for tst in self.tests)


def cp_lower(k: int, n: int, a: float) -> float:
    """One-sided Clopper–Pearson lower bound at level ``a`` for k successes in n trials."""
    return 0.0 if k == 0 else float(_beta.ppf(a, k, n - k + 1))


def cp_upper(k: int, n: int, a: float) -> float:
    """One-sided Clopper–Pearson upper bound at level ``a`` for k successes in n trials."""
    return 1.0 if k >= n else float(_beta.ppf(1 - a, k + 1, n - k))


def select_events(
    events: list[Event], px: np.ndarray, py: np.ndarray, epsilon: float, delta: float, count: int
) -> list[tuple[Event, str]]:
    """The ``count`` (event, direction) pairs whose pilot estimates come closest to a violation."""
    n = len(px)
    e = math.exp(epsilon)
    scored = []
    for ev in events:
        fx, fy = ev.mask(px).mean(), ev.mask(py).mean()
        for direction, p1, p2 in (("x|x'", fx, fy), ("x'|x", fy, fx)):
            if p1 == 0:
                continue
            se = math.sqrt((p1 * (1 - p1) + e * e * p2 * (1 - p2)) / n + 1.0 / (n * n))
            scored.append(((p1 - e * p2 - delta) / se, p1, str(ev), direction, ev))
    scored.sort(key=lambda s: (-s[0], -s[1], s[2], s[3]))
    chosen: list[tuple[Event, str]] = []
    for _, _, _, direction, ev in scored:
        if (ev, direction) not in chosen:
            chosen.append((ev, direction))
        if len(chosen) == count:
            break
    return chosen


def audit(
    case: AuditCase | Pair,
    *,
    trials: int = QUICK["trials"],
    pilot: int = QUICK["pilot"],
    events: int = QUICK["events"],
    seed: int = 0,
    alpha: float = ALPHA,
) -> AuditResult:
    """Run the audit of ``case`` (see the module docstring) and return every test made."""
    if isinstance(case, AuditCase):
        pair, name, wrap = case.build(), case.name, case.noise
    else:
        pair, name, wrap = case, "pair", None

    def source(s: int) -> NoiseSource:
        base = FastNoise(s)
        return wrap(base) if wrap is not None else base

    eps, delta = pair.epsilon, pair.delta
    px, py = sample(pair.x, source(2 * seed + 1), pilot), sample(pair.y, source(2 * seed + 2), pilot)
    chosen = select_events(candidate_events(px, py), px, py, eps, delta, events)
    mx = sample(pair.x, source(2 * seed + 1_000_001), trials)
    my = sample(pair.y, source(2 * seed + 1_000_002), trials)
    level = alpha / (2 * max(len(chosen), 1))
    result = AuditResult(name, pair.description, eps, delta, trials, pilot)
    e = math.exp(eps)
    for ev, direction in chosen:
        first, second = (mx, my) if direction == "x|x'" else (my, mx)
        h1, h2 = int(ev.mask(first).sum()), int(ev.mask(second).sum())
        lo, hi = cp_lower(h1, trials, level), cp_upper(h2, trials, level)
        bound = e * hi + delta
        result.tests.append(EventTest(ev, direction, h1, h2, trials, lo, hi, bound, lo > bound))
    return result


# ---------------------------------------------------------------------------------------------
# power


def detectable_epsilon(
    trials: int, p: float, epsilon: float, delta: float = 0.0, tests: int = QUICK["events"],
    alpha: float = ALPHA,
) -> float:
    """The smallest true ε' the audit flags when an event has probability ``p`` under x' and
    e^ε'·p under x, with hit counts at their expected values (a median-case power figure)."""
    level = alpha / (2 * tests)
    need = math.exp(epsilon) * cp_upper(round(p * trials), trials, level) + delta
    lo, hi = round(p * trials), trials
    if cp_lower(hi, trials, level) <= need:
        return math.inf
    while hi - lo > 1:  # smallest hit count whose lower bound clears the bar
        mid = (lo + hi) // 2
        if cp_lower(mid, trials, level) > need:
            hi = mid
        else:
            lo = mid
    return math.log(hi / (p * trials))


__all__ = [
    "ALPHA", "AuditCase", "AuditResult", "Event", "EventTest", "FastNoise", "Pair", "QUICK",
    "ScaledNoise", "THOROUGH", "audit", "candidate_events", "cp_lower", "cp_upper",
    "detectable_epsilon", "first_value", "query_pair", "released_of_keys", "sample", "select_events",
    "sum_of_keys", "value_of_key", "values_of_keys",
]
