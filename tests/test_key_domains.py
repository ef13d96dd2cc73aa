"""Public key domains are normalised by DuckDB's own cast to the group expression's type.

``keys = ['16', '016', ' 16', '+16']`` for an INTEGER column names one group four times: DuckDB
casts every spelling to 16. Released as four rows, the group would get four fresh noisy answers
for the price of one. Such domains are refused before anything runs, and so are keys that do
not cast; the policy's key lists are held to the same rule.
"""

from __future__ import annotations

import random

import duckdb
import pytest
from sqlglot import exp

import dpsql
from dpsql._plan import keys as key_domains
from dpsql._sql import build
from dpsql.interfaces.demo import load_adult
from tests.conftest import demo_policy


def _setup(con: duckdb.DuckDBPyConnection) -> None:
    load_adult(con)
    con.execute("CREATE TABLE t (g INTEGER, d DOUBLE, day DATE, x DOUBLE)")
    con.execute("INSERT INTO t VALUES (16, 1.5, DATE '2020-01-01', 1), (17, 2.5, DATE '2020-01-02', 2), "
                "(16, 'nan', DATE '2020-01-01', 3)")


def _connect(**columns: dict) -> dpsql.Connection:
    pol = demo_policy(epsilon=100.0)
    pol["tables"]["t"] = {"columns": {"x": {"lower": 0, "upper": 10}, **columns}}
    return dpsql.connect(":memory:", pol, setup=_setup)


@pytest.fixture(scope="module")
def con() -> dpsql.Connection:
    c = _connect()
    yield c
    c.close()


def _refused(con: dpsql.Connection, sql: str, error: type[dpsql.Error]) -> str:
    before = con.budget.spent.epsilon
    with pytest.raises(error) as info:
        con.sql(sql)
    assert con.budget.spent.epsilon == before, "a refusal charges nothing"
    message = str(info.value)
    assert "\n" not in message
    return message


def test_four_spellings_of_one_integer_key_are_refused(con: dpsql.Connection) -> None:
    sql = "SELECT g, DP_COUNT(*) FROM t GROUP BY g WITH (epsilon = 1, keys = ['16', '016', ' 16', '+16'])"
    assert _refused(con, sql, dpsql.OptionError) == "keys: '16' and '016' are the same INTEGER key 16"


@pytest.mark.parametrize("keys", ["['16', 16]", "[16, '+16']", "['16', '16 ']", "['1e1', 10]", "[' 17 ', '0017']"])
def test_any_two_spellings_of_one_key_are_refused(con: dpsql.Connection, keys: str) -> None:
    sql = f"SELECT g, DP_COUNT(*) FROM t GROUP BY g WITH (epsilon = 1, keys = {keys})"
    assert "are the same INTEGER key" in _refused(con, sql, dpsql.OptionError)


def test_distinct_keys_still_work_and_are_typed(con: dpsql.Connection) -> None:
    res = con.sql("SELECT g, DP_COUNT(*) FROM t GROUP BY g WITH (epsilon = 1, keys = [16, 17])")
    assert [k for k, _ in res.fetchall()] == [16, 17]
    prepared = con.prepare("SELECT g, DP_COUNT(*) FROM t GROUP BY g WITH (epsilon = 1, keys = ['016', '+17'])")
    p, rw = prepared.plan, prepared.rewritten
    assert p is not None and p.public_keys is not None and p.public_keys.rows == ((16,), (17,))
    assert "(SELECT CAST(__k0 AS INTEGER) AS __k0 FROM (VALUES ('16'), ('17')) AS __domain(__k0)) AS __keys" in rw.sql


def test_a_key_that_does_not_cast_is_refused(con: dpsql.Connection) -> None:
    sql = "SELECT g, DP_COUNT(*) FROM t GROUP BY g WITH (epsilon = 1, keys = ['16x'])"
    assert _refused(con, sql, dpsql.OptionError) == "keys: '16x' is not a valid INTEGER"
    sql = "SELECT day, DP_COUNT(*) FROM t GROUP BY day WITH (epsilon = 1, keys = ['2020-02-30'])"
    assert _refused(con, sql, dpsql.OptionError) == "keys: '2020-02-30' is not a valid DATE"


def test_a_number_that_changes_in_the_cast_is_refused(con: dpsql.Connection) -> None:
    sql = "SELECT g, DP_COUNT(*) FROM t GROUP BY g WITH (epsilon = 1, keys = [16.5])"
    assert _refused(con, sql, dpsql.OptionError) == "keys: 16.5 is not a valid INTEGER (it would become 16)"


def test_other_types_are_normalised_too(con: dpsql.Connection) -> None:
    for keys in ("['2020-1-1', '2020-01-01']", "['nan', 'NaN']", "[1.5, '1.50']"):
        column = "day" if "2020" in keys else "d"
        sql = f"SELECT {column}, DP_COUNT(*) FROM t GROUP BY {column} WITH (epsilon = 1, keys = {keys})"
        assert "are the same" in _refused(con, sql, dpsql.OptionError)
    res = con.sql("SELECT day, DP_COUNT(*) FROM t GROUP BY day WITH (epsilon = 1, keys = ['2020-1-1', '2020-1-2'])")
    assert len(res.fetchall()) == 2


def test_multi_part_keys_are_compared_after_the_cast(con: dpsql.Connection) -> None:
    sql = ("SELECT g, day, DP_COUNT(*) FROM t GROUP BY g, day "
           "WITH (epsilon = 1, keys = [(16, '2020-01-01'), ('016', '2020-1-1'), (17, '2020-01-01')])")
    message = _refused(con, sql, dpsql.OptionError)
    assert message.startswith("keys: ") and "are the same key (16, 2020-01-01) of types (INTEGER, DATE)" in message


@pytest.mark.parametrize("keys, message", [
    (["16", "016"], "tables.t.columns.g.keys: '16' and '016' are the same INTEGER key 16"),
    ([16, "+16", 17], "tables.t.columns.g.keys: 16 and '+16' are the same INTEGER key 16"),
    (["16", "sixteen"], "tables.t.columns.g.keys: 'sixteen' is not a valid INTEGER"),
])
def test_a_policy_key_domain_with_duplicates_after_the_cast_is_refused(keys: list, message: str) -> None:
    c = _connect(g={"keys": keys})
    try:
        assert _refused(c, "SELECT g, DP_COUNT(*) FROM t GROUP BY g WITH (epsilon = 1)", dpsql.PolicyError) == message
        assert c.explain("SELECT DP_COUNT(*) FROM t WITH (epsilon = 1)")  # other queries still run
    finally:
        c.close()


def test_a_policy_key_domain_is_released_typed() -> None:
    c = _connect(g={"keys": ["16", "17", "18"]})
    try:
        res = c.sql("SELECT g, DP_COUNT(*) FROM t GROUP BY g WITH (epsilon = 1)")
        assert [k for k, _ in res.fetchall()] == [16, 17, 18]
    finally:
        c.close()


def test_the_cast_reads_no_file_and_holds_no_data(con: dpsql.Connection, tmp_path) -> None:  # type: ignore[no-untyped-def]
    secret = tmp_path / "secret.csv"
    secret.write_text("a\n42\n")

    con.explain("SELECT g, DP_COUNT(*) FROM t GROUP BY g WITH (epsilon = 1, keys = ['16'])")  # text: cast
    caster = key_domains._CASTER
    assert caster is not None
    assert caster.execute("SELECT count(*) FROM duckdb_tables()").fetchone()[0] == 0
    with pytest.raises(duckdb.Error):
        caster.execute("SELECT * FROM read_csv(?)", [str(secret)])
    with pytest.raises(duckdb.Error):
        caster.execute("SET enable_external_access = true")


def test_spark_broadcasts_the_statistics_to_the_key_domain() -> None:
    """On Spark the aggregate (a row per group, the left join's right side) is broadcast to the
    public keys: a hint, so the plan changes and the rows do not (tests/test_spark.py compares
    them with DuckDB's)."""
    import duckdb

    import dpsql

    raw = duckdb.connect()
    raw.execute("CREATE TABLE big AS SELECT range % 100 AS x, range % 7 AS k FROM range(50)")
    policy = {"budget": {"epsilon": 10}, "tables": {"big": {
        "privacy_unit": "row", "columns": {"x": {"lower": 0, "upper": 100}, "k": {"keys": list(range(5))}}}}}
    con = dpsql.connect(raw, policy)
    spark_sql = con.rewritten_sql("SELECT k, DP_MEAN(x) FROM big GROUP BY k WITH (epsilon = 1)", "spark")
    assert "SELECT /*+ BROADCAST(__stats) */ __keys.__k0" in spark_sql
    assert "BROADCAST" not in con.prepare("SELECT k, DP_MEAN(x) FROM big GROUP BY k WITH (epsilon = 1)").sql
    assert "BROADCAST" not in con.rewritten_sql("SELECT DP_MEAN(x) FROM big WITH (epsilon = 1)", "spark")
    con.close()


VALUES = [0, 1, -1, 16, 127, 128, 2**31, -(2**31) - 1, 2**62, -(2**63), 2**63 - 1,
          "16", "016", " 16", "+16", "x", "", "1.5", "1e3", "NaN", "inf", "true", "2020-01-02", "2020-02-30",
          "z0001", "ünïcode", "9223372036854775808"]
TYPES = ["INTEGER", "TINYINT", "BIGINT", "HUGEINT", "UBIGINT", "DOUBLE", "DECIMAL(5, 2)", "VARCHAR",
         "BOOLEAN", "DATE", "UUID"]


@pytest.mark.parametrize("dtype", TYPES)
def test_casts_of_a_whole_domain_are_the_casts_of_each_key(dtype: str) -> None:
    """The strings and BIGINT integers of a domain are cast in one statement: each gives what its
    own cast gives (value and text), or is left to its own cast."""
    batch = key_domains._cast_batch(VALUES, dtype)
    for value in VALUES:
        got = batch.get((type(value).__name__, value))
        if got is not None:
            assert repr(got) == repr(key_domains._run_cast(value, dtype)), (value, dtype)  # NaN included
    assert batch or dtype in ("DATE", "UUID")  # a cast DuckDB cannot bind from BIGINT: strings only


def test_a_large_domain_is_cast_in_one_statement_per_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    monkeypatch.setattr(key_domains, "_cast_cached", lambda *a: calls.append(a) or key_domains._run_cast(*a[1:]))
    given = [(i,) for i in range(5000)] + [(f"{i}",) for i in range(5000, 6000)] + [(1.5,), (None,)]
    with pytest.raises(dpsql.PolicyError, match="1.5 is not a valid INTEGER"):
        key_domains.normalise(given, ["INTEGER"], "keys", dpsql.PolicyError)
    assert calls == [("float", 1.5, "INTEGER")]  # only the float, one by one
    domain = key_domains.normalise(given[:-2], ["INTEGER"], "keys", dpsql.PolicyError)
    assert domain.rows == tuple((i,) for i in range(6000))
    assert domain.texts == (tuple(str(i) for i in range(6000)),)


def test_string_literals_are_sqlglots() -> None:
    """Key literals are written without sqlglot, as sqlglot's DuckDB generator writes them."""
    rng = random.Random(3)
    alphabet = [chr(c) for c in range(0, 128)] + ["ü", "€", "𝄞", "\u2028", "\ufeff"]
    samples = ["", "'", "''", "\\", "\\'", "a'b", "$$", "%s", "{x}"] + [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))) for _ in range(2000)]
    for s in samples:
        assert build.literal(s) == exp.Literal.string(s).sql(dialect="duckdb"), repr(s)
