"""Tests of privacy costs, their conversions and the durable budget ledger (its total, and the
noise sources dpsql.connect accepts with a ledger file)."""

from __future__ import annotations

import math
import multiprocessing
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import pytest

import dpsql
from dpsql._accounting.budget import Budget, Cost, epsilon_to_rho, rho_to_epsilon, to_kind
from dpsql._accounting.ledger import Ledger
from dpsql._accounting.ledger_file import exact_units, units_float
from dpsql._policy.policy import load_policy
from dpsql._privacy.noise import SeededNoise
from dpsql.connection import Connection
from dpsql.errors import BudgetError, LedgerError

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ,
       "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
APPROX = Budget(Cost(epsilon=1.5, delta=1e-6))


def python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter; fail the test if it fails."""
    done = subprocess.run([sys.executable, "-c", code, *args], env=ENV, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done


def make_ledger(path: Path, charges: int = 3) -> bytes:
    """A valid closed ledger at ``path`` with a few entries; returns its bytes."""
    with Ledger.open(path, Budget(Cost(epsilon=10.0)), create=True) as led:
        for i in range(charges):
            led.charge(Cost(epsilon=0.5), query=f"SELECT {i}")
    return path.read_bytes()


# -- costs and conversions ----------------------------------------------------------------

def test_cost_validation_sum_and_str() -> None:
    assert Cost(1.0, 1e-6) + Cost(0.5, 0.0, 0.25) == Cost(1.5, 1e-6, 0.25)
    assert str(Cost(epsilon=1.0, delta=1e-6)) == "ε=1.000, δ=1e-06"
    assert str(Cost(epsilon=0.5)) == "ε=0.500"
    assert str(Cost(rho=0.125)) == "ρ=0.125"
    assert Cost().is_zero() and not Cost(delta=1e-9).is_zero()
    for bad in ({"epsilon": -1.0}, {"epsilon": math.nan}, {"rho": math.inf}, {"delta": 1.0},
                {"delta": -1e-9}):
        with pytest.raises(BudgetError):
            Cost(**bad)


def test_budget_kind_is_derived_from_the_total() -> None:
    assert Budget(Cost(epsilon=1.0)).kind == "approx"
    assert Budget(Cost(epsilon=1.0, delta=1e-5)).kind == "approx"
    assert Budget(Cost(rho=0.5)).kind == "zcdp"
    with pytest.raises(BudgetError):
        Budget(Cost(epsilon=1.0, rho=0.5))


def test_conversions_match_hand_computed_values() -> None:
    # ε-DP -> ρ = ε²/2 (Bun & Steinke 2016, Prop. 1.4).
    assert epsilon_to_rho(1.0) == 0.5
    assert epsilon_to_rho(0.3) == pytest.approx(0.045, rel=1e-12)
    assert to_kind(Cost(epsilon=2.0), "zcdp") == Cost(rho=2.0)
    assert to_kind(Cost(epsilon=1.0, rho=0.25), "zcdp") == Cost(rho=0.75)
    # ρ-zCDP -> ε = ρ + 2·sqrt(ρ·ln(1/δ)) (Prop. 1.3).
    # δ = e^-8: 0.125 + 2·sqrt(0.125·8) = 2.125.
    assert rho_to_epsilon(0.125, math.exp(-8)) == pytest.approx(2.125, rel=1e-12)
    # ρ = 0.5, δ = 1e-6: ln(1e6) = 13.8155105580, ·0.5 = 6.9077552790, sqrt = 2.6282608849.
    assert rho_to_epsilon(0.5, 1e-6) == pytest.approx(0.5 + 2 * 2.6282608849, rel=1e-9)
    assert to_kind(Cost(rho=0.125), "approx", math.exp(-8)) == Cost(2.125, math.exp(-8))
    assert to_kind(Cost(epsilon=1.0, delta=1e-6), "approx") == Cost(1.0, 1e-6)
    with pytest.raises(BudgetError, match="δ > 0"):
        to_kind(Cost(epsilon=1.0, delta=1e-6), "zcdp")
    with pytest.raises(BudgetError, match="needs a δ"):
        to_kind(Cost(rho=0.5), "approx")
    with pytest.raises(BudgetError):
        rho_to_epsilon(0.5, 0.0)


# -- one process --------------------------------------------------------------------------

@pytest.mark.parametrize("where", ["memory", "file"])
def test_charge_spent_remaining_history(tmp_path: Path, where: str) -> None:
    path = None if where == "memory" else tmp_path / "budget.ledger"
    with Ledger.open(path, APPROX, create=True) as led:
        assert led.spent() == Cost() and led.remaining() == Cost(1.5, 1e-6)
        first = led.charge(Cost(epsilon=0.5), query="SELECT COUNT(*) FROM t", detail="count")
        second = led.charge(Cost(epsilon=0.25, delta=4e-7), query="SELECT AVG(a) FROM t")
        assert 0 < first < second
        assert led.spent() == Cost(0.75, 4e-7)
        assert led.remaining().epsilon == pytest.approx(0.75)
        assert led.remaining().delta == pytest.approx(6e-7)
        hist = led.history()
        assert [e.id for e in hist] == [first, second]
        assert hist[0].cost == Cost(epsilon=0.5) and hist[0].query == "SELECT COUNT(*) FROM t"
        assert hist[0].detail == "count" and hist[0].time <= hist[1].time
    with pytest.raises(LedgerError, match="closed"):
        led.spent()


def test_zero_cost_is_a_no_op() -> None:
    led = Ledger.open(None, APPROX)
    assert led.charge(Cost()) == 0
    assert led.history() == [] and led.spent() == Cost()


def test_exceeding_is_refused_and_charges_nothing(tmp_path: Path) -> None:
    led = Ledger.open(tmp_path / "b.ledger", APPROX, create=True)
    led.charge(Cost(epsilon=1.0))
    with pytest.raises(BudgetError) as info:
        led.charge(Cost(epsilon=1.0), query="SELECT SUM(a) FROM t")
    assert str(info.value) == (
        "Cannot answer the query without exceeding the privacy budget. "
        "Requested: ε=1.000, δ=0 Remaining: ε=0.500, δ=1e-06; lower epsilon to at most 0.500, or ask the "
        "data owner to raise the total (they raise the policy's budget and run dpsql --policy FILE --set-budget)")
    with pytest.raises(BudgetError, match="Requested: ε=0.000, δ=2e-06 .*; lower delta to at most 1e-06, or ask"):
        led.charge(Cost(delta=2e-6))
    assert led.spent() == Cost(epsilon=1.0) and len(led.history()) == 1
    led.charge(Cost(epsilon=0.5, delta=1e-6))  # exactly what remains still fits
    assert led.remaining() == Cost()
    with pytest.raises(BudgetError, match="; its epsilon is used up: ask the data owner to raise the total"):
        led.charge(Cost(epsilon=0.1))


def test_tolerance_absorbs_float_sums_but_nothing_more() -> None:
    led = Ledger.open(None, Budget(Cost(epsilon=0.3)))
    led.charge(Cost(epsilon=0.1))
    led.charge(Cost(epsilon=0.2))  # 0.1 + 0.2 = 0.30000000000000004 in floats
    tight = Ledger.open(None, Budget(Cost(epsilon=1.0)))
    with pytest.raises(BudgetError):
        tight.charge(Cost(epsilon=1.0 + 1e-9))
    assert tight.spent() == Cost()


def test_spent_delta_never_reaches_one() -> None:
    led = Ledger.open(None, Budget(Cost(epsilon=1.0, delta=1 - 1e-13)))
    led.charge(Cost(delta=0.5))
    led.charge(Cost(delta=0.49999999999995))
    with pytest.raises(BudgetError):  # within the float tolerance of the total, but δ = 1
        led.charge(Cost(delta=1e-13))
    assert led.spent().delta < 1


def test_zcdp_ledger_converts_epsilon_and_refuses_delta() -> None:
    led = Ledger.open(None, Budget(Cost(rho=1.0)))
    led.charge(Cost(epsilon=1.0))  # ρ = 0.5
    assert led.spent() == Cost(rho=0.5) and led.remaining() == Cost(rho=0.5)
    with pytest.raises(BudgetError, match="δ > 0"):
        led.charge(Cost(epsilon=0.1, delta=1e-9))
    with pytest.raises(BudgetError, match="Requested: ρ=0.600 Remaining: ρ=0.500"):
        led.charge(Cost(rho=0.6))
    assert led.spent() == Cost(rho=0.5) and len(led.history()) == 1


def test_approx_ledger_needs_delta_for_rho_costs() -> None:
    led = Ledger.open(None, APPROX)
    with pytest.raises(BudgetError, match="needs a δ"):
        led.charge(Cost(rho=0.01))
    led.charge(to_kind(Cost(rho=0.01), "approx", 1e-7))
    assert led.spent().delta == 1e-7


# -- files ---------------------------------------------------------------------------------

def test_missing_file_is_never_created_silently(tmp_path: Path) -> None:
    path = tmp_path / "missing.ledger"
    with pytest.raises(LedgerError, match="does not exist; create it with create=True") as info:
        Ledger.open(path, APPROX)
    assert str(path) in str(info.value) and not path.exists()
    with pytest.raises(LedgerError, match="cannot create"):
        Ledger.open(tmp_path / "no" / "dir.ledger", APPROX, create=True)


def test_create_on_an_existing_ledger_keeps_it(tmp_path: Path) -> None:
    path = tmp_path / "b.ledger"
    make_ledger(path, charges=2)
    with Ledger.open(path, Budget(Cost(epsilon=10.0)), create=True) as led:
        assert led.spent() == Cost(epsilon=1.0) and len(led.history()) == 2
    assert sorted(os.listdir(tmp_path)) == ["b.ledger"]  # no temporary file left behind


@pytest.mark.parametrize("total", [
    Cost(epsilon=20.0), Cost(epsilon=3.0), Cost(epsilon=10.0, delta=1e-9), Cost(epsilon=10.0 * (1 + 1e-9)),
])
def test_a_budget_with_another_total_is_refused(tmp_path: Path, total: Cost) -> None:
    path = tmp_path / "b.ledger"
    before = make_ledger(path, charges=2)  # total ε = 10, spent 1.0
    for create in (False, True):
        with pytest.raises(LedgerError) as info:
            Ledger.open(path, Budget(total), create=create)
        message = str(info.value)
        assert "\n" not in message and str(path) in message and "--set-budget" in message
        assert "has a total of ε=10, δ=0 but the policy's budget is ε=" in message
    assert path.read_bytes() == before
    with Ledger.open(path, Budget(Cost(epsilon=10.0 * (1 + 1e-15)))) as led:  # float round trip
        assert led.budget.total == Cost(epsilon=10.0) and led.spent() == Cost(epsilon=1.0)


def test_a_zcdp_total_is_fixed_too(tmp_path: Path) -> None:
    path = tmp_path / "z.ledger"
    Ledger.open(path, Budget(Cost(rho=0.5)), create=True).close()
    with pytest.raises(LedgerError, match="has a total of ρ=0.5 but the policy's budget is ρ=1;"):
        Ledger.open(path, Budget(Cost(rho=1.0)))


def test_in_memory_ledgers_take_any_total() -> None:
    for total in (Cost(epsilon=1.0), Cost(epsilon=20.0), Cost(rho=0.5)):
        with Ledger.open(None, Budget(total)) as led:
            assert led.budget.total == total


def test_set_total_changes_the_header_and_records_the_change(tmp_path: Path) -> None:
    path = tmp_path / "b.ledger"
    make_ledger(path, charges=2)  # total ε = 10, spent 1.0
    with Ledger.open(path, None) as led:  # the total the file records
        assert led.budget.total == Cost(epsilon=10.0)
        assert led.set_total(Budget(Cost(epsilon=20.0)), "more data, reviewed") == Cost(epsilon=10.0)
        assert led.budget.total == Cost(epsilon=20.0) and led.spent() == Cost(epsilon=1.0)
        assert led.set_total(Budget(Cost(epsilon=20.0)), "again") == Cost(epsilon=20.0)  # no-op
    with pytest.raises(LedgerError, match="has a total of ε=20, δ=0"):
        Ledger.open(path, Budget(Cost(epsilon=10.0)))
    with Ledger.open(path, Budget(Cost(epsilon=20.0))) as led:
        assert led.remaining() == Cost(epsilon=19.0)
        change = led.history()[-1]
        assert len(led.history()) == 3 and change.cost == Cost()
        assert change.detail == "total changed from ε=10, δ=0 to ε=20, δ=0"
        assert change.query == "more data, reviewed"
        led.set_total(Budget(Cost(epsilon=0.5)), "lowered below what is spent")
        assert led.remaining() == Cost()
        with pytest.raises(BudgetError):
            led.charge(Cost(epsilon=0.01))
        assert [e.detail for e in led.history()][-1] == "total changed from ε=20, δ=0 to ε=0.5, δ=0"


def test_set_total_keeps_the_kind_and_needs_a_reason(tmp_path: Path) -> None:
    path = tmp_path / "b.ledger"
    before = make_ledger(path)
    with Ledger.open(path, None) as led:
        with pytest.raises(LedgerError, match="accounts in .ε, δ.; its total cannot become ρ-zCDP"):
            led.set_total(Budget(Cost(rho=1.0)), "switch")
        with pytest.raises(ValueError, match="needs a reason"):
            led.set_total(Budget(Cost(epsilon=20.0)), " ")
    assert path.read_bytes() == before


def test_a_charge_after_the_total_changed_elsewhere_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "b.ledger"
    make_ledger(path, charges=1)
    old = Ledger.open(path, Budget(Cost(epsilon=10.0)))
    with Ledger.open(path, None) as owner:
        owner.set_total(Budget(Cost(epsilon=2.0)), "lowered")
    with pytest.raises(LedgerError, match="was changed to ε=2, δ=0 after it was opened with ε=10"):
        old.charge(Cost(epsilon=1.0))
    old.close()
    with Ledger.open(path, Budget(Cost(epsilon=2.0))) as led:
        assert led.spent() == Cost(epsilon=0.5)


def test_a_test_noise_source_is_refused_with_a_ledger_file(tmp_path: Path) -> None:
    path = tmp_path / "b.ledger"
    policy = {"budget": {"epsilon": 1.0, "ledger": str(path)},
              "tables": {"t": {"columns": {"x": {"lower": 0, "upper": 1}}}}}
    with pytest.raises(dpsql.PrivacyError, match="a test noise source .SeededNoise. cannot be used with "
                       "a durable ledger .* its releases are not private") as info:
        dpsql.connect(":memory:", policy, noise=SeededNoise(0), init_ledger=True)
    assert "\n" not in str(info.value) and str(path) in str(info.value)
    assert not path.exists()  # refused before the ledger was created
    dpsql.connect(":memory:", policy, init_ledger=True).close()  # the default noise is secure
    with pytest.raises(dpsql.PrivacyError, match="test noise source"):
        dpsql.connect(":memory:", policy, noise=SeededNoise(0))
    with Ledger.open(path, Budget(Cost(epsilon=1.0))) as led, pytest.raises(dpsql.PrivacyError):
        Connection(duckdb.connect(), load_policy(policy), led, noise=SeededNoise(0))
    del policy["budget"]["ledger"]  # an in-memory ledger: tests may use seeded noise
    dpsql.connect(":memory:", policy, noise=SeededNoise(0)).close()


def _garbage(path: Path) -> None:
    path.write_bytes(b"this is not a database\n" * 200)


def _truncated_half(path: Path) -> None:
    data = make_ledger(path)
    path.write_bytes(data[: len(data) // 2])


def _truncated_tail(path: Path) -> None:
    data = make_ledger(path)
    path.write_bytes(data[:-100])


def _foreign_sqlite(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE spending (epsilon REAL)")
        conn.execute("INSERT INTO spending VALUES (1.0)")
    conn.close()


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _tampered(value: str) -> Callable[[Path], None]:
    def tamper(path: Path) -> None:
        make_ledger(path)
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA ignore_check_constraints = ON")
        conn.execute(f"UPDATE ledger_entries SET epsilon = {value} WHERE id = 2")
        conn.commit()
        conn.close()
    return tamper


def _header_dropped(path: Path) -> None:
    make_ledger(path)
    conn = sqlite3.connect(path)
    conn.execute("DELETE FROM ledger_header")
    conn.commit()
    conn.close()


@pytest.mark.parametrize(("damage", "why"), [
    (_garbage, "not a SQLite database"),
    (_empty, "not a SQLite database"),
    (_truncated_half, "not a valid ledger|integrity check"),
    (_truncated_tail, "not a valid ledger|integrity check"),
    (_foreign_sqlite, "not a dpsql budget ledger"),
    (_tampered("-1.0"), "corrupted: entry 2|integrity check"),
    (_tampered("9e999"), "corrupted: entry 2"),
    (_header_dropped, "0 header rows"),
])
def test_damaged_file_is_refused_and_left_unchanged(
        tmp_path: Path, damage: Callable[[Path], None], why: str) -> None:
    path = tmp_path / "b.ledger"
    damage(path)
    before = path.read_bytes()
    with pytest.raises(LedgerError, match=why) as info:
        Ledger.open(path, Budget(Cost(epsilon=10.0)), create=True)
    assert str(path) in str(info.value) and "\n" not in str(info.value)
    assert path.read_bytes() == before


def test_kind_mismatch_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "b.ledger"
    before = make_ledger(path)
    with pytest.raises(LedgerError, match="accounts in .ε, δ. but the policy's budget is ρ-zCD"):
        Ledger.open(path, Budget(Cost(rho=1.0)))
    assert path.read_bytes() == before


# -- several processes ---------------------------------------------------------------------

def test_charges_survive_a_new_process(tmp_path: Path) -> None:
    path = str(tmp_path / "b.ledger")
    writer = python(
        "import sys\n"
        "from dpsql._accounting.budget import Budget, Cost\nfrom dpsql._accounting.ledger import Ledger\n"
        "led = Ledger.open(sys.argv[1], Budget(Cost(epsilon=1.0)), create=True)\n"
        "print(led.charge(Cost(epsilon=0.25), query='q1'), led.charge(Cost(epsilon=0.5)))\n",
        path)
    reader = python(
        "import sys\n"
        "from dpsql._accounting.budget import Budget, Cost\nfrom dpsql._accounting.ledger import Ledger\n"
        "led = Ledger.open(sys.argv[1], Budget(Cost(epsilon=1.0)))\n"
        "print(led.spent().epsilon, [e.id for e in led.history()], led.history()[0].query)\n",
        path)
    ids = [int(i) for i in writer.stdout.split()]
    assert reader.stdout.split(" ", 1) == ["0.75", f"{ids} q1\n"]


# Children are forked from a fork server: a fresh, single-threaded interpreter that imported this
# module once, so each child starts in milliseconds and opens its own SQLite connections. Forking
# the test process itself is unsafe: a test worker that ran DuckDB or Spark has threads, and a
# child forked from it can crash before it runs a line (seen as SIGSEGV instead of the SIGKILL
# this file sends). SIGKILL is POSIX anyway.
HAS_FORK = "forkserver" in multiprocessing.get_all_start_methods()
FORK: Any = multiprocessing.get_context("forkserver") if HAS_FORK else None
if HAS_FORK:
    FORK.set_forkserver_preload([__name__])
needs_fork = pytest.mark.skipif(not HAS_FORK, reason="needs a fork server and SIGKILL (POSIX)")


def _contend(path: str, barrier: Any, results: Any) -> None:
    """Child: spend ε = 0.1 until refused; report how many charges succeeded (or the error)."""
    n = 0
    try:
        led = Ledger.open(path, Budget(Cost(epsilon=2.0)))
        barrier.wait(timeout=30)
        while True:
            led.charge(Cost(epsilon=0.1), query=f"pid {os.getpid()}")
            n += 1
    except BudgetError:
        results.put(n)
    except Exception as e:  # e.g. LedgerError: surfaces in the parent's assertion
        results.put(repr(e))


@needs_fork
def test_concurrent_processes_never_overspend(tmp_path: Path) -> None:
    path = str(tmp_path / "b.ledger")
    Ledger.open(path, Budget(Cost(epsilon=2.0)), create=True).close()
    barrier, results = FORK.Barrier(8), FORK.Queue()
    procs = [FORK.Process(target=_contend, args=(path, barrier, results)) for _ in range(8)]
    for p in procs:
        p.start()
    counts = [results.get(timeout=60) for _ in procs]
    assert all(isinstance(n, int) for n in counts), counts
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    with Ledger.open(path, Budget(Cost(epsilon=2.0))) as led:
        hist = led.history()
        spent = led.spent().epsilon
    assert sum(counts) == 20 == len(hist)
    assert spent == math.fsum(e.cost.epsilon for e in hist) and spent <= 2.0


def _create_and_charge(path: str, barrier: Any, results: Any) -> None:
    """Child: create the ledger (racing the others), then charge once."""
    try:
        barrier.wait(timeout=30)
        with Ledger.open(path, Budget(Cost(epsilon=2.0)), create=True) as led:
            results.put(led.charge(Cost(epsilon=0.1)))
    except Exception as e:
        results.put(repr(e))


@needs_fork
def test_concurrent_creation_keeps_a_single_ledger(tmp_path: Path) -> None:
    path = str(tmp_path / "b.ledger")
    barrier, results = FORK.Barrier(8), FORK.Queue()
    procs = [FORK.Process(target=_create_and_charge, args=(path, barrier, results))
             for _ in range(8)]
    for p in procs:
        p.start()
    ids = [results.get(timeout=60) for _ in procs]
    assert all(isinstance(i, int) for i in ids), ids
    for p in procs:
        p.join(timeout=30)
    assert sorted(ids) == list(range(1, 9)), ids
    with Ledger.open(path, Budget(Cost(epsilon=2.0))) as led:
        assert [e.id for e in led.history()] == list(range(1, 9))
    assert sorted(os.listdir(tmp_path)) == ["b.ledger"]


def _charge_forever(path: str, report: str) -> None:
    """Child: charge in a loop, writing each entry id once charge() has returned."""
    fd = os.open(report, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    led = Ledger.open(path, Budget(Cost(epsilon=1e6)))
    os.write(fd, b"ready\n")
    while True:
        entry = led.charge(Cost(epsilon=0.001), query="loop")
        os.write(fd, f"{entry}\n".encode())


@needs_fork
def test_sigkill_never_loses_a_reported_charge(tmp_path: Path) -> None:
    path = str(tmp_path / "b.ledger")
    budget = Budget(Cost(epsilon=1e6))
    Ledger.open(path, budget, create=True).close()
    rng = random.Random(20240611)
    reported_total = 0
    known: set[int] = set()  # entry ids present before the round
    for round_ in range(20):
        report = tmp_path / f"report{round_}"
        proc = FORK.Process(target=_charge_forever, args=(path, str(report)))
        proc.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (
                report.exists() and report.read_text().startswith("ready\n")):
            time.sleep(0.001)
        time.sleep(rng.uniform(0.0, 0.1))
        proc.kill()  # SIGKILL: no cleanup, no flush, no rollback
        proc.join(timeout=20)
        assert proc.exitcode == -signal.SIGKILL
        lines = report.read_text().split("\n")
        reported = {int(line) for line in lines[1:-1]}  # complete lines only
        reported_total += len(reported)
        raw = sqlite3.connect(path)
        assert raw.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        raw.close()
        with Ledger.open(path, budget) as led:  # opens and validates fine
            hist = led.history()
            new = {e.id for e in hist} - known
            assert reported <= new  # never under-counts what was reported as charged
            assert len(new - reported) <= 1  # at most the charge in flight at the kill
            assert led.spent().epsilon == math.fsum(e.cost.epsilon for e in hist)
            started = time.monotonic()
            led.charge(Cost(epsilon=0.001), query="after kill")
            assert time.monotonic() - started < 5  # no stale lock left by the killed process
            known = {e.id for e in led.history()}
    assert reported_total >= 20  # the kills really landed while charging


def test_sums_of_entries_are_exact() -> None:
    """The running sums (whole numbers of 2^-1074) round once, as the exact rational sum does."""
    rng = random.Random(7)
    special = [0.0, 5e-324, 2.2250738585072014e-308, 0.1, 0.2, 0.3, 1 / 3, 1.0, 3, 2**60, 1e300]
    for _ in range(3000):
        values = [rng.choice(special) if rng.random() < 0.4 else rng.random() * 10.0 ** rng.randint(-320, 290)
                  for _ in range(rng.randint(0, 6))]
        exact = sum((Fraction(v) for v in values), Fraction(0))
        assert units_float(sum(exact_units(v) for v in values)) == float(exact), values
    assert units_float(exact_units(0.1) + exact_units(0.2)) == 0.30000000000000004  # as float(Fraction) rounds
    with pytest.raises(OverflowError):
        units_float(exact_units(sys.float_info.max) * 2)
