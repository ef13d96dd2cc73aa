"""The columnar release: statistics fetched from DuckDB as Arrow columns release exactly as the
same statistics given as rows (the public ``Connection.release`` hook, other engines).

Each query's statistics are fetched both ways and released with the same seeded noise: the
released columns (values and Arrow types), the output table and the report must be equal. The
noise columns of the secure source are checked on numpy arrays against lists with a seeded byte
source.
"""

from __future__ import annotations

import random
import typing as t
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest

import dpsql
from dpsql._privacy import dlaplace, parallel
from dpsql._privacy.noise import SeededNoise
from dpsql._query.pipeline import release
from dpsql.backends.columns import Statistics, arrow_types, column_array, python_values
from dpsql.mechanisms.batch import Lists

POLICY = {
    "neighbouring": "add_remove",
    "budget": {"epsilon": 1e9, "delta": 0.5},
    "tables": {"t": {"privacy_unit": "row", "max_rows_per_unit": 1, "columns": {
        "x": {"lower": -10, "upper": 90}, "xf": {"lower": 0, "upper": 100},
        "xr": {"lower": 0, "upper": 100}, "xd": {"lower": 0, "upper": 50},
        "xb": {"lower": 0, "upper": 2**53},
        "g": {"keys": ["a", "b", "c", "z"]}}}},
}


def _table(con: t.Any) -> None:
    """300 keys ``k`` of uneven sizes (τ-selection keeps some, drops others), string keys with a
    NULL, integers (HUGEINT sums), doubles, reals, decimals, dates, and BIGINTs whose sums pass
    int64."""
    rng = random.Random(5)
    rows = []
    for _ in range(6000):
        k = int(rng.paretovariate(1.2)) % 300
        x = rng.randint(-20, 120)
        rows.append((k, rng.choice(["a", "b", "c", None]), None if rng.random() < 0.05 else x, x * 0.7,
                     x / 3, Decimal(x) / 4, rng.randint(0, 9), 8 * 10**15 + rng.randint(0, 10**14)))
    cols = list(zip(*rows))
    con.from_arrow(pa.table({
        "k": pa.array(cols[0], pa.int32()), "g": pa.array(cols[1], pa.string()),
        "x": pa.array(cols[2], pa.int32()), "xf": pa.array(cols[3], pa.float64()),
        "xr": pa.array(cols[4], pa.float32()), "xd": pa.array(cols[5], pa.decimal128(10, 2)),
        "day": pa.array(cols[6], pa.int32()), "xb": pa.array(cols[7], pa.int64()),
    })).create("t_raw")
    con.execute("CREATE TABLE t AS SELECT * EXCLUDE (day), DATE '2024-01-01' + day AS day FROM t_raw")
    con.execute("DROP TABLE t_raw")


@pytest.fixture(scope="module")
def con() -> dpsql.Connection:
    return dpsql.connect(":memory:", POLICY, setup=_table, noise=SeededNoise(1))


EPS = "WITH (epsilon = 1, delta = 0.01)"
QUERIES = [
    # τ-selected integer keys, the benchmark's shape
    f"SELECT k, DP_COUNT(*), DP_MEAN(x) FROM t GROUP BY k {EPS}",
    f"SELECT k, DP_SUM(x), DP_VAR(xf), DP_STDDEV(xr) FROM t GROUP BY k {EPS}",
    f"SELECT k, DP_MEAN(xd), DP_SUM(xd) FROM t GROUP BY k {EPS}",
    f"SELECT k, DP_SUM(xb), DP_MEAN(xb) FROM t GROUP BY k {EPS}",
    f"SELECT k, DP_COUNT(x) AS n, DP_MEAN(x) AS m FROM t GROUP BY k HAVING n > 3 ORDER BY m DESC {EPS}",
    "SELECT k, DP_COUNT(*) FROM t GROUP BY k WITH (mechanism = 'gaussian', epsilon = 1, delta = 1e-5)",
    "SELECT g, DP_COUNT(*), DP_MEAN(xf) FROM t GROUP BY g WITH (mechanism = 'gaussian', rho = 0.5, delta = 1e-5)",
    # public string keys, NULL key included by the domain or not
    f"SELECT g, DP_COUNT(*), DP_MEAN(x) FROM t GROUP BY g {EPS}",
    f"SELECT g, k % 3 AS r, DP_COUNT(*) FROM t GROUP BY g, r {EPS}",
    # a date key (fetched as rows) and a per-group mechanism
    f"SELECT day, DP_COUNT(*) FROM t GROUP BY day {EPS}",
    f"SELECT g, DP_MEDIAN(x) FROM t GROUP BY g {EPS}",
    # order statistics as lists: the value histogram (τ-selected) and the window of ranks
    f"SELECT k, DP_COUNT(*), DP_QUANTILE(x, 0.3) FROM t GROUP BY k {EPS}",
    f"SELECT g, DP_MEDIAN(xf), DP_MAX(xr) FROM t GROUP BY g {EPS}",
    # no group
    f"SELECT DP_COUNT(*), DP_MEAN(x), DP_SUM(xb) FROM t {EPS}",
]


def _both(con: dpsql.Connection, query: str, seed: int) -> tuple[t.Any, t.Any, Statistics]:
    prepared = con.prepare(query)
    ordered = f"SELECT * FROM ({prepared.sql}) ORDER BY ALL"  # DuckDB's group order varies between runs
    names, rows = con.engine.statistics(ordered)
    names2, stats = con.engine.statistics_columns(ordered)
    assert names2 == names and stats.size == len(rows)
    by_rows = release(prepared, names, rows, SeededNoise(seed), con.engine)
    by_columns = release(prepared, names2, stats, SeededNoise(seed), con.engine)
    tables = lambda pair: (pair[0].to_arrow() if hasattr(pair[0], "to_arrow") else pair[0], pair[1])  # noqa: E731 - a one-row output is built when asked
    return tables(by_rows), tables(by_columns), stats


@pytest.mark.parametrize("query", QUERIES)
def test_columns_release_as_rows_do(con: dpsql.Connection, query: str) -> None:
    for seed in (0, 1):
        (table_r, rel_r), (table_c, rel_c), _ = _both(con, query, seed)
        assert rel_c.columns == rel_r.columns
        assert [a.type for a in rel_c.arrays] == [a.type for a in rel_r.arrays]
        assert rel_c.rows == rel_r.rows
        assert rel_c.groups_suppressed == rel_r.groups_suppressed
        assert rel_c.report == rel_r.report
        assert table_c.equals(table_r, check_metadata=True)
        assert table_c.num_rows > 0


def test_selection_keeps_and_drops_groups(con: dpsql.Connection) -> None:
    """The τ-selected query above does drop groups, so its mask is exercised."""
    (_, rel_r), (_, rel_c), stats = _both(con, QUERIES[0], 0)
    assert 0 < rel_c.groups_suppressed < stats.size
    assert len(rel_c.rows) == stats.size - rel_c.groups_suppressed


@pytest.mark.parametrize("query, arrow", [(QUERIES[0], True), (QUERIES[2], True), (QUERIES[3], True),
                                          (QUERIES[9], False)])
def test_duckdb_hands_over_arrow_columns_for_plain_types(con: dpsql.Connection, query: str, arrow: bool) -> None:
    _, stats = con.engine.statistics_columns(con.prepare(query).sql)
    assert all(isinstance(c, pa.Array) for c in stats.columns) is arrow
    assert all(isinstance(c, np.ndarray) for c in stats.columns) is not arrow


def test_statistic_columns_are_typed_only_where_exact(con: dpsql.Connection) -> None:
    prepared = con.prepare(QUERIES[3])  # SUM(BIGINT): HUGEINT, past int64 in some groups
    names, rows = con.engine.statistics(prepared.sql)
    _, stats = con.engine.statistics_columns(prepared.sql)
    for j in range(len(names)):
        col = stats.values(j)
        assert col.tolist() == [r[j] for r in rows]
        assert [type(v) for v in col.tolist()] == [type(r[j]) for r in rows]
    assert any(stats.values(j).dtype == object for j in range(len(names)))  # sums past int64
    assert stats.values(names.index("__keys_n")).dtype == np.int64


def test_arrow_types() -> None:
    assert arrow_types(["INTEGER", "BIGINT", "HUGEINT", "DOUBLE", "VARCHAR", "DECIMAL(18,3)", "BOOLEAN"])
    assert arrow_types(["STRUCT(v INTEGER, c BIGINT)[]", "STRUCT(v DOUBLE, c BIGINT, r HUGEINT)[]"])
    for other in ("DATE", "TIMESTAMP", "UBIGINT", "INTEGER[]", "STRUCT(a INTEGER)", "INTERVAL", "UUID",
                  "STRUCT(v DECIMAL(10,2), c BIGINT)[]", "STRUCT(v DATE)[]", "STRUCT(v UBIGINT)[]",
                  "STRUCT(v INTEGER[])[]", "STRUCT(v INTEGER)[][]"):
        assert not arrow_types(["BIGINT", other])


@pytest.mark.parametrize("query", [QUERIES[10], QUERIES[11], QUERIES[12]])
def test_lists_of_structs_read_as_the_rows_hold_them(con: dpsql.Connection, query: str) -> None:
    """A histogram or a window of ranks comes as Arrow and reads back as the rows' lists of dicts
    (ints stay ints, HUGEINT ranks are ints), also after a filter of the groups."""
    ordered = f"SELECT * FROM ({con.prepare(query).sql}) ORDER BY ALL"
    names, rows = con.engine.statistics(ordered)
    _, stats = con.engine.statistics_columns(ordered)
    lists = [j for j, c in enumerate(stats.columns) if isinstance(c, Lists)]
    assert lists
    keep = np.arange(stats.size) % 3 != 1
    for j in lists:
        assert stats.values(j).tolist() == [r[j] for r in rows]
        assert stats.filter(keep).values(j).tolist() == [r[j] for r, k in zip(rows, keep) if k]
        kinds = {type(x) for r in rows if r[j] for e in r[j] for x in e.values()}
        assert kinds == {type(x) for v in stats.values(j) if v for e in v for x in e.values()}


def test_lists_with_a_null_inside_are_read_as_rows() -> None:
    ty = pa.list_(pa.struct([("v", pa.int32()), ("c", pa.int64())]))
    good = pa.array([[{"v": 1, "c": 2}], None, [], [{"v": 3, "c": 1}, {"v": 4, "c": 5}]], ty)
    stats = Statistics.from_arrow(pa.table({"h": good}), ["STRUCT(v INTEGER, c BIGINT)[]"])
    assert stats is not None and isinstance(stats.columns[0], Lists)
    assert stats.values(0).tolist() == good.to_pylist()
    assert stats.filter(np.array([False, True, True, True])).values(0).tolist() == good.to_pylist()[1:]
    assert stats.filter(np.array([True, False, False, True])).values(0).tolist() == \
        [good.to_pylist()[0], good.to_pylist()[3]]
    for bad in ([[{"v": None, "c": 2}]], [[None]]):
        table = pa.table({"h": pa.array(bad, ty)})
        assert Statistics.from_arrow(table, ["STRUCT(v INTEGER, c BIGINT)[]"]) is None
    wide = pa.array([[{"v": 1, "r": 2**70}]], pa.list_(pa.struct([("v", pa.float64()), ("r", pa.decimal128(38, 0))])))
    assert Statistics.from_arrow(pa.table({"h": wide}), ["STRUCT(v DOUBLE, r HUGEINT)[]"]) is None
    sliced = pa.table({"h": good.slice(1)})  # an array whose offsets do not start at 0
    stats = Statistics.from_arrow(sliced, ["STRUCT(v INTEGER, c BIGINT)[]"])
    assert stats is not None and stats.values(0).tolist() == good.to_pylist()[1:]


def test_secure_noise_columns_match_lists() -> None:
    """dlaplace on a numpy column gives the values it gives on the same list, from the same bytes."""
    def seeded(seed: int) -> dlaplace.RandomBytes:
        gen = np.random.Generator(np.random.PCG64(seed))
        return lambda n: gen.bytes(n)

    ints = np.array([0, 5, -7, 2**61, -(2**61)] * 400, dtype=np.int64)
    out = dlaplace.add_int(ints, Fraction(3, 2), seeded(4))
    assert isinstance(out, np.ndarray) and out.dtype == np.int64
    assert out.tolist() == dlaplace.add_int(ints.tolist(), Fraction(3, 2), seeded(4))
    floats = np.array([0.5, -3.25, 1e300, 7.0] * 500)
    grid = dlaplace.add_on_grid(floats, Fraction(5), -20, seeded(9))
    assert isinstance(grid, np.ndarray) and grid.dtype == np.float64
    assert grid.tolist() == dlaplace.add_on_grid(floats.tolist(), Fraction(5), -20, seeded(9))
    # sums past int64 fall back to Python integers, exactly
    big = np.array([2**62 + 5, 1], dtype=np.int64)
    wide = dlaplace.add_int(big, Fraction(1), seeded(1))
    assert [int(v) for v in wide] == dlaplace.add_int(big.tolist(), Fraction(1), seeded(1))


def test_map_chunks_concatenates_arrays(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "workers", lambda: 3)
    values = np.arange(9000, dtype=np.int64)
    out = parallel.map_chunks(lambda chunk: chunk * 2, values, min_chunk=1000)
    assert isinstance(out, np.ndarray) and out.tolist() == [2 * v for v in range(9000)]
    mixed = parallel.map_chunks(lambda chunk: chunk * 2 if chunk[0] else (chunk * 2).tolist(), values, min_chunk=1000)
    assert mixed == [2 * v for v in range(9000)]


def test_hugeint_sums_that_fit_are_int64(con: dpsql.Connection) -> None:
    """SUM of an INTEGER column is HUGEINT in DuckDB, Arrow decimal128(38, 0): read as int64
    when every sum fits; the public key 'z' has no row, so its statistics are NULL (a mask)."""
    prepared = con.prepare(QUERIES[7])
    names, rows = con.engine.statistics(prepared.sql)
    _, stats = con.engine.statistics_columns(prepared.sql)
    for j in range(1, len(names)):
        typed, nulls = stats.stat(j)
        assert typed.dtype == np.int64
        assert nulls is not None and nulls.tolist() == [r[j] is None for r in rows]
        assert stats.values(j).tolist() == [r[j] for r in rows]
    assert len(stats.hugeint) == 1
    assert stats.filter(np.array([True, False, True, False])).stat(3)[1] is None


def test_an_unexpected_arrow_export_is_read_as_rows() -> None:
    table = pa.table({"k": pa.array([1, 2], pa.int32()), "s": pa.array([b"\x01", b"\x02"], pa.binary())})
    assert Statistics.from_arrow(table, ["INTEGER", "HUGEINT"]) is None
    assert Statistics.from_arrow(table, ["INTEGER"]) is None
    ok = pa.table({"k": pa.array([1, 2], pa.int32()), "s": pa.array([3, None], pa.decimal128(38, 0))})
    stats = Statistics.from_arrow(ok, ["INTEGER", "HUGEINT"])
    assert stats is not None and stats.values(1).tolist() == [3, None]
    assert [type(v) for v in stats.values(1).tolist()] == [int, type(None)]


def test_grouped_statistics_come_as_columns_and_one_ungrouped_row_as_a_tuple(monkeypatch) -> None:
    """Connection.sql fetches grouped statistics as Arrow columns and an ungrouped query's one
    row through the row fetch (an Arrow export costs more than the row for one row)."""
    con = dpsql.connect(":memory:", POLICY, setup=_table, noise=SeededNoise(1))
    seen: list[str] = []
    for name in ("statistics", "statistics_columns"):
        real = getattr(con.engine, name)
        monkeypatch.setattr(con.engine, name, lambda sql, real=real, name=name: seen.append(name) or real(sql))
    con.sql(f"SELECT k, DP_COUNT(*) FROM t GROUP BY k {EPS}")
    con.sql(f"SELECT DP_SUM(x) FROM t {EPS}")
    assert seen == ["statistics_columns", "statistics"]
    con.close()


@pytest.mark.parametrize("values", [
    np.array([3, -4], dtype=np.int64), np.array([1.5, np.nan, -0.0, np.inf]), np.array([7], dtype=np.int32),
    np.array([2.5], dtype=np.float32), np.array([True]), np.array([2**63 - 1], dtype=np.uint64),
    [None], [1.25], [-(2**63)], [2**63], [True], [np.float64(2.0)], [1, 2.5], [], np.zeros(0),
])
def test_python_values_are_what_arrow_gives_back(values: t.Any) -> None:
    """A released column's Python values without Arrow: the values and their types are those of
    the Arrow array the table is built from."""
    try:
        want = column_array(values).to_pylist()
    except OverflowError:  # past int64: the same error either way
        with pytest.raises(OverflowError):
            python_values(values)
        return
    got = python_values(values)
    assert [type(x) for x in got] == [type(x) for x in want]
    assert [repr(x) for x in got] == [repr(x) for x in want]  # NaN and -0.0 included
