"""Data files as the table a policy declares: ``dpsql visits.parquet --policy p.toml``.

A Parquet, CSV/TSV or JSON file (or several, or a glob) is opened as a view in an in-memory
DuckDB, named after the one table the policy declares, before the connection is locked down.
The files stay where they are: DuckDB reads them when a query runs. Locked down, DuckDB reads
no file; ``allowed_paths`` lets it read exactly these (the binder refuses file functions in
queries in any case, so only the view reaches them).
"""

from __future__ import annotations

import glob
import os
import typing as t

from dpsql.errors import Error

if t.TYPE_CHECKING:
    import duckdb

    from dpsql.privacy.policy import Policy

#: File name endings → the DuckDB function that reads them (compressed CSV and JSON included).
READERS = {
    ".parquet": "read_parquet", ".pq": "read_parquet",
    ".csv": "read_csv", ".tsv": "read_csv", ".csv.gz": "read_csv", ".tsv.gz": "read_csv",
    ".csv.zst": "read_csv", ".json": "read_json_auto", ".jsonl": "read_json_auto",
    ".ndjson": "read_json_auto", ".json.gz": "read_json_auto",
}
_GLOB = set("*?[")


def reader_of(path: str) -> str | None:
    """The DuckDB reader for ``path`` by its ending, or None if it is not a data file."""
    low = path.lower()
    for suffix in sorted(READERS, key=len, reverse=True):
        if low.endswith(suffix):
            return READERS[suffix]
    return None


def is_data_file(path: str) -> bool:
    return reader_of(path) is not None


def expand(patterns: list[str]) -> list[str]:
    """The files ``patterns`` name (globs expanded, sorted), as absolute paths; Error if one is missing."""
    files: list[str] = []
    for pattern in patterns:
        if _GLOB & set(pattern):
            found = sorted(p for p in glob.glob(pattern, recursive=True) if os.path.isfile(p))
            if not found:
                raise Error(f"no file matches {pattern}")
            files += found
        elif not os.path.isfile(pattern):
            raise Error(f"data file {pattern} does not exist")
        else:
            files.append(pattern)
    return [os.path.abspath(p) for p in dict.fromkeys(files)]


def table_for(policy: Policy, source: str) -> str:
    """The table a data file becomes: the one the policy declares (Error if not exactly one)."""
    names = sorted(policy.tables)
    if len(names) == 1:
        return names[0]
    declared = f"{len(names)} tables ({', '.join(names)})" if names else "no table"
    raise Error(f"{source} can be opened only as the one table of its policy, and the policy declares "
                f"{declared}; load the files into a DuckDB database with one table each instead")


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def view_setup(patterns: list[str], policy: Policy) -> t.Callable[[duckdb.DuckDBPyConnection], None]:
    """A ``setup`` for :func:`dpsql.connect` that creates the policy's table as a view over the files."""
    source = " ".join(patterns)
    readers = {reader_of(p) for p in patterns}
    if None in readers:
        raise Error(f"{source}: a data file ends in one of {', '.join(READERS)}")
    if len(readers) != 1:
        raise Error(f"{source}: the files of one table must be of one kind (Parquet, CSV or JSON)")
    reader = readers.pop()
    table = table_for(policy, source)
    files = expand(patterns)

    def setup(con: duckdb.DuckDBPyConnection) -> None:
        import duckdb

        paths = "[" + ", ".join(_literal(f) for f in files) + "]"
        name = '"' + table.replace('"', '""') + '"'
        try:
            con.execute(f"CREATE VIEW {name} AS SELECT * FROM {reader}({paths})")
        except duckdb.Error as err:
            raise Error(f"cannot read {source}: {str(err).splitlines()[0]}") from None
        # Locked down, DuckDB reads no file; these it may (the view needs them at every query).
        con.execute(f"SET allowed_paths = {paths}")

    return setup
