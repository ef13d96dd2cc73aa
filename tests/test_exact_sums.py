"""Exact sums (dpsql.mechanisms.fixed, dpsql._privacy.grid): one person moves the statistics the
rewritten statement returns by at most the sensitivity the noise is calibrated to, with bounds far
from zero relative to their width (Casacuberta, Shoemate, Vadhan, Wagaman, CCS 2022; issue 27).

The brute force enumerates small datasets and all their neighbours (dpsql.admin.bruteforce) on top
of 9,999 common rows, runs the statement on each in DuckDB and compares the exact parts of every
group; the float sums dpsql used before are shown to fail the same checks.
"""

from __future__ import annotations

import math
import random
import typing as t
from decimal import Decimal
from fractions import Fraction

import duckdb
import numpy as np
import pytest
from sqlglot import exp

from dpsql._compile.clip import fixed_point
from dpsql._compile.compiler import Compiler
from dpsql._compile.spark import SparkCompiler
from dpsql._compile.target import DUCKDB, SPARK
from dpsql._plan.rewrite import rewrite
from dpsql._policy.policy import load_policy
from dpsql._privacy import grid
from dpsql._privacy.noise import NoiseSource, grid_exponent
from dpsql._query.pipeline import prepare
from dpsql.admin import bruteforce
from dpsql.backends.duck import DuckDBEngine
from dpsql.mechanisms.fixed import BITS, FixedPoint, integers, whole

MEAN_BOUNDS = (1e9, 1e9 + 0.001)
VAR_BOUNDS = (1e8, 1e8 + 2.0)
#: the issue's data: 9,999 rows (the second set reproduces the 16,384 of Σ(v − c)²)
MEAN_BASE = [1e9 + ((i * 7919) % 10007) / 10007 * 0.001 for i in range(9999)]
VAR_BASE = [1e8 + 0.5 * (i % 5) for i in range(9999)]
NULL = -1.0  # a universe value of the brute force that stands for NULL
#: bounds near 0 relative to their width: a mean reads its values on a SUM's grid (origin 0),
#: so that SUM(x) and AVG(x) read one column (FixedPoint.of_mean)
NEAR_BOUNDS = (-3.25, 1000.5)
NEAR_BASE = [((i * 7919) % 10007) / 9.875 - 3.0 for i in range(9999)]


def _policy(bounds: tuple[float, float], neighbouring: str = "add_remove", *, unit: str = "row",
            m: int = 1, keys: list[str] | None = None) -> dict:
    columns: dict = {"x": {"lower": bounds[0], "upper": bounds[1]}}
    if keys is not None:
        columns["g"] = {"keys": keys}
    table = {"privacy_unit": unit, "max_rows_per_unit": m, "columns": columns}
    return {"neighbouring": neighbouring, "budget": {"epsilon": 1e6, "delta": 0.5}, "tables": {"t": table}}


class Statement:
    """A query prepared once under a policy, run on ``base`` rows plus any extra rows: the exact
    parts of every group, as fractions (``Prepared.exact``). Table ``t`` is ``(id, x, g)``."""

    def __init__(self, query: str, policy: dict, base: t.Sequence[tuple]) -> None:
        self.con = duckdb.connect()
        self.con.execute("CREATE TABLE t (id BIGINT, x DOUBLE, g VARCHAR)")
        prepared = prepare(query, load_policy(policy), DuckDBEngine(self.con))
        assert prepared.plan is not None and prepared.rewritten is not None
        self.plan, self.rw, self.sql = prepared.plan, prepared.rewritten, prepared.sql
        self.con.execute("ALTER TABLE t RENAME TO base")
        _insert(self.con, "base", base)
        self.con.execute("CREATE TABLE extra (id BIGINT, x DOUBLE, g VARCHAR)")
        self.con.execute("CREATE VIEW t AS SELECT * FROM base UNION ALL SELECT * FROM extra")
        self.cache: dict[tuple, dict] = {}

    def parts(self, extra: tuple[tuple, ...]) -> dict[t.Any, dict[str, Fraction]]:
        """group key → part → exact value, for the base rows and ``extra``."""
        if extra not in self.cache:
            self.con.execute("DELETE FROM extra")
            _insert(self.con, "extra", extra)
            cur = self.con.execute(self.sql)
            names = [d[0] for d in cur.description]
            out = {}
            for values in cur.fetchall():
                row = dict(zip(names, values))
                for prep in self.plan.prepared:
                    stats = {s: row[c] for (i, s), c in self.rw.columns.items() if i == prep.agg.index}
                    key = tuple(row[k] for k in self.rw.keys)
                    out[(key, prep.label)] = prep.exact(stats)
            self.cache[extra] = out
        return self.cache[extra]

    def worst(self, pairs: t.Iterable[tuple[tuple, tuple]]) -> dict[str, tuple[Fraction, float]]:
        """Largest L1 move over groups of each part, and its sensitivity, over the pairs."""
        out: dict[str, tuple[Fraction, float]] = {}
        for a, b in pairs:
            pa, pb = self.parts(a), self.parts(b)
            for prep in self.plan.prepared:
                for name, part in prep.parts.items():
                    keys = {k for k, label in (*pa, *pb) if label == prep.label}
                    moved = sum(abs(pa.get((k, prep.label), {}).get(name, Fraction(0))
                                    - pb.get((k, prep.label), {}).get(name, Fraction(0))) for k in keys)
                    label = f"{prep.label} {name}"
                    out[label] = (max(out.get(label, (Fraction(0), 0.0))[0], moved), part.sensitivity)
        return out


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: t.Sequence[tuple]) -> None:
    """Rows (id, x, g) into ``table`` in one statement (``executemany`` takes seconds for 10,000)."""
    if rows:
        ids, xs, gs = (list(col) for col in zip(*rows))
        con.execute(f"INSERT INTO {table} SELECT UNNEST(?::BIGINT[]), UNNEST(?::DOUBLE[]), UNNEST(?::VARCHAR[])",
                    [ids, xs, gs])


def _rows(values: t.Iterable[float], group: t.Callable[[float], str] = lambda v: "a", first: int = 0) -> tuple:
    return tuple((first + i, None if v == NULL else v, group(v)) for i, v in enumerate(values))


def _check(worst: dict[str, tuple[Fraction, float]]) -> None:
    assert worst
    for label, (moved, sensitivity) in worst.items():
        assert moved <= Fraction(sensitivity), (label, float(moved), sensitivity)


# -- the finding, exactly --------------------------------------------------------------------------


@pytest.mark.parametrize("query, bounds, base, part", [
    ("SELECT DP_MEAN(x) FROM t WITH (epsilon = 1)", MEAN_BOUNDS, MEAN_BASE, "s1"),
    ("SELECT DP_SUM(x) FROM t WITH (epsilon = 1)", MEAN_BOUNDS, MEAN_BASE, "s"),
    ("SELECT DP_VAR(x) FROM t WITH (epsilon = 1)", VAR_BOUNDS, VAR_BASE, "s2"),
    ("SELECT DP_STDDEV(x) FROM t WITH (epsilon = 1)", VAR_BOUNDS, VAR_BASE, "s1"),
    ("SELECT DP_MEAN(x) FROM t WITH (epsilon = 1)", NEAR_BOUNDS, NEAR_BASE, "s1"),
])
def test_one_more_row_at_the_upper_bound_moves_the_statement_by_at_most_the_sensitivity(
        query: str, bounds: tuple[float, float], base: list[float], part: str) -> None:
    """9,999 rows, and the neighbour with one more at U: the statement's exact parts differ by at
    most Δ (the float sums moved Σ(v − c) by 0.00195 > 0.0005 and Σ(v − c)² by 16,384 > 1)."""
    st = Statement(query, _policy(bounds), _rows(base))
    x, y = st.parts(()), st.parts(_rows([bounds[1]], first=10**6))
    prep = st.plan.prepared[0]
    key = ((), prep.label)
    for name, p in prep.parts.items():
        assert abs(x[key][name] - y[key][name]) <= Fraction(p.sensitivity), name
    # the row at U is worth its whole sensitivity (up to the rounding of one step)
    assert abs(x[key][part] - y[key][part]) >= Fraction(prep.parts[part].sensitivity) * (1 - Fraction(1, 2**20))


def _float_parts(values: list[float | None], bounds: tuple[float, float]) -> dict[str, float]:
    """Σ(v − c) and Σ(v − c)² as dpsql computed them before: DuckDB's float sums, centred after."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT UNNEST(?::DOUBLE[]) AS x", [values])
    n, s, q = con.execute(f"SELECT COUNT(v), SUM(v), SUM(v * v) FROM (SELECT CASE WHEN x < {bounds[0]!r} THEN "
                          f"{bounds[0]!r} WHEN x > {bounds[1]!r} THEN {bounds[1]!r} ELSE x END AS v FROM t)").fetchone()
    c = (bounds[0] + bounds[1]) / 2
    n, s, q = np.float64(n), np.float64(s), np.float64(q)
    return {"s1": float(s - c * n), "s2": float(q - 2 * c * s + c * c * n)}


def test_the_float_sums_of_the_same_data_break_the_sensitivity() -> None:
    """The data above reproduces the finding with the float computation (the test can fail)."""
    x, y = _float_parts(MEAN_BASE, MEAN_BOUNDS), _float_parts([*MEAN_BASE, MEAN_BOUNDS[1]], MEAN_BOUNDS)
    assert abs(x["s1"] - y["s1"]) > 3 * 0.0005
    x, y = _float_parts(VAR_BASE, VAR_BOUNDS), _float_parts([*VAR_BASE, VAR_BOUNDS[1]], VAR_BOUNDS)
    assert abs(x["s2"] - y["s2"]) > 1000


# -- brute force over small datasets on top of the 9,999 rows -------------------------------------


def _universe(bounds: tuple[float, float]) -> tuple[float, ...]:
    lo, hi = bounds
    width = hi - lo
    return (lo, hi, (lo + hi) / 2, lo - 5 * width, hi + 5 * width, NULL)


def _pairs(universe: tuple[float, ...], relation: str, n_max: int, rows: t.Callable) -> t.Iterator[tuple]:
    for n in range(n_max + 1):
        for x in bruteforce.datasets(universe, n):
            for y in bruteforce.neighbours(x, universe, relation):
                yield rows(x), rows(y)


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@pytest.mark.parametrize("query, bounds, base", [
    ("SELECT DP_SUM(x) FROM t WITH (epsilon = 1)", MEAN_BOUNDS, MEAN_BASE),
    ("SELECT DP_MEAN(x) FROM t WITH (epsilon = 1)", MEAN_BOUNDS, MEAN_BASE),
    ("SELECT DP_VAR(x) FROM t WITH (epsilon = 1)", VAR_BOUNDS, VAR_BASE),
    ("SELECT DP_MEAN(x) FROM t WITH (epsilon = 1)", NEAR_BOUNDS, NEAR_BASE),
    ("SELECT DP_SUM(x), DP_MEAN(x) FROM t WITH (epsilon = 1)", NEAR_BOUNDS, NEAR_BASE),
])
def test_brute_force_far_from_zero(relation: str, query: str, bounds: tuple[float, float], base: list[float]) -> None:
    """Every dataset of up to 2 rows over the universe on top of the 9,999 rows, against each of
    its neighbours (a row added or removed; or changed, possibly to NULL or out of range)."""
    st = Statement(query, _policy(bounds, relation), _rows(base))
    _check(st.worst(_pairs(_universe(bounds), relation, 2, lambda d: _rows(d, first=10**6))))


def test_a_mean_near_zero_reads_the_sums_grid_and_its_column() -> None:
    """SUM(x) and AVG(x) with bounds near 0 read one value column and one sum (the mean on the
    SUM's grid); with bounds far from 0 the mean keeps its own centred grid."""
    st = Statement("SELECT DP_SUM(x), DP_MEAN(x) FROM t WITH (epsilon = 1)", _policy(NEAR_BOUNDS), ())
    total, mean = st.plan.prepared
    assert mean.fixed == total.fixed == FixedPoint.values(*NEAR_BOUNDS, False)
    assert st.rw.columns[(0, "s")] == st.rw.columns[(1, "s")] and st.sql.count("CASE WHEN") == 1
    far = Statement("SELECT DP_SUM(x), DP_MEAN(x) FROM t WITH (epsilon = 1)", _policy(MEAN_BOUNDS), ())
    assert far.plan.prepared[1].fixed == FixedPoint.centred(*MEAN_BOUNDS)
    assert far.rw.columns[(0, "s")] != far.rw.columns[(1, "s")] and far.sql.count("CASE WHEN") == 2
    # another argument, or other bounds, is another column
    for query in ("SELECT DP_SUM(x), DP_MEAN(x * 1) FROM t WITH (epsilon = 1)",
                  "SELECT DP_SUM(x), DP_MEAN(x, 0, 999) FROM t WITH (epsilon = 1)"):
        other = Statement(query, _policy(NEAR_BOUNDS), ())
        assert other.rw.columns[(0, "s")] != other.rw.columns[(1, "s")] and "AS __v1" in other.sql


def test_brute_force_grouped_rows_move_between_public_groups() -> None:
    """GROUP BY over public keys under replace: a changed value may also change its group."""
    lo, hi = MEAN_BOUNDS
    universe = _universe(MEAN_BOUNDS)
    group = {v: ("a" if i % 2 else "b") for i, v in enumerate(universe)}.get
    base = _rows(MEAN_BASE, lambda v: "a" if v < (lo + hi) / 2 else "b")
    query = "SELECT g, DP_SUM(x), DP_MEAN(x), DP_VAR(x) FROM t GROUP BY g WITH (epsilon = 1)"
    st = Statement(query, _policy(MEAN_BOUNDS, "replace", keys=["a", "b"]), base)
    pairs = list(_pairs(universe, "replace", 2, lambda d: _rows(d, group, first=10**6)))
    worst = st.worst(pairs)
    _check(worst)
    assert len(worst) == 6  # sum s, mean n and s1, var n, s1 and s2


def test_brute_force_id_units_truncated_to_two_rows() -> None:
    """Units of 1 to 3 rows added or removed; the statement keeps at most 2 of each (m = 2)."""
    universe = (MEAN_BOUNDS[0], MEAN_BOUNDS[1], sum(MEAN_BOUNDS) / 2)
    base = tuple((i, v, "a") for i, v in enumerate(MEAN_BASE))  # one row per unit

    def rows(x: tuple, y: tuple) -> tuple[tuple, tuple]:
        """Both datasets' rows; a unit of both keeps its id, the one added or removed has its own."""
        ids = {i: 10**6 + i for i in range(len(x))}
        pool, mine = list(x), []
        for unit in y:
            j = next((i for i, u in enumerate(pool) if u == unit and i in ids), None)
            mine.append(ids.pop(j) if j is not None else 2 * 10**6)
        rx = tuple((10**6 + i, v, "a") for i, unit in enumerate(x) for v in unit)
        return rx, tuple((uid, v, "a") for uid, unit in zip(mine, y) for v in unit)

    query = "SELECT DP_SUM(x), DP_MEAN(x), DP_VAR(x) FROM t WITH (epsilon = 1)"
    st = Statement(query, _policy(MEAN_BOUNDS, unit="id", m=2), base)
    pairs = [rows(x, y) for units in (0, 1) for x in bruteforce.unit_datasets(universe, units, 3)
             for y in bruteforce.unit_neighbours(x, universe, "add_remove", 3)]
    worst = st.worst(pairs)
    _check(worst)
    mean = st.plan.prepared[1]
    assert mean.parts["s1"].sensitivity == pytest.approx(2 * 0.0005, rel=1e-3)  # two rows of the unit


# -- the grid and the integers ----------------------------------------------------------------------


@pytest.mark.parametrize("bounds", [(0.0, 100.0), (-3.5, 1e-3), MEAN_BOUNDS, VAR_BOUNDS, (1.0, 1.0 + 2**-52),
                                    (-1e300, 1e300), (1e-300, 2e-300), (5e-324, 1e-323), (1e15, 1e15 + 0.25)])
def test_the_grid_keeps_every_integer_and_every_square_in_a_bigint(bounds: tuple[float, float]) -> None:
    for fixed in (FixedPoint.values(*bounds, whole=False), FixedPoint.centred(*bounds)):
        assert -(2**BITS) <= fixed.low <= fixed.high <= 2**BITS
        assert max(fixed.low**2, fixed.high**2) < 2**63
        assert fixed.value(fixed.low) <= Fraction(bounds[0]) + fixed.unit
        assert fixed.value(fixed.high) >= Fraction(bounds[1]) - fixed.unit
        assert math.isfinite(float(fixed.unit)) and math.isfinite(math.ldexp(1.0, -fixed.exponent))
        # the values at the bounds are within a step of their integers
        for v in bounds:
            assert abs(fixed.value(fixed.step(v)) - Fraction(v)) <= fixed.unit + abs(fixed.centre - Fraction(fixed.origin))


def _fixed_sql(fixed: FixedPoint) -> str:
    """d of the column ``x`` on ``fixed``'s grid, as DuckDB's compiler writes it."""
    return fixed_point(exp.column("x"), fixed, Compiler(DUCKDB).integer).sql(dialect="duckdb")


def test_the_sql_clamp_keeps_any_value_in_the_integer_range() -> None:
    """NaN, ±inf, huge and NULL values, and integer columns: d stays in [A, B] (NULL stays NULL)."""
    con = duckdb.connect()
    values = [math.nan, math.inf, -math.inf, 1e308, -1e308, None, 1e9, 1e9 + 0.0005, 0.0, 5e-324]
    for bounds in (MEAN_BOUNDS, VAR_BOUNDS, (-3.5, 1e-3)):
        for fixed in (FixedPoint.values(*bounds, whole=False), FixedPoint.centred(*bounds)):
            sql = _fixed_sql(fixed)
            # written as SQL literals: DuckDB 1.4 binds a Python NaN inside a list parameter as NULL
            listed = ", ".join("NULL" if v is None else f"CAST('{v!r}' AS DOUBLE)" for v in values)
            got = [r[0] for r in con.execute(f"SELECT {sql} FROM (SELECT UNNEST([{listed}]) AS x)").fetchall()]
            assert got[5] is None and all(fixed.low <= d <= fixed.high for d in got if d is not None)
            assert got[0] == fixed.high and got[1] == fixed.high and got[2] == fixed.low  # NaN to B
    ints = FixedPoint.centred(-7.0, 93.0)  # an integer column through the grid: exact
    rows = con.execute(f"SELECT {_fixed_sql(ints)} FROM (SELECT UNNEST(range(-10, 100)) AS x)").fetchall()
    assert [r[0] for r in rows] == [ints.step(v) for v in range(-10, 100)]
    assert all(ints.value(ints.step(v)) == v for v in range(-7, 94))


def test_spark_sums_integers_as_decimals_and_rounds_as_duckdb() -> None:
    out = SPARK.finish("SELECT SUM(CAST(__v0 AS BIGINT)) AS a0_s, SUM(CAST(__v0 * __v0 AS BIGINT)) AS a0_q FROM t")
    assert out.count("DECIMAL(38, 0)") == 2 and "BIGINT" not in out
    x = exp.column("x")
    assert SparkCompiler(SPARK).integer(x).sql("spark") == "CAST(RINT(x) AS BIGINT)"
    assert Compiler(DUCKDB).integer(x).sql("duckdb") == "CAST(x AS BIGINT)"
    assert duckdb.connect().execute("SELECT CAST(2.5::DOUBLE AS BIGINT), CAST(3.5::DOUBLE AS BIGINT), "
                                    "CAST(-2.5::DOUBLE AS BIGINT)").fetchone() == (2, 4, -2)  # ties to even, as RINT


def test_exact_statistics_are_read_without_failing() -> None:
    col = np.array([None, math.nan, math.inf, -math.inf, 7.6, Decimal("12345678901234567890123"), 2**70, -5],
                   dtype=object)
    got = integers(col, -(2**64), 2**64).tolist()
    assert got == [0, 0, 2**64, -(2**64), 8, 2**64, 2**64, -5]
    assert integers(np.array([3, -9], dtype=np.int64), 0, 5).tolist() == [3, 0]
    assert whole(Decimal("-123456789012345678901234567")) == -123456789012345678901234567


def test_grid_rounding_is_exact_and_ties_to_even() -> None:
    rnd = random.Random(3)
    values = [rnd.randrange(-(2**70), 2**70) for _ in range(300)] + [5, -5, 6, -6, 7, 2**63 - 1, -(2**63)]
    for shift in (-70, -63, -40, -3, -1, 0, 2, 30):
        want = [round(Fraction(v) * Fraction(2) ** shift) for v in values]
        assert grid.shifted(np.array(values, dtype=object), shift).tolist() == want
        small = [v for v in values if -(2**63) <= v < 2**63]
        assert grid.shifted(np.array(small, dtype=np.int64), shift).tolist() == \
            [round(Fraction(v) * Fraction(2) ** shift) for v in small]


class _NoNoise(NoiseSource):
    def add_many(self, kind: str, values: t.Sequence[float], scale: float) -> list[float]:
        return [int(v) for v in values]


def test_an_exact_value_past_2_to_53_grid_steps_is_released_on_its_grid_point() -> None:
    """A float input would be rounded to 53 bits before the grid; the exact one is not."""
    scale = 1.0
    k = grid_exponent(scale)
    units = np.array([2**80 + 1, -(2**75) - 3, 12345], dtype=object)
    got = grid.release_units(_NoNoise(), "laplace", units, k, scale)
    assert got.tolist() == [float(Fraction(u) * Fraction(2) ** k) for u in units.tolist()]
    value = Fraction(10**30 + 1, 3)
    assert grid.release_value(_NoNoise(), "laplace", value, scale) == float(round(value / Fraction(2) ** k) * Fraction(2) ** k)


@pytest.mark.parametrize("dtype, lo, hi, cast", [
    ("TINYINT", -128, 127, False), ("SMALLINT", -32768, 32767, False), ("INTEGER", -(2**31), 2**31 - 1, False),
    ("BIGINT", -(2**62), 2**62, False), ("UBIGINT", 0, 2**62, True), ("HUGEINT", -(2**62), 2**62, True),
])
def test_duckdb_sums_a_signed_integer_column_as_it_is_and_exactly(dtype: str, lo: int, hi: int, cast: bool) -> None:
    """DuckDB's statement sums the clip of a signed integer column without the plan's cast to
    BIGINT (its SUM of any signed integer type is an exact HUGEINT); other types keep the cast,
    and Spark's form keeps its exact DECIMAL sum. The sum of values at the bounds is exact."""
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t (x {dtype})")
    policy = {"budget": {"epsilon": 10.0}, "tables": {"t": {"columns": {"x": {"lower": lo, "upper": hi}}}}}
    prepared = prepare("SELECT DP_SUM(x) FROM t WITH (epsilon = 1)", load_policy(policy), DuckDBEngine(con))
    assert prepared.rewritten is not None and prepared.plan is not None
    sql = prepared.sql
    assert sql.startswith("SELECT SUM(CAST(" if cast else "SELECT SUM((CASE"), sql
    con.execute(f"INSERT INTO t SELECT CASE WHEN i % 4 = 0 THEN {lo} WHEN i % 4 = 3 THEN NULL ELSE {hi} END "
                f"FROM range(4000) AS r(i)")
    cur = con.execute(sql)
    assert str(cur.description[0][1]) == "HUGEINT"
    assert cur.fetchone()[0] == 1000 * lo + 2000 * hi  # past BIGINT's range for BIGINT
    spark = rewrite(prepared.plan, SPARK).statement
    assert "DECIMAL(38, 0)" in spark
