"""Speed cases: plain DuckDB, the hand-written clipped floor, and dpsql end to end.

    python -m bench.speed --rows 1000000 [--repeat 5] [--only NAME ...] [--json FILE] [--parquet FILE]

For one table size: generates ``people`` (see :func:`bench.common.generate`), optionally
writes it to Parquet for the peers, then times every case of :data:`CASES` whose mechanism is
registered, in interleaved rounds (plain, floor, dpsql; one warm-up round discarded; at least
:data:`FAST_ROUNDS` for a case whose round is short). Prints
a table and, with ``--json``, writes the results (the orchestrator runs one process per size,
so each size's peak memory is its own).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import typing as t
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import duckdb  # noqa: E402

from bench.common import (  # noqa: E402
    CLIP_AGE,
    CLIP_INCOME,
    EXACT_INCOME,
    EXACT_INCOME_CENTRED,
    POLICY,
    generate,
    interleaved,
    paired_ratio,
    peak_mib,
)


@dataclass
class Case:
    """One query in three forms. ``mechanism``: run only when it is registered."""

    name: str
    plain: str
    floor: str
    dp: str
    mechanism: str | None = None
    #: the performance target, as (maximum dpsql/floor ratio, wording), if the spec sets one
    target: tuple[float, str] | None = None
    floor_note: str = "clipped statistics, one scan"
    #: the floor with float sums (a statistic dpsql no longer computes: see EXACT_INCOME), timed
    #: beside it to show what exact sums cost
    float_floor: str | None = None


MEAN_FLOOR = f"SELECT count(income), sum({EXACT_INCOME}) FROM people"
MEAN_FLOAT = f"SELECT count(income), sum({CLIP_INCOME}) FROM people"
EXACT_NOTE = "clipped statistics, one scan, sums exact (fixed point)"
MEDIAN_AGE = "SELECT median(age) FROM people"
#: The chunk answers of sample-and-aggregate, written by hand: hash of the row, one GROUP BY.
SAA_FLOOR = "SELECT hash(people) % 1000 AS chunk, avg(income) FROM people GROUP BY chunk"


def _keyed(key: str, keys: str, value: str = EXACT_INCOME) -> str:
    """The floor of a GROUP BY over a public key domain: every key of the table ``keys`` with the
    statistics of its rows (NULL statistics for a key without rows)."""
    return (f"SELECT k.{key}, s.n, s.c, s.t FROM {keys} AS k LEFT JOIN (SELECT {key}, count(*) AS n, "
            f"count(income) AS c, sum({value}) AS t FROM people GROUP BY {key}) AS s "
            f"ON k.{key} IS NOT DISTINCT FROM s.{key}")


def _grouped(key: str, value: str = EXACT_INCOME) -> str:
    return f"SELECT {key}, count(*), count(income), sum({value}) FROM people GROUP BY {key}"


CASES: list[Case] = [
    Case("count", "SELECT count(*) FROM people", "SELECT count(*) FROM people",
         "SELECT DP_COUNT(*) FROM people WITH (epsilon = 1)", "laplace"),
    Case("sum", "SELECT sum(age) FROM people", f"SELECT sum({CLIP_AGE}) FROM people",
         "SELECT DP_SUM(age) FROM people WITH (epsilon = 1)", "laplace",
         (1.10, "DP_SUM ≤ 1.10× floor")),
    Case("mean", "SELECT avg(income) FROM people", MEAN_FLOOR,
         "SELECT DP_MEAN(income) FROM people WITH (epsilon = 1)", "laplace",
         (1.10, "DP_MEAN ≤ 1.10× floor"), EXACT_NOTE, MEAN_FLOAT),
    Case("var", "SELECT var_samp(income) FROM people",
         f"SELECT count(v), sum(v), sum(v * v) FROM (SELECT {EXACT_INCOME_CENTRED} AS v FROM people)",
         "SELECT DP_VAR(income) FROM people WITH (epsilon = 1)", "laplace",
         (1.10, "DP_VAR ≤ 1.10× floor"), EXACT_NOTE,
         f"SELECT count(income), sum({CLIP_INCOME}), sum(({CLIP_INCOME}) * ({CLIP_INCOME})) FROM people"),
    # the mean alone: the query the peers answer too
    Case("group_by_zip_mean", "SELECT zip, avg(income) FROM people GROUP BY zip", _grouped("zip"),
         "SELECT zip, DP_MEAN(income) FROM people GROUP BY zip WITH (epsilon = 1, delta = 1e-6)", "laplace",
         None, EXACT_NOTE, _grouped("zip", CLIP_INCOME)),
    Case("group_by_zip_count_mean", "SELECT zip, count(*), avg(income) FROM people GROUP BY zip", _grouped("zip"),
         "SELECT zip, DP_COUNT(*), DP_MEAN(income) FROM people GROUP BY zip WITH (epsilon = 1, delta = 1e-6)",
         "laplace", (1.15, "GROUP BY of 1,000 keys (τ-selected) ≤ 1.15× floor"), EXACT_NOTE,
         _grouped("zip", CLIP_INCOME)),
    Case("group_by_cell_mean", "SELECT cell, count(*), avg(income) FROM people GROUP BY cell", _grouped("cell"),
         "SELECT cell, DP_COUNT(*), DP_MEAN(income) FROM people GROUP BY cell WITH (epsilon = 1, delta = 1e-6)",
         "laplace", (1.15, "GROUP BY of 100,000 keys (τ-selected) ≤ 1.15× floor"), EXACT_NOTE,
         _grouped("cell", CLIP_INCOME)),
    # Public key domains: the floor computes the same statistics by hand, the key table left-
    # joined to the grouped statistics, as an author who has the domain as a table would.
    Case("group_by_zip_public_keys", "SELECT zip, count(*), avg(income) FROM people GROUP BY zip",
         _keyed("zip", "zip_keys"),
         "SELECT zip, DP_COUNT(*), DP_MEAN(income) FROM people_keyed GROUP BY zip WITH (epsilon = 1)",
         "laplace", (1.15, "GROUP BY of 1,000 public keys ≤ 1.15× floor"),
         "clipped statistics, one scan, sums exact (fixed point), left-joined to the key table",
         _keyed("zip", "zip_keys", CLIP_INCOME)),
    Case("group_by_cell_public_keys", "SELECT cell, count(*), avg(income) FROM people GROUP BY cell",
         _keyed("cell", "cell_keys"),
         "SELECT cell, DP_COUNT(*), DP_MEAN(income) FROM people_keyed GROUP BY cell WITH (epsilon = 1)",
         "laplace", (1.15, "GROUP BY of 100,000 public keys ≤ 1.15× floor"),
         "clipped statistics, one scan, sums exact (fixed point), left-joined to the key table",
         _keyed("cell", "cell_keys", CLIP_INCOME)),
    Case("median_exponential", MEDIAN_AGE, MEDIAN_AGE,
         "SELECT DP_MEDIAN(age) FROM people WITH (epsilon = 1)", "exponential",
         (0.3, "exponential DP_MEDIAN, 101 values ≤ 0.3× DuckDB median()"), "DuckDB's exact median()"),
    Case("median_income_exponential", "SELECT median(income) FROM people", "SELECT median(income) FROM people",
         "SELECT DP_MEDIAN(income) FROM people WITH (epsilon = 1)", "exponential",
         (0.75, "exponential DP_MEDIAN, continuous ≤ 0.75× DuckDB median()"), "DuckDB's exact median()"),
    Case("median_smooth", MEDIAN_AGE, MEDIAN_AGE,
         "SELECT DP_MEDIAN(age) FROM people WITH (mechanism = 'smooth', epsilon = 1, delta = 1e-6)", "smooth",
         (0.3, "smooth DP_MEDIAN, 101 values ≤ 0.3× DuckDB median()"), "DuckDB's exact median()"),
    Case("median_ptr", MEDIAN_AGE, MEDIAN_AGE,
         "SELECT DP_MEDIAN(age) FROM people WITH (mechanism = 'ptr', bound = 1, epsilon = 1, delta = 1e-6)", "ptr",
         (0.3, "PTR DP_MEDIAN, 101 values ≤ 0.3× DuckDB median()"), "DuckDB's exact median()"),
    Case("group_by_zip_median", "SELECT zip, median(age) FROM people GROUP BY zip",
         "SELECT zip, median(age) FROM people GROUP BY zip",
         "SELECT zip, DP_MEDIAN(age) FROM people GROUP BY zip WITH (epsilon = 1, delta = 1e-6)", "exponential",
         (1.0, "GROUP BY of 1,000 keys, DP_MEDIAN ≤ 1.0× DuckDB grouped median()"),
         "DuckDB's exact grouped median()"),
    Case("mean_smooth", "SELECT avg(income) FROM people", MEAN_FLOOR,
         "SELECT DP_MEAN(income) FROM people WITH (mechanism = 'smooth', epsilon = 1, delta = 1e-6)", "smooth",
         (1.25, "smooth DP_MEAN ≤ 1.25× floor"), EXACT_NOTE, MEAN_FLOAT),
    Case("mean_ptr", "SELECT avg(income) FROM people", MEAN_FLOOR,
         "SELECT DP_MEAN(income) FROM people WITH (mechanism = 'ptr', bound = 1, epsilon = 1, delta = 1e-6)", "ptr",
         (1.25, "PTR DP_MEAN ≤ 1.25× floor"), EXACT_NOTE, MEAN_FLOAT),
    Case("saa_mean_1000", "SELECT avg(income) FROM people", SAA_FLOOR,
         "SELECT DP_MEAN(income) FROM people WITH (mechanism = 'saa', chunks = 1000, epsilon = 1)", "saa",
         (1.25, "SAA, 1,000 chunks ≤ 1.25× chunked GROUP BY"), "chunked GROUP BY (hash of the row % 1000)"),
]


#: A case whose round (plain, floor and dpsql) takes under FAST_ROUND_S seconds runs at least
#: FAST_ROUNDS rounds: times of a few milliseconds move by several percent from round to round,
#: and a median of five of them moved a ratio by as much.
FAST_ROUNDS = 15
FAST_ROUND_S = 0.5


def available(case: Case) -> bool:
    from dpsql.mechanisms import REGISTRY

    return case.mechanism is None or case.mechanism in REGISTRY


def plan_ms(con: t.Any, query: str, n: int = 50) -> float:
    """Median planning time (parse, bind, plan, rewrite; no execution) in milliseconds, of a
    statement planned afresh (not the plan a connection keeps for a statement it has seen)."""
    from dpsql._query.pipeline import prepare

    times = []
    for _ in range(n):
        start = time.perf_counter()
        prepare(query, con.policy, con.engine)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def release_ms_per_1000(con: t.Any, query: str, runs: int = 5) -> tuple[float, int] | None:
    """Median time of the release step alone (key selection, noise for every group and part,
    the released values and report; no SQL) per 1,000 group rows, and the number of groups."""
    from dpsql._privacy.noise import default_noise
    from dpsql._release.release import release

    prepared = con.prepare(query)
    if prepared.plan is None or not prepared.rewritten.keys:
        return None
    # the statistics as the connection fetches them (columns from DuckDB)
    fetch = getattr(con.engine, "statistics_columns", con.engine.statistics)
    rewritten = prepared.rewritten
    names, rows = fetch(rewritten.statement, rewritten.arrow_tables) if rewritten.tables else fetch(rewritten.statement)
    times = []
    for _ in range(runs + 1):
        start = time.perf_counter()
        _ = release(prepared.plan, prepared.rewritten, names, rows, default_noise()).arrays  # and its Arrow columns
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:]) * 1000 / max(len(rows), 1) * 1000, len(rows)


def run_speed(rows: int, repeat: int = 5, only: t.Sequence[str] | None = None,
              parquet: str | None = None, log: t.Callable[[str], None] = print,
              plan_runs: int = 50) -> dict[str, t.Any]:
    """Generate ``rows`` rows and time every available case; return the results."""
    import dpsql

    raw = duckdb.connect()
    start = time.perf_counter()
    generate(raw, rows)
    gen_s = time.perf_counter() - start
    log(f"generated {rows:,} rows in {gen_s:.1f} s")
    if parquet:
        raw.execute(f"COPY people TO '{parquet}' (FORMAT parquet)")
    con = dpsql.connect(raw, POLICY)  # the secure noise source, as users run it
    results, skipped = [], []
    log(f"{'case':<26} {'plain s':>9} {'floor s':>9} {'dpsql s':>9} {'dp/floor':>9} {'dp/plain':>9} {'plan ms':>8}")
    for case in CASES:
        if only and case.name not in only:
            continue
        if not available(case):
            msg = f"skipped: mechanism {case.mechanism} not available"
            log(f"{case.name:<26} {msg}")
            skipped.append({"case": case.name, "reason": msg})
            continue
        fns = {
            "plain": lambda c=case: raw.execute(c.plain).fetchall(),
            "floor": lambda c=case: raw.execute(c.floor).fetchall(),
            "dpsql": lambda c=case: con.sql(c.dp).fetchall(),
        }
        if case.float_floor:
            fns["float floor"] = lambda c=case: raw.execute(c.float_floor).fetchall()
        times = interleaved(fns, repeat)
        if repeat < FAST_ROUNDS and sum(statistics.median(v) for v in times.values()) < FAST_ROUND_S:
            for name, more in interleaved(fns, FAST_ROUNDS - repeat, warmup=0).items():
                times[name] += more
        med = {k: statistics.median(v) for k, v in times.items()}
        row = {
            "case": case.name, "rows": rows, "query": case.dp, "mechanism": case.mechanism,
            "plain_s": med["plain"], "floor_s": med["floor"], "dpsql_s": med["dpsql"],
            "dp_over_floor": paired_ratio(times["dpsql"], times["floor"]),
            "dp_over_plain": paired_ratio(times["dpsql"], times["plain"]),
            "plan_ms": plan_ms(con, case.dp, plan_runs), "runs": len(times["dpsql"]),
            "target": case.target[0] if case.target else None,
            "target_text": case.target[1] if case.target else None,
            "floor_note": case.floor_note,
        }
        if case.float_floor:
            row["float_floor_s"] = med["float floor"]
            row["dp_over_float_floor"] = paired_ratio(times["dpsql"], times["float floor"])
        per = release_ms_per_1000(con, case.dp)
        if per is not None:
            row["release_ms_per_1000_groups"], row["groups"] = per
        results.append(row)
        log(f"{case.name:<26} {med['plain']:9.4f} {med['floor']:9.4f} {med['dpsql']:9.4f} "
            f"{row['dp_over_floor']:9.2f} {row['dp_over_plain']:9.2f} {row['plan_ms']:8.2f}"
            + (f"   (float-sum floor {row['float_floor_s']:.4f} s: dp/float floor {row['dp_over_float_floor']:.2f})"
               if case.float_floor else ""))
    peak = peak_mib()
    log(f"peak resident memory: {peak:.0f} MiB")
    con.close()
    return {"rows": rows, "generate_s": gen_s, "results": results, "skipped": skipped, "peak_mib": peak}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--json")
    ap.add_argument("--parquet", help="also write the generated table to this Parquet file")
    args = ap.parse_args(argv)
    out = run_speed(args.rows, args.repeat, args.only, args.parquet)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
