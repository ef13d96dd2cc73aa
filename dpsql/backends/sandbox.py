"""The DuckDB sandbox: lock an analyst connection down before any query runs.

No files, network, extensions or Python replacement scans; division by zero is NULL; then the
configuration is locked, for every connection and cursor of the DuckDB instance. Tested on the
raw connection in tests/test_hardening.py. This is the second line of defence: the binder's
allowlist is the first.
"""

from __future__ import annotations

import os
import typing as t

import duckdb

from dpsql.errors import Error

#: Settings applied to every analyst connection before the configuration is locked.
HARDENING = (
    ("error_on_division_by_zero", "false"),
    ("python_enable_replacements", "false"),
    ("autoinstall_known_extensions", "false"),
    ("autoload_known_extensions", "false"),
    ("allow_community_extensions", "false"),
    ("enable_external_access", "false"),
    ("lock_configuration", "true"),
)


#: Settings without which an analyst connection is not locked down: a DuckDB that lacks one is
#: refused rather than silently left open (the others are conveniences, applied when present).
REQUIRED_SETTINGS = frozenset({
    "enable_external_access", "lock_configuration", "python_enable_replacements",
    "autoinstall_known_extensions", "autoload_known_extensions",
})


def scalar(con: duckdb.DuckDBPyConnection, sql: str, params: list[t.Any] | None = None) -> t.Any:
    """The value of a statement that returns one row of one column (a count, a setting).

    >>> scalar(duckdb.connect(), "SELECT 40 + ?", [2])
    42
    """
    row = (con.execute(sql) if params is None else con.execute(sql, params)).fetchone()
    if row is None:  # not for the statements dpsql runs here: each returns exactly one row
        raise Error(f"DuckDB returned no row for: {sql}")
    return row[0]


def settings(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """The current value (lower case) of every setting of :data:`HARDENING` this DuckDB has, with
    the others it lists. Some releases accept a setting that ``duckdb_settings()`` does not list
    (``error_on_division_by_zero`` in DuckDB 2.0.1): those are read with ``current_setting``."""
    current = {n: str(v).lower() for n, v in con.execute("SELECT name, value FROM duckdb_settings()").fetchall()}
    for name, _ in HARDENING:
        if name not in current:
            try:
                current[name] = str(scalar(con, "SELECT current_setting(?)", [name])).lower()
            except duckdb.Error:
                pass  # no such setting in this DuckDB
    return current


def harden(con: duckdb.DuckDBPyConnection) -> None:
    """Lock an analyst connection down: no files, network, extensions or Python scans."""
    current = settings(con)
    missing = sorted(REQUIRED_SETTINGS - set(current))
    if missing:
        raise Error(f"this DuckDB has no setting {missing[0]}; dpsql cannot lock the connection down")
    if current.get("lock_configuration") == "true":
        # Connections to one database file in one process share a DuckDB instance, and its
        # configuration is already locked: check the settings instead of setting them.
        wrong = [n for n, v in HARDENING if n in current and current[n] != v]
        if wrong:
            raise Error(f"the DuckDB configuration is locked with {wrong[0]} = {current[wrong[0]]}; "
                        "dpsql cannot lock the connection down")
        return
    _private_temp_directory(con)
    for name, value in HARDENING:
        if name in current:
            # GLOBAL: the settings hold for every connection and cursor of this DuckDB instance
            con.execute(f"SET GLOBAL {name} = {value}")


def _private_temp_directory(con: duckdb.DuckDBPyConnection) -> None:
    """Move DuckDB's spill directory from its default to a fresh private one.

    With external access disabled DuckDB still lets COPY, ATTACH and read_csv reach its temp
    directory, and the default one ('.tmp' in the working directory, or '<database>.tmp') is
    shared and guessable. A directory the data owner configured is kept, and so is one DuckDB
    has already spilled into (it cannot be switched then); the binder refuses those statements
    in any case, so this only narrows what a binder bypass could reach.
    """
    import atexit
    import shutil
    import tempfile

    current = scalar(con, "SELECT current_setting('temp_directory')")
    path = scalar(con, "SELECT path FROM duckdb_databases() WHERE database_name = current_database()")
    if current != (f"{path}.tmp" if path else ".tmp"):
        return
    private = tempfile.mkdtemp(prefix="dpsql-spill-")
    try:
        con.execute("SET temp_directory = ?", [private])
    except duckdb.Error:
        os.rmdir(private)
        return
    atexit.register(shutil.rmtree, private, True)
