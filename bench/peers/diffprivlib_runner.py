"""IBM diffprivlib (numpy tools). Run with the peer's venv python."""

from __future__ import annotations

import sys
import warnings

import _runner as R
import numpy as np
import pyarrow.parquet as pq
from diffprivlib import tools

warnings.filterwarnings("ignore")
PKGS = ("diffprivlib", "numpy")


def main() -> None:
    a = R.args()
    if a.mode == "speed":
        def load() -> dict:
            t = pq.read_table(a.data, columns=["age", "income"])
            return {c: t.column(c).to_numpy() for c in ("age", "income")}

        cases = {
            # A row count is the count of non-zero entries of a vector of ones.
            "count": lambda d: tools.count_nonzero(np.ones_like(d["age"]), epsilon=1.0),
            "sum": lambda d: tools.sum(d["age"], epsilon=1.0, bounds=(0, 100)),
            "mean": lambda d: tools.mean(d["income"], epsilon=1.0, bounds=(0, 200000)),
            "var": lambda d: tools.var(d["income"], epsilon=1.0, bounds=(0, 200000)),
            "median_exponential": lambda d: tools.median(d["age"], epsilon=1.0, bounds=(0, 100)),
        }
        R.speed(a, load, cases, PKGS, {"group_by_zip_mean": "no GROUP BY"})
        return

    def load() -> dict:
        t = pq.read_table(a.data, columns=["age", "sex"])
        age = t.column("age").to_numpy().astype(float)
        sex = np.array(t.column("sex").to_pylist(), dtype=object)
        return {"age": age, "masks": {s: (sex == s).astype(int) for s in ("Female", "Male")}}

    stats = {
        "mean_age": lambda d, e: float(tools.mean(d["age"], epsilon=e, bounds=(0, 100))),
        "median_age": lambda d, e: float(tools.median(d["age"], epsilon=e, bounds=(0, 100))),
        # Disjoint groups: each group's count at ε (parallel composition).
        "count_by_sex": lambda d, e: {s: float(tools.count_nonzero(m, epsilon=e)) for s, m in d["masks"].items()},
    }
    R.accuracy(a, load, stats, PKGS)


if __name__ == "__main__":
    sys.exit(main())
