"""Privacy units by id on Spark: dpsql's pre-aggregation against the per-unit floor in Spark SQL.

    python -m bench.units_spark --rows 1000000 --units 100000 [--repeat 3]

One local[2] session; a cached table ``events(pid, income, zip)`` (ids uniform over ``units``,
incomes in [0, 200000), ~1,000 zips). For each query the median of ``--repeat`` wall-clock times
(the forms run in turn, after a warm-up round) of dpsql end to end on a policy that makes
``pid`` the privacy unit (k = 5), of the per-unit floor written by hand in Spark SQL (one GROUP
BY of the unit, or of unit and zip with the unit's 3 groups of smallest hash, then the clipped
sums), and of the plain clipped query; the ratios dpsql / floor (issue 29's target on Spark:
≤ 1.5×) and dpsql / plain. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

K, G = 5, 3
CLIP = "CASE WHEN income < 0 THEN 0 WHEN income > 200000 THEN 200000 ELSE income END"

QUERIES = {
    "COUNT(*) and SUM(income), ≤ 5 rows per unit": (
        "SELECT DP_COUNT(*), DP_SUM(income) FROM events WITH (epsilon = 1)",
        f"SELECT sum(least(n, {K})), sum(least(greatest(s, 0), {K * 200000})) FROM "
        "(SELECT pid, count(*) AS n, sum(income) AS s FROM events GROUP BY pid)",
        f"SELECT count(*), sum({CLIP}) FROM events",
    ),
    "MEAN(income), ≤ 5 rows per unit": (
        "SELECT DP_MEAN(income) FROM events WITH (epsilon = 1)",
        f"SELECT sum(least(n, {K})), sum(s * least(n, {K}) / n) FROM "
        f"(SELECT pid, count(income) AS n, sum({CLIP}) AS s FROM events GROUP BY pid)",
        f"SELECT count(income), sum({CLIP}) FROM events",
    ),
    "GROUP BY zip, MEAN(income), ≤ 3 groups × 5 rows per unit": (
        f"SELECT zip, DP_MEAN(income) FROM events GROUP BY zip WITH (epsilon = 1, delta = 1e-6, "
        f"max_groups_per_unit = {G})",
        f"SELECT zip, count(*), sum(least(n, {K})), sum(s * least(n, {K}) / n) FROM ("
        f"SELECT *, row_number() OVER (PARTITION BY pid ORDER BY xxhash64(pid, zip)) AS r FROM ("
        f"SELECT pid, zip, count(income) AS n, sum({CLIP}) AS s FROM events GROUP BY pid, zip)) "
        f"WHERE r <= {G} GROUP BY zip",
        f"SELECT zip, count(*), count(income), sum({CLIP}) FROM events GROUP BY zip",
    ),
}


def timed(fn) -> float:  # noqa: ANN001
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--units", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    from pyspark.sql import SparkSession

    import dpsql

    spark = (SparkSession.builder.master("local[2]").config("spark.driver.memory", "2g")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("OFF")
    frame = spark.sql(f"SELECT CAST(PMOD(XXHASH64(id), {args.units}) AS BIGINT) AS pid, "
                      "PMOD(XXHASH64(id, 1), 200000) * 1.0D AS income, "
                      "CONCAT('z', LPAD(CAST(PMOD(XXHASH64(id, 2), 1000) AS STRING), 4, '0')) AS zip "
                      f"FROM range({args.rows})").cache()
    frame.count()
    frame.createOrReplaceTempView("events")
    policy = {"budget": {"epsilon": 1e9, "delta": 0.5}, "defaults": {"reuse_releases": "off"},
              "tables": {"events": {"privacy_unit": "pid", "max_rows_per_unit": K,
                                    "columns": {"income": {"lower": 0, "upper": 200000}}}}}
    con = dpsql.connect(spark, policy)
    print(f"| query ({args.rows:,} rows, {args.units:,} units, local[2]) | dpsql on Spark (s) | per-unit floor "
          "(s) | plain (s) | dpsql / floor | dpsql / plain |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, (dp, floor, plain) in QUERIES.items():
        times: dict[str, list[float]] = {"dp": [], "floor": [], "plain": []}
        for _ in range(args.repeat + 1):  # the first round warms up
            times["dp"].append(timed(lambda: con.sql(dp)))  # noqa: B023
            times["floor"].append(timed(lambda: spark.sql(floor).collect()))  # noqa: B023
            times["plain"].append(timed(lambda: spark.sql(plain).collect()))  # noqa: B023
        a, b, c = (statistics.median(times[k][1:]) for k in ("dp", "floor", "plain"))
        print(f"| {name} | {a:.2f} | {b:.2f} | {c:.2f} | {a / b:.2f}× | {a / c:.1f}× |", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
