"""Privacy costs, budgets and the conversions between accounting kinds.

Two accounting kinds are supported, both with sequential composition:

``"approx"``
    (ε, δ)-differential privacy with basic composition: the ε of the
    released results add up, and so do their δ. Pure ε-DP is the case δ = 0.
``"zcdp"``
    ρ-zero-concentrated differential privacy: the ρ add up.

A :class:`Cost` may have several nonzero parts; it is read as the sequential
composition of an (ε, δ) part and a ρ-zCDP part. :func:`to_kind` expresses a
cost in the kind of a ledger, or refuses when no sound conversion exists.

References: M. Bun and T. Steinke, "Concentrated Differential Privacy:
Simplifications, Extensions, and Lower Bounds", TCC 2016 (arXiv:1605.02065).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from dpsql.errors import BudgetError

__all__ = [
    "APPROX",
    "ZCDP",
    "KINDS",
    "KIND_NAMES",
    "TOLERANCE",
    "Budget",
    "Cost",
    "epsilon_to_rho",
    "format_cost",
    "format_number",
    "rho_to_epsilon",
    "to_kind",
]

APPROX = "approx"
ZCDP = "zcdp"
KINDS: tuple[str, ...] = (APPROX, ZCDP)
KIND_NAMES: dict[str, str] = {APPROX: "(ε, δ)", ZCDP: "ρ-zCDP"}
TOLERANCE = 1e-12  # relative slack for floating-point sums when checking a total, never more


def format_number(x: float) -> str:
    """Format ε or ρ compactly: three decimals, or three significant digits below 0.001."""
    if x == 0 or x >= 0.001:
        return f"{x:.3f}"
    return f"{x:.3g}"


def _check_part(name: str, value: object) -> float:
    """Return ``value`` as a float, or raise BudgetError if it is not a valid cost part."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BudgetError(f"invalid privacy cost: {name} must be a number, got {value!r}")
    x = float(value)
    if not math.isfinite(x) or x < 0:
        raise BudgetError(f"invalid privacy cost: {name} must be finite and >= 0, got {x!r}")
    return x


@dataclass(frozen=True)
class Cost:
    """A privacy cost (or an amount of budget): ε, δ and ρ, all finite and non-negative.

    δ must be below 1. Invalid values raise :class:`~dpsql.errors.BudgetError`.
    """

    epsilon: float = 0.0
    delta: float = 0.0
    rho: float = 0.0

    def __post_init__(self) -> None:
        for name in ("epsilon", "delta", "rho"):
            object.__setattr__(self, name, _check_part(name, getattr(self, name)))
        if self.delta >= 1:
            raise BudgetError(f"invalid privacy cost: delta must be below 1, got {self.delta!r}")

    def __add__(self, other: Cost) -> Cost:
        """Sequential composition: the parts add up."""
        if not isinstance(other, Cost):
            return NotImplemented
        return Cost(self.epsilon + other.epsilon, self.delta + other.delta, self.rho + other.rho)

    def is_zero(self) -> bool:
        """True when every part is zero (such a cost spends nothing)."""
        return self.epsilon == 0 and self.delta == 0 and self.rho == 0

    def __str__(self) -> str:
        """Compact form, e.g. ``ε=1.000, δ=1e-06``; zero parts are omitted."""
        parts = []
        if self.epsilon:
            parts.append(f"ε={format_number(self.epsilon)}")
        if self.delta:
            parts.append(f"δ={self.delta:g}")
        if self.rho:
            parts.append(f"ρ={format_number(self.rho)}")
        return ", ".join(parts) if parts else "ε=0"


def format_cost(cost: Cost, kind: str) -> str:
    """Format ``cost`` with every part relevant to ``kind``: ε and δ, or ρ."""
    if kind == ZCDP:
        return f"ρ={format_number(cost.rho)}"
    return f"ε={format_number(cost.epsilon)}, δ={cost.delta:g}"


def epsilon_to_rho(epsilon: float) -> float:
    """ρ of an ε-DP mechanism: ε-DP implies (ε²/2)-zCDP.

    Bun & Steinke 2016, Proposition 1.4. Valid for pure ε-DP only (δ = 0).
    """
    eps = _check_part("epsilon", epsilon)
    return eps * eps / 2.0


def rho_to_epsilon(rho: float, delta: float) -> float:
    """ε such that ρ-zCDP implies (ε, δ)-DP: ε = ρ + 2·sqrt(ρ·ln(1/δ)).

    Bun & Steinke 2016, Proposition 1.3; holds for every 0 < δ < 1.
    """
    r = _check_part("rho", rho)
    d = _check_part("delta", delta)
    if not 0 < d < 1:
        raise BudgetError(f"converting ρ-zCDP to (ε, δ) needs 0 < δ < 1, got δ={d!r}")
    return r + 2.0 * math.sqrt(r * math.log(1.0 / d))


def to_kind(cost: Cost, kind: str, delta_for_conversion: float | None = None) -> Cost:
    """Express ``cost`` in accounting ``kind`` (``"approx"`` or ``"zcdp"``).

    * ``"zcdp"``: ρ + ε²/2 (Bun & Steinke 2016, Prop. 1.4). A cost with δ > 0
      has no zCDP equivalent and is refused.
    * ``"approx"``: a ρ part becomes (ρ + 2·sqrt(ρ·ln(1/δ')), δ') with
      δ' = ``delta_for_conversion`` (Bun & Steinke 2016, Prop. 1.3), added to
      the cost's own ε and δ. Without δ' a ρ part is refused.

    Raises:
        BudgetError: the kind is unknown or the cost cannot be converted.
    """
    if kind not in KINDS:
        raise BudgetError(f"unknown accounting kind {kind!r}; expected one of {', '.join(KINDS)}")
    if kind == ZCDP:
        if cost.delta > 0:
            raise BudgetError(
                f"a cost with δ > 0 ({cost}) cannot be charged to a ρ-zCDP budget; "
                "only pure ε-DP and ρ-zCDP costs compose under zCDP"
            )
        if cost.epsilon == 0:
            return cost
        return Cost(rho=cost.rho + epsilon_to_rho(cost.epsilon))
    if cost.rho == 0:
        return cost
    if delta_for_conversion is None:
        raise BudgetError(
            f"a ρ-zCDP cost ({cost}) needs a δ for conversion before it can be charged "
            "to an (ε, δ) budget"
        )
    eps = rho_to_epsilon(cost.rho, delta_for_conversion)
    return Cost(epsilon=cost.epsilon + eps, delta=cost.delta + float(delta_for_conversion))


#: Who can give more budget, and how (``dpsql --help``: the ledger's total follows the policy's).
RAISE_TOTAL = ("ask the data owner to raise the total (they raise the policy's budget and run "
               "dpsql --policy FILE --set-budget)")


def _next_step(over: list[tuple[str, float]]) -> str:
    """What to do about a query that does not fit: ask for less of each part it exceeds (``over``:
    the part's name and what remains of it), when some remains, or for a larger total."""
    used = [name for name, left in over if left <= 0]
    if used or not over:
        return f"its {' and '.join(used) or 'delta'} is used up: {RAISE_TOTAL}"
    fits = " and ".join(f"{name} to at most {format_number(left) if name != 'delta' else f'{left:g}'}"
                        for name, left in over)
    return f"lower {fits}, or {RAISE_TOTAL}"


@dataclass(frozen=True)
class Budget:
    """A total privacy budget and its accounting kind.

    The kind is derived from the total: ``"zcdp"`` if ``total.rho > 0``, else
    ``"approx"``. A total mixing ρ with ε or δ is refused (BudgetError).
    """

    total: Cost
    kind: str = field(init=False)

    def __post_init__(self) -> None:
        if not isinstance(self.total, Cost):
            raise BudgetError(f"a budget total must be a Cost, got {self.total!r}")
        kind = ZCDP if self.total.rho > 0 else APPROX
        if kind == ZCDP and (self.total.epsilon > 0 or self.total.delta > 0):
            raise BudgetError(
                f"a budget is either (ε, δ) or ρ-zCDP, not both (got {self.total})"
            )
        object.__setattr__(self, "kind", kind)

    @property
    def kind_name(self) -> str:
        """Human-readable name of the kind: ``(ε, δ)`` or ``ρ-zCDP``."""
        return KIND_NAMES[self.kind]

    def remaining(self, spent: Cost) -> Cost:
        """What is left of the total after ``spent``: ε and δ, or ρ (never negative)."""
        t = self.total
        if self.kind == APPROX:
            return Cost(max(0.0, t.epsilon - spent.epsilon), max(0.0, t.delta - spent.delta))
        return Cost(rho=max(0.0, t.rho - spent.rho))

    def check(self, spent: Cost, cost: Cost) -> None:
        """Raise BudgetError unless ``spent + cost`` fits in the total.

        ``spent`` is in this budget's kind; ``cost`` is first expressed in it
        with :func:`to_kind`. Sums are exactly rounded (math.fsum) and compared
        with a relative tolerance of :data:`TOLERANCE` (0.1 + 0.2 fits in 0.3).
        """
        cost = to_kind(cost, self.kind)
        t = self.total
        if self.kind == APPROX:
            parts = [("epsilon", spent.epsilon, cost.epsilon, t.epsilon), ("delta", spent.delta, cost.delta, t.delta)]
        else:
            parts = [("rho", spent.rho, cost.rho, t.rho)]
        over = [(name, limit - s) for name, s, c, limit in parts if math.fsum((s, c)) > limit * (1 + TOLERANCE)]
        if over or spent.delta + cost.delta >= 1:
            raise BudgetError(
                "Cannot answer the query without exceeding the privacy budget. "
                f"Requested: {format_cost(cost, self.kind)} "
                f"Remaining: {format_cost(self.remaining(spent), self.kind)}; {_next_step(over)}"
            )

    def __str__(self) -> str:
        return format_cost(self.total, self.kind)
