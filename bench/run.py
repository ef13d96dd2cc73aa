"""Speed of dpsql against DuckDB on the same machine, as ratios.

    python bench/run.py [--rows 10000000] [--repeat 5] [--only NAME ...] [--json out.json]

Generates ``people(id, age INT 0..100, income DOUBLE 0..200000, zip VARCHAR ~1000 distinct)``
with DuckDB and a fixed seed, then times, as the median of ``--repeat`` runs in one process
after loading: plain DuckDB (the exact, non-private query), the *floor* (the fastest
hand-written clipped DuckDB query computing the same exact statistics: CASE clipping, one
scan), and dpsql end to end (parse, plan, execute, charge, noise, post-processing). It prints
dpsql/floor and dpsql/plain, the median planning time (parse → SQL, no execution), and peak
memory. Each case is one entry of :data:`CASES`; mechanism issues add theirs.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import dpsql  # noqa: E402

POLICY = {
    "neighbouring": "add_remove",
    "budget": {"epsilon": 1e12, "delta": 0.5},
    "tables": {
        "people": {
            "privacy_unit": "row",
            "max_rows_per_unit": 1,
            "columns": {
                "age": {"lower": 0, "upper": 100},
                "income": {"lower": 0, "upper": 200000},
            },
        }
    },
}

CLIP_AGE = "CASE WHEN age < 0 THEN 0 WHEN age > 100 THEN 100 ELSE age END"
CLIP_INCOME = "CASE WHEN income < 0 THEN 0 WHEN income > 200000 THEN 200000 ELSE income END"


@dataclass
class Case:
    name: str
    plain: str
    floor: str
    dp: str


CASES: list[Case] = [
    Case("count", "SELECT count(*) FROM people", "SELECT count(*) FROM people",
         "SELECT DP_COUNT(*) FROM people WITH (epsilon = 1)"),
    Case("sum", "SELECT sum(age) FROM people", f"SELECT sum({CLIP_AGE}) FROM people",
         "SELECT DP_SUM(age) FROM people WITH (epsilon = 1)"),
    Case("mean", "SELECT avg(income) FROM people",
         f"SELECT count(income), sum({CLIP_INCOME}) FROM people",
         "SELECT DP_MEAN(income) FROM people WITH (epsilon = 1)"),
    Case("var", "SELECT var_samp(income) FROM people",
         f"SELECT count(income), sum({CLIP_INCOME}), sum(({CLIP_INCOME}) * ({CLIP_INCOME})) FROM people",
         "SELECT DP_VAR(income) FROM people WITH (epsilon = 1)"),
    Case("group_by_zip_mean", "SELECT zip, avg(income) FROM people GROUP BY zip",
         f"SELECT zip, count(*), count(income), sum({CLIP_INCOME}) FROM people GROUP BY zip",
         "SELECT zip, DP_MEAN(income) FROM people GROUP BY zip WITH (epsilon = 1, delta = 1e-6)"),
]


def generate(con: duckdb.DuckDBPyConnection, rows: int) -> None:
    con.execute("SELECT setseed(0.42)")
    con.execute(
        f"""CREATE TABLE people AS
        SELECT range AS id,
               (random() * 100)::INTEGER AS age,
               random() * 200000 AS income,
               'z' || lpad(((random() * 999)::INTEGER)::VARCHAR, 4, '0') AS zip
        FROM range({rows})"""
    )


def median_time(fn, repeat: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", nargs="*", help="case names to run")
    ap.add_argument("--json", help="write the results to this file")
    args = ap.parse_args(argv)

    raw = duckdb.connect()
    start = time.perf_counter()
    generate(raw, args.rows)
    print(f"generated {args.rows:,} rows in {time.perf_counter() - start:.1f} s")
    con = dpsql.connect(raw, POLICY)  # the secure sampler, as users run it

    results = []
    header = f"{'case':<20} {'plain s':>9} {'floor s':>9} {'dpsql s':>9} {'dp/floor':>9} {'dp/plain':>9} {'plan ms':>8}"
    print(header)
    for case in CASES:
        if args.only and case.name not in args.only:
            continue
        t_plain = median_time(lambda: raw.execute(case.plain).fetchall(), args.repeat)
        t_floor = median_time(lambda: raw.execute(case.floor).fetchall(), args.repeat)
        t_dp = median_time(lambda: con.sql(case.dp).fetchall(), args.repeat)
        plans = []
        for _ in range(50):
            s = time.perf_counter()
            con._prepare(case.dp)
            plans.append(time.perf_counter() - s)
        t_plan = statistics.median(plans)
        row = {
            "case": case.name, "rows": args.rows, "plain_s": t_plain, "floor_s": t_floor, "dpsql_s": t_dp,
            "dp_over_floor": t_dp / t_floor, "dp_over_plain": t_dp / t_plain, "plan_ms": t_plan * 1000,
        }
        results.append(row)
        print(f"{case.name:<20} {t_plain:9.4f} {t_floor:9.4f} {t_dp:9.4f} {t_dp / t_floor:9.2f} "
              f"{t_dp / t_plain:9.2f} {t_plan * 1000:8.2f}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak resident memory: {peak:.0f} MiB")
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "peak_mib": peak}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
