"""Zero-row probes never hand analyst SQL over a private table to DuckDB.

A probe (``LIMIT 0``, a constant-false WHERE) is answered with names and types from dpsql's own
resolution of the query. Binding it in DuckDB was a leak: DuckDB binds a dynamic PIVOT by
reading the table, and the names of the pivot columns are data (one person's occupation and
capital gain, or almost every record at once), at no cost. These tests check

* every spelling of that probe is refused, through every interface, and charges nothing;
* row probes are still answered (BI tools need the columns), alike in every interface;
* a spy on the engine's DuckDB connection sees no statement that names a private table while
  probes are answered: what DuckDB binds are typed empty stand-ins.
"""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

import dpsql
from dpsql import dbapi
from dpsql._sql.shadow import emptied, stand_in
from dpsql.interfaces.demo import load_adult
from tests.conftest import demo_policy

PIVOT_ONE = ("PIVOT adult ON CASE WHEN fnlwgt = 77516 THEN occupation || '|' || "
             "CAST(capital_gain AS VARCHAR) ELSE 'x' END")
PIVOT_ALL = "PIVOT adult ON concat_ws('|', age, fnlwgt, occupation, sex, capital_gain)"

#: every spelling of the pivot probe: none may be answered
PIVOT_PROBES = [
    f"SELECT * FROM ({PIVOT_ONE}) LIMIT 0",
    f"SELECT * FROM ({PIVOT_ONE}) WHERE 1=0",
    f"SELECT * FROM ({PIVOT_ALL}) LIMIT 0",
    f"WITH p AS ({PIVOT_ONE}) SELECT * FROM p LIMIT 0",
    f"WITH p AS ({PIVOT_ONE}) SELECT * FROM p WHERE false",
    "SELECT * FROM (PIVOT_WIDER adult ON occupation) LIMIT 0",
    "SELECT * FROM (UNPIVOT adult ON age, fnlwgt INTO NAME k VALUE v) LIMIT 0",
    "SELECT * FROM adult PIVOT (count(*) FOR sex IN ('Male', 'Female')) LIMIT 0",
    f"SELECT * FROM (SELECT * FROM ({PIVOT_ONE})) AS s LIMIT 0",
    f"FROM ({PIVOT_ONE}) LIMIT 0",
    f"SELECT * FROM ({PIVOT_ONE}) LIMIT 0 OFFSET 0",
    f"SELECT * FROM ({PIVOT_ONE}) WHERE 1 = 0 AND true",
]

#: row probes that are answered: (query, expected [(name, DuckDB-ish arrow type)])
ROW_PROBES = [
    ("SELECT * FROM adult WHERE 1=0", None),
    ("SELECT * FROM adult LIMIT 0", None),
    ("SELECT age, sex FROM adult LIMIT 0", [("age", "int64"), ("sex", "string")]),
    ("SELECT age / 10 AS decade, upper(sex) AS s FROM adult WHERE 1 = 0", [("decade", "double"), ("s", "string")]),
    ("WITH x AS (SELECT age * 2 AS a2, sex FROM adult) SELECT * FROM x LIMIT 0", [("a2", "int64"), ("sex", "string")]),
    ("SELECT * EXCLUDE (age) FROM adult LIMIT 0", None),
]


def _con(**kw) -> dpsql.Connection:
    return dpsql.connect(":memory:", demo_policy(epsilon=10.0, delta=1e-5), setup=load_adult, **kw)


@pytest.fixture(scope="module")
def con():
    c = _con()
    yield c
    c.close()


class _Spy:
    """The engine's DuckDB connection, recording the text of every statement it is given."""

    def __init__(self, inner) -> None:
        self._inner = inner
        self.seen: list[str] = []

    def execute(self, sql, *args, **kw):
        self.seen.append(str(sql))
        return self._inner.execute(sql, *args, **kw)

    def sql(self, sql, *args, **kw):
        self.seen.append(str(sql))
        return self._inner.sql(sql, *args, **kw)

    def __getattr__(self, name):
        return getattr(self._inner, name)


@pytest.mark.parametrize("query", PIVOT_PROBES)
def test_pivot_probes_are_refused_and_charge_nothing(con, query) -> None:
    before = con.budget.spent.epsilon
    with pytest.raises(dpsql.PrivacyError) as err:
        con.sql(query)
    message = str(err.value)
    assert "\n" not in message
    assert "Adm-clerical" not in message and "2174" not in message
    assert con.budget.spent.epsilon == before


@pytest.mark.parametrize("query,expected", ROW_PROBES)
def test_row_probes_are_answered_with_names_and_types(con, query, expected) -> None:
    before = con.budget.spent.epsilon
    table = con.sql(query).arrow()
    assert table.num_rows == 0
    got = [(f.name, str(f.type)) for f in table.schema]
    if expected is not None:
        assert got == expected
    else:
        assert {"sex", "occupation"} <= {name for name, _ in got} and len(got) >= 14
    assert con.budget.spent.epsilon == before


def test_no_statement_that_names_a_private_table_reaches_duckdb_for_a_probe() -> None:
    c = _con()
    try:
        spy = _Spy(c.engine.connection)
        c.engine.connection = spy
        for query, _ in ROW_PROBES:
            c.sql(query)
        for query in PIVOT_PROBES:
            with pytest.raises(dpsql.Error):
                c.sql(query)
        # a DP probe and a GROUP BY over an expression: typed from the plan and stand-ins
        c.sql("SELECT age / 10 AS d, DP_COUNT(*) FROM adult GROUP BY age / 10 LIMIT 0 WITH (epsilon = 1, delta = 1e-6)")
        assert spy.seen, "the spy saw nothing: it does not watch the engine's connection"
        leaked = [s for s in spy.seen if '"adult"' in s.lower() or " adult" in s.lower()]
        assert leaked == []
        assert c.budget.spent.epsilon == 0
    finally:
        c.close()


def test_group_key_types_come_from_stand_ins_not_the_table() -> None:
    c = _con()
    try:
        spy = _Spy(c.engine.connection)
        c.engine.connection = spy
        prepared = c.prepare("SELECT age / 10 AS d, DP_COUNT(*) FROM adult GROUP BY age / 10 WITH (epsilon = 1, delta = 1e-6)")
        assert prepared.bound.group_types == ["DOUBLE"]
        described = [s for s in spy.seen if s.startswith("DESCRIBE")]
        assert described and all("LIMIT 0" in s and '"adult"' not in s for s in described)
    finally:
        c.close()


def test_stand_in_keeps_names_types_and_alias() -> None:
    import sqlglot

    stmt = sqlglot.parse_one('SELECT t.a FROM "db"."main"."tb" AS t JOIN other AS o ON t.a = o.a', read="duckdb")
    out = emptied(stmt, lambda node: {"a": "INTEGER"} if node.name == "tb" else None).sql(dialect="duckdb")
    assert out.startswith('SELECT t.a FROM (SELECT CAST(NULL AS INT) AS "a" LIMIT 0) AS t JOIN other AS o')
    assert stand_in({"s": "STRUCT(a INTEGER)"}).sql(dialect="duckdb") == '(SELECT CAST(NULL AS STRUCT(a INT)) AS "s" LIMIT 0)'


# -- the same answer through every interface -------------------------------------------------


def test_dbapi_description_of_a_probe_and_refusal_of_the_pivot() -> None:
    c = dbapi.connect(":memory:", demo_policy(epsilon=10.0, delta=1e-5), setup=load_adult)
    try:
        cur = c.cursor()
        cur.execute("SELECT age, sex FROM adult WHERE 1=0")
        assert [d[0] for d in cur.description] == ["age", "sex"]
        assert cur.fetchall() == []
        with pytest.raises(dbapi.Error) as err:
            cur.execute(PIVOT_PROBES[0])
        assert isinstance(err.value, dpsql.PrivacyError)
        assert cur.description is None or all("Adm-clerical" not in d[0] for d in cur.description)
    finally:
        c.close()


def test_sqlalchemy_keys_of_a_probe_and_refusal_of_the_pivot() -> None:
    sa = pytest.importorskip("sqlalchemy")  # installed with the test extra
    engine = sa.create_engine("dpsql:///:memory:?demo=1")
    try:
        with engine.connect() as conn:
            result = conn.execute(sa.text("SELECT age, sex FROM adult LIMIT 0"))
            assert list(result.keys()) == ["age", "sex"]
            with pytest.raises(sa.exc.DBAPIError) as err:
                conn.execute(sa.text(PIVOT_PROBES[1]))
            assert "Adm-clerical" not in str(err.value)
    finally:
        engine.dispose()


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    return subprocess.run([sys.executable, "-m", "dpsql", "--demo", "--format", "csv", *args],
                          capture_output=True, text=True, timeout=120, env=env)


def test_cli_header_of_a_probe_and_refusal_of_the_pivot() -> None:
    out = _cli("-c", "SELECT age, sex FROM adult WHERE 1=0")
    assert out.returncode == 0, out.stderr
    assert next(csv.reader(io.StringIO(out.stdout))) == ["age", "sex"]
    out = _cli("-c", PIVOT_PROBES[0])
    assert out.returncode != 0
    assert "Adm-clerical" not in out.stdout + out.stderr
    assert "Traceback" not in out.stderr and out.stderr.startswith("Error:")


def test_a_query_with_a_where_clause_is_parsed_once(monkeypatch) -> None:
    from dpsql._sql import dialect

    c = _con()
    calls = []
    real = dialect.parse
    monkeypatch.setattr(dialect, "parse", lambda text, *a, **k: calls.append(text) or real(text, *a, **k))
    try:
        c.sql("SELECT DP_COUNT(*) FROM adult WHERE age > 30 WITH (epsilon = 0.1)")
        assert len(calls) == 1
        c.sql("SELECT DP_COUNT(*) FROM adult WITH (epsilon = 0.1)")
        assert len(calls) == 2
    finally:
        c.close()


def test_a_statement_run_again_is_not_parsed_again_and_a_probe_stays_a_probe(monkeypatch) -> None:
    """Whether a text is a probe depends on the text, the policy and the catalog alone: a text
    found not to be one is not parsed again to ask (its plan is kept too), while a probe's text
    is answered as a probe every time (``explain`` refuses it: it is no DP query)."""
    from dpsql._sql import dialect

    c = _con()
    calls = []
    real = dialect.parse
    monkeypatch.setattr(dialect, "parse", lambda text, *a, **k: calls.append(text) or real(text, *a, **k))
    query = "SELECT DP_COUNT(*) FROM adult WHERE age > 30 WITH (epsilon = 0.1)"
    probe = "SELECT age, sex FROM adult LIMIT 0"
    try:
        c.sql(query)
        c.sql(query)
        assert calls == [query]
        with pytest.raises(dpsql.PrivacyError):
            c.explain(probe)
        charged = len(c.budget.history)
        for _ in range(2):
            table = c.sql(probe).arrow()
            assert table.num_rows == 0 and table.column_names == ["age", "sex"]
        assert len(c.budget.history) == charged  # answered as a probe: nothing charged
    finally:
        c.close()
