"""Tumult Analytics on a local Spark session. Run with the peer's venv python (Java 17 needed).

The Session has an unlimited pure-ε budget and the add/remove-one-row relation; each query is
evaluated at the same ε as the others. GROUP BY zip uses the public domain of zips
(z0000..z0999): Tumult releases groups from a KeySet.

Accuracy: one Spark evaluation takes seconds, so the releases are drawn in one query over the
table copied R times with a public ``replica`` key (0..R−1). Under add/remove-one-row each
copy's rows fall in their own group, and Tumult calibrates and draws every group's noise
independently with the same scale as for the ungrouped query, so each group's answer is one
independent release of the statistic on the original table.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

import _runner as R

warnings.filterwarnings("ignore")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
PKGS = ("tmlt.analytics", "tmlt.core", "pyspark")


def spark_session():
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("bench")
             .config("spark.driver.memory", "8g")
             .config("spark.sql.shuffle.partitions", "4")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.warehouse.dir", "spark-warehouse")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.host", "127.0.0.1")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    logging.getLogger("py4j").setLevel(logging.ERROR)
    return spark


def main() -> None:
    a = R.args()
    from tmlt.analytics import AddOneRow, KeySet, PureDPBudget, QueryBuilder, Session

    spark = spark_session()

    def session(df, name: str):
        return Session.from_dataframe(privacy_budget=PureDPBudget(float("inf")), source_id=name,
                                      dataframe=df, protected_change=AddOneRow())

    if a.mode == "speed":
        def load():
            df = spark.read.parquet(a.data).cache()
            df.count()
            return session(df, "people")

        zips = KeySet.from_dict({"zip": [f"z{i:04d}" for i in range(1000)]})

        def ev(s, q):
            return s.evaluate(q, PureDPBudget(1.0)).collect()

        cases = {
            "count": lambda s: ev(s, QueryBuilder("people").count()),
            "sum": lambda s: ev(s, QueryBuilder("people").sum("age", low=0, high=100)),
            "mean": lambda s: ev(s, QueryBuilder("people").average("income", low=0.0, high=200000.0)),
            "var": lambda s: ev(s, QueryBuilder("people").variance("income", low=0.0, high=200000.0)),
            "median_exponential": lambda s: ev(s, QueryBuilder("people").median("age", low=0, high=100)),
            "group_by_zip_mean": lambda s: ev(s, QueryBuilder("people").groupby(zips).average(
                "income", low=0.0, high=200000.0)),
        }
        R.speed(a, load, cases, PKGS, {"group_by_zip_mean": "public KeySet of the 1,000 zips (no key selection)"})
        return

    sexes = ["Female", "Male"]
    reps = a.releases
    replicas = KeySet.from_dict({"replica": list(range(reps))})
    by_sex = KeySet.from_dict({"replica": list(range(reps)), "sex": sexes})

    def load():
        base = spark.read.parquet(a.data).select("age", "sex")
        df = base.crossJoin(spark.range(reps).withColumnRenamed("id", "replica")).cache()
        df.count()
        return session(df, "adult")

    def ev(s, q, eps):
        return s.evaluate(q, PureDPBudget(eps)).collect()

    def per_replica(s, q, eps):
        rows = ev(s, QueryBuilder("adult").groupby(replicas).__getattribute__(q[0])(*q[1:], low=0, high=100), eps)
        return [float(r[1]) for r in sorted(rows, key=lambda r: r[0])]

    def counts(s, eps):
        rows = ev(s, QueryBuilder("adult").groupby(by_sex).count(), eps)
        out: dict = {}
        for rep, sex, n in rows:
            out.setdefault(rep, {})[sex] = float(n)
        return [out[k] for k in sorted(out)]

    stats = {
        "mean_age": lambda s, e: per_replica(s, ("average", "age"), e),
        "median_age": lambda s, e: per_replica(s, ("median", "age"), e),
        "count_by_sex": counts,
    }
    a.releases = 1  # each call returns all R releases
    R.accuracy(a, load, stats, PKGS, {"all": f"{reps} releases per ε drawn in one GROUP BY over {reps} copies"},
               batched=True)

if __name__ == "__main__":
    sys.exit(main())
