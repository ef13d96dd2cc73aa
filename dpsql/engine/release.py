"""Release: turn the exact per-group statistics into noisy rows and a report.

This runs after the ledger charge has committed. Group rows arrive from DuckDB; each group's
key survives only if it is public or passes τ-thresholding; each DP aggregate's value is
released by its mechanism. What comes out is the table ``__noisy(__k0.., __a0..)`` that the
post-processing SELECT (HAVING / ORDER BY / LIMIT / expressions) runs on.
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field

from dpsql.engine.plan import Plan
from dpsql.engine.rewrite import Rewritten
from dpsql.mechanisms.base import Prepared, ReportEntry, num
from dpsql.sql import build

if t.TYPE_CHECKING:
    from dpsql.privacy.noise import NoiseSource


@dataclass
class Released:
    columns: list[str]
    rows: list[tuple[t.Any, ...]]
    report: list[ReportEntry] = field(default_factory=list)
    groups_suppressed: int | None = None


def release(
    plan: Plan, rewritten: Rewritten, names: list[str], rows: list[tuple[t.Any, ...]], noise: "NoiseSource"
) -> Released:
    """Apply every mechanism to every group row (``names`` are the result's column names)."""
    index = {name: i for i, name in enumerate(names)}
    nkeys = len(rewritten.keys)
    if plan.selection is not None:
        counts = [int(num(row[index[rewritten.key_selection_column]])) for row in rows]
        noisy_counts = plan.selection.part.add_many(counts, noise)
        kept = [row for row, c in zip(rows, noisy_counts) if c >= plan.selection.threshold]
    else:
        kept = list(rows)
    columns_out: list[list[t.Any]] = [[row[j] for row in kept] for j in range(nkeys)]
    reports: list[list[ReportEntry]] = []
    for prep in plan.prepared:
        i = prep.agg.index
        cols = [(name, index[col]) for (a, name), col in rewritten.columns.items() if a == i]
        groups = [{name: row[c] for name, c in cols} for row in kept]
        released = prep.release_many(groups, noise)
        columns_out.append([value for value, _ in released])
        reports.append([entry for _, entry in released])
    out_rows = list(zip(*columns_out))
    columns = build.keys(nkeys) + [build.agg(p.agg.index) for p in plan.prepared]
    report = [_summarise(p_entries, prep) for p_entries, prep in zip(reports, plan.prepared)]
    for entry in report:  # every line names the unit and the bounds it was released under
        entry.unit = plan.ctx.unit_note
    suppressed = len(rows) - len(kept) if plan.selection is not None else None
    return Released(columns=columns, rows=out_rows, report=report, groups_suppressed=suppressed)


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
