"""OpenDP through its Polars context API (``opendp[polars]``). Run with the peer's venv python."""

from __future__ import annotations

import sys
import warnings

import _runner as R
import opendp.prelude as dp
import polars as pl

warnings.filterwarnings("ignore")
dp.enable_features("contrib")
PKGS = ("opendp", "polars")
SEXES = ["Female", "Male"]


def context(lf: pl.LazyFrame, eps: float, margins: list, delta: float | None = None) -> dp.Context:
    loss = dp.loss_of(epsilon=eps, delta=delta) if delta else dp.loss_of(epsilon=eps)
    return dp.Context.compositor(data=lf, privacy_unit=dp.unit_of(contributions=1), privacy_loss=loss,
                                 split_evenly_over=1, margins=margins)


def main() -> None:
    a = R.args()
    if a.mode == "speed":
        # max_length: a public upper bound on the table size, needed for sums (the table's size here).
        n = max(a.rows, 1)
        m0 = [dp.polars.Margin(by=[], max_length=n)]
        mz = [dp.polars.Margin(by=["zip"], max_length=n, max_groups=1000)]

        def load() -> pl.LazyFrame:
            return pl.read_parquet(a.data).with_columns(pl.col("age").cast(pl.Int64)).lazy()

        def run(q: dp.polars.LazyFrameQuery) -> list:
            return q.release().collect().rows()

        cases = {
            "count": lambda lf: run(context(lf, 1.0, m0).query().select(dp.len())),
            "sum": lambda lf: run(context(lf, 1.0, m0).query().select(pl.col("age").fill_null(0).dp.sum((0, 100)))),
            "mean": lambda lf: run(context(lf, 1.0, m0).query().select(
                pl.col("income").fill_null(0.0).dp.mean((0.0, 200000.0)))),
            "median_exponential": lambda lf: run(context(lf, 1.0, m0).query().select(
                pl.col("age").fill_null(0).dp.median(list(range(0, 101))))),
            "group_by_zip_mean": lambda lf: run(context(lf, 1.0, mz, R.DELTA).query().group_by("zip").agg(
                dp.len(), pl.col("income").fill_null(0.0).dp.mean((0.0, 200000.0)))),
        }
        R.speed(a, load, cases, PKGS, {
            "var": "no variance in the Polars API",
            "all": "each query is built and released end to end (the scale search is part of it)",
        })
        return

    margins = [dp.polars.Margin(by=[], max_length=100_000)]
    by_sex = [dp.polars.Margin(by=["sex"], max_length=100_000, invariant="keys")]
    cache: dict = {}

    def load() -> pl.LazyFrame:
        return pl.read_parquet(a.data).select(pl.col("age").cast(pl.Int64), pl.col("sex")).lazy()

    def measurement(name: str, lf: pl.LazyFrame, eps: float):
        # Resolve once per (statistic, ε); each call of the measurement is a fresh release.
        key = (name, eps)
        if key not in cache:
            if name == "mean_age":
                q = context(lf, eps, margins).query().select(pl.col("age").fill_null(0).dp.mean((0, 100)))
            elif name == "median_age":
                q = context(lf, eps, margins).query().select(pl.col("age").fill_null(0).dp.median(list(range(0, 101))))
            else:
                q = context(lf, eps, by_sex).query().group_by("sex").agg(dp.len()).with_keys(
                    pl.LazyFrame({"sex": SEXES}))
            cache[key] = q.resolve()
        return cache[key]

    def scalar(name: str):
        return lambda lf, eps: float(measurement(name, lf, eps)(lf).collect().item())

    def groups(lf: pl.LazyFrame, eps: float) -> dict:
        rows = measurement("count_by_sex", lf, eps)(lf).collect().rows()
        return {k: float(v) for k, v in rows}

    R.accuracy(a, load, {"mean_age": scalar("mean_age"), "median_age": scalar("median_age"),
                         "count_by_sex": groups}, PKGS,
               {"all": "query resolved once per ε, then the measurement is invoked for each release"})


if __name__ == "__main__":
    sys.exit(main())
