"""The contract every mechanism keeps, and the registry the planner picks mechanisms from.

A mechanism is a :class:`Mechanism` subclass registered with :func:`register`. It declares, as
class attributes the planner reads (nothing else about a mechanism is known elsewhere):

* ``name``: the value of ``WITH (mechanism = ...)`` that selects it, and its key in
  :data:`REGISTRY` (the only list of mechanism names: options validation, the shell's
  completer and the README's mechanism table all follow it);
* ``statistics``: the :class:`~dpsql._sql.statistics.Statistic` values it answers;
* ``options``: the query options it reads beyond the common ones (:data:`COMMON_OPTIONS`:
  the budget, ``confidence``, ``keys``, ``mechanism`` and the per-unit bounds).
  The planner refuses a query that gives an option none of its chosen mechanisms uses;
* ``uses_delta``: whether its share of the budget gets a part of δ;
* ``supports_rho``: whether it can spend a ρ-zCDP budget.

Planning one DP aggregate, the planner calls, in this order and each exactly once:

1. :meth:`Mechanism.check` ``(agg, ctx)``: every refusal that follows from the query and the
   policy alone (statistic not answered, bounds missing or too wide, a required option absent).
   It reads no data and knows no budget;
2. :meth:`Mechanism.prepare` ``(agg, ctx, share)``: the data-independent release plan, a
   :class:`Prepared`, for the aggregate's share of the budget. It does not repeat ``check``;
   it refuses only what depends on the share (δ = 0 for a mechanism that needs δ, a noise
   scale that would overflow).

A :class:`Prepared` says, without reading data,

* what to compute in SQL (:meth:`Prepared.stats`: aggregates over the clipped value ``v``, one
  row per group, all in the single grouped SELECT of the rewrite), and optionally a separate
  per-group subquery (:meth:`Prepared.subquery`) for data-dependent quantities;
* how to release: :meth:`Prepared.release_many` (exact statistics of every group → a noisy
  value and a report entry each) is the one entry point the engine calls; by default it calls
  :meth:`Prepared.release` group by group, and a mechanism may override it to draw the noise
  of all groups at once;
* what it spends (:attr:`Prepared.cost`: at most its share, part by part; the planner checks
  that the shares add up to the query's budget and that no part spends more than its share)
  and what EXPLAIN shows (:meth:`Prepared.explain`).

A release runs after the budget is charged, so it refuses nothing: every refusal belongs in
``check`` or ``prepare`` (an error in a release is a bug, :class:`~dpsql.errors.InternalError`).
"""

from __future__ import annotations

import abc
import math
import re
import sys
import typing as t
from dataclasses import dataclass, field

from sqlglot import exp

from dpsql._accounting.budget import Cost
from dpsql._privacy import grid as _grid
from dpsql._privacy import noise as _noise
from dpsql._privacy.report import ReportEntry, fmt  # noqa: F401  (re-exported for the mechanisms)
from dpsql._sql.build import RAW, Values
from dpsql._sql.keywords import JOIN_OPTIONS, OPTION_KEYS
from dpsql._sql.statistics import Statistic
from dpsql.errors import PrivacyError

if t.TYPE_CHECKING:
    from dpsql._privacy.noise import Column, NoiseSource
    from dpsql._sql.bind import BoundAggregate
    from dpsql._sql.options import Options
    from dpsql.mechanisms.fixed import FixedPoint


@dataclass(frozen=True)
class Context:
    """Facts about the query that calibrations depend on (all public: query + policy)."""

    neighbouring: str  # "add_remove" | "replace"
    #: the L1 multiplier of per-row sensitivities: the rows one protected change can move,
    #: max_rows_per_unit × group_size, or with max_groups_per_unit g and
    #: max_rows_per_group_per_unit r, r·g × group_size (dpsql._policy.units). Laplace and the
    #: data-dependent mechanisms read it.
    max_rows: int
    grouped: bool
    filtered: bool
    options: "Options"
    #: SQL expression identifying the privacy unit of a source row (for sample-and-aggregate)
    unit_key: str = "row"
    #: units protected together (the policy's group privacy k); max_rows includes this factor
    group_size: int = 1
    #: the L2 multiplier of per-row sensitivities (the Gaussian mechanism): max_rows, or
    #: r·√g × group_size with g groups of r rows per unit; None means ``max_rows``
    l2_rows: float | None = None
    #: what the report says about the unit, e.g. "per patient_id, ≤ 5 rows" (empty for rows)
    unit_note: str = ""

    def __post_init__(self) -> None:
        if self.l2_rows is None:
            object.__setattr__(self, "l2_rows", float(self.max_rows))

    @property
    def confidence(self) -> float:
        return self.options.confidence


@dataclass
class NoisyPart:
    """One noisy measurement: a statistic of sensitivity ``sensitivity`` released with its share.

    ``kind`` is ``"laplace"`` (scale b = Δ/ε, with the grid slack of :mod:`dpsql._privacy.noise`) or
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

    def add_many(self, values: "Column", noise: "NoiseSource") -> "Column":
        """:meth:`add` for many groups at once (one sampler call per part, not per group)."""
        if self.kind == "laplace":
            return noise.add_many("laplace_int" if self.integer else "laplace", values, self.scale)
        if self.integer and self.cost.rho > 0:
            return noise.add_many("gaussian_int", values, self.scale)
        out = noise.add_many("gaussian", [float(v) for v in values], self.scale)
        return [int(round(x)) for x in out] if self.integer else out

    def add_exact(self, units: t.Any, exponent: int, noise: "NoiseSource") -> t.Any:
        """:meth:`add_many` for exact values given as integers times 2^exponent (a float part):
        the noise is added on the release grid to the exact value (:mod:`dpsql._privacy.grid`)."""
        return _grid.release_units(noise, self.kind, units, exponent, self.scale)

    def ci(self, confidence: float) -> float:
        if self.kind == "laplace":
            return _noise.laplace_ci(self.scale, confidence)
        return _noise.gaussian_ci(self.scale, confidence)

    @property
    def distribution(self) -> str:
        name = "Laplace" if self.kind == "laplace" else "Gaussian"
        return ("discrete " + name) if self.integer else name


class Prepared(abc.ABC):
    """A data-independent release plan for one DP aggregate (see the module docstring)."""

    #: the name of the mechanism that made it (shown in the report and EXPLAIN)
    mechanism: str = ""
    #: what the release spends: at most the share ``prepare`` was given, part by part (a
    #: mechanism may spend less, e.g. nothing for a count that is public, or no δ)
    cost: Cost
    #: whether the rewrite must compute the clipped value ``v`` of the aggregate's argument
    clips: bool = True
    #: when set, ``v`` is that integer of the argument instead of its clipped value
    #: (:class:`dpsql.mechanisms.fixed.FixedPoint`; unless it is ``integer``: the clipped
    #: integers themselves)
    fixed: "FixedPoint | None" = None
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

    def order_values(self, source: str, keys: list[str], v: str | None) -> "Values | None":
        """The values whose order statistics (:func:`dpsql._sql.build.order_statistics`)
        :meth:`subquery` computes, when that is what it computes; None otherwise. The rewrite may
        then build their histogram once, read ``__stats`` from it, and ask
        :meth:`order_subquery` for the subquery over it."""
        return None

    def value_counts(self) -> str | None:
        """The column of :meth:`subquery` that holds the histogram of the value column as a
        list ``[{v, c}]`` of every distinct non-NULL value and its count, when it returns one
        (an engine may then read ``COUNT(v)`` from it rather than aggregate the rows again)."""
        return None

    def order_subquery(self, values: "Values") -> exp.Select:
        """:meth:`subquery` over ``values`` (from :meth:`order_values`, perhaps with
        ``histogram`` set: the histogram is then read from that CTE)."""
        raise NotImplementedError(f"{type(self).__name__} has no order statistics")

    def per_unit(self) -> "dict[str, tuple[str, int, int]] | None":
        """How each statistic of :meth:`stats` is clipped when it is computed per unit first
        (:mod:`dpsql._compile.perunit`: name → (kind, A, B)), or None: the release needs rows (row
        truncation bounds the unit). A mechanism that returns kinds calibrates to the
        multipliers pre-aggregation shares with truncation (that module's docstring)."""
        return None

    @abc.abstractmethod
    def release(self, stats: t.Mapping[str, t.Any], noise: "NoiseSource") -> tuple[t.Any, ReportEntry]:
        """The noisy value of one group and its report (``stats``: that group's exact values)."""

    def release_many(
        self, groups: t.Sequence[t.Mapping[str, t.Any]], noise: "NoiseSource"
    ) -> t.Sequence[tuple[t.Any, ReportEntry]]:
        """The noisy value and report of every group, in order: what the engine calls.

        The default releases group by group with :meth:`release` and returns the list of
        ``(value, entry)`` pairs; override it to draw the noise of all groups at once (same laws,
        fewer sampler calls). The engine passes a :class:`dpsql.mechanisms.batch.Groups`, whose
        ``column(name)`` gives a statistic of every group as an array. Every mechanism returns
        the same type, a sequence of ``(value, entry)`` pairs: a vectorised one returns a
        :class:`dpsql.mechanisms.batch.ReleasedColumn` (such a sequence, with one report entry
        for the column and the values as one array), which the engine reads as a whole column.
        """
        return [self.release(g, noise) for g in groups]

    @abc.abstractmethod
    def explain(self) -> dict[str, str]:
        """Human-readable facts for EXPLAIN: sensitivity, distribution, scale, split."""


#: Options every query may give whatever its mechanisms: the budget, the reported intervals'
#: confidence, public group keys, the choice of mechanism itself, bounds found privately
#: (``bounds = 'auto'``, planned for every mechanism: dpsql._privacy.approx_bounds), the per-unit contribution
#: bounds (enforced in the rewritten SQL for every mechanism; they set ``Context.max_rows`` and
#: ``Context.l2_rows``).
COMMON_OPTIONS: frozenset[str] = frozenset({
    "epsilon", "delta", "rho", "confidence", "keys", "mechanism", "bounds",
    "max_rows_per_unit", "max_groups_per_unit", "max_rows_per_group_per_unit",
    "contribution", "report_dropped",
    *JOIN_OPTIONS,
})

#: The value of ``mechanism`` that asks for each statistic's default mechanism.
AUTO = "auto"


class Mechanism(abc.ABC):
    """A way of releasing DP aggregates; one instance per name in :data:`REGISTRY`.

    Subclasses declare ``name``, ``statistics``, ``options``, ``uses_delta`` and
    ``supports_rho`` (see the module docstring), implement :meth:`prepare`, and extend
    :meth:`check` with their own query-only refusals.
    """

    name: str = ""
    #: the statistics this mechanism answers
    statistics: frozenset[Statistic] = frozenset()
    #: query options it reads beyond :data:`COMMON_OPTIONS` (e.g. ``{"chunks"}``)
    options: frozenset[str] = frozenset()
    #: whether the mechanism needs δ > 0 (or ρ) in its share
    uses_delta: bool = False
    #: whether it can run under a ρ-zCDP budget
    supports_rho: bool = False

    def check(self, agg: "BoundAggregate", ctx: Context) -> None:
        """Refuse what this mechanism cannot answer, from the query and the policy alone.

        Called once per aggregate by the planner, before :meth:`prepare`. The default refuses
        a statistic outside :attr:`statistics` and, for a statistic computed by adding up the
        clipped values row by row, bounds for which that sum could overflow a double.
        """
        self.check_statistic(agg)
        check_accumulation(agg)

    def check_statistic(self, agg: "BoundAggregate") -> None:
        """Refuse an aggregate whose statistic is not one of :attr:`statistics`."""
        if agg.statistic not in self.statistics:
            supported = ", ".join(sorted(self.statistics))
            raise PrivacyError(
                f"mechanism '{self.name}' cannot answer {agg.label} (it supports {supported})"
            )

    @abc.abstractmethod
    def prepare(self, agg: "BoundAggregate", ctx: Context, cost: Cost) -> Prepared:
        """The release plan for ``agg`` with its share ``cost`` of the budget.

        :meth:`check` has passed; refuse here only what depends on the share.
        """


REGISTRY: dict[str, Mechanism] = {}


_M = t.TypeVar("_M", bound=type[Mechanism])


def register(cls: _M) -> _M:
    """Class decorator: add one instance of ``cls`` to :data:`REGISTRY` under ``cls.name``.

    Refuses (``ValueError``, at import) a name already taken or not a lower-case word, a
    mechanism that answers no statistic, and an option that is not a query option or is
    common to every query.
    """
    name = cls.name
    if not re.fullmatch(r"[a-z_][a-z0-9_]*", name) or name == AUTO:
        raise ValueError(f"mechanism {cls.__name__}: name {name!r} must be a lower-case word other than 'auto'")
    if name in REGISTRY:
        raise ValueError(f"mechanism {cls.__name__}: the name {name!r} is already registered")
    if not cls.statistics or not all(isinstance(s, Statistic) for s in cls.statistics):
        raise ValueError(f"mechanism '{name}': statistics must be a non-empty set of Statistic values")
    unknown = sorted(set(cls.options) - (set(OPTION_KEYS) - COMMON_OPTIONS))
    if unknown:
        raise ValueError(f"mechanism '{name}': {', '.join(unknown)} is not a mechanism option "
                         f"(known: {', '.join(k for k in OPTION_KEYS if k not in COMMON_OPTIONS)})")
    REGISTRY[name] = cls()
    return cls


def unregister(name: str) -> None:
    """Remove a mechanism from :data:`REGISTRY` (for tests that register one of their own)."""
    del REGISTRY[name]


def choices() -> tuple[str, ...]:
    """Every value ``mechanism`` may take: the registered names, then ``'auto'``."""
    return (*REGISTRY, AUTO)


def check_accumulation(agg: "BoundAggregate") -> None:
    """Refuse bounds for which an exact sum of clipped values could overflow a double.

    A statistic that adds values up (:attr:`Statistic.sums`: a sum, a mean) adds at most N_MAX
    values in [L, U], one that adds squares (:attr:`Statistic.squares`: a variance) also their
    squares: the totals stay finite when N_MAX·max(|L|, |U|) is finite, and N_MAX·(2·max(|L|,
    |U|))² for the squares (the centring q − 2c·s + c²·n has terms up to twice
    N_MAX·max(|L|, |U|)²). Quantiles add nothing up. The test reads the query only: no
    data-dependent failure can then follow the budget charge.
    """
    if agg.lower is None or agg.upper is None or not agg.statistic.sums:
        return
    lower, upper = float(agg.lower), float(agg.upper)
    big = max(abs(lower), abs(upper))
    if not math.isfinite(N_MAX * big):
        raise PrivacyError(f"{agg.label}: the {bound_name(lower, upper)} is too large: a sum over up to "
                           "2^63 rows would overflow a double")
    if agg.statistic.squares and not math.isfinite(N_MAX * (2.0 * big) * (2.0 * big)):
        raise PrivacyError(f"{agg.label}: the {bound_name(lower, upper)} is too large: a sum of squares "
                           "over up to 2^63 rows would overflow a double")


def bound_name(lower: float, upper: float) -> str:
    """``upper bound U`` or ``lower bound L``: the bound of larger magnitude, for messages."""
    return f"upper bound {fmt(upper)}" if abs(upper) >= abs(lower) else f"lower bound {fmt(lower)}"


def raw_select(query: exp.Expression, names: list[str]) -> exp.Select:
    """``SELECT names FROM (query) AS __q`` (:data:`dpsql._sql.build.RAW`): a mechanism's own
    query (a tree built from templates parsed once, :mod:`dpsql._sql.template`) as the
    subquery the compilers take as it is.

    >>> raw_select(exp.select("1 AS x"), ["x"]).sql()
    'SELECT x FROM (SELECT 1 AS x) AS __q'
    """
    source = exp.Subquery(this=query, alias=exp.TableAlias(this=exp.to_identifier(RAW)))
    return exp.Select(expressions=[exp.column(name) for name in names]).from_(source, copy=False)


#: The most rows a table can hold: DuckDB numbers rows with signed 64-bit integers, so no group
#: has more than 2^63 of them. Bounds are refused at plan time when an accumulation over N_MAX
#: clipped values could overflow a double (``dpsql._plan.plan``), and a release clamps an exact
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
