"""Release: turn the exact per-group statistics into noisy rows and a report.

This runs after the ledger charge has committed. Group statistics arrive from the engine (as
columns from DuckDB, :mod:`dpsql.backends.columns`, or as rows); each group's
key survives only if it is public or passes τ-thresholding; each DP aggregate's value is
released by its mechanism. What comes out is the table ``__noisy(__k0.., __a0..)`` that the
post-processing SELECT (HAVING / ORDER BY / LIMIT / expressions) runs on.
"""

from __future__ import annotations

import functools
import typing as t
from dataclasses import dataclass, field

import numpy as np

from dpsql._compile import perunit
from dpsql._plan.plan import Plan
from dpsql._plan.rewrite import Rewritten
from dpsql._sql import build
from dpsql.backends.columns import Statistics, column_array, python_values
from dpsql.mechanisms.base import Prepared, ReportEntry
from dpsql.mechanisms.batch import Groups, ReleasedColumn

if t.TYPE_CHECKING:
    import pyarrow as pa

    from dpsql._policy.units import UnitBounds
    from dpsql._privacy.noise import NoiseSource


@dataclass
class Released:
    columns: list[str]
    #: the released key columns (Arrow arrays)
    keys: list["pa.Array"]
    #: one column per DP aggregate, as its mechanism gave it: a numpy array of numbers or a
    #: list of Python values (:func:`~dpsql.backends.columns.column_array` makes it Arrow)
    values: list[t.Any]
    report: list[ReportEntry] = field(default_factory=list)
    groups_suppressed: int | None = None
    #: per DP aggregate, the half-width of each released group's interval (float64, NaN where
    #: there is none), computed from the noise scales and the noisy values only
    widths: list[np.ndarray] = field(default_factory=list)
    #: for each output row after post-processing, the released group it shows (None: unknown)
    order: np.ndarray | None = None
    #: ``report_dropped``: the noisy counts of units and of units over the bound
    dropped: tuple[int, int] | None = None

    def row_widths(self) -> list[list[float]]:
        """Per DP aggregate (report entry), the half-width of each output row's interval, in
        the order of the rows after post-processing (HAVING, ORDER BY, LIMIT)."""
        if self.order is None or len(self.widths) != len(self.report):
            return []
        return [w[self.order].tolist() for w in self.widths]

    @functools.cached_property
    def arrays(self) -> list["pa.Array"]:
        """One Arrow array per column: the keys, then one per DP aggregate."""
        return self.keys + [column_array(v) for v in self.values]

    def pylist(self, i: int) -> list[t.Any]:
        """Column ``i``'s Python values, as ``self.arrays[i].to_pylist()`` gives them, without
        building Arrow arrays where that is not needed (an ungrouped row)."""
        nkeys = len(self.keys)
        if i < nkeys or "arrays" in self.__dict__:
            return self.arrays[i].to_pylist()
        return python_values(self.values[i - nkeys])

    @property
    def data(self) -> list[list[t.Any]]:
        """One list of Python values per column."""
        return [a.to_pylist() for a in self.arrays]

    @property
    def rows(self) -> list[tuple[t.Any, ...]]:
        """The released rows as tuples."""
        return list(zip(*self.data)) if self.arrays else []

    def notes(self, plan: Plan) -> list[str]:
        """The result's notes on key selection: that groups below the noisy threshold are not
        shown, and, when none passed, why and what would release some (the words depend on the
        query and the released rows only)."""
        out = [] if self.dropped is None else [dropped_note(plan, *self.dropped)]
        if self.groups_suppressed is None or plan.selection is None:
            return out
        if self.keys and len(self.keys[0]):
            return [*out, "groups below the noisy threshold are not shown"]
        units = plan.units
        fewer = (f", or a smaller max_groups_per_unit (now {units.max_groups})" if units is not None
                 and units.by_id and units.max_groups is not None else
                 f", or a smaller max_rows_per_unit (now {units.max_rows}), or max_groups_per_unit"
                 if units is not None and units.by_id else "")
        return [*out, f"no group passed the noisy threshold τ = {plan.selection.threshold:.6g}: keys that are not "
                "public are released only where a group's noisy count reaches τ. To release groups, declare "
                "the keys (in the policy, or keys = [...] in WITH), or lower τ with more epsilon or delta"
                f"{fewer}"]

    def table(self, row: str = "") -> "pa.Table":
        """The released columns as the table ``__noisy`` that post-processing reads; with
        ``row``, also a column of that name holding each group's position (0, 1, ...)."""
        import pyarrow as pa

        if not row:
            return pa.Table.from_arrays(self.arrays, names=self.columns)
        size = len(self.arrays[0]) if self.arrays else 0
        return pa.Table.from_arrays([*self.arrays, pa.array(np.arange(size, dtype=np.int64))],
                                    names=[*self.columns, row])


def release(
    plan: Plan, rewritten: Rewritten, names: list[str],
    rows: "t.Sequence[tuple[t.Any, ...]] | Statistics", noise: "NoiseSource",
) -> Released:
    """Apply every mechanism to every group (``names`` are the statistics' column names).

    ``rows`` is the statistics query's rows, or the same statistics as columns
    (:class:`~dpsql.backends.columns.Statistics`, what DuckDB returns); rows are turned into
    columns once. Key selection keeps groups by one mask over the noisy counts, and each
    mechanism gets the columns of its statistics (:class:`Groups`), so nothing here loops over
    groups in Python: keys stay Arrow arrays, statistics numpy arrays.
    """
    stats = rows if isinstance(rows, Statistics) else Statistics.from_rows(names, rows)
    index = {name: i for i, name in enumerate(names)}
    nkeys = len(rewritten.keys)
    size = stats.size
    over_bound = _dropped(plan, stats, index, noise)
    if plan.selection is not None:
        counts = stats.values(index[rewritten.key_selection_column])
        if counts.dtype == object:
            counts = [0 if c is None else int(c) for c in counts.tolist()]
        noisy_counts = plan.selection.part.add_many(counts, noise)
        mask = np.asarray(noisy_counts) >= plan.selection.threshold if size else np.zeros(0, dtype=bool)
        stats = stats.filter(mask)
    kept = stats.size
    keys = [stats.key(j) for j in range(nkeys)]
    values: list[t.Any] = []
    report: list[ReportEntry] = []
    widths: list[np.ndarray] = []
    for prep in plan.prepared:
        i = prep.agg.index
        mine = {name: stats.stat(index[col]) for (a, name), col in rewritten.columns.items() if a == i}
        groups = Groups({name: typed for name, (typed, _) in mine.items()}, kept,
                        {name: nulls for name, (_, nulls) in mine.items()})
        released = prep.release_many(groups, noise)
        if isinstance(released, ReleasedColumn):
            values.append(released.values)
            report.append(released.summary() if len(released) else _summarise([], prep))
            widths.append(_widths(released.widths, kept))
        else:
            values.append([value for value, _ in released])
            entries = [entry for _, entry in released]
            report.append(_summarise(entries, prep))
            widths.append(_widths([np.nan if e.ci_half_width is None else e.ci_half_width for e in entries], kept))
    columns_names = build.keys(nkeys) + [build.agg(p.agg.index) for p in plan.prepared]
    dropped = truncation_note(plan.units)
    for entry in report:  # every line names the unit and the bounds it was released under
        entry.unit = plan.ctx.unit_note
        if dropped:
            entry.note = f"{entry.note}; {dropped}" if entry.note else dropped
    suppressed = size - kept if plan.selection is not None else None
    return Released(columns=columns_names, keys=keys, values=values, report=report, groups_suppressed=suppressed,
                    widths=widths, dropped=over_bound)


def _dropped(plan: Plan, stats: Statistics, index: dict[str, int],
             noise: "NoiseSource") -> tuple[int, int] | None:
    """``report_dropped``: the noisy counts of units and of units over the bound (the same one
    row of counts is joined to every group; no row at all means no rows, hence no units)."""
    part = plan.dropped
    if part is None:
        return None
    exact = []
    for name in (perunit.UNITS_N, perunit.CUT_N):
        col = stats.values(index[name]) if stats.size else []
        exact.append(0 if len(col) == 0 or col[0] is None else int(col[0]))
    units, cut = (int(x) for x in part.add_many(exact, noise))
    return units, cut


def dropped_note(plan: Plan, units: int, cut: int) -> str:
    """What ``report_dropped`` says: the share of units the bound cut, from the noisy counts
    (post-processing), with the noise it carries and what it cost."""
    assert plan.dropped is not None and plan.units is not None
    share = min(max(cut, 0) / max(units, 1), 1.0)
    half = plan.dropped.ci(plan.ctx.confidence)
    how = "rows were dropped" if plan.units.mode not in ("clip", "reweight") else "partial sums were clipped or re-weighted"
    return (f"report_dropped: about {share:.0%} of {plan.units.unit} units are over the bound ({how}): "
            f"{max(cut, 0):,} of {max(units, 0):,}, each count ±{half:.3g} ({plan.ctx.confidence:.0%}), "
            f"spent {plan.dropped.cost}; raise max_rows_per_unit to cut fewer, at more noise")


def truncation_note(units: "UnitBounds | None") -> str:
    """What the report says of the rows a per-unit bound drops (empty: it drops none). The
    words depend on the policy and the query only, never on how many rows were dropped."""
    if units is None or not units.by_id or _one_row_per_unit(units):
        return ""
    cost = "; the interval covers the noise, not that bias"
    if units.mode == "reweight":  # dpsql._sql.reweight: each unit's partials weighted by min(1, k / its rows)
        return (f"each {units.unit} counts as at most {units.max_rows} rows (max_rows_per_unit): one with more has "
                f"its counts and sums weighted by {units.max_rows}/its rows, shared among its groups{cost}")
    if units.mode == "clip":  # pre-aggregation (dpsql._compile.perunit): nothing dropped, partials clipped
        c = units.max_rows_per_group if units.max_groups is not None else units.max_rows
        groups = (f"groups beyond max_groups_per_unit = {units.max_groups} per {units.unit} are dropped; "
                  if units.max_groups is not None else "")
        return f"{groups}each {units.unit} counts as at most {c} rows (its sums clipped or re-weighted){cost}"
    if units.max_groups is not None:
        return (f"rows beyond max_rows_per_group_per_unit = {units.max_rows_per_group} per group and "
                f"max_groups_per_unit = {units.max_groups} groups per {units.unit} are dropped{cost}")
    return f"rows beyond max_rows_per_unit = {units.max_rows} per {units.unit} are dropped{cost}"


def _one_row_per_unit(units: "UnitBounds") -> bool:
    """Whether the query reads a subquery of one row per unit, where nothing is dropped."""
    return "per-unit subquery" in str(units.sources.get("max_rows_per_unit", ""))


def _widths(widths: t.Any, kept: int) -> np.ndarray:
    """Each of the ``kept`` groups' half-widths as float64 (NaN where there is none)."""
    if widths is None:
        return np.full(kept, np.nan)
    out = np.asarray(widths, dtype=np.float64).ravel()
    if out.size != kept:
        return np.full(kept, np.nan)
    # one value for every group may come as a read-only view (stride 0): later steps write
    # into the widths (bounds found privately blank them), so they get an array of their own
    return out if out.flags.writeable else out.copy()


def _summarise(entries: list[ReportEntry], prep: Prepared) -> ReportEntry:
    """One report entry per column: for grouped output, the widest interval over groups."""
    if not entries:
        return ReportEntry(
            column=prep.label, mechanism=prep.mechanism, epsilon=prep.cost.epsilon,
            delta=prep.cost.delta, rho=prep.cost.rho, note="no group released",
        )
    if len(entries) == 1:
        return entries[0]
    widths = [e.ci_half_width for e in entries if e.ci_half_width is not None]
    first = entries[0]
    return ReportEntry(
        column=first.column,
        mechanism=first.mechanism,
        epsilon=first.epsilon,
        delta=first.delta,
        rho=first.rho,
        sensitivity=first.sensitivity,
        scale=first.scale,
        distribution=first.distribution,
        ci_half_width=max(widths) if widths else None,
        note=(first.note + "; " if first.note else "") + f"widest of {len(entries)} groups",
    )
