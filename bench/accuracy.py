"""Accuracy on the UCI Adult table: error distributions of dpsql's mechanisms over many releases.

    python -m bench.accuracy [--releases 500] [--json FILE]

For each statistic (mean(age), median(age), count by sex), each dpsql mechanism that answers
it and each ε in :data:`EPSILONS`, the query's DuckDB statement runs once and its release step
(the mechanism's noise, from the secure source users get) runs ``--releases`` times. The
error of a release is |released − exact|; for counts by group, every group of every release
counts once. PTR may answer NULL (⊥); those releases are counted apart.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import tomllib
import typing as t
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

EPSILONS = (0.1, 0.3, 1.0, 3.0)
DELTA = 1e-6
STATS = {
    "mean_age": "mean(age)",
    "median_age": "median(age)",
    "count_by_sex": "count by sex",
}

#: (statistic, mechanism) → query template; {eps} is filled in. Run only if registered.
QUERIES: dict[tuple[str, str], str] = {
    ("mean_age", "laplace"): "SELECT DP_MEAN(age) FROM adult WITH (epsilon = {eps})",
    ("mean_age", "gaussian"): "SELECT DP_MEAN(age) FROM adult WITH (mechanism = 'gaussian', epsilon = {eps}, delta = 1e-6)",
    ("mean_age", "smooth"): "SELECT DP_MEAN(age) FROM adult WITH (mechanism = 'smooth', epsilon = {eps}, delta = 1e-6)",
    ("mean_age", "ptr"): "SELECT DP_MEAN(age) FROM adult WITH (mechanism = 'ptr', bound = 0.01, epsilon = {eps}, delta = 1e-6)",
    ("mean_age", "saa"): "SELECT DP_MEAN(age) FROM adult WITH (mechanism = 'saa', chunks = 100, epsilon = {eps})",
    ("median_age", "exponential"): "SELECT DP_MEDIAN(age) FROM adult WITH (epsilon = {eps})",
    ("median_age", "smooth"): "SELECT DP_MEDIAN(age) FROM adult WITH (mechanism = 'smooth', epsilon = {eps}, delta = 1e-6)",
    ("median_age", "ptr"): "SELECT DP_MEDIAN(age) FROM adult WITH (mechanism = 'ptr', bound = 1, epsilon = {eps}, delta = 1e-6)",
    ("median_age", "saa"): "SELECT DP_MEDIAN(age) FROM adult WITH (mechanism = 'saa', chunks = 100, epsilon = {eps})",
    ("count_by_sex", "laplace"): "SELECT sex, DP_COUNT(*) FROM adult GROUP BY sex WITH (epsilon = {eps})",
    ("count_by_sex", "gaussian"): "SELECT sex, DP_COUNT(*) FROM adult GROUP BY sex WITH (mechanism = 'gaussian', epsilon = {eps}, delta = 1e-6)",
}


def connect() -> t.Any:
    """The demo data and policy, with a budget large enough for every release."""
    import dpsql
    from dpsql.interfaces.demo import demo_policy_path, load_adult

    with open(demo_policy_path(), "rb") as fh:
        policy = tomllib.load(fh)
    policy["budget"] = {"epsilon": 1e12, "delta": 0.5}
    policy["budget"].pop("ledger", None)
    return dpsql.connect(":memory:", policy, setup=load_adult)


def exact(con: t.Any) -> dict[str, t.Any]:
    raw = con.engine.connection
    mean, median = raw.execute("SELECT avg(age), median(age) FROM adult").fetchone()
    counts = dict(raw.execute("SELECT sex, count(*) FROM adult GROUP BY sex").fetchall())
    return {"mean_age": float(mean), "median_age": float(median), "count_by_sex": {k: float(v) for k, v in counts.items()}}


def errors(stat: str, values: list[t.Any], truth: t.Any) -> tuple[list[float], int]:
    """Absolute errors of the releases (⊥ / None releases are counted, not scored)."""
    errs, nulls = [], 0
    for v in values:
        if stat == "count_by_sex":
            for k, x in (v or {}).items():
                if x is None:
                    nulls += 1
                elif k in truth:
                    errs.append(abs(float(x) - truth[k]))
        elif v is None or (isinstance(v, float) and math.isnan(v)):
            nulls += 1
        else:
            errs.append(abs(float(v) - truth))
    return errs, nulls


def quantile(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summarise(stat: str, values: list[t.Any], truth: t.Any) -> dict[str, t.Any]:
    errs, nulls = errors(stat, values, truth)
    return {"n": len(values), "median": quantile(errs, 0.5), "p90": quantile(errs, 0.9), "null": nulls}


def releases(con: t.Any, query: str, n: int) -> list[t.Any]:
    """Execute the statistics query once, then draw ``n`` releases (noise only)."""
    from dpsql._release.release import release

    prepared = con.prepare(query)
    plan, rewritten = prepared.plan, prepared.rewritten
    cur = con.engine.connection.execute(rewritten.sql)
    rows, names = cur.fetchall(), [d[0] for d in cur.description]
    nkeys = len(rewritten.keys)
    out = []
    for _ in range(n):
        r = release(plan, rewritten, names, rows, con.noise)
        if nkeys:
            out.append({row[0]: (None if row[nkeys] is None else float(row[nkeys])) for row in r.rows})
        else:
            v = r.rows[0][0] if r.rows else None
            out.append(None if v is None else float(v))
    return out


def run_accuracy(n: int = 500, log: t.Callable[[str], None] = print,
                 epsilons: t.Sequence[float] = EPSILONS) -> dict[str, t.Any]:
    import dpsql
    from dpsql.mechanisms import REGISTRY

    con = connect()
    truth = exact(con)
    results: list[dict[str, t.Any]] = []
    skipped: list[dict[str, str]] = []
    start = time.perf_counter()
    for (stat, mech), template in QUERIES.items():
        if mech not in REGISTRY:
            msg = f"skipped: mechanism {mech} not available"
            log(f"{STATS[stat]:<14} {mech:<12} {msg}")
            skipped.append({"stat": stat, "mechanism": mech, "reason": msg})
            continue
        for eps in epsilons:
            query = template.format(eps=eps)
            try:
                values = releases(con, query, n)
            except dpsql.Error as err:
                msg = f"refused: {err}"
                log(f"{STATS[stat]:<14} {mech:<12} ε={eps:<4} {msg}")
                skipped.append({"stat": stat, "mechanism": mech, "reason": msg, "epsilon": eps})
                break
            summary = summarise(stat, values, truth[stat])
            results.append({"system": "dpsql", "mechanism": mech, "stat": stat, "epsilon": eps,
                            "query": query, **summary})
            log(f"{STATS[stat]:<14} {mech:<12} ε={eps:<4} median |err| {summary['median']:10.4g}  "
                f"p90 {summary['p90']:10.4g}  (n={summary['n']}{', ⊥=' + str(summary['null']) if summary['null'] else ''})")
    log(f"dpsql accuracy: {time.perf_counter() - start:.1f} s")
    con.close()
    return {"truth": truth, "results": results, "skipped": skipped, "releases": n}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--releases", type=int, default=500)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    out = run_accuracy(args.releases)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
