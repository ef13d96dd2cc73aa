"""What a policy opens before the connection is locked down: attached databases and data files.

* ``[attach] name = "file.duckdb"``: each database is attached read-only under that catalog
  name (a database the caller's connection already attached under that name is kept if it is
  the same file, else refused).
* ``source = "visits/*.parquet"`` on a table: a view of that name over the files (Parquet,
  CSV/TSV or JSON; a glob is expanded now, so the table is the files it matched when the
  connection opened). The view lives in the connection's database when that is in memory,
  and in DuckDB's ``temp`` catalog when it is a file (dpsql never writes to a database file);
  :meth:`dpsql.backends.duck.DuckDBEngine.catalog_of` knows which.

Locked down, DuckDB reads no file; ``allowed_paths`` then lets it read exactly these files
(the binder refuses file functions in queries in any case, so only the views reach them).
Every failure here is a one-line :class:`~dpsql.errors.PolicyError` naming the table (or the
attached name) and the path, raised while connecting: before any query, so nothing is charged.

Data files may also stand in for the database (``dpsql.connect("visits.parquet", policy)``, or
``dpsql visits.parquet --policy p.toml``): :func:`with_files` makes them the ``source`` of the
policy table of the same name (or of its one table), and the connection an in-memory one.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import typing as t

from sqlglot import exp

from dpsql.errors import Error, PolicyError

if t.TYPE_CHECKING:
    import duckdb

    from dpsql._policy.policy import Policy, TablePolicy

#: File name endings → the DuckDB function that reads them (compressed CSV and JSON included).
READERS = {
    ".parquet": "read_parquet", ".pq": "read_parquet",
    ".csv": "read_csv", ".tsv": "read_csv", ".csv.gz": "read_csv", ".tsv.gz": "read_csv",
    ".csv.zst": "read_csv", ".json": "read_json_auto", ".jsonl": "read_json_auto",
    ".ndjson": "read_json_auto", ".json.gz": "read_json_auto",
}
GLOB = set("*?[")


def reader_of(path: str) -> str | None:
    """The DuckDB reader for ``path`` by its ending, or None if it is not a data file."""
    low = path.lower()
    for suffix in sorted(READERS, key=len, reverse=True):
        if low.endswith(suffix):
            return READERS[suffix]
    return None


def expand(patterns: t.Iterable[str]) -> list[str]:
    """The files ``patterns`` name (globs expanded, sorted), as absolute paths.

    Raises ``FileNotFoundError`` with the one-line reason when a pattern names no regular file.
    """
    files: list[str] = []
    for pattern in patterns:
        if GLOB & set(pattern):
            found = sorted(p for p in glob.glob(pattern, recursive=True) if os.path.isfile(p))
            if not found:
                raise FileNotFoundError(f"no file matches {pattern}")
            files += found
        elif not os.path.exists(pattern):
            raise FileNotFoundError(f"data file {pattern} does not exist")
        elif not os.path.isfile(pattern):
            raise FileNotFoundError(f"{pattern} is not a regular file")
        else:
            files.append(pattern)
    return [os.path.abspath(p) for p in dict.fromkeys(files)]


def data_files(database: t.Any) -> list[str] | None:
    """The data files ``database`` names (a path or glob ending in a data file's ending, or a
    list of them), or None if it names something else (a database, a connection, a session)."""
    names = list(database) if isinstance(database, (list, tuple)) else [database]
    if not names or not all(isinstance(n, (str, os.PathLike)) for n in names):
        return None
    paths = [os.fspath(n) for n in names]
    return paths if all(reader_of(p) is not None for p in paths) else None


def with_files(database: t.Any, policy: Policy) -> tuple[t.Any, Policy]:
    """The database to open and the policy to open it with: data files become the ``source`` of
    the table they stand for (:func:`policy_with_files`) in an in-memory database; anything else
    is returned as it is."""
    files = data_files(database)
    if files is None:
        return database, policy
    return ":memory:", policy_with_files(files, policy)


def stem(pattern: str) -> str:
    """The table name a file stands for: its name without the data ending (``visits`` for
    ``visits.csv.gz``), or, when that is a glob, the name of its folder (``visits/*.parquet``)."""
    folder, base = os.path.split(os.path.normpath(pattern))
    for suffix in sorted(READERS, key=len, reverse=True):
        if base.lower().endswith(suffix):
            base = base[: -len(suffix)]
            break
    if GLOB & set(base) or not base:
        base = os.path.basename(folder)
    return base.lower()


def table_for(policy: Policy, patterns: list[str]) -> str:
    """The policy table ``patterns`` become: the one of the same name (:func:`stem`), or the
    policy's only table. Error, listing the declared tables, if there is no such table."""
    source = " ".join(patterns)
    names = sorted(policy.tables)
    stems = {stem(p) for p in patterns}
    if len(stems) == 1:
        name = stems.pop()
        if name in policy.tables:
            return name
        found = [k for k, tp in policy.tables.items() if tp.table_name == name]
        if len(found) == 1:
            return found[0]
    if len(names) == 1:
        return names[0]
    declared = f"{len(names)} tables ({', '.join(names)})" if names else "no table"
    raise Error(f"{source} opens as the policy's table of the same name, or as its one table; the policy "
                f"declares {declared}: name the file after one of them (e.g. {names[0] if names else 'visits'}"
                ".parquet)" if names else f"{source}: the policy declares no table to open it as")


def policy_with_files(patterns: list[str], policy: Policy) -> Policy:
    """``policy`` with the files as the ``source`` of the table they stand for (:func:`table_for`)."""
    source = " ".join(patterns)
    readers = {reader_of(p) for p in patterns}
    if None in readers:
        raise Error(f"{source}: a data file ends in one of {', '.join(READERS)}")
    if len(readers) != 1:
        raise Error(f"{source}: the files of one table must be of one kind (Parquet, CSV or JSON)")
    try:  # a missing file is said first: naming it after a table would not help
        files = expand(patterns)
    except FileNotFoundError as err:
        raise Error(str(err)) from None
    name = table_for(policy, patterns)
    tp = policy.tables[name]
    if tp.source:
        raise Error(f"table {name} already has its files in the policy (source = {' '.join(tp.source)}); "
                    f"open the policy without {source}")
    if tp.catalog:
        raise Error(f"table {name} is a table of database {tp.catalog}, not one data files can stand for")
    tables = {**policy.tables, name: dataclasses.replace(tp, source=tuple(files))}
    return dataclasses.replace(policy, tables=tables)


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _table(catalog: str, schema: str, name: str | None = None) -> exp.Table:
    """A quoted ``catalog.schema.name`` (or ``catalog.schema`` for a schema) as a tree.

    >>> _table("temp", "main", 'a"b').sql(dialect="duckdb")
    '"temp"."main"."a""b"'
    """
    parts = [exp.to_identifier(p, quoted=True) for p in (catalog, schema, name) if p is not None]
    return exp.Table(this=parts[-1], db=parts[-2], catalog=parts[0] if len(parts) == 3 else None)


def _file_view(name: exp.Table, reader: str, files: t.Sequence[str], temporary: bool) -> str:
    """``CREATE [TEMPORARY] VIEW name AS SELECT * FROM reader([files])``, the files as string literals.

    >>> print(_file_view(_table("temp", "main", "v"), "read_csv", ["a'b.csv"], True))
    CREATE TEMPORARY VIEW "temp"."main"."v" AS SELECT * FROM READ_CSV(['a''b.csv'])
    """
    call = exp.Anonymous(this=reader, expressions=[exp.Array(expressions=[exp.Literal.string(f) for f in files])])
    properties = exp.Properties(expressions=[exp.TemporaryProperty()]) if temporary else None
    return exp.Create(kind="VIEW", this=name, expression=exp.select("*").from_(exp.Table(this=call)),
                      properties=properties).sql(dialect="duckdb")


def open_sources(con: duckdb.DuckDBPyConnection, policy: Policy) -> dict[str, str]:
    """Attach the policy's databases and create its file-backed tables on ``con`` (not yet locked
    down). Returns the tables (keys) whose views live outside the connection's database, with
    the catalog that holds them."""
    for name, path in sorted(policy.attach.items()):
        _attach(con, name, path)
    if not policy.sources:
        return {}
    database, path = con.execute(
        "SELECT database_name, path FROM duckdb_databases() WHERE database_name = current_database()"
    ).fetchall()[0]
    catalog = "temp" if path else database
    located: dict[str, str] = {}
    files: list[str] = []
    for tp in policy.sources:
        files += _view(con, tp, catalog)
        if catalog != database:
            located[tp.name] = catalog
    _allow(con, files)
    return located


def _attach(con: duckdb.DuckDBPyConnection, name: str, path: str) -> None:
    import duckdb

    attached = dict(con.execute("SELECT lower(database_name), path FROM duckdb_databases()").fetchall())
    if name in attached:
        have = attached[name]
        if have and os.path.exists(have) and os.path.exists(path) and os.path.samefile(have, path):
            return
        raise PolicyError(f"attach.{name}: the connection already has a database {name} "
                          f"({have or 'in memory'}), not {path}")
    if not os.path.isfile(path):
        raise PolicyError(f"attach.{name}: database file {path} does not exist")
    try:
        con.execute(f"ATTACH {literal(path)} AS {quote(name)} (READ_ONLY)")
    except duckdb.Error as err:
        raise PolicyError(f"attach.{name}: cannot attach {path}: {str(err).splitlines()[0]}") from None


def source_files(tp: TablePolicy) -> tuple[str, list[str]]:
    """The reader (one kind of file) and the expanded files of ``tp``'s ``source``, or a
    one-line PolicyError naming the table and the path (for every engine)."""
    where = f"tables.{tp.name}.source"
    readers = {reader_of(p) for p in tp.source}
    if None in readers:
        bad = next(p for p in tp.source if reader_of(p) is None)
        raise PolicyError(f"{where}: {bad} is not a data file (its name must end in one of "
                          f"{', '.join(READERS)})")
    if len(readers) != 1:
        raise PolicyError(f"{where}: the files of table {tp.name} must be of one kind (Parquet, CSV or JSON)")
    try:
        files = expand(tp.source)
    except FileNotFoundError as err:
        raise PolicyError(f"{where}: {err}") from None
    reader = readers.pop()
    assert reader is not None
    return reader, files


def _view(con: duckdb.DuckDBPyConnection, tp: TablePolicy, catalog: str) -> list[str]:
    """Create the view of ``tp`` over its files in ``catalog``; the files it reads."""
    import duckdb

    from dpsql.backends.sandbox import scalar

    where = f"tables.{tp.name}.source"
    shown = " ".join(tp.source)
    reader, files = source_files(tp)
    exists = scalar(
        con, "SELECT count(*) FROM information_schema.tables WHERE lower(table_catalog) = ? "
        "AND lower(table_schema) = ? AND lower(table_name) = ?", [catalog.lower(), tp.schema, tp.table_name])
    if exists:
        raise PolicyError(f"{where}: the database already holds a table {tp.name}; a table with a source "
                          "must be a name the database does not use")
    temporary = catalog == "temp"  # DuckDB's rule for the temp catalog: a TEMPORARY view
    try:
        con.execute(exp.Create(kind="SCHEMA", this=_table(catalog, tp.schema), exists=True).sql(dialect="duckdb"))
        con.execute(_file_view(_table(catalog, tp.schema, tp.table_name), reader, files, temporary))
    except duckdb.Error as err:
        # The reader sniffs the files: its message could quote a value, so it is not shown.
        raise PolicyError(f"{where}: DuckDB cannot read {shown} as table {tp.name} "
                          f"({type(err).__name__}; the details are withheld as they could quote the data)") from None
    return files


def _allow(con: duckdb.DuckDBPyConnection, files: list[str]) -> None:
    """Let the locked-down DuckDB read ``files`` (and whatever it was allowed already)."""
    current = con.execute("SELECT current_setting('allowed_paths')").fetchall()[0][0] or []
    paths = sorted(set(current) | set(files))
    con.execute("SET allowed_paths = [" + ", ".join(literal(f) for f in paths) + "]")


def expose_registered(con: duckdb.DuckDBPyConnection, policy: Policy) -> None:
    """Make declared tables that are registered pandas/Arrow objects (or other temporary tables)
    readable as tables of the database.

    ``con.register("visits", frame)`` creates a temporary view, outside the database whose
    tables dpsql reads. For each declared table the database lacks but the temporary catalog
    holds, an in-memory database gets a view of the same name over it (run before the lockdown;
    the object itself stays where it is). A database file is never written to: there such a
    table is refused, with what to do instead.
    """
    database, path = con.execute(
        "SELECT database_name, path FROM duckdb_databases() WHERE database_name = current_database()"
    ).fetchall()[0]
    rows = con.execute(
        "SELECT lower(table_name), table_catalog FROM information_schema.tables "
        "WHERE table_schema = 'main' AND table_catalog IN (?, 'temp')", [database]
    ).fetchall()
    where: dict[str, set[str]] = {}
    for name, catalog in rows:
        where.setdefault(name, set()).add(catalog)
    for name in sorted(policy.tables):
        if where.get(name) != {"temp"}:
            continue
        if path:
            raise PolicyError(
                f"table {name} is a registered (temporary) object, not a table of database {path}, which "
                f"dpsql never writes to; register it on an in-memory connection (duckdb.connect()), or "
                f"store it as a table: CREATE TABLE {name} AS ...")
        view = exp.Create(kind="VIEW", this=_table(database, "main", name),
                          expression=exp.select("*").from_(_table("temp", "main", name)))
        con.execute(view.sql(dialect="duckdb"))
