"""``dpsql serve`` against the Python API: round trip of a DP_MEAN, and 8 clients against 1.

    python bench/serve.py [--rows N] [--runs N] [--seconds S] [--workers N] [--processes N]

Builds the synthetic ``people`` table (bench/common.py) in a DuckDB file, starts ``dpsql serve``
on it in a subprocess, and measures with psycopg 3:

* round trip: the median time of one ``DP_MEAN(age)`` through the server (one connection)
  and through ``Connection.sql`` in this process, calls interleaved; target: server ≤ 1.5 × API
  + 5 ms;
* throughput: queries per second of 1 client, then of 8 concurrent clients (threads, one
  connection each), each running the query in a loop for ``--seconds``; target: 8 clients ≥
  1.5 × one client. The server runs ``--processes`` processes (default 2, one per core of the
  reference machine): one process's threads share one interpreter lock. Every answer is counted and compared with the ledger's new entries (none
  lost, none charged twice).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import duckdb  # noqa: E402

from bench.common import POLICY, generate  # noqa: E402

QUERY = "SELECT DP_MEAN(age) AS m FROM people WITH (epsilon = 1.0)"


def policy_toml(ledger: str) -> str:
    lines = ["[budget]", f"epsilon = {POLICY['budget']['epsilon']}", f"delta = {POLICY['budget']['delta']}",
             f'ledger = "{ledger}"',
             # every query is charged: the bench measures the pipeline, not the release cache
             "[defaults]", 'reuse_releases = "off"']
    table = POLICY["tables"]["people"]  # the table QUERY reads
    lines += ["[tables.people]", f'privacy_unit = "{table["privacy_unit"]}"',
              f"max_rows_per_unit = {table['max_rows_per_unit']}", "[tables.people.columns]"]
    for col, spec in table["columns"].items():
        lines.append(f"{col} = {{ lower = {spec['lower']}, upper = {spec['upper']} }}")
    return "\n".join(lines) + "\n"


def start(database: Path, policy: Path, workers: int, processes: int = 1) -> tuple[subprocess.Popen, int]:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "dpsql", "serve", str(database), "--policy", str(policy),
                             "--port", "0", "--init-ledger", "--workers", str(workers),
                             "--processes", str(processes)],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
    assert proc.stderr is not None
    for line in proc.stderr:
        m = re.search(r"listening on [\d.]+:(\d+)", line)
        if m:
            return proc, int(m.group(1))
    raise SystemExit("dpsql serve did not start")


def median_ms(fns: list, runs: int) -> list[float]:
    """Median time of each function, calls interleaved (the machine's load drifts alike for all)."""
    times: list[list[float]] = [[] for _ in fns]
    for fn in fns:
        fn()  # warm
    for _ in range(runs):
        for k, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return [statistics.median(ts) * 1000 for ts in times]


def throughput(dsn: str, clients: int, seconds: float) -> tuple[float, int]:
    import psycopg

    counts = [0] * clients
    errors: list[BaseException] = []
    start_at = threading.Barrier(clients + 1)

    def client(k: int) -> None:
        try:
            with psycopg.connect(dsn, autocommit=True) as con:
                con.execute(QUERY).fetchall()  # warm, counted below
                counts[k] += 1
                start_at.wait()
                end = time.perf_counter() + seconds
                while time.perf_counter() < end:
                    con.execute(QUERY).fetchall()
                    counts[k] += 1
        except BaseException as err:  # reported after the run
            errors.append(err)
            start_at.abort()

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for th in threads:
        th.start()
    start_at.wait()
    t0 = time.perf_counter()
    for th in threads:
        th.join()
    elapsed = time.perf_counter() - t0
    if errors:
        raise SystemExit(f"a client failed: {errors[0]!r}")
    return (sum(counts) - clients) / elapsed, sum(counts)


def main() -> int:
    import psycopg

    import dpsql
    from dpsql._accounting.ledger import Ledger

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--processes", type=int, default=2, help="server processes (dpsql serve --processes)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        database, policy, ledger = Path(tmp) / "people.duckdb", Path(tmp) / "policy.toml", Path(tmp) / "b.ledger"
        con = duckdb.connect(str(database))
        generate(con, args.rows)
        con.close()
        policy.write_text(policy_toml(str(ledger)), encoding="utf-8")
        proc, port = start(database, policy, args.workers, args.processes)
        time.sleep(2)  # the other processes start listening on the same port
        try:
            dsn = f"host=127.0.0.1 port={port} dbname=people user=bench"
            api = dpsql.connect(str(database), str(policy), read_only=True)
            with psycopg.connect(dsn, autocommit=True) as pg:
                api_ms, wire_ms = median_ms([lambda: api.sql(QUERY), lambda: pg.execute(QUERY).fetchall()],
                                            args.runs)
            api.close()
            with Ledger.open(str(ledger), None) as led:
                before = len(led.history())
            one_qps, one_n = throughput(dsn, 1, args.seconds)
            eight_qps, eight_n = throughput(dsn, 8, args.seconds)
            with Ledger.open(str(ledger), None) as led:
                charged = len(led.history()) - before
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    load = os.getloadavg()[0]
    print(f"dpsql serve bench: {args.rows} rows, {os.cpu_count()} CPUs, {args.processes} server processes of "
          f"{args.workers} workers, "
          f"load average {load:.2f}")
    print(f"round trip of DP_MEAN, median of {args.runs}: Python API {api_ms:.2f} ms, "
          f"psycopg through dpsql serve {wire_ms:.2f} ms (target ≤ {1.5 * api_ms + 5:.2f} ms: "
          f"{'met' if wire_ms <= 1.5 * api_ms + 5 else 'MISSED'})")
    print(f"throughput over {args.seconds:g} s: 1 client {one_qps:.1f} q/s, 8 clients {eight_qps:.1f} q/s "
          f"({eight_qps / one_qps:.2f}×; target ≥ 1.5×: {'met' if eight_qps >= 1.5 * one_qps else 'MISSED'})")
    print(f"answers received {one_n + eight_n}, ledger entries added {charged}: "
          f"{'every answer charged exactly once' if charged == one_n + eight_n else 'MISMATCH'}")
    return 0 if charged == one_n + eight_n else 1


if __name__ == "__main__":
    raise SystemExit(main())
