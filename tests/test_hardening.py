"""DuckDB-level hardening of analyst connections: even a statement the binder let through fails.

The binder refuses every statement here (tests/corpus/hostile.toml); these tests run them on the
raw DuckDB connection after :func:`dpsql.backends.sandbox.harden`, as a second line of defence.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import duckdb
import pandas as pd
import pytest

import dpsql
from dpsql.backends.sandbox import HARDENING, REQUIRED_SETTINGS, harden
from tests.conftest import demo_policy


def _settings(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """Every setting, with those DuckDB accepts without listing them (read by current_setting)."""
    from dpsql.backends.sandbox import settings

    return settings(con)


@pytest.fixture
def files(tmp_path: Path) -> Path:
    """A directory holding a CSV, a text file and a parquet file (written before hardening)."""
    (tmp_path / "secret.csv").write_text("a\n42\n")
    (tmp_path / "secret.txt").write_text("top secret\n")
    con = duckdb.connect()
    con.execute(f"COPY (SELECT 42 AS a) TO '{tmp_path / 'secret.parquet'}' (FORMAT parquet)")
    con.close()
    return tmp_path


@pytest.fixture
def hardened(files: Path, monkeypatch: pytest.MonkeyPatch) -> duckdb.DuckDBPyConnection:
    monkeypatch.chdir(files)
    (files / ".tmp").mkdir()  # DuckDB's default spill directory for an in-memory database
    con = duckdb.connect(":memory:")
    con.execute("CREATE TABLE t AS SELECT 1 AS a")
    harden(con)
    yield con
    con.close()


def test_every_setting_exists_in_this_duckdb_and_is_applied() -> None:
    con = dpsql.connect(":memory:", demo_policy())
    settings = _settings(con.engine.connection)
    for name, value in HARDENING:
        if name == "error_on_division_by_zero" and duckdb.__version__.startswith("1."):
            # DuckDB 1.x has no such setting: its division by zero gives NULL or ±inf, never an error
            assert name not in settings
            _, floor, rest = con.engine.connection.execute("SELECT 1 / 0, 1 // 0, 1 % 0").fetchone()
            assert floor is None and rest is None
            continue
        assert name in settings, f"DuckDB {duckdb.__version__} has no setting {name}"
        assert settings[name].lower() == value, name
    if not duckdb.__version__.startswith("1."):  # the setting holds: division by zero is NULL
        assert con.engine.connection.execute("SELECT 1 // 0, 1 % 0").fetchone() == (None, None)
    assert REQUIRED_SETTINGS <= {name for name, _ in HARDENING}
    con.close()


def test_a_duckdb_without_a_required_setting_is_refused() -> None:
    class NoExternalAccessSetting:
        """A connection whose duckdb_settings() lacks enable_external_access."""

        def __init__(self) -> None:
            self.con = duckdb.connect()

        def execute(self, sql: str, *args: object) -> duckdb.DuckDBPyConnection:
            if "duckdb_settings()" in sql:
                sql += " WHERE name <> 'enable_external_access'"
            if "current_setting(" in sql and "enable_external_access" in sql + repr(args):  # the name is bound
                raise duckdb.CatalogException("unrecognized configuration parameter")
            return self.con.execute(sql, *args)

    with pytest.raises(dpsql.Error, match="enable_external_access"):
        harden(NoExternalAccessSetting())  # type: ignore[arg-type]


STATEMENTS = {
    "SET": "SET threads = 1",
    "SET external access back on": "SET enable_external_access = true",
    "SET GLOBAL": "SET GLOBAL memory_limit = '1GB'",
    "RESET the lock": "RESET lock_configuration",
    "PRAGMA": "PRAGMA threads = 1",
    "INSTALL": "INSTALL httpfs",
    "FORCE INSTALL": "FORCE INSTALL json",
    "LOAD": "LOAD httpfs",
    "read_csv": "SELECT * FROM read_csv('secret.csv')",
    "read_csv absolute": "SELECT * FROM read_csv('{dir}/secret.csv')",
    "replacement scan of a file": "SELECT * FROM 'secret.csv'",
    "read_text": "SELECT * FROM read_text('secret.txt')",
    "read_blob": "SELECT * FROM read_blob('/etc/hostname')",
    "read_parquet": "SELECT * FROM read_parquet('secret.parquet')",
    "glob": "SELECT * FROM glob('{dir}/*')",
    "COPY TO": "COPY t TO 'out.csv'",
    "COPY TO the default spill directory": "COPY t TO '.tmp/out.csv'",
    "COPY FROM": "COPY t FROM 'secret.csv'",
    "ATTACH a file": "ATTACH 'other.duckdb' AS other",
    "ATTACH in the default spill directory": "ATTACH '.tmp/other.duckdb' AS other",
    "EXPORT DATABASE": "EXPORT DATABASE 'dump'",
    "persistent secret": "CREATE PERSISTENT SECRET s (TYPE s3, KEY_ID 'k', SECRET 's')",
}


@pytest.mark.parametrize("sql", list(STATEMENTS.values()), ids=list(STATEMENTS))
def test_statement_fails_after_hardening(sql: str, hardened: duckdb.DuckDBPyConnection, files: Path) -> None:
    before = sorted(p.name for p in files.rglob("*"))
    with pytest.raises(duckdb.Error):
        hardened.execute(sql.format(dir=files)).fetchall()
    assert sorted(p.name for p in files.rglob("*")) == before  # nothing written


def test_the_same_statements_work_without_hardening(files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The file statements above really reach the files on an ordinary connection."""
    monkeypatch.chdir(files)
    con = duckdb.connect(":memory:")
    assert con.execute("SELECT * FROM read_csv('secret.csv')").fetchall() == [(42,)]
    assert con.execute("SELECT * FROM 'secret.parquet'").fetchall() == [(42,)]
    con.execute("COPY (SELECT 1) TO 'out.csv'")
    assert (files / "out.csv").exists()
    con.close()


def test_python_replacement_scans_are_off() -> None:
    secret_df = pd.DataFrame({"salary": [120_000]})  # noqa: F841 (read by DuckDB by name)
    con = duckdb.connect(":memory:")
    assert con.execute("SELECT salary FROM secret_df").fetchall() == [(120_000,)]
    harden(con)
    with pytest.raises(duckdb.Error):
        con.execute("SELECT salary FROM secret_df").fetchall()
    con.close()


def test_no_extension_can_be_loaded_or_autoloaded(hardened: duckdb.DuckDBPyConnection) -> None:
    for name in ("httpfs", "postgres_scanner", "sqlite_scanner", "spatial"):
        with pytest.raises(duckdb.Error):
            hardened.execute(f"LOAD {name}")
    with pytest.raises(duckdb.Error):  # autoloading httpfs for an https path is off
        hardened.execute("SELECT * FROM read_csv('https://example.com/x.csv')").fetchall()
    with pytest.raises(duckdb.Error):  # even listing the extension directory is refused
        hardened.execute("SELECT * FROM duckdb_extensions()").fetchall()


def test_spill_directory_is_private_and_still_works(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    con = duckdb.connect(":memory:")
    # DuckDB 1.x needs more working memory beside what it spills to run the aggregation below
    con.execute("SET memory_limit = '80MB'" if duckdb.__version__.startswith("1.") else "SET memory_limit = '40MB'")
    harden(con)
    spill = con.execute("SELECT current_setting('temp_directory')").fetchone()[0]
    assert spill != ".tmp" and os.path.dirname(spill) == tempfile.gettempdir()
    assert os.stat(spill).st_mode & 0o077 == 0  # private to this user
    # an aggregation that needs more than memory_limit spills into it
    rows = con.execute("SELECT count(*) FROM (SELECT range % 2000000 AS g, count(*) FROM range(6000000) "
                       "GROUP BY g)").fetchone()
    assert rows == (2_000_000,)
    con.close()


def test_a_spill_directory_chosen_by_the_owner_is_kept(tmp_path: Path) -> None:
    con = duckdb.connect(":memory:")
    con.execute(f"SET temp_directory = '{tmp_path / 'spill'}'")
    harden(con)
    assert con.execute("SELECT current_setting('temp_directory')").fetchone()[0] == str(tmp_path / "spill")
    con.close()


def test_connections_sharing_one_database_file_are_all_hardened(tmp_path: Path) -> None:
    """DuckDB shares one instance per file in a process: a second dpsql connection (and any
    cursor) finds the configuration locked and hardened, and is accepted."""
    path = str(tmp_path / "data.duckdb")
    raw = duckdb.connect(path)
    raw.execute("CREATE TABLE t AS SELECT 1.0 AS x")
    raw.close()
    policy = {"budget": {"epsilon": 5.0}, "tables": {"t": {"columns": {"x": {"lower": 0, "upper": 1}}}}}
    first = dpsql.connect(path, policy)
    second = dpsql.connect(path, policy)
    for con in (first.engine.connection, second.engine.connection, first.engine.connection.cursor()):
        settings = _settings(con)
        assert REQUIRED_SETTINGS <= set(settings)
        assert all(settings[name].lower() == value for name, value in HARDENING if name in settings)
    assert second.sql("SELECT DP_COUNT(*) FROM t WITH (epsilon = 1)").fetchall()
    first.close()
    second.close()


def test_a_configuration_locked_open_is_refused() -> None:
    con = duckdb.connect(":memory:")
    con.execute("SET lock_configuration = true")  # locked with external access still on
    with pytest.raises(dpsql.Error, match="locked with"):
        harden(con)
    con.close()
