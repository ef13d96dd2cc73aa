"""Propose-test-release and smooth sensitivity (mechanisms 'ptr' and 'smooth').

* The data-dependent quantities the release uses, computed in DuckDB from a window of order
  statistics (or from n), equal dpsql._privacy.sensitivity's full-data values (both relations).
* The formulas used under ``replace`` stay valid when a value appears or disappears (NULLs,
  WHERE): checked by brute force against add/remove neighbours as well.
* Every noise constant is checked numerically (NRS 2007's admissibility, the PTR threshold).
* Accuracy on Adult (SPEC §8), seed 003's smooth-sensitivity example through SQL, refusals.
"""

from __future__ import annotations

import itertools
import math
import random
import statistics

import numpy as np
import pytest
from scipy import integrate

import dpsql
from dpsql._privacy import sensitivity as sens
from dpsql._privacy.noise import SeededNoise
from dpsql._release.release import release
from dpsql.admin import bruteforce as bf
from dpsql.errors import OptionError
from dpsql.interfaces.demo import load_adult
from dpsql.mechanisms import datadep, ptr

from .conftest import demo_policy

EXACT_MEAN_AGE = 38.58164675532078


def _policy(neighbouring: str = "add_remove", lower: float = 0.0, upper: float = 10.0,
            keys: list[str] | None = None, m: int = 1) -> dict:
    cols: dict = {"x": {"lower": lower, "upper": upper}}
    if keys is not None:
        cols["g"] = {"keys": keys}
    return {"neighbouring": neighbouring, "budget": {"epsilon": 1e9, "delta": 0.5},
            "tables": {"t": {"privacy_unit": "id" if m > 1 else "row", "max_rows_per_unit": m,
                             "columns": cols}}}


def _table(rows: list[tuple], schema: str = "x DOUBLE"):
    def setup(con) -> None:
        con.execute(f"CREATE TABLE t ({schema})")
        if rows:
            con.executemany(f"INSERT INTO t VALUES ({', '.join('?' * len(rows[0]))})", [list(r) for r in rows])
    return setup


def _exact(con: dpsql.Connection, query: str):
    """Plan and run the query's DuckDB statement once: (plan, rewritten, names, rows)."""
    prepared = con.prepare(query)
    plan, rw = prepared.plan, prepared.rewritten
    cur = con.engine.connection.execute(rw.sql)
    return plan, rw, [d[0] for d in cur.description], cur.fetchall()


def _stats(plan, rw, names, row, j: int = 0) -> dict:
    i = plan.prepared[j].agg.index
    return {name: row[names.index(col)] for (a, name), col in rw.columns.items() if a == i}


def _repeat(con: dpsql.Connection, query: str, n: int) -> list:
    plan, rw, names, rows = _exact(con, query)
    return [release(plan, rw, names, rows, con.noise).rows[0][0] for _ in range(n)]


@pytest.fixture(scope="module")
def adult() -> dpsql.Connection:
    con = dpsql.connect(":memory:", demo_policy(epsilon=1e9, delta=0.5), setup=load_adult,
                        noise=SeededNoise(11))
    yield con
    con.close()


@pytest.fixture(scope="module")
def adult_ages(adult) -> np.ndarray:
    return np.sort(np.array([r[0] for r in adult.engine.connection.execute("SELECT age FROM adult").fetchall()], float))


# ----------------------------------------------------------------------------- seed 003, through SQL
def test_seed003_median_smooth_sensitivity_through_sql() -> None:
    """Λ = 1000, β = 2, data 1..10: the smooth sensitivity of the median is 1 (slide 19)."""
    con = dpsql.connect(":memory:", _policy(upper=1000.0), setup=_table([(v,) for v in range(1, 11)]),
                        noise=SeededNoise(0))
    eps_laplace = 4 * math.log(4)  # β = ε/(2 ln(2/δ)) = 2 at δ = 0.5
    for opts, beta in ((f"epsilon = {eps_laplace!r}, delta = 0.5", eps_laplace / (2 * math.log(4))),):
        query = f"SELECT DP_MEDIAN(x) FROM t WITH (mechanism = 'smooth', {opts})"
        plan, rw, names, rows = _exact(con, query)
        prep = plan.prepared[0]
        assert prep.beta == pytest.approx(2.0) and prep.beta == pytest.approx(beta)
        f, s = prep.smooth(_stats(plan, rw, names, rows[0]))
        assert f == 5.0 and s == pytest.approx(1.0)
        # the slide's sum: max(max_{k<=4} e^{-2k}·1, max_{5<=k<=10} e^{-2k}·Λ) = 1
        assert max([math.exp(-2 * k) for k in range(5)] + [math.exp(-2 * k) * 1000 for k in range(5, 11)]) == 1
        value = con.sql(query).fetchall()[0][0]
        assert 0 <= value <= 1000
    con.close()


# ----------------------------------------------------------------------------- SQL vs sensitivity.py
def _random_rows(rng: random.Random, n: int, grouped: bool) -> list[tuple]:
    out = []
    for _ in range(n):
        v = rng.choice([float(rng.randint(0, 10)), round(rng.uniform(0, 10), 2), None, 12.0, -3.0])
        out.append((v, rng.choice(["a", "b"])) if grouped else (v,))
    return out


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
def test_window_quantities_from_sql_equal_full_data_values(relation: str) -> None:
    """S (smooth) and D (ptr) from DuckDB's window equal sensitivity.py on all of the data."""
    rng = random.Random(5 if relation == "replace" else 6)
    con = dpsql.connect(":memory:", _policy(relation, keys=["a", "b", "c"]),
                        setup=_table([], "x DOUBLE, g VARCHAR"), noise=SeededNoise(0))
    checked = 0
    for _ in range(25):
        rows = _random_rows(rng, rng.randint(0, 30), grouped=True)
        con.engine.connection.execute("DELETE FROM t")
        if rows:
            con.engine.connection.executemany("INSERT INTO t VALUES (?, ?)", [list(r) for r in rows])
        p = rng.choice([0.0, 0.1, 0.5, 0.75, 1.0])
        agg = "DP_MEDIAN(x)" if p == 0.5 else f"DP_QUANTILE(x, {p})"
        b = rng.choice([0.01, 0.4, 1.5, 4.0, 9.5, 10.0])
        eps = rng.choice([20.0, 60.0])  # large ε: small windows, so truncation and caps matter
        for query in (f"SELECT g, {agg} FROM t GROUP BY g WITH (mechanism = 'smooth', epsilon = {eps}, delta = 0.1)",
                      f"SELECT g, {agg} FROM t GROUP BY g WITH (mechanism = 'ptr', bound = {b}, epsilon = {eps}, delta = 0.1)"):
            plan, rw, names, out = _exact(con, query)
            prep = plan.prepared[0]
            for row in out:
                key = row[0]
                x = sorted(min(max(v, 0.0), 10.0) for v, g in rows if g == key and v is not None)
                stats = _stats(plan, rw, names, row)
                model, m = prep.cal.relation, prep.cal.rows
                if prep.mechanism == "smooth":
                    f, s = prep.smooth(stats)
                    assert s == sens.smooth_sensitivity("quantile", x, prep.beta, 0, 10, model, p, k_max=prep.k,
                                                        max_rows=m)
                else:
                    d, f, n = prep.distance(stats)
                    assert n == len(x)
                    assert d == sens.distance_to_instability("quantile", x, b, 0, 10, model, p,
                                                             k_max=prep.cap - 1, max_rows=m)
                assert f == sens.statistic("quantile", x, 0, 10, p)
                checked += 1
    assert checked > 80
    con.close()


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@pytest.mark.parametrize("m", [2, 3])
def test_unit_window_quantities_from_sql_equal_full_data_values(relation: str, m: int) -> None:
    """Units of up to m rows, no GROUP BY: D (in units, the pair form // m) and S from DuckDB's
    window of ranks r ± C·m (ptr) or r ± (K + 1)·m (smooth) equal sensitivity.py on all of the data."""
    rng = random.Random(17 * m + (relation == "replace"))
    pol = _policy(relation, m=m)
    con = dpsql.connect(":memory:", pol, setup=_table([], "id INTEGER, x DOUBLE"), noise=SeededNoise(0))
    union = "union" if relation == "replace" else relation
    checked = 0
    for _ in range(20):
        values = [v for v, in _random_rows(rng, rng.randint(0, 40), grouped=False)]
        rows = [(i // m, v) for i, v in enumerate(values)]  # every unit holds m rows (the last fewer)
        con.engine.connection.execute("DELETE FROM t")
        if rows:
            con.engine.connection.executemany("INSERT INTO t VALUES (?, ?)", [list(r) for r in rows])
        x = sorted(min(max(v, 0.0), 10.0) for v in values if v is not None)
        p = rng.choice([0.0, 0.1, 0.5, 0.75, 1.0])
        agg = "DP_MEDIAN(x)" if p == 0.5 else f"DP_QUANTILE(x, {p})"
        b = rng.choice([0.01, 0.4, 1.5, 4.0, 9.5, 10.0])
        eps = rng.choice([20.0, 60.0])
        for query in (f"SELECT {agg} FROM t WITH (mechanism = 'smooth', epsilon = {eps}, delta = 0.1)",
                      f"SELECT {agg} FROM t WITH (mechanism = 'ptr', bound = {b}, epsilon = {eps}, delta = 0.1)",
                      f"SELECT DP_MEAN(x) FROM t WITH (mechanism = 'ptr', bound = {b}, epsilon = {eps}, delta = 0.1)",
                      f"SELECT DP_MEAN(x) FROM t WITH (mechanism = 'smooth', epsilon = {eps}, delta = 0.1)"):
            plan, rw, names, out = _exact(con, query)
            prep = plan.prepared[0]
            assert (prep.cal.relation, prep.cal.rows, prep.cal.steps) == (union, m, 1)
            stats = _stats(plan, rw, names, out[0])
            if prep.stat == "mean":
                if prep.mechanism == "smooth":
                    _, s = prep.smooth(stats)
                    assert s == sens.mean_smooth_sensitivity(len(x), prep.beta, 0, 10, union, max_rows=m)
                else:
                    d, _, n = prep.distance(stats)
                    assert d == min(sens.mean_distance(len(x), b, 0, 10, union, max_rows=m), prep.cap)
                continue
            if prep.mechanism == "smooth":
                f, s = prep.smooth(stats)
                assert s == sens.smooth_sensitivity("quantile", x, prep.beta, 0, 10, union, p, k_max=prep.k,
                                                    max_rows=m)
            else:
                d, f, n = prep.distance(stats)
                assert n == len(x)
                assert d == sens.distance_to_instability("quantile", x, b, 0, 10, union, p,
                                                         k_max=prep.cap - 1, max_rows=m)
            assert f == sens.statistic("quantile", x, 0, 10, p)
            checked += 1
    assert checked >= 30
    con.close()


def test_unit_windows_stay_bounded() -> None:
    """(K + 1)·m ranks on each side at most MAX_WINDOW + 1: a larger m shortens K, never the window."""
    for m in (1, 2, 5, 100, 10_000):
        k = datadep.truncation(0.001, 0, 100, m)
        assert k >= 0 and ((k + 1) * m <= datadep.MAX_WINDOW + 1 or k == 0)
    assert datadep.truncation(0.001, 0, 100, 1) == datadep.MAX_WINDOW


def test_window_quantities_on_adult(adult, adult_ages) -> None:
    x = adult_ages
    query = "SELECT DP_MEDIAN(age) FROM adult WITH (mechanism = 'smooth', epsilon = 1, delta = 1e-6)"
    plan, rw, names, rows = _exact(adult, query)
    prep = plan.prepared[0]
    f, s = prep.smooth(_stats(plan, rw, names, rows[0]))
    assert f == 37.0 and prep.k < 1000
    assert s == sens.smooth_sensitivity("median", x, prep.beta, 0, 100, "add_remove", k_max=prep.k)
    assert s == pytest.approx(sens.smooth_sensitivity("median", x, prep.beta, 0, 100, "add_remove"))
    # a small ε₁ makes the PTR window wide enough (cap > 2500) to hold the exact distances
    for b, expected in ((0.5, 400), (1.0, 858), (2.0, 1685)):
        query = f"SELECT DP_MEDIAN(age) FROM adult WITH (mechanism = 'ptr', bound = {b}, epsilon = 0.02, delta = 1e-6)"
        plan, rw, names, rows = _exact(adult, query)
        prep = plan.prepared[0]
        d, f, n = prep.distance(_stats(plan, rw, names, rows[0]))
        assert (d, f, n) == (expected, 37.0, 32561) and prep.cap > 2500
        assert d == sens.distance_to_instability("median", x, b, 0, 100, "add_remove")
    # the mean: D and S from n alone
    query = "SELECT DP_MEAN(age) FROM adult WITH (mechanism = 'ptr', bound = 0.005, epsilon = 1, delta = 1e-6)"
    plan, rw, names, rows = _exact(adult, query)
    d, f, n = plan.prepared[0].distance(_stats(plan, rw, names, rows[0]))
    assert n == 32561 and f == pytest.approx(EXACT_MEAN_AGE) and d == plan.prepared[0].cap  # D = 12562
    assert sens.mean_distance(n, 0.005, 0, 100) == 12562


def test_quantiles_of_a_float_column_and_empty_groups() -> None:
    """Values spread over many buckets (the second SQL pass) and a public key with no rows."""
    rng = random.Random(3)
    rows = [(rng.uniform(-5, 105), rng.choice(["a", "b"])) for _ in range(3000)]
    con = dpsql.connect(":memory:", _policy(lower=0, upper=100, keys=["a", "b", "c"]),
                        setup=_table(rows, "x DOUBLE, g VARCHAR"), noise=SeededNoise(1))
    for query in ("SELECT g, DP_QUANTILE(x, 0.3) FROM t GROUP BY g WITH (mechanism = 'smooth', epsilon = 1, delta = 1e-6)",
                  "SELECT g, DP_QUANTILE(x, 0.3) FROM t GROUP BY g WITH (mechanism = 'ptr', bound = 1, epsilon = 1, delta = 1e-6)"):
        plan, rw, names, out = _exact(con, query)
        prep = plan.prepared[0]
        assert sorted(r[0] for r in out) == ["a", "b", "c"]
        for row in out:
            x = sorted(min(max(v, 0.0), 100.0) for v, g in rows if g == row[0])
            stats = _stats(plan, rw, names, row)
            if prep.mechanism == "smooth":
                f, s = prep.smooth(stats)
                assert s == sens.smooth_sensitivity("quantile", x, prep.beta, 0, 100, "add_remove", 0.3,
                                                    k_max=prep.k)
                if not x:
                    assert (f, s) == (100.0, 100.0)  # empty: x_1 = U, S = U − L
            else:
                d, f, n = prep.distance(stats)
                assert d == sens.distance_to_instability("quantile", x, 1.0, 0, 100, "add_remove", 0.3,
                                                         k_max=prep.cap - 1)
            assert f == sens.statistic("quantile", x, 0, 100, 0.3)
        assert con.sql(query).fetchall()  # and end to end
    con.close()


# ----------------------------------------------------------------------------- the replace relation
UNIVERSE = (0.0, 1.0, 3.0, 4.0)


def _union_neighbours(x: tuple) -> set:
    return set(bf.neighbours(x, UNIVERSE, "add_remove")) | set(bf.neighbours(x, UNIVERSE, "replace"))


def test_replace_formulas_hold_for_added_and_removed_values() -> None:
    """Under 'replace' a value can still appear or disappear (NULL, WHERE): the quantities used
    must be valid for changes, additions and removals alike (brute force, n <= 4)."""
    lo, hi = UNIVERSE[0], UNIVERSE[-1]
    union = "union"  # what the mechanisms use under replace (datadep.calibrate)
    for n in range(5):
        for x in itertools.combinations_with_replacement(UNIVERSE, n):
            nbrs = _union_neighbours(x)
            for p in (0.0, 0.5, 0.75, 1.0):
                ls = max(abs(bf.value("quantile", x, UNIVERSE, p) - bf.value("quantile", y, UNIVERSE, p)) for y in nbrs)
                for beta in (0.3, 1.2):
                    sx = sens.smooth_sensitivity("quantile", x, beta, lo, hi, union, p)
                    assert sx >= ls - 1e-12
                    for y in nbrs:
                        sy = sens.smooth_sensitivity("quantile", y, beta, lo, hi, union, p)
                        assert sx <= math.exp(beta) * sy * (1 + 1e-12)
                for b in (0.5, 2.5):
                    dx = sens.distance_to_instability("quantile", x, b, lo, hi, union, p)
                    if ls > b:
                        assert dx == 0
                    for y in nbrs:
                        dy = sens.distance_to_instability("quantile", y, b, lo, hi, union, p)
                        assert abs(min(dx, 50) - min(dy, 50)) <= 1
            # the mean from n: Â(k) = W/max(n − k, 1) bounds LS within k union steps
            ball = {x}
            for k in range(3):
                worst = max(max(abs(bf.value("mean", y, UNIVERSE) - bf.value("mean", z, UNIVERSE))
                                for z in _union_neighbours(y)) for y in ball)
                assert worst <= (hi - lo) / max(n - k, 1) + 1e-12
                ball |= {z for y in ball for z in _union_neighbours(y)}
            for beta in (0.3, 1.2):
                s = sens.mean_smooth_sensitivity(n, beta, lo, hi, union)
                assert all(s <= math.exp(beta) * sens.mean_smooth_sensitivity(len(y), beta, lo, hi, union) * (1 + 1e-12)
                           for y in nbrs)
            for b in (0.3, 1.0, 2.5):
                d = sens.mean_distance(n, b, lo, hi, union)
                assert d == min([k for k in range(n + 2) if (hi - lo) / max(n - k, 1) > b], default=sens.MAX_DISTANCE)


def test_calibration_of_steps() -> None:
    from dpsql._accounting.budget import Cost
    from dpsql._sql.options import Options
    from dpsql.mechanisms.base import Context

    def ctx(rel: str, m: int, grouped: bool) -> Context:
        return Context(neighbouring=rel, max_rows=m, grouped=grouped, filtered=False, options=Options())

    cost = Cost(epsilon=1.0, delta=1e-6)
    c = datadep.calibrate(ctx("add_remove", 1, True), cost)
    assert (c.relation, c.rows, c.steps, c.epsilon, c.delta) == ("add_remove", 1, 1, 1.0, 1e-6)
    c = datadep.calibrate(ctx("replace", 1, False), cost)  # a value changes, appears or disappears
    assert (c.relation, c.rows, c.steps, c.epsilon, c.delta) == ("union", 1, 1, 1.0, 1e-6)
    c = datadep.calibrate(ctx("replace", 1, True), cost)  # a row moves between groups: 2 steps
    assert (c.relation, c.rows, c.steps, c.epsilon) == ("union", 1, 2, 0.5)
    assert c.delta == pytest.approx(1e-6 / (1 + math.exp(0.5)))
    # a unit of 3 rows without GROUP BY: one unit step at the full budget, formulas for 3 rows
    for rel, name in (("add_remove", "add_remove"), ("replace", "union")):
        c = datadep.calibrate(ctx(rel, 3, False), cost)
        assert (c.relation, c.rows, c.steps, c.epsilon, c.delta) == (name, 3, 1, 1.0, 1e-6)
    c = datadep.calibrate(ctx("add_remove", 3, True), cost)  # with GROUP BY: group privacy, 3 row steps
    assert (c.rows, c.steps) == (1, 3) and c.epsilon * 3 == pytest.approx(1.0)
    # chaining 3 steps of (ε/3, δ_r) gives back (ε, δ)
    assert sum(math.exp(i * c.epsilon) for i in range(3)) * c.delta == pytest.approx(1e-6)
    c = datadep.calibrate(ctx("replace", 2, True), cost)
    assert (c.relation, c.rows, c.steps) == ("union", 1, 4)


# ----------------------------------------------------------------------------- constants
def test_ptr_threshold() -> None:
    for eps1, delta in ((0.5, 1e-6), (0.05, 1e-9), (2.0, 0.01), (0.5, 0.5)):
        scale = 1 / eps1
        j = ptr.test_threshold(scale, delta)
        q = math.exp(-1 / scale)
        tail = lambda k: math.exp(-k / scale) / (1 + q)  # P[Z >= k], k >= 1  # noqa: E731
        assert tail(j) <= delta and (j == 1 or tail(j - 1) > delta)
        assert j >= ptr.continuous_threshold(eps1, delta) - 1e-9  # at least SPEC's T
        # seed 000's threshold ln(2/δ)/(2ε) is passed at D = 0 with probability ½·sqrt(δ/2)
        seed = math.log(2 / delta) / (2 * eps1)
        assert 0.5 * math.exp(-eps1 * seed) == pytest.approx(0.5 * math.sqrt(delta / 2))
        if delta < 0.01:
            assert 0.5 * math.exp(-eps1 * seed) > 100 * delta


def test_laplace_admissibility_constants() -> None:
    """f + (S/α)·Lap(1) with α = ε/2, S β-smooth, β = ε/(2 ln(2/δ)): worst-case δ(ε) <= δ."""
    h = lambda z: 0.5 * math.exp(-abs(z))  # noqa: E731
    for eps, delta in ((1.0, 1e-3), (0.5, 1e-6)):
        alpha, beta = eps / 2, eps / (2 * math.log(2 / delta))
        worst = 0.0
        for lam in (-beta, 0.0, beta):
            for shift in (-alpha, alpha):
                def excess(t: float) -> float:
                    return max(0.0, h(t) - math.exp(eps) * math.exp(lam) * h(math.exp(lam) * (t + shift)))
                lim = 80 * math.log(2 / delta)
                edges = sorted({-lim, -shift, 0.0, lim})
                worst = max(worst, sum(integrate.quad(excess, a, c, limit=200)[0] for a, c in zip(edges, edges[1:])))
        assert worst <= delta


@pytest.mark.parametrize("opts", ["noise = 'cauchy', epsilon = 1", "noise = 'cauchy', epsilon = 1, delta = 1e-6",
                                  "epsilon = 1"])
def test_pure_epsilon_cauchy_noise_is_refused_with_the_fix(seeded_demo, opts: str) -> None:
    """The Cauchy-like sampler is not exact on the release grid: refused, before any charge, with
    a message that names the fix (Laplace noise, δ > 0)."""
    con = seeded_demo(0)
    with pytest.raises(OptionError, match="delta > 0|'delta' > 0") as refused:
        con.sql(f"SELECT DP_MEDIAN(age) FROM adult WITH (mechanism = 'smooth', {opts})")
    message = str(refused.value)
    assert "\n" not in message and "cauchy" in message.lower()
    assert con.budget.spent.epsilon == 0


# ----------------------------------------------------------------------------- accuracy on Adult
def test_adult_smooth_median_error(adult) -> None:
    query = "SELECT DP_MEDIAN(age) FROM adult WITH (mechanism = 'smooth', epsilon = 1, delta = 1e-6)"
    values = _repeat(adult, query, 200)
    assert statistics.median(abs(v - 37) for v in values) <= 1
    for _ in range(3):
        res = adult.sql(query)
        assert abs(res.fetchall()[0][0] - 37) < 5
        entry = res.report[0]
        assert entry.mechanism == "smooth" and entry.scale is None and entry.sensitivity is None
        assert entry.ci_half_width is None and "not shown" in entry.note


def test_adult_ptr_mean(adult) -> None:
    query = "SELECT DP_MEAN(age) FROM adult WITH (mechanism = 'ptr', bound = {b}, epsilon = 1, delta = 1e-6)"
    values = _repeat(adult, query.format(b=0.005), 200)
    assert sum(v is not None and abs(v - EXACT_MEAN_AGE) <= 0.05 for v in values) >= 190
    values = _repeat(adult, query.format(b=1e-9), 200)
    assert sum(v is None for v in values) >= 198
    before = adult.budget.spent.epsilon
    res = adult.sql(query.format(b=1e-9))
    assert res.fetchall() == [(None,)]  # ⊥, and the budget is spent all the same
    assert "⊥" in res.report[0].note and adult.budget.spent.epsilon == pytest.approx(before + 1)
    res = adult.sql(query.format(b=0.005))
    assert abs(res.fetchall()[0][0] - EXACT_MEAN_AGE) < 0.2
    assert res.report[0].sensitivity == 0.005 and res.report[0].scale == pytest.approx(0.01)


def test_adult_smooth_mean_and_ptr_median(adult) -> None:
    values = _repeat(adult, "SELECT DP_MEAN(age) FROM adult WITH (mechanism = 'smooth', epsilon = 1, delta = 1e-6)", 200)
    assert statistics.median(abs(v - EXACT_MEAN_AGE) for v in values) < 0.02
    values = _repeat(adult, "SELECT DP_MEDIAN(age) FROM adult WITH (mechanism = 'ptr', bound = 1, epsilon = 1, delta = 1e-6)", 200)
    assert all(v is not None for v in values) and statistics.median(abs(v - 37) for v in values) < 2
    res = adult.sql("SELECT sex, DP_MEDIAN(age) AS m FROM adult GROUP BY sex ORDER BY sex "
                    "WITH (mechanism = 'smooth', epsilon = 1, delta = 1e-6)")
    (f, mf), (m, mm) = res.fetchall()
    assert (f, m) == ("Female", "Male") and abs(mf - 35) < 2 and abs(mm - 38) < 2


# ----------------------------------------------------------------------------- refusals, EXPLAIN
@pytest.mark.parametrize("opts, key", [
    ("mechanism = 'ptr', epsilon = 1, delta = 1e-6", "bound"),
    ("mechanism = 'ptr', bound = 1, epsilon = 1", "delta"),
    ("mechanism = 'ptr', bound = 1, epsilon = 1, delta = 0", "delta"),
    ("mechanism = 'smooth', noise = 'laplace', epsilon = 1", "delta"),
    ("mechanism = 'ptr', bound = 1, epsilon = 1, delta = 1e-6, noise = 'cauchy'", "noise"),
])
def test_refusals_name_the_key_and_spend_nothing(seeded_demo, opts: str, key: str) -> None:
    con = seeded_demo(0)
    with pytest.raises(OptionError, match=f"'{key}'"):
        con.sql(f"SELECT DP_MEDIAN(age) FROM adult WITH ({opts})")
    assert con.budget.spent.epsilon == 0


def test_unsupported_statistic_is_refused(seeded_demo) -> None:
    with pytest.raises(dpsql.Error, match="mechanism 'smooth' cannot answer"):
        seeded_demo(0).sql("SELECT DP_SUM(age) FROM adult WITH (mechanism = 'smooth', epsilon = 1, delta = 1e-6)")


def test_explain_shows_split_and_constants(seeded_demo) -> None:
    con = seeded_demo(0)
    text = con.explain("SELECT DP_MEDIAN(age) FROM adult WITH (mechanism = 'ptr', bound = 1, epsilon = 1, delta = 1e-6)")
    assert "ε₁ = ε₂ = 0.5" in text and "≥ 27" in text and "T = ln(1/(2δ))/ε₁ = 26.2447" in text
    text = con.explain("SELECT DP_MEAN(age) FROM adult WITH (mechanism = 'smooth', epsilon = 1, delta = 1e-6)")
    assert "exact integers in [0, 100]" in text and "S from n alone" in text
    text = con.explain("SELECT DP_MEDIAN(age) FROM adult WITH (mechanism = 'smooth', epsilon = 1, delta = 1e-6)")
    assert "Laplace(S/α = 2S/ε)" in text and "β = 0.0344622" in text
    assert con.budget.spent.epsilon == 0


def test_group_privacy_and_replace_grouped_split(seeded_demo) -> None:
    pol = _policy(m=2)
    pol["tables"]["t"]["privacy_unit"] = "id"
    con = dpsql.connect(":memory:", pol, setup=_table([(1, 5.0), (1, 6.0), (2, 7.0)], "id INTEGER, x DOUBLE"),
                        noise=SeededNoise(0))
    plan, *_ = _exact(con, "SELECT DP_MEDIAN(x) FROM t WITH (mechanism = 'ptr', bound = 1, epsilon = 1, delta = 1e-6)")
    prep = plan.prepared[0]  # one unit of up to 2 rows: the whole budget, D in units
    assert (prep.cal.rows, prep.cal.steps) == (2, 1) and prep.eps_test == pytest.approx(0.5) and prep.cost.epsilon == 1
    plan, *_ = _exact(con, "SELECT id, DP_MEDIAN(x) FROM t GROUP BY id "
                      "WITH (mechanism = 'ptr', bound = 1, epsilon = 1, delta = 1e-6)")
    prep = plan.prepared[0]  # with GROUP BY a unit's rows can reach 2 groups: 2 row steps
    assert (prep.cal.rows, prep.cal.steps) == (1, 2) and prep.eps_test == pytest.approx(prep.cost.epsilon / 4)
    assert con.sql("SELECT DP_MEAN(x) FROM t WITH (mechanism = 'smooth', epsilon = 1, delta = 1e-6)").fetchall()
