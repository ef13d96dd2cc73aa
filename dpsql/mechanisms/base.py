"""The interface every mechanism implements, and the registry the planner picks from.

A :class:`Mechanism` turns one bound DP aggregate, a context (neighbouring relation, per-unit
contribution bound, grouping) and its share of the budget into a :class:`Prepared` release
plan, without reading data. A ``Prepared`` says

* what to compute in SQL (:meth:`Prepared.stats`: aggregates over the clipped value ``v``, one
  row per group, all in the single grouped SELECT of the rewrite), and optionally a separate
  per-group subquery (:meth:`Prepared.subquery`) for data-dependent quantities;
* how to release (:meth:`Prepared.release`: exact statistics of one group → noisy value + report);
* what it costs (:attr:`Prepared.cost`) and what EXPLAIN shows (:meth:`Prepared.explain`).
"""

from __future__ import annotations

import abc
import math
import sys
import typing as t
from dataclasses import dataclass, field

from sqlglot import exp

from dpsql.privacy import noise as _noise
from dpsql.privacy.budget import Cost
from dpsql.errors import PrivacyError
from dpsql.privacy.report import ReportEntry, fmt  # noqa: F401  (re-exported for the mechanisms)
from dpsql.sql.build import RAW

if t.TYPE_CHECKING:
    from dpsql.sql.bind import BoundAggregate
    from dpsql.privacy.noise import NoiseSource
    from dpsql.sql.options import Options


@dataclass(frozen=True)
class Context:
    """Facts about the query that calibrations depend on (all public: query + policy)."""

    neighbouring: str  # "add_remove" | "replace"
    #: rows one protected group of units can contribute: max_rows_per_unit × group_size
    max_rows: int
    grouped: bool
    filtered: bool
    options: "Options"
    #: SQL expression identifying the privacy unit of a source row (for sample-and-aggregate)
    unit_key: str = "row"
    #: units protected together (the policy's group privacy k); max_rows includes this factor
    group_size: int = 1

    @property
    def confidence(self) -> float:
        return self.options.confidence


@dataclass
class NoisyPart:
    """One noisy measurement: a statistic of sensitivity ``sensitivity`` released with its share.

    ``kind`` is ``"laplace"`` (scale b = Δ/ε, with the grid slack of :mod:`dpsql.privacy.noise`) or
    ``"gaussian"`` (σ from the analytic Gaussian for (ε, δ), or Δ/sqrt(2ρ) for ρ-zCDP).
    Integer parts (counts) use the discrete distributions on the integers (CKS20).
    """

    name: str
    sensitivity: float
    kind: str
    cost: Cost
    integer: bool = False
    scale: float = field(init=False)

    def __post_init__(self) -> None:
        d, c, integer = self.sensitivity, self.cost, self.integer
        if self.kind == "laplace":
            self.scale = _noise.laplace_scale(d, c.epsilon, integer=integer)
        elif self.kind == "gaussian":
            if c.rho > 0:
                self.scale = _noise.gaussian_sigma_zcdp(d, c.rho, integer=integer)
            else:
                # (ε, δ): the analytic Gaussian on the grid; integers are rounded afterwards.
                self.scale = _noise.gaussian_sigma_approx(d, c.epsilon, c.delta)
        else:  # pragma: no cover - programming error
            raise ValueError(self.kind)

    def add(self, value: float, noise: "NoiseSource") -> float:
        if self.kind == "laplace":
            return noise.laplace_int(int(value), self.scale) if self.integer else noise.laplace(float(value), self.scale)
        if self.integer and self.cost.rho > 0:
            return noise.gaussian_int(int(value), self.scale)
        if self.integer:
            return int(round(noise.gaussian(float(value), self.scale)))  # post-processing
        return noise.gaussian(float(value), self.scale)

    def add_many(self, values: t.Sequence[float], noise: "NoiseSource") -> list[float]:
        """:meth:`add` for many groups at once (one sampler call per part, not per group)."""
        if self.kind == "laplace":
            return noise.add_many("laplace_int" if self.integer else "laplace", values, self.scale)
        if self.integer and self.cost.rho > 0:
            return noise.add_many("gaussian_int", values, self.scale)
        out = noise.add_many("gaussian", [float(v) for v in values], self.scale)
        return [int(round(x)) for x in out] if self.integer else out

    def ci(self, confidence: float) -> float:
        if self.kind == "laplace":
            return _noise.laplace_ci(self.scale, confidence)
        return _noise.gaussian_ci(self.scale, confidence)

    @property
    def distribution(self) -> str:
        name = "Laplace" if self.kind == "laplace" else "Gaussian"
        return ("discrete " + name) if self.integer else name


class Prepared(abc.ABC):
    """A data-independent release plan for one DP aggregate."""

    mechanism: str = ""
    #: whether the rewrite must compute the clipped value ``v`` of the aggregate's argument
    clips: bool = True
    #: whether the source rows must carry their privacy unit as column ``__u`` (the id, or for
    #: row-level privacy a hash of the whole row of the base table)
    needs_unit: bool = False

    def __init__(self, agg: "BoundAggregate", ctx: Context, cost: Cost) -> None:
        self.agg = agg
        self.ctx = ctx
        self.cost = cost

    @property
    def label(self) -> str:
        return self.agg.label

    @abc.abstractmethod
    def stats(self, v: exp.Expression | None) -> dict[str, exp.Expression]:
        """Aggregate expressions over the source rows; ``v`` is the clipped argument column."""

    def subquery(self, source: str, keys: list[str], v: str | None) -> exp.Select | None:
        """An optional per-group SELECT over the CTE ``source`` (columns ``keys`` and ``v``)."""
        return None

    @abc.abstractmethod
    def release(self, stats: t.Mapping[str, t.Any], noise: "NoiseSource") -> tuple[t.Any, ReportEntry]:
        """The noisy value of one group and its report."""

    @abc.abstractmethod
    def explain(self) -> dict[str, str]:
        """Human-readable facts for EXPLAIN: sensitivity, distribution, scale, split."""


class Mechanism(abc.ABC):
    """A way of releasing DP aggregates; one instance per name in :data:`REGISTRY`."""

    name: str = ""
    statistics: frozenset[str] = frozenset()
    #: whether the mechanism needs δ > 0 (or ρ) in its share
    uses_delta: bool = False
    #: whether it can run under a ρ-zCDP budget
    supports_rho: bool = False

    def check(self, agg: "BoundAggregate", ctx: Context) -> None:
        """Refuse (query-only) what this mechanism cannot answer."""
        if agg.statistic not in self.statistics:
            supported = ", ".join(sorted(self.statistics))
            raise PrivacyError(
                f"mechanism '{self.name}' cannot answer {agg.label} (it supports {supported})"
            )

    @abc.abstractmethod
    def prepare(self, agg: "BoundAggregate", ctx: Context, cost: Cost) -> Prepared:
        """Build the release plan for ``agg`` with budget ``cost``."""


REGISTRY: dict[str, Mechanism] = {}


def register(cls: type[Mechanism]) -> type[Mechanism]:
    """Class decorator: add one instance of ``cls`` to the registry under ``cls.name``."""
    REGISTRY[cls.name] = cls()
    return cls


def raw_select(sql: str, names: list[str]) -> exp.Select:
    """``SELECT names FROM (sql) AS __q`` (:data:`dpsql.sql.build.RAW`) with ``sql`` kept verbatim.

    The text is carried as a ``Var``, which sqlglot prints as is (quotes included): parsing
    and regenerating a query of this size would add tens of milliseconds to every plan.
    """
    body = exp.Var(this=f"({sql.strip()})")
    source = exp.Table(this=body, alias=exp.TableAlias(this=exp.to_identifier(RAW)))
    return exp.select(*[exp.column(name) for name in names]).from_(source)


#: The most rows a table can hold: DuckDB numbers rows with signed 64-bit integers, so no group
#: has more than 2^63 of them. Bounds are refused at plan time when an accumulation over N_MAX
#: clipped values could overflow a double (``dpsql.engine.plan``), and a release clamps an exact
#: statistic into the range the bounds allow over N_MAX rows, so it never meets inf or NaN.
N_MAX = 2**63


def finite_in(x: float, lo: float, hi: float) -> float:
    """``x`` clamped to [lo, hi], with NaN → 0 (a fallback, clamped as well): always finite.

    For exact statistics that should be finite but came back inf or NaN; the ends ``lo`` and
    ``hi`` are capped at the largest double, so the result is finite whatever they are.
    """
    top = sys.float_info.max
    lo, hi = max(lo, -top), min(hi, top)
    if math.isnan(x):
        x = 0.0
    return min(max(x, lo), hi)


def clamp(x: float, lo: float, hi: float) -> float:
    if math.isnan(x):
        return lo
    return min(max(x, lo), hi)


def num(value: t.Any) -> float:
    """An exact statistic from DuckDB as a float (NULL → 0, as for an empty group)."""
    return 0.0 if value is None else float(value)
