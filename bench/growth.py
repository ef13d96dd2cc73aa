"""The report's pieces for growth with the table size and for memory: how dpsql, plain DuckDB
and the floor grow from 1M to 10M to 100M rows (a log-log chart and a table), the release
step's time per 1,000 groups, and the peak memory of the 100M-row queries (:mod:`bench.memory`)."""

from __future__ import annotations

import typing as t
from pathlib import Path

#: The cases drawn in the growth chart (those that also run at 100M rows).
GROWTH_CASES = ("mean", "group_by_zip_mean", "median_exponential")


def _runs(res: dict[str, t.Any]) -> dict[int, dict[str, dict[str, t.Any]]]:
    return {int(size): {r["case"]: r for r in run["results"]}
            for size, run in res.get("speed", {}).items() if "results" in run}


def growth_chart(res: dict[str, t.Any], img: Path, titles: dict[str, str]) -> str | None:
    """``bench-growth.png``: seconds per query against rows, log-log, one panel per case."""
    runs = _runs(res)
    cases = [c for c in GROWTH_CASES if sum(c in by for by in runs.values()) >= 2]
    if not cases:
        return None
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(cases), figsize=(4.2 * len(cases), 4), squeeze=False)
    for ax, case in zip(axes[0], cases):
        sizes = sorted(s for s, by in runs.items() if case in by)
        for key, label, style, z in (("plain_s", "plain DuckDB", "--s", 2), ("floor_s", "floor", ":^", 2),
                                     ("dpsql_s", "dpsql", "-o", 3)):
            ax.plot(sizes, [runs[s][case][key] for s in sizes], style, label=label, zorder=z, markersize=4)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("rows")
        ax.set_title(titles.get(case, case), fontsize=9)
        ax.grid(True, which="major", linewidth=0.3)
    axes[0][0].set_ylabel("seconds per query (median)")
    axes[0][-1].legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(img / "bench-growth.png", dpi=110)
    plt.close(fig)
    return "bench-growth.png"


def growth_table(res: dict[str, t.Any], titles: dict[str, str], fsec: t.Callable[[t.Any], str]) -> str | None:
    """Seconds per query at every size for the growth cases, and dpsql's growth factor."""
    runs = _runs(res)
    sizes = sorted(runs)
    if len(sizes) < 2:
        return None
    lines = ["| query | system | " + " | ".join(f"{s:,} rows" for s in sizes) + " |",
             "| --- | --- | " + " | ".join("---:" for _ in sizes) + " |"]
    for case in GROWTH_CASES:
        for key, label in (("plain_s", "plain DuckDB"), ("floor_s", "floor"), ("dpsql_s", "dpsql")):
            cells = [fsec(runs[s][case][key]) if case in runs[s] else "–" for s in sizes]
            lines.append(f"| {titles.get(case, case)} | {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def release_note(res: dict[str, t.Any], titles: dict[str, str]) -> list[str]:
    """One line per grouped case and size: the release step's time per 1,000 groups."""
    out = []
    for size, by in sorted(_runs(res).items()):
        for case, r in by.items():
            if "release_ms_per_1000_groups" in r:
                out.append(f"- {titles.get(case, case)}, {size:,} rows: the release step (key selection, noise "
                           f"for every group and part, values and report) took "
                           f"{r['release_ms_per_1000_groups']:.1f} ms per 1,000 groups ({r['groups']:,} groups).")
    return out


def memory_table(res: dict[str, t.Any], titles: dict[str, str]) -> str | None:
    """Peak resident memory of plain DuckDB and dpsql per query (100M rows), and the ratio."""
    mem = res.get("memory")
    if not mem or not mem.get("cases"):
        return None
    lines = [f"Peak resident memory at {mem['rows']:,} rows, one fresh process per query and system "
             "(the table itself included; target: dpsql within 2× plain DuckDB):\n",
             "| query | plain DuckDB | dpsql | dpsql / plain | verdict |", "| --- | ---: | ---: | ---: | --- |"]
    for case, e in mem["cases"].items():
        def cell(v: dict[str, t.Any]) -> str:
            return f"{v['peak_mib']:,.0f} MiB" if "peak_mib" in v else f"failed: {v.get('error', '?')}"
        ratio = e.get("ratio")
        verdict = "" if ratio is None else ("met" if ratio <= 2.0 else "**not met**")
        lines.append(f"| {titles.get(case, case)} | {cell(e.get('plain', {}))} | {cell(e.get('dpsql', {}))} | "
                     f"{'' if ratio is None else f'{ratio:.2f}×'} | {verdict} |")
    return "\n".join(lines) + "\n"
