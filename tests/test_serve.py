"""``dpsql serve`` with real clients: psql, psycopg 3 and the PostgreSQL JDBC driver.

The psql and JDBC tests need programs outside Python (Debian's postgresql-client,
libpostgresql-jdbc-java and a JDK): they carry the ``clients`` marker, which the default run
leaves out and CI runs after installing them (``pytest -m clients``).

A missing client fails these tests (it is never skipped): CI installs them.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from pathlib import Path

import psycopg
import pytest

from tests.serve.harness import PASSWORDS, Server, start

JDBC_JAR = Path("/usr/share/java/postgresql.jar")
PROBE = Path(__file__).parent / "serve" / "JdbcProbe.java"
META_PROBE = Path(__file__).parent / "serve" / "JdbcMetaProbe.java"
COUNT = "SELECT DP_COUNT(*) AS n FROM adult WITH (epsilon = 0.1)"
MEAN = "SELECT DP_MEAN(age) AS m FROM adult WHERE age > %s WITH (epsilon = 0.1)"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = start(tmp_path_factory.mktemp("serve"))
    yield srv
    srv.stop()


def dsn(srv: Server, user: str = "alice", password: str | None = None) -> str:
    return (f"host={srv.host} port={srv.port} dbname=adult user={user} "
            f"password={PASSWORDS.get(user, '') if password is None else password}")


# -- psql -------------------------------------------------------------------------------------


def psql(srv: Server, *commands: str, user: str = "carol") -> subprocess.CompletedProcess:
    exe = shutil.which("psql")
    assert exe, "psql is missing: install Debian's postgresql-client"
    args = [exe, "-X", "-h", srv.host, "-p", str(srv.port), "-U", user, "-d", "adult", "-v", "ON_ERROR_STOP=0"]
    for c in commands:
        args += ["-c", c]
    return subprocess.run(args, capture_output=True, text=True, timeout=60,
                          env={"PGPASSWORD": PASSWORDS[user], "PATH": "/usr/bin:/bin"})


@pytest.mark.clients
def test_psql_lists_tables_columns_runs_and_refuses(server):
    before = len(server.entries("carol"))
    out = psql(server, r"\dt", r"\d adult", COUNT, "SELECT * FROM adult")
    assert "adult" in out.stdout and "education_levels" in out.stdout
    assert "age" in out.stdout and "bigint" in out.stdout and "sex" in out.stdout and "text" in out.stdout
    assert "(1 row)" in out.stdout
    assert "ERROR:  table adult is private" in out.stderr
    assert len(server.entries("carol")) == before + 1


@pytest.mark.clients
def test_psql_prepared_statement_six_times_charges_each_execution(server):
    before = len(server.entries("carol"))
    commands = ["PREPARE q(int) AS SELECT DP_COUNT(*) AS n FROM adult WHERE age > $1 WITH (epsilon = 0.1)"]
    commands += [f"EXECUTE q({20 + i})" for i in range(6)]
    out = psql(server, *commands)
    assert out.stdout.count("(1 row)") == 6, out.stderr
    entries = server.entries("carol")[before:]
    assert len(entries) == 6
    assert all(e.query.endswith("WITH (epsilon = 0.1)") and "age > 2" in e.query for e in entries)


@pytest.mark.clients
def test_psql_copy_is_refused_with_the_way_to_export_and_cursors_work(server, tmp_path):
    before = len(server.entries("carol"))
    target = tmp_path / "out.csv"
    out = psql(server, rf"\copy (SELECT sex, DP_COUNT(*) AS n FROM adult GROUP BY sex WITH (epsilon = 0.1)) "
                       rf"TO '{target}' CSV")
    assert out.returncode != 0
    assert "COPY is not supported by dpsql serve; export with psql's \\o FILE or the dpsql command's --format csv" \
        in out.stderr
    assert not target.exists() or target.read_text() == ""
    assert len(server.entries("carol")) == before  # refused: nothing charged
    # one string of several statements, as a script sends it: DECLARE runs the query once
    out = psql(server, "/* report */ BEGIN; DECLARE c CURSOR FOR SELECT sex, DP_COUNT(*) AS n FROM adult "
                       "GROUP BY sex WITH (epsilon = 0.1); FETCH 1 FROM c; FETCH ALL IN c; CLOSE c; COMMIT;")
    assert out.returncode == 0, out.stderr
    assert "Female" in out.stdout and "Male" in out.stdout and out.stdout.count("(1 row)") == 2
    assert len(server.entries("carol")) == before + 1


# -- psycopg ----------------------------------------------------------------------------------


def test_psycopg_catalog_query_types_and_refusal(server):
    with psycopg.connect(dsn(server)) as con:
        cur = con.cursor()
        cur.execute("SELECT table_name FROM information_schema.tables ORDER BY table_name")
        assert cur.fetchall() == [("adult",), ("education_levels",)]
        cur.execute("SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'adult'")
        assert ("age", "bigint") in cur.fetchall()
        cur.execute("SELECT sex, DP_COUNT(*) AS n, DP_MEAN(age) AS m FROM adult GROUP BY sex WITH (epsilon = 0.3)")
        assert [c.type_code for c in cur.description] == [25, 20, 701]  # text, int8, float8
        rows = cur.fetchall()
        assert [r[0] for r in rows] == ["Female", "Male"] and all(isinstance(r[1], int) for r in rows)
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="private"):
            cur.execute("SELECT * FROM adult")


def test_zero_row_probes_are_answered_as_in_python_and_the_pivot_probe_is_refused(server):
    """The same probe gets the same answer over the wire as from Connection.sql (columns, no
    rows), for simple and extended queries; the PIVOT probe that named raw values is refused."""
    before = len(server.entries())
    with psycopg.connect(dsn(server)) as con:
        cur = con.cursor()
        for query in ("SELECT * FROM adult WHERE 1=0", "SELECT age, sex FROM adult LIMIT 0"):
            for prepare in (False, True):
                cur.execute(query, prepare=prepare)
                assert cur.fetchall() == []
                names = [c.name for c in cur.description]
                assert "age" in names and "sex" in names
                assert cur.description[names.index("age")].type_code == 20  # int8
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="PIVOT") as err:
            cur.execute("SELECT * FROM (PIVOT adult ON CASE WHEN fnlwgt = 77516 THEN occupation ELSE 'x' END) LIMIT 0")
        assert "Adm-clerical" not in str(err.value)
    assert len(server.entries()) == before


def test_session_statements_are_answered_without_dpsql(server):
    with psycopg.connect(dsn(server), autocommit=True) as con:
        assert con.execute("SHOW TRANSACTION ISOLATION LEVEL").fetchall() == [("read committed",)]
        con.execute("SET TIME ZONE 'UTC'")
        con.execute("SET application_name = 'probe'")
        assert con.execute("SHOW application_name").fetchall() == [("probe",)]
        con.execute("BEGIN")
        assert "dpsql" in con.execute("SELECT version()").fetchall()[0][0]
        assert con.execute("SELECT current_schema()").fetchall()[0][0] == "public"
        con.execute("COMMIT")
        assert con.execute("SHOW TABLES").fetchall() == [("adult", "private"), ("education_levels", "public")]
        assert con.execute("SELECT DP_COUNT(*) AS n FROM public.adult WITH (epsilon = 0.1)").fetchall()[0][0] > 0


def test_psycopg_prepared_six_times_parameters_bound_safely(server):
    before = len(server.entries("alice"))
    with psycopg.connect(dsn(server)) as con:
        cur = con.cursor()
        for i in range(6):
            cur.execute(MEAN, [20 + i], prepare=True)
            (m,), = cur.fetchall()
            assert isinstance(m, float) and 0 <= m <= 100
        # a value that would break out of a pasted string stays one literal
        cur.execute("SELECT DP_COUNT(*) AS n FROM adult WHERE sex = %s WITH (epsilon = 0.1)", ["x' OR '1'='1"])
        assert cur.fetchall()[0][0] >= 0
    entries = server.entries("alice")[before:]
    assert len(entries) == 7
    assert "'x'' OR ''1''=''1'" in entries[-1].query


def test_describe_reads_nothing_and_charges_nothing(server):
    before = len(server.entries())
    with psycopg.connect(dsn(server)) as con:
        pg = con.pgconn
        pg.prepare(b"s1", b"SELECT sex, DP_COUNT(*) AS n FROM adult WHERE age > $1 GROUP BY sex WITH (epsilon = 5)")
        desc = pg.describe_prepared(b"s1")
        assert [desc.fname(i) for i in range(desc.nfields)] == [b"sex", b"n"]
        assert [desc.ftype(i) for i in range(desc.nfields)] == [25, 20]
    assert len(server.entries()) == before


def test_wrong_password_and_unknown_user_are_refused(server):
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(dsn(server, password="wrong"))
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(dsn(server, user="mallory", password="anything"))


def test_budget_share_caps_a_user_and_the_ledger_records_who_spent(server):
    # bob may spend 1% of ε = 100: ε = 1
    with psycopg.connect(dsn(server, "bob")) as con:
        con.autocommit = True
        cur = con.cursor()
        cur.execute("SELECT DP_COUNT(*) AS n FROM adult WITH (epsilon = 0.6)")
        with pytest.raises(psycopg.Error, match="budget") as err:
            cur.execute("SELECT DP_COUNT(*) AS n FROM adult WITH (epsilon = 0.6)")
        assert err.value.sqlstate == "53400"
    spent = [e.cost.epsilon for e in server.entries("bob")]
    assert spent == [pytest.approx(0.6)]


def test_eight_concurrent_clients_every_answer_arrives_charged_once(server):
    before = len(server.entries())
    per_client, answers, errors = 5, [], []

    def client(k: int) -> None:
        try:
            with psycopg.connect(dsn(server)) as con:
                for i in range(per_client):
                    got = con.execute(f"SELECT DP_COUNT(*) AS n FROM adult WHERE age > {k * 10 + i} "
                                      "WITH (epsilon = 0.01)").fetchall()
                    answers.append((k, i, got[0][0]))
        except Exception as err:  # reported below
            errors.append(err)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert not errors
    assert sorted((k, i) for k, i, _ in answers) == [(k, i) for k in range(8) for i in range(per_client)]
    new = server.entries()[before:]
    assert len(new) == 8 * per_client
    assert sorted(e.query for e in new) == sorted(
        f"SELECT DP_COUNT(*) AS n FROM adult WHERE age > {k * 10 + i} WITH (epsilon = 0.01)"
        for k in range(8) for i in range(per_client))
    assert all(e.user == "alice" for e in new)


# -- JDBC -------------------------------------------------------------------------------------


@pytest.mark.clients
def test_jdbc_metadata_query_refusal_and_server_side_prepares(server, tmp_path):
    javac, java = shutil.which("javac"), shutil.which("java")
    assert javac and java, "a JDK (javac, java) is needed for the JDBC test"
    assert JDBC_JAR.exists(), "the PostgreSQL JDBC driver is missing: install Debian's libpostgresql-jdbc-java"
    subprocess.run([javac, "-d", str(tmp_path), str(PROBE)], check=True, timeout=120)
    before = len(server.entries("jdbc"))
    url = f"jdbc:postgresql://{server.host}:{server.port}/adult"
    out = subprocess.run([java, "-cp", f"{tmp_path}:{JDBC_JAR}", "JdbcProbe", url, "jdbc", PASSWORDS["jdbc"]],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "schema public" in lines
    assert [ln for ln in lines if ln.startswith("table ")] == ["table public.adult", "table public.education_levels"]
    assert "column age int8 -5" in lines and "column sex text 12" in lines
    assert any(ln.startswith("count ") and ln.endswith(" int8") for ln in lines)
    assert any(ln.startswith("refused 42501 ") and "private" in ln for ln in lines)
    assert "metadata m float8" in lines  # getMetaData() of an unexecuted prepared statement ...
    assert len([ln for ln in lines if ln.startswith("prepared ")]) == 6
    entries = server.entries("jdbc")[before:]
    # ... charged nothing: one count and six executions of the prepared statement
    assert len(entries) == 7
    assert sum("age > 2" in e.query for e in entries) == 6


@pytest.mark.clients
def test_jdbc_database_metadata_calls_all_answer_from_the_policy(server, tmp_path):
    """What DBeaver's navigator, table properties and ER view and Metabase's sync call: every
    DatabaseMetaData method answers without error, from the declared tables (keys, indexes,
    procedures and functions: there are none), and charges nothing."""
    javac, java = shutil.which("javac"), shutil.which("java")
    assert javac and java, "a JDK (javac, java) is needed for the JDBC test"
    assert JDBC_JAR.exists(), "the PostgreSQL JDBC driver is missing: install Debian's libpostgresql-jdbc-java"
    subprocess.run([javac, "-d", str(tmp_path), str(META_PROBE)], check=True, timeout=120)
    before = len(server.entries())
    url = f"jdbc:postgresql://{server.host}:{server.port}/adult"
    out = subprocess.run([java, "-cp", f"{tmp_path}:{JDBC_JAR}", "JdbcMetaProbe", url, "jdbc", PASSWORDS["jdbc"]],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    results = {}
    for line in out.stdout.splitlines()[1:]:
        status, name, *rest = line.split(" ", 3)
        results[name] = (status, rest)
    assert {name: status for name, (status, _) in results.items() if status != "ok"} == {}
    rows = {name: int(rest[0]) for name, (_, rest) in results.items() if rest and rest[0].isdigit()}
    assert rows["getTables"] == 2 and rows["getColumns"] == 15 and rows["getCatalogs"] == 1
    for empty in ("getViews", "getPrimaryKeys", "getImportedKeys", "getExportedKeys", "getCrossReference",
                  "getIndexInfo", "getProcedures", "getProcedureColumns", "getFunctions", "getFunctionColumns",
                  "getUDTs"):
        assert rows[empty] == 0, empty
    assert rows["getTypeInfo"] > 20 and rows["getTableTypes"] > 5 and rows["getSchemas"] >= 1
    assert "public" in results["getSchemasPattern"][1][1]
    assert len(server.entries()) == before


def test_dashboard_refreshes_reuse_one_release_per_user(tmp_path):
    """With reuse on (the policy default), the same query from the same user is charged once and
    answered with the same release; another user is charged for their own."""
    srv = start(tmp_path, reuse="forever")
    try:
        answers = []
        for _ in range(5):
            with psycopg.connect(dsn(srv)) as con:
                answers.append(con.execute(COUNT).fetchone())
        assert len(set(answers)) == 1
        assert len(srv.entries("alice")) == 1
        with psycopg.connect(dsn(srv, "carol")) as con:
            con.execute(COUNT).fetchone()
        assert len(srv.entries("carol")) == 1
    finally:
        srv.stop()
