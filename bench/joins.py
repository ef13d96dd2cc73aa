"""Speed of joins in DP queries: what bounding them in SQL costs.

    python -m bench.joins --rows 10000000 [--repeat 3] [--json FILE] [--write]

Two cases, each timed in interleaved rounds (one warm-up round discarded) against the fastest
hand-written DuckDB query computing the same clipped statistics with the same bounds:

* **private ⋈ public dimension**: ``events(pid, income, zip)`` (row privacy unit) joined with
  ``zips(zip, region)``, 1,000 public rows, one per key; DP_MEAN(income). The floor is the
  clipped join; dpsql also keeps at most M rows per key of the public table (M = 1, read at plan
  time) and casts the private key to the public column's type.
* **private ⋈ private on the unit**: ``visits(pid, cost)`` (``rows`` rows of ``rows / 4``
  patients) joined with ``patients(pid, age)`` (one row per patient), both with the privacy
  unit ``pid`` (``unit_name = "patient"``); DP_MEAN(cost) of patients over 40, each patient's
  joined rows truncated to k = 5 after the join. The floor is the same truncated join by hand.

The targets (issue 11): dpsql within 1.25× of each floor.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import typing as t
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import duckdb  # noqa: E402

from bench.common import interleaved, machine, paired_ratio, peak_mib  # noqa: E402

TARGET = 1.25
K = 5
CLIP_INCOME = "CASE WHEN income < 0 THEN 0 WHEN income > 200000 THEN 200000 ELSE income END"
CLIP_COST = "CASE WHEN cost < 0 THEN 0 WHEN cost > 20000 THEN 20000 ELSE cost END"

POLICY: dict[str, t.Any] = {
    "neighbouring": "add_remove",
    "budget": {"epsilon": 1e12, "delta": 0.5},
    "defaults": {"reuse_releases": "off"},
    "tables": {
        "events": {"privacy_unit": "row", "columns": {"income": {"lower": 0, "upper": 200000}}},
        "zips": {"public": True},
        "visits": {"privacy_unit": "pid", "max_rows_per_unit": K, "unit_name": "patient",
                   "columns": {"cost": {"lower": 0, "upper": 20000}}},
        "patients": {"privacy_unit": "pid", "max_rows_per_unit": 1, "unit_name": "patient"},
    },
}

CASES = {
    "public_join": (
        "DP_MEAN over private ⋈ public dimension (1,000 keys)",
        "SELECT DP_MEAN(income) FROM events JOIN zips ON events.zip = zips.zip WITH (epsilon = 1)",
        f"SELECT count(v), sum(v) FROM (SELECT {CLIP_INCOME} AS v FROM events JOIN zips ON events.zip = zips.zip)",
    ),
    "private_join": (
        f"DP_MEAN over visits ⋈ patients on the unit, ≤ {K} rows per patient after the join",
        "SELECT DP_MEAN(cost) FROM visits v JOIN patients p ON v.pid = p.pid WHERE p.age > 40 WITH (epsilon = 1)",
        f"""SELECT count(c), sum(c) FROM (SELECT {CLIP_COST} AS c, v.pid AS u, hash(v, p) AS h
            FROM visits v JOIN patients p ON v.pid = p.pid WHERE p.age > 40
            QUALIFY row_number() OVER (PARTITION BY u ORDER BY h) BETWEEN 1 AND {K})""",
    ),
}


def generate(con: duckdb.DuckDBPyConnection, rows: int) -> None:
    con.execute("SELECT setseed(0.42)")
    con.execute(f"""CREATE TABLE events AS SELECT random() * 200000 AS income,
        'z' || lpad(((random() * 999)::INTEGER)::VARCHAR, 4, '0') AS zip FROM range({rows})""")
    con.execute("""CREATE TABLE zips AS SELECT 'z' || lpad(range::VARCHAR, 4, '0') AS zip,
        'r' || (range % 10)::VARCHAR AS region FROM range(1000)""")
    patients = max(rows // 4, 1)
    con.execute(f"CREATE TABLE patients AS SELECT range AS pid, (random() * 90)::INTEGER AS age FROM range({patients})")
    con.execute(f"CREATE TABLE visits AS SELECT (random() * {patients})::BIGINT AS pid, random() * 20000 AS cost "
                f"FROM range({rows})")


def run(rows: int, repeat: int, log: t.Callable[[str], None] = print) -> dict[str, t.Any]:
    import dpsql

    raw = duckdb.connect()
    start = time.perf_counter()
    generate(raw, rows)
    log(f"generated {rows:,} events, {rows:,} visits of {rows // 4:,} patients in {time.perf_counter() - start:.1f} s")
    con = dpsql.connect(raw.cursor(), POLICY)
    results = []
    for name, (title, dp, floor) in CASES.items():
        times = interleaved({"floor": lambda s=floor: raw.execute(s).fetchall(),
                             "dpsql": lambda q=dp: con.sql(q).fetchall()}, repeat)
        med = {k: statistics.median(v) for k, v in times.items()}
        ratio = paired_ratio(times["dpsql"], times["floor"])
        results.append({"case": name, "title": title, "query": dp, "floor_sql": " ".join(floor.split()),
                        "times": med, "ratio": ratio, "runs": repeat})
        log(f"{name}: floor {med['floor']:.3f} s, dpsql {med['dpsql']:.3f} s, ratio {ratio:.2f}×")
    con.close()
    return {"rows": rows, "results": results, "peak_mib": peak_mib(), "machine": machine(),
            "date": time.strftime("%Y-%m-%d")}


HEADING = "## Joins"


def section(result: dict[str, t.Any], command: str) -> str:
    m = result["machine"]
    lines = [HEADING, "",
             f"Measured {result['date']} on {m['cpu']} ({m['nproc']} cores, shared with other work; load average "
             f"{m['load_average']:.2f} at the start), DuckDB {m['duckdb']}; `{command}`; median of "
             f"{result['results'][0]['runs']} interleaved rounds after one warm-up. {result['rows']:,} private rows; "
             "the floor is the hand-written DuckDB query computing the same clipped statistics under the same "
             "bounds (see `bench/joins.py`).", "",
             "| query | floor | dpsql | dpsql / floor (target ≤ 1.25×) |", "| --- | ---: | ---: | ---: |"]
    for r in result["results"]:
        verdict = "met" if r["ratio"] <= TARGET else "**not met**"
        lines.append(f"| {r['title']} | {r['times']['floor']:.3f} s | {r['times']['dpsql']:.3f} s "
                     f"| {r['ratio']:.2f}× ({verdict}) |")
    lines += ["", "<details><summary>The queries</summary>\n"]
    for r in result["results"]:
        lines.append(f"**{r['title']}**: dpsql `{r['query']}`; floor:\n\n```sql\n{r['floor_sql']}\n```\n")
    lines.append("</details>")
    return "\n".join(lines) + "\n"


def write_section(text: str, page: Path) -> None:
    old = page.read_text(encoding="utf-8") if page.exists() else "# Benchmarks\n"
    if HEADING + "\n" in old:
        before, rest = old.split(HEADING + "\n", 1)
        after = rest[rest.index("\n## "):] if "\n## " in rest else "\n"
        page.write_text(before + text + after, encoding="utf-8")
    else:
        page.write_text(old.rstrip("\n") + "\n\n" + text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--write", action="store_true", help="replace the Joins section of docs/benchmarks.md")
    args = ap.parse_args(argv)
    result = run(args.rows, args.repeat)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")
    if args.write:
        page = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
        write_section(section(result, f"python -m bench.joins --rows {args.rows} --repeat {args.repeat}"), page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
