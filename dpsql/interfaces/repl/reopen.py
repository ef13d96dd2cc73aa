"""``.open FILE``: the shell's policy on another DuckDB database, with the same budget.

The new connection is made as :func:`dpsql.connect` makes one (the policy's attached databases
and source files opened, the DuckDB locked down, the policy checked against the new catalog),
but it keeps the old connection's ledger object, noise source and user: the budget goes on
where it was, also when the policy keeps it in memory (a fresh in-memory ledger would start a
fresh budget). Everything that can fail happens before the old connection is touched.
"""

from __future__ import annotations

import dataclasses
import os
import typing as t

from dpsql.errors import Error

if t.TYPE_CHECKING:
    from dpsql.connection import Connection


def reopen(con: "Connection", path: str) -> "Connection":
    """A connection to the DuckDB database file ``path`` with ``con``'s policy, ledger and noise;
    ``con``'s DuckDB is closed once the new one is ready (its ledger stays open)."""
    import duckdb

    from dpsql.backends.duck import DuckDBEngine
    from dpsql.backends.sandbox import harden
    from dpsql.backends.sources import expose_registered, open_sources, reader_of
    from dpsql.connection import Connection

    if not isinstance(con.engine, DuckDBEngine):
        raise Error(f".open opens a DuckDB database; this shell runs on {con.engine.name}, whose tables come "
                    "from its session")
    if reader_of(path) is not None:
        raise Error(f"{path} is a data file; .open opens a DuckDB database (start dpsql {path} --policy FILE "
                    "to read data files)")
    if not os.path.exists(path):
        raise Error(f"database {path} does not exist; check the path (.open never creates one)")
    # the policy as given: the old connection's catalog name is not the new one's
    policy = dataclasses.replace(con.policy, database=None)
    try:
        raw = duckdb.connect(path)
    except duckdb.Error as err:
        raise Error(f"cannot open database {path}: {str(err).splitlines()[0]}") from None
    try:
        expose_registered(raw, policy)
        located = open_sources(raw, policy)
        harden(raw)
        new = Connection(raw, policy, con.ledger, noise=con.noise, located=located, user=con.user)
    except BaseException:
        raw.close()
        raise
    con.engine.close()
    return new
