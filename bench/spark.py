"""dpsql on Spark against hand-written Spark SQL computing the same clipped statistics.

    python -m bench.spark --rows 1000000        # the issue asks 10,000,000 (--rows 10000000)
    python -m bench.spark --generic             # the same without Spark's own forms, to compare
    python -m bench.spark --tumult              # and Tumult Analytics on the same table and settings

One local[2] session; a cached table of ``rows`` rows (x in 0..99, y with every value distinct, 1,000 keys); for each query
the median of ``--repeat`` wall-clock times (the two run in turn, after a warm-up round) of dpsql end to end (plan,
Spark, noise, release; reuse of releases off) and of the hand-written statement, and their ratio. Prints a Markdown table.

``--tumult`` first runs Tumult Analytics (its own virtual environment, ``bench/peers/``; pyspark 3.5) on the same
generated table with the same settings, once per query (a cold run: it takes minutes at 10M rows), in its own Spark
session that is stopped before dpsql's starts, and adds a table of dpsql's speed-up against it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

_GROUP_BY = ("SELECT k, COUNT(c), SUM(c) FROM (SELECT k, CASE WHEN x < 0 THEN 0 WHEN x > 100 THEN 100 ELSE x END AS c "
             "FROM big) GROUP BY k")

QUERIES = {
    "mean": (
        "SELECT DP_MEAN(x) FROM big WITH (epsilon = 1)",
        "SELECT COUNT(c), SUM(c) FROM (SELECT CASE WHEN x < 0 THEN 0 WHEN x > 100 THEN 100 ELSE x END AS c FROM big)",
    ),
    # The policy declares k's 1,000 values as public keys: dpsql returns exactly those keys (NULL
    # statistics for a key without rows, no other key). The plain GROUP BY below does neither.
    "group-by, 1,000 keys": (
        "SELECT k, DP_MEAN(x) FROM big GROUP BY k WITH (epsilon = 1)",
        _GROUP_BY,
    ),
    # The same statistics written by hand: the key domain's rows, left-joined to the aggregate
    # (with the broadcast hint a careful author would add, as dpsql does).
    "group-by, 1,000 public keys, the same statistics by hand": (
        "SELECT k, DP_MEAN(x) FROM big GROUP BY k WITH (epsilon = 1)",
        "SELECT /*+ BROADCAST(s) */ keys.k, s.n, s.t FROM VALUES " + ", ".join(f"({i})" for i in range(1000))
        + f" AS keys(k) LEFT JOIN ({_GROUP_BY.replace('COUNT(c), SUM(c)', 'COUNT(c) AS n, SUM(c) AS t')}) AS s "
        "ON keys.k <=> s.k",
    ),
    # No key domain in the policy (table ``open``, the same rows): keys selected by a noisy count
    # over τ, whose statistics (a count per key) the plain GROUP BY computes as well.
    "group-by, 1,000 keys selected by τ": (
        "SELECT k, DP_MEAN(x) FROM open GROUP BY k WITH (epsilon = 1, delta = 1e-6)",
        _GROUP_BY,
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
                        help="without the Spark forms of the order statistics (for comparison)")
    parser.add_argument("--only", metavar="TEXT", help="only the queries whose name contains TEXT")
    parser.add_argument("--shuffle-partitions", type=int, default=2, metavar="N",
                        help="the session's spark.sql.shuffle.partitions, for both (default 2: the cores of "
                             "local[2], what dpsql sets for its own statements; Spark's default is 200)")
    parser.add_argument("--tumult", action="store_true",
                        help="also time Tumult Analytics' mean and group-by (one cold run each)")
    args = parser.parse_args(argv)
    tumult = run_tumult(args) if args.tumult else None
    if tumult is not None:
        print(f"Tumult Analytics: {json.dumps(tumult)}", file=sys.stderr, flush=True)
    if args.generic:
        from dpsql._compile.spark import SparkCompiler

        SparkCompiler.value_histogram = lambda self, node: None  # type: ignore[method-assign]

    from pyspark.sql import SparkSession

    import dpsql

    spark = (SparkSession.builder.master("local[2]").config("spark.driver.memory", "2g")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", str(args.shuffle_partitions)).getOrCreate())
    spark.sparkContext.setLogLevel("OFF")
    frame = spark.sql(f"SELECT CAST(PMOD(XXHASH64(id), 100) AS BIGINT) AS x, "
                      f"CAST(PMOD(XXHASH64(id, 1), 1000) AS BIGINT) AS k, "
                      f"id * 100.0D / {args.rows} AS y FROM range({args.rows})").cache()
    frame.count()
    frame.createOrReplaceTempView("big")
    frame.createOrReplaceTempView("open")
    columns = {"x": {"lower": 0, "upper": 100}, "y": {"lower": 0, "upper": 100}}
    policy = {"budget": {"epsilon": 1e9, "delta": 0.5},
              "defaults": {"reuse_releases": "off"},  # time the work, not a reuse
              "tables": {"big": {"privacy_unit": "row", "max_rows_per_unit": 1,
                                 "columns": {**columns, "k": {"keys": list(range(1000))}}},
                         "open": {"privacy_unit": "row", "max_rows_per_unit": 1, "columns": columns}}}
    con = dpsql.connect(spark, policy)
    measured: dict[str, float] = {}
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
            break
        a, b = statistics.median(t_dp[1:]), statistics.median(t_hand[1:])
        print(f"| {name} | {a:.2f} | {b:.2f} | {a / b:.2f}× |", flush=True)
        measured[name] = a
    try:
        spark.stop()
    except Exception:  # noqa: BLE001 - a driver that ran out of memory is gone already
        pass
    if tumult is not None:
        report_tumult(args, tumult, measured)


def run_tumult(args: argparse.Namespace) -> dict:
    """Tumult's times (``{"seconds": {query: s}, "versions": ...}``) or ``{"error": why}``."""
    from bench import peers

    peer = next(p for p in peers.PEERS if p.name == "tumult")
    why = peers.ensure(peer)
    if why is not None:
        return {"error": why}
    work = peers.WORK / peer.name
    work.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([str(peer.python), str(peers.HERE / "tumult_spark.py"), "--rows", str(args.rows),
                           "--shuffle-partitions", str(args.shuffle_partitions)],
                          capture_output=True, text=True, cwd=str(work), timeout=3600)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1][:200]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def report_tumult(args: argparse.Namespace, tumult: dict, measured: dict[str, float]) -> None:
    print()
    if "error" in tumult:
        print(f"Tumult Analytics: not measured ({tumult['error']})")
        return
    versions = ", ".join(f"{k} {v}" for k, v in tumult["versions"].items())
    print(f"| query ({args.rows:,} rows, local[2]) | dpsql on Spark (s) | Tumult Analytics, one cold run (s) | "
          f"dpsql's speed-up |")
    print("| --- | ---: | ---: | ---: |")
    for name, seconds in tumult["seconds"].items():
        if name in measured:
            print(f"| {name} | {measured[name]:.2f} | {seconds:.1f} | {seconds / measured[name]:.0f}× |")
    print(f"\n({versions})")


if __name__ == "__main__":
    main()
