"""The ``dpsql`` command.

    dpsql [DATABASE] [--policy FILE] [-c SQL] [-f FILE] [--format table|csv|json] [--demo]
    dpsql [DATABASE] --policy FILE --set-budget

With ``-c`` or ``-f`` it runs the statements and exits; with neither, it reads statements from
standard input, or opens the interactive shell when standard input is a terminal. A refused or
failed statement prints one line ``Error: ...`` on stderr and the exit status is 1; usage
errors exit 2. Nothing prints a traceback. ``--set-budget`` makes the policy's budget the total
of its ledger file (fixed when the ledger was created), records the change there, and exits.
"""

from __future__ import annotations

import argparse
import os
import sys
import typing as t

from dpsql.errors import Error
from dpsql.interfaces.console import EXIT_ERROR, EXIT_OK, Parser, one_line, split_statements
from dpsql.interfaces.output import FORMATS, render

def output_options(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The output options every command shares."""
    parser.add_argument("--format", choices=FORMATS, default="table", help="output format (default: table)")
    parser.add_argument("--no-report", action="store_true", help="do not print the privacy report")
    return parser


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="dpsql", description="Differentially private SQL for DuckDB.")
    p.add_argument("database", nargs="?", default=":memory:", help="DuckDB database file (default: in memory)")
    p.add_argument("--policy", metavar="FILE", help="privacy policy (TOML, YAML or SmartNoise YAML)")
    p.add_argument("-c", dest="command", metavar="SQL", action="append", help="run SQL and exit (repeatable)")
    p.add_argument("-f", dest="file", metavar="FILE", help="run the statements in FILE and exit")
    p.add_argument("--demo", action="store_true", help="use the bundled UCI Adult table and its policy")
    p.add_argument("--init-ledger", action="store_true", help="create the policy's budget ledger if missing")
    p.add_argument("--set-budget", action="store_true",
                   help="change the ledger's total to the policy's budget (recorded in the ledger), then exit")
    p.add_argument("--version", action="version", version="dpsql 0.1.0")
    return output_options(p)


def print_result(
    result: t.Any, fmt: str, report: bool, out: t.TextIO | None = None, err: t.TextIO | None = None
) -> None:
    out = out or sys.stdout
    err = err or sys.stderr
    if result.columns == ["explain"]:  # EXPLAIN: plain text, whatever the format
        print("\n".join(row[0] for row in result.fetchall()), file=out)
        return
    print(render(fmt, result.columns, result.fetchall()), file=out)
    if not report:
        return
    lines = result.report_lines() + list(result.notes)
    target = out if fmt == "table" else err
    for line in lines:
        print(f"-- {line}", file=target)


def run_statements(con: t.Any, statements: list[str], fmt: str, report: bool) -> int:
    status = EXIT_OK
    for stmt in statements:
        try:
            result = con.sql(stmt)
        except Error as err:
            print(f"Error: {one_line(err)}", file=sys.stderr)
            status = EXIT_ERROR
            continue
        print_result(result, fmt, report)
    return status


def open_connection(args: argparse.Namespace) -> t.Any:
    from dpsql.connection import connect
    from dpsql.interfaces.demo import connect_demo

    if args.demo:
        if args.policy or args.database != ":memory:":
            raise Error("--demo uses its own in-memory database and policy; drop DATABASE and --policy")
        return connect_demo()
    if not args.policy:
        raise Error("a policy is required: dpsql DATABASE --policy FILE (or dpsql --demo)")
    return connect(args.database, args.policy, init_ledger=args.init_ledger)


def set_budget(args: argparse.Namespace) -> int:
    """``--set-budget``: make the policy's budget the total of its ledger file, and say so."""
    from dpsql.privacy.ledger import Ledger, format_total
    from dpsql.privacy.policy import load_policy

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
    args = build_parser().parse_args(argv)
    try:
        if args.command and args.file:
            raise Error("give either -c or -f, not both")
        if args.set_budget:
            return set_budget(args)
        con = open_connection(args)
        try:
            if args.command:
                statements = [s for c in args.command for s in split_statements(c)]
            elif args.file:
                try:
                    with open(args.file, encoding="utf-8") as fh:
                        statements = split_statements(fh.read())
                except OSError as err:
                    raise Error(f"cannot read {args.file}: {err.strerror}") from None
            elif sys.stdin.isatty():
                from dpsql.interfaces.repl import run_repl

                return run_repl(con, fmt=args.format)
            else:
                statements = split_statements(sys.stdin.read())
            return run_statements(con, statements, args.format, not args.no_report)
        finally:
            con.close()
    except Error as err:
        print(f"Error: {one_line(err)}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:  # e.g. `dpsql ... | head`: the reader left, nothing to report
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the interpreter's final flush
        return EXIT_OK
    except KeyboardInterrupt:
        print("Error: interrupted", file=sys.stderr)
        return EXIT_ERROR
    except Exception as err:  # a bug: still one line, never a traceback
        print(f"Error: internal error ({type(err).__name__}): {one_line(err)}", file=sys.stderr)
        return EXIT_ERROR


