"""A sensitivity report for the data owner: ADMINISTRATORS ONLY, it reads raw data.

:func:`sensitivity_report` takes a raw DuckDB connection (an administrator's handle on the
database, never a :class:`dpsql.Connection`) and prints, for one column and statistic: n, the
exact value, the local sensitivity LS, A(k) (the largest LS within distance k), the PTR
distance D(b) for proposed bounds b, the smooth sensitivity S and the noise it implies, and
(optionally) a PNG with e^{−βk}·A(k) against k (seed 000's figure) and sensitivity against
Hamming distance, brute force against the analytic formula on a small sample (seed 001's figure).

None of these numbers is differentially private: LS alone reveals n for the mean (seed 000),
and the exact statistic is printed. The report is not reachable from SQL, is not a method of
:class:`dpsql.Connection`, refuses one, and its command ``dpsql sensitivity DATABASE ...``
opens the database directly without a policy: never expose either to analysts.
"""

from __future__ import annotations

import math
import typing as t
from dataclasses import dataclass, field

import duckdb
import numpy as np
from sqlglot import exp

from dpsql._privacy import sensitivity as sens
from dpsql._privacy.noise import laplace_ci
from dpsql.admin import bruteforce as bf
from dpsql.errors import Error
from dpsql.mechanisms import ptr

#: Values of the small sample brute-forced for the Hamming-distance figure, and its largest k.
SAMPLE, SAMPLE_K = 5, 3
#: The smoothing figure: at most PLOT_POINTS values of k, up to PLOT_K.
PLOT_POINTS, PLOT_K = 400, 20_000


@dataclass
class SensitivityReport:
    """What :func:`sensitivity_report` computed (all from raw data: for the data owner only)."""

    table: str
    column: str
    statistic: str
    p: float | None
    lower: float
    upper: float
    relation: str
    epsilon: float
    delta: float
    n: int
    value: float
    local_sensitivity: float
    beta: float
    a: dict[int, float] = field(default_factory=dict)
    distances: dict[float, int] = field(default_factory=dict)
    smooth: float = 0.0  # S_β, β = ε/(2 ln(2/δ)) (Laplace noise)
    smooth_cauchy: float = 0.0  # S_{ε/4} (Cauchy-like noise, γ = 4)
    ptr_threshold: int = 0
    plot_path: str | None = None

    @property
    def laplace_scale(self) -> float:
        return 2.0 * self.smooth / self.epsilon

    @property
    def cauchy_scale(self) -> float:
        return 16.0 * self.smooth_cauchy / self.epsilon

    def pass_probability(self, d: int) -> float:
        """P[D + Z >= threshold] for the discrete Laplace Z of PTR's test (ε₁ = ε/2)."""
        q = math.exp(-self.epsilon / 2.0)
        t_ = self.ptr_threshold - min(d, 10**9)
        return q**t_ / (1 + q) if t_ >= 1 else 1.0 - q ** (1 - t_) / (1 + q)

    def lines(self) -> list[str]:
        stat = self.statistic if self.p is None else f"{self.statistic} (p = {self.p:g})"
        out = [
            "SENSITIVITY REPORT: computed from raw data, for the data owner only (not differentially private)",
            f"{self.table}.{self.column}: {stat}, clipped to [{self.lower:g}, {self.upper:g}], relation {self.relation}",
            f"n = {self.n}; exact value = {self.value:.6g}",
            f"local sensitivity LS = {self.local_sensitivity:.6g} (never used to calibrate noise)",
            "A(k), the largest LS within distance k: "
            + ", ".join(f"A({k}) = {v:.4g}" for k, v in list(self.a.items())[:12])
            + (" ..." if len(self.a) > 12 else ""),
        ]
        for b, d in self.distances.items():
            shown = "∞" if d == sens.MAX_DISTANCE else str(d)
            out.append(f"PTR: D(b = {b:g}) = {shown}; passes the test (threshold {self.ptr_threshold}, "
                       f"ε₁ = ε/2) with probability {self.pass_probability(d):.4g}")
        ci = laplace_ci(self.laplace_scale, 0.95) if self.laplace_scale > 0 else 0.0
        out += [
            f"smooth (Laplace): β = ε/(2 ln(2/δ)) = {self.beta:.6g}, S = {self.smooth:.6g}, "
            f"noise Lap(2S/ε = {self.laplace_scale:.6g}), 95% within ±{ci:.6g} (ε = {self.epsilon:g}, δ = {self.delta:g})",
            f"smooth (Cauchy-like, pure ε): β = ε/4, S = {self.smooth_cauchy:.6g}, "
            f"noise (16·S/ε)·Z = {self.cauchy_scale:.6g}·Z",
        ]
        if self.plot_path:
            out.append(f"figure written to {self.plot_path}")
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())


def _values(con: duckdb.DuckDBPyConnection, table: str, column: str, lower: float,
            upper: float) -> np.ndarray:
    """The non-NULL values of the column, clipped to [lower, upper], sorted (raw data)."""
    x = exp.TryCast(this=exp.column(column, quoted=True), to=exp.DataType.build("DOUBLE"))
    clipped = exp.Least(this=exp.Greatest(this=x, expressions=[exp.Literal.number(repr(lower))]),
                        expressions=[exp.Literal.number(repr(upper))])
    sql = (exp.select(exp.alias_(clipped, "v")).from_(exp.table_(table, quoted=True))
           .where(exp.Not(this=exp.Is(this=x.copy(), expression=exp.Null()))).order_by("v").sql(dialect="duckdb"))
    try:
        got = con.execute(sql).fetchnumpy()["v"]
    except duckdb.Error as err:
        raise Error(f"cannot read {table}.{column}: {str(err).splitlines()[0]}") from None
    return np.asarray(got, dtype=np.float64)


def _mechanism_relation(relation: str) -> str:
    """The relation the mechanisms protect: under replace a value may also become NULL or leave
    the filter (the union relation, :mod:`dpsql.mechanisms.datadep`)."""
    return sens.UNION if relation == sens.REPLACE else relation


def _smooth(stat: str, x: np.ndarray, beta: float, lo: float, hi: float, relation: str,
            q: float | None) -> float:
    """The S that mechanism 'smooth' uses: from n alone for the mean."""
    if stat == "mean":
        return sens.mean_smooth_sensitivity(int(x.size), beta, lo, hi, _mechanism_relation(relation))
    return sens.smooth_sensitivity(stat, x, beta, lo, hi, relation, q)


def _distance(stat: str, x: np.ndarray, b: float, lo: float, hi: float, relation: str,
              q: float | None) -> int:
    """The D that mechanism 'ptr' uses (before its cap): from n alone for the mean."""
    if stat == "mean":
        return sens.mean_distance(int(x.size), b, lo, hi, _mechanism_relation(relation))
    return sens.distance_to_instability(stat, x, b, lo, hi, relation, q)


def sensitivity_report(duckdb_connection: duckdb.DuckDBPyConnection, table: str, column: str,
                       statistic: str, lower: float, upper: float, *, p: float | None = None,
                       epsilon: float = 1.0, delta: float = 1e-6,
                       b_values: t.Iterable[float] = (0.001, 0.01, 0.1, 1.0),
                       relation: str = "add_remove", k_values: t.Iterable[int] = range(0, 200),
                       plot_path: str | None = None, echo: bool = True) -> SensitivityReport:
    """Report LS, A(k), D(b) and S of ``statistic`` on ``table.column`` (see the module doc).

    ``duckdb_connection`` must be a raw ``duckdb`` connection held by an administrator; a
    :class:`dpsql.Connection` is refused. ``statistic``: count, sum, mean, median, quantile
    (``p`` in [0, 1]) or percentile (``p`` in [0, 100]). Prints the report unless ``echo`` is
    false, writes the figure to ``plot_path`` if given, and returns the numbers.
    """
    from dpsql.connection import Connection

    if isinstance(duckdb_connection, Connection):
        raise TypeError("sensitivity_report reads raw data: it takes an administrator's duckdb "
                        "connection, never a dpsql.Connection")
    if not isinstance(duckdb_connection, duckdb.DuckDBPyConnection):
        raise TypeError(f"sensitivity_report needs a duckdb connection, got {type(duckdb_connection).__name__}")
    if not (epsilon > 0 and 0 < delta < 1):
        raise ValueError(f"need epsilon > 0 and 0 < delta < 1, got {epsilon}, {delta}")
    stat, q = sens.canonical_statistic(statistic, p)
    lo, hi = float(lower), float(upper)
    x = _values(duckdb_connection, table, column, lo, hi)
    beta = epsilon / (2.0 * math.log(2.0 / delta))
    ks = sorted({int(k) for k in k_values})

    def a_of(k: int) -> float:
        return sens.local_sensitivity_at_distance(stat, x, k, lo, hi, relation, q)

    report = SensitivityReport(
        table=table, column=column, statistic=stat, p=q, lower=lo, upper=hi, relation=relation,
        epsilon=epsilon, delta=delta, n=int(x.size), value=sens.statistic(stat, x, lo, hi, q),
        local_sensitivity=sens.local_sensitivity(stat, x, lo, hi, relation, q), beta=beta,
        a={k: a_of(k) for k in ks},
        distances={float(b): _distance(stat, x, float(b), lo, hi, relation, q) for b in b_values},
        smooth=_smooth(stat, x, beta, lo, hi, relation, q),
        smooth_cauchy=_smooth(stat, x, epsilon / 4.0, lo, hi, relation, q),
        ptr_threshold=ptr.test_threshold(1.0 / (epsilon / 2.0), delta),
    )
    if plot_path:
        _plot(report, x, plot_path)
        report.plot_path = plot_path
    if echo:
        print(report)
    return report


def _sample(x: np.ndarray, size: int) -> list[float]:
    """``size`` evenly spaced order statistics of x (deterministic)."""
    if x.size == 0:
        return []
    idx = np.linspace(0, x.size - 1, min(size, x.size)).round().astype(int)
    return [float(v) for v in x[idx]]


def _plot(report: SensitivityReport, x: np.ndarray, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    lo, hi, stat, q = report.lower, report.upper, report.statistic, report.p
    # k from 0 to where e^{-βk}·(U − L) drops below S/100 (the curve's maximum is to the left)
    far = sens.truncation_k(report.beta, lo, hi, max(report.smooth, 1e-300) / 100)
    top = max(max(report.a, default=0), min(far, PLOT_K))
    ks = sorted(set(report.a) | set(np.linspace(0, top, PLOT_POINTS).round().astype(int).tolist()))
    a = np.array([report.a[k] if k in report.a else
                  sens.local_sensitivity_at_distance(stat, x, k, lo, hi, report.relation, q) for k in ks])
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    left.plot(ks, np.exp(-report.beta * np.array(ks)) * a, label="e^(-βk)·A(k)")
    left.axhline(report.smooth, color="grey", linestyle="--", label=f"S used by dpsql = {report.smooth:.3g}")
    left.set_xlabel("Value of k (distance)")
    left.set_ylabel("Smoothed-out local sensitivity e^(-βk)·A(k)")
    left.set_title(f"{report.statistic} of {report.column}: β = {report.beta:.3g}, n = {report.n}")
    twin = left.twinx()
    twin.plot(ks, a, color="tab:orange", linestyle=":", label="A(k) (right axis)")
    twin.set_ylabel("A(k)")
    handles = left.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
    left.legend(handles=handles, loc="upper right")

    sample = _sample(x, SAMPLE)
    universe = tuple(sorted(set(sample) | {lo, hi}))
    hk = list(range(SAMPLE_K + 1))
    for rel, mark in (("add_remove", "o"), ("replace", "s")):
        emp = [bf.local_sensitivity_at_distance(stat, sample, k, universe, rel, q) for k in hk]
        ana = [sens.local_sensitivity_at_distance(stat, sample, k, lo, hi, rel, q) for k in hk]
        right.plot(hk, emp, marker=mark, label=f"brute force, {rel}")
        bound = " (upper bound)" if rel == "add_remove" and stat in ("mean", "quantile") else ""
        right.plot(hk, ana, linestyle="--", label=f"analytic A(k), {rel}{bound}")
    right.set_xticks(hk)
    right.set_xlabel("Hamming distance k")
    right.set_ylabel("Empirical sensitivity A(k)")
    right.set_title(f"sample of {len(sample)} values, universe of {len(universe)}")
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
