"""PipelineDP on its local (pure Python) backend. Run with the peer's venv python.

Rows are tuples ``(id, value, partition)``; the privacy id is the row id, each row contributes
to one partition once. Ungrouped statistics use one public partition; GROUP BY zip selects
partitions privately (δ = 1e-6).
"""

from __future__ import annotations

import sys
import warnings

import _runner as R
import pipeline_dp
import pyarrow.parquet as pq

warnings.filterwarnings("ignore")
PKGS = ("pipeline-dp", "python-dp")


def aggregate(rows: list, metric, eps: float, lo: float | None, hi: float | None,
              public: list | None, delta: float = 0.0) -> list:
    accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=eps, total_delta=delta)
    engine = pipeline_dp.DPEngine(accountant, pipeline_dp.LocalBackend())
    params = pipeline_dp.AggregateParams(
        metrics=[metric], noise_kind=pipeline_dp.NoiseKind.LAPLACE,
        max_partitions_contributed=1, max_contributions_per_partition=1, min_value=lo, max_value=hi)
    extractors = pipeline_dp.DataExtractors(privacy_id_extractor=lambda r: r[0],
                                            partition_extractor=lambda r: r[2],
                                            value_extractor=lambda r: r[1])
    result = engine.aggregate(rows, params, extractors, public_partitions=public)
    accountant.compute_budgets()
    return list(result)


def one(res: list) -> float:
    (_, metrics), = res
    return float(metrics[0])


def main() -> None:
    a = R.args()
    M = pipeline_dp.Metrics
    if a.mode == "speed":
        def load() -> dict:
            t = pq.read_table(a.data)
            ids, age, inc, zips = (t.column(c).to_pylist() for c in ("id", "age", "income", "zip"))
            return {"age": list(zip(ids, age, [0] * len(ids))), "income": list(zip(ids, inc, [0] * len(ids))),
                    "zip": list(zip(ids, inc, zips))}

        cases = {
            "count": lambda d: one(aggregate(d["age"], M.COUNT, 1.0, None, None, [0])),
            "sum": lambda d: one(aggregate(d["age"], M.SUM, 1.0, 0, 100, [0])),
            "mean": lambda d: one(aggregate(d["income"], M.MEAN, 1.0, 0, 200000, [0])),
            "var": lambda d: one(aggregate(d["income"], M.VARIANCE, 1.0, 0, 200000, [0])),
            "median_exponential": lambda d: one(aggregate(d["age"], M.PERCENTILE(50), 1.0, 0, 100, [0])),
            "group_by_zip_mean": lambda d: aggregate(d["zip"], M.MEAN, 1.0, 0, 200000, None, R.DELTA),
        }
        R.speed(a, load, cases, PKGS)
        return

    def load() -> dict:
        t = pq.read_table(a.data, columns=["age", "sex"])
        age, sex = t.column("age").to_pylist(), t.column("sex").to_pylist()
        return {"age": [(i, x, 0) for i, x in enumerate(age)], "sex": [(i, 1, s) for i, s in enumerate(sex)]}

    stats = {
        "mean_age": lambda d, e: one(aggregate(d["age"], M.MEAN, e, 0, 100, [0])),
        "median_age": lambda d, e: one(aggregate(d["age"], M.PERCENTILE(50), e, 0, 100, [0])),
        "count_by_sex": lambda d, e: {k: float(m[0]) for k, m in aggregate(
            d["sex"], M.COUNT, e, None, None, ["Female", "Male"])},
    }
    R.accuracy(a, load, stats, PKGS)


if __name__ == "__main__":
    sys.exit(main())
