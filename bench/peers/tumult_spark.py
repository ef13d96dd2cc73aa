"""Tumult Analytics on the table and Spark settings of ``bench/spark.py``. Run with the Tumult
peer's venv python (``bench.spark --tumult`` does): one cold run of each query, as JSON on stdout.

    python tumult_spark.py --rows N --shuffle-partitions P

The table is generated as in ``bench/spark.py`` (x in 0..99, k in 0..999 from hashes of the row
number) on a local[2] session with a 2 GB driver, cached and counted before timing. The queries
are dpsql's: the mean of x clipped to [0, 100], and the mean of x per key over the public domain of
the 1,000 keys (a KeySet: no key selection), each at ε = 1 under add/remove-one-row.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
import warnings

warnings.filterwarnings("ignore")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--shuffle-partitions", type=int, default=2)
    a = ap.parse_args()
    from pyspark.sql import SparkSession
    from tmlt.analytics import AddOneRow, KeySet, PureDPBudget, QueryBuilder, Session

    spark = (SparkSession.builder.master("local[2]").config("spark.driver.memory", "2g")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", str(a.shuffle_partitions)).getOrCreate())
    spark.sparkContext.setLogLevel("OFF")
    logging.getLogger("py4j").setLevel(logging.ERROR)
    frame = spark.sql(f"SELECT CAST(PMOD(XXHASH64(id), 100) AS BIGINT) AS x, "
                      f"CAST(PMOD(XXHASH64(id, 1), 1000) AS BIGINT) AS k FROM range({a.rows})").cache()
    frame.count()
    session = Session.from_dataframe(privacy_budget=PureDPBudget(float("inf")), source_id="big",
                                     dataframe=frame, protected_change=AddOneRow())
    keys = KeySet.from_dict({"k": list(range(1000))})
    queries = {
        "mean": QueryBuilder("big").average("x", low=0, high=100),
        "group-by, 1,000 keys": QueryBuilder("big").groupby(keys).average("x", low=0, high=100),
    }
    out: dict = {"versions": {}, "seconds": {}}
    from importlib.metadata import version

    for pkg in ("tmlt.analytics", "pyspark"):
        out["versions"][pkg] = version(pkg)
    for name, query in queries.items():
        start = time.perf_counter()
        rows = session.evaluate(query, PureDPBudget(1.0)).collect()
        out["seconds"][name] = time.perf_counter() - start
        out.setdefault("rows", {})[name] = len(rows)
    spark.stop()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
