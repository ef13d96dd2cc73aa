"""Data files as a table the policy declares: ``dpsql visits.parquet --policy p.toml``.

A Parquet, CSV/TSV or JSON file (or several, or a glob) becomes the policy's table of the same
name (the file's stem, or for a glob such as ``visits/*.parquet`` its folder's name), or the
policy's one table if it declares only one: the command gives that table the files as its
``source`` and opens an in-memory DuckDB, where :mod:`dpsql.engine.sources` creates the view
before the connection is locked down. The files stay where they are: DuckDB reads them when a
query runs.
"""

from __future__ import annotations

import dataclasses
import os
import typing as t

from dpsql.engine.sources import GLOB, READERS, expand, open_sources, reader_of
from dpsql.errors import Error

if t.TYPE_CHECKING:
    import duckdb

    from dpsql.privacy.policy import Policy

__all__ = ["READERS", "expand_files", "is_data_file", "policy_with_files", "reader_of", "table_for", "view_setup"]


def is_data_file(path: str) -> bool:
    return reader_of(path) is not None


def expand_files(patterns: list[str]) -> list[str]:
    """The files ``patterns`` name (globs expanded, sorted), as absolute paths; Error if one is missing."""
    try:
        return expand(patterns)
    except FileNotFoundError as err:
        raise Error(str(err)) from None


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
    files = expand_files(patterns)  # a missing file is said first: naming it after a table would not help
    name = table_for(policy, patterns)
    tp = policy.tables[name]
    if tp.source:
        raise Error(f"table {name} already has its files in the policy (source = {' '.join(tp.source)}); "
                    f"drop {source} from the command line")
    if tp.catalog:
        raise Error(f"table {name} is a table of database {tp.catalog}, not one data files can stand for")
    tables = {**policy.tables, name: dataclasses.replace(tp, source=tuple(files))}
    return dataclasses.replace(policy, tables=tables)


def view_setup(patterns: list[str], policy: Policy) -> t.Callable[[duckdb.DuckDBPyConnection], None]:
    """A ``setup`` for :func:`dpsql.connect` on an in-memory database that creates the table
    the files stand for as a view over them."""
    with_files = policy_with_files(patterns, policy)
    name = table_for(policy, patterns)
    only = dataclasses.replace(with_files, tables={name: with_files.tables[name]}, attach={})

    def setup(con: duckdb.DuckDBPyConnection) -> None:
        open_sources(con, only)

    return setup
