"""Data files as a table the policy declares: ``dpsql visits.parquet --policy p.toml``.

A Parquet, CSV/TSV or JSON file (or several, or a glob) becomes the policy's table of the same
name (the file's stem, or for a glob such as ``visits/*.parquet`` its folder's name), or the
policy's one table if it declares only one: the command gives that table the files as its
``source`` and opens an in-memory DuckDB, where :mod:`dpsql.backends.sources` creates the view
before the connection is locked down. The files stay where they are: DuckDB reads them when a
query runs.
"""

from __future__ import annotations

import dataclasses
import typing as t

from dpsql.backends.sources import READERS, expand, open_sources, policy_with_files, reader_of, stem, table_for
from dpsql.errors import Error

if t.TYPE_CHECKING:
    import duckdb

    from dpsql._policy.policy import Policy

__all__ = ["READERS", "expand_files", "is_data_file", "policy_with_files", "reader_of", "stem", "table_for",
           "view_setup"]


def is_data_file(path: str) -> bool:
    return reader_of(path) is not None


def expand_files(patterns: list[str]) -> list[str]:
    """The files ``patterns`` name (globs expanded, sorted), as absolute paths; Error if one is missing."""
    try:
        return expand(patterns)
    except FileNotFoundError as err:
        raise Error(str(err)) from None


def view_setup(patterns: list[str], policy: Policy) -> t.Callable[[duckdb.DuckDBPyConnection], None]:
    """A ``setup`` for :func:`dpsql.connect` on an in-memory database that creates the table
    the files stand for as a view over them."""
    with_files = policy_with_files(patterns, policy)
    name = table_for(policy, patterns)
    only = dataclasses.replace(with_files, tables={name: with_files.tables[name]}, attach={})

    def setup(con: duckdb.DuckDBPyConnection) -> None:
        open_sources(con, only)

    return setup
