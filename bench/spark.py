"""dpsql on Spark against hand-written Spark SQL computing the same clipped statistics.

    python -m bench.spark --rows 1000000        # the issue asks 10,000,000 (--rows 10000000)
    python -m bench.spark --generic             # the same without Spark's own forms, to compare

One local[2] session; a cached table of ``rows`` rows (x in 0..99, y with every value distinct, 1,000 keys); for each query
the median of ``--repeat`` wall-clock times (the two run in turn, after a warm-up round) of dpsql end to end (plan,
Spark, noise, release; reuse of releases off) and of the hand-written statement, and their ratio. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import statistics
import time

QUERIES = {
    "mean": (
        "SELECT DP_MEAN(x) FROM big WITH (epsilon = 1)",
        "SELECT COUNT(c), SUM(c) FROM (SELECT CASE WHEN x < 0 THEN 0 WHEN x > 100 THEN 100 ELSE x END AS c FROM big)",
    ),
    "group-by, 1,000 keys": (
        "SELECT k, DP_MEAN(x) FROM big GROUP BY k WITH (epsilon = 1)",
        "SELECT k, COUNT(c), SUM(c) FROM (SELECT k, CASE WHEN x < 0 THEN 0 WHEN x > 100 THEN 100 ELSE x END AS c "
        "FROM big) GROUP BY k",
    ),
    "median": (
        "SELECT DP_MEDIAN(x) FROM big WITH (epsilon = 1)",
        "SELECT PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY c) FROM (SELECT CASE WHEN x < 0 THEN 0 "
        "WHEN x > 100 THEN 100 ELSE x END AS c FROM big)",
    ),
    "median, all values distinct": (
        "SELECT DP_MEDIAN(y) FROM big WITH (epsilon = 1)",
        "SELECT PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY c) FROM (SELECT CASE WHEN y < 0 THEN 0 "
        "WHEN y > 100 THEN 100 ELSE y END AS c FROM big)",
    ),
}


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--generic", action="store_true",
                        help="without the Spark forms of the order statistics and of key domains (for comparison)")
    parser.add_argument("--only", metavar="TEXT", help="only the queries whose name contains TEXT")
    args = parser.parse_args(argv)
    if args.generic:
        from dpsql.sql.target import SparkTarget

        SparkTarget.value_histogram = SparkTarget.broadcast_keys = lambda self, node: None  # type: ignore[method-assign]

    from pyspark.sql import SparkSession

    import dpsql

    spark = (SparkSession.builder.master("local[2]").config("spark.driver.memory", "2g")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("OFF")
    frame = spark.sql(f"SELECT CAST(PMOD(XXHASH64(id), 100) AS BIGINT) AS x, "
                      f"CAST(PMOD(XXHASH64(id, 1), 1000) AS BIGINT) AS k, "
                      f"id * 100.0D / {args.rows} AS y FROM range({args.rows})").cache()
    frame.count()
    frame.createOrReplaceTempView("big")
    policy = {"budget": {"epsilon": 1e9}, "defaults": {"reuse_releases": "off"},  # time the work, not a reuse
              "tables": {"big": {"privacy_unit": "row", "max_rows_per_unit": 1,
                                 "columns": {"x": {"lower": 0, "upper": 100},
                                             "y": {"lower": 0, "upper": 100},
                                             "k": {"keys": list(range(1000))}}}}}
    con = dpsql.connect(spark, policy)
    print(f"| query ({args.rows:,} rows, local[2]) | dpsql on Spark (s) | hand-written Spark SQL (s) | ratio |")
    print("| --- | ---: | ---: | ---: |")
    for name, (dp, hand) in QUERIES.items():
        if args.only and args.only not in name:
            continue
        con.sql(dp)  # warm up
        t_dp: list[float] = []
        t_hand: list[float] = []
        try:
            for _ in range(args.repeat + 1):  # the first round warms the hand-written statement up
                t_dp.append(timed(lambda: con.sql(dp)))  # noqa: B023
                t_hand.append(timed(lambda: spark.sql(hand).collect()))  # noqa: B023
        except Exception as err:  # PERCENTILE_CONT out of memory can take the driver down with it
            reason = "OutOfMemoryError" if "OutOfMemoryError" in str(err) else type(err).__name__
            print(f"| {name} | {t_dp[-1]:.2f} (1 run) | failed ({reason}) | — |", flush=True)
            return
        a, b = statistics.median(t_dp[1:]), statistics.median(t_hand[1:])
        print(f"| {name} | {a:.2f} | {b:.2f} | {a / b:.2f}× |", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
