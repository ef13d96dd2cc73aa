"""Peak memory of one query, plain DuckDB against dpsql, each in a fresh child process.

    python -m bench.memory --rows 100000000 [--only NAME ...] [--json FILE]

Each measurement is a child process that generates ``people`` (:func:`bench.common.generate`),
notes its peak resident memory (``getrusage``: the table and DuckDB's state), runs the query
once and notes the peak again. The report gives both peaks and what the query added; dpsql's
child also opens a connection (the pipeline imported, noise from the secure source).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import typing as t
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import POLICY, ROOT, generate, peak_mib  # noqa: E402

#: The cases measured at 100M rows (names of :data:`bench.speed.CASES`).
HUGE_CASES = ("mean", "group_by_zip_mean", "median_exponential")


def child(rows: int, case_name: str, variant: str) -> dict[str, float]:
    """Run in the child: generate, run the query once, return the peaks in MiB."""
    import duckdb

    from bench.speed import CASES

    case = next(c for c in CASES if c.name == case_name)
    raw = duckdb.connect()
    generate(raw, rows)
    if variant == "dpsql":
        import dpsql

        con = dpsql.connect(raw, POLICY)
        con.prepare(case.dp)
        before = peak_mib()
        con.sql(case.dp).fetchall()
    else:
        before = peak_mib()
        raw.execute(case.plain).fetchall()
    after = peak_mib()
    return {"table_mib": before, "peak_mib": after, "query_mib": after - before}


def measure(rows: int, cases: t.Sequence[str] = HUGE_CASES, timeout: float = 3600.0,
            log: t.Callable[[str], None] = print) -> dict[str, t.Any]:
    """Peaks of plain DuckDB and dpsql for each case, one child process per (case, variant)."""
    out: dict[str, t.Any] = {"rows": rows, "cases": {}}
    for name in cases:
        entry: dict[str, t.Any] = {}
        for variant in ("plain", "dpsql"):
            cmd = [sys.executable, "-m", "bench.memory", "--child", name, variant, "--rows", str(rows)]
            try:
                proc = subprocess.run(cmd, cwd=str(ROOT), timeout=timeout, capture_output=True, text=True)
            except subprocess.TimeoutExpired:
                entry[variant] = {"error": f"did not finish within {timeout / 60:.0f} min"}
                continue
            if proc.returncode != 0:
                last = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
                entry[variant] = {"error": last}
                continue
            entry[variant] = json.loads(proc.stdout.strip().splitlines()[-1])
        if "peak_mib" in entry.get("plain", {}) and "peak_mib" in entry.get("dpsql", {}):
            entry["ratio"] = entry["dpsql"]["peak_mib"] / entry["plain"]["peak_mib"]
        log(f"memory {name}: {entry}")
        out["cases"][name] = entry
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--json")
    ap.add_argument("--child", nargs=2, metavar=("CASE", "VARIANT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.rows, *args.child)))
        return 0
    res = measure(args.rows, args.only or HUGE_CASES)
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
