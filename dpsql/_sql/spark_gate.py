"""What the expressions of a DP query may use on Spark: a narrower allowlist than DuckDB's.

On DuckDB every expression over private rows runs inside ``TRY(...)`` (:mod:`dpsql._sql.allow`),
so a value that would make a function fail gives NULL. Spark has no ``TRY``: dpsql writes the
arithmetic as ``try_*`` functions and casts as ``TRY_CAST`` and turns ANSI mode off
(:mod:`dpsql._compile.target`), which makes the functions below total, but not every function DuckDB
allows. On Spark

* a regular expression is compiled by Java's engine when the first row reaches it, so a pattern
  that Java rejects (``(?P<n>x)`` is valid for DuckDB's RE2), or a pattern computed from a row,
  fails only if some row gets there;
* ``split_part(s, ',', 0)`` fails on every row it sees, and a group reference in a replacement
  fails on a row that matches;
* a backslash in a LIKE pattern is an escape character (on DuckDB it is an ordinary character
  unless ``ESCAPE`` says otherwise), and one that escapes nothing fails on the first row;
* date and time arithmetic with an INTERVAL raises ``ARITHMETIC_OVERFLOW`` on a value that
  overflows, whatever the ANSI setting.

An error that happens only when some row exists tells whether it exists, at no cost (errors
while reading charge nothing). So on Spark the expressions that run there (WHERE, GROUP BY,
the arguments of DP aggregates, CTEs, subqueries and join conditions; not the post-processing,
which runs in DuckDB) may call only the functions of :data:`SPARK_FUNCTIONS`, and LIKE or ILIKE
only with a literal pattern without a backslash, and no INTERVAL. The check runs after every refusal the query
shares with DuckDB, so a query DuckDB refuses gets DuckDB's message on both engines.
"""

from __future__ import annotations

from sqlglot import exp

from dpsql._sql.allow import SYNTAX
from dpsql._sql.dialect import DPAggregate
from dpsql.errors import BindError


def _classes(*names: str) -> tuple[type[exp.Expression], ...]:
    return tuple(getattr(exp, n) for n in names if isinstance(getattr(exp, n, None), type))


#: Functions that are total on Spark with ANSI off (or made total by the target's ``try_*`` and
#: ``TRY_CAST`` forms) and mean the same as on DuckDB.
SPARK_FUNCTIONS: tuple[type[exp.Expression], ...] = _classes(
    "Case", "If", "Coalesce", "Nullif", "Cast", "TryCast", "Try",
    "Abs", "Ceil", "Floor", "Round", "Sqrt", "Exp", "Ln", "Sign", "Greatest", "Least",
    "Lower", "Upper", "Length", "Substring", "Trim", "Concat", "Left", "Right", "Replace",
    "Reverse", "Initcap",
    "Year", "Month", "Day", "Hour", "Minute", "Second", "Quarter", "DayOfWeek", "DayOfMonth",
    "DayOfYear",
    # flat maps and their lists (written for Spark by dpsql._compile.target_joins)
    "Unnest", "Explode", "Array", "Split",
    # a semi join's filter (dpsql._sql.insubquery): its subquery's own expressions are checked too
    "Exists",
)
#: Functions sqlglot keeps by name that the Spark target writes on purpose.
SPARK_ANONYMOUS = frozenset({"list_slice", "string_split", "str_split", "string_to_array", "hash"})

#: Clauses of the outermost SELECT that are post-processing (run in DuckDB on noisy rows).
_POST = ("expressions", "having", "order", "limit", "offset", "qualify")


def check(query: exp.Expression) -> None:
    """Refuse what could fail on a value on Spark (see the module's docstring), by name."""
    roots: list[exp.Expression] = []
    for key, value in query.args.items():
        if key in _POST or value is None:
            continue
        roots.extend(v for v in (value if isinstance(value, list) else [value]) if isinstance(v, exp.Expression))
    for projection in query.expressions:  # a key (GROUP BY 1, an alias) runs there; the rest is post-processing
        aggregates = list(projection.find_all(DPAggregate))
        roots.extend(aggregates or [projection])
    for root in roots:
        for node in root.walk():
            _check_node(node)


def _check_node(node: exp.Expression) -> None:
    if isinstance(node, (exp.Like, exp.ILike)):
        pattern = node.expression
        if isinstance(node.parent, exp.Escape):
            raise BindError("on Spark LIKE takes no ESCAPE clause (its escape rules differ from DuckDB's); "
                            "run this query on DuckDB")
        if not (isinstance(pattern, exp.Literal) and pattern.is_string) or "\\" in pattern.this:
            raise BindError("on Spark a LIKE pattern must be a literal string without a backslash (a "
                            "backslash is an escape character there, an ordinary one on DuckDB)")
        return
    if isinstance(node, exp.Interval):
        raise BindError("INTERVAL arithmetic is not available in DP queries on Spark: there it fails on "
                        "a value that overflows (even with ANSI off), which would tell whether the row "
                        "exists; run this query on DuckDB")
    if isinstance(node, (exp.Glob, exp.SimilarTo)):
        raise BindError(f"{node.key.upper()} is not available in DP queries on Spark; run this query on DuckDB")
    if not isinstance(node, exp.Func) or isinstance(node, (*SYNTAX, exp.AggFunc, DPAggregate)):
        return  # operators (arithmetic in try_* forms), aggregates of per-unit subqueries
    if isinstance(node, exp.Anonymous):
        if node.name.lower() in SPARK_ANONYMOUS:
            return
        name = node.name.lower()
    elif isinstance(node, SPARK_FUNCTIONS):
        return
    else:
        name = node.sql(dialect="duckdb").split("(", 1)[0].strip().lower() or node.sql_name().lower()
    raise BindError(f"{name}() is not available in DP queries on Spark: there it could fail on some "
                    "row's value, which would tell whether the row exists (docs/spark.md); run this "
                    "query on DuckDB")
