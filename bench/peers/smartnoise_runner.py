"""SmartNoise SQL, its rewritten SQL executed on DuckDB. Run with the peer's venv python.

SmartNoise ships readers for pandas (through SQLite), PostgreSQL, Spark and others, none for
DuckDB. Its PostgreSQL serializer's output is valid DuckDB SQL, so a small DB-API adapter
hands the rewritten query to an in-memory DuckDB holding the same table (``public.people``).

SmartNoise spends its ε once per internal mechanism (an AVG is a noisy SUM and a noisy COUNT,
plus the COUNT that decides which groups to show): to spend the same ε per *query* as the
others, each query runs at ε divided by the number of mechanisms SmartNoise reports for it
(``get_privacy_cost``).
"""

from __future__ import annotations

import sys
import warnings

import _runner as R
import duckdb
import snsql
from snsql import Privacy

warnings.filterwarnings("ignore")
PKGS = ("smartnoise-sql", "duckdb")


class Cursor:
    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con, self.description, self.rows = con, None, []

    def execute(self, query: str) -> None:
        cur = self.con.execute(query)
        self.description = cur.description
        self.rows = cur.fetchall() if cur.description else []

    def __iter__(self):
        return iter(self.rows)


class Adapter:
    """The DB-API subset SmartNoise's PostgreSQL reader uses."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def cursor(self) -> Cursor:
        return Cursor(self.con)

    def commit(self) -> None:
        pass

    def rollback(self) -> None:
        pass


def metadata(table: str, rows: int, columns: dict, censor: bool) -> dict:
    return {"bench": {"public": {table: {"rows": rows, "row_privacy": True, "max_ids": 1,
                                         "censor_dims": censor, **columns}}}}


class Reader:
    """One private reader per ε; each query runs at ε / (mechanisms in the query)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, meta: dict) -> None:
        self.con, self.meta, self.readers, self.factor = con, meta, {}, {}

    def reader(self, eps: float):
        if eps not in self.readers:
            self.readers[eps] = snsql.from_connection(
                Adapter(self.con), engine="postgres", metadata=self.meta,
                privacy=Privacy(epsilon=eps, delta=R.DELTA))
        return self.readers[eps]

    def query(self, sql: str, eps: float) -> list:
        if sql not in self.factor:
            cost = self.reader(1.0).get_privacy_cost(sql)
            self.factor[sql] = float(cost[0])
        return self.reader(eps / self.factor[sql]).execute(sql)[1:]


def main() -> None:
    a = R.args()
    con = duckdb.connect()
    con.execute("CREATE SCHEMA IF NOT EXISTS public")
    if a.mode == "speed":
        meta = metadata("people", a.rows, {
            "id": {"type": "int"},
            "age": {"type": "int", "lower": 0, "upper": 100},
            "income": {"type": "float", "lower": 0.0, "upper": 200000.0},
            "zip": {"type": "string"},
        }, censor=True)
        r = Reader(con, meta)

        def load() -> Reader:
            con.execute(f"CREATE TABLE public.people AS SELECT * FROM read_parquet('{a.data}')")
            return r

        cases = {
            "count": lambda r: r.query("SELECT COUNT(*) FROM public.people", 1.0),
            "sum": lambda r: r.query("SELECT SUM(age) FROM public.people", 1.0),
            "mean": lambda r: r.query("SELECT AVG(income) FROM public.people", 1.0),
            "var": lambda r: r.query("SELECT VAR(income) FROM public.people", 1.0),
            "group_by_zip_mean": lambda r: r.query("SELECT zip, AVG(income) FROM public.people GROUP BY zip", 1.0),
        }
        R.speed(a, load, cases, PKGS, {"median_exponential": "no median",
                                        "all": "ε per query divided by SmartNoise's mechanism count"})
        return

    meta = metadata("adult", 32561, {"age": {"type": "int", "lower": 0, "upper": 100},
                                     "sex": {"type": "string"}}, censor=False)
    r = Reader(con, meta)

    def load() -> Reader:
        con.execute(f"CREATE TABLE public.adult AS SELECT age, sex FROM read_parquet('{a.data}')")
        return r

    stats = {
        "mean_age": lambda r, e: float(r.query("SELECT AVG(age) FROM public.adult", e)[0][0]),
        "count_by_sex": lambda r, e: {k: float(v) for k, v in r.query(
            "SELECT sex, COUNT(*) FROM public.adult GROUP BY sex", e)},
    }
    R.accuracy(a, load, stats, PKGS, {"median_age": "no median",
                                      "all": "ε per query divided by SmartNoise's mechanism count"})


if __name__ == "__main__":
    sys.exit(main())
