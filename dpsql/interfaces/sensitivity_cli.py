"""``dpsql sensitivity``: the data owner's sensitivity report from the command line.

Opens the database directly, without a policy or a budget: for administrators only. The
report itself is :func:`dpsql.admin.sensitivity_report.sensitivity_report`.
"""

from __future__ import annotations

import sys

import duckdb

from dpsql._privacy.exact import ANALYTIC_STATISTICS, RELATIONS
from dpsql.admin.sensitivity_report import sensitivity_report
from dpsql.errors import Error
from dpsql.interfaces.console import EXIT_ERROR, EXIT_OK, Parser, one_line


def main(argv: list[str]) -> int:
    """``dpsql sensitivity DATABASE --table T --column C --stat median --lower 0 --upper 100 ...``

    Opens the database directly (no policy, no budget): for administrators only.
    """
    parser = Parser(prog="dpsql sensitivity",
                     description="Sensitivity report for the data owner. Reads raw data: never expose it to analysts.")
    parser.add_argument("database", nargs="?", help="DuckDB database file (opened read-only)")
    parser.add_argument("--demo", action="store_true", help="use the bundled UCI Adult table")
    parser.add_argument("--table", required=True)
    parser.add_argument("--column", required=True)
    parser.add_argument("--stat", default="median", choices=ANALYTIC_STATISTICS)
    parser.add_argument("--p", type=float, help="quantile in [0, 1] (percentile: [0, 100])")
    parser.add_argument("--lower", type=float, required=True)
    parser.add_argument("--upper", type=float, required=True)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-6)
    parser.add_argument("--b", type=float, action="append", help="proposed PTR bound (repeatable)")
    parser.add_argument("--relation", choices=RELATIONS, default="add_remove")
    parser.add_argument("--k-max", type=int, default=199, help="largest k for A(k) (default 199)")
    parser.add_argument("--plot", metavar="PNG", help="write the figure to this file")
    args = parser.parse_args(argv)
    if args.demo == bool(args.database):
        parser.error("give either DATABASE or --demo")
    try:
        if args.demo:
            from dpsql.interfaces.demo import load_adult

            con = duckdb.connect(":memory:")
            load_adult(con)
        else:
            try:
                con = duckdb.connect(args.database, read_only=True)
            except duckdb.Error as err:
                raise Error(f"cannot open database {args.database}: {str(err).splitlines()[0]}") from None
        try:
            sensitivity_report(con, args.table, args.column, args.stat, args.lower, args.upper, p=args.p,
                               epsilon=args.epsilon, delta=args.delta,
                               b_values=tuple(args.b or (0.001, 0.01, 0.1, 1.0)), relation=args.relation,
                               k_values=range(0, args.k_max + 1), plot_path=args.plot)
        finally:
            con.close()
    except (Error, ValueError) as err:
        print(f"Error: {one_line(err)}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK
