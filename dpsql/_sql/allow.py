"""What an expression over private rows may contain: an allowlist of node types and functions.

Every expression that reads a private table (a WHERE predicate, a GROUP BY key, a DP
aggregate's argument, a column of a row-wise CTE or subquery) is checked node by node against
the sets below; anything not listed is refused. The lists hold only what is

* **deterministic** (no ``random()``, ``uuid()``, sequences, settings or clocks: DuckDB cannot
  wrap a volatile call in ``TRY``, so it could fail on chosen rows, and its value would differ
  between the analyst's two runs);
* **total once wrapped**: the rewrite puts every such expression in ``TRY(...)`` and turns
  ``CAST`` into ``TRY_CAST``, so a value that would raise becomes NULL (see
  :func:`dpsql._plan.rewrite.total`);
* **of bounded cost**: nothing whose running time grows with the *value* of an argument
  (``repeat``, ``lpad``, ``range``, ``format``'s computed widths, list builders): under a
  ``CASE WHEN <predicate>`` such a call would time whether some row matches. The functions
  listed may make a value longer than their inputs (``replace``, ``||``, ...), but only by a
  factor the query fixes: :mod:`dpsql._sql.size` bounds every value's length before the query
  runs, and refuses past fixed limits;
* **one row in, one value out**: no set-returning function (``unnest``), no aggregate, window
  or subquery, no struct or list access (``s.f``, ``a[1]``) whose meaning depends on types.

The same check, with DP aggregates turned into noisy columns first, covers post-processing.
"""

from __future__ import annotations

import typing as t

from sqlglot import exp

from dpsql._sql.size import Bound, call_name, measure
from dpsql.errors import PrivacyError

#: Syntax and values that cannot fail or multiply rows on their own.
_VALUES: tuple[type[exp.Expression], ...] = (
    exp.Column, exp.Identifier, exp.Literal, exp.Null, exp.Boolean, exp.Paren, exp.Tuple,
)

#: Operators: arithmetic, comparison, logic, pattern matching, string concatenation.
_OPERATORS: tuple[type[exp.Expression], ...] = (
    exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod, exp.Neg, exp.Pow,
    exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ, exp.Is,
    exp.And, exp.Or, exp.Not, exp.Xor, exp.Between, exp.In,
    exp.Like, exp.ILike, exp.Glob, exp.SimilarTo, exp.Escape, exp.DPipe,
    exp.BitwiseAnd, exp.BitwiseOr, exp.BitwiseXor, exp.BitwiseNot,
    exp.BitwiseLeftShift, exp.BitwiseRightShift,
    exp.Case, exp.If, exp.Coalesce, exp.Nullif, exp.Cast, exp.TryCast, exp.Try,
    exp.Interval, exp.DataType, exp.DataTypeParam,
)


def _classes(*names: str) -> tuple[type[exp.Expression], ...]:
    """sqlglot's classes of these names (a name this sqlglot lacks is simply not allowed)."""
    return tuple(getattr(exp, n) for n in names if isinstance(getattr(exp, n, None), type))


#: Scalar functions sqlglot parses into their own classes.
_FUNCTIONS = _classes(
    # numbers
    "Abs", "Ceil", "Floor", "Round", "Sqrt", "Cbrt", "Ln", "Log", "Exp", "Sign", "Greatest",
    "Least", "Trunc", "IsNan", "IsInf", "Factorial", "Degrees", "Radians", "Sin", "Cos", "Tan",
    "Asin", "Acos", "Atan", "Atan2", "Cot",
    # strings
    "Lower", "Upper", "Length", "Substring", "Trim", "Concat", "ConcatWs", "Left", "Right",
    "Replace", "StrPosition", "Contains", "StartsWith", "EndsWith", "Reverse", "MD5", "SHA",
    "SHA2", "Levenshtein", "Ascii", "Chr", "Unicode", "SplitPart", "Initcap",
    "RegexpLike", "RegexpFullMatch", "RegexpILike", "RegexpExtract", "RegexpReplace",
    "FromBase64", "ToBase64", "JSONExtract", "JSONExtractScalar", "JSONPath", "JSONPathKey",
    "JSONPathRoot", "JSONPathSubscript", "JSONPathWildcard",
    # dates and times
    "Year", "Month", "Day", "Hour", "Minute", "Second", "Week", "WeekOfYear", "Quarter",
    "DayOfWeek", "DayOfWeekIso", "DayOfMonth", "DayOfYear", "Extract", "TimestampTrunc",
    "DateTrunc", "DateDiff", "DateAdd", "DateSub", "TsOrDsAdd", "DateFromParts", "TimeToStr",
    "StrToTime", "StrToDate", "UnixToTime", "TimeToUnix", "LastDay", "Dayname", "Monthname",
    "Date", "TimestampFromParts",
)

#: DuckDB scalar functions that sqlglot keeps as ``Anonymous`` (lower-case names).
ANONYMOUS = frozenset({
    "isfinite", "even", "strlen", "prefix", "suffix", "hash", "strip_accents", "ord", "bit_count", "to_base",
    "date_part", "datepart", "iff", "nullif", "ifnull", "ceiling", "log10", "log2",
    "damerau_levenshtein", "hamming", "jaro_similarity", "jaro_winkler_similarity", "jaccard",
    "mismatches", "nfc_normalize", "lcase", "ucase", "signbit",
    "yearweek", "isodow", "era", "decade", "century", "millennium", "epoch_ms", "epoch_us",
    "epoch_ns", "make_time", "make_timestamp", "to_days", "to_hours", "to_minutes",
    "to_seconds", "to_years", "to_months", "to_weeks", "to_milliseconds", "to_microseconds",
})

#: Nodes that appear only as syntax inside an allowed function (units of date functions).
_UNIT_PARENTS: tuple[type[exp.Expression], ...] = _classes(
    "Extract", "TimestampTrunc", "DateTrunc", "DateDiff", "DateAdd", "DateSub", "TsOrDsAdd",
    "Interval",
)

ALLOWED: tuple[type[exp.Expression], ...] = _VALUES + _OPERATORS + _FUNCTIONS
#: Values and operators: the allowed nodes that are not function calls.
SYNTAX: tuple[type[exp.Expression], ...] = _VALUES + _OPERATORS

#: Types a value may be cast to: scalars only (a cast to a list or struct type could make one
#: value many, and its meaning would depend on the text).
_NESTED_TYPES = {
    exp.DataType.Type.ARRAY, exp.DataType.Type.LIST, exp.DataType.Type.STRUCT,
    exp.DataType.Type.MAP, exp.DataType.Type.UNION, exp.DataType.Type.USERDEFINED,
    exp.DataType.Type.NESTED, exp.DataType.Type.OBJECT,
}

#: Why some well-known functions are refused (a clearer message than "not allowed").
_WHY = {
    "random": "it is volatile", "rand": "it is volatile", "uuid": "it is volatile",
    "setseed": "it is volatile", "nextval": "it is volatile", "currval": "it is volatile",
    "error": "whether it fails would reveal whether some row exists",
    "write_log": "whether it fails would reveal whether some row exists",
    "sleep_ms": "its running time would reveal whether some row exists",
    "repeat": "its running time grows with a value", "lpad": "its running time grows with a value",
    "rpad": "its running time grows with a value", "range": "it turns one row into many",
    "generate_series": "it turns one row into many", "unnest": "it turns one row into many",
    "generate_subscripts": "it turns one row into many",
    **{name: "it fails on values near its type's limits (dpsql._sql.nonraising.REFUSED); compute it with % "
       "in a CASE instead" for name in ("gcd", "lcm", "greatest_common_divisor", "least_common_multiple")},
}

#: Arguments that must not read a row: a JSON path or a date format read from a row could be
#: invalid on that row and make it fail (DuckDB checks a constant one when it plans). Patterns of
#: regular expressions get the same rule from the size model (:mod:`dpsql._sql.sizerules`).
_LITERAL_ARGS: dict[type[exp.Expression], tuple[str, ...]] = {
    cls: args for cls, args in (
        (getattr(exp, name, None), args) for name, args in (
            ("JSONExtract", ("expression",)), ("JSONExtractScalar", ("expression",)),
            ("StrToTime", ("format",)), ("StrToDate", ("format",)),
        )
    ) if isinstance(cls, type)
}


def _literal_args(node: exp.Expression, where: str, table: str) -> None:
    """Refuse a pattern, path or format of ``node`` that is not written as a literal."""
    for key in _LITERAL_ARGS.get(type(node), ()):
        arg = node.args.get(key)
        if arg is None or isinstance(arg, exp.JSONPath) or arg.find(exp.Column) is None:
            continue
        name = {"StrToTime": "strptime", "StrToDate": "strptime", "JSONExtractScalar": "json_extract_string"}.get(
            type(node).__name__, "json_extract")
        raise PrivacyError(
            f"{name}() over private table {table} needs its {key if key != 'expression' else 'path'} "
            f"written as a literal in {where}: one read from a row could fail on that row"
        )


_name = call_name


def _refusal(node: exp.Expression, where: str, table: str) -> str:
    if isinstance(node, exp.Window):
        fn = f"{_name(node.this)}()" if node.this is not None else "a window function"
        return f"window functions are not allowed over private table {table}: {fn} OVER (...) in {where}"
    if isinstance(node, (exp.Subquery, exp.Select, exp.Exists, exp.Union, exp.Query)):
        return f"subqueries are not allowed in {where} of a DP query over {table}"
    if isinstance(node, exp.AggFunc):
        return (f"aggregate {_name(node)}() is not allowed in {where} of a DP query over {table}; "
                "DP aggregates go in the select list")
    if isinstance(node, (exp.Explode, exp.Unnest, exp.GenerateSeries)):
        return (f"unnest() is not allowed in {where} of a DP query over {table}: it turns one row "
                "into many, so one person could count more than once")
    if isinstance(node, (exp.Func, exp.Anonymous)):
        name = _name(node)
        why = _WHY.get(name, "it is not on dpsql's list of functions allowed over private rows")
        return f"function {name}() is not allowed in {where} of a DP query over {table}: {why}"
    if isinstance(node, (exp.Dot, exp.Bracket)):
        return f"struct and list access ({node.sql(dialect='duckdb')[:40]}) is not allowed in {where} over {table}"
    if isinstance(node, (exp.Placeholder, exp.Parameter)):
        return f"query parameters are not allowed in {where} of a DP query over {table}"
    return f"{type(node).__name__.upper()} ({node.sql(dialect='duckdb')[:40]}) is not allowed in {where} of a DP query over {table}"


def check_rowwise(node: exp.Expression, where: str, table: str,
                  column: t.Callable[[exp.Column], Bound] | None = None) -> Bound:
    """Refuse ``node`` unless every part of it is on the allowlist and the values it computes
    have a bounded length (:mod:`dpsql._sql.size`); its bound (``column`` gives each column's).
    Raises PrivacyError."""
    nodes = list(node.walk())
    for n in nodes:
        if isinstance(n, exp.Var):
            if isinstance(n.parent, _UNIT_PARENTS) or isinstance(n.parent, exp.DataType):
                continue
            raise PrivacyError(_refusal(n, where, table))
        if isinstance(n, exp.Anonymous):
            if str(n.name).lower() not in ANONYMOUS:
                raise PrivacyError(_refusal(n, where, table))
            continue
        if not isinstance(n, ALLOWED):
            raise PrivacyError(_refusal(n, where, table))
        if isinstance(n, exp.Column) and isinstance(n.this, exp.Star):
            raise PrivacyError(f"{n.sql(dialect='duckdb')} is not allowed in {where} of a DP query over {table}")
        if isinstance(n, exp.DataType) and n.this in _NESTED_TYPES:
            raise PrivacyError(
                f"a cast to {n.sql(dialect='duckdb')} is not allowed in {where} of a DP query over "
                f"{table}: only scalar types"
            )
        _literal_args(n, where, table)
        if isinstance(n, exp.In) and (n.args.get("query") or n.args.get("unnest") or n.args.get("field")):
            raise PrivacyError(f"subqueries are not allowed in {where} of a DP query over {table}")
    return measure(nodes, where, table, column)


def functions_in(node: exp.Expression) -> t.Iterator[str]:
    """Names of the function calls in ``node`` (for messages and tests)."""
    for n in node.walk():
        if isinstance(n, (exp.Func, exp.Anonymous)):
            yield _name(n)


#: Aggregates that cannot raise on any DOUBLE input (checked with ±inf, NaN, ±1e308 and empty
#: groups in tests/test_gate.py): DP_AGG runs them per chunk, and a per-unit subquery per unit.
#: Their arguments are cast to DOUBLE first, so no integer accumulator can overflow.
SAFE_NUMERIC_AGGREGATES = frozenset({
    "avg", "mean", "sum", "fsum", "kahan_sum", "favg", "median", "stddev", "stddev_samp",
    "stddev_pop", "variance", "var_samp", "var_pop", "corr", "covar_samp", "covar_pop",
    "regr_slope", "regr_intercept", "regr_r2", "regr_count", "regr_avgx", "regr_avgy",
    "regr_sxx", "regr_syy", "regr_sxy", "min", "max", "mad", "product", "geomean", "sem",
    "quantile_cont", "quantile_disc", "approx_quantile",
})
#: Aggregates that DuckDB before 2.0 raises on ("Out of Range Error" for ±inf, NaN or ±1e308
#: inputs): with such a DuckDB they are refused, so that whether a query fails never depends on
#: the data (DuckDB 2.0 returns NaN or NULL instead).
RAISE_BEFORE_DUCKDB_2 = frozenset({
    "stddev", "stddev_samp", "stddev_pop", "variance", "var_samp", "var_pop", "corr", "sem", "geomean",
    "regr_slope", "regr_intercept", "regr_r2", "regr_sxx", "regr_syy",
})


def _duckdb_major() -> int:
    import duckdb

    return int(duckdb.__version__.split(".")[0])


if _duckdb_major() < 2:
    SAFE_NUMERIC_AGGREGATES -= RAISE_BEFORE_DUCKDB_2
#: Aggregates of any type (counts of values), whose arguments are kept as they are.
SAFE_ANY_AGGREGATES = frozenset({"count", "approx_count_distinct", "entropy", "mode"})


def aggregate_name(node: exp.Expression) -> str:
    """The DuckDB name of an aggregate call (``avg``, ``regr_slope``, ...), lower-case."""
    return node.sql(dialect="duckdb").split("(", 1)[0].strip().lower()
