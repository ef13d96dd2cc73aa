"""A public key domain reaches DuckDB as a table of DuckDB's text of each key, cast back to the
group types in the statement (dpsql/_plan/keys.py).

The statement dpsql runs reads ``__domain``, an Arrow table registered while it runs; the same
statement with the domain written in as ``VALUES`` (``rewritten.sql``, what ``rewritten_sql``
returns) must give exactly the same rows. Keys come out with their group expression's type, as
τ-selected keys do.
"""

from __future__ import annotations

import datetime
import math

import duckdb
import pytest

import dpsql
from dpsql._plan import keys
from dpsql._plan import rewrite as rewrite_module
from tests.conftest import demo_policy

COLUMNS = {
    "i": ("SMALLINT", [16, 17, -3, None]),
    "d": ("DOUBLE", [1.5, "nan", "-inf", 0.1, None]),
    "day": ("DATE", ["2020-01-01", "2020-01-02", None]),
    "ts": ("TIMESTAMP", ["2020-01-01 10:00:00", "2021-06-30 23:59:59.5"]),
    "m": ("DECIMAL(6, 2)", ["1.50", 2, "-0.25"]),
    "s": ("VARCHAR", ["a", "it's", "", "ünï, code", None]),
    "b": ("BOOLEAN", [True, False, None]),
    "u": ("UUID", ["00000000-0000-0000-0000-000000000001", "ffffffff-ffff-ffff-ffff-ffffffffffff"]),
}


def _setup(con: duckdb.DuckDBPyConnection) -> None:
    columns = ", ".join(f"{name} {dtype}" for name, (dtype, _) in COLUMNS.items())
    con.execute(f"CREATE TABLE t ({columns}, x DOUBLE)")
    con.execute("INSERT INTO t VALUES (16, 1.5, '2020-01-01', '2020-01-01 10:00:00', 1.5, 'a', TRUE, "
                "'00000000-0000-0000-0000-000000000001', 1), "
                "(NULL, 'nan', NULL, NULL, -0.25, '', NULL, NULL, 2), "
                "(99, 7, '1999-01-01', NULL, 3, 'zz', FALSE, NULL, 3)")
    con.execute("CREATE TABLE __domain AS SELECT 'not the domain' AS __k0")  # a user's table of that name


@pytest.fixture(autouse=True)
def _handed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every domain handed over as a table here, however small (a small one is otherwise written
    in as ``VALUES``: tests/test_key_domain_inline.py)."""
    monkeypatch.setattr(rewrite_module, "INLINE_KEYS", 0)


@pytest.fixture(scope="module")
def con() -> dpsql.Connection:
    pol = demo_policy(epsilon=1000.0)
    pol["tables"]["t"] = {"columns": {"x": {"lower": 0, "upper": 10},
                                      **{name: {"keys": ks} for name, (_, ks) in COLUMNS.items()}}}
    c = dpsql.connect(":memory:", pol, setup=_setup)
    yield c
    c.close()


def _same(a: object, b: object) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def _rows(rows: list[tuple]) -> list[tuple]:
    return sorted(rows, key=repr)


@pytest.mark.parametrize("group", [*COLUMNS, "i, day", "s, b"])
def test_the_table_and_the_values_list_give_the_same_statistics(con: dpsql.Connection, group: str) -> None:
    prepared = con.prepare(f"SELECT {group}, DP_COUNT(*), DP_SUM(x) FROM t GROUP BY {group} WITH (epsilon = 1)")
    rewritten = prepared.rewritten
    assert list(rewritten.tables) == ["__domain"] and "VALUES" not in rewritten.statement
    names, table_rows = con.engine.statistics(rewritten.statement, rewritten.arrow_tables)
    names2, values_rows = con.engine.statistics(prepared.sql)
    assert names == names2 and len(table_rows) == len(prepared.plan.public_keys)
    assert len(_rows(table_rows)) == len(_rows(values_rows))
    for a, b in zip(_rows(table_rows), _rows(values_rows)):
        assert all(_same(x, y) for x, y in zip(a, b)), (a, b)
    # the user's own table named __domain is untouched and was not read
    assert con.engine.connection.execute("SELECT * FROM __domain").fetchall() == [("not the domain",)]


@pytest.mark.parametrize("name", list(COLUMNS))
def test_public_keys_have_the_group_type(con: dpsql.Connection, name: str) -> None:
    """The statistics' key column has the type of the group expression (DuckDB's DESCRIBE of
    both), and each key is DuckDB's own cast of the policy's key."""
    dtype, given = COLUMNS[name]
    prepared = con.prepare(f"SELECT {name}, DP_COUNT(*) FROM t GROUP BY {name} WITH (epsilon = 1)")
    raw = con.engine.connection
    with con.engine.reading(prepared.rewritten.arrow_tables):
        described = raw.execute(f"DESCRIBE {prepared.rewritten.statement}").fetchall()
    assert described[0][1] == raw.execute(f"DESCRIBE SELECT {name} FROM t").fetchall()[0][1]
    released = [k for k, _ in con.sql(f"SELECT {name}, DP_COUNT(*) FROM t GROUP BY {name} WITH (epsilon = 1)").fetchall()]
    cast = [raw.execute(f"SELECT TRY_CAST(? AS {dtype})", [k]).fetchone()[0] for k in given]
    if name == "u":  # a UUID key is its text where pyarrow types no UUID (before pyarrow 19)
        released, cast = [None if k is None else str(k) for k in released], [str(k) for k in cast]
    assert len(released) == len(cast)
    assert all(_same(a, b) for a, b in zip(sorted(released, key=repr), sorted(cast, key=repr))), (released, cast)


def test_a_double_domain_with_nan_runs() -> None:
    """Written as literals, ``VALUES (1.5), ('nan')`` failed to run; typed keys do not."""
    pol = demo_policy(epsilon=100.0)
    pol["tables"]["t"] = {"columns": {"x": {"lower": 0, "upper": 10}, "d": {"keys": [1.5, "nan", None]}}}

    def setup(raw: duckdb.DuckDBPyConnection) -> None:
        raw.execute("CREATE TABLE t AS SELECT * FROM (VALUES (1.5, 1.0), ('nan'::DOUBLE, 2.0)) AS v(d, x)")

    c = dpsql.connect(":memory:", pol, setup=setup)
    try:
        keys_out = [k for k, _ in c.sql("SELECT d, DP_COUNT(*) FROM t GROUP BY d WITH (epsilon = 1)").fetchall()]
        assert len(keys_out) == 3 and 1.5 in keys_out and None in keys_out
        assert any(isinstance(k, float) and math.isnan(k) for k in keys_out)
    finally:
        c.close()


def test_the_registration_is_gone_after_the_statement(con: dpsql.Connection) -> None:
    raw = con.engine.connection
    con.sql("SELECT s, DP_COUNT(*) FROM t GROUP BY s WITH (epsilon = 1)")
    assert raw.execute("SELECT * FROM __domain").fetchall() == [("not the domain",)]
    prepared = con.prepare("SELECT s, DP_COUNT(*) FROM t GROUP BY s WITH (epsilon = 1)")
    with pytest.raises(dpsql.BindError):
        con.engine.statistics(prepared.rewritten.statement + " JOIN no_such_table ON TRUE",
                              prepared.rewritten.arrow_tables)
    assert raw.execute("SELECT * FROM __domain").fetchall() == [("not the domain",)]


def test_an_unfinished_result_on_the_connection_does_not_stop_the_query(con: dpsql.Connection) -> None:
    """DuckDB 2 registers nothing while a result of ``execute()`` is unfinished."""
    raw = con.engine.connection
    raw.execute("SELECT * FROM range(10)").fetchone()
    res = con.sql("SELECT b, DP_COUNT(*) FROM t GROUP BY b WITH (epsilon = 1)")
    assert len(res.fetchall()) == 3


def test_a_policy_domain_is_made_once(con: dpsql.Connection, monkeypatch: pytest.MonkeyPatch) -> None:
    query = "SELECT i, day, DP_COUNT(*) FROM t GROUP BY i, day WITH (epsilon = 1)"
    first = con.prepare(query).plan.public_keys
    calls = []
    monkeypatch.setattr(keys, "normalise", lambda *a: calls.append(a))
    again = con.prepare(query).plan.public_keys
    assert again is first and calls == []
    assert len(first) == 4 * 3
    assert first.rows[:3] == ((16, "2020-01-01"), (16, "2020-01-02"), (16, None))  # the product, in order
    assert first.texts[1][:3] == ("2020-01-01", "2020-01-02", None)


def test_a_key_whose_text_does_not_read_back_is_refused() -> None:
    """The integer 1 as ``UNION(a INTEGER, b VARCHAR)`` is the member a; its text '1', cast back,
    is the member b: not the same key."""
    assert keys._run_cast(1, "UNION(a INTEGER, b VARCHAR)")[2] is False
    with pytest.raises(dpsql.OptionError, match=r"^keys: 1 as UNION\(a INTEGER, b VARCHAR\) \(1\) does not read back"):
        keys.normalise([(1,)], ["UNION(a INTEGER, b VARCHAR)"], "keys", dpsql.OptionError)


def test_explain_shows_the_domain(con: dpsql.Connection) -> None:
    text = con.explain("SELECT i, DP_COUNT(*) FROM t GROUP BY i WITH (epsilon = 1)")
    assert "FROM __domain" in text and "VALUES" not in text
    assert "__domain: the public key domain as DuckDB's text of each key, read by DuckDB as a table: " \
           "('16'), ('17'), ('-3'), (NULL)" in text
    many = con.explain("SELECT i, DP_COUNT(*) FROM t GROUP BY i WITH (epsilon = 1, keys = [1, 2, 3, 4, 5, 6, 7])")
    assert "('1'), ('2'), ('3'), ('4'), ('5'), ... (7 rows)" in many


def test_rewritten_sql_runs_on_its_own(con: dpsql.Connection) -> None:
    """``rewritten_sql`` is one statement with the domain in it, that plain DuckDB runs."""
    sql = con.rewritten_sql("SELECT day, DP_COUNT(*) FROM t GROUP BY day WITH (epsilon = 1)")
    assert "__domain(__k0)" in sql
    other = duckdb.connect()
    other.execute("CREATE TABLE t (day DATE)")
    other.execute("INSERT INTO t VALUES ('2020-01-01'), ('2020-01-01'), ('2001-01-01')")
    rows = other.execute(sql.replace('"memory"."main".', "")).fetchall()
    expected = [(datetime.date(2020, 1, 1), 2), (datetime.date(2020, 1, 2), None), (None, None)]
    assert _rows(rows) == _rows(expected)  # every key of the domain, typed; none outside it


@pytest.mark.parametrize("options", ["epsilon = 1", "epsilon = 1, delta = 1e-6"])
def test_uuid_keys_are_released_public_or_selected(options: str) -> None:
    """UUID statistics come back as rows (their Arrow form varies by pyarrow), and pyarrow
    before 19 types no ``uuid.UUID``: such a key is released as its text, never a failure after
    the charge."""
    pol = demo_policy(epsilon=1000.0, delta=1e-3)
    public = "delta" not in options
    pol["tables"]["t"] = {"columns": {"x": {"lower": 0, "upper": 10},
                                      **({"u": {"keys": ["00000000-0000-0000-0000-000000000001"]}} if public else {})}}

    def setup(raw: duckdb.DuckDBPyConnection) -> None:
        raw.execute("CREATE TABLE t AS SELECT '00000000-0000-0000-0000-000000000001'::UUID AS u, 1.0 AS x "
                    "FROM range(5000)")

    c = dpsql.connect(":memory:", pol, setup=setup)
    try:
        (key, count), = c.sql(f"SELECT u, DP_COUNT(*) FROM t GROUP BY u WITH ({options})").fetchall()
        assert str(key) == "00000000-0000-0000-0000-000000000001" and abs(count - 5000) < 100
    finally:
        c.close()


def test_a_key_pyarrow_cannot_type_is_released_as_text() -> None:
    import ipaddress

    from dpsql.backends.columns import key_array

    with pytest.raises((TypeError, ValueError)):
        __import__("pyarrow").array([ipaddress.ip_address("10.0.0.1")])
    assert key_array([ipaddress.ip_address("10.0.0.1"), None]).to_pylist() == ["10.0.0.1", None]
    assert key_array([1, None]).to_pylist() == [1, None]
