"""The exponential-mechanism quantiles: exact privacy on small data, the SQL window, accuracy."""

from __future__ import annotations

import itertools
import math
import random
import time

import duckdb
import pyarrow as pa
import pytest

import dpsql
from dpsql._privacy.noise import SeededNoise
from dpsql._release.release import release
from dpsql._sql.options import Options
from dpsql.admin import bruteforce
from dpsql.interfaces.demo import load_adult
from dpsql.mechanisms import exponential as em
from dpsql.mechanisms.base import Context
from tests.conftest import demo_policy

EXACT_MEDIAN_AGE = 37


def ctx(relation: str = "add_remove", grouped: bool = False, m: int = 1) -> Context:
    return Context(neighbouring=relation, max_rows=m, grouped=grouped, filtered=False, options=Options())


# -- exact output distribution on tiny data ---------------------------------------------------

LOWER, UPPER = 0.0, 4.0
UNIVERSE = (0.0, 1.0, 2.0, 3.0)
PROBES = (0.5, 1.5, 2.5, 3.5)  # one grid point inside each elementary interval [j, j+1)


def log_probs(data: tuple[float, ...], p: float, eps_prime: float, b: int) -> list[float]:
    """log P[output = y] for one grid point y per elementary interval, exactly as released."""
    parts = em.regions(em.points_of(data), len(data), p, eps_prime, LOWER, UPPER, b)
    weights = em.log_weights(parts, em.grid(LOWER, UPPER))
    top = max(weights)
    log_z = top + math.log(math.fsum(math.exp(w - top) for w in weights if w > -math.inf))
    return [next(s for lo, hi, s in parts if lo <= y < hi) - log_z for y in PROBES]


def datasets(max_n: int = 4) -> list[tuple[float, ...]]:
    return [d for n in range(max_n + 1) for d in itertools.combinations_with_replacement(UNIVERSE, n)]


def neighbours(d: tuple[float, ...], relation: str, max_n: int = 4) -> list[tuple[float, ...]]:
    if relation == "add_remove":
        return [tuple(sorted(d + (u,))) for u in UNIVERSE] if len(d) < max_n else []
    return [tuple(sorted(d[:i] + d[i + 1:] + (u,))) for i in range(len(d)) for u in UNIVERSE]


def worst_loss(p: float, eps_prime: float, relation: str, b: int) -> float:
    """max over neighbours (both directions) and outputs of |log P_x(y) − log P_x'(y)|."""
    cache: dict[tuple[float, ...], list[float]] = {}

    def lp(d: tuple[float, ...]) -> list[float]:
        if d not in cache:
            cache[d] = log_probs(d, p, eps_prime, b)
        return cache[d]

    return max(
        (max(abs(a - c) for a, c in zip(lp(d), lp(e))) for d in datasets() for e in neighbours(d, relation)),
        default=0.0,
    )


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@pytest.mark.parametrize("p", [0.0, 0.25, 0.5, 0.9, 1.0])
@pytest.mark.parametrize("b", [1, 3, None])
def test_brute_force_privacy(relation: str, p: float, b: int | None) -> None:
    """Every grid point's probability moves by at most e^ε between neighbours (clip B included)."""
    eps = 1.0
    sens = em.utility_sensitivity(p, ctx(relation))
    eps_prime = em.exponent(p, sens, eps)
    loss = worst_loss(p, eps_prime, relation, b if b is not None else em.window(eps_prime))
    assert loss <= eps * (1 + 1e-9)


def test_sensitivity_constants_and_factor() -> None:
    """Median under add_remove: Δu = ½ and weights exp(−ε|i − n/2|); replace: Δu = 1."""
    assert em.utility_sensitivity(0.5, ctx("add_remove")) == 0.5
    assert em.exponent(0.5, 0.5, 1.0) == 1.0
    assert em.utility_sensitivity(0.5, ctx("replace")) == 1.0
    assert em.exponent(0.5, 1.0, 1.0) == 0.5
    assert em.utility_sensitivity(0.9, ctx("add_remove", m=3)) == pytest.approx(2.7)
    assert em.utility_sensitivity(0.25, ctx("replace", grouped=True)) == 1.5
    assert em.exponent(0.0, 1.0, 1.0) == 1.0  # monotone utility: no factor 2
    # The constants are not loose: the median's worst loss comes close to ε.
    assert worst_loss(0.5, 1.0, "add_remove", 64) > 0.9


@pytest.mark.parametrize("relation,p", [("add_remove", 0.5), ("replace", 0.5), ("add_remove", 0.25)])
def test_negative_control_is_caught(relation: str, p: float) -> None:
    """Twice the exponent (forgetting the 2 in ε/(2Δu)) violates ε-DP on the same data."""
    eps_prime = em.exponent(p, em.utility_sensitivity(p, ctx(relation)), 1.0)
    assert worst_loss(p, 2 * eps_prime, relation, 64) > 1.2


def test_brute_force_grouped_replace() -> None:
    """A row moving from group A to group B: the two groups' losses add up to at most ε."""
    eps, p = 1.0, 0.5
    eps_prime = em.exponent(p, em.utility_sensitivity(p, ctx("replace", grouped=True)), eps)
    worst = 0.0
    small = [d for d in datasets(3)]
    for a in small:
        for i in range(len(a)):
            removed = a[:i] + a[i + 1:]
            loss_a = max(abs(x - y) for x, y in zip(log_probs(a, p, eps_prime, 64), log_probs(removed, p, eps_prime, 64)))
            for b in small:
                for u in UNIVERSE:
                    added = tuple(sorted(b + (u,)))
                    loss_b = max(abs(x - y) for x, y in zip(log_probs(b, p, eps_prime, 64), log_probs(added, p, eps_prime, 64)))
                    worst = max(worst, loss_a + loss_b)
    assert worst <= eps * (1 + 1e-9)


def worst_unit_loss(p: float, eps_prime: float, relation: str, m: int, units: int = 2) -> float:
    """The worst loss over datasets of up to ``units`` units of up to m rows and their unit
    neighbours (dpsql.admin.bruteforce): add or remove a unit, or (union) replace its rows by
    0 to m rows, as a value that becomes NULL or leaves the filter does under replace."""
    b = em.window(eps_prime)
    cache: dict[tuple[float, ...], list[float]] = {}

    def lp(rows: tuple[float, ...]) -> list[float]:
        if rows not in cache:
            cache[rows] = log_probs(rows, p, eps_prime, b)
        return cache[rows]

    worst = 0.0
    for count in range(units + 1):
        for x in bruteforce.unit_datasets(UNIVERSE, count, m, relation):
            here = lp(bruteforce.rows_of(x))
            for y in bruteforce.unit_neighbours(x, UNIVERSE, relation, m):
                worst = max(worst, max(abs(a - c) for a, c in zip(here, lp(bruteforce.rows_of(y)))))
    return worst


@pytest.mark.parametrize("relation", ["add_remove", "union"])
@pytest.mark.parametrize("p", [0.0, 0.25, 0.5, 1.0])
@pytest.mark.parametrize("m", [2, 3])
def test_brute_force_privacy_for_units(relation: str, p: float, m: int) -> None:
    """A unit of up to m rows moves the rank by up to m: Δu = m·max(p, 1 − p) (add_remove) or m
    (replace) keeps every probability within e^ε, also for p ∈ {0, 1} with ε' = ε/Δu, where under
    replace one unit's rows can move in opposite directions (the utilities then move both ways,
    but their differences still span at most Δu)."""
    policy_relation = "replace" if relation == "union" else "add_remove"
    eps_prime = em.exponent(p, em.utility_sensitivity(p, ctx(policy_relation, m=m)), 1.0)
    loss = worst_unit_loss(p, eps_prime, relation, m, units=2 if m == 2 else 1)
    assert loss <= 1.0 * (1 + 1e-9)
    if p == 0.5 and relation == "add_remove":
        assert loss > 0.8  # not loose: a unit at one end moves the median's weights by almost ε


@pytest.mark.parametrize("relation", ["add_remove", "union"])
def test_unit_negative_control_is_caught(relation: str) -> None:
    """Calibrated for units of one row while a unit holds two: the loss exceeds ε."""
    policy_relation = "replace" if relation == "union" else "add_remove"
    eps_prime = em.exponent(0.5, em.utility_sensitivity(0.5, ctx(policy_relation, m=1)), 1.0)
    assert worst_unit_loss(0.5, eps_prime, relation, 2) > 1.2


def test_sampler_matches_exact_probabilities() -> None:
    """Draws through choice_weighted and uniform land in each region with its exact probability."""
    data = (1.0, 1.0, 2.0, 3.0, 3.5)
    parts = em.regions(em.points_of(data), len(data), 0.5, 0.7, LOWER, UPPER, 64)
    weights = em.log_weights(parts, em.grid(LOWER, UPPER))
    top = max(weights)
    probs = [math.exp(w - top) for w in weights]
    probs = [q / sum(probs) for q in probs]
    noise, trials = SeededNoise(7), 20000
    counts = [0] * len(parts)
    for _ in range(trials):
        y = em.draw(em.points_of(data), len(data), 0.5, 0.7, LOWER, UPPER, noise)
        counts[next(i for i, (lo, hi, _) in enumerate(parts) if lo <= y < hi)] += 1
    for c, q in zip(counts, probs):
        assert abs(c / trials - q) <= 5 * math.sqrt(q * (1 - q) / trials) + 1e-9


# -- the SQL window ----------------------------------------------------------------------------

POLICY = {
    "neighbouring": "add_remove",
    "budget": {"epsilon": 1e9},
    "tables": {"d": {"privacy_unit": "row", "max_rows_per_unit": 1, "columns": {
        "x": {"lower": 0, "upper": 100}, "g": {"keys": ["a", "b", "c", "e", "n", "z"]}}}},
}


def _mixed(con: duckdb.DuckDBPyConnection) -> None:
    """Groups with continuous values, heavy ties, a tight cluster, one value, only NULLs."""
    rng = random.Random(5)
    rows = []
    for _ in range(20000):
        g = rng.choice("abc")
        x = {"a": rng.gauss(50, 30), "b": rng.choice([10.0, 20.0, 20.0, 30.0]), "c": 42 + rng.random() * 1e-3}[g]
        rows.append((g, None if rng.random() < 0.05 else x))
    rows += [("e", 5.0)] * 3 + [("n", None)]
    table = pa.table({"g": [r[0] for r in rows], "x": pa.array([r[1] for r in rows], pa.float64())})
    con.from_arrow(table).create("d")


@pytest.mark.parametrize("grouped", [True, False])
def test_sql_window_equals_full_sort(grouped: bool) -> None:
    """The order statistics DuckDB returns give exactly the regions of a full in-memory sort."""
    con = dpsql.connect(":memory:", POLICY, setup=_mixed, noise=SeededNoise(1))
    raw = con.engine.connection
    values: dict[str | None, list[float]] = {}
    for g, x in raw.execute("SELECT g, x FROM d WHERE x IS NOT NULL").fetchall():
        values.setdefault(g if grouped else None, []).append(min(max(x, 0.0), 100.0))
    query = ("SELECT g, DP_QUANTILE(x, {p}) FROM d GROUP BY g WITH (epsilon={e})" if grouped
             else "SELECT DP_QUANTILE(x, {p}) FROM d WITH (epsilon={e})")
    for p, e in itertools.product([0.0, 0.1, 0.5, 0.77, 1.0], [0.02, 1.0, 50.0]):
        prepared = con.prepare(query.format(p=p, e=e))
        plan, rw = prepared.plan, prepared.rewritten
        prep = plan.prepared[0]
        cur = raw.execute(rw.sql)
        names = [d[0] for d in cur.description]
        for row in cur.fetchall():
            vals = values.get(row[0] if grouped else None, [])
            n = int(row[names.index("a0_n")] or 0)
            assert n == len(vals)
            points = prep._points([row[names.index(prep.column)]])[0]
            got = em.regions(points, n, p, prep.eps_prime, 0.0, 100.0, prep.b)
            want = em.regions(em.points_of(vals), n, p, prep.eps_prime, 0.0, 100.0, prep.b)
            assert got == want
            if vals:  # only a window of ranks comes back
                pn = em.Fraction(p) * n
                d = em.nearest(em.points_of(vals), n, pn, 0.0, 100.0)
                assert len(points) <= 2 * (d + prep.b + em.SLACK) + 3


def _one_window(hist: list[dict] | None, p: float, upper: float, reach: int) -> list[em.Point]:
    """The window of ranks of one value histogram, group by group in plain Python: the steps of
    the SQL window form (cumulative counts, D bounded from the values below U, the window, D from
    the window's values, the window again), the reference for :func:`em.windows`."""
    hist = hist or []
    cums, total = [], 0
    for h in hist:
        total += h["c"]
        cums.append(total)
    n, pn = total, p * float(total)
    below = [abs(float(r) - pn) for h, r in zip(hist, cums) if float(h["v"]) < upper]
    d = min(below) if below else pn

    def inside(r: int, c: int, dist: float) -> bool:
        return float(r) >= pn - dist - reach and float(r - c) <= pn + dist + reach

    need = [(h, r) for h, r in zip(hist, cums) if inside(r, h["c"], d)]
    near = [abs(float(r) - pn) for h, r in need if float(h["v"]) < upper or r < n]
    dist = min(d, min(near)) if near else d
    return [(float(h["v"]), h["c"], r) for h, r in need if inside(r, h["c"], dist)]


@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 0.77, 1.0])
def test_windows_from_histograms_equal_the_group_by_group_steps(p: float) -> None:
    """:func:`em.windows` (every group at once, in numpy) finds the window group by group Python
    finds, on histograms with empty and NULL groups, values at U and groups of one value; and the
    window gives the regions of a full sort of the group's values."""
    rng = random.Random(int(p * 100))
    upper = 40.0
    for reach in (2, 9, 60):
        hists: list[list[dict] | None] = [None, []]
        for _ in range(60):
            values = sorted(rng.sample(range(0, 41), rng.choice([1, 2, 5, 20, 41])))
            hists.append([{"v": v, "c": rng.choice([1, 1, 2, 7, 300])} for v in values])
        rng.shuffle(hists)
        got = em.windows(em.Lists.of(hists, em.HISTOGRAM_FIELDS), p, upper, reach)
        assert got == [_one_window(h, p, upper, reach) for h in hists]
        eps = 1.0
        b = em.window(eps)
        for h, points in zip(hists, em.windows(em.Lists.of(hists, em.HISTOGRAM_FIELDS), p, upper, b + em.SLACK)):
            values = [float(x["v"]) for x in h or [] for _ in range(x["c"])]
            n = len(values)
            assert em.regions(points, n, p, eps, 0.0, upper, b) == \
                em.regions(em.points_of(values), n, p, eps, 0.0, upper, b)


# -- accuracy on Adult -------------------------------------------------------------------------


def _adult() -> duckdb.DuckDBPyConnection:
    raw = duckdb.connect()
    load_adult(raw)
    return raw


def releases(con: dpsql.Connection, query: str, count: int, seed: int) -> list[float]:
    """``count`` releases of a one-row query from one execution of its SQL (no ledger charge)."""
    prepared = con.prepare(query)
    plan, rw = prepared.plan, prepared.rewritten
    cur = con.engine.connection.execute(rw.sql)
    names, rows = [d[0] for d in cur.description], cur.fetchall()
    noise = SeededNoise(seed)
    return [release(plan, rw, names, rows, noise).rows[0][-1] for _ in range(count)]


def test_median_age_within_a_year(seeded_demo) -> None:
    con = seeded_demo(11)
    values = releases(con, "SELECT DP_MEDIAN(age) FROM adult WITH (epsilon = 1)", 200, seed=11)
    assert sum(abs(v - EXACT_MEDIAN_AGE) <= 1 for v in values) >= 180
    assert all(0 <= v < 100 for v in values)


def test_quantile_90_near_the_truth(seeded_demo) -> None:
    exact = _adult().execute("SELECT quantile_disc(age, 0.9) FROM adult").fetchone()[0]
    con = seeded_demo(12)
    values = releases(con, "SELECT DP_QUANTILE(age, 0.9) FROM adult WITH (epsilon = 1)", 200, seed=12)
    assert sum(abs(v - exact) <= 1 for v in values) >= 180


@pytest.mark.parametrize("grouped", [False, True])
def test_whole_number_quantiles_are_duckdbs_at_large_epsilon(seeded_demo, grouped: bool) -> None:
    """On whole numbers with ties, the best candidate is the value whose ranks hold p·n: DuckDB's
    quantile_disc, and its quantile_cont where that lands on a value (58 for p = 0.9 on age, not
    the 57 whose ranks end just short of p·n)."""
    ps = (0.1, 0.25, 0.5, 0.75, 0.9, 0.99)
    raw = _adult()
    where = " WHERE sex = 'Male'" if grouped else ""
    want = [raw.execute(f"SELECT quantile_disc(age, {p}), quantile_cont(age, {p}) FROM adult{where}").fetchone()
            for p in ps]
    assert want[4][0] == want[4][1] == 58  # p = 0.9: both DuckDB functions
    con = seeded_demo(14)
    calls = ", ".join(f"DP_QUANTILE(age, {p})" for p in ps)
    group = "sex, " if grouped else ""
    query = f"SELECT {group}{calls} FROM adult {'GROUP BY sex ' if grouped else ''}WITH (epsilon = 1e6)"
    rows = con.sql(query).fetchall()
    got = list(rows[[r[0] for r in rows].index("Male")][1:] if grouped else rows[0])
    assert got == [disc for disc, _ in want]


def test_end_to_end_report_explain_and_groups(seeded_demo) -> None:
    con = seeded_demo(13)
    text = con.explain("SELECT DP_MEDIAN(age) FROM adult WITH (epsilon = 1)")
    assert "mechanism exponential" in text and "Δu=0.5" in text
    res = con.sql("SELECT sex, DP_MEDIAN(age) AS m, DP_MAX(hours_per_week) FROM adult GROUP BY sex WITH (epsilon = 2)")
    rows = dict((r[0], r[1]) for r in res.fetchall())
    assert set(rows) == {"Female", "Male"} and all(20 <= v <= 60 for v in rows.values())
    entry = res.report[0]
    assert entry.mechanism == "exponential" and entry.delta == 0 and entry.epsilon == pytest.approx(1.0)
    assert res.cost.delta == 0  # pure ε-DP
    one = con.sql("SELECT DP_MEDIAN(age) FROM adult WHERE age > 200 WITH (epsilon = 1)").fetchone()[0]
    assert 0 <= one < 100  # no rows: uniform on [L, U)


def test_replace_policy_halves_the_exponent() -> None:
    pol = demo_policy(epsilon=1e9)
    pol["neighbouring"] = "replace"
    con = dpsql.connect(":memory:", pol, setup=load_adult, noise=SeededNoise(0))
    prepared = con.prepare("SELECT DP_MEDIAN(age) FROM adult WITH (epsilon = 1)")
    plan = prepared.plan
    assert plan.prepared[0].eps_prime == 0.5


@pytest.mark.thorough
def test_ten_million_ages_as_fast_as_duckdb_median() -> None:
    """10M ages: the DP median (whole query, release included) within 1.5× DuckDB's median()."""
    raw = duckdb.connect()
    raw.execute("CREATE TABLE t AS SELECT (random() * 100)::INT AS age FROM range(10000000)")
    pol = {"budget": {"epsilon": 1e9}, "tables": {"t": {"columns": {"age": {"lower": 0, "upper": 100}}}}}
    con = dpsql.connect(raw, pol, noise=SeededNoise(0))
    plain, private = [], []
    for _ in range(7):
        start = time.perf_counter()
        raw.execute("SELECT median(age) FROM t").fetchall()
        plain.append(time.perf_counter() - start)
        start = time.perf_counter()
        con.sql("SELECT DP_MEDIAN(age) FROM t WITH (epsilon = 1)").fetchall()
        private.append(time.perf_counter() - start)
    assert min(private) <= 1.5 * min(plain)
