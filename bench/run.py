"""Benchmarks of dpsql: speed against DuckDB and other DP systems, accuracy on Adult.

    python bench/run.py --all [--peers] [--huge] [--repeat 5] [--releases 300]
    python bench/run.py [--rows 10000000] [--repeat 5] [--only NAME ...] [--json out.json]
    python bench/run.py --units [--rows 10000000] [--repeat 3]
    python bench/run.py --tpch [--sf 1] [--repeat 3]

``--all`` runs everything and rewrites ``docs/benchmarks.md`` and ``docs/img/bench-*.png``:

1. the speed cases of :mod:`bench.speed` at 1M and 10M rows (``--huge``: also 100M, when
   the memory allows, for the mean, the GROUP BY and the median, with the peak memory of
   each of those queries against plain DuckDB's, :mod:`bench.memory`), one process per size, timing plain DuckDB, the hand-written clipped
   floor and dpsql (median of ``--repeat`` interleaved rounds after a warm-up round, at least
   ``bench.speed.FAST_ROUNDS`` for a case whose round is short), and the
   privacy-unit cases of :mod:`bench.units` at 10M rows;
2. with ``--peers``, the other DP systems on the same data, each in its own virtual
   environment under ``bench/.peers/`` (see :mod:`bench.peers`);
3. accuracy on UCI Adult (:mod:`bench.accuracy`), dpsql and the peers;
4. the REPL start-up time (``bench/repl_startup.py``);
5. the report (:mod:`bench.report`); raw results in ``bench/out/results.json``.

Without ``--all`` it runs the speed cases once at ``--rows`` in this process, as it always has.
``--units`` runs only the privacy-unit cases (:mod:`bench.units`, ``--rows`` rows of a quarter
as many units, in a child process) and replaces their section of ``docs/benchmarks.md``.
``--tpch`` runs only the 22 TPC-H queries under customer-level DP (:mod:`bench.tpch`) and replaces
their section. ``python -m bench`` is the same command.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
import time
import typing as t
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import OUT, ROOT, machine, mem_available_gib  # noqa: E402
from bench.memory import HUGE_CASES  # noqa: E402
from bench.memory import measure as measure_memory  # noqa: E402
from bench.speed import CASES, Case, run_speed  # noqa: E402,F401  (CASES: extended by mechanism work)

SIZES = [1_000_000, 10_000_000]
HUGE = 100_000_000
#: Bytes per row to ask of the free memory before a size is tried: the process peaked at about
#: 50 B/row at 100M rows (table plus the largest query's working state); twice that for safety.
BYTES_PER_ROW = 100
#: Largest size at which the peers are timed.
PEER_MAX_ROWS = 10_000_000
#: Seconds a peer may spend per speed case (warm-up plus runs) before it stops repeating.
PEER_CASE_BUDGET = 45.0
#: A peer is not run at a larger size when its slowest query, scaled linearly with the rows,
#: would take longer than this (seconds per query).
PEER_SKIP_S = 240.0


def log(msg: str) -> None:
    print(msg, flush=True)


def speed_size(rows: int, repeat: int, parquet: Path | None, timeout: float,
               only: t.Sequence[str] | None = None) -> dict[str, t.Any]:
    """Run :mod:`bench.speed` for one size in a child process (its own peak memory)."""
    need = rows * BYTES_PER_ROW / 2**30
    have = mem_available_gib()
    if need > have:
        return {"skipped": f"needs about {need:.0f} GiB of memory, {have:.1f} GiB available"}
    out = OUT / f"speed-{rows}.json"
    cmd = [sys.executable, "-m", "bench.speed", "--rows", str(rows), "--repeat", str(repeat), "--json", str(out)]
    if parquet is not None:
        cmd += ["--parquet", str(parquet)]
    if only:
        cmd += ["--only", *only]
    log(f"\n== speed, {rows:,} rows")
    try:
        proc = subprocess.run(cmd, cwd=str(ROOT), timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"skipped": f"did not finish within {timeout / 60:.0f} min on this machine"}
    if proc.returncode != 0:
        code = proc.returncode
        why = "killed (out of memory?)" if code in (-9, 137) else f"exit status {code}"
        return {"skipped": f"the run failed: {why}"}
    return json.loads(out.read_text())


def peers_speed(sizes: list[int], repeat: int, res: dict[str, t.Any]) -> None:
    from bench import peers as P

    installed = res["peers"]["installed"]
    for size in sizes:
        if size > PEER_MAX_ROWS:
            continue
        data = OUT / "data" / f"people_{size}.parquet"
        if not data.exists():
            continue
        by_peer: dict[str, t.Any] = {}
        for peer in P.PEERS:
            if installed[peer.name].get("reason"):
                continue
            prev = res["peers"]["speed"].get(str(sizes[0]), {}).get(peer.name)
            if size != sizes[0] and prev and "cases" in prev:
                times = [c["s"] for c in prev["cases"].values() if "s" in c]
                grow = size / sizes[0]
                if times and max(times) * grow > PEER_SKIP_S:
                    by_peer[peer.name] = {"skipped": (
                        f"not run: its slowest query took {max(times):.0f} s at {sizes[0]:,} rows, "
                        f"about {max(times) * grow / 60:.0f} min per query at {size:,}")}
                    log(f"{peer.title}: {by_peer[peer.name]['skipped']}")
                    continue
            log(f"{peer.title}: speed at {size:,} rows ...")
            start = time.perf_counter()
            out = P.run(peer, ["--mode", "speed", "--data", str(data), "--rows", str(size),
                               "--repeat", str(repeat), "--case-budget", str(PEER_CASE_BUDGET)],
                        timeout=PEER_CASE_BUDGET * 8 + 600)
            by_peer[peer.name] = out
            if "cases" in out:
                summary = ", ".join(f"{k} {v['s']:.3g} s" if "s" in v else f"{k} n/a" for k, v in out["cases"].items())
                log(f"  {summary}  ({time.perf_counter() - start:.0f} s)")
            else:
                log(f"  {out.get('error')}")
        res["peers"]["speed"][str(size)] = by_peer


def peers_accuracy(res: dict[str, t.Any], releases: int) -> None:
    from bench import peers as P

    data = OUT / "data" / "adult.parquet"
    for peer in P.PEERS:
        if res["peers"]["installed"][peer.name].get("reason"):
            continue
        log(f"{peer.title}: accuracy on Adult (up to {min(releases, peer.accuracy_releases or releases)} releases per ε, {peer.accuracy_budget:.0f} s budget) ...")
        n = min(releases, peer.accuracy_releases or releases)
        out = P.run(peer, ["--mode", "accuracy", "--data", str(data), "--releases", str(n),
                           "--budget", str(peer.accuracy_budget)], timeout=peer.accuracy_budget * 2 + 600)
        res["peers"]["accuracy"][peer.name] = out
        if "values" in out:
            counts = {s: min(len(v) for v in by.values()) if by else 0 for s, by in out["values"].items()}
            log(f"  releases per ε: {counts}; failed: {out.get('failed') or 'none'}")
        else:
            log(f"  {out.get('error')}")


def write_adult() -> None:
    import duckdb

    from dpsql.interfaces.demo import load_adult

    con = duckdb.connect()
    load_adult(con)
    (OUT / "data").mkdir(parents=True, exist_ok=True)
    con.execute(f"COPY (SELECT * FROM adult) TO '{OUT / 'data' / 'adult.parquet'}' (FORMAT parquet)")
    con.close()


def units_speed(rows: int, repeat: int, timeout: float) -> dict[str, t.Any]:
    """Run :mod:`bench.units` (privacy units by id) in a child process: ``rows`` rows of
    ``rows / 4`` units."""
    need = rows * BYTES_PER_ROW / 2**30
    have = mem_available_gib()
    if need > have:
        return {"skipped": f"needs about {need:.0f} GiB of memory, {have:.1f} GiB available"}
    out = OUT / f"units-{rows}.json"
    cmd = [sys.executable, "-m", "bench.units", "--rows", str(rows), "--units", str(rows // 4),
           "--repeat", str(repeat), "--json", str(out)]
    log(f"\n== privacy units by id, {rows:,} rows")
    try:
        proc = subprocess.run(cmd, cwd=str(ROOT), timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"skipped": f"did not finish within {timeout / 60:.0f} min on this machine"}
    if proc.returncode != 0:
        return {"skipped": f"the run failed: exit status {proc.returncode}"}
    return json.loads(out.read_text())


def run_units_only(args: argparse.Namespace) -> int:
    """``--units``: time the privacy-unit cases and put their section in docs/benchmarks.md."""
    from bench import units

    OUT.mkdir(parents=True, exist_ok=True)
    res = units_speed(args.rows, args.repeat, args.size_timeout)
    if "results" not in res:
        log(f"privacy units not measured: {res['skipped']}")
        return 1
    command = "python bench/run.py " + " ".join(shlex.quote(a) for a in (args.argv or []))
    page = Path(args.docs) / "benchmarks.md"
    units.write_section(units.section(res, command.strip()), page)
    log(f"wrote the privacy-units section of {page.relative_to(ROOT) if page.is_relative_to(ROOT) else page}")
    return 0


def run_tpch_only(args: argparse.Namespace) -> int:
    """``--tpch``: the 22 TPC-H queries under customer-level DP (:mod:`bench.tpch`, in a child
    process) and their section in docs/benchmarks.md."""
    from bench import tpch

    OUT.mkdir(parents=True, exist_ok=True)
    out = OUT / f"tpch-sf{args.sf:g}.json"
    cmd = [sys.executable, "-m", "bench.tpch", "--sf", str(args.sf), "--repeat", str(args.repeat), "--json", str(out)]
    if subprocess.run(cmd, cwd=str(ROOT), timeout=args.size_timeout).returncode != 0:
        log("TPC-H not measured: the run failed")
        return 1
    command = "python bench/run.py " + " ".join(shlex.quote(a) for a in (args.argv or []))
    page = Path(args.docs) / "benchmarks.md"
    tpch.write_section(tpch.section(json.loads(out.read_text()), command.strip()), page)
    log(f"wrote the TPC-H section of {page.relative_to(ROOT) if page.is_relative_to(ROOT) else page}")
    return 0


def repl_startup(runs: int = 10) -> dict[str, t.Any]:
    script = ROOT / "bench" / "repl_startup.py"
    if not script.exists():
        return {"error": "bench/repl_startup.py not found"}
    try:
        proc = subprocess.run([sys.executable, str(script), "--runs", str(runs)], cwd=str(ROOT),
                              capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return {"error": "did not finish within 10 min"}
    text = proc.stdout
    wall = re.search(r"wall: median ([0-9.]+) s", text)
    cpu = re.search(r"CPU:\s+median ([0-9.]+) s", text)
    if proc.returncode != 0 or wall is None:
        return {"error": f"failed: {(proc.stderr.strip().splitlines() or ['no output'])[-1]}"}
    return {"runs": runs, "wall_median_s": float(wall.group(1)),
            "cpu_median_s": float(cpu.group(1)) if cpu else float("nan"), "output": text}


def save(res: dict[str, t.Any]) -> None:
    """Write the results so far (a crash later keeps what was measured)."""
    (OUT / "results.json").write_text(json.dumps(res, indent=1, default=str))


def run_all(args: argparse.Namespace) -> int:
    from bench import report
    from bench.accuracy import run_accuracy

    started = time.perf_counter()
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "data").mkdir(parents=True, exist_ok=True)
    command = "python bench/run.py " + " ".join(shlex.quote(a) for a in (args.argv or []))
    sizes = args.sizes or (SIZES + ([HUGE] if args.huge else []))
    res: dict[str, t.Any] = {"machine": machine(), "command": command.strip(),
                             "config": {"sizes": sizes, "repeat": args.repeat, "releases": args.releases,
                                        "peer_releases": args.peer_releases, "peers": args.peers,
                                        "peer_case_budget_s": PEER_CASE_BUDGET, "peer_skip_s": PEER_SKIP_S},
                             "speed": {}, "peers": {}, "notes": []}
    m = res["machine"]
    log(f"{m['cpu']}, {m['nproc']} cores, {m['memory_gib']} GiB; Python {m['python']}, DuckDB {m['duckdb']}, "
        f"dpsql {m['dpsql']}; load average {m['load_average']:.2f}")
    if not args.huge and not args.sizes:
        res["notes"].append("100M rows were not part of this run: they are opt-in (`--huge`).")

    # 1. speed, one process per size
    for rows in sizes:
        parquet = OUT / "data" / f"people_{rows}.parquet" if args.peers and rows <= PEER_MAX_ROWS else None
        huge = rows >= HUGE
        out = speed_size(rows, args.repeat, parquet, args.size_timeout, HUGE_CASES if huge else None)
        res["speed"][str(rows)] = out
        if "results" not in out:
            log(f"{rows:,} rows skipped: {out['skipped']}")
            res["notes"].append(f"{rows:,} rows skipped: {out['skipped']}.")
        elif huge:  # peak memory per query, plain DuckDB against dpsql, one child each
            res["memory"] = measure_memory(rows, HUGE_CASES, args.size_timeout, log)
        save(res)

    # 1b. privacy units by id, at the size the targets are judged at
    unit_rows = max(s for s in sizes if s <= 10_000_000) if any(s <= 10_000_000 for s in sizes) else sizes[0]
    res["units"] = units_speed(unit_rows, args.repeat, args.size_timeout)
    if "results" not in res["units"]:
        res["notes"].append(f"Privacy units by id not measured: {res['units']['skipped']}.")
    save(res)

    # 2. peers
    if args.peers:
        from bench import peers as P

        log("\n== peers")
        res["peers"] = {"installed": {}, "speed": {}, "accuracy": {}}
        for peer in P.PEERS:
            reason = P.ensure(peer, log)
            res["peers"]["installed"][peer.name] = {"reason": reason}
            if reason:
                log(f"{peer.title}: skipped: {reason}")
        try:
            peers_speed([s for s in sizes if "results" in res["speed"].get(str(s), {})], args.repeat, res)
        except Exception as err:  # noqa: BLE001 - keep the rest of the run
            log(f"peers' speed runs stopped: {err!r}")
            res["notes"].append(f"The peers' speed runs stopped early: {type(err).__name__}.")
        save(res)
    else:
        res["notes"].append("Peers not run (pass `--peers`).")

    # 3. accuracy
    log("\n== accuracy on Adult")
    res["accuracy"] = run_accuracy(args.releases, log)
    save(res)
    if args.peers:
        write_adult()
        try:
            peers_accuracy(res, args.peer_releases)
        except Exception as err:  # noqa: BLE001
            log(f"peers' accuracy runs stopped: {err!r}")
            res["notes"].append(f"The peers' accuracy runs stopped early: {type(err).__name__}.")
        save(res)

    # 4. REPL start-up
    log("\n== REPL start-up")
    res["repl"] = repl_startup()
    log(res["repl"].get("output") or res["repl"].get("error", ""))

    res["runtime_s"] = time.perf_counter() - started
    save(res)
    if args.no_report:
        log(f"results in {OUT / 'results.json'} (report not written)")
    else:
        path = report.write(res, Path(args.docs))
        log(f"\nwrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    log("\n== targets")
    for tg in report.targets(res):
        verdict = {True: "met", False: "NOT MET", None: "not measured"}[tg["met"]]
        log(f"  {tg['target']:<48} {tg['measured']:<40} {verdict}")
    log(f"total {res['runtime_s'] / 60:.1f} min")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python bench/run.py", description=__doc__.splitlines()[0])
    ap.add_argument("--all", action="store_true", help="speed at 1M and 10M, privacy units, accuracy, REPL start-up, report")
    ap.add_argument("--units", action="store_true",
                    help="only the privacy-unit cases (--rows rows, a quarter as many units); rewrites their "
                         "section of docs/benchmarks.md")
    ap.add_argument("--tpch", action="store_true",
                    help="only TPC-H under customer-level DP (bench/tpch.py, --sf); rewrites its section of the docs")
    ap.add_argument("--sf", type=float, default=1.0, help="with --tpch: the TPC-H scale factor")
    ap.add_argument("--peers", action="store_true", help="with --all: also the other DP systems")
    ap.add_argument("--huge", action="store_true", help="with --all: also 100M rows (when the memory allows)")
    ap.add_argument("--sizes", type=int, nargs="*", help="with --all: these table sizes instead")
    ap.add_argument("--releases", type=int, default=300, help="accuracy releases per mechanism and ε (dpsql)")
    ap.add_argument("--peer-releases", type=int, default=200, help="accuracy releases per ε for the peers")
    ap.add_argument("--size-timeout", type=float, default=1800, help="seconds allowed for one table size")
    ap.add_argument("--docs", default=str(ROOT / "docs"), help="where benchmarks.md and img/ go")
    ap.add_argument("--no-report", action="store_true", help="with --all: do not rewrite the docs")
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", nargs="*", help="case names to run")
    ap.add_argument("--json", help="write the results to this file")
    args = ap.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    if args.all:
        return run_all(args)
    if args.units:
        return run_units_only(args)
    if args.tpch:
        return run_tpch_only(args)
    out = run_speed(args.rows, args.repeat, args.only, log=log)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
