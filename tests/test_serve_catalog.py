"""``dpsql serve``'s catalog and session statements with Python clients: SQLAlchemy's PostgreSQL
dialects (psycopg 3 and psycopg2) as Superset uses them, pg_catalog queries with parameters,
psycopg's named (server-side) cursors, COPY refused, and the same statements spelled in other
ways. The psql and JDBC checks are in tests/test_serve.py (``clients`` marker)."""

from __future__ import annotations

import pandas as pd
import psycopg
import psycopg2  # noqa: F401  (SQLAlchemy's postgresql+psycopg2 dialect: a missing install fails here)
import pytest
import sqlalchemy as sa

from dpsql.interfaces.server.utility import COPY_REFUSED
from tests.serve.harness import PASSWORDS, Server, start

#: what Superset's chart builder sends for a bar chart of a virtual dataset
CHART = ("SELECT sex AS sex, COUNT(*) AS count FROM (SELECT * FROM adult) AS virtual_table "
         "GROUP BY sex ORDER BY count DESC LIMIT 10000")
DRIVERS = ["psycopg2"] + (["psycopg"] if sa.__version__ >= "2" else [])


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    # the defaults a BI tool needs: a default budget and plain aggregates mapped to DP ones
    srv = start(tmp_path_factory.mktemp("catalog"), defaults="epsilon = 0.5\nplain_aggregates = true")
    yield srv
    srv.stop()


def dsn(srv: Server, user: str = "alice") -> str:
    return f"host={srv.host} port={srv.port} dbname=adult user={user} password={PASSWORDS[user]}"


def engine(srv: Server, driver: str) -> sa.engine.Engine:
    return sa.create_engine(f"postgresql+{driver}://alice:{PASSWORDS['alice']}@{srv.host}:{srv.port}/adult")


# -- SQLAlchemy's PostgreSQL dialects (Superset's route through the PostgreSQL driver) ----------


@pytest.mark.parametrize("driver", DRIVERS)
def test_sqlalchemy_pg_dialect_reflects_the_policy_and_charges_nothing(server, driver):
    before = len(server.entries())
    eng = engine(server, driver)
    with eng.connect() as c:  # the dialect's first statements: version(), current_schema(), SHOW ...
        assert c.execute(sa.text("select pg_catalog.version()")).scalar().startswith("PostgreSQL 16")
    insp = sa.inspect(eng)
    assert "public" in insp.get_schema_names()
    assert insp.get_table_names() == ["adult", "education_levels"]
    assert insp.get_view_names() == []
    assert insp.has_table("adult") and not insp.has_table("nosuch")
    columns = {c["name"]: c["type"] for c in insp.get_columns("adult")}
    assert len(columns) == 15 and list(columns)[:2] == ["age", "workclass"]
    assert isinstance(columns["age"], sa.BIGINT) and isinstance(columns["sex"], sa.TEXT)
    assert [c["name"] for c in insp.get_columns("education_levels")] == ["education_num", "education"]
    assert insp.get_pk_constraint("adult")["constrained_columns"] == []
    assert insp.get_foreign_keys("adult") == [] and insp.get_indexes("adult") == []
    assert insp.get_unique_constraints("adult") == [] and insp.get_check_constraints("adult") == []
    with pytest.raises(sa.exc.NoSuchTableError):
        insp.get_columns("nosuch")
    eng.dispose()
    assert len(server.entries()) == before  # the catalog is not the data: nothing charged


@pytest.mark.parametrize("driver", DRIVERS)
def test_sqlalchemy_pg_dialect_read_sql_and_a_chart_query(server, driver):
    eng = engine(server, driver)
    before = len(server.entries("alice"))
    frame = pd.read_sql(sa.text("SELECT sex, DP_MEAN(age) AS mean_age FROM adult GROUP BY sex WITH (epsilon = 0.5)"),
                        eng)
    assert list(frame.columns) == ["sex", "mean_age"] and sorted(frame["sex"]) == ["Female", "Male"]
    assert frame["mean_age"].between(30, 50).all()
    chart = pd.read_sql(sa.text(CHART), eng)
    assert list(chart.columns) == ["sex", "count"] and set(chart["sex"]) == {"Female", "Male"}
    assert 30000 < chart["count"].sum() < 35000
    with_options = pd.read_sql(sa.text(CHART.replace("COUNT(*)", "DP_COUNT(*)") + " WITH (epsilon = 0.2)"), eng)
    assert 30000 < with_options["count"].sum() < 35000
    with eng.connect() as c, pytest.raises(sa.exc.ProgrammingError, match="private"):  # Superset's "samples"
        c.execute(sa.text("SELECT * FROM adult LIMIT 100"))
    eng.dispose()
    assert len(server.entries("alice")) == before + 3


# -- catalog queries over the wire -----------------------------------------------------------


def test_catalog_queries_take_parameters_and_read_the_catalog_only(server):
    before = len(server.entries())
    with psycopg.connect(dsn(server)) as con:
        rows = con.execute("SELECT c.relname, a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod) "
                           "FROM pg_catalog.pg_class c JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid "
                           "WHERE c.relname = %s AND a.attnum <= %s ORDER BY a.attnum", ["adult", 2]).fetchall()
        assert rows == [("adult", "age", "bigint"), ("adult", "workclass", "text")]
        # psycopg's own type lookup: no hstore here
        assert con.execute("SELECT oid, typname FROM pg_type WHERE oid = to_regtype(%s)", ["hstore"]).fetchall() == []
        assert con.execute("SELECT %s::regtype::oid, 'int8'::regtype::text", ["integer"]).fetchone() == (23, "bigint")
        assert con.execute("SELECT setting FROM pg_catalog.pg_settings WHERE name = 'max_index_keys'").fetchall() \
            == [("32",)]
        assert con.execute("SELECT current_database(), current_user, pg_catalog.current_schemas(true)").fetchone() \
            == ("adult", "alice", ["pg_catalog", "public"])
        assert con.execute("SELECT pg_catalog.set_config('application_name', 'report', false)").fetchone() == ("report",)
        assert con.execute("SHOW application_name").fetchone() == ("report",)
        assert con.execute("SELECT has_table_privilege('public.adult', 'SELECT'), "
                           "has_table_privilege(current_user, 'adult', 'INSERT')").fetchone() == (True, False)
        assert con.execute("SELECT table_name FROM information_schema.columns WHERE column_name = %s",
                           ["education_num"]).fetchall() == [("adult",), ("education_levels",)]
        # a table picker's query: the tables of the schemas on the search path, names quoted as needed
        picker = ("SELECT quote_ident(table_name) AS t FROM information_schema.tables "
                  "WHERE table_type = 'BASE TABLE' AND quote_ident(table_schema) IN ("
                  "SELECT CASE WHEN trim(p[i]) = '\"$user\"' THEN user ELSE trim(p[i]) END "
                  "FROM generate_series(array_lower(string_to_array(current_setting('search_path'), ','), 1), "
                  "array_upper(string_to_array(current_setting('search_path'), ','), 1)) AS i, "
                  "string_to_array(current_setting('search_path'), ',') AS p) ORDER BY 1")
        assert con.execute(picker).fetchall() == [("adult",), ("education_levels",)]
        assert con.execute("SELECT current_setting('server_version_num')::int / 100 AS v").fetchone() == (1600,)
        # a relation the catalog does not emulate: no rows, not an error a tool would stop on
        assert con.execute("SELECT * FROM pg_catalog.pg_stat_statements").fetchall() == []
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="cannot also read adult"):
            con.execute("SELECT c.relname FROM pg_class c, adult WHERE c.relname = adult.sex")
    assert len(server.entries()) == before


# -- cursors and COPY -------------------------------------------------------------------------


def test_named_cursor_runs_its_query_once_and_fetches_from_the_rows(server):
    before = len(server.entries("alice"))
    with psycopg.connect(dsn(server)) as con:
        with con.cursor(name="by_sex") as cur:
            cur.execute("SELECT sex, DP_COUNT(*) AS n FROM adult WHERE age > %s GROUP BY sex "
                        "WITH (epsilon = 0.5)", [30])
            assert [(c.name, c.type_code) for c in cur.description] == [("sex", 25), ("n", 20)]
            first = cur.fetchone()
            rest = cur.fetchall()
            assert [first[0]] + [r[0] for r in rest] == ["Female", "Male"]
            cur.scroll(0, mode="absolute")
            assert cur.fetchmany(5) == [first, *rest]  # the same rows: run once, not again
        con.commit()
    with psycopg.connect(dsn(server), autocommit=True) as con:
        with pytest.raises(psycopg.errors.NoActiveSqlTransaction, match="WITH HOLD"):
            with con.cursor(name="outside") as cur:
                cur.execute("SELECT DP_COUNT(*) AS n FROM adult WITH (epsilon = 0.5)")
        with con.cursor(name="held", withhold=True) as cur:
            cur.execute("SELECT DP_COUNT(*) AS n FROM adult WITH (epsilon = 0.5)")
            assert 30000 < cur.fetchall()[0][0] < 35000
        with pytest.raises(psycopg.errors.InvalidCursorName, match='cursor "held" does not exist'):
            con.execute('FETCH NEXT FROM "held"')  # closed with the cursor object
    assert len(server.entries("alice")) == before + 2  # each DECLARE once; the refused one nothing


def test_sql_cursor_directions_and_the_end_of_the_transaction(server):
    with psycopg.connect(dsn(server), autocommit=True) as con:
        con.execute("BEGIN")
        con.execute("DECLARE c SCROLL CURSOR FOR SELECT education, education_num FROM education_levels "
                    "ORDER BY education_num")
        first = con.execute("FETCH NEXT FROM c").fetchall()
        assert len(first) == 1
        assert con.execute("FETCH PRIOR FROM c").fetchall() == []
        assert con.execute("FETCH ABSOLUTE 1 IN c").fetchall() == first
        assert con.execute("FETCH FORWARD 2 FROM c").fetchall()[0][1] == first[0][1] + 1
        last = con.execute("FETCH LAST FROM c").fetchall()
        assert con.execute("FETCH BACKWARD ALL FROM c").fetchall()[-1] == first[0]
        con.execute("MOVE ABSOLUTE -1 IN c")
        assert con.execute("FETCH RELATIVE 0 FROM c").fetchall() == last
        assert con.execute("FETCH ALL c").fetchall() == []
        con.execute("COMMIT")  # a cursor without HOLD ends with its transaction
        with pytest.raises(psycopg.errors.InvalidCursorName):
            con.execute("FETCH c")


def test_copy_is_refused_with_the_way_to_export(server):
    before = len(server.entries())
    with psycopg.connect(dsn(server), autocommit=True) as con:
        for statement in ("COPY (SELECT sex, DP_COUNT(*) AS n FROM adult GROUP BY sex WITH (epsilon = 1)) TO STDOUT",
                          "copy adult to stdout with (format csv)", "COPY adult FROM STDIN"):
            with pytest.raises(psycopg.errors.FeatureNotSupported) as err:
                with con.cursor().copy(statement):
                    pass
            assert str(err.value) == COPY_REFUSED
    assert len(server.entries()) == before


# -- variant spellings ------------------------------------------------------------------------


def _answers(con: psycopg.Connection, statement: str, prepare: bool) -> list[tuple] | None:
    cur = con.execute(statement, prepare=prepare)
    return cur.fetchall() if cur.description is not None else None


@pytest.mark.parametrize("prepare", [False, True])
def test_variant_spellings_read_the_same(server, prepare):
    """Comments, case, quoting, spacing and a trailing semicolon do not change what a session or
    catalog statement means, over the simple (prepare=False) and the extended protocol."""
    variants = {
        "SHOW TRANSACTION ISOLATION LEVEL": ["show  transaction\n isolation   level ;",
                                             "/* c */ SHOW transaction ISOLATION level -- x"],
        "SELECT pg_catalog.version()": ["select PG_CATALOG.VERSION ( ) ;", 'SELECT "pg_catalog".version() -- x',
                                        "/* a; b */ select version()"],
        "SELECT relname FROM pg_catalog.pg_class ORDER BY relname": [
            'select RELNAME from "pg_catalog"."pg_class" order by 1;',
            "/* x */ SELECT c.relname FROM PG_CLASS c ORDER BY c.relname -- y",
            "SELECT relname FROM pg_class WHERE relname LIKE 'education\\_%' OR relname = 'adult' ORDER BY 1"],
        "SELECT COUNT(*) AS n FROM education_levels": None,  # a public table: exact, the same each time
    }
    with psycopg.connect(dsn(server, "carol"), autocommit=True) as con:
        for plain, others in variants.items():
            expected = _answers(con, plain, prepare)
            assert expected, plain
            for other in others or ["select count(*) as n from EDUCATION_LEVELS ;"]:
                assert _answers(con, other, prepare) == expected, other
        for spelling in ("SET application_name = 'a b'", "/* c */ set   Application_Name  TO  'a b' ;",
                         "SET \"application_name\" = 'a b'", "set session application_name to E'a b'"):
            con.execute("RESET application_name")
            con.execute(spelling, prepare=prepare)
            for show in ("SHOW application_name", "show APPLICATION_NAME;", 'SHOW "application_name" -- x'):
                assert con.execute(show, prepare=prepare).fetchall() == [("a b",)], (spelling, show)
        con.execute("set search_path to public, \"$user\";")
        assert con.execute("SHOW search_path").fetchall() == [('public, "$user"',)]
        for begin, end in (("begin work;", "commit;"), ("START TRANSACTION ISOLATION LEVEL READ COMMITTED", "END"),
                           ("/* b */ BEGIN", "rollback work ;")):
            con.execute(begin, prepare=prepare)
            assert con.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS, begin
            con.execute("SAVEPOINT \"s 1\"")
            con.execute("rollback to savepoint \"s 1\";")
            con.execute("RELEASE \"s 1\"")
            con.execute(end, prepare=prepare)
            assert con.info.transaction_status == psycopg.pq.TransactionStatus.IDLE, end
        for copy in ("copy (select 1) to stdout", "/* c */ COPY adult TO STDOUT;"):
            with pytest.raises(psycopg.errors.FeatureNotSupported):
                con.execute(copy, prepare=prepare)
