"""The fast paths: grouped release on whole columns, the one-pass value histogram of whole
numbers, and the exponential mechanism on whole-number candidates."""

from __future__ import annotations

import itertools
import math
import random
import typing as t

import numpy as np
import pyarrow as pa
import pytest

import dpsql
from dpsql._privacy.noise import NoiseSource, SeededNoise
from dpsql.mechanisms import exponential as em
from dpsql.mechanisms.base import NoisyPart
from dpsql.mechanisms.batch import Groups, ReleasedColumn
from dpsql.mechanisms.wholequantile import whole_regions

# -- whole-number candidates: exact privacy on tiny data ----------------------------------------

LOWER, UPPER = 0.0, 4.0
UNIVERSE = (0.0, 1.0, 2.0, 3.0, 4.0)
WHOLE = (0.0, 1.0, 2.0, 3.0, 4.0)  # every candidate, U included


def log_probs(data: tuple[float, ...], p: float, eps_prime: float, b: int) -> list[float]:
    """log P[output = y] for every whole number y of [L, U], exactly as drawn."""
    parts = whole_regions(em.points_of(data), len(data), p, eps_prime, LOWER, UPPER, b)
    assert sorted(y for lo, hi, _ in parts for y in range(int(lo), int(hi))) == list(WHOLE)  # each once
    weights = em.log_weights(parts, 0)
    top = max(weights)
    log_z = top + math.log(math.fsum(math.exp(w - top) for w in weights if w > -math.inf))
    return [next(s for lo, hi, s in parts if lo <= y < hi) - log_z for y in WHOLE]


def datasets(max_n: int = 3) -> list[tuple[float, ...]]:
    return [d for n in range(max_n + 1) for d in itertools.combinations_with_replacement(UNIVERSE, n)]


def neighbours(d: tuple[float, ...], relation: str, max_n: int = 3) -> list[tuple[float, ...]]:
    if relation == "add_remove":
        return [tuple(sorted(d + (u,))) for u in UNIVERSE] if len(d) < max_n else []
    return [tuple(sorted(d[:i] + d[i + 1:] + (u,))) for i in range(len(d)) for u in UNIVERSE]


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@pytest.mark.parametrize("p", [0.0, 0.25, 0.5, 0.8, 1.0])
def test_whole_number_candidates_brute_force_privacy(relation: str, p: float) -> None:
    """Every whole number's probability moves by at most e^ε between neighbours."""
    from dpsql._sql.options import Options
    from dpsql.mechanisms.base import Context

    ctx = Context(neighbouring=relation, max_rows=1, grouped=False, filtered=False, options=Options())
    eps = 1.0
    eps_prime = em.exponent(p, em.utility_sensitivity(p, ctx), eps)
    for b in (1, em.window(eps_prime)):
        cache = {d: log_probs(d, p, eps_prime, b) for d in datasets()}
        loss = max(max(abs(a - c) for a, c in zip(cache[d], cache[e]))
                   for d in datasets() for e in neighbours(d, relation))
        assert loss <= eps * (1 + 1e-9)
        # negative control: twice the exponent breaks the bound
        doubled = {d: log_probs(d, p, 2 * eps_prime, b) for d in datasets()}
        if b > 1:
            assert max(max(abs(a - c) for a, c in zip(doubled[d], doubled[e]))
                       for d in datasets() for e in neighbours(d, relation)) > eps * 1.01


def test_whole_number_draws_match_exact_probabilities() -> None:
    data = (1.0, 1.0, 2.0, 4.0)
    probs = [math.exp(x) for x in log_probs(data, 0.5, 0.7, 64)]
    noise, trials = SeededNoise(3), 20000
    counts = dict.fromkeys(WHOLE, 0)
    for _ in range(trials):
        y = em.draw(em.points_of(data), len(data), 0.5, 0.7, LOWER, UPPER, noise, 64, integer=True)
        counts[y] += 1  # a whole number of [L, U], or KeyError
    for y, q in zip(WHOLE, probs):
        assert abs(counts[y] / trials - q) <= 5 * math.sqrt(q * (1 - q) / trials) + 1e-9


# -- the SQL paths on an integer column -----------------------------------------------------------

POLICY = {
    "neighbouring": "add_remove",
    "budget": {"epsilon": 1e9, "delta": 0.5},
    "tables": {"d": {"privacy_unit": "row", "max_rows_per_unit": 1, "columns": {
        "xi": {"lower": 0, "upper": 100}, "xf": {"lower": 0, "upper": 100},
        "g": {"keys": ["a", "b", "c", "e", "n"]}}}},
}


def _table(con: t.Any) -> None:
    """Integer values in groups: spread, heavy ties, out of bounds, one value, only NULLs; the
    same values as DOUBLE in ``xf``."""
    rng = random.Random(11)
    rows = []
    for _ in range(6000):
        g = rng.choice("abc")
        x = {"a": rng.randint(-20, 130), "b": rng.choice([10, 20, 20, 30]), "c": rng.randint(40, 44)}[g]
        rows.append((g, None if rng.random() < 0.05 else x))
    rows += [("e", 5)] * 3 + [("n", None)]
    xs = [r[1] for r in rows]
    con.from_arrow(pa.table({"g": [r[0] for r in rows], "xi": pa.array(xs, pa.int32()),
                             "xf": pa.array(xs, pa.float64())})).create("d")


@pytest.fixture(scope="module")
def con() -> dpsql.Connection:
    return dpsql.connect(":memory:", POLICY, setup=_table, noise=SeededNoise(1))


def _subquery_rows(con: dpsql.Connection, query: str) -> list[tuple[t.Any, ...]]:
    """The statistics rows; the exponential mechanism's list (a window of ranks, or the value
    histogram it finds the window in) as the points the mechanism draws from."""
    prepared = con.prepare(query)
    cur = con.engine.connection.execute(prepared.sql)
    names = [d[0] for d in cur.description]
    rows = cur.fetchall()
    lists = {name: prep for prep in prepared.plan.prepared if prep.mechanism == "exponential"
             for name in [prep.column]}

    def points(name: str, value: t.Any) -> t.Any:
        return [list(p) for p in lists[name]._points([value])[0]] if name in lists else value

    return sorted((tuple(map(points, names, row)) for row in rows), key=repr)


@pytest.mark.parametrize("mechanism,options,p", [
    *[("exponential", "", p) for p in (0.0, 0.3, 0.5, 1.0)],
    *[("smooth", ", delta = 1e-6", p) for p in (0.3, 0.5)],
    *[("ptr", ", bound = 1, delta = 1e-6", p) for p in (0.3, 0.5)]])
@pytest.mark.parametrize("grouped", [False, True])
def test_value_histogram_equals_bucket_histogram(con: dpsql.Connection, mechanism: str, options: str,
                                                 p: float, grouped: bool) -> None:
    """The one-pass GROUP BY value of an integer column returns exactly what the two-pass bucket
    histogram returns for the same values as DOUBLE."""
    template = ("SELECT g, DP_QUANTILE({c}, {p}) FROM d GROUP BY g" if grouped
                else "SELECT DP_QUANTILE({c}, {p}) FROM d")
    template += f" WITH (mechanism = '{mechanism}', epsilon = 1{options})"
    fast, slow = (template.format(c=c, p=p) for c in ("xi", "xf"))
    assert "_vals0" not in con.prepare(fast).sql and "_vals0" in con.prepare(slow).sql
    got, want = _subquery_rows(con, fast), _subquery_rows(con, slow)

    def floats(x: t.Any) -> t.Any:  # the integer column's values come back as integers
        if isinstance(x, list):
            return [floats(y) for y in x]
        if isinstance(x, dict):
            return {k: floats(v) for k, v in x.items()}
        return float(x) if isinstance(x, int) and not isinstance(x, bool) else x

    assert floats(got) == floats(want)


def test_integer_median_is_a_whole_number(con: dpsql.Connection) -> None:
    for _ in range(5):
        rows = con.sql("SELECT g, DP_MEDIAN(xi) FROM d GROUP BY g WITH (epsilon = 1, delta = 1e-6)").fetchall()
        assert rows and all(float(v).is_integer() and 0 <= v <= 100 for _, v in rows if v is not None)
    explain = con.sql("EXPLAIN SELECT DP_MEDIAN(xi) FROM d WITH (epsilon = 1)").fetchall()
    assert "whole number of [L, U]" in str(explain)
    explain = con.sql("EXPLAIN SELECT DP_MEDIAN(xf) FROM d WITH (epsilon = 1)").fetchall()
    assert "whole number" not in str(explain)


# -- grouped additive release on whole columns -------------------------------------------------


class _Exact(NoiseSource):
    """No noise at all (a test double: releases the exact parts)."""

    def add_many(self, kind: str, values: t.Sequence[float], scale: float) -> list[float]:
        return [int(v) if kind.endswith("_int") else float(v) for v in values]


@pytest.mark.parametrize("stat", ["count", "sum", "mean", "var", "stddev"])
def test_columns_release_the_exact_statistics_without_noise(con: dpsql.Connection, stat: str) -> None:
    name = {"count": "DP_COUNT", "sum": "DP_SUM", "mean": "DP_MEAN", "var": "DP_VAR", "stddev": "DP_STDDEV"}[stat]
    prepared = con.prepare(f"SELECT g, {name}(xi) FROM d GROUP BY g WITH (epsilon = 1, keys = ['a', 'b', 'c', 'e', 'n'])")
    assert prepared.plan is not None
    prep = prepared.plan.prepared[0]
    data: dict[str, list[float]] = {}
    for g, x in con.engine.connection.execute("SELECT g, xi FROM d WHERE xi IS NOT NULL").fetchall():
        data.setdefault(g, []).append(min(max(x, 0), 100))
    groups = ["a", "b", "c", "e", "n"]
    fixed = prep.fixed  # the sums are of integers d (dpsql.mechanisms.fixed), computed here as the SQL does
    ints = {g: [int(x) if fixed is None else fixed.step(x) for x in xs] for g, xs in data.items()}
    stats = [{"n": len(ints.get(g, [])), "s": sum(ints.get(g, [])) if g in ints else None,
              "q": sum(d * d for d in ints.get(g, [])) if g in ints else None} for g in groups]
    out = prep.release_many(Groups.of(stats), _Exact())
    assert isinstance(out, ReleasedColumn) and len(out) == len(groups)
    for g, (value, entry) in zip(groups, out):
        xs = data.get(g, [])
        if stat == "count":
            assert value == len(xs)
        elif stat == "sum":
            assert value == sum(xs)
        elif stat == "mean":
            assert value == pytest.approx(sum(xs) / len(xs) if xs else 50.0)
        elif len(xs) >= 2:
            mu = sum(xs) / len(xs)
            var = sum((x - mu) ** 2 for x in xs) / (len(xs) - 1)
            assert value == pytest.approx(math.sqrt(var) if stat == "stddev" else var, abs=1e-9)
        assert entry.ci_half_width is not None and entry.ci_half_width >= 0
        # one group alone gives the same value and interval as in the column
        alone = prep.release(stats[groups.index(g)], _Exact())
        assert alone[0] == pytest.approx(value) and alone[1].ci_half_width == pytest.approx(entry.ci_half_width)
    summary = out.summary()
    assert summary.ci_half_width == max(e.ci_half_width for _, e in out)
    assert summary.note.endswith("widest of 5 groups")


def test_part_noise_keeps_integer_counts() -> None:
    from dpsql._accounting.budget import Cost

    part = NoisyPart("n", 1.0, "laplace", Cost(epsilon=1.0), integer=True)
    out = part.add_many([3.0, 4.0, 5.0], SeededNoise(2))
    assert all(isinstance(x, int) for x in out)


# -- the smooth profile from runs of equal values -------------------------------------------------


@pytest.mark.parametrize("distinct", [1, 2, 5, 40, None])
def test_gap_profile_equals_the_definition(distinct: int | None) -> None:
    import numpy as np

    from dpsql._privacy.exact import gap_profile

    rng = random.Random(distinct or 0)
    for top in (0, 1, 3, 17, 60):
        if distinct is None:
            v = sorted(rng.uniform(-5, 5) for _ in range(2 * top + 1))
        else:
            pool = sorted(rng.uniform(-5, 5) for _ in range(distinct))
            v = sorted(rng.choice(pool) for _ in range(2 * top + 1))
        arr = np.asarray(v)
        got = gap_profile(arr, top, 10**9)
        assert got is not None
        want = [max(v[top + t] - v[top + t - w] for t in range(w + 1)) for w in range(top + 1)]
        assert got.tolist() == want  # the same differences, to the last bit
    assert gap_profile(np.arange(41.0), 20, 10) is None  # too many runs for the budget


def test_smooth_sensitivity_by_runs_equals_the_direct_form(monkeypatch: pytest.MonkeyPatch) -> None:
    """On tied data the profile takes the runs path; the smooth bound is the same, to the last
    bit, as the direct O(k²) form's (the runs path switched off) and the full-data model's."""
    import numpy as np

    from dpsql._privacy import sensitivity as sens

    rng = random.Random(4)
    for n, distinct in ((400, 3), (400, 30), (2000, 101), (300, 300)):
        pool = [float(x) for x in range(distinct)]
        x = np.sort(np.array([rng.choice(pool) for _ in range(n)]))
        for relation, m in (("add_remove", 1), ("replace", 1), ("add_remove", 3), ("union", 2)):
            k = 40
            first, last = sens.window_ranks(n, 0.5, k, m)
            window = x[first - 1:last]
            a = sens.smooth_sensitivity_window(window, first, n, 0.5, 0.05, 0.0, float(distinct), k, relation, m)
            b = sens.smooth_sensitivity("quantile", x, 0.05, 0.0, float(distinct), relation, p=0.5, k_max=k,
                                        max_rows=m)
            with monkeypatch.context() as mp:
                mp.setattr(sens, "gap_profile", lambda *_args: None)
                c = sens.smooth_sensitivity_window(window, first, n, 0.5, 0.05, 0.0, float(distinct), k,
                                                   relation, m)
            assert a == b == c


# -- long noise vectors in parallel chunks --------------------------------------------------------


def test_map_chunks_keeps_order_and_splits_only_long_vectors(monkeypatch: pytest.MonkeyPatch) -> None:
    from dpsql._privacy import parallel

    monkeypatch.setattr(parallel, "workers", lambda: 4)
    calls: list[int] = []

    def draw(chunk: list[int]) -> list[int]:
        calls.append(len(chunk))
        return [x * 2 for x in chunk]

    values = list(range(10_000))
    assert parallel.map_chunks(draw, values, min_chunk=1000) == [x * 2 for x in values]
    assert sorted(calls) == [2500] * 4
    calls.clear()
    assert parallel.map_chunks(draw, values[:1500], min_chunk=1000) == [x * 2 for x in values[:1500]]
    assert calls == [1500]  # too short to split


def test_secure_vectors_in_chunks_have_the_right_law(monkeypatch: pytest.MonkeyPatch) -> None:
    from dpsql._privacy import parallel
    from dpsql._privacy.noise import SecureNoise

    monkeypatch.setattr(parallel, "workers", lambda: 3)
    monkeypatch.setattr(parallel, "MIN_CHUNK", 500)
    noise = SecureNoise()
    for kind, value in (("laplace_int", 7), ("laplace", 7.25), ("gaussian", -3.5)):
        out = noise.add_many(kind, [value] * 6000, 2.0)
        assert len(out) == 6000 and all(isinstance(x, int if kind.endswith("_int") else float) for x in out)
        mean = sum(out) / len(out)
        var = sum((x - mean) ** 2 for x in out) / (len(out) - 1)
        want_var = 4.0 if kind == "gaussian" else 2 * 2.0**2  # Laplace b = 2: 2b²; discrete: about
        assert abs(mean - value) < 0.2 and 0.8 * want_var < var < 1.2 * want_var
        assert len(set(out[:3000])) > 10 and out[:2000] != out[2000:4000]  # chunks are not copies


def test_key_order_sorts_in_arrow_and_falls_back_for_other_types() -> None:
    import uuid

    from dpsql._query.pipeline import key_order

    assert key_order([("b", 2), (None, 1), ("a", 3), ("a", 1)], 2) == [3, 2, 0, 1]
    ids = [uuid.UUID(int=5), None, uuid.UUID(int=1)]  # Arrow cannot infer a type for UUIDs
    assert key_order([(x,) for x in ids], 1) == [2, 0, 1]
    assert key_order([(1, "x"), (1, None), (0, "y")], 2) == [2, 0, 1]


@pytest.mark.parametrize("kind", ["int32", "int64", "float64", "float_nan", "nulls", "ties", "nans"])
def test_one_numeric_key_sorts_in_numpy_as_arrow_would(kind: str) -> None:
    """One key column of numbers is sorted by numpy; the order is Arrow's stable order, and
    columns numpy cannot order uniquely (NULLs, repeated keys, two NaNs) go to Arrow."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from dpsql._query.pipeline import _numeric_order, key_order_arrays

    rng = np.random.Generator(np.random.PCG64(5))
    values: list = rng.permutation(5000).tolist()
    if kind.startswith("float") or kind == "nans":
        values = [v / 7 - 300.0 for v in values]
    if kind == "float_nan":
        values[17] = math.nan
    if kind == "nans":
        values[3] = values[9] = math.nan
    if kind == "nulls":
        values[11] = None
    if kind == "ties":
        values[40] = values[41]
    key = pa.array(values, type=pa.int32() if kind == "int32" else None)
    arrow = pc.sort_indices(pa.table({"k": key}), sort_keys=[("k", "ascending")]).to_pylist()
    assert key_order_arrays([key]).to_pylist() == arrow
    assert (_numeric_order(key) is None) == (kind in ("nulls", "ties", "nans"))


def test_the_quantile_column_release_is_the_group_by_group_release(con: dpsql.Connection) -> None:
    """The exponential mechanism's ``release_many`` (one report entry for the column) draws what
    ``release`` draws group by group, in the same order, from the same noise."""
    plan = con.prepare("SELECT g, DP_MEDIAN(xi) FROM d GROUP BY g WITH (epsilon = 1)").plan
    assert plan is not None
    prep = plan.prepared[0]
    windows = [[{"v": 30.0 + j, "c": 2, "r": 2 * j + 2} for j in range(5)], None, [{"v": 50.0, "c": 1, "r": 1}]]
    groups = [{"n": 10, prep.column: windows[0]}, {"n": 0, prep.column: None}, {"n": 1, prep.column: windows[2]}]
    columns = Groups.of(groups)
    out = prep.release_many(columns, SeededNoise(3))
    noise = SeededNoise(3)
    one_by_one = [prep.release(g, noise) for g in groups]
    assert isinstance(out, ReleasedColumn) and list(out) == one_by_one


_KEYS_OF = {
    "BIGINT": [3, None, -7, 3, 0, 2**40],
    "DOUBLE": [2.5, math.nan, None, -0.5, float("inf"), -float("inf"), 2.5],
    "DECIMAL(15,2)": [None, "10.25", "-3.10", "0.00", "10.25"],
    "VARCHAR": ["b", None, "", "Z", "é", "a", "ab", "b"],
    "DATE": ["1998-09-02", None, "1992-01-01", "1998-09-02"],
    "TIMESTAMP": ["2020-01-01 00:00:01", None, "2019-12-31 23:59:59"],
    "BOOLEAN": [True, None, False, True],
}


@pytest.mark.parametrize("kind", sorted(_KEYS_OF))
def test_keys_sorted_in_arrow_come_in_duckdbs_order_by(kind: str) -> None:
    """A query ordered by its keys is sorted in the release, not by the engine
    (:func:`dpsql._sql.postprocess.renamed_columns`); for every key type it admits, that order is
    DuckDB's ``ORDER BY`` (NULLs last, NaN above every number), alone and under a second key."""
    import duckdb

    from dpsql._query.pipeline import key_order_arrays
    from dpsql._sql.postprocess import _SORTED_ALIKE

    assert kind.split("(")[0] in _SORTED_ALIKE
    values = _KEYS_OF[kind]
    scratch = duckdb.connect()
    scratch.execute(f"CREATE TABLE t AS SELECT CAST(v AS {kind}) AS k0, i % 2 AS k1 "
                    "FROM unnest(?) WITH ORDINALITY AS u(v, i)", [[None if v is None else str(v) for v in values]])
    keys = scratch.sql("SELECT k0, k1 FROM t").to_arrow_table()
    for n in (1, 2):
        names = ", ".join(f"k{j}" for j in range(n))
        want = scratch.execute(f"SELECT {names} FROM t ORDER BY {names}").fetchall()
        order = key_order_arrays([keys.column(j).combine_chunks() for j in range(n)]).to_pylist()
        got = [tuple(keys.column(j)[i].as_py() for j in range(n)) for i in order]
        assert repr(got) == repr(want)  # repr: NaN equals NaN, and 0 does not equal False
        assert got != [tuple(keys.column(j)[i].as_py() for j in range(n)) for i in range(len(values))]


def test_a_query_ordered_by_its_keys_is_sorted_in_the_release_and_comes_in_that_order(seeded_demo) -> None:
    """ORDER BY the keys takes the release's own sort; any other order goes through the engine.
    Both give the keys in the same order."""
    con = seeded_demo(12)
    fast = "SELECT race, sex, DP_COUNT(*) FROM adult GROUP BY race, sex ORDER BY race, sex"
    assert con.prepare(fast + " WITH (epsilon = 1)").bound.outer_columns is not None
    unordered = fast.replace(" ORDER BY race, sex", "")
    assert con.prepare(unordered + " WITH (epsilon = 1)").bound.outer_columns is not None  # key order too
    slow = fast + " LIMIT 1000"
    assert con.prepare(slow + " WITH (epsilon = 1)").bound.outer_columns is None
    assert con.prepare(fast.replace("ORDER BY race, sex", "ORDER BY sex, race")
                       + " WITH (epsilon = 1)").bound.outer_columns is None
    rows = [con.sql(q + " WITH (epsilon = 1)").fetchall() for q in (fast, slow)]
    assert [r[:2] for r in rows[0]] == [r[:2] for r in rows[1]] == sorted(r[:2] for r in rows[0])
    assert len(rows[0]) == 10
