"""``dpsql serve``: a PostgreSQL-wire front end for a dpsql connection.

    dpsql serve DATABASE --policy FILE [--host 127.0.0.1] [--port 5433] [--workers N] [--processes N]
    dpsql serve [DATA FILE] --policy FILE [--host ...] [--port ...]     (tables from files)
    dpsql serve [DATA FILE] --policy FILE --engine spark [--spark-master URL] [--host ...] [--port ...]
    dpsql serve --demo [--host ...] [--port ...]
    dpsql serve --hash-password        # reads a password on stdin, prints its SCRAM verifier

DATABASE is a DuckDB file, opened read-only; a data file (Parquet, CSV, JSON, or a glob of
them) opens as the policy's table of the same name, or its one table, as with ``dpsql``; with
neither, the policy's tables with ``source = ...`` (and its ``[attach]`` databases) are served
from an in-memory database.

It binds to 127.0.0.1 unless told otherwise. With users in the policy's ``[server]`` section
every client authenticates with SCRAM-SHA-256; with none, a one-time password printed at start
(``--no-password``: any user name without a password, and then only on a loopback address).

On Spark (``--engine spark``, or ``[engine] name = "spark"`` in the policy when no ``--engine``
is given) the server owns one Spark session (``--spark-master``, default ``local[2]``, or
``sc://host:port`` for Spark Connect), shared by all worker threads; the policy's ``source``
tables (and a data file given as DATABASE) become its temporary views. ``--processes`` above 1
needs a Spark Connect master: each process is then a client of the same Spark Connect server,
where with a local or cluster master each would start a Spark driver of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import os
import signal
import socket
import sys
import typing as t

from dpsql.errors import Error

DEFAULT_PORT = 5433


def build_parser() -> argparse.ArgumentParser:
    from dpsql.interfaces.console import Parser
    from dpsql.interfaces.engines import add_options as add_engine_options

    p = Parser(prog="dpsql serve",
               description="Serve a DuckDB database (or tables on Spark) through dpsql over the PostgreSQL protocol.")
    p.add_argument("database", nargs="?", metavar="DATABASE",
                   help="DuckDB database file, or a data file (.parquet, .csv, .json, or a glob) opened as the "
                        "policy's table of the same name; optional when the policy's tables name their files "
                        "(source = ...); with --engine spark, a data file only")
    p.add_argument("--policy", metavar="FILE", help="privacy policy (TOML or YAML); users in its [server] section")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default: {DEFAULT_PORT}; 0 picks a free one)")
    p.add_argument("--workers", type=int, default=max(2, min(8, (os.cpu_count() or 2) * 2)),
                   help="threads running dpsql work (default: twice the cores, 2 to 8)")
    p.add_argument("--processes", type=int, default=1,
                   help="server processes sharing the port (default 1; more needs a ledger file)")
    add_engine_options(p, "serves", " (needed for --processes above 1)")
    p.add_argument("--demo", action="store_true", help="serve the bundled UCI Adult table and its policy")
    p.add_argument("--init-ledger", action="store_true", help="create the policy's budget ledger if missing")
    p.add_argument("--reuse-port", action="store_true", help=argparse.SUPPRESS)  # a child of --processes
    p.add_argument("--tls-cert", metavar="FILE", help="serve TLS with this certificate (PEM); clients must use it")
    p.add_argument("--tls-key", metavar="FILE", help="the private key of --tls-cert (PEM)")
    p.add_argument("--allow-plaintext", action="store_true",
                   help="listen on a non-loopback address without TLS (only on a network you trust)")
    p.add_argument("--no-password", action="store_true",
                   help="with no users in the policy: accept local connections without a password "
                        "(default: a one-time password, printed at start)")
    p.add_argument("--login-timeout", type=float, default=None, help=argparse.SUPPRESS)
    p.add_argument("--hash-password", action="store_true",
                   help="read a password on stdin, print its SCRAM-SHA-256 verifier for [server.users] and exit")
    return p


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` names is a loopback address."""
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(str(info[4][0]).split("%")[0]).is_loopback for info in infos)


def open_connection(args: argparse.Namespace) -> t.Any:
    from dpsql._policy.policy import load_policy
    from dpsql.connection import connect
    from dpsql.interfaces.demo import connect_demo
    from dpsql.interfaces.engines import choose

    if args.demo:
        if args.database or args.policy:
            raise Error("--demo serves its own in-memory database and policy; drop DATABASE and --policy")
        if args.engine == "spark" or args.spark_master:
            raise Error("--demo serves DuckDB; on Spark give --policy FILE (and a data file, or source tables)")
        return connect_demo()
    if not args.policy:
        raise Error("dpsql serve needs a policy: dpsql serve DATABASE --policy FILE, dpsql serve DATA FILE "
                    "--policy FILE, dpsql serve --policy FILE with source tables (or --demo)")
    policy = load_policy(args.policy)
    engine, master = choose(args.engine, args.spark_master, policy)  # --engine, else [engine] in the policy
    if engine == "spark":
        assert master is not None
        return open_spark_connection(args, policy, master)
    database, policy = _duckdb_source(args, policy)
    return connect(database, policy, init_ledger=args.init_ledger, read_only=database != ":memory:")


def _duckdb_source(args: argparse.Namespace, policy: t.Any) -> tuple[str, t.Any]:
    """What the server opens on DuckDB, as ``dpsql`` does: a database file (read-only), data
    files as the policy's table of the same name (or its one table), or, without DATABASE, an
    in-memory database with the policy's ``source`` tables and ``[attach]`` databases."""
    from dpsql.interfaces.files import is_data_file, policy_with_files

    if args.database and is_data_file(args.database):
        return ":memory:", policy_with_files([args.database], policy)
    if args.database:
        if not os.path.exists(args.database):
            raise Error(f"database {args.database} does not exist; check the path (dpsql serve opens a "
                        "DuckDB file, or data files: .parquet, .csv, .json)")
        return args.database, policy
    if not policy.sources and not policy.attach:
        raise Error(f"nothing to serve: give a database or data files (dpsql serve DATABASE --policy FILE), or "
                    f"name the tables' files in the policy (source = ...) of {args.policy}")
    return ":memory:", policy


def open_spark_connection(args: argparse.Namespace, policy: t.Any, master: str) -> t.Any:
    """The server's Spark session and its connection; what the arguments and the policy alone
    decide is refused before Spark starts."""
    from dpsql.interfaces.engines import open_spark, spark_policy

    if args.processes > 1 and not master.startswith("sc://"):
        raise Error(f"--processes above 1 on Spark needs a Spark Connect master (--spark-master sc://host:port): "
                    f"with {master} each process would start a Spark driver of its own; use --workers for "
                    "more threads on the one session")
    _check_processes(args, policy)
    policy = spark_policy(policy, [args.database] if args.database else [])
    return open_spark(policy, master, init_ledger=args.init_ledger)


def _check_processes(args: argparse.Namespace, policy: t.Any) -> None:
    if args.processes > 1 and policy.ledger is None:
        raise Error("--processes above 1 needs a policy with a budget.ledger file: each process would "
                    "otherwise keep a budget of its own in memory")


#: where a process of ``--processes N`` finds the one-time password of its parent
_PASSWORD_ENV = "DPSQL_SERVE_PASSWORD"


def _tls(args: argparse.Namespace) -> t.Any:
    if bool(args.tls_cert) != bool(args.tls_key):
        raise Error("TLS needs both --tls-cert FILE and --tls-key FILE")
    if not args.tls_cert:
        return None
    from .security import tls_context

    return tls_context(args.tls_cert, args.tls_key)


def _check_exposure(args: argparse.Namespace, users: bool, tls: bool) -> None:
    """Refuse what would expose passwords or answers: plaintext, or no password, off loopback."""
    if is_loopback(args.host):
        return
    if not users and args.no_password:
        raise Error(f"--no-password accepts anyone, so dpsql serve listens on loopback only; {args.host} is not "
                    "a loopback address (configure [server.users] in the policy, or drop --no-password)")
    if not tls and not args.allow_plaintext:
        raise Error(f"{args.host} is not a loopback address: serve TLS there (--tls-cert FILE --tls-key FILE), or "
                    "say --allow-plaintext on a network you trust")


def _login_lines(users: int, password: str | None, tls: bool) -> list[str]:
    lines = ["TLS on: clients must connect with sslmode=require" if tls else "TLS off (loopback, or --allow-plaintext)"]
    if users:
        lines.append(f"{users} user(s), SCRAM-SHA-256 passwords")
    elif password is not None:
        lines.append(f"no users configured: any user name with the one-time password {password} "
                     "(valid while this server runs; [server.users] in the policy for lasting ones)")
    else:
        lines.append("no users configured and --no-password: any user name is accepted WITHOUT a password, "
                     "on the loopback address only")
    return lines


async def serve(args: argparse.Namespace, ready: t.Callable[[str, int], None] | None = None) -> None:
    from .catalog import tables
    from .pool import Pool
    from .security import LOGIN_TIMEOUT, Guarded, SecureServer, Throttle, one_time_password
    from .session import DPSession
    from .users import load_users, login_check

    tls = _tls(args)  # a file that cannot be read is refused before the database is opened
    con = open_connection(args)
    try:
        users = load_users(con.policy)
        _check_exposure(args, bool(users), tls is not None)
        declared = tables(con)
        _check_processes(args, con.policy)
    except BaseException:
        con.close()
        raise
    pool = Pool(con, max(1, args.workers))
    password = None if users or args.no_password else (os.environ.get(_PASSWORD_ENV) or one_time_password())
    auth = Guarded(login_check(users, password), Throttle(), args.login_timeout or LOGIN_TIMEOUT)
    server = SecureServer(session_factory=lambda: DPSession(pool, users, declared),
                          auth_plugin_factory=lambda _user: auth, server_version="16.0 (dpsql)",
                          tls=tls, timeout=args.login_timeout or LOGIN_TIMEOUT)
    try:
        many = args.processes > 1 or args.reuse_port
        listening = await server.start_server(host=args.host, port=args.port, reuse_port=many or None)
        host, port = listening.sockets[0].getsockname()[:2]
        children = spawn_children(args, port, con.policy, password) if args.processes > 1 else []
        where = f"{con.policy.source or 'the demo policy'}; tables: {', '.join(sorted(declared)) or 'none'}"
        if not con.engine.default:
            where += f"; statistics on {con.engine.name}"
        if args.reuse_port:  # a child: the parent has said it all
            where = "another process of the same server"
        print(f"dpsql serve: listening on {host}:{port} ({where})", file=sys.stderr, flush=True)
        if not args.reuse_port:
            for line in _login_lines(len(users), password, tls is not None):
                print(f"dpsql serve: {line}", file=sys.stderr, flush=True)
        if ready is not None:
            ready(host, port)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop.set)
            except (NotImplementedError, RuntimeError):  # not the main thread
                pass
        task = asyncio.ensure_future(server.serve_forever())
        await stop.wait()
        server.close()
        task.cancel()
        for child in children:
            child.terminate()
        for child in children:
            child.wait()
    finally:
        pool.close()


def spawn_children(args: argparse.Namespace, port: int, policy: t.Any, password: str | None) -> list[t.Any]:
    """``--processes N``: N - 1 more servers on the same port (the kernel spreads connections
    over them); each has its own engine connection and worker pool, and they share the ledger
    file (and the one-time password, handed over in the environment, never on a command line)."""
    import subprocess

    command = child_command(args, port, policy)
    env = dict(os.environ, **({_PASSWORD_ENV: password} if password else {}))
    return [subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
            for _ in range(args.processes - 1)]


def child_command(args: argparse.Namespace, port: int, policy: t.Any) -> list[str]:
    """The command line of one more process of this server: the same engine, master and port.
    A master from the policy's ``[engine]`` is not repeated on it (the process reads the same
    policy): a Spark Connect URL may hold a token, which a command line shows to local users."""
    from dpsql.interfaces.engines import choose

    engine, _ = choose(args.engine, args.spark_master, policy)
    master = args.spark_master if engine == "spark" else None
    command = [sys.executable, "-m", "dpsql", "serve", *([args.database] if args.database else []),
               "--policy", args.policy, "--engine", engine, *(["--spark-master", master] if master else []),
               "--host", args.host, "--port", str(port), "--workers", str(args.workers), "--reuse-port"]
    if args.tls_cert:
        command += ["--tls-cert", args.tls_cert, "--tls-key", args.tls_key]
    command += [flag for flag, on in (("--allow-plaintext", args.allow_plaintext),
                                      ("--no-password", args.no_password)) if on]
    return command


def hash_password() -> int:
    from .users import make_verifier

    password = sys.stdin.readline().rstrip("\n")
    if not password:
        raise Error("no password on standard input")
    print(make_verifier(password))
    return 0


def main(argv: list[str]) -> int:
    from dpsql.interfaces.console import EXIT_ERROR, EXIT_OK, one_line

    args = build_parser().parse_args(argv)
    try:
        import pg_mimic  # noqa: F401
    except ImportError:
        print("Error: dpsql serve needs the server extra: pip install 'dpsql[server]'", file=sys.stderr)
        return EXIT_ERROR
    try:
        if args.hash_password:
            return hash_password()
        asyncio.run(serve(args))
        return EXIT_OK
    except Error as err:
        print(f"Error: {one_line(err)}", file=sys.stderr)
        return EXIT_ERROR
    except OSError as err:
        print(f"Error: cannot listen on {args.host}:{args.port}: {err.strerror or err}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return EXIT_OK
