"""Shared pieces of the benchmarks: the synthetic table, the policy, timing, the machine."""

from __future__ import annotations

import os
import platform
import resource
import statistics
import sys
import time
import typing as t
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
#: Scratch space (git-ignored): data files for the peers, raw JSON results.
OUT = BENCH / "out"

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

_PEOPLE: dict[str, t.Any] = {
    "privacy_unit": "row",
    "max_rows_per_unit": 1,
    "columns": {
        "age": {"lower": 0, "upper": 100},
        "income": {"lower": 0, "upper": 200000},
    },
}

POLICY: dict[str, t.Any] = {
    "neighbouring": "add_remove",
    "budget": {"epsilon": 1e12, "delta": 0.5},
    "defaults": {"reuse_releases": "off"},  # every timed run computes: no reuse of an earlier release
    "tables": {
        "people": _PEOPLE,
        # The same rows (a view) with the key domains declared public: GROUP BY releases exactly
        # the domain's keys, with no τ-selection. The domains are also tables (zip_keys,
        # cell_keys), which the hand-written floor joins.
        "people_keyed": {**_PEOPLE, "columns": {
            **_PEOPLE["columns"],
            "zip": {"keys": [f"z{i:04d}" for i in range(1000)]},
            "cell": {"keys": list(range(100_000))},
        }},
    },
}

CLIP_AGE = "CASE WHEN age < 0 THEN 0 WHEN age > 100 THEN 100 ELSE age END"
CLIP_INCOME = "CASE WHEN income < 0 THEN 0 WHEN income > 200000 THEN 200000 ELSE income END"
#: income as dpsql sums it: on a fixed-point grid, in integers, so that one person moves the
#: computed sum by at most its sensitivity (a float sum's rounding is not in the sensitivity:
#: Casacuberta et al., CCS 2022). A mean's grid of the bounds [0, 200000] is a SUM's
#: (``FixedPoint.of_mean``): origin 0, 2^13 steps per unit, clipped to [0, 1,638,400,000]. The
#: floors of the sums and means over income use it: the fastest hand-written query computing
#: the statistics dpsql computes.
_SCALED = "income * 8192.0"
EXACT_INCOME = (f"CAST(CASE WHEN {_SCALED} < 0.0 THEN 0.0 "
                f"WHEN {_SCALED} > 1638400000.0 THEN 1638400000.0 ELSE {_SCALED} END AS BIGINT)")
#: a variance's grid of the same bounds (``FixedPoint.centred``): centred on 100,000, 2^14 steps
#: per unit, clipped to +-1,638,400,000 (its squares are smaller centred)
_CENTRED = "(income - 100000.0) * 16384.0"
EXACT_INCOME_CENTRED = (f"CAST(CASE WHEN {_CENTRED} < -1638400000.0 THEN -1638400000.0 "
                        f"WHEN {_CENTRED} > 1638400000.0 THEN 1638400000.0 ELSE {_CENTRED} END AS BIGINT)")

#: The privacy parameters every speed case uses (peers get the same).
EPSILON = 1.0
DELTA = 1e-6


def generate(con: duckdb.DuckDBPyConnection, rows: int) -> None:
    """``people(id, age INT 0..100, income DOUBLE 0..200000, zip VARCHAR ~1000 distinct,
    cell INT ~100,000 distinct)``, seeded; the view ``people_keyed`` of it and the key domains
    ``zip_keys`` and ``cell_keys`` (every possible zip and cell)."""
    con.execute("SELECT setseed(0.42)")
    con.execute(
        f"""CREATE TABLE people AS
        SELECT range AS id,
               (random() * 100)::INTEGER AS age,
               random() * 200000 AS income,
               'z' || lpad(((random() * 999)::INTEGER)::VARCHAR, 4, '0') AS zip,
               (random() * 99999)::INTEGER AS cell
        FROM range({rows})"""
    )
    con.execute("CREATE VIEW people_keyed AS SELECT * FROM people")
    con.execute("CREATE TABLE zip_keys AS SELECT 'z' || lpad(range::VARCHAR, 4, '0') AS zip FROM range(1000)")
    con.execute("CREATE TABLE cell_keys AS SELECT range::INTEGER AS cell FROM range(100000)")


def interleaved(fns: dict[str, t.Callable[[], t.Any]], repeat: int, warmup: int = 1) -> dict[str, list[float]]:
    """Wall times of each function, run in rounds (every function once per round).

    A load spike from another process then hits the variants of one round alike, which keeps
    their ratios steadier than timing each variant in its own block. The first ``warmup``
    rounds are discarded.
    """
    times: dict[str, list[float]] = {name: [] for name in fns}
    for r in range(warmup + repeat):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            elapsed = time.perf_counter() - start
            if r >= warmup:
                times[name].append(elapsed)
    return times


def paired_ratio(num: list[float], den: list[float]) -> float:
    """Median over rounds of num/den (rounds are paired by :func:`interleaved`)."""
    return statistics.median(a / b for a, b in zip(num, den) if b > 0)


def peak_mib() -> float:
    """Peak resident memory of this process so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def mem_available_gib() -> float:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return float("nan")


def machine() -> dict[str, t.Any]:
    """What the numbers were measured on."""
    import dpsql

    cpu = platform.processor() or platform.machine()
    total = float("nan")
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    total = int(line.split()[1]) / 2**20
    except OSError:
        pass
    try:
        from importlib.metadata import version

        dpsql_version = version("dpsql")
    except Exception:  # noqa: BLE001 - not installed: run from a checkout
        dpsql_version = getattr(dpsql, "__version__", "unknown")
    return {
        "cpu": cpu,
        "nproc": os.cpu_count(),
        "memory_gib": round(total, 1),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "duckdb": duckdb.__version__,
        "dpsql": dpsql_version,
        "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan"),
    }
