"""The ``dpsql`` command.

    dpsql [DATABASE | DATA FILES] [--policy FILE] [-c SQL] [-f FILE] [--format table|csv|json] [--demo]
    dpsql [DATA FILES] --policy FILE --engine spark [--spark-master URL] [-c SQL] [-f FILE]
    dpsql DATABASE --policy FILE --budget | --init-ledger | --set-budget
    dpsql serve DATABASE --policy FILE [--host 127.0.0.1] [--port 5433]   (docs/bi.md)

With ``-c`` or ``-f`` it runs the statements and exits; with neither, it reads statements from
standard input, or opens the interactive shell when standard input is a terminal. Special
commands (``.budget``, ``.tables``, ...) work in all of them, each on a line of its own. A
refused or failed statement prints ``Error: ...`` on stderr (in a file, with the statement's
number and line; a syntax error adds the line and a caret) and the exit status is 1; usage
errors exit 2. Ctrl-C stops the running query at once and the script with it, prints
``Query cancelled; nothing was charged`` on stderr and exits with status 130 (the shell instead
stays open). Nothing prints a traceback.

``--engine spark`` (``--spark-master URL``, default ``local[2]``, or ``sc://host:port``) runs the
statistics on Apache Spark (``docs/spark.md``): data files and policy tables with ``source``
become temporary views of the session dpsql starts, other tables come from its catalog. Without
``--engine`` the policy's ``[engine]`` section decides (``name = "spark"``, ``master = URL``);
the command line wins over it.

DATABASE is a DuckDB file, which must exist unless ``--create`` is given. Data files (Parquet,
CSV, JSON, or a glob of them) open as the policy's table of the same name (the file's stem, or a
glob's folder), or as its one table. ``--budget`` prints
the budget spent and remaining and every charge; without ``-c`` or ``-f`` it opens the ledger
read-only and nothing else. ``--set-budget`` makes the policy's budget the
total of its ledger file (fixed when the ledger was created), records the change there, and
exits. The budget lives in the ledger, not in the database: without ``-c`` or ``-f``,
``--budget`` and ``--init-ledger`` read or create the ledger file alone, opening neither the
database (which ``dpsql serve`` may hold locked) nor Spark.
"""

from __future__ import annotations

import argparse
import os
import sys
import typing as t

from dpsql.errors import Error
from dpsql.interfaces.console import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    Parser,
    interrupted_line,
    one_line,
    pointer_lines,
)
from dpsql.interfaces.output import FORMATS


def output_options(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The output options every command shares."""
    parser.add_argument("--format", choices=FORMATS, default="table", help="output format (default: table)")
    parser.add_argument("--no-report", action="store_true", help="do not print the privacy report")
    return parser


def build_parser() -> argparse.ArgumentParser:
    from dpsql.interfaces.engines import add_options as add_engine_options

    p = Parser(prog="dpsql", description="Differentially private SQL for DuckDB.")
    p.add_argument("database", nargs="*", metavar="DATABASE",
                   help="DuckDB database file (default: in memory), or Parquet/CSV/JSON files or a glob "
                        "opened as the policy's table of the same name, or its one table")
    p.add_argument("--policy", metavar="FILE", help="privacy policy (TOML, YAML or SmartNoise YAML)")
    p.add_argument("-c", dest="command", metavar="SQL", action="append", help="run SQL and exit (repeatable)")
    p.add_argument("-f", dest="file", metavar="FILE", help="run the statements in FILE and exit")
    p.add_argument("--demo", action="store_true", help="use the bundled UCI Adult table and its policy")
    p.add_argument("--create", action="store_true", help="create DATABASE if it does not exist")
    p.add_argument("--budget", action="store_true",
                   help="print the budget spent and remaining and every charge (after -c/-f, if given)")
    p.add_argument("--init-ledger", action="store_true", help="create the policy's budget ledger if missing")
    p.add_argument("--set-budget", action="store_true",
                   help="change the ledger's total to the policy's budget (recorded in the ledger), then exit")
    add_engine_options(p)
    p.add_argument("--version", action="version", version="dpsql 0.1.0")
    return output_options(p)


def open_connection(args: argparse.Namespace) -> t.Any:
    from dpsql._policy.policy import load_policy
    from dpsql.connection import connect
    from dpsql.interfaces.demo import connect_demo
    from dpsql.interfaces.engines import choose

    policy = load_policy(args.policy) if args.policy and not args.demo else None
    engine, master = choose(args.engine, args.spark_master, policy)  # --engine, else [engine] in the policy
    if engine == "spark":
        assert master is not None
        return _open_spark(args, policy, master)
    if args.demo:
        if args.policy or args.database:
            raise Error("--demo uses its own in-memory database and policy; drop DATABASE and --policy")
        return connect_demo()
    if policy is None:
        raise Error("a policy is required: dpsql DATABASE --policy FILE (or dpsql --demo)")
    database, policy = _source(args, policy)
    _check_ledger(args, policy)
    created = policy.ledger is not None and not os.path.lexists(policy.ledger)
    con = connect(database, policy, init_ledger=args.init_ledger)
    if args.init_ledger:
        _say_what_init_ledger_did(args, policy, created)
    return con


def _open_spark(args: argparse.Namespace, policy: t.Any, master: str) -> t.Any:
    """Spark (``--engine spark`` or the policy's ``[engine]``): start the session (dpsql owns it),
    make the policy's source files temporary views, and connect. Everything that depends on the
    arguments only is checked before Spark starts."""
    from dpsql.interfaces.engines import open_spark, spark_policy

    if args.demo:
        raise Error("--demo runs on DuckDB; on Spark give --policy FILE and the data files")
    if policy is None:
        raise Error("a policy is required: dpsql [DATA FILES] --engine spark --policy FILE")
    if args.create:
        raise Error("--create makes a DuckDB database; --engine spark reads data files where they are")
    policy = spark_policy(policy, args.database)
    _check_ledger(args, policy)
    created = policy.ledger is not None and not os.path.lexists(policy.ledger)
    con = open_spark(policy, master, init_ledger=args.init_ledger)
    if args.init_ledger:
        _say_what_init_ledger_did(args, policy, created)
    return con


def _source(args: argparse.Namespace, policy: t.Any) -> tuple[str, t.Any]:
    """The database to open and the policy to open it with, from the positional arguments:
    data files become the ``source`` of the policy table they stand for."""
    from dpsql.interfaces.files import policy_with_files

    names: list[str] = args.database
    if names and _all_data_files(names):
        if args.create:
            raise Error("--create makes a DuckDB database; data files are read where they are")
        return ":memory:", policy_with_files(names, policy)
    database = names[0] if names else ":memory:"
    if database != ":memory:" and not os.path.exists(database) and not args.create:
        raise Error(f"database {database} does not exist; check the path, or give --create to create "
                    "an empty one")
    return database, policy


def _all_data_files(names: list[str]) -> bool:
    from dpsql.interfaces.files import is_data_file

    return all(is_data_file(n) for n in names)


def _command(args: argparse.Namespace) -> str:
    """The command line that opens what ``args`` opens (for messages)."""
    import shlex

    return " ".join(["dpsql", *map(shlex.quote, args.database), "--policy", shlex.quote(args.policy)])


def _check_ledger(args: argparse.Namespace, policy: t.Any) -> None:
    if policy.ledger is None or args.init_ledger or os.path.lexists(policy.ledger):
        return
    raise Error(f"budget ledger {policy.ledger} does not exist; create it once with: {_command(args)} "
                "--init-ledger (in Python: dpsql.connect(..., init_ledger=True)); dpsql never starts a "
                "fresh budget silently")


def _say_what_init_ledger_did(args: argparse.Namespace, policy: t.Any, created: bool) -> None:
    from dpsql._accounting.ledger import format_total

    kind = policy.budget.kind
    if policy.ledger is None:
        note = (f"policy {args.policy} names no budget.ledger: its budget is kept in memory for this run "
                "only; nothing to create")
    elif created:
        note = f"created ledger {policy.ledger} with {format_total(policy.budget.total, kind)}"
    else:
        note = f"ledger {policy.ledger} exists already (total {format_total(policy.budget.total, kind)}); left as it is"
    print(note, file=sys.stderr, flush=True)


def ledger_only(args: argparse.Namespace) -> bool:
    """Whether the command only reads or creates the policy's ledger (``--budget`` or
    ``--init-ledger`` without statements to run, a database to create or the demo)."""
    return (bool(args.budget or args.init_ledger) and not (args.command or args.file or args.demo or args.create)
            and bool(args.policy))


def ledger_command(args: argparse.Namespace) -> int:
    """``--budget`` / ``--init-ledger`` alone: the ledger file, without opening the database (a
    server may hold its lock) or starting Spark. The arguments are checked as when they are
    opened, so that a command refused with statements is refused without them too."""
    from dpsql._accounting.ledger import Ledger
    from dpsql._policy.policy import load_policy
    from dpsql.connection import BudgetStatus
    from dpsql.interfaces.engines import choose, spark_policy
    from dpsql.interfaces.output import render_table

    policy = load_policy(args.policy)
    engine, _ = choose(args.engine, args.spark_master, policy)
    policy = spark_policy(policy, args.database) if engine == "spark" else _source(args, policy)[1]
    _check_ledger(args, policy)
    created = policy.ledger is not None and not os.path.lexists(policy.ledger)
    # --budget alone opens the ledger read-only: its reader need not be able to write it
    read_only = policy.ledger is not None and not args.init_ledger
    with Ledger.open(policy.ledger, policy.budget, create=args.init_ledger, read_only=read_only) as led:
        if args.init_ledger:
            _say_what_init_ledger_did(args, policy, created)
        if args.budget:
            status = BudgetStatus.of(led)
            columns, rows = status.history_rows()
            print(status, flush=True)
            print(render_table(columns, rows) if rows else "no query has spent budget yet", flush=True)
    return EXIT_OK


def set_budget(args: argparse.Namespace) -> int:
    """``--set-budget``: make the policy's budget the total of its ledger file, and say so."""
    from dpsql._accounting.ledger import Ledger, format_total
    from dpsql._policy.policy import load_policy

    if args.demo or args.init_ledger or args.command or args.file:
        raise Error("--set-budget only changes the ledger's total: give it with --policy FILE alone "
                    "(not with --demo, --init-ledger, -c or -f)")
    if not args.policy:
        raise Error("--set-budget needs the policy whose budget becomes the ledger's total: --policy FILE")
    pol = load_policy(args.policy)
    if pol.ledger is None:
        raise Error(f"policy file {args.policy} names no budget.ledger: its budget is kept in memory, "
                    "there is no ledger total to change")
    with Ledger.open(pol.ledger, None) as led:
        old = led.set_total(pol.budget, reason=f"dpsql --set-budget --policy {args.policy}")
        new = led.budget.total
    if new == old:
        print(f"ledger {pol.ledger}: total unchanged ({format_total(old, pol.budget.kind)})")
    else:
        print(f"ledger {pol.ledger}: total changed from {format_total(old, pol.budget.kind)} "
              f"to {format_total(new, pol.budget.kind)}")
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "sensitivity":  # administrators only: reads raw data, no policy
        from dpsql.interfaces.sensitivity_cli import main as sensitivity_main

        return sensitivity_main(argv[1:])
    if argv and argv[0] == "serve":  # the PostgreSQL-wire front end
        from dpsql.interfaces.server.main import main as serve_main

        return serve_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if len(args.database) > 1 and not _all_data_files(args.database):
        parser.error(f"give one DATABASE, or data files (.parquet, .csv, .json); got {' '.join(args.database)}")
    try:
        if args.command and args.file:
            raise Error("give either -c or -f, not both")
        if args.set_budget:
            return set_budget(args)
        if ledger_only(args):
            return ledger_command(args)
        con = open_connection(args)
        try:
            return run(con, args)
        finally:
            con.close()
    except Error as err:
        print(f"Error: {one_line(err)}", file=sys.stderr)
        for line in pointer_lines(err):
            print(line, file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:  # e.g. `dpsql ... | head`: the reader left, nothing to report
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the interpreter's final flush
        return EXIT_OK
    except KeyboardInterrupt as err:  # Ctrl-C: the query was cancelled (dpsql._query.cancel)
        print(interrupted_line(err), file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as err:  # a bug: still one line, never a traceback
        print(f"Error: internal error ({type(err).__name__}): {one_line(err)}", file=sys.stderr)
        return EXIT_ERROR


def run(con: t.Any, args: argparse.Namespace) -> int:
    """Run ``-c``, ``-f``, piped input or the shell on ``con``; the exit status."""
    from dpsql.interfaces.script import ScriptRunner

    scripts: list[tuple[str, str | None, bool]] = []  # (text, file name, number the statements)
    if not (args.command or args.file) and (args.budget or args.init_ledger):
        pass  # --budget / --init-ledger alone: do that, read no statements
    elif args.command:
        scripts = [(c, None, False) for c in args.command]
    elif args.file:
        try:
            with open(args.file, encoding="utf-8") as fh:
                scripts = [(fh.read(), args.file, True)]
        except OSError as err:
            raise Error(f"cannot read {args.file}: {err.strerror}") from None
    elif sys.stdin.isatty():
        from dpsql.interfaces.repl import run_repl

        return run_repl(con, fmt=args.format)
    else:
        scripts = [(sys.stdin.read(), None, True)]
    runner = ScriptRunner(con, fmt=args.format, report=not args.no_report)
    try:
        for text, source, numbered in scripts:
            runner.run(text, source=source, numbered=numbered)
            if runner.state.quit:
                break
        if args.budget:
            runner.run(".budget", numbered=False)
    finally:
        runner.finish()
    return EXIT_ERROR if runner.failed else EXIT_OK
