"""Speed of privacy units by id: what enforcing per-unit bounds in SQL costs.

    python -m bench.units --rows 10000000 [--units 2500000] [--repeat 3] [--json FILE]

Table ``events(pid, age, income, zip)``: ``rows`` rows of about ``units`` ids (each row's id is
drawn uniformly, so a unit holds 4 rows on average at the default sizes, some 15 or more), with
the income and the ~1,000 zips of :func:`bench.common.generate`. The policy makes ``pid`` the
privacy unit with ``max_rows_per_unit = 5``. Each case is timed in interleaved rounds (one
warm-up round discarded) in five forms:

* *row-level*: the hand-written clipped query with no per-unit bound (what the query costs
  when one row is one unit);
* *floor, window*: the fastest hand-written DuckDB query applying the same bound as dpsql by
  truncation: per unit the k rows of smallest whole-row hash (with ``max_groups_per_unit``, the
  g groups of smallest hash of (unit, key) and r rows in each), by window functions;
* *floor, per-unit aggregation*: the other way to bound a unit for additive statistics: GROUP
  BY the unit (and key) first, then clip each unit's count to k and scale its sum by
  min(n, k)/n (with g: keep the unit's g groups of smallest hash, each clipped to r rows);
* *dpsql*: ``Connection.sql()`` end to end on the id-unit policy;
* *dpsql, row unit*: the same query on the same table declared with a row privacy unit.

The target (issue 29): dpsql within 1.2× of the faster floor, which for counts, sums and means
is the per-unit aggregation (dpsql pre-aggregates them: dpsql._compile.perunit).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import typing as t
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import duckdb  # noqa: E402

from bench.common import interleaved, machine, paired_ratio, peak_mib  # noqa: E402

#: rows per unit bound of the policy, and the groups per unit of the GROUP BY case
K, G = 5, 3
TARGET = 1.2

CLIP = "CASE WHEN income < 0 THEN 0 WHEN income > 200000 THEN 200000 ELSE income END"

POLICY: dict[str, t.Any] = {
    "neighbouring": "add_remove",
    "budget": {"epsilon": 1e12, "delta": 0.5},
    "defaults": {"reuse_releases": "off"},  # every timed run computes: no reuse of an earlier release
    "tables": {"events": {"privacy_unit": "pid", "max_rows_per_unit": K,
                          "columns": {"income": {"lower": 0, "upper": 200000}}}},
}
ROW_POLICY: dict[str, t.Any] = {
    **POLICY,
    "tables": {"events": {"privacy_unit": "row", "columns": {"income": {"lower": 0, "upper": 200000}}}},
}


def generate(con: duckdb.DuckDBPyConnection, rows: int, units: int) -> None:
    """``events(pid, age, income, zip)``, seeded: ids uniform over ``units``."""
    con.execute("SELECT setseed(0.42)")
    con.execute(
        f"""CREATE TABLE events AS
        SELECT (random() * {units})::BIGINT AS pid,
               (random() * 100)::INTEGER AS age,
               random() * 200000 AS income,
               'z' || lpad(((random() * 999)::INTEGER)::VARCHAR, 4, '0') AS zip
        FROM range({rows})"""
    )


@dataclass
class UnitCase:
    name: str
    title: str
    dp: str
    #: the same query on the row-unit policy (dpsql without enforcement)
    dp_row: str
    row_level: str
    floors: dict[str, str] = field(default_factory=dict)


#: Truncated rows by hand: the whole-row hash is computed below the window, so that the
#: window sorts (unit, hash) and not whole rows; BETWEEN keeps DuckDB from turning the filter
#: into its per-group top-k aggregate (several times slower with millions of small units).
_ROWS = f"SELECT pid, zip, {CLIP} AS v, hash(e) AS h FROM events AS e"

CASES = [
    UnitCase(
        "units_count_sum", "COUNT(*) and SUM(income), ≤ 5 rows per unit",
        "SELECT DP_COUNT(*), DP_SUM(income) FROM events WITH (epsilon = 1)",
        "SELECT DP_COUNT(*), DP_SUM(income) FROM events WITH (epsilon = 1)",
        f"SELECT count(*), sum({CLIP}) FROM events",
        {
            "window": f"""SELECT count(*), sum(v) FROM (SELECT * FROM ({_ROWS})
                QUALIFY row_number() OVER (PARTITION BY pid ORDER BY h) BETWEEN 1 AND {K})""",
            # issue 29's floor: one GROUP BY of the unit, then the clipped sums
            "per-unit aggregation": f"""SELECT sum(least(n, {K})), sum(least(greatest(s, 0), {K * 200000})) FROM (
                SELECT pid, count(*) AS n, sum(income) AS s FROM events GROUP BY pid)""",
        },
    ),
    UnitCase(
        "units_mean", "MEAN(income), ≤ 5 rows per unit",
        "SELECT DP_MEAN(income) FROM events WITH (epsilon = 1)",
        "SELECT DP_MEAN(income) FROM events WITH (epsilon = 1)",
        f"SELECT count(income), sum({CLIP}) FROM events",
        {
            "window": f"""SELECT count(v), sum(v) FROM (SELECT * FROM ({_ROWS})
                QUALIFY row_number() OVER (PARTITION BY pid ORDER BY h) BETWEEN 1 AND {K})""",
            "per-unit aggregation": f"""SELECT sum(least(n, {K})), sum(s * least(n, {K}) / n) FROM (
                SELECT pid, count(income) AS n, sum({CLIP}) AS s FROM events GROUP BY pid)""",
        },
    ),
    UnitCase(
        "units_group_by_zip", "GROUP BY zip (1,000 keys), MEAN(income), ≤ 3 groups × 5 rows per unit",
        f"SELECT zip, DP_MEAN(income) FROM events GROUP BY zip WITH (epsilon = 1, delta = 1e-6, max_groups_per_unit = {G})",
        "SELECT zip, DP_MEAN(income) FROM events GROUP BY zip WITH (epsilon = 1, delta = 1e-6)",
        f"SELECT zip, count(*), count(income), sum({CLIP}) FROM events GROUP BY zip",
        {
            # units per key (for the key threshold), rows and sums per key; one sort per unit by
            # (group hash, group, row hash) gives the row's rank in its group and the group's rank
            "window": f"""SELECT zip, count(*) FILTER (WHERE r = 1), count(v), sum(v) FROM (
                SELECT *, row_number() OVER (PARTITION BY pid ORDER BY hash(pid, zip), zip, h)
                          - rank() OVER (PARTITION BY pid ORDER BY hash(pid, zip), zip) + 1 AS r
                FROM ({_ROWS})
                QUALIFY r BETWEEN 1 AND {K}
                    AND dense_rank() OVER (PARTITION BY pid ORDER BY hash(pid, zip), zip) BETWEEN 1 AND {G})
                GROUP BY zip""",
            "per-unit aggregation": f"""SELECT zip, count(*), sum(least(n, {K})), sum(s * least(n, {K}) / n) FROM (
                SELECT * FROM (SELECT pid, zip, count(income) AS n, sum({CLIP}) AS s FROM events GROUP BY pid, zip)
                QUALIFY row_number() OVER (PARTITION BY pid ORDER BY hash(pid, zip)) BETWEEN 1 AND {G})
                GROUP BY zip""",
        },
    ),
]


def run_units(rows: int, units: int, repeat: int = 3, log: t.Callable[[str], None] = print,
              only: t.Sequence[str] | None = None) -> dict[str, t.Any]:
    """Generate the table and time every case in its five forms; return the results."""
    import dpsql

    raw = duckdb.connect()
    start = time.perf_counter()
    generate(raw, rows, units)
    gen_s = time.perf_counter() - start
    n_units, most, over = raw.execute(
        f"SELECT count(*), max(c), count(*) FILTER (WHERE c > {K}) FROM "
        "(SELECT pid, count(*) AS c FROM events GROUP BY pid)").fetchone()
    log(f"generated {rows:,} rows of {n_units:,} units (at most {most} rows, {over:,} units over {K}) "
        f"in {gen_s:.1f} s")
    by_id = dpsql.connect(raw.cursor(), POLICY)  # the secure noise source, as users run it
    by_row = dpsql.connect(raw.cursor(), ROW_POLICY)
    results = []
    for case in CASES:
        if only and case.name not in only:
            continue
        fns: dict[str, t.Callable[[], t.Any]] = {"row-level": lambda c=case: raw.execute(c.row_level).fetchall()}
        for name, sql in case.floors.items():
            fns[f"floor, {name}"] = lambda s=sql: raw.execute(s).fetchall()
        fns["dpsql"] = lambda c=case: by_id.sql(c.dp).fetchall()
        fns["dpsql, row unit"] = lambda c=case: by_row.sql(c.dp_row).fetchall()
        times = interleaved(fns, repeat)
        med = {k: statistics.median(v) for k, v in times.items()}
        floors = {name: med[f"floor, {name}"] for name in case.floors}
        fastest = min(floors, key=floors.__getitem__)
        row = {
            "case": case.name, "title": case.title, "rows": rows, "units": n_units, "query": case.dp,
            "times": med, "runs": repeat, "fastest_floor": fastest,
            "dp_over_floor": {name: paired_ratio(times["dpsql"], times[f"floor, {name}"]) for name in case.floors},
            "dp_over_row_level": paired_ratio(times["dpsql"], times["row-level"]),
            "dp_over_dp_row_unit": paired_ratio(times["dpsql"], times["dpsql, row unit"]),
            "floors_sql": case.floors,
        }
        row["dp_over_fastest_floor"] = row["dp_over_floor"][fastest]
        results.append(row)
        log(f"{case.name}: " + ", ".join(f"{k} {v:.3f} s" for k, v in med.items())
            + f"; dpsql/fastest floor ({fastest}) {row['dp_over_fastest_floor']:.2f}×")
    by_id.close()
    by_row.close()
    return {"rows": rows, "units": n_units, "max_rows_per_unit": K, "units_over_k": over, "most_rows": most,
            "generate_s": gen_s, "results": results, "peak_mib": peak_mib(), "machine": machine(),
            "date": time.strftime("%Y-%m-%d")}


# -- the report section --------------------------------------------------------------------------

HEADING = "## Privacy units by id"


def _s(x: float) -> str:
    return f"{x * 1000:.1f} ms" if x < 1 else f"{x:.2f} s"


def section(run: dict[str, t.Any], command: str, standalone: bool = True) -> str:
    """The Markdown section of docs/benchmarks.md for one run of :func:`run_units`
    (``standalone``: measured by ``--units`` alone, not in the run of the rest of the page)."""
    m = run["machine"]
    lines = [HEADING, ""]
    lines.append(
        f"Measured {run['date']} on {m['cpu']} ({m['nproc']} cores visible, shared with other work; load "
        f"average {m['load_average']:.2f} at the start), Python {m['python']}, DuckDB {m['duckdb']}; "
        f"`{command}`; median of {run['results'][0]['runs'] if run['results'] else '–'} interleaved rounds "
        "after one warm-up round."
        + (" This section was measured on its own, not in the run the rest of the page comes from."
           if standalone else ""))
    lines.append("")
    lines.append(
        f"Table `events(pid, age, income, zip)`: {run['rows']:,} rows of {run['units']:,} units (ids drawn "
        f"uniformly; at most {run['most_rows']} rows per unit, {run['units_over_k']:,} units over "
        f"{run['max_rows_per_unit']}), ~1,000 zips; the policy makes `pid` the privacy unit with "
        f"`max_rows_per_unit = {run['max_rows_per_unit']}`. *row-level*: the clipped query with no "
        "per-unit bound; *floor, window*: the fastest hand-written DuckDB query applying the same "
        "bound as dpsql (per unit the rows of smallest whole-row hash; with `max_groups_per_unit`, "
        "the groups of smallest hash of unit and key), by window functions; *floor, per-unit "
        "aggregation*: GROUP BY the unit (and key) first, clip each unit's count to k and its sum to k·U "
        "(issue 29's floor) or scale it by min(n, k)/n (the mean), with g the unit's g groups of smallest "
        "hash; *dpsql*: `Connection.sql()` end to end (it pre-aggregates these queries: "
        "`contribution = 'auto'` picks pre-aggregation for counts, sums and means, dpsql/_compile/perunit.py); "
        "*dpsql, row unit*: the same query on the same table declared with a row privacy unit (no "
        "enforcement). *row-level* is plain DuckDB's clipped query.")
    lines.append("")
    lines.append("| query | row-level | floor, window | floor, per-unit aggregation | dpsql | dpsql, row unit "
                 "| dpsql / faster floor | dpsql / window floor | dpsql / row-level | dpsql / dpsql row unit |")
    lines.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in run["results"]:
        tm = r["times"]
        ratio = r["dp_over_fastest_floor"]
        verdict = "met" if ratio <= TARGET else "**not met**"
        lines.append(
            f"| {r['title']} | {_s(tm['row-level'])} | {_s(tm['floor, window'])} "
            f"| {_s(tm['floor, per-unit aggregation'])} | {_s(tm['dpsql'])} | {_s(tm['dpsql, row unit'])} "
            f"| {ratio:.2f}× ({r['fastest_floor']}; target ≤ {TARGET}×: {verdict}) "
            f"| {r['dp_over_floor']['window']:.2f}× | {r['dp_over_row_level']:.1f}× "
            f"| {r['dp_over_dp_row_unit']:.1f}× |")
    lines.append("")
    lines.append(
        "Reading: dpsql bounds a unit of these counts, sums and means by pre-aggregation, so its work is "
        "the per-unit aggregation floor's: one hash aggregation of the unit (and key), not a sort of "
        "each unit's rows; with `max_groups_per_unit` a window still ranks each unit's groups (over "
        "one row per unit and key, not per row), ordered by the hash and then the key itself so that "
        "the choice never depends on other units' rows. Quantiles, PTR, smooth sensitivity and "
        "sample-and-aggregate need rows and keep the window truncation (the window floor). The ratios "
        "are paired, round by round, so a loaded machine slows both sides of each ratio alike; the "
        "absolute times are not the idle machine's.")
    lines.append("")
    for r in run["results"]:
        tm = r["times"]
        lines.append(f"- {r['title']}: enforcement adds {_s(tm['dpsql'] - tm['dpsql, row unit'])} per query "
                     f"(dpsql on the id unit − dpsql on a row unit); dpsql − window floor "
                     f"{(tm['dpsql'] - tm['floor, window']) * 1000:+.1f} ms.")
    lines.append("")
    lines.append("<details><summary>The queries</summary>\n")
    for r in run["results"]:
        lines.append(f"**{r['title']}**: dpsql `{r['query']}`\n")
        for name, sql in r["floors_sql"].items():
            lines.append(f"floor, {name}:\n\n```sql\n{' '.join(sql.split())}\n```\n")
    lines.append("</details>")
    return "\n".join(lines) + "\n"


def write_section(text: str, page: Path) -> None:
    """Put ``text`` in ``page`` in place of its privacy-units section, or before "## Other
    systems" (or at the end) if it has none."""
    old = page.read_text(encoding="utf-8") if page.exists() else "# Benchmarks\n"
    if HEADING in old:
        before, rest = old.split(HEADING, 1)
        after = rest[rest.index("\n## "):] if "\n## " in rest else "\n"
        new = before + text + after
    elif "\n## Other systems" in old:
        before, after = old.split("\n## Other systems", 1)
        new = before.rstrip("\n") + "\n\n" + text + "\n## Other systems" + after
    else:
        new = old.rstrip("\n") + "\n\n" + text
    page.write_text(new, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--units", type=int, default=2_500_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    out = run_units(args.rows, args.units, args.repeat, only=args.only)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
