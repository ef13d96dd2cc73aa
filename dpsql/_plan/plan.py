"""Plan a bound DP query: pick a mechanism per aggregate, split the budget, choose group keys.

Mechanisms (the contract is in :mod:`dpsql.mechanisms.base`)
    Each DP aggregate gets the query's ``mechanism``, or its statistic's default
    (:class:`~dpsql._sql.statistics.Statistic`, a different one under ρ where it has one). The
    name must be registered; the mechanism's ``check`` runs once per aggregate; an option the
    query gives beyond the common ones must be used by at least one chosen mechanism.

Budget split (documented in README "Privacy model" and shown by EXPLAIN)
    The ε (or ρ) of the WITH clause is the budget of the whole query. It is split evenly into
    *shares*: one per DP aggregate, plus one for group-key selection when keys are not public.
    δ is split evenly among the shares that use it (Gaussian, PTR and smooth-sensitivity
    aggregates, key selection); a query whose mechanisms use no δ is charged δ = 0. Inside a
    share, a mechanism splits again over its parts (e.g. DP_MEAN: ½ count, ½ centred sum).

Group keys (SPEC §4.5)
    Keys are data. They are released from a public domain (``keys=`` in the query, or ``keys``
    of every GROUP BY column in the policy): every key of the domain gets a row, present in the
    data or not, and data keys outside it are dropped. Without a public domain and with δ > 0,
    keys are selected by τ-thresholding a noisy count (see :class:`KeySelection`). With δ = 0
    and no public domain the query is refused. A public domain is first cast, part by part, to
    the DuckDB type of its group expression (:mod:`dpsql._plan.keys`): a key that does not cast, or
    two keys that become one, are refused, since DuckDB would put them in one group.
"""

from __future__ import annotations

import dataclasses
import math
import typing as t
from dataclasses import dataclass, field

from dpsql._accounting.budget import TOLERANCE, Cost
from dpsql._compile import perunit
from dpsql._plan.keys import KeyDomain, public_domain
from dpsql._policy import units
from dpsql._policy.policy import UNIT_BOUNDS, Policy
from dpsql._policy.units import UnitBounds
from dpsql._privacy.approx_bounds import SHARE, WIDEST, BoundsSearch, Found
from dpsql._sql import reweight
from dpsql._sql.bind import Bound, BoundAggregate
from dpsql._sql.keywords import OPTION_KEYS
from dpsql._sql.suggest import did_you_mean
from dpsql.errors import InternalError, OptionError, PrivacyError
from dpsql.mechanisms import AUTO, COMMON_OPTIONS, REGISTRY, Context, NoisyPart, Prepared, choices
from dpsql.mechanisms.base import fmt

if t.TYPE_CHECKING:
    from dpsql.backends.backend import Backend


@dataclass
class KeySelection:
    """τ-thresholding of group keys with a noisy count (δ > 0, keys not public).

    Guarantee: (ε_t, δ_t)-DP for the released key set together with the hidden counts, under
    either neighbouring relation. What a group counts is what is protected: rows for a row
    unit (``COUNT(*)``), units for an id unit (``COUNT(DISTINCT unit)`` over the truncated
    rows, :mod:`dpsql._policy.units`). One protected change reaches at most ``m`` groups and
    moves each group's count by at most ``c``:

    * a row unit of m rows (× the policy's group size s): m groups, c = m;
    * an id unit: m = the groups one unit can reach after truncation, g (max_groups_per_unit)
      or, without g, k (max_rows_per_unit), times s; c = s (a unit counts once per group).

    The counts' L1 sensitivity is Δ = m under ``add_remove`` and 2m under ``replace`` (a
    changed unit leaves up to m groups and joins up to m others). A group that exists in x but
    not in a neighbour has true count at most c. The count gets discrete Laplace noise Z with
    P[Z = z] ∝ q^|z|, q = e^(−1/b), b = Δ/ε_t, whose tail is P[Z ≥ s] = q^s/(1 + q) for integer
    s ≥ 1 (the continuous ½·e^(−s/b) understates it by up to a factor 2/(1 + q)). A key is
    released when its count plus Z reaches τ; with τ = c + b·ln(m/((1 + q)·δ_t)) each such
    group is released with probability at most q^(τ−c)/(1 + q) = δ_t/m, and at most m of them
    exist (union bound): δ_t in total (Korolova, Kenthapadi, Mishra, Ntoulas 2009; Wilson et
    al. 2020, §4, for the continuous version; the statistical audit covers this edge case).
    """

    part: NoisyPart
    threshold: float
    delta: float

    @classmethod
    def build(cls, m: int, cost: Cost, neighbouring: str = "add_remove", per_group: int | None = None) -> "KeySelection":
        """``m``: groups one protected change reaches; ``per_group``: the most it moves one
        group's count (default ``m``: a row unit of m rows)."""
        c = m if per_group is None else per_group
        sensitivity = float(2 * m if neighbouring == "replace" else m)
        part = NoisyPart("keys", sensitivity, "laplace", Cost(epsilon=cost.epsilon), integer=True)
        q = math.exp(-1.0 / part.scale)
        tau = c + part.scale * math.log(m / ((1.0 + q) * cost.delta))
        return cls(part=part, threshold=tau, delta=cost.delta)

    @property
    def cost(self) -> Cost:
        return Cost(epsilon=self.part.cost.epsilon, delta=self.delta)


@dataclass
class Plan:
    bound: Bound
    ctx: Context
    prepared: list[Prepared]
    #: the public key domain, or None (keys are τ-selected, or there is no GROUP BY)
    public_keys: KeyDomain | None = None
    selection: KeySelection | None = None
    cost: Cost = field(default_factory=Cost)
    mechanisms: list[str] = field(default_factory=list)
    #: δ used to express a ρ-zCDP cost in an (ε, δ) ledger (the query's ``delta``)
    conversion_delta: float | None = None
    #: the privacy unit and the contribution bounds in force (None: a row unit of one row)
    units: UnitBounds | None = None
    #: bounds found privately: one search per aggregate that opted in (dpsql._release.found)
    searches: list[BoundsSearch] = field(default_factory=list)
    #: the bounds found, by aggregate index; empty until the searches have run
    found: dict[int, Found] = field(default_factory=dict)
    #: ``report_dropped``: the noise of the counts of units, and of units the bound cut
    dropped: NoisyPart | None = None

    @property
    def waiting(self) -> bool:
        """Whether the plan waits for bounds found privately (its statement uses stand-ins)."""
        return bool(self.searches) and not self.found

    def explain_lines(self) -> list[str]:
        lines = [f"budget: {self.cost} for the whole query"]
        if self.units is not None:
            lines += reweight.explain(self.units)
        if self.bound.group_by:
            if self.public_keys is not None:
                source = f" ({self.public_keys.source})" if self.public_keys.source else ""
                lines.append(f"group keys: public domain of {len(self.public_keys)} keys{source}")
            elif self.selection is not None:
                s = self.selection
                counted = f"{self.units.unit}s" if self.units is not None and self.units.by_id else "rows"
                lines.append(
                    f"group keys: τ-thresholding, noisy count of {counted} {s.part.distribution}(b={fmt(s.part.scale)}), "
                    f"τ={fmt(s.threshold)}, spends {s.cost}"
                )
        if self.dropped is not None:
            lines.append(f"report_dropped: noisy counts of units and of units over the bound, "
                         f"{self.dropped.distribution}(b={fmt(self.dropped.scale)}), spends {self.dropped.cost}")
        for search in self.searches:
            found = self.found.get(search.index)
            lines.append(search.explain() + (f"; found {found.text()}" if found is not None else ""))
        searched = {s.index for s in self.searches} if self.waiting else set()
        for prep, mech in zip(self.prepared, self.mechanisms):
            if prep.agg.index in searched:
                facts = "bounds: found privately first (above); the sensitivity and noise scale follow from them"
            else:
                facts = "; ".join(f"{k}: {v}" for k, v in prep.explain().items())
                facts += f"; {prep.agg.bounds_note}" if prep.agg.bounds_note else ""
            lines.append(f"{prep.label}: mechanism {mech}, spends {prep.cost}; {facts}")
        return lines


def unit_bounds(bound: Bound, policy: Policy) -> UnitBounds:
    """The privacy unit of ``bound``'s table and the contribution bounds in force: the query's
    options over the policy's (refusals depend on the query and the policy only)."""
    assert bound.table is not None
    opts = bound.options
    given = {key: getattr(opts, key) for key in UNIT_BOUNDS if key in opts.given}
    if bound.per_unit:
        if given:
            raise OptionError(f"option '{sorted(given)[0]}' has nothing to bound: the query reads a "
                              "subquery that holds one row per unit")
        return units.UnitBounds(unit=bound.table.privacy_unit, max_rows=1, group_size=policy.group_size,
                                sources={"max_rows_per_unit": "one row per unit (a per-unit subquery)"})
    out = units.resolve(bound.bounds_table or bound.table, given, grouped=bool(bound.group_by),
                        group_size=policy.group_size)
    if not bound.joined:
        return out
    steps = list(bound.join_steps)
    if bound.bounds_table is not None:
        steps.append(f"the joined rows take the per-unit bounds of {bound.bounds_table.name}, the largest among "
                     "the joined tables of the unit (a join along a link keeps one row per row of the linking table)")
    rows = bound.joined_rows
    if rows is not None and _as_add_remove(bound, policy):
        # A replaced row is one removal and one addition: under add/remove, twice the rows.
        rows *= 2
        steps.append("neighbouring 'replace' through a join or flat map: a changed row is a removal and an "
                     f"addition, analysed as add/remove of twice the rows: {rows}")
    return dataclasses.replace(out, joined_rows=rows, steps=tuple(steps))


def _as_add_remove(bound: Bound, policy: Policy) -> bool:
    """Whether the query is analysed under add/remove although the policy says replace: a row
    unit read through joins or flat maps (a replaced row can change how many rows it makes)."""
    return policy.neighbouring == "replace" and bound.joined_rows is not None


def _context(bound: Bound, policy: Policy, bounds: UnitBounds) -> Context:
    assert bound.table is not None
    return Context(
        neighbouring="add_remove" if _as_add_remove(bound, policy) else policy.neighbouring,
        max_rows=bounds.l1,
        grouped=bool(bound.group_by),
        filtered=bound.filtered,
        options=bound.options,
        unit_key=bound.table.privacy_unit,
        group_size=policy.group_size,
        l2_rows=bounds.l2,
        unit_note=bounds.note,
    )


def _choose(agg: BoundAggregate, bound: Bound) -> str:
    """The mechanism for ``agg``: the query's choice, or its statistic's default (for ρ, if any)."""
    opts = bound.options
    if opts.mechanism not in (None, AUTO):
        return opts.mechanism
    return agg.statistic.default(zcdp=opts.rho is not None and opts.mechanism is None)


def _check_mechanism_option(bound: Bound) -> None:
    """Refuse a ``mechanism`` that is not registered, or that cannot spend the query's ρ."""
    name = bound.options.mechanism
    if name is None:
        return
    if name != AUTO and name not in REGISTRY:
        raise OptionError(f"option 'mechanism' must be one of {', '.join(choices())}; got '{name}'"
                          + did_you_mean(name, choices()))
    if bound.options.rho is not None and (name == AUTO or not REGISTRY[name].supports_rho):
        zcdp = " or ".join(f"'{n}'" for n, m in REGISTRY.items() if m.supports_rho) or "one that supports it"
        raise OptionError(f"option 'rho' (zCDP) needs mechanism={zcdp}")


def _check_options_used(bound: Bound, names: list[str]) -> None:
    """Refuse an option the query gives that none of its chosen mechanisms reads."""
    chosen = list(dict.fromkeys(names))
    for key in OPTION_KEYS:
        if key not in bound.options.given or key in COMMON_OPTIONS:
            continue
        if any(key in REGISTRY[n].options for n in chosen):
            continue
        users = ", ".join(n for n, m in REGISTRY.items() if key in m.options) or "no mechanism"
        which = " or ".join(f"'{n}'" for n in chosen)
        raise OptionError(f"option '{key}' is not used by mechanism {which} (it is used by: {users})")


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= TOLERANCE * max(abs(a), abs(b), 1.0)


@dataclass(frozen=True)
class _Part:
    """One consumer of the query's budget: a prepared aggregate, or group key selection."""

    label: str
    share: Cost
    cost: Cost
    uses_delta: bool


def _check_split(bound: Bound, parts: list[_Part]) -> None:
    """The split hands out exactly the query's budget, and no part spends more than its share.

    The ε (or ρ) shares add up to the query's ε (or ρ); the δ shares add up to its δ when some
    part uses δ, and are all 0 otherwise (with ρ, δ only converts ρ for the ledger: 0 here).
    A part may spend less than its share (a public count spends nothing), never more. A
    failure is a bug in the planner or in a mechanism, never the analyst's: InternalError.
    """
    opts = bound.options
    users = any(p.uses_delta for p in parts)
    asked = Cost(epsilon=opts.epsilon or 0.0, rho=opts.rho or 0.0,
                 delta=(opts.delta or 0.0) if opts.rho is None and users else 0.0)
    for name in ("epsilon", "delta", "rho"):
        handed = math.fsum(getattr(p.share, name) for p in parts)
        if not _close(handed, getattr(asked, name)):
            raise InternalError(f"the shares of {name} do not add up to the budget of the query")
    for p in parts:
        if p.share.delta and not p.uses_delta:
            raise InternalError(f"{p.label} is given a share of delta it does not use")
        for name in ("epsilon", "delta", "rho"):
            spent, share = getattr(p.cost, name), getattr(p.share, name)
            if spent > share and not _close(spent, share):
                raise InternalError(f"{p.label} spends more {name} than its share of the budget")


def _with_bounds(aggregates: list[BoundAggregate], found: dict[int, Found] | None) -> list[BoundAggregate]:
    """The aggregates with the bounds found filled in, or, before the search, the widest bounds
    it can return (every check and calibration then holds for whatever it finds)."""
    out = []
    for agg in aggregates:
        if agg.auto_bounds:
            if found is not None and agg.index not in found:
                raise InternalError(f"no bounds were found for {agg.label}")
            lower, upper = (found[agg.index].lower, found[agg.index].upper) if found is not None else WIDEST
            agg = dataclasses.replace(agg, lower=lower, upper=upper)
        out.append(agg)
    return out


def _search_share(share: Cost) -> tuple[Cost, Cost]:
    """An aggregate's share split into the search for its bounds (SHARE of its ε or ρ) and the
    rest, which keeps its δ."""
    search = Cost(epsilon=SHARE * share.epsilon, rho=SHARE * share.rho)
    return search, Cost(epsilon=share.epsilon - search.epsilon, delta=share.delta, rho=share.rho - search.rho)


def plan(bound: Bound, policy: Policy, found: dict[int, Found] | None = None, engine: "Backend | None" = None,
         domain: KeyDomain | None = None) -> Plan:
    """Plan ``bound`` (a DP query) under ``policy``; refusals depend on query and policy only.

    Each aggregate's mechanism is checked once (:meth:`Mechanism.check`), then the options
    are checked against the chosen mechanisms, the budget is split, and each mechanism
    prepares its release for its share (:meth:`Mechanism.prepare`). Before anything runs, the
    split is checked to hand out exactly the query's budget (:func:`_check_split`); the plan's
    cost, what the ledger charges, is the sum of what the parts spend.

    An aggregate whose bounds are found privately gives :data:`SHARE` of its share to the
    search (:class:`BoundsSearch`) and plans its release with the rest: with the bounds
    ``found`` (after the search ran, :mod:`dpsql._release.found`), or else with the widest
    bounds the search can return, so that nothing refused depends on what it finds.

    ``engine`` reads the key domains of public tables' columns and casts key parts when it
    casts keys itself (:mod:`dpsql._plan.keys`); ``domain``: the key domain planned already
    (a plan made again with the bounds found keeps its first plan's keys).
    """
    opts = bound.options
    aggregates = _with_bounds(bound.aggregates, found)
    bounds = unit_bounds(bound, policy)
    ctx = _context(bound, policy, bounds)
    _check_mechanism_option(bound)
    if opts.epsilon is None and opts.rho is None:
        raise OptionError("say how much budget the query spends: add WITH (epsilon = ...)")
    names = []
    for agg in aggregates:
        name = _choose(agg, bound)
        if name not in REGISTRY:
            raise PrivacyError(f"mechanism '{name}' is not available for {agg.label}")
        REGISTRY[name].check(agg, ctx)
        if opts.rho is not None and not REGISTRY[name].supports_rho:
            raise OptionError(f"option 'rho' (zCDP) is not supported by mechanism '{name}'")
        names.append(name)
    _check_options_used(bound, names)

    if opts.keys is not None and not bound.group_by:
        raise OptionError("option 'keys' needs a GROUP BY")
    public_keys = domain if domain is not None else public_domain(bound, engine) if bound.group_by else None
    need_selection = bool(bound.group_by) and public_keys is None
    # With rho, the query's delta only converts ρ into (ε, δ) for an (ε, δ) ledger.
    delta = 0.0 if opts.rho is not None else (opts.delta or 0.0)
    if need_selection:
        if opts.rho is not None:
            raise PrivacyError(
                "with rho (zCDP), GROUP BY needs public keys: declare them in the policy or pass keys=[...]"
            )
        if delta <= 0:
            cols = ", ".join(bound.group_labels)
            raise PrivacyError(
                "GROUP BY " + cols + " needs public keys when delta = 0: declare keys in the policy, "
                "pass keys=[...], or give delta > 0 to select keys by a noisy threshold"
            )

    shares = len(bound.aggregates) + (1 if need_selection else 0) + (1 if opts.report_dropped else 0)
    delta_users = sum(REGISTRY[n].uses_delta for n in names) + (1 if need_selection else 0)
    eps_share = (opts.epsilon or 0.0) / shares
    rho_share = (opts.rho or 0.0) / shares
    delta_share = delta / delta_users if delta_users else 0.0

    prepared = []
    parts: list[_Part] = []
    searches = []
    for agg, name in zip(aggregates, names):
        mech = REGISTRY[name]
        share = Cost(epsilon=eps_share, delta=delta_share if mech.uses_delta else 0.0, rho=rho_share)
        if agg.auto_bounds:
            search_share, share = _search_share(share)
            searches.append(BoundsSearch.build(agg.index, agg.label, ctx.max_rows, ctx.neighbouring, search_share))
            parts.append(_Part(f"the bounds of {agg.label}", search_share, searches[-1].cost, False))
        prep = mech.prepare(agg, ctx, share)
        prepared.append(prep)
        parts.append(_Part(agg.label, share, prep.cost, mech.uses_delta))

    selection = None
    if need_selection:
        share = Cost(epsilon=eps_share, delta=delta_share)
        selection = KeySelection.build(bounds.reach, share, ctx.neighbouring, per_group=bounds.per_group)
        parts.append(_Part("group key selection", share, selection.cost, True))
    dropped = _dropped(bound, bounds, Cost(epsilon=eps_share), parts) if opts.report_dropped else None
    _check_split(bound, parts)

    bounds = perunit.choose(bounds, opts.contribution, getattr(bound.table, "contribution", None),
                            bool(bound.group_by), bound.per_unit, [p.label for p in prepared if p.per_unit() is None])
    ctx = dataclasses.replace(ctx, unit_note=reweight.note(bounds))
    total = Cost()
    for part in parts:
        total = total + part.cost
    return Plan(
        bound=bound,
        ctx=ctx,
        prepared=prepared,
        public_keys=public_keys,
        selection=selection,
        cost=total,
        mechanisms=names,
        conversion_delta=opts.delta if opts.rho is not None else None,
        units=bounds,
        searches=searches,
        found=dict(found or {}),
        dropped=dropped,
    )


def _dropped(bound: Bound, bounds: UnitBounds, share: Cost, parts: list[_Part]) -> NoisyPart:
    """``report_dropped``: one Laplace part for the pair (units, units over the bound), of L1
    sensitivity 2 × the group size (one unit moves each count by at most 1), or a refusal."""
    if not bounds.by_id or bound.per_unit:
        raise OptionError("option 'report_dropped' needs a table whose privacy unit is an id column and a query "
                          "that bounds it (not a subquery of one row per unit)")
    if bound.options.rho is not None:
        raise OptionError("option 'report_dropped' spends epsilon: give epsilon rather than rho")
    part = NoisyPart("dropped", 2.0 * bounds.group_size, "laplace", share, integer=True)
    parts.append(_Part("the units over the bound (report_dropped)", share, share, False))
    return part
