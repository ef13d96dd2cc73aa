"""Schemas, catalogs, files and attached databases: policy tables backed by data files
(``source``), databases the policy attaches (``[attach]``) or the caller attached, and table
names of one, two and three parts resolved as DuckDB resolves them, in queries and in DESCRIBE,
SHOW and information_schema."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

import dpsql
from dpsql._policy.policy import load_policy

ROOT = Path(__file__).resolve().parents[1]
VISITS = ROOT / "fixtures" / "visits" / "visits.parquet"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
N_VISITS = 11065  # rows of the fixture (fixtures/visits/generate.py), at most 5 per patient

POLICY = """\
[budget]
epsilon = 100.0
delta = 1e-5
{ledger}
[tables.visits]
privacy_unit = "patient_id"
max_rows_per_unit = 5
source = {source}
[tables.visits.columns]
cost = {{ lower = 0, upper = 20000 }}
"""
COUNT = "SELECT DP_COUNT(*) AS n FROM visits WITH (epsilon = 50)"


def write_policy(folder: Path, source: str, extra: str = "", ledger: str = "") -> Path:
    path = folder / "p.toml"
    path.write_text(POLICY.format(source=source, ledger=ledger) + extra)
    return path


def count(con: dpsql.Connection, sql: str = COUNT) -> float:
    return con.sql(sql).fetchall()[0][-1]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """visits.parquet (the fixture), as CSV, and split into three Parquet parts under parts/."""
    shutil.copy(VISITS, tmp_path / "visits.parquet")
    raw = duckdb.connect()
    raw.execute(f"COPY (SELECT * FROM '{VISITS}') TO '{tmp_path / 'visits.csv'}'")
    (tmp_path / "parts").mkdir()
    for i in range(3):
        raw.execute(f"COPY (SELECT * FROM '{VISITS}' WHERE patient_id % 3 = {i}) "
                    f"TO '{tmp_path / 'parts' / f'p{i}.parquet'}'")
    raw.close()
    return tmp_path


# -- policy tables backed by files -------------------------------------------------------------


@pytest.mark.parametrize("source", ['"visits.parquet"', '"visits.csv"', '"parts/*.parquet"',
                                    '["parts/p0.parquet", "parts/p1.parquet", "parts/p2.parquet"]'])
def test_a_policy_table_with_a_source_is_readable_from_python(data: Path, source: str) -> None:
    """Relative to the policy file, wherever the process runs."""
    policy = write_policy(data, source)
    with dpsql.connect(policy=policy) as con:
        # at most 5 visits per patient are kept (the policy's bound, enforced in SQL)
        assert abs(count(con) - N_VISITS) < 50
        mean = con.sql("SELECT DP_MEAN(cost) FROM visits WITH (epsilon = 50)").fetchall()[0][0]
        assert 1500 < mean < 3000
        assert con.data_files and all(f.startswith(str(data)) for f in con.data_files)
        assert con.sql("SHOW TABLES").fetchall() == [("visits", "private")]
        with pytest.raises(dpsql.PrivacyError, match="table visits is private"):
            con.sql("SELECT * FROM visits")
        with pytest.raises(dpsql.PrivacyError, match="read_parquet"):
            con.sql(f"SELECT count(*) FROM read_parquet('{data / 'visits.parquet'}')")


def test_a_policy_source_on_a_database_file_is_a_temporary_view(data: Path) -> None:
    """dpsql never writes to a database file: the view lives in DuckDB's temp catalog."""
    db = data / "other.duckdb"
    raw = duckdb.connect(str(db))
    raw.execute("CREATE TABLE wards AS SELECT 'a' AS ward")
    raw.close()
    before = db.read_bytes()
    policy = write_policy(data, '"visits.parquet"', extra="[tables.wards]\npublic = true\n")
    with dpsql.connect(db, policy, read_only=True) as con:
        assert abs(count(con) - N_VISITS) < 50
        assert con.sql("SELECT ward FROM wards").fetchall() == [("a",)]
        assert con.engine.catalog_of("visits") == "temp"
        assert [r[:3] for r in con.sql("SHOW ALL TABLES").fetchall()] == [
            ("temp", "main", "visits"), ("other", "main", "wards")]
        with pytest.raises(dpsql.BindError, match="one database at a time"):
            con.sql("SELECT DP_COUNT(*) FROM visits WHERE ward IN (SELECT ward FROM wards) WITH (epsilon = 1)")
    assert db.read_bytes() == before


@pytest.mark.parametrize("source,message", [
    ('"nosuch.parquet"', "tables.visits.source: data file {d}/nosuch.parquet does not exist"),
    ('"none/*.parquet"', "tables.visits.source: no file matches {d}/none/*.parquet"),
    ('"visits.txt"', "tables.visits.source: {d}/visits.txt is not a data file"),
    ('"parts.parquet"', "tables.visits.source: {d}/parts.parquet is not a regular file"),
    ('"/dev/null.parquet"', "tables.visits.source: data file /dev/null.parquet does not exist"),
    ('"https://example.org/visits.parquet"', "tables.visits.source: https://example.org/visits.parquet is not a "
                                             "local file"),
    ('["visits.parquet", "visits.csv"]', "tables.visits.source: the files of table visits must be of one kind"),
    ("3", "tables.visits.source must be a file path or glob, or a list of them"),
    ('"bad.parquet"', "tables.visits.source: DuckDB cannot read {d}/bad.parquet as table visits"),
])
def test_a_bad_source_is_one_line_naming_the_table_and_the_path(data: Path, source: str, message: str) -> None:
    (data / "parts.parquet").mkdir()  # a folder with a data file's name
    (data / "bad.parquet").write_text("not parquet: 123,secret\n")
    ledger = data / "p.ledger"
    policy = write_policy(data, source, ledger=f'ledger = "{ledger.name}"')
    with pytest.raises(dpsql.PolicyError) as info:
        dpsql.connect(policy=policy, init_ledger=True)
    text = str(info.value)
    assert message.format(d=data) in text and "\n" not in text
    assert "secret" not in text  # the reader's message could quote the data: withheld
    assert not ledger.exists()  # refused before the ledger is created: nothing can be charged


def test_a_source_may_not_take_the_name_of_a_table_of_the_database(data: Path) -> None:
    raw = duckdb.connect()
    raw.execute("CREATE TABLE visits (x INTEGER)")
    with pytest.raises(dpsql.PolicyError, match="tables.visits.source: the database already holds a table visits"):
        dpsql.connect(raw, write_policy(data, '"visits.parquet"'))


def test_a_source_names_a_table_of_the_connections_own_database(data: Path) -> None:
    (data / "p.toml").write_text('[budget]\nepsilon = 1.0\n[tables."h.main.visits"]\nsource = "visits.parquet"\n')
    with pytest.raises(dpsql.PolicyError, match="a table with a source is opened in the connection's own database"):
        load_policy(data / "p.toml")


# -- names of one, two and three parts ---------------------------------------------------------


@pytest.fixture
def hospital(tmp_path: Path) -> Path:
    """hospital.duckdb: main.admissions (600 rows, age 20..79), sales.orders (300 rows) and an
    undeclared main.staff; a policy that attaches it and declares schema and catalog tables."""
    raw = duckdb.connect(str(tmp_path / "hospital.duckdb"))
    raw.execute("CREATE TABLE admissions AS SELECT range AS id, 20 + range % 60 AS age FROM range(600)")
    raw.execute("CREATE SCHEMA sales")
    raw.execute("CREATE TABLE sales.orders AS SELECT range AS id, range % 10 AS amount FROM range(300)")
    raw.execute("CREATE TABLE staff AS SELECT 'ann' AS name, 91000 AS salary")
    raw.close()
    (tmp_path / "p.toml").write_text(
        '[budget]\nepsilon = 1000.0\n[attach]\nhospital = "hospital.duckdb"\n'
        '[tables."hospital.main.admissions"]\ncolumns.age = { lower = 0, upper = 100 }\n'
        '[tables."hospital.sales.orders"]\ncolumns.amount = { lower = 0, upper = 10 }\n'
        '[tables."local.orders"]\ncolumns.amount = { lower = 0, upper = 10 }\n'
        '[tables.wards]\npublic = true\n')
    return tmp_path


def _local(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE SCHEMA local")
    con.execute("CREATE TABLE local.orders AS SELECT range AS id, 1 AS amount FROM range(100)")
    con.execute("CREATE TABLE wards AS SELECT 'a' AS ward")


@pytest.mark.parametrize("name,n", [
    ("hospital.main.admissions", 600), ("hospital.admissions", 600), ("admissions", 600),
    ('"hospital"."main"."admissions"', 600), ("HOSPITAL.Main.Admissions", 600),
    ("hospital.sales.orders", 300), ("local.orders", 100), ("memory.local.orders", 100),
])
def test_qualified_names_resolve_as_duckdb_does(hospital: Path, name: str, n: int) -> None:
    with dpsql.connect(policy=hospital / "p.toml", setup=_local) as con:
        got = count(con, f"SELECT DP_COUNT(*) FROM {name} WITH (epsilon = 500)")
        assert abs(got - n) < 2
        assert con.sql(f"SELECT DP_COUNT(*) FROM {name} AS x WHERE x.id < 50 WITH (epsilon = 500)").fetchall()


@pytest.mark.parametrize("sql,error,message", [
    ("SELECT DP_COUNT(*) FROM orders WITH (epsilon = 1)", dpsql.BindError,
     "table orders is ambiguous: it can mean hospital.sales.orders or local.orders; name it in full"),
    ("SELECT * FROM hospital.staff", dpsql.PrivacyError,
     "table hospital.staff is not declared in the policy, so it cannot be read"),
    ("SELECT DP_COUNT(*) FROM hospital.main.staff WITH (epsilon = 1)", dpsql.PrivacyError,
     "table hospital.main.staff is not declared in the policy, so it cannot be read"),
    ("SELECT DP_COUNT(*) FROM hospital.nosuch WITH (epsilon = 1)", dpsql.BindError,
     "table hospital.nosuch does not exist"),
    ("SELECT DP_COUNT(*) FROM sales.orders WITH (epsilon = 1)", dpsql.BindError,
     "table sales.orders does not exist"),  # schema sales is hospital's, not this database's
    ("SELECT DP_COUNT(*) FROM elsewhere.main.admissions WITH (epsilon = 1)", dpsql.BindError,
     "table elsewhere.main.admissions does not exist"),
    ("SELECT * FROM hospital.main.admissions", dpsql.PrivacyError, "table hospital.main.admissions is private: "
     "its rows cannot be selected; only DP aggregates (DP_COUNT, DP_SUM, DP_MEAN, ...) may read it"),
    ("SELECT count(*) FROM wards, hospital.admissions", dpsql.BindError,
     "a query reads the tables of one database at a time; hospital.main.admissions, wards are in hospital and memory"),
])
def test_names_that_cannot_be_read_are_refused_naming_the_table(hospital: Path, sql: str, error: type,
                                                                 message: str) -> None:
    with dpsql.connect(policy=hospital / "p.toml", setup=_local) as con:
        with pytest.raises(error) as info:
            con.sql(sql)
        assert str(info.value) == message
        assert con.budget.spent.epsilon == 0


def test_schema_or_catalog_of_one_name_is_ambiguous_as_in_duckdb(tmp_path: Path) -> None:
    """``x.t`` with both a schema x and an attached database x holding t: DuckDB refuses it too."""
    raw = duckdb.connect()
    raw.execute("ATTACH ':memory:' AS x")
    raw.execute("CREATE TABLE x.main.t AS SELECT 1 AS v")
    raw.execute("CREATE SCHEMA memory.x")
    raw.execute("CREATE TABLE memory.x.t AS SELECT 2 AS v")
    with pytest.raises(duckdb.BinderException, match="Ambiguous"):
        raw.execute("SELECT * FROM x.t")
    policy = {"budget": {"epsilon": 10}, "tables": {"x.main.t": {"public": True}, "x.t": {"public": True}}}
    with dpsql.connect(raw, policy) as con:
        with pytest.raises(dpsql.BindError, match="table x.t is ambiguous: it can mean x.t or x.main.t"):
            con.sql("SELECT v FROM x.t")
        assert con.sql("SELECT v FROM x.main.t").fetchall() == [(1,)]
        assert con.sql("SELECT v FROM memory.x.t").fetchall() == [(2,)]


def test_the_callers_attached_database_needs_no_attach_in_the_policy() -> None:
    raw = duckdb.connect()
    raw.execute("ATTACH ':memory:' AS crm")
    raw.execute("CREATE SCHEMA crm.eu")
    raw.execute("CREATE TABLE crm.eu.customers AS SELECT range AS id, range % 7 AS visits FROM range(1000)")
    raw.execute("CREATE TABLE crm.main.secret AS SELECT 1 AS x")
    policy = {"budget": {"epsilon": 100}, "tables": {"crm.eu.customers": {"columns": {"visits": {"lower": 0, "upper": 6}}}}}
    with dpsql.connect(raw, policy) as con:
        assert abs(count(con, "SELECT DP_COUNT(*) FROM crm.eu.customers WITH (epsilon = 50)") - 1000) < 50
        res = con.sql("SELECT visits, DP_COUNT(*) AS n FROM crm.eu.customers GROUP BY visits "
                      "WITH (epsilon = 50, keys = [0, 1, 2, 3, 4, 5, 6])").fetchall()
        assert [r[0] for r in res] == list(range(7))
        with pytest.raises(dpsql.PrivacyError, match="table crm.secret is not declared"):
            con.sql("SELECT * FROM crm.secret")
        assert "Mutator" not in con.explain("SELECT DP_SUM(visits) FROM crm.eu.customers WITH (epsilon = 1)")
        assert '"crm"."eu"."customers"' in con.explain("SELECT DP_SUM(visits) FROM crm.eu.customers WITH (epsilon = 1)")


def test_an_attached_database_is_read_only_and_stays_as_it_is(hospital: Path) -> None:
    before = (hospital / "hospital.duckdb").read_bytes()
    with dpsql.connect(policy=hospital / "p.toml", setup=_local) as con:
        assert str(hospital / "hospital.duckdb") in con.database_files
        readonly = con.engine.connection.execute(
            "SELECT readonly FROM duckdb_databases() WHERE database_name = 'hospital'").fetchall()
        assert readonly == [(True,)]
        for sql in ("ATTACH 'x.duckdb' AS y", "DETACH hospital", "USE hospital",
                    "CREATE TABLE hospital.main.x AS SELECT 1"):
            with pytest.raises(dpsql.Error):
                con.sql(sql)
    assert (hospital / "hospital.duckdb").read_bytes() == before


@pytest.mark.parametrize("attach,message", [
    ({"h": "nosuch.duckdb"}, "attach.h: database file {d}/nosuch.duckdb does not exist"),
    ({"temp": "hospital.duckdb"}, "attach.temp: a catalog name is a plain identifier other than"),
    ({"h x": "hospital.duckdb"}, "attach.h x: a catalog name is a plain identifier"),
    ({"h": 3}, "attach.h must be the path of a DuckDB database file"),
    ({"h": "s3://bucket/h.duckdb"}, "attach.h: s3://bucket/h.duckdb is not a local database file"),
    ({"h": "p.toml"}, "attach.h: cannot attach {d}/p.toml"),
])
def test_a_bad_attach_is_one_line_naming_it(hospital: Path, attach: dict, message: str) -> None:
    import tomllib

    spec = tomllib.loads((hospital / "p.toml").read_text())
    spec["attach"] = attach
    spec["tables"] = {"wards": {"public": True}}
    from dpsql._policy.policy import policy_from_dict

    with pytest.raises(dpsql.PolicyError) as info:
        dpsql.connect(policy=policy_from_dict(spec, source=str(hospital / "p.toml")))
    assert message.format(d=hospital) in str(info.value) and "\n" not in str(info.value)


def test_an_attach_that_clashes_with_the_callers_database_is_refused(hospital: Path) -> None:
    raw = duckdb.connect()
    raw.execute("ATTACH ':memory:' AS hospital")
    with pytest.raises(dpsql.PolicyError, match="attach.hospital: the connection already has a database hospital"):
        dpsql.connect(raw, hospital / "p.toml")


def test_the_connections_own_database_named_in_full_is_the_same_table(tmp_path: Path) -> None:
    policy = {"budget": {"epsilon": 1}, "tables": {"memory.main.t": {"public": True}, "t": {"public": True}}}
    with pytest.raises(dpsql.PolicyError, match="tables.memory.main.t: names the same table as tables.t"):
        dpsql.connect(policy=policy)
    policy = {"budget": {"epsilon": 1}, "tables": {"memory.main.t": {"public": True}}}
    raw = duckdb.connect()
    raw.execute("CREATE TABLE t AS SELECT 7 AS x")
    with dpsql.connect(raw, policy) as con:
        assert sorted(con.policy.tables) == ["t"]
        for name in ("t", "main.t", "memory.t", "memory.main.t"):
            assert con.sql(f"SELECT x FROM {name}").fetchall() == [(7,)]


def test_policy_names_are_checked() -> None:
    from dpsql._policy.policy import policy_from_dict

    for name in ("a.b.c.d", "a..b", ".t"):
        with pytest.raises(dpsql.PolicyError, match="a table's name is table, schema.table or catalog.schema.table"):
            policy_from_dict({"budget": {"epsilon": 1}, "tables": {name: {}}})
    pol = policy_from_dict({"budget": {"epsilon": 1}, "tables": {"main.t": {}, "s.u": {}, "c.s.v": {}}})
    assert sorted(pol.tables) == ["c.s.v", "s.u", "t"]
    assert [(tp.catalog, tp.schema, tp.table_name) for _, tp in sorted(pol.tables.items())] == [
        ("c", "s", "v"), (None, "s", "u"), (None, "main", "t")]
    with pytest.raises(dpsql.PolicyError, match="names the same table as another entry"):
        policy_from_dict({"budget": {"epsilon": 1}, "tables": {"main.t": {}, "T": {}}})


# -- DESCRIBE, SHOW and information_schema -----------------------------------------------------


def test_catalog_answers_list_tables_of_every_schema_and_catalog(hospital: Path) -> None:
    with dpsql.connect(policy=hospital / "p.toml", setup=_local) as con:
        assert con.sql("SHOW TABLES").fetchall() == [
            ("hospital.main.admissions", "private"), ("hospital.sales.orders", "private"),
            ("local.orders", "private"), ("wards", "public")]
        assert [r[:3] for r in con.sql("SHOW ALL TABLES").fetchall()] == [
            ("hospital", "main", "admissions"), ("hospital", "sales", "orders"), ("memory", "local", "orders"),
            ("memory", "main", "wards")]
        for statement in ("DESCRIBE hospital.sales.orders", "DESCRIBE hospital.sales.\"orders\"",
                          "SHOW COLUMNS FROM hospital.sales.orders", "SHOW hospital.sales.orders"):
            assert con.sql(statement).fetchall() == [("id", "BIGINT", None, None), ("amount", "BIGINT", "[0, 10]", None)]
        assert con.sql("DESCRIBE hospital.admissions").fetchall()[1] == ("age", "BIGINT", "[0, 100]", None)
        with pytest.raises(dpsql.BindError, match="table orders is ambiguous"):
            con.sql("DESCRIBE orders")
        with pytest.raises(dpsql.PrivacyError, match="table hospital.staff is not declared"):
            con.sql("DESCRIBE hospital.staff")
        rows = con.sql("SELECT table_catalog, table_schema, table_name FROM information_schema.tables").fetchall()
        assert rows == [("hospital", "main", "admissions"), ("hospital", "sales", "orders"),
                        ("memory", "local", "orders"), ("memory", "main", "wards")]
        cols = con.sql("SELECT table_name, column_name FROM information_schema.columns "
                       "WHERE table_catalog = 'hospital'").fetchall()
        assert cols == [("admissions", "id"), ("admissions", "age"), ("orders", "id"), ("orders", "amount")]
        schemata = con.sql("SELECT catalog_name, schema_name FROM information_schema.schemata").fetchall()
        assert schemata == [("hospital", "main"), ("hospital", "sales"), ("memory", "local"), ("memory", "main")]
        assert con.budget.spent.epsilon == 0


# -- the command -------------------------------------------------------------------------------


def dpsql_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dpsql", *args], cwd=cwd, capture_output=True, text=True,
                          env=ENV, timeout=120)


@pytest.mark.parametrize("source", ['"visits.parquet"', '"visits.csv"', '"parts/*.parquet"'])
def test_the_command_opens_a_policys_source_without_a_database(data: Path, source: str) -> None:
    write_policy(data, source)
    elsewhere = data / "elsewhere"
    elsewhere.mkdir()
    proc = dpsql_cli("--policy", str(data / "p.toml"), "--format", "csv", "--no-report", "-c", COUNT,
                     "-c", "SELECT * FROM visits", cwd=elsewhere)
    assert proc.returncode == 1
    header, row = proc.stdout.split()
    assert header == "n" and abs(float(row) - N_VISITS) < 50
    assert proc.stderr.strip() == ("Error: table visits is private: its rows cannot be selected; only DP "
                                   "aggregates (DP_COUNT, DP_SUM, DP_MEAN, ...) may read it")


def test_the_command_reads_attached_databases(hospital: Path) -> None:
    proc = dpsql_cli("--policy", "p.toml", "--format", "csv", "--no-report", "-c",
                     "SELECT DP_COUNT(*) AS n FROM hospital.admissions WITH (epsilon = 500)",
                     "-c", "SELECT count(*) FROM hospital.staff", "-c", ".tables", cwd=hospital)
    assert proc.returncode == 1
    assert proc.stdout.splitlines()[:2] == ["n", "600"]
    assert "hospital.sales.orders" in proc.stdout
    assert proc.stderr.strip() == "Error: table hospital.staff is not declared in the policy, so it cannot be read"


def test_the_command_names_a_bad_source(data: Path) -> None:
    write_policy(data, '"nosuch/*.parquet"')
    proc = dpsql_cli("--policy", "p.toml", "-c", COUNT, cwd=data)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.strip() == f"Error: tables.visits.source: no file matches {data}/nosuch/*.parquet"


def test_a_data_file_for_a_table_that_has_a_source_is_refused(data: Path) -> None:
    write_policy(data, '"visits.parquet"')
    proc = dpsql_cli("visits.csv", "--policy", "p.toml", "-c", COUNT, cwd=data)
    assert proc.returncode == 1
    assert proc.stderr.strip() == (f"Error: table visits already has its files in the policy (source = "
                                   f"{data}/visits.parquet); open the policy without visits.csv")


def test_a_missing_database_is_not_created_even_with_sources(data: Path) -> None:
    write_policy(data, '"visits.parquet"')
    proc = dpsql_cli("nosuch.duckdb", "--policy", "p.toml", "-c", COUNT, cwd=data)
    assert proc.returncode == 1 and "database nosuch.duckdb does not exist" in proc.stderr
    assert not (data / "nosuch.duckdb").exists()


def test_the_shells_schema_takes_any_name_of_the_table(hospital: Path) -> None:
    from dpsql.interfaces.repl.special import dispatch
    from dpsql.interfaces.repl.state import ReplState

    with dpsql.connect(policy=hospital / "p.toml", setup=_local) as con:
        for name in ("hospital.admissions", "hospital.main.admissions", "admissions"):
            state = ReplState(con)
            out: list[str] = []
            state.emit = out.append  # type: ignore[method-assign]
            dispatch(state, f".schema {name}")
            assert out[0].startswith("hospital.main.admissions: private") and "[0, 100]" in out[1]
