"""The privacy budget under faults, end to end through dpsql.connect with a file ledger.

tests/test_ledger.py tests the ledger module itself (atomic charges, damaged files, a killed
charging loop). Here whole dpsql processes run DP queries: they are SIGKILLed at random points,
run concurrently against one ledger, and meet a damaged or missing ledger file.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import dpsql
from dpsql._accounting.budget import Budget, Cost
from dpsql._accounting.ledger import Ledger

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}

#: A child: connect with a file ledger, then release DP sums until the budget is exhausted,
#: printing each released value (flushed) only after con.sql() has returned it. The query's
#: alias is unique, so the ledger entry of every printed release can be found by its text.
CHILD = r"""
import os, sys, time
import pandas  # imported by the first result; load it before the timed part
import dpsql, dpsql._privacy.noise
ledger, total, epsilon, tag, go = sys.argv[1:]
policy = {"budget": {"epsilon": float(total), "ledger": ledger},
          "tables": {"t": {"columns": {"x": {"lower": 0, "upper": 10}}}}}
def setup(con):
    con.execute("CREATE TABLE t AS SELECT (range % 10)::DOUBLE AS x FROM range(1000)")
con = dpsql.connect(":memory:", policy, setup=setup, init_ledger=True)
dpsql._privacy.noise.default_noise().laplace(0.0, 1.0)  # warm up the sampler and the pipeline,
con.explain(f"SELECT DP_SUM(x) FROM t WITH (epsilon = {epsilon})")  # which build on first use
print("ready", flush=True)
while go != "-" and not os.path.exists(go):
    time.sleep(0.001)
i = 0
while True:
    alias = f"r_{tag}_{i}"
    try:
        value = con.sql(f"SELECT DP_SUM(x) AS {alias} FROM t WITH (epsilon = {epsilon})").fetchone()[0]
    except dpsql.BudgetError:
        print("exhausted", flush=True)
        break
    print(alias, repr(value), flush=True)
    i += 1
"""


def _policy(ledger: Path, total: float) -> dict:
    return {"budget": {"epsilon": total, "ledger": str(ledger)},
            "tables": {"t": {"columns": {"x": {"lower": 0, "upper": 10}}}}}


def _child(ledger: Path, total: float, epsilon: float, tag: str, go: str = "-") -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(ledger), repr(total), repr(epsilon), tag, go],
        env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _wait_ready(proc: subprocess.Popen) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line == "ready\n", line + (proc.stderr.read() if proc.stderr else "")


def _released(output: str) -> list[str]:
    """Aliases of the releases a child printed completely (a line cut by the kill is ignored)."""
    lines = output.split("\n")[:-1]  # the last element is "" or a partial line
    return [line.split(" ")[0] for line in lines if line.startswith("r_")]


def _entries(ledger: Path, total: float) -> list[str]:
    with Ledger.open(ledger, Budget(Cost(epsilon=total))) as led:
        history = led.history()
        assert led.spent().epsilon == pytest.approx(sum(e.cost.epsilon for e in history))
        return [e.query for e in history]


def test_sigkill_never_leaves_a_release_without_its_charge(tmp_path: Path) -> None:
    ledger, total, epsilon = tmp_path / "budget.ledger", 1e6, 0.01
    rng = random.Random(4)
    printed_total = 0
    seen: set[str] = set()
    for round_ in range(6):
        proc = _child(ledger, total, epsilon, f"k{round_}")
        _wait_ready(proc)
        assert proc.stdout is not None
        # Let the child release a random number of values, then kill it a random few
        # milliseconds later: mid-query, between charge and print, or between queries.
        lines = [proc.stdout.readline() for _ in range(rng.randint(1, 12))]
        time.sleep(rng.uniform(0.0, 0.05))
        os.kill(proc.pid, signal.SIGKILL)
        out = "".join(lines) + proc.stdout.read()
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        printed = _released(out)
        assert len(printed) >= len(lines)
        printed_total += len(printed)
        # the ledger is intact: dpsql opens it again (never reset, never refused)
        dpsql.connect(":memory:", _policy(ledger, total)).close()
        queries = _entries(ledger, total)
        new = [q for q in queries if q not in seen]
        seen.update(queries)
        charged = {q.split(" AS ")[1].split(" ")[0] for q in new}
        missing = [a for a in printed if a not in charged]
        assert not missing, f"released without a ledger entry: {missing}"
        assert len(charged) - len(printed) <= 1  # at most the query in flight at the kill
        assert all(q.endswith(f"WITH (epsilon = {epsilon})") for q in new)
    assert printed_total >= 6


def test_concurrent_processes_never_exceed_the_total(tmp_path: Path) -> None:
    ledger, total, epsilon, n = tmp_path / "budget.ledger", 1.0, 0.05, 4
    go = tmp_path / "go"
    procs = [_child(ledger, total, epsilon, f"c{i}", str(go)) for i in range(n)]
    for proc in procs:
        _wait_ready(proc)
    go.touch()
    outputs = [proc.communicate(timeout=120)[0] for proc in procs]
    assert all(proc.returncode == 0 for proc in procs), [p.stderr.read() if p.stderr else "" for p in procs]
    assert all(out.rstrip().endswith("exhausted") for out in outputs)
    released = [alias for out in outputs for alias in _released(out)]
    queries = _entries(ledger, total)
    assert len(released) == len(queries) == 20  # 1.0 / 0.05: not one release more
    assert sorted(q.split(" AS ")[1].split(" ")[0] for q in queries) == sorted(released)
    assert sum(1 for out in outputs if _released(out)) > 1, "the processes should interleave"
    with Ledger.open(ledger, Budget(Cost(epsilon=total))) as led:
        assert led.spent().epsilon <= total * (1 + 1e-9)


def _garbage(path: Path) -> None:
    path.write_bytes(b"not a ledger\n" * 100)


def _truncated(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _emptied(path: Path) -> None:
    path.write_bytes(b"")


@pytest.mark.parametrize("damage", [_garbage, _truncated, _emptied])
def test_a_damaged_ledger_is_refused_never_reset(tmp_path: Path, damage) -> None:  # type: ignore[no-untyped-def]
    ledger = tmp_path / "budget.ledger"
    con = dpsql.connect(":memory:", _policy(ledger, 5.0), init_ledger=True,
                        setup=lambda c: c.execute("CREATE TABLE t AS SELECT 1.0 AS x"))
    con.sql("SELECT DP_SUM(x) FROM t WITH (epsilon = 1)")
    con.close()
    damage(ledger)
    before = ledger.read_bytes()
    for init in (False, True):
        with pytest.raises(dpsql.LedgerError) as info:
            dpsql.connect(":memory:", _policy(ledger, 5.0), init_ledger=init)
        assert str(ledger) in str(info.value) and "\n" not in str(info.value)
    assert ledger.read_bytes() == before


def test_a_missing_ledger_is_refused_unless_initialising(tmp_path: Path) -> None:
    ledger = tmp_path / "budget.ledger"
    with pytest.raises(dpsql.LedgerError, match="does not exist"):
        dpsql.connect(":memory:", _policy(ledger, 5.0))
    assert not ledger.exists()
    con = dpsql.connect(":memory:", _policy(ledger, 5.0), init_ledger=True,
                        setup=lambda c: c.execute("CREATE TABLE t AS SELECT 1.0 AS x"))
    con.sql("SELECT DP_SUM(x) FROM t WITH (epsilon = 2)")
    con.close()
    os.unlink(ledger)  # the spending history is gone: dpsql must not start afresh silently
    for suffix in ("-wal", "-shm"):
        Path(str(ledger) + suffix).unlink(missing_ok=True)
    with pytest.raises(dpsql.LedgerError, match="does not exist"):
        dpsql.connect(":memory:", _policy(ledger, 5.0))
