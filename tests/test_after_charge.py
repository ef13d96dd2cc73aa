"""Nothing fails after the budget charge in a way that depends on the data.

A query either is refused before the charge (from the query and the policy alone) or answers;
a failure in the release step, whatever it is, becomes one fixed message with the charge kept.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

import dpsql
import dpsql._release.release as release_module
from dpsql._privacy.noise import SeededNoise
from dpsql._query import pipeline as pipeline_module
from dpsql.errors import InternalError
from dpsql.interfaces.demo import load_adult
from tests.conftest import demo_policy

WITHHELD = ("releasing the result failed; the details are withheld because they could depend "
            "on private values (the budget was charged)")

#: one predicate that matches rows of the demo table and one that matches none
MATCHES, MATCHES_NONE = "age = 39", "age > 200"


@pytest.fixture(scope="module")
def con() -> dpsql.Connection:
    c = dpsql.connect(":memory:", demo_policy(epsilon=1e9, delta=0.5), setup=load_adult,
                      noise=SeededNoise(3))
    yield c
    c.close()


def _outcome(con: dpsql.Connection, sql: str) -> tuple[str, str, float]:
    """(outcome, message, ε charged) of one query; the message is empty for an answer."""
    before = con.budget.spent.epsilon
    try:
        value = con.sql(sql).table.column(0)[0].as_py()
        outcome, message = "answered", "" if math.isfinite(value) else "not finite"
    except dpsql.Error as err:
        outcome, message = type(err).__name__, str(err)
    return outcome, message, con.budget.spent.epsilon - before


def test_the_predicates_match_rows_and_none(con: dpsql.Connection) -> None:
    count = "SELECT COUNT(*) FROM adult WHERE {}"
    assert con.engine.connection.execute(count.format(MATCHES)).fetchone()[0] > 0
    assert con.engine.connection.execute(count.format(MATCHES_NONE)).fetchone()[0] == 0


OVERFLOWING = [
    "DP_SUM(CASE WHEN {p} THEN 1e308 ELSE 3e303 END, 0, 1e308)",
    "DP_SUM(CASE WHEN {p} THEN -1e308 ELSE -3e303 END, -1e308, 0)",
    "DP_MEAN(CASE WHEN {p} THEN 1e308 ELSE 3e303 END, 0, 1e308)",
    "DP_VAR(CASE WHEN {p} THEN 1e154 ELSE 0 END, 0, 1e154)",
    "DP_STDDEV(CASE WHEN {p} THEN 1e154 ELSE 0 END, 0, 1e154)",
    "DP_AGG(SUM(CASE WHEN {p} THEN 1e308 ELSE 0 END), 0, 1e307)",
]


@pytest.mark.parametrize("aggregate", OVERFLOWING)
def test_bounds_that_can_overflow_are_refused_whatever_the_data(con: dpsql.Connection, aggregate: str) -> None:
    outcomes = []
    for predicate in (MATCHES, MATCHES_NONE):
        sql = f"SELECT {aggregate.format(p=predicate)} FROM adult WITH (epsilon = 1)"
        outcome, message, charged = _outcome(con, sql)
        outcomes.append((outcome, message.replace(predicate, "P")))
        assert outcome == "PrivacyError" and "too large" in message and "\n" not in message
        assert charged == 0
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("aggregate", [
    "DP_SUM(CASE WHEN {p} THEN 1e280 ELSE 3e275 END, 0, 1e280)",
    "DP_MEAN(CASE WHEN {p} THEN 1e280 ELSE 3e275 END, -1e280, 1e280)",
    "DP_VAR(CASE WHEN {p} THEN 1e140 ELSE 0 END, 0, 1e140)",
    "DP_AGG(SUM(CASE WHEN {p} THEN 1e300 ELSE 0 END), 0, 1e300)",
])
def test_bounds_just_inside_the_limit_answer_whatever_the_data(con: dpsql.Connection, aggregate: str) -> None:
    for predicate in (MATCHES, MATCHES_NONE):
        sql = f"SELECT {aggregate.format(p=predicate)} FROM adult WITH (epsilon = 1)"
        assert _outcome(con, sql) == ("answered", "", 1.0)


@pytest.mark.parametrize("failure", [
    AssertionError("order statistic 17 of 32561 is missing"),
    KeyError("a0_s"),
    TypeError("int() argument must be a string, not 'NoneType'"),
    RuntimeError("value 41.5 of group 'Male'"),
    OverflowError("cannot convert float infinity to integer"),
    InternalError("the order statistics are not contiguous"),
])
@pytest.mark.parametrize("step", ["release", "post-processing"])
def test_a_failure_after_the_charge_is_one_fixed_message(
    con: dpsql.Connection, monkeypatch: pytest.MonkeyPatch, failure: Exception, step: str
) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise failure

    if step == "release":
        monkeypatch.setattr(release_module, "release", fail)
    else:
        monkeypatch.setattr(pipeline_module, "_output", fail)
    before = con.budget.spent.epsilon
    with pytest.raises(dpsql.ExecutionError) as info:
        con.sql("SELECT DP_SUM(age) FROM adult WHERE sex = 'Male' WITH (epsilon = 0.5)")
    assert str(info.value) == WITHHELD
    assert info.value.__cause__ is None and info.value.__suppress_context__
    assert con.budget.spent.epsilon - before == pytest.approx(0.5)
    assert con.budget.history[-1].query.startswith("SELECT DP_SUM(age)")


def _prepared(con: dpsql.Connection, sql: str):  # type: ignore[no-untyped-def]
    prepared = con.prepare(sql)
    p = prepared.plan
    assert p is not None
    return p.prepared[0]


@pytest.mark.parametrize("aggregate, stats", [
    ("DP_SUM(age, 17, 90)", {"s": math.inf}),
    ("DP_SUM(age, 17, 90)", {"s": -math.inf}),
    ("DP_SUM(age, 17, 90)", {"s": math.nan}),
    ("DP_MEAN(age, 17, 90)", {"n": 3, "s": math.inf}),
    ("DP_MEAN(age, 17, 90)", {"n": 3, "s": math.nan}),
    ("DP_VAR(age, 17, 90)", {"n": 3, "s": 100.0, "q": math.inf}),
    ("DP_STDDEV(age, 17, 90)", {"n": 3, "s": math.inf, "q": math.nan}),
    ("DP_MEAN(age, 17, 90)", {"a0_chunks": [math.nan, math.inf, None, 50.0]}),
])
def test_an_exact_statistic_that_is_not_finite_is_released_finite(
    con: dpsql.Connection, aggregate: str, stats: dict
) -> None:
    options = "mechanism = 'saa', chunks = 4, " if "a0_chunks" in stats else ""
    prep = _prepared(con, f"SELECT {aggregate} FROM adult WITH ({options}epsilon = 1)")
    value, _ = prep.release(stats, SeededNoise(1))
    assert math.isfinite(value)


def test_the_bound_implied_range_of_a_sum() -> None:
    """+inf reads as N_MAX·U, −inf as N_MAX·min(L, 0) = 0 for L > 0, NaN as 0."""
    c = dpsql.connect(":memory:", demo_policy(epsilon=10.0), setup=load_adult)
    prep = _prepared(c, "SELECT DP_SUM(age, 17, 90) FROM adult WITH (epsilon = 1)")
    assert prep.centred({"s": math.inf}) == {"s": 2.0**63 * 90}
    assert prep.centred({"s": -math.inf}) == {"s": 0.0}
    assert prep.centred({"s": math.nan}) == {"s": 0.0}
    assert prep.centred({"s": 1234}) == {"s": 1234.0}
    c.close()


RELEASE_CODE = [*sorted((Path(dpsql.__file__).parent / "mechanisms").glob("*.py")),
                Path(dpsql.__file__).parent / "_release" / "release.py"]


@pytest.mark.parametrize("path", RELEASE_CODE, ids=lambda p: p.name)
def test_release_code_raises_no_text_built_from_values(path: Path) -> None:
    """No AssertionError at all, and the internal error's message is a fixed string."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Raise) or not isinstance(node.exc, ast.Call):
            continue
        name = getattr(node.exc.func, "id", getattr(node.exc.func, "attr", ""))
        where = f"{path.name}:{node.lineno}"
        assert name != "AssertionError", f"{where}: raise InternalError with a fixed message instead"
        if name == "InternalError":
            assert all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in node.exc.args), where
    assert 'raise AssertionError(f"' not in path.read_text(encoding="utf-8")


def test_a_smooth_noise_scale_that_can_overflow_is_refused_before_the_charge(con: dpsql.Connection) -> None:
    sql = ("SELECT DP_MEDIAN(age, 0, 1e300) FROM adult "
           "WITH (mechanism = 'smooth', epsilon = 1e-10, delta = 1e-6)")
    outcome, message, charged = _outcome(con, sql)
    assert (outcome, charged) == ("OptionError", 0) and "noise scale would overflow" in message
