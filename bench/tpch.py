"""TPC-H under customer-level DP: which of the 22 official queries answer, how accurately, how fast.

    python bench/run.py --tpch [--sf 1] [--repeat 3]          # and rewrite the TPC-H section
    python -m bench.tpch --sf 1 [--repeat 3] [--releases 5] [--json FILE]     # the measurement alone
    python -m bench.tpch --sf 0.1 --floors [--repeat 11]        # Q1, Q6 beside hand-written floors

The tables are made at scale factor ``--sf`` by ``fixtures/tpch/generate.py`` (DuckDB's ``tpch``
extension, the registry package ``duckdb-extension-tpch``, which pins DuckDB 1.5: it runs in a
virtual environment of its own under ``bench/.tpchgen/``) into ``bench/out/data/tpch-sf<SF>/``,
once. The policy is ``fixtures/policies/tpch.toml`` with its ``source`` files replaced by those
and releases never reused (every timed run computes). Each query's official text goes to
``Connection.sql()`` as it is; plain DuckDB runs the same text over the same files. For a query
that answers: the time of both (median of ``--repeat`` interleaved rounds after a warm-up),
their ratio, and the accuracy of its releases against the exact answer (the median over each
release's values of the relative error and of the relative 95% half-width, then the median of
those over ``--releases`` releases). For a query that is refused: the one-line reason.

Should the policy not parse, the queries over public tables only (Q2, Q11, Q16) are measured
with the policy's public tables, and every other query is reported with the policy's refusal.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import tomllib
import typing as t
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import duckdb  # noqa: E402
import sqlglot  # noqa: E402

from bench.common import OUT, ROOT, interleaved, machine, paired_ratio  # noqa: E402

HEADING = "## TPC-H under customer-level DP (bench/tpch.py)"


def heading(sf: float) -> str:
    """The section of one scale factor: SF 0.1's is :data:`HEADING` (the first measured), every
    other scale its own, so that a run at one scale keeps the others' sections.

    >>> heading(0.1) == HEADING, heading(1)
    (True, '## TPC-H at SF 1 under customer-level DP (bench/tpch.py)')
    """
    return HEADING if sf == 0.1 else f"## TPC-H at SF {sf:g} under customer-level DP (bench/tpch.py)"
POLICY = ROOT / "fixtures" / "policies" / "tpch.toml"
QUERIES = ROOT / "fixtures" / "tpch" / "queries"
TABLES = ("customer", "lineitem", "nation", "orders", "part", "partsupp", "region", "supplier")
#: the generator's environment: DuckDB 1.5 with its tpch extension from the package registry
GEN_ENV = ROOT / "bench" / ".tpchgen"
GEN_PINS = ("duckdb==1.5.5", "duckdb-extension-tpch==1.5.5")
NOT_PARSED = "the policy does not parse yet"


def log(msg: str) -> None:
    print(msg, flush=True)


def data_dir(sf: float) -> Path:
    return OUT / "data" / f"tpch-sf{sf:g}"


def ensure_data(sf: float) -> Path:
    """The eight tables at scale ``sf`` as parquet, generated once (see the module docstring)."""
    out = data_dir(sf)
    if all((out / f"{name}.parquet").exists() for name in TABLES):
        return out
    python = GEN_ENV / "bin" / "python"
    if not python.exists():
        log(f"making {GEN_ENV.relative_to(ROOT)} ({', '.join(GEN_PINS)}) ...")
        subprocess.run([sys.executable, "-m", "venv", str(GEN_ENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", *GEN_PINS], check=True)
    log(f"generating TPC-H at SF {sf:g} into {out} ...")
    start = time.perf_counter()
    subprocess.run([str(python), str(ROOT / "fixtures" / "tpch" / "generate.py"), "--sf", str(sf), "--out", str(out)],
                   check=True)
    log(f"generated in {time.perf_counter() - start:.0f} s")
    return out


def policy(data: Path, public_only: bool = False) -> dict[str, t.Any]:
    """``tpch.toml`` over the files in ``data``, releases never reused; ``public_only``: its
    public tables alone."""
    spec = tomllib.loads(POLICY.read_text(encoding="utf-8"))
    tables = spec["tables"]
    for name, tp in tables.items():
        tp["source"] = str(data / f"{name}.parquet")
    if public_only:
        spec["tables"] = {name: tp for name, tp in tables.items() if tp.get("public")}
    spec.setdefault("defaults", {})["reuse_releases"] = "off"
    spec["budget"] = {"epsilon": 1e9, "delta": 0.5}
    return spec


def _connect(data: Path) -> tuple[t.Any, t.Any, str | None]:
    """The full policy's connection and the public one; the full one is None, with the reason,
    while the policy does not parse."""
    import dpsql
    from dpsql.errors import Error

    public = dpsql.connect(":memory:", policy(data, public_only=True))
    try:
        return dpsql.connect(":memory:", policy(data)), public, None
    except Error as err:
        return None, public, str(err)


def _relative(got: t.Any, want: t.Any) -> float | None:
    try:
        g, w = float(got), float(want)
    except (TypeError, ValueError):
        return None
    return abs(g - w) / abs(w) if w else None


def accuracy(res: t.Any, exact_rows: list[tuple[t.Any, ...]]) -> dict[str, t.Any]:
    """Median relative error and relative half-width of the released values, rows matched on
    the columns without an interval that are not numbers (the group keys)."""
    rows = res.fetchall()
    widths = [res.intervals(k) for k in range(len(res.columns))]
    released = [k for k in range(len(res.columns)) if any(w == w for w in widths[k])]
    computed = [k for k in range(len(res.columns)) if k not in released and rows
                and isinstance(rows[0][k], float)]
    keys = [k for k in range(len(res.columns)) if k not in released and k not in computed]
    truth = {tuple(r[k] for k in keys): r for r in exact_rows}
    errors, half = [], []
    for n, row in enumerate(rows):
        want = truth.get(tuple(row[k] for k in keys))
        if want is None:
            continue
        for k in released + computed:
            rel = _relative(row[k], want[k])
            if rel is not None:
                errors.append(rel)
            if k in released and (base := _relative(0, want[k])) is not None:
                half.append(widths[k][n] * base / abs(float(want[k])))
    return {"values": len(errors), "error": statistics.median(errors) if errors else None,
            "half_width": statistics.median(half) if half else None}


def _timed(plain: duckdb.DuckDBPyConnection, con: t.Any, text: str, repeat: int) -> dict[str, float]:
    """Plain DuckDB's and dpsql's times of ``text`` (medians of interleaved rounds) and their ratio."""
    times = interleaved({"plain": lambda: plain.execute(text).fetchall(),
                         "dpsql": lambda: con.sql(text).fetchall()}, repeat)
    return {"plain_s": statistics.median(times["plain"]), "dpsql_s": statistics.median(times["dpsql"]),
            "ratio": paired_ratio(times["dpsql"], times["plain"]), "runs": repeat}


def _accuracy_over(con: t.Any, text: str, first: t.Any, exact_rows: list[tuple[t.Any, ...]],
                   releases: int) -> dict[str, t.Any]:
    """:func:`accuracy` of ``first`` and of ``releases - 1`` more releases: the median over the
    releases of each one's median relative error and half-width (one release's figures move
    with its noise), and the values matched in the first."""
    runs = [accuracy(first, exact_rows)] + [accuracy(con.sql(text), exact_rows) for _ in range(releases - 1)]
    out: dict[str, t.Any] = {"values": runs[0]["values"], "releases": releases}
    for name in ("error", "half_width"):
        got = [r[name] for r in runs if r[name] is not None]
        out[name] = statistics.median(got) if got else None
    return out


def run(sf: float, repeat: int, releases: int = 5) -> dict[str, t.Any]:
    """The 22 queries at scale ``sf``: times over ``repeat`` rounds, accuracy over ``releases``."""
    start = machine()  # the load average before the run
    data = ensure_data(sf)
    plain = duckdb.connect()
    for name in TABLES:
        plain.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{data / (name + '.parquet')}')")
    full, public, broken = _connect(data)
    results = []
    for path in sorted(QUERIES.glob("q*.sql")):
        number, text = int(path.stem[1:]), path.read_text(encoding="utf-8")
        entry: dict[str, t.Any] = {"query": number}
        con = full
        if con is None:
            con = public
            tables = {tb.name for tb in sqlglot.parse_one(text, read="duckdb").find_all(sqlglot.exp.Table)}
            if not tables <= set(public.policy.tables):
                entry["refused"] = f"{NOT_PARSED}: {broken}"
                results.append(entry)
                log(f"Q{number:02d}: refused ({entry['refused']})")
                continue
        try:
            res = con.sql(text)
        except Exception as err:  # a refusal: one line
            entry["refused"] = str(err).strip().splitlines()[0]
            results.append(entry)
            log(f"Q{number:02d}: refused ({entry['refused']})")
            continue
        exact_rows = plain.execute(text).fetchall()
        entry["exact"] = not res.report  # no DP aggregate: public tables only
        entry.update(_accuracy_over(con, text, res, exact_rows, 1 if entry["exact"] else releases))
        entry.update(_timed(plain, con, text, repeat))
        results.append(entry)
        log(f"Q{number:02d}: dpsql {entry['dpsql_s'] * 1000:.1f} ms, plain {entry['plain_s'] * 1000:.1f} ms, "
            f"{entry['ratio']:.2f}x")
    return {"date": time.strftime("%Y-%m-%d"), "machine": start, "load_average_end": machine()["load_average"],
            "sf": sf, "repeat": repeat, "releases": releases,
            "customers": plain.execute("SELECT count(*) FROM customer").fetchone()[0],  # type: ignore[index]
            "lineitems": plain.execute("SELECT count(*) FROM lineitem").fetchone()[0],  # type: ignore[index]
            "policy_error": broken, "results": results}


#: Hand-written floors of Q1 and Q6 under the policy's customer unit (issue 29's floor): one
#: GROUP BY of the customer (and the keys), reached through the link's join to orders, over
#: the values clipped to the policy's bounds; then each customer's partials weighted by
#: min(1, 200 / its line items) (Q1) or its sum clipped to 200 line items' worth (Q6), and
#: summed. ``{per}`` is the GROUP BY, as a derived table or a MATERIALIZED CTE.
_Q1_PER = """SELECT o_custkey AS u, l_returnflag AS k0, l_linestatus AS k1, count(*) AS c,
    sum(least(greatest(l_quantity, 1), 50)) AS q, sum(least(greatest(l_extendedprice, 0), 105000)) AS p,
    sum(least(greatest(l_extendedprice * (1 - l_discount), 0), 105000)) AS dp,
    sum(least(greatest(l_extendedprice * (1 - l_discount) * (1 + l_tax), 0), 113400)) AS ch,
    sum(least(greatest(l_discount, 0), 0.1)) AS d
    FROM lineitem JOIN orders ON l_orderkey = o_orderkey
    WHERE l_shipdate <= CAST('1998-09-02' AS date) GROUP BY ALL"""
_Q1_SUMS = """SELECT k0, k1, sum(q * w), sum(p * w), sum(dp * w), sum(ch * w), sum(d * w), sum(c * w) FROM (
    SELECT *, least(1, 200 / sum(c) OVER (PARTITION BY u)) AS w FROM {per}) GROUP BY k0, k1"""
_Q6_PER = """SELECT o_custkey AS u, sum(least(greatest(l_extendedprice * l_discount, 0), 10500)) AS s
    FROM lineitem JOIN orders ON l_orderkey = o_orderkey
    WHERE l_shipdate >= CAST('1994-01-01' AS date) AND l_shipdate < CAST('1995-01-01' AS date)
      AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24 GROUP BY u"""
_Q6_SUMS = "SELECT sum(least(greatest(s, 0), 200 * 10500)) FROM {per}"
FLOORS = {1: (_Q1_PER, _Q1_SUMS), 6: (_Q6_PER, _Q6_SUMS)}


def floors(sf: float, repeat: int) -> list[dict[str, t.Any]]:
    """Q1 and Q6: plain DuckDB, the hand-written floors (:data:`FLOORS`, derived and
    materialized) and dpsql, timed in interleaved rounds in one process; ratios are medians
    of paired rounds."""
    data = ensure_data(sf)
    plain = duckdb.connect()
    for name in TABLES:
        plain.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{data / (name + '.parquet')}')")
    con, _, broken = _connect(data)
    if con is None:
        raise SystemExit(f"{NOT_PARSED}: {broken}")
    out = []
    for number, (per, sums) in FLOORS.items():
        text = (QUERIES / f"q{number:02d}.sql").read_text(encoding="utf-8")
        forms = {"plain": text, "floor": sums.format(per=f"({per})"),
                 "floor, materialized": f"WITH per AS MATERIALIZED ({per}) " + sums.format(per="per")}
        fns: dict[str, t.Callable[[], t.Any]] = {k: (lambda s=s: plain.execute(s).fetchall()) for k, s in forms.items()}
        fns["dpsql"] = lambda s=text: con.sql(s).fetchall()
        times = interleaved(fns, repeat)
        row = {"query": number, **{f"{k} ms": statistics.median(v) * 1000 for k, v in times.items()},
               **{f"{k}/plain": paired_ratio(v, times["plain"]) for k, v in times.items() if k != "plain"},
               "dpsql/floor": paired_ratio(times["dpsql"], times["floor"]),
               "dpsql/floor, materialized": paired_ratio(times["dpsql"], times["floor, materialized"])}
        out.append(row)
        log(f"Q{number:02d}: " + ", ".join(f"{k} {v:.1f}" if k.endswith("ms") else f"{k} {v:.2f}×"
                                          for k, v in row.items() if k != "query"))
    return out


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.2g}%"


def _end(res: dict[str, t.Any]) -> str:
    return f", {res['load_average_end']:.2f} at the end" if "load_average_end" in res else ""


def _over(res: dict[str, t.Any]) -> str:
    """How the accuracy columns were measured, when over more than one release."""
    if res.get("releases", 1) <= 1:
        return ""
    return (f"; the accuracy columns are medians over {res['releases']} releases of each release's median "
            "over its released values that the exact answer has (rows matched on their keys)")


def section(res: dict[str, t.Any], command: str) -> str:
    """The Markdown section of docs/benchmarks.md for one :func:`run`."""
    m = res["machine"]
    answered = [r for r in res["results"] if "refused" not in r]
    lines = ["<!-- measured separately: kept when run.py rewrites this page -->", heading(res["sf"]), "",
             f"Measured {res['date']} on {m['cpu']} ({m['nproc']} cores visible, shared with other work; load "
             f"average {m['load_average']:.2f} at the start{_end(res)}), Python {m['python']}, DuckDB {m['duckdb']}; "
             f"`{command}`: TPC-H at SF {res['sf']:g} ({res['customers']:,} customers, {res['lineitems']:,} "
             f"line items), the 22 official query texts unchanged, policy `fixtures/policies/tpch.toml` "
             f"(a customer is the unit; ε = 1 per query from `[defaults]`); times are medians of "
             f"{res['repeat']} interleaved rounds after a warm-up round{_over(res)}. "
             f"**{len(answered)} of 22 answer.**", ""]
    if res.get("policy_error"):
        lines += [f"The policy does not parse yet (`{res['policy_error']}`): the queries over private tables "
                  "wait for links (`link` in the policy), date bounds, bounds of expressions, public and "
                  "date-part key domains, comma joins and nested per-unit aggregates (the expected outcome "
                  "of each, and the feature it waits for, is the table `EXPECTED` in `tests/test_tpch.py`). "
                  "The queries over public tables only run with the policy's public tables.", ""]
    lines += ["| query | outcome | dpsql | plain DuckDB | ratio | median relative error | median relative 95% half-width |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    waiting = [r["query"] for r in res["results"] if r.get("refused", "").startswith(NOT_PARSED)]
    for r in res["results"]:
        if r["query"] in waiting:
            continue
        if "refused" in r:
            lines.append(f"| Q{r['query']:02d} | refused: {r['refused'].replace('|', '/')} | | | | | |")
            continue
        exact = bool(r.get("exact"))
        what = "answered exactly (public tables only)" if exact else "answered"
        lines.append(f"| Q{r['query']:02d} | {what} | {r['dpsql_s'] * 1000:.1f} ms | {r['plain_s'] * 1000:.1f} ms | "
                     f"{r['ratio']:.2f}× | {'0' if exact else _pct(r['error'])} | "
                     f"{'0' if exact else _pct(r['half_width'])} |")
    if waiting:
        lines += ["", "Not run, the policy not parsing yet: " + ", ".join(f"Q{q:02d}" for q in waiting) + "."]
    return "\n".join(lines) + "\n"


def write_section(text: str, page: Path) -> None:
    """Put ``text`` in ``page`` in place of its scale's TPC-H section (with the marker line
    before it; the heading is ``text``'s first heading), or at the end."""
    old = page.read_text(encoding="utf-8") if page.exists() else "# Benchmarks\n"
    marker = "<!-- measured separately: kept when run.py rewrites this page -->\n"
    title = next(line for line in text.splitlines() if line.startswith("## "))
    if title + "\n" in old:
        before, rest = old.split(title + "\n", 1)
        before = before[: -len(marker)] if before.endswith(marker) else before
        ends = [i for i in (rest.find("\n" + marker), rest.find("\n## ")) if i >= 0]
        after = rest[min(ends) + 1:] if ends else ""
        new = before + text + ("\n" + after if after else "")
    else:
        new = old.rstrip("\n") + "\n\n" + text
    page.write_text(new, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sf", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--releases", type=int, default=5, help="releases the accuracy is the median over")
    ap.add_argument("--json")
    ap.add_argument("--floors", action="store_true",
                    help="Q1 and Q6 only, beside their hand-written per-unit floors")
    args = ap.parse_args(argv)
    if args.floors:
        log(f"load average {os.getloadavg()[0]:.2f}")
        found = floors(args.sf, args.repeat)
        if args.json:
            Path(args.json).write_text(json.dumps(found, indent=1), encoding="utf-8")
        return 0
    out = run(args.sf, args.repeat, args.releases)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
