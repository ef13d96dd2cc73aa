"""Shared fixtures. Test dependencies are imported here so that a missing one fails the run
(a collection error), never silently skips tests."""

from __future__ import annotations

import copy
import tomllib
from importlib import resources

import hypothesis  # noqa: F401
import IPython  # noqa: F401
import matplotlib  # noqa: F401
import pytest
import scipy  # noqa: F401

import dpsql
from dpsql._privacy.noise import SeededNoise
from dpsql.interfaces.demo import load_adult

matplotlib.use("Agg")

#: What the default run leaves to ``pytest -m slow`` (CI runs it, on two workers): tests of
#: several seconds each (the statistical audit's quick mode, which ``-m thorough`` repeats with
#: more trials; the law tests of the exact samplers' decimal paths; killed processes; mypy).
_SLOW = (
    "tests/test_q13.py::test_every_unit_neighbour_moves_the_q13_histogram_by_at_most_one",
    "tests/test_q13.py::test_the_brute_force_catches_a_join_that_mixes_customers",
    "tests/audit/test_audit_mechanisms.py::test_mechanism_keeps_its_promise",
    "tests/audit/test_audit_mechanisms.py::test_negative_control_is_caught",
    "tests/test_bench_smoke.py::",
    "tests/test_gate_property.py::test_every_query_is_refused_or_released_within_its_sensitivity",
    "tests/test_choice.py::test_draws_decided_in_decimal_have_the_exact_law",
    "tests/test_choice.py::test_a_law_slightly_off_is_rejected",
    "tests/test_dlaplace.py::test_the_fit_rejects_a_scale_off_by_ten_percent",
    "tests/test_dlaplace.py::test_lanes_decided_in_decimal_have_the_exact_law",
    "tests/test_budget_faults.py::test_sigkill_never_leaves_a_release_without_its_charge",
    "tests/test_budget_faults.py::test_concurrent_processes_never_exceed_the_total",
    "tests/test_ledger.py::test_sigkill_never_loses_a_reported_charge",
    "tests/test_mypy.py::",
    "tests/test_reweight.py::test_every_unit_neighbour_of_every_small_dataset",
)
#: Tests that compare run times (other tests running beside them would disturb the clock): left
#: out of every parallel run; CI runs them alone with ``pytest -m timed -n 0``.
_TIMED = (
    "tests/test_oracles.py::test_a_matching_row_does_not_change_the_outcome[class10",
    "tests/test_oracles.py::test_rows_that_fail_under_try_do_not_change_the_run_time",
    "tests/test_serve_security.py::test_wrong_passwords_wait_longer_each_time_and_are_logged",
    "tests/test_serve_security.py::test_unauthenticated_sockets_are_closed_after_the_login_timeout",
)


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        if item.nodeid.startswith(_SLOW):
            item.add_marker(pytest.mark.slow)
        if item.nodeid.startswith(_TIMED):
            item.add_marker(pytest.mark.timed)


def demo_policy(**budget: float) -> dict:
    """The bundled Adult policy as a dict, with the budget replaced by ``budget`` if given."""
    text = (resources.files("dpsql") / "data" / "adult.toml").read_text(encoding="utf-8")
    policy = tomllib.loads(text)
    if budget:
        policy = copy.deepcopy(policy)
        policy["budget"] = dict(budget)
    return policy


@pytest.fixture
def seeded_demo():
    """A demo connection with a huge budget and reproducible (insecure) noise."""

    def make(seed: int = 0, **budget: float) -> dpsql.Connection:
        pol = demo_policy(**(budget or {"epsilon": 1e9, "delta": 0.5}))
        return dpsql.connect(":memory:", pol, setup=load_adult, noise=SeededNoise(seed))

    return make


@pytest.fixture(scope="session")
def spark():
    """One local Spark session (local[2]) for the whole run of the spark-marked tests, with the
    Adult and visits fixtures as temporary views. pyspark is imported here: without it every
    test that asks for the session fails (none is skipped)."""
    from pathlib import Path

    from pyspark.sql import SparkSession

    root = Path(__file__).resolve().parent.parent
    session = (SparkSession.builder.master("local[2]").appName("dpsql-tests")
               .config("spark.driver.memory", "1g").config("spark.sql.shuffle.partitions", "2")
               .config("spark.ui.enabled", "false").config("spark.sql.ansi.enabled", "true")
               .getOrCreate())
    session.sparkContext.setLogLevel("OFF")
    session.read.parquet(str(root / "dpsql" / "data" / "adult.parquet")).createOrReplaceTempView("adult")
    session.read.parquet(str(root / "fixtures" / "visits" / "visits.parquet")).createOrReplaceTempView("visits")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_connect(tmp_path_factory):
    """One Spark Connect server (pyspark's own, local[2], on 127.0.0.1, with a token) for the whole
    run of the spark-marked tests that ask for it: its ``url`` and the ``env()`` of its clients. A
    server that cannot start fails those tests (tests/spark_connect_server.py)."""
    from tests.spark_connect_server import start

    server = start(tmp_path_factory.mktemp("spark-connect"))
    yield server
    server.stop()
