"""Opening Spark for dpsql: the session the command line owns, and the policy's data files.

* :func:`open_session` starts (or reaches) the session ``dpsql --engine spark`` runs on: a
  master URL (``local[2]``, ``spark://host:7077``, ``yarn``, ...) or a Spark Connect URL
  (``sc://host:15002``). Without pyspark it is one line naming the extra to install.
* :func:`open_spark_sources` makes each policy table with ``source = ...`` (Parquet, CSV/TSV or
  JSON lines; a glob is expanded now) a temporary view of the session, read with
  ``spark.read``, as :mod:`dpsql.backends.sources` makes it a view of a DuckDB connection. A
  table of that name already in the session's catalog is refused, so a source never shadows a
  table. Errors are one-line :class:`~dpsql.errors.PolicyError` naming the table and the files,
  raised while connecting (nothing is charged); a reader's own message could quote a value of
  the files and is withheld.

On a cluster the paths are read by the executors: they must name the same files there (a
shared file system); ``local[...]`` reads them where dpsql runs.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import typing as t
import warnings

from dpsql.backends.sources import source_files
from dpsql.errors import Error, PolicyError

if t.TYPE_CHECKING:
    from dpsql._policy.policy import Policy, TablePolicy

#: The extra that brings pyspark (named in the error when it is missing).
EXTRA = 'pip install "dpsql[spark]"'
DEFAULT_MASTER = "local[2]"
#: Spark Connect's port when an ``sc://`` URL names none
CONNECT_PORT = 15002


def open_session(master: str = DEFAULT_MASTER, quiet: bool = True) -> t.Any:
    """A Spark session on ``master``; an ``sc://`` URL connects to a Spark Connect server.

    ``quiet``: the JVM that a classic session starts writes its log (start-up warnings,
    progress bars) to a null device instead of the command's standard error; its errors still
    reach dpsql as exceptions.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pyspark's import-time notes (pandas versions, ...)
            from pyspark.sql import SparkSession
    except ImportError:
        raise Error(f"--engine spark needs pyspark, which is not installed: {EXTRA} "
                    "(and Java 17 or later)") from None
    builder = SparkSession.builder.appName("dpsql")
    if master.startswith("sc://"):
        return _open_connect(builder, master)
    try:
        builder = builder.master(master).config("spark.ui.enabled", "false") \
            .config("spark.ui.showConsoleProgress", "false")
        with _jvm_stderr_silenced(quiet):
            session = builder.getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
        return session
    except Exception as err:  # no Java, a bad URL: not about any data
        text = str(err).strip().splitlines()
        raise Error(f"cannot start Spark on {master}: {text[0] if text else type(err).__name__}") from None


def _open_connect(builder: t.Any, url: str) -> t.Any:
    """A Spark Connect session on ``url``, after one call to the server: a refused login or a
    server that cannot serve is an error here, not in the first query. The URL is shown with
    its token hidden."""
    _reachable(url)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the Connect client's import-time notes (pandas versions)
            session = builder.remote(url).getOrCreate()
        session.version  # noqa: B018 - the first call to the server
    except Exception as err:
        raise Error(f"cannot use the Spark Connect server at {shown_url(url)}: {_reason(err)}") from None
    return session


def shown_url(url: str) -> str:
    """``url`` as messages show it: the value of its ``token`` parameter hidden."""
    return re.sub(r"(;\s*token\s*=)[^;]*", r"\1<hidden>", url, flags=re.IGNORECASE)


def _reason(err: BaseException) -> str:
    """What the Connect client says went wrong, in one line: a gRPC status's details and code,
    with what to do about a refused login."""
    text = str(err)
    details = re.search(r'details = "([^"]*)"', text)
    code = re.search(r"status = StatusCode\.(\w+)", text)
    if not details:
        lines = text.strip().splitlines()
        return lines[0] if lines else type(err).__name__
    reason = details.group(1) + (f" ({code.group(1)})" if code else "")
    if code and code.group(1) == "UNAUTHENTICATED":
        reason += ("; give the server's token in the environment variable SPARK_CONNECT_AUTHENTICATE_TOKEN "
                   "(or as ;token=... in the URL)")
    return reason


def _reachable(url: str, timeout: float = 10.0) -> None:
    """Refuse a Spark Connect server that cannot be reached, in one line: its client would
    retry the connection for minutes, saying nothing."""
    import socket
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port or CONNECT_PORT
    except ValueError:
        host, port = None, 0
    if not host:
        raise Error(f"cannot start Spark on {shown_url(url)}: a Spark Connect URL is sc://host:port (e.g. sc://localhost:"
                    f"{CONNECT_PORT})")
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as err:
        raise Error(f"cannot reach the Spark Connect server at {host}:{port} ({err.strerror or err}); check "
                    "--spark-master (or the policy's [engine] master) and that the server runs") from None


@contextlib.contextmanager
def _jvm_stderr_silenced(quiet: bool) -> t.Iterator[None]:
    """While the JVM is launched, file descriptor 2 is the null device: the JVM keeps it."""
    if not quiet:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def open_spark_sources(session: t.Any, policy: Policy) -> None:
    """Create a temporary view of ``session`` for each table of ``policy`` with a ``source``."""
    for tp in policy.sources:
        _view(session, tp)


def _view(session: t.Any, tp: TablePolicy) -> None:
    where = f"tables.{tp.name}.source"
    shown = " ".join(tp.source)
    if tp.schema != "main":
        raise PolicyError(f"{where}: on Spark a table with a source is a temporary view, which has no "
                          f"schema; name it {tp.table_name}, not {tp.name}")
    reader, files = source_files(tp)
    if session.catalog.tableExists(tp.table_name):
        raise PolicyError(f"{where}: the Spark session already has a table or view {tp.table_name}; a "
                          "table with a source must be a name the session does not use")
    try:
        frame = _read(session, reader, files)
        frame.createOrReplaceTempView(tp.table_name)
    except Exception as err:
        raise PolicyError(f"{where}: Spark cannot read {shown} as table {tp.name} ({type(err).__name__}; "
                          "the details are withheld as they could quote the data)") from None


def _read(session: t.Any, reader: str | None, files: list[str]) -> t.Any:
    """The files as a DataFrame: Parquet; CSV/TSV with a header row, types inferred; JSON lines."""
    if reader == "read_parquet":
        return session.read.parquet(*files)
    if reader == "read_csv":
        tabs = all(f.lower().endswith((".tsv", ".tsv.gz")) for f in files)
        return session.read.csv(files, header=True, inferSchema=True, sep="\t" if tabs else ",")
    return session.read.json(files)
