"""Shared by the peer runners, which run in the peers' own virtual environments.

Only the standard library here: each runner imports its peer and this module (it sits next to
them), reads the data file named on the command line and prints one JSON object.

Speed mode times each case after loading: one warm-up call, then up to ``--repeat`` calls
while the case's time budget lasts (a peer that takes minutes per query gets fewer runs; the
count is recorded). Accuracy mode releases each statistic at each ε round-robin until
``--releases`` per cell or the time budget is used up.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import statistics
import sys
import time
import traceback
import typing as t
from importlib.metadata import PackageNotFoundError, version

#: Speed case names shared with bench.speed (the peers' median is the DP median of age).
SPEED_CASES = ("count", "sum", "mean", "var", "median_exponential", "group_by_zip_mean")
#: Accuracy statistics on Adult.
STATS = ("mean_age", "median_age", "count_by_sex")
EPSILON = 1.0
DELTA = 1e-6


def versions(*packages: str) -> dict[str, str]:
    out = {"python": ".".join(map(str, sys.version_info[:3]))}
    for p in packages:
        try:
            out[p] = version(p)
        except PackageNotFoundError:
            out[p] = "not installed"
    return out


def args() -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=("speed", "accuracy"), required=True)
    ap.add_argument("--data", required=True, help="Parquet file: people (speed) or adult (accuracy)")
    ap.add_argument("--rows", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--case-budget", type=float, default=60.0, help="seconds per speed case")
    ap.add_argument("--eps", type=float, nargs="*", default=[0.1, 0.3, 1.0, 3.0])
    ap.add_argument("--releases", type=int, default=200)
    ap.add_argument("--budget", type=float, default=300.0, help="seconds for the accuracy run")
    ap.add_argument("--stats", nargs="*", help="accuracy statistics to run (default: all the peer has)")
    ap.add_argument("--out", required=True)
    return ap.parse_args()


def clean(x: t.Any) -> t.Any:
    """JSON-safe numbers (NaN and inf become None)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {str(k): clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [clean(v) for v in x]
    if hasattr(x, "item"):  # numpy scalar
        return clean(x.item())
    return x


def time_case(fn: t.Callable[[], t.Any], repeat: int, budget: float) -> dict[str, t.Any]:
    start = time.perf_counter()
    value = fn()  # warm-up (also the only run when it alone uses the budget)
    first = time.perf_counter() - start
    times: list[float] = []
    spent = first
    while len(times) < repeat and spent + (times[-1] if times else first) <= budget:
        s = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - s)
        spent += times[-1]
    if not times:
        return {"s": first, "runs": 1, "cold": True, "value": preview(value)}
    return {"s": statistics.median(times), "runs": len(times), "cold": False, "value": preview(value)}


def preview(value: t.Any) -> t.Any:
    try:
        if isinstance(value, (list, tuple)) and len(value) > 3:
            return f"{len(value)} rows"
        return clean(value)
    except Exception:  # noqa: BLE001
        return str(value)[:80]


def speed(a: argparse.Namespace, load: t.Callable[[], t.Any],
          cases: dict[str, t.Callable[[t.Any], t.Any]], pkgs: t.Sequence[str],
          notes: dict[str, str] | None = None) -> None:
    s = time.perf_counter()
    data = load()
    load_s = time.perf_counter() - s
    out: dict[str, t.Any] = {"versions": versions(*pkgs), "load_s": load_s, "rows": a.rows,
                             "cases": {}, "notes": notes or {}}
    for name in SPEED_CASES:
        if name not in cases:
            out["cases"][name] = {"skipped": "not supported"}
            continue
        try:
            out["cases"][name] = time_case(lambda n=name: cases[n](data), a.repeat, a.case_budget)
        except Exception as err:  # noqa: BLE001 - a peer's failure is a result, not a crash
            out["cases"][name] = {"skipped": f"failed: {type(err).__name__}: {str(err).strip().splitlines()[-1][:200] if str(err).strip() else ''}"}
            traceback.print_exc()
        print(name, out["cases"][name], file=sys.stderr, flush=True)
    out["peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    dump(a.out, out)


def accuracy(a: argparse.Namespace, load: t.Callable[[], t.Any],
             stats: dict[str, t.Callable[[t.Any, float], t.Any]], pkgs: t.Sequence[str],
             notes: dict[str, str] | None = None, batched: bool = False) -> None:
    """``stats[name](data, eps)`` returns one release (a number, or {group: number}), or with
    ``batched`` a list of independent releases."""
    if a.stats:
        stats = {n: f for n, f in stats.items() if n in a.stats}
    data = load()
    values: dict[str, dict[str, list[t.Any]]] = {n: {repr(e): [] for e in a.eps} for n in stats}
    failed: dict[str, str] = {}
    start = time.perf_counter()
    cells = [(n, e) for e in a.eps for n in stats]
    out_of_time = False
    for i in range(a.releases):
        for n, e in cells:
            if n in failed or out_of_time:
                continue
            if batched and time.perf_counter() - start > a.budget:
                out_of_time = True
                print(f"time budget used before {n} at ε={e}", file=sys.stderr)
                continue
            try:
                got = stats[n](data, e)
                values[n][repr(e)].extend(clean(got) if batched else [clean(got)])
            except Exception as err:  # noqa: BLE001
                failed[n] = f"{type(err).__name__}: {str(err).strip().splitlines()[-1][:200] if str(err).strip() else ''}"
                traceback.print_exc()
        if time.perf_counter() - start > a.budget:
            print(f"time budget used after {i + 1} releases per cell", file=sys.stderr)
            break
    dump(a.out, {"versions": versions(*pkgs), "values": values, "failed": failed,
                 "seconds": time.perf_counter() - start, "notes": notes or {}})


def dump(path: str, obj: t.Any) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(clean(obj), fh)
