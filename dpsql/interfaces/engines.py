"""The engine ``dpsql`` and ``dpsql serve`` run the statistics on, and opening Spark for them.

* :func:`choose`: ``--engine`` wins over the policy's ``[engine] name``, ``--spark-master`` over
  its ``master``; without either the engine is DuckDB and Spark's master ``local[2]``.
* :func:`spark_policy`: data files named on the command line become the ``source`` of the policy
  table they stand for (a DuckDB database file cannot be read by Spark: refused in one line).
* :func:`open_spark`: start (or reach) the Spark session the command owns and connect to it; the
  session stops when the connection closes. Everything that depends on the arguments and the
  policy alone is checked before Spark starts.
"""

from __future__ import annotations

import os
import typing as t

from dpsql.errors import Error

if t.TYPE_CHECKING:
    from dpsql._policy.policy import Policy
    from dpsql.connection import Connection


def add_options(p: t.Any, verb: str = "reads", master_note: str = "") -> None:
    """``--engine`` and ``--spark-master`` on the parser ``p`` (of ``dpsql`` or ``dpsql serve``)."""
    p.add_argument("--engine", choices=("duckdb", "spark"),
                   help="where the statistics run (default: the policy's [engine] name, else duckdb); spark "
                        f"{verb} the policy's source files and the session's catalog (docs/spark.md)")
    p.add_argument("--spark-master", metavar="URL",
                   help="with --engine spark: the Spark master (default: the policy's [engine] master, else "
                        f"local[2]), or sc://host:port for Spark Connect{master_note}")


def choose(engine: str | None, master: str | None, policy: Policy | None) -> tuple[str, str | None]:
    """The engine's name and, on Spark, its master URL: the command line's, else the policy's."""
    from dpsql.backends.spark_open import DEFAULT_MASTER

    setting = policy.engine if policy is not None else None
    name = engine or (setting.name if setting is not None else "duckdb")
    if master and name != "spark":
        raise Error("--spark-master is for --engine spark")
    if name != "spark":
        return name, None
    return name, master or (setting.master if setting is not None else None) or DEFAULT_MASTER


def spark_policy(policy: Policy, files: list[str]) -> Policy:
    """``policy`` with ``files`` (data files, or none) as the sources of its tables, for Spark."""
    from dpsql.interfaces.files import is_data_file, policy_with_files

    if not files:
        return policy
    if not all(is_data_file(f) for f in files):
        raise Error(f"--engine spark reads data files (.parquet, .csv, .json) and the Spark catalog, "
                    f"not a DuckDB database: {files[0]}")
    return policy_with_files(files, policy)


def open_spark(policy: Policy, master: str, init_ledger: bool = False) -> Connection:
    """A connection on a Spark session that it owns (stopped when the connection closes)."""
    from dpsql.backends.spark_open import open_session
    from dpsql.connection import connect

    if policy.ledger is not None and not init_ledger and not os.path.lexists(policy.ledger):
        raise Error(f"budget ledger {policy.ledger} does not exist; create it once with --init-ledger; "
                    "dpsql never starts a fresh budget silently")
    session = open_session(master)
    try:
        con = connect(session, policy, init_ledger=init_ledger)
    except BaseException:
        session.stop()
        raise
    from dpsql.backends.spark import SparkEngine

    assert isinstance(con.engine, SparkEngine)
    con.engine.owns_session = True
    return con
