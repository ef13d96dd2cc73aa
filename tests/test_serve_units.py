"""``dpsql serve``'s parts: users and verifiers, parameter inlining, the ledger's user column,
and the open (no users) mode."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import psycopg
import pytest

from dpsql._accounting.budget import Budget, Cost
from dpsql._accounting.ledger import Ledger
from dpsql._policy.policy import policy_from_dict
from dpsql.errors import BudgetError, OptionError, PolicyError
from dpsql.interfaces.server import params
from dpsql.interfaces.server.main import is_loopback
from dpsql.interfaces.server.users import load_users, make_verifier, parse_verifier
from tests.serve.harness import start


def policy(server: dict) -> object:
    return policy_from_dict({"budget": {"epsilon": 1.0}, "tables": {"t": {}}, "server": server})


def test_users_store_verifiers_never_plaintext():
    verifier = make_verifier("s3cret")
    assert "s3cret" not in verifier and verifier.startswith("SCRAM-SHA-256$4096:")
    users = load_users(policy({"users": {"ann": {"password": verifier, "share": 0.5}}}))
    assert users["ann"].share == 0.5 and users["ann"].iterations == 4096
    with pytest.raises(PolicyError, match="never plaintext.*--hash-password"):
        load_users(policy({"users": {"ann": {"password": "s3cret"}}}))
    with pytest.raises(PolicyError, match="share must be a number in"):
        load_users(policy({"users": {"ann": {"password": verifier, "share": 1.5}}}))
    with pytest.raises(PolicyError, match="unknown key 'port'"):
        load_users(policy({"port": 1}))
    with pytest.raises(PolicyError, match="malformed"):
        parse_verifier("ann", "SCRAM-SHA-256$4096:abc$def")
    with pytest.raises(PolicyError, match="server must be a table"):
        policy_from_dict({"budget": {"epsilon": 1.0}, "server": 3})


def test_users_file_beside_the_policy(tmp_path):
    (tmp_path / "users.toml").write_text(f'[users.ann]\npassword = "{make_verifier("x")}"\n', encoding="utf-8")
    pol = policy_from_dict({"budget": {"epsilon": 1.0}, "server": {"users_file": "users.toml"}},
                           source=str(tmp_path / "policy.toml"))
    assert list(load_users(pol)) == ["ann"]


def test_parameters_become_literals_of_the_tree():
    sql = "SELECT DP_COUNT(*) AS n FROM public.adult WHERE sex = $1 AND age > $2 WITH (epsilon = $3)"
    text = params.inline(sql, ["a' OR 1=1 --", "30", "0.5"], [None, 20, None])
    assert text == ("SELECT DP_COUNT(*) AS n FROM adult WHERE sex = 'a'' OR 1=1 --' AND age > 30 "
                    "WITH (epsilon = 0.5)")
    with pytest.raises(OptionError, match="not a number"):
        params.inline("SELECT $1", ["1; DROP TABLE t"], [20])
    assert params.count(sql) == 3
    assert params.stand_ins(sql, [None, 20, None]).endswith("sex = NULL AND age > 1 WITH (epsilon = 1)")


def test_ledger_records_users_and_checks_a_share(tmp_path):
    path = str(tmp_path / "l.ledger")
    with Ledger.open(path, Budget(Cost(epsilon=10.0)), create=True) as led:
        led.charge(Cost(epsilon=1.0), query="q", user="ann", user_total=Cost(epsilon=1.5))
        with pytest.raises(BudgetError):
            led.charge(Cost(epsilon=1.0), query="q", user="ann", user_total=Cost(epsilon=1.5))
        led.charge(Cost(epsilon=1.0), query="q", user="ben")
        assert led.spent_by("ann") == Cost(epsilon=1.0)
        assert [e.user for e in led.history()] == ["ann", "ben"]


def test_old_ledger_files_gain_the_user_column(tmp_path):
    path = str(tmp_path / "old.ledger")
    with Ledger.open(path, Budget(Cost(epsilon=10.0)), create=True) as led:
        led.charge(Cost(epsilon=1.0), query="before")
    con = sqlite3.connect(path)
    con.execute("ALTER TABLE ledger_entries DROP COLUMN user")  # as files were made before the column
    con.commit()
    con.close()
    with Ledger.open(path, Budget(Cost(epsilon=10.0))) as led:
        entries = led.history()
        assert [(e.query, e.user) for e in entries] == [("before", "")]
        led.charge(Cost(epsilon=1.0), query="after", user="ann")
        assert led.spent() == Cost(epsilon=2.0)


def test_without_users_a_one_time_password_and_no_password_only_on_loopback(tmp_path):
    assert is_loopback("127.0.0.1") and is_loopback("::1") and not is_loopback("192.0.2.1")
    srv = start(tmp_path, users=False)
    try:
        assert srv.password and "one-time password" in "".join(srv.log)
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(f"host={srv.host} port={srv.port} dbname=x user=anyone password=wrong")
        with psycopg.connect(f"host={srv.host} port={srv.port} dbname=x user=anyone password={srv.password}") as con:
            assert con.execute("SELECT DP_COUNT(*) AS n FROM adult WITH (epsilon = 0.1)").fetchall()[0][0] > 0
        assert [e.user for e in srv.entries()] == ["anyone"]
    finally:
        srv.stop()
    srv = start(tmp_path, users=False, extra=["--no-password"])
    try:
        assert "WITHOUT a password" in "".join(srv.log) and srv.password is None
        with psycopg.connect(f"host={srv.host} port={srv.port} dbname=x user=someone") as con:
            assert con.execute("SELECT DP_COUNT(*) AS n FROM adult WITH (epsilon = 0.1)").fetchall()[0][0] > 0
    finally:
        srv.stop()
    serve = [sys.executable, "-m", "dpsql", "serve", str(tmp_path / "adult.duckdb"), "--policy",
             str(tmp_path / "policy-open.toml"), "--host", "192.0.2.1", "--port", "0"]
    out = subprocess.run([*serve, "--no-password"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "--no-password accepts anyone" in out.stderr and "not a loopback address" in out.stderr
    out = subprocess.run(serve, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "192.0.2.1 is not a loopback address: serve TLS there" in out.stderr


def test_hash_password_prints_a_verifier():
    out = subprocess.run([sys.executable, "-m", "dpsql", "serve", "--hash-password"], input="pw\n",
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    parse_verifier("x", out.stdout.strip())


def test_processes_share_the_port_and_the_ledger(tmp_path):
    import threading

    from tests.serve.harness import PASSWORDS

    srv = start(tmp_path, users=True, extra=["--processes", "2"])
    answers, errors = [], []

    def client(k: int) -> None:
        try:
            with psycopg.connect(f"host={srv.host} port={srv.port} dbname=x user=alice "
                                 f"password={PASSWORDS['alice']}") as con:
                for _ in range(3):
                    answers.append(con.execute("SELECT DP_COUNT(*) AS n FROM adult WITH (epsilon = 0.01)").fetchall())
        except Exception as err:
            errors.append(err)

    try:
        threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=120)
        assert not errors and len(answers) == 24
        assert len(srv.entries("alice")) == 24
    finally:
        srv.stop()


def test_processes_need_a_ledger_file():
    out = subprocess.run([sys.executable, "-m", "dpsql", "serve", "--demo", "--port", "0", "--processes", "2"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "needs a policy with a budget.ledger file" in out.stderr


def test_benchmarks_page_keeps_the_serve_section_when_rewritten():
    from pathlib import Path

    from bench.report import KEPT, kept_sections

    page = (Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    kept = kept_sections(page)
    assert KEPT + "\n## dpsql serve\n" in kept and "answers = charges" in kept
    assert KEPT + "\n## dpsql on Spark" in kept and KEPT + "\n## Joins" in kept
    assert kept_sections("# B\n\n" + KEPT + "\n## S\nbody\n\n## T\nt\n") == KEPT + "\n## S\nbody\n"


def test_cursor_directions_follow_postgresql():
    from dpsql.interfaces.server.cursors import Cursor

    cur = Cursor("c", [], [(1,), (2,), (3,)], hold=False)
    assert cur.fetch("FORWARD", 1) == [(1,)] and cur.position == 1
    assert cur.fetch("BACKWARD", 1) == [] and cur.position == 0  # PRIOR from the first row: before it
    assert cur.fetch("ABSOLUTE", -1) == [(3,)] and cur.fetch("RELATIVE", 0) == [(3,)]
    assert cur.fetch("BACKWARD", float("inf")) == [(2,), (1,)] and cur.position == 0
    assert cur.fetch("RELATIVE", 2) == [(2,)] and cur.fetch("RELATIVE", 5) == [] and cur.position == 4
    assert cur.fetch("FORWARD", float("inf")) == [] and cur.fetch("ABSOLUTE", 0) == []
    assert cur.fetch("FORWARD", 2) == [(1,), (2,)] and cur.fetch("FORWARD", 5) == [(3,)] and cur.position == 4


def test_statements_split_and_read_on_tokens():
    from dpsql.interfaces.server.utility import is_dpsql_statement, split, words

    assert split("select 1") == ["select 1"] and split("select ';' ; /* ; */ select 2;") == ["select ';' ", "select 2"]
    assert split("BEGIN; DECLARE c CURSOR FOR SELECT DP_COUNT(*) FROM t WITH (epsilon = 1); CLOSE c") == [
        "BEGIN", "DECLARE c CURSOR FOR SELECT DP_COUNT(*) FROM t WITH (epsilon = 1)", "CLOSE c"]
    w = words('/* a */ set  "Search_Path" TO public, "$user" ; -- b')
    assert w is not None and w.keyword(0) == "SET" and w.name(1) == "Search_Path" and w.rest(3) == 'public, "$user"'
    assert words("select 1; select 2") is None  # one statement at a time
    for dpsql_catalog in ("SHOW TABLES", "show all tables;", "/* x */ SHOW COLUMNS FROM adult", "describe adult"):
        assert is_dpsql_statement(words(dpsql_catalog)), dpsql_catalog
    for setting in ("SHOW ALL", "SHOW search_path", "SHOW transaction isolation level"):
        assert not is_dpsql_statement(words(setting)), setting


def test_catalog_queries_are_recognised_on_the_parse_tree():
    from dpsql.interfaces.server.pgrewrite import Context, array_items, is_catalog_query, parse, rewrite

    for sql in ("SELECT relname FROM pg_catalog.pg_class", 'select * from "pg_catalog"."pg_type"',
                "SELECT * FROM information_schema.tables", "select pg_catalog.version()",
                "SELECT current_schemas(true)", "SELECT 'int8'::regtype", "select x from pg_namespace n"):
        assert is_catalog_query(parse(sql)), sql
    for sql in ("SELECT 1", "SELECT * FROM adult", "WITH pg_x AS (SELECT 1) SELECT * FROM pg_x",
                "SELECT DP_COUNT(*) FROM adult WITH (epsilon = 1)", "SHOW search_path"):
        assert not is_catalog_query(parse(sql)), sql
    assert array_items('{a,"b c",NULL,"NULL",d\\,e}') == ["a", "b c", None, "NULL", "d,e"] and array_items("{}") == []
    sql = rewrite(parse("SELECT c.relname, pg_catalog.pg_get_userbyid(c.relowner) FROM pg_catalog.pg_class c "
                        "WHERE c.relname OPERATOR(pg_catalog.~) '^(adult)$' COLLATE pg_catalog.default "
                        "AND c.relkind = ANY (ARRAY['r', 'p'])"), Context("ann", "db")).sql(dialect="duckdb")
    assert "dpsql_pg_catalog.pg_class" in sql and "'ann' AS \"pg_get_userbyid\"" in sql
    assert "REGEXP_MATCHES(c.relname, '^(adult)$')" in sql and "COLLATE" not in sql and "LIST_CONTAINS" in sql


def test_a_catalog_query_that_runs_too_long_is_interrupted(monkeypatch):
    import time

    import duckdb

    from dpsql.interfaces.server import scratch

    monkeypatch.setattr(scratch, "TIMEOUT", 0.5)
    catalog = scratch.Scratch({"t": {"x": 20}})
    started = time.monotonic()
    with pytest.raises(duckdb.Error):
        catalog.run("SELECT count(*) FROM generate_series(1, 100000000000) AS s(i), dpsql_pg_catalog.pg_class")
    assert time.monotonic() - started < 5
    assert catalog.run("SELECT relname FROM dpsql_pg_catalog.pg_class").to_pylist() == [{"relname": "t"}]
    with pytest.raises(duckdb.Error):  # and it holds only the catalog: no files
        catalog.run("SELECT * FROM read_csv('/etc/hostname')")
