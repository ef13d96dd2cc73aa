"""Bounds derived by interval arithmetic (dpsql._sql.intervals): DuckDB's value of an expression on
inputs inside their columns' bounds lies inside the derived interval (a property test), the
derived bounds reach EXPLAIN and are clipped to in the SQL, and a DP_SUM over them moves by at
most its sensitivity over every neighbour of small datasets (brute force)."""

from __future__ import annotations

import itertools
import typing as t
from decimal import Decimal
from fractions import Fraction

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlglot import exp, parse_one

import dpsql
from dpsql._policy.policy import load_policy
from dpsql._query.pipeline import prepare
from dpsql._sql.intervals import Interval, _ends, derive
from dpsql.admin import bruteforce
from dpsql.backends.duck import DuckDBEngine

#: the columns of the property test: name, DuckDB type, bounds pairs to draw from
COLUMNS = {
    "a": ("DECIMAL(15,2)", [(0.0, 105000.0), (0.0, 0.1), (-0.3, 0.3), (0.01, 0.07), (-50.0, -0.5)]),
    "b": ("DOUBLE", [(0.0, 1.0), (-1e6, 1e-3), (0.1, 0.3), (1e-9, 2e-9), (-7.25, 3.5)]),
    "c": ("INTEGER", [(0.0, 10.0), (-100.0, 100.0), (1.0, 2.0), (-5.0, -1.0)]),
}
LITERALS = ["1", "0.1", "2", "-3", "0.3", "100", "1e-3", "7.5"]


def _leaf(bounds: dict[str, tuple[float, float]]) -> t.Callable:
    def leaf(col: exp.Column) -> tuple[Interval, str] | None:
        b = bounds.get(col.name)
        return (_ends(*b), col.name) if b else None
    return leaf


def _expressions(depth: int) -> st.SearchStrategy[str]:
    leaves = st.sampled_from(["a", "b", "c", *LITERALS])
    if depth == 0:
        return leaves

    def grow(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        two = st.tuples(inner, inner)
        return st.one_of(
            two.map(lambda p: f"({p[0]} + {p[1]})"),
            two.map(lambda p: f"({p[0]} - {p[1]})"),
            two.map(lambda p: f"({p[0]} * {p[1]})"),
            two.map(lambda p: f"({p[0]} / {p[1]})"),
            inner.map(lambda x: f"(-({x}))"),
            inner.map(lambda x: f"abs({x})"),
            two.map(lambda p: f"least({p[0]}, {p[1]})"),
            two.map(lambda p: f"greatest({p[0]}, {p[1]})"),
            two.map(lambda p: f"CASE WHEN a > 0 THEN {p[0]} ELSE {p[1]} END"),
            two.map(lambda p: f"coalesce({p[0]}, {p[1]})"),
            inner.map(lambda x: f"CAST({x} AS DECIMAL(12,1))"),
            inner.map(lambda x: f"CAST({x} AS BIGINT)"),
            inner.map(lambda x: f"CAST({x} AS DOUBLE)"),
        )
    return st.recursive(leaves, grow, max_leaves=6)


@st.composite
def _case(draw: st.DrawFn) -> tuple[str, dict, list[tuple]]:
    expr = draw(_expressions(3))
    bounds = {name: draw(st.sampled_from(pairs)) for name, (_, pairs) in COLUMNS.items()}
    rows = []
    for _ in range(draw(st.integers(1, 6))):
        lo, hi = bounds["a"]
        a = Decimal(draw(st.integers(round(lo * 100), round(hi * 100)))) / 100
        b = draw(st.floats(bounds["b"][0], bounds["b"][1]) | st.sampled_from(bounds["b"]))
        c = draw(st.integers(int(bounds["c"][0]), int(bounds["c"][1])))
        nulls = draw(st.sets(st.sampled_from("abc"), max_size=2))
        rows.append(tuple(None if n in nulls else v for n, v in zip("abc", (a, b, c))))
    return expr, bounds, rows


_DUCK = duckdb.connect()


@pytest.mark.slow  # 7 s: 300 examples, each a DuckDB query
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_case())
def test_duckdb_values_on_inputs_inside_the_bounds_lie_inside_the_derived_interval(case: tuple) -> None:
    expr, bounds, rows = case
    derived = derive(parse_one(expr, read="duckdb"), _leaf(bounds))
    if derived is None:
        return
    arrays = ", ".join(f"UNNEST(?::{dtype}[]) AS {name}" for name, (dtype, _) in COLUMNS.items())
    try:
        values = _DUCK.execute(f"SELECT TRY({expr}) FROM (SELECT {arrays})", [list(c) for c in zip(*rows)]).fetchall()
    except duckdb.Error:  # a bind error (e.g. a decimal too wide): no value to check
        return
    for (value,), row in zip(values, rows):
        if value is not None:
            assert derived.lower <= Fraction(value) <= derived.upper, (expr, row, value, derived)


def test_the_issue_example_and_the_rules_that_refuse() -> None:
    bounds = {"p": (0.0, 105000.0), "d": (0.0, 0.1)}
    leaf = _leaf(bounds)
    d = derive(parse_one("p * (1 - d)"), leaf)
    assert d is not None and (d.lower, d.upper) == (0.0, 105000.0)
    assert derive(parse_one("p * (1 + d)"), leaf).upper == pytest.approx(115500.0)  # type: ignore[union-attr]
    for refused in ["p / (d - 0.05)", "p / d", "ln(p)", "p % 7", "p // 2", "CAST(p AS REAL)", "x + 1",
                    "CAST(p AS VARCHAR)", "p * 1e308 * 1e308"]:
        assert derive(parse_one(refused, read="duckdb"), leaf) is None, refused
    assert derive(parse_one("least(p, 100)"), leaf).upper == 100.0  # type: ignore[union-attr]
    # a nullable argument of least is skipped when NULL: its bound cannot cap the result
    assert derive(parse_one("least(p, d)"), leaf).upper == 105000.0  # type: ignore[union-attr]
    assert derive(parse_one("greatest(p, 5)"), leaf).lower == 5.0  # type: ignore[union-attr]
    assert derive(parse_one("CASE WHEN d > 0 THEN p ELSE -1 END"), leaf).lower == -1.0  # type: ignore[union-attr]


def test_rounding_is_outward_where_the_exact_end_is_not_a_double() -> None:
    leaf = _leaf({"b": (0.0, 1.0)})
    d = derive(parse_one("b / 3"), leaf)
    assert d is not None and Fraction(d.upper) >= Fraction(1, 3) and d.upper > 1 / 3 - 1e-16


# -- through the connection ------------------------------------------------------------------------


def _policy(extra: dict | None = None) -> dict:
    cols = {"price": {"lower": 0, "upper": 105000}, "disc": {"lower": 0, "upper": 0.1},
            "qty": {"lower": 1, "upper": 50}}
    return {"budget": {"epsilon": 100}, "tables": {"li": {"privacy_unit": "cust", "max_rows_per_unit": 10,
                                                          "columns": cols, **(extra or {})}}}


@pytest.fixture()
def con() -> t.Iterator[dpsql.Connection]:
    raw = duckdb.connect()
    raw.execute("CREATE TABLE li AS SELECT (range % 1000)::DECIMAL(15,2) * 100 AS price, "
                "((range % 11) / 100)::DECIMAL(15,2) AS disc, (range % 50 + 1)::INTEGER AS qty, "
                "range % 50 AS cust, (range % 3)::VARCHAR AS name FROM range(500)")
    c = dpsql.connect(raw, _policy())
    yield c
    c.close()


def test_explain_shows_the_derived_bounds_and_where_they_came_from(con: dpsql.Connection) -> None:
    text = con.explain("SELECT DP_SUM(price * (1 - disc)) FROM li WITH (epsilon = 1)")
    assert "bounds: [0, 105000]" in text
    assert "derived by interval arithmetic from li.price ∈ [0, 105000], li.disc ∈ [0, 0.1]" in text
    assert "1720320000" in text  # the clip to the upper bound on the fixed-point grid stays in the SQL


def test_the_query_s_bounds_win_over_derived_ones(con: dpsql.Connection) -> None:
    text = con.explain("SELECT DP_SUM(price * (1 - disc), 0, 10) FROM li WITH (epsilon = 1)")
    assert "bounds: [0, 10]" in text and "derived" not in text


def test_an_expression_without_derived_bounds_is_still_refused(con: dpsql.Connection) -> None:
    with pytest.raises(dpsql.PrivacyError, match="no bounds for the expression"):
        con.explain("SELECT DP_SUM(price / (disc - 0.05)) FROM li WITH (epsilon = 1)")
    with pytest.raises(dpsql.PrivacyError, match="no bounds for the expression"):
        con.explain("SELECT DP_SUM(length(name) * price) FROM li WITH (epsilon = 1)")


def test_a_derived_bound_answers_close_to_the_truth(con: dpsql.Connection) -> None:
    (value,) = con.sql("SELECT DP_SUM(qty * 2 - 1) FROM li WITH (epsilon = 100)").fetchone()
    assert abs(value - sum(2 * (i % 50 + 1) - 1 for i in range(500))) < 200  # Δ = 10 rows × 99, ε = 100


# -- brute force -----------------------------------------------------------------------------------


def test_brute_force_a_sum_over_derived_bounds_moves_by_at_most_its_sensitivity() -> None:
    """DP_SUM(p * (1 - d)) with p ∈ [0, 100], d ∈ [0, 0.5] from the policy: derived [0, 100].
    Every dataset of up to 2 rows (values inside and outside the bounds, NULL) against each
    neighbour: the exact sum the statement returns moves by at most Δ. Negative control: the
    same move of the unclipped sum exceeds Δ (the clip, not the derivation, bounds it)."""
    raw = duckdb.connect()
    raw.execute("CREATE TABLE t (p DECIMAL(15,2), d DECIMAL(15,2))")
    policy = load_policy({"budget": {"epsilon": 10}, "tables": {"t": {"privacy_unit": "row", "columns": {
        "p": {"lower": 0, "upper": 100}, "d": {"lower": 0, "upper": 0.5}}}}})
    prepared = prepare("SELECT DP_SUM(p * (1 - d)) FROM t WITH (epsilon = 1)", policy, DuckDBEngine(raw))
    assert prepared.plan is not None and prepared.rewritten is not None
    prep = prepared.plan.prepared[0]
    assert (prep.agg.lower, prep.agg.upper) == (0.0, 100.0) and prep.agg.bounds_note
    sensitivity = Fraction(prep.parts["s"].sensitivity)
    universe = ((Decimal("0"), Decimal("0")), (Decimal("100"), Decimal("0")), (Decimal("37.5"), Decimal("0.5")),
                (Decimal("900"), Decimal("-3")), (None, Decimal("0.1")), (Decimal("-50"), Decimal("0.25")))
    raw.execute("ALTER TABLE t RENAME TO base")
    raw.execute("CREATE TABLE extra (i INTEGER, p DECIMAL(15,2), d DECIMAL(15,2))")
    raw.execute("CREATE VIEW t AS SELECT p, d FROM extra")
    cache: dict[tuple, tuple[Fraction, Fraction]] = {}

    def run(x: tuple) -> tuple[Fraction, Fraction]:
        if x not in cache:
            raw.execute("DELETE FROM extra")
            for i, j in enumerate(x):
                raw.execute("INSERT INTO extra VALUES (?, ?, ?)", [i, *universe[int(j)]])
            cur = raw.execute(prepared.sql)
            names = [d[0] for d in cur.description]
            row = dict(zip(names, cur.fetchone()))
            stats = {s: row[c] for (_, s), c in prepared.rewritten.columns.items()}
            raw_sum = raw.execute("SELECT COALESCE(SUM(p * (1 - d)), 0) FROM t").fetchone()[0]
            cache[x] = (Fraction(prep.exact(stats)["s"]), Fraction(raw_sum))
        return cache[x]

    worst = unclipped = Fraction(0)
    indices = tuple(range(len(universe)))
    for n in range(3):
        for x in bruteforce.datasets(indices, n):
            for y in bruteforce.neighbours(x, indices, "add_remove"):
                (cx, rx), (cy, ry) = run(x), run(y)
                worst, unclipped = max(worst, abs(cx - cy)), max(unclipped, abs(rx - ry))
    assert 0 < worst <= sensitivity
    assert unclipped > sensitivity  # negative control


def test_every_small_grid_point_stays_inside() -> None:
    """Exhaustive: a, b on small grids inside their bounds, a few fixed shapes."""
    bounds = {"a": (-0.3, 0.3), "b": (0.1, 0.3)}
    shapes = ["a * (1 - b)", "a / b", "abs(a) - b * 3", "least(a, b) * greatest(a, 0.2)", "CAST(a / b AS DECIMAL(5,1))",
              "CAST(a * 7 AS INTEGER) + b"]
    grid_a = [Decimal(k) / 100 for k in range(-30, 31, 7)] + [Decimal("0.3"), Decimal("-0.3")]
    grid_b = [0.1, 0.3, 0.2, 0.30000000000000004 - 2**-54, 0.15]
    for shape in shapes:
        derived = derive(parse_one(shape, read="duckdb"), _leaf(bounds))
        assert derived is not None, shape
        for a, b in itertools.product(grid_a, grid_b):
            if not 0.1 <= b <= 0.3:
                continue
            (v,) = _DUCK.execute(f"SELECT TRY({shape}) FROM (SELECT ?::DECIMAL(15,2) AS a, ?::DOUBLE AS b)",
                                 [a, b]).fetchone()
            assert v is None or derived.lower <= Fraction(v) <= derived.upper, (shape, a, b, v)
