"""Exact sums over joins, with bounds far from zero relative to their width (issue 27 §2).

tests/test_exact_sums.py brute-forces one table; here the statistics come from a join: two tables
of one id unit joined on it (the truncation after the join keeps m rows of a unit), and a private
join of row-unit tables under ``drop_excess``. A person's change must move every exact part the
rewritten statement returns by at most the sensitivity its noise is calibrated to, on top of
9,999 common rows whose float sums would round in steps larger than that sensitivity. The
neighbours: a unit added (its rows in both tables) or removed, with values from both bounds,
the centre, and out of range on both sides.
"""

from __future__ import annotations

import itertools
import typing as t
from fractions import Fraction

import duckdb
import pytest

from dpsql._policy.policy import load_policy
from dpsql._query.pipeline import prepare
from dpsql.backends.duck import DuckDBEngine

LO, HI = 1e9, 1e9 + 0.001
BASE = [LO + ((i * 7919) % 10007) / 10007 * 0.001 for i in range(9999)]
#: a unit's values: both bounds, the centre, and far outside on both sides (clipped)
UNIVERSE = (LO, HI, (LO + HI) / 2, LO - 1.0, HI + 1.0)
COLUMNS = {"x": {"lower": LO, "upper": HI}}


def _policy(unit: str, m: int, u_unit: str, extra: dict | None = None) -> dict:
    tables = {"t": {"privacy_unit": unit, "max_rows_per_unit": m, "columns": COLUMNS, **(extra or {})},
              "u": {"privacy_unit": u_unit, "max_rows_per_unit": m, "columns": {"y": {"lower": LO, "upper": HI}},
                    **(extra or {})}}
    if unit != "row":
        for spec in tables.values():
            spec["unit_name"] = "person"
    return {"neighbouring": "add_remove", "budget": {"epsilon": 1e6, "delta": 0.5}, "tables": tables}


class JoinStatement:
    """A query over ``t(pid, k, x)`` and ``u(pid, k, y)`` prepared once, run on the base rows plus
    extra rows: the exact parts of every released aggregate."""

    def __init__(self, query: str, policy: dict, base_t: list[tuple], base_u: list[tuple]) -> None:
        self.con = duckdb.connect()
        self.con.execute("CREATE TABLE t (pid BIGINT, k BIGINT, x DOUBLE)")
        self.con.execute("CREATE TABLE u (pid BIGINT, k BIGINT, y DOUBLE)")
        prepared = prepare(query, load_policy(policy), DuckDBEngine(self.con))
        assert prepared.plan is not None and prepared.rewritten is not None
        self.plan, self.rw, self.sql = prepared.plan, prepared.rewritten, prepared.sql
        for name in ("t", "u"):
            self.con.execute(f"ALTER TABLE {name} RENAME TO base_{name}")
            self.con.execute(f"CREATE TABLE extra_{name} AS SELECT * FROM base_{name} LIMIT 0")
            self.con.execute(f"CREATE VIEW {name} AS SELECT * FROM base_{name} UNION ALL SELECT * FROM extra_{name}")
        _insert(self.con, "base_t", base_t)
        _insert(self.con, "base_u", base_u)

    def parts(self, extra_t: t.Sequence[tuple], extra_u: t.Sequence[tuple]) -> dict[str, Fraction]:
        for name, rows in (("t", extra_t), ("u", extra_u)):
            self.con.execute(f"DELETE FROM extra_{name}")
            _insert(self.con, f"extra_{name}", rows)
        cur = self.con.execute(self.sql)
        names = [d[0] for d in cur.description]
        (values,) = cur.fetchall()
        row = dict(zip(names, values))
        out = {}
        for prep in self.plan.prepared:
            stats = {s: row[c] for (i, s), c in self.rw.columns.items() if i == prep.agg.index}
            for name, value in prep.exact(stats).items():
                out[f"{prep.label} {name}"] = value
        return out

    def sensitivities(self) -> dict[str, Fraction]:
        return {f"{prep.label} {name}": Fraction(part.sensitivity)
                for prep in self.plan.prepared for name, part in prep.parts.items()}


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: t.Sequence[tuple]) -> None:
    if rows:
        pids, ks, vs = (list(col) for col in zip(*rows))
        con.execute(f"INSERT INTO {table} SELECT UNNEST(?::BIGINT[]), UNNEST(?::BIGINT[]), UNNEST(?::DOUBLE[])",
                    [pids, ks, vs])


def _worst(st: JoinStatement, neighbours: t.Iterable[tuple[list, list]]) -> dict[str, tuple[Fraction, Fraction]]:
    """Largest move of each part between the base and each neighbour, with its sensitivity."""
    base = st.parts([], [])
    sens = st.sensitivities()
    worst: dict[str, tuple[Fraction, Fraction]] = {}
    for extra_t, extra_u in neighbours:
        for label, value in st.parts(extra_t, extra_u).items():
            moved = abs(value - base[label])
            if moved >= worst.get(label, (Fraction(-1), sens[label]))[0]:
                worst[label] = (moved, sens[label])
    return worst


def _check(worst: dict[str, tuple[Fraction, Fraction]]) -> None:
    assert worst
    for label, (moved, sensitivity) in worst.items():
        assert moved <= sensitivity, (label, float(moved), float(sensitivity))


def test_a_join_of_two_tables_of_one_id_unit() -> None:
    """A person with 1 to 3 rows in ``t`` and 1 or 2 in ``u`` (up to 6 joined rows, of which the
    truncation keeps m = 2) added to 9,999 people of one row each: every part of SUM, MEAN and VAR
    moves by at most its sensitivity."""
    query = ("SELECT DP_SUM(x), DP_MEAN(x), DP_VAR(y), DP_STDDEV(x) FROM t JOIN u ON t.pid = u.pid "
             "WITH (epsilon = 1)")
    st = JoinStatement(query, _policy("pid", 2, "pid"), [(i, 0, v) for i, v in enumerate(BASE)],
                       [(i, 0, v) for i, v in enumerate(reversed(BASE))])
    new = 10**6
    neighbours = [([(new, 0, a) for a in xs], [(new, 0, b) for b in ys])
                  for n_t in (1, 3) for xs in itertools.combinations_with_replacement(UNIVERSE, n_t)
                  for ys in ([HI], [LO, HI - 0.0004], [LO - 1.0, HI + 1.0])]
    neighbours.append(([], []))
    worst = _worst(st, neighbours)
    _check(worst)
    assert len(worst) == 1 + 2 + 3 + 3  # sum s; mean n, s1; var and stddev n, s1, s2
    # the bound is reached: with noise for one row of the person (m = 1) the check fails
    assert all(moved == sensitivity for moved, sensitivity in worst.values())


def test_a_private_join_of_row_units_under_drop_excess() -> None:
    """Row units joined on a key, each side keeping one row per key (``drop_excess(1)``): a row
    added on either side, at any value of the universe, under a key of the base or a new one."""
    query = "SELECT DP_SUM(x), DP_MEAN(y) FROM t JOIN u ON t.k = u.k WITH (epsilon = 1)"
    extra = {"join_truncation": "drop_excess(1)"}
    policy = _policy("row", 1, "row", extra)
    # key 0 is in t only and key 9,999 in u only: a row added there joins one row of the other side
    st = JoinStatement(query, policy, [(i, i, v) for i, v in enumerate(BASE)],
                       [(i, i + 1, v) for i, v in enumerate(reversed(BASE))])
    neighbours = [([(10**6, k, v)], []) for k in (3, len(BASE), 10**6) for v in UNIVERSE]
    neighbours += [([], [(10**6, k, v)]) for k in (0, 3, 10**6) for v in UNIVERSE]
    worst = _worst(st, neighbours)
    _check(worst)
    # a row joined under a key of one row on the other side is worth its whole value
    assert worst["DP_SUM(x) s"][0] >= Fraction(HI) - 1 and worst["DP_MEAN(y) n"][0] >= 1


# -- the data-dependent paths: PTR and smooth sensitivity of the mean ------------------------------


@pytest.mark.parametrize("options", ["mechanism = 'ptr', bound = 0.000001, epsilon = 1, delta = 1e-6",
                                     "mechanism = 'smooth', epsilon = 1, delta = 1e-6"])
def test_the_exact_mean_of_ptr_and_smooth_moves_by_at_most_its_local_sensitivity(options: str) -> None:
    """PTR's distance and the smooth sensitivity of the mean are those of the exact mean Σd/n of
    the grid's integers: adding one value in [L, U] (clipped) to n values moves it by at most
    width/(n + 1), which a float AVG of 9,999 values near 1e9 exceeds (its sum rounds in steps of
    about 0.002 where width/(n + 1) is 1e-7)."""
    from dpsql.mechanisms.datadep import exact_mean

    st = JoinStatement(f"SELECT DP_MEAN(x) FROM t WITH ({options})", _policy("row", 1, "row"),
                       [(i, 0, v) for i, v in enumerate(BASE)], [])
    prep = st.plan.prepared[0]
    grid = prep.fixed
    assert grid is not None

    def mean(extra: list[tuple]) -> tuple[int, Fraction]:
        for name, rows in (("t", extra), ("u", [])):
            st.con.execute(f"DELETE FROM extra_{name}")
            _insert(st.con, f"extra_{name}", rows)
        cur = st.con.execute(st.sql)
        row = dict(zip([d[0] for d in cur.description], cur.fetchall()[0]))
        stats = {s: row[c] for (i, s), c in st.rw.columns.items() if i == prep.agg.index}
        return exact_mean(grid, stats)

    n, base = mean([])
    assert n == len(BASE)
    moves = []
    for v in UNIVERSE:
        n1, f = mean([(10**6, 0, v)])
        assert n1 == n + 1
        moves.append(abs(f - base))
        assert abs(f - base) <= Fraction(grid.width) / (n + 1), (v, float(abs(f - base)))
    # a value at a bound moves it by nearly the whole bound: the check can fail
    assert max(moves) >= Fraction(grid.width) / (n + 1) / 3

    # the float AVG of the same rows: its move exceeds the exact bound (the finding, on this path)
    con = duckdb.connect()
    con.execute("CREATE TABLE f AS SELECT UNNEST(?::DOUBLE[]) AS x", [BASE])
    a0 = con.execute("SELECT SUM(x) / COUNT(x) FROM f").fetchone()[0]
    con.execute("INSERT INTO f VALUES (?)", [HI])
    a1 = con.execute("SELECT SUM(x) / COUNT(x) FROM f").fetchone()[0]
    assert abs(Fraction(a1) - Fraction(a0)) > Fraction(grid.width) / (n + 1)
