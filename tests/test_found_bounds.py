"""Bounds found privately (docs/bounds.md): the bins, the threshold, the choice, the opt-in and its
refusals, EXPLAIN, one charge for both parts, and the histogram's sensitivity by brute force."""

from __future__ import annotations

import copy
import math

import duckdb
import numpy as np
import pytest

import dpsql
from dpsql._accounting.budget import Cost
from dpsql._privacy import approx_bounds as ab
from dpsql._privacy.noise import NoiseSource, SeededNoise
from dpsql._release import found
from dpsql.admin import bruteforce
from dpsql.errors import BudgetError, Error, OptionError, ParseError, PolicyError, PrivacyError

POLICY = {"budget": {"epsilon": 1000.0, "delta": 1e-5},
          "tables": {"t": {"columns": {"g": {"keys": ["a", "b"]}, "y": {"lower": 0, "upper": 10}}}}}


def _setup(con: duckdb.DuckDBPyConnection) -> None:
    # x: whole numbers 3..90, 2,000 rows; y: declared bounds; g: two groups
    con.execute("CREATE TABLE t AS SELECT (3 + range % 88)::DOUBLE AS x, (range % 11)::DOUBLE AS y, "
                "CASE WHEN range % 2 = 0 THEN 'a' ELSE 'b' END AS g FROM range(2000)")


def _connect(policy: dict | None = None, seed: int = 0, budget: float | None = None) -> dpsql.Connection:
    pol = copy.deepcopy(policy or POLICY)
    if budget is not None:
        pol["budget"] = {"epsilon": budget}
    return dpsql.connect(":memory:", pol, setup=_setup, noise=SeededNoise(seed))


class Exact(NoiseSource):
    """No noise at all: the choice of bins, alone (unit tests of the post-processing only)."""

    def laplace_int(self, value: int, scale: float) -> int:
        return int(value)


# -- bins and edges -------------------------------------------------------------------------------


def test_bins_cover_the_doubles_without_overlap() -> None:
    assert ab.NBINS == 189 and ab.SIDE == 94
    for j in range(-ab.SIDE, ab.SIDE + 1):
        lo, hi = ab.edges(j)
        assert lo < hi
        inside = [lo, hi] if j == 0 else ([lo, math.nextafter(hi, -math.inf)] if j > 0 else
                                           [math.nextafter(lo, math.inf), hi])
        for v in inside:
            assert ab.bin_of(v) == j or (j == 0 and abs(v) == 2.0 ** ab.K_MIN), (j, v)
        if 0 < j < ab.SIDE:  # the next bin starts where this one ends
            assert ab.bin_of(hi) == j + 1 and ab.bin_of(-hi) == -(j + 1)
    assert ab.bin_of(0.0) == ab.bin_of(-0.0) == 0
    assert ab.bin_of(1e308) == ab.SIDE and ab.bin_of(-1e308) == -ab.SIDE
    assert ab.bin_of(math.nan) is None and ab.bin_of(math.inf) is None and ab.bin_of(-math.inf) is None
    assert ab.WIDEST == (ab.edges(-ab.SIDE)[0], ab.edges(ab.SIDE)[1]) == (-(2.0 ** 64), 2.0 ** 64)


def _values() -> list[float]:
    """Values on and next to every power of two of the bins' range, and beyond it."""
    out = [0.0, -0.0, 1e-300, 5e-324, 1e308, -1e308, 0.3, 3.0, 90.0, -7.5]
    for k in range(ab.K_MIN - 2, ab.K_MAX + 3):
        p = 2.0 ** k
        out += [p, math.nextafter(p, 0.0), math.nextafter(p, math.inf), 1.5 * p]
    return out + [-v for v in out]


def test_the_statement_bins_every_value_as_the_python_rule_does() -> None:
    con = _connect()
    prepared = con.prepare("SELECT DP_SUM(x, bounds => 'auto') FROM t WITH (epsilon = 1)")
    values = _values()
    raw = duckdb.connect()
    raw.execute("CREATE TABLE t (x DOUBLE, y DOUBLE, g VARCHAR)")
    raw.executemany("INSERT INTO t VALUES (?, 0, 'a')", [[v] for v in values] + [[None], [math.nan], [math.inf]])
    cur = raw.execute(prepared.search_sql)
    got = found.counts([d[0] for d in cur.description], cur.fetchall())[0]
    expected: dict[int, int] = {}
    for v in values:
        expected[ab.bin_of(v)] = expected.get(ab.bin_of(v), 0) + 1
    assert got == expected  # NULL, NaN and ±inf are in no bin


# -- threshold and choice ---------------------------------------------------------------------


@pytest.mark.parametrize("scale", [0.05, 0.4, 1.0, 4.0, 13.3, 400.0])
def test_threshold_is_the_least_integer_whose_tail_is_small_enough(scale: float) -> None:
    tau = ab.threshold(scale)
    q = math.exp(-1.0 / scale)
    bar = ab.FAILURE / ab.NBINS
    assert q ** tau / (1 + q) <= bar
    assert tau == 1 or q ** (tau - 1) / (1 + q) > bar


def test_empty_bins_pass_rarely_with_the_sampled_noise() -> None:
    """At a failure probability raised to 0.5 the threshold is low enough to measure: the
    fraction of searches where some empty bin passes must be at most 0.5 (and not far below)."""
    search = ab.BoundsSearch.build(0, "x", 1, "add_remove", Cost(epsilon=1.0))
    tau = ab.threshold(search.scale, failure=0.5)
    gen = SeededNoise(3)
    hits = 0
    for _ in range(400):
        noisy = gen.add_many("laplace_int", [0] * ab.NBINS, search.scale)
        hits += max(noisy) >= tau
    assert 0.25 <= hits / 400 <= 0.5 + 0.08


def test_choice_is_the_outer_edges_of_the_outermost_passing_bins() -> None:
    search = ab.BoundsSearch.build(0, "x", 1, "add_remove", Cost(epsilon=1.0))
    tau = search.threshold
    counts = {ab.bin_of(3.0): tau, ab.bin_of(40.0): 10 * tau, ab.bin_of(90.0): tau, ab.bin_of(1e6): tau - 1}
    got = search.choose(counts, Exact())
    assert (got.lower, got.upper, got.passed) == (2.0, 128.0, True)
    neg = search.choose({ab.bin_of(-5.0): tau, 0: tau, ab.bin_of(0.75): tau}, Exact())
    assert (neg.lower, neg.upper) == (-8.0, 1.0)
    none = search.choose({ab.bin_of(-5.0): tau - 1, ab.bin_of(100.0): tau - 2}, Exact())
    assert (none.lower, none.upper, none.passed) == (-8.0, -4.0, False)  # planned with, never released
    assert none.text() == "none (no bin reached the threshold)"


def test_too_few_rows_release_null_with_the_reason_and_charge_the_query() -> None:
    con = _connect(seed=1)
    result = con.sql("SELECT g, DP_MEAN(x, bounds => 'auto') * 2 AS m, DP_COUNT(*) AS n FROM t WHERE x < 6 "
                     "GROUP BY g WITH (epsilon = 1)")
    rows = result.fetchall()
    assert [r[1] for r in rows] == [None, None] and all(isinstance(r[2], int) for r in rows)
    count, mean = result.report  # the report is in plan order: DP_COUNT(*) first
    assert mean.note == ("no bounds found privately with ε=0.125 of it: no bin of the noisy histogram reached "
                         "τ=148 (too few rows), so NULL is released; give bounds, or more ε")
    assert mean.epsilon == pytest.approx(0.5) and mean.ci_half_width is None
    assert con.budget.spent.epsilon == pytest.approx(1.0)


def test_data_in_3_to_90_gets_bounds_within_a_power_of_two() -> None:
    con = _connect(seed=5)
    result = con.sql("SELECT DP_MEAN(x, bounds => 'auto') AS m FROM t WITH (epsilon = 100)")
    note = result.report[0].note
    # within a factor 2 of the data's range [3, 90]
    assert note.startswith("bounds [2, 128] found privately with ε=25 of it"), note
    assert abs(result.fetchall()[0][0] - 46.5) < 0.5


def test_each_search_spends_a_quarter_of_its_aggregate_share() -> None:
    con = _connect()
    p = con.prepare("SELECT DP_MEAN(x, bounds => 'auto'), DP_SUM(y) FROM t WITH (epsilon = 2)").plan
    assert [s.cost.epsilon for s in p.searches] == [0.25]
    assert [prep.cost.epsilon for prep in p.prepared] == [0.75, 1.0]
    assert p.cost.epsilon == pytest.approx(2.0)
    z = con.prepare("SELECT DP_SUM(x, bounds => 'auto') FROM t WITH (rho = 0.5, delta = 1e-6)").plan
    assert z.searches[0].cost.rho == pytest.approx(0.125) and z.searches[0].epsilon == pytest.approx(0.5)
    assert z.cost.rho == pytest.approx(0.5) and z.cost.epsilon == 0


# -- opting in, and the refusals ---------------------------------------------------------------


def test_without_the_opt_in_the_refusal_says_how_and_nothing_is_charged() -> None:
    con = _connect()
    with pytest.raises(PrivacyError) as err:
        con.sql("SELECT DP_MEAN(x) FROM t WITH (epsilon = 1)")
    assert str(err.value) == (
        "DP_MEAN(x): no bounds for column x; give them in the call, e.g. DP_MEAN(x, 0, 100), or in the policy, "
        "or opt in to bounds found privately with DP_MEAN(x, bounds => 'auto') (spends 25% of its ε)")
    assert con.budget.spent.epsilon == 0 and not con.budget.history


@pytest.mark.parametrize(("query", "error", "message"), [
    ("SELECT DP_COUNT(*) FROM t WITH (epsilon = 1, bounds = 'auto')", OptionError, "option 'bounds' has nothing to find"),
    ("SELECT DP_SUM(y) FROM t WITH (epsilon = 1, bounds = 'auto')", OptionError, "option 'bounds' has nothing to find"),
    ("SELECT DP_SUM(x) FROM t WITH (epsilon = 1, bounds = (0, 1))", OptionError, "option 'bounds' must be 'auto'"),
    ("SELECT DP_SUM(x) FROM t WITH (epsilon = 1, bounds = 'guess')", OptionError, "option 'bounds' must be 'auto'"),
    ("SELECT DP_AGG(avg(x), bounds => 'auto') FROM t WITH (mechanism = 'saa', epsilon = 1)", PrivacyError,
     "DP_AGG's bounds are those of the aggregate's value"),
    ("SELECT DP_COUNT(x, bounds => 'auto') FROM t WITH (epsilon = 1)", ParseError, "DP_COUNT takes no bounds"),
    ("SELECT DP_SUM(x, 0, 1, bounds => 'auto') FROM t WITH (epsilon = 1)", ParseError, "bounds given twice"),
])
def test_misuse_is_refused_and_charges_nothing(query: str, error: type, message: str) -> None:
    con = _connect()
    with pytest.raises(error, match=message):
        con.sql(query)
    assert con.budget.spent.epsilon == 0


def test_the_query_option_finds_only_what_has_no_bounds() -> None:
    con = _connect()
    p = con.prepare("SELECT DP_SUM(x), DP_SUM(y) FROM t WITH (epsilon = 1, bounds = 'auto')").plan
    assert [s.label for s in p.searches] == ["DP_SUM(x)"]
    # in the call, it wins over the policy's bounds
    p = con.prepare("SELECT DP_SUM(y, bounds => 'auto') FROM t WITH (epsilon = 1)").plan
    assert [s.label for s in p.searches] == ["DP_SUM(y, bounds => 'auto')"]


def test_the_policy_default_opts_in_every_query_and_plain_aggregates() -> None:
    pol = copy.deepcopy(POLICY)
    pol["defaults"] = {"bounds": "auto", "epsilon": 1.0, "plain_aggregates": True}
    con = _connect(pol)
    result = con.sql("SELECT g, AVG(x) FROM t GROUP BY g")
    assert "found privately" in result.report[0].note
    assert con.budget.spent.epsilon == pytest.approx(1.0)
    pol["defaults"] = {"bounds": "yes"}
    with pytest.raises(PolicyError, match='defaults.bounds must be "auto"'):
        _connect(pol)


# -- EXPLAIN, the charge, the report -----------------------------------------------------------


def test_explain_shows_the_search_its_cost_and_statement_and_spends_nothing() -> None:
    con = _connect()
    text = con.explain("SELECT DP_MEAN(x, bounds => 'auto') FROM t WITH (epsilon = 1)")
    assert "DP_MEAN(x, bounds => 'auto') bounds: found privately, ε=0.25 (25% of its share)" in text
    assert "discrete Laplace(b=4)" in text and "τ=74" in text
    assert "mechanism laplace, spends ε=0.750; bounds: found privately first" in text
    assert "bounds SQL (runs first" in text and "GROUP BY\n  __bin" in text
    assert "rewritten SQL (written again with the bounds found" in text
    assert con.budget.spent.epsilon == 0


def test_the_whole_query_is_charged_once_and_the_report_names_the_bounds() -> None:
    con = _connect(seed=2)
    result = con.sql("SELECT g, DP_MEAN(x, bounds => 'auto') AS m, DP_SUM(y) AS s FROM t GROUP BY g "
                     "WITH (epsilon = 40)")
    history = con.budget.history
    assert len(history) == 1 and history[0].cost.epsilon == pytest.approx(40.0)
    assert result.cost.epsilon == pytest.approx(40.0)
    mean, total = result.report
    assert mean.epsilon == pytest.approx(20.0) and total.epsilon == pytest.approx(20.0)
    assert mean.note.startswith("bounds [2, 128] found privately with ε=5 of it")
    assert "found privately" not in total.note
    assert [row[0] for row in result.fetchall()] == ["a", "b"]


def test_a_refused_budget_reads_nothing_and_charges_nothing() -> None:
    con = _connect(budget=0.5)
    with pytest.raises(BudgetError):
        con.sql("SELECT DP_MEAN(x, bounds => 'auto') FROM t WITH (epsilon = 1)")
    assert con.budget.spent.epsilon == 0 and not con.budget.history


def test_the_single_statement_hooks_refuse_a_query_still_to_find_its_bounds() -> None:
    con = _connect()
    query = "SELECT DP_MEAN(x, bounds => 'auto') FROM t WITH (epsilon = 1)"
    with pytest.raises(Error, match="finds its bounds privately"):
        con.rewritten_sql(query, "spark")
    prepared = con.prepare(query)
    assert prepared.sql == prepared.search_sql  # what runs first
    # the release hook takes the histogram's rows and runs the query itself
    out = con.release(prepared, *con.engine.statistics(prepared.sql))
    assert "found privately" in out.report[0].note and len(con.budget.history) == 1


def test_every_mechanism_plans_with_whatever_bounds_the_search_returns() -> None:
    """The plan is checked with the widest bounds; every pair of bin edges must then plan too
    (nothing refused after the charge)."""
    con = _connect()
    queries = [
        "SELECT DP_MEAN(x, bounds => 'auto'), DP_VAR(x, bounds => 'auto') FROM t WITH (epsilon = 1)",
        "SELECT DP_SUM(x, bounds => 'auto'), DP_STDDEV(x, bounds => 'auto') FROM t "
        "WITH (mechanism = 'gaussian', epsilon = 1, delta = 1e-6)",
        "SELECT DP_MEDIAN(x, bounds => 'auto'), DP_MIN(x, bounds => 'auto') FROM t WITH (epsilon = 1)",
        "SELECT DP_MEAN(x, bounds => 'auto') FROM t WITH (mechanism = 'ptr', bound = 1, epsilon = 1, delta = 1e-6)",
        "SELECT DP_MEDIAN(x, bounds => 'auto') FROM t WITH (mechanism = 'smooth', epsilon = 1, delta = 1e-6)",
        "SELECT DP_SUM(x, bounds => 'auto') FROM t WITH (rho = 0.1)",
    ]
    bins = [-ab.SIDE, -40, -1, 0, 1, 2, 33, ab.SIDE - 1, ab.SIDE]
    for query in queries:
        prepared = con.prepare(query)
        first = prepared.plan
        for lo in bins:
            for hi in (b for b in bins if b >= lo):
                bounds = {s.index: ab.Found(ab.edges(lo)[0], ab.edges(hi)[1], True) for s in first.searches}
                p, rewritten = found.replan(first, con.policy, bounds)
                assert p.cost == first.cost and rewritten.statement


# -- the histogram's sensitivity, by brute force ------------------------------------------------

#: labels of the brute-force universe → (group, value) of a row
ROWS = {1.0: ("a", 3.0), 2.0: ("b", 3.0), 3.0: ("a", -1e6), 4.0: ("b", None), 5.0: ("a", float("nan"))}


def _histogram_of(prepared):
    """``counts`` for :func:`bruteforce.vector_sensitivity`: the statement run on the units.

    A unit keeps its id in every dataset it is in (the k-th copy of the same rows has the same
    id everywhere), so that a neighbour differs from the dataset in one unit and its rows only:
    the truncation keeps rows by a hash of the whole row, id included."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t (pid INTEGER, g VARCHAR, x DOUBLE)")
    ids: dict[tuple, int] = {}

    def counts(units) -> dict:
        con.execute("DELETE FROM t")
        rows = []
        for i, u in enumerate(units):
            pid = ids.setdefault((u, units[:i].count(u)), len(ids))
            rows += [(pid, *ROWS[v]) for v in u]
        if rows:
            con.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
        cur = con.execute(prepared.search_sql)
        return found.counts([d[0] for d in cur.description], cur.fetchall()).get(0, {})

    return counts


def _unit_connect(unit: str, neighbouring: str = "add_remove", **bounds: int) -> dpsql.Connection:
    pol = {"neighbouring": neighbouring, "budget": {"epsilon": 100.0},
           "tables": {"t": {"privacy_unit": unit, **bounds, "columns": {"g": {"keys": ["a", "b"]}}}}}

    def setup(con):
        con.execute("CREATE TABLE t (pid INTEGER, g VARCHAR, x DOUBLE)")

    return dpsql.connect(":memory:", pol, setup=setup)


@pytest.mark.parametrize(("relation", "claimed"), [("add_remove", 1.0), ("replace", 2.0)])
def test_row_histogram_moves_by_at_most_its_sensitivity(relation: str, claimed: float) -> None:
    con = _unit_connect("row", relation)
    prepared = con.prepare("SELECT DP_SUM(x, bounds => 'auto') FROM t WITH (epsilon = 1)")
    assert prepared.plan.searches[0].sensitivity == claimed
    best = max(bruteforce.vector_sensitivity(_histogram_of(prepared), ROWS, n, relation)[0]
               for n in range(4))
    assert best == claimed  # reached, never exceeded


@pytest.mark.parametrize(("query", "bounds", "claimed"), [
    ("SELECT DP_SUM(x, bounds => 'auto') FROM t WITH (epsilon = 1)", {"max_rows_per_unit": 1}, 1.0),
    ("SELECT g, DP_SUM(x, bounds => 'auto') FROM t GROUP BY g WITH (epsilon = 1)",
     {"max_rows_per_unit": 2, "max_groups_per_unit": 1, "max_rows_per_group_per_unit": 1}, 1.0),
    ("SELECT DP_SUM(x, bounds => 'auto') FROM t WITH (epsilon = 1)", {"max_rows_per_unit": 2}, 2.0),
])
def test_truncated_units_move_the_histogram_by_at_most_its_sensitivity(query: str, bounds: dict,
                                                                        claimed: float) -> None:
    """Units of up to 2 rows; with k = 1 (or g = r = 1) the statement keeps one row per unit: the
    claimed Δ = 1 holds only if the histogram reads the truncated rows (with k = 2 it is 2, and
    the brute force reaches it: it would see an untruncated histogram)."""
    con = _unit_connect("pid", **bounds)
    prepared = con.prepare(query)
    assert prepared.plan.searches[0].sensitivity == claimed
    universe = (1.0, 2.0, 3.0)
    l1, _ = bruteforce.vector_sensitivity(_histogram_of(prepared), universe, 2, "add_remove", max_rows=2)
    assert l1 == claimed


def test_vector_sensitivity_sees_a_histogram_that_counts_twice() -> None:
    """The brute force can fail: a histogram counting each row in two bins moves by 2."""
    def twice(units) -> dict:
        out: dict = {}
        for u in units:
            for v in u:
                for key in (v, -v):
                    out[key] = out.get(key, 0) + 1
        return out

    assert bruteforce.vector_sensitivity(twice, (1.0, 2.0), 2, "add_remove") == (2.0, 1.0)
    assert bruteforce.vector_sensitivity(twice, (1.0, 2.0), 2, "replace") == (4.0, 1.0)


def test_release_is_reproducible_with_seeded_noise_and_varies_without() -> None:
    query = "SELECT DP_MEAN(x, bounds => 'auto') FROM t WITH (epsilon = 1)"
    a = _connect(seed=9).sql(query).fetchall()
    b = _connect(seed=9).sql(query).fetchall()
    c = _connect(seed=10).sql(query).fetchall()
    assert a == b and a != c
    assert np.isfinite(a[0][0])
