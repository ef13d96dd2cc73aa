"""What raises in DuckDB among the allowlist's functions and operators, measured over edge values.

Test support for tests/test_nonraising.py. :data:`CALLS` gives every node class and anonymous
function name that :mod:`dpsql._sql.allow` admits one or more DuckDB spellings whose ``{X}``
holes take a column of an argument type (:data:`CORPUS`); :func:`raises` evaluates a spelling
over every combination of edge values (without TRY) and returns an example of a failing row.
"""

from __future__ import annotations

import itertools
import re

import duckdb
import sqlglot
from sqlglot import exp

from dpsql._sql import allow
from dpsql.errors import Error

_INTS = {
    "TINYINT": (-128, 127), "SMALLINT": (-32768, 32767), "INTEGER": (-2147483648, 2147483647),
    "BIGINT": (-9223372036854775808, 9223372036854775807), "HUGEINT": (-(2**127), 2**127 - 1),
    "UTINYINT": (0, 255), "UBIGINT": (0, 2**64 - 1),
}
_TEXT = ["NULL", "''", "'x'", "'{'", "'[1,'", "'1'", "'{\"a\": 1}'", "'2000-13-45'", "'2000-01-01'",
         "'%'", "'('", "'\\'", "'$.a'", "'zz'", "'YQ=='", "'a,b'", "'é'"]
#: edge values per argument letter: S text, I every integer type's own values, F DOUBLE, N DECIMAL,
#: D DATE, T TIMESTAMP, H TIME, V INTERVAL, B BOOLEAN
CORPUS: dict[str, tuple[str, list[str]]] = {
    "S": ("VARCHAR", _TEXT),
    "F": ("DOUBLE", ["NULL", "0", "-0.0", "-1", "0.5", "1e308", "-1e308", "'nan'", "'inf'", "'-inf'", "1e15",
                     "40", "2147483648", "1114112", "55296"]),
    "N": ("DECIMAL(38,0)", ["NULL", "0", "-1", "99999999999999999999999999999999999999",
                            "-99999999999999999999999999999999999999"]),
    "D": ("DATE", ["NULL", "'2000-01-01'", "'5877642-06-25'", "'-5877641-06-25'", "'infinity'", "'-infinity'"]),
    "T": ("TIMESTAMP", ["NULL", "'2000-01-01'", "'294247-01-10 04:00:54'", "'290309-12-22 (BC) 00:00:00'",
                        "'infinity'"]),
    "H": ("TIME", ["NULL", "'00:00:00'", "'23:59:59.999999'", "'24:00:00'"]),
    "V": ("INTERVAL", ["NULL", "INTERVAL 1 DAY", "INTERVAL 2147483647 MONTH", "INTERVAL (-2147483647) MONTH",
                       "INTERVAL 100000000 DAY"]),
    "B": ("BOOLEAN", ["NULL", "true", "false"]),
}
for _name, (_lo, _hi) in _INTS.items():
    CORPUS["I" + _name] = (_name, ["NULL", str(_lo), str(_hi), "-1", "0", "1", "2", "63", "64", "33", "34"])

#: Spellings per allowlisted class or anonymous name; ``I`` expands to every integer type.
CALLS: dict[str, list[str]] = {
    **{k: [f"{{I}} {op} {{I}}", f"{{F}} {op} {{F}}", f"{{N}} {op} {{N}}"] for k, op in
       [("Add", "+"), ("Sub", "-"), ("Mul", "*"), ("IntDiv", "//"), ("Mod", "%")]},
    "Add2": ["{D} + {V}", "{T} + {V}", "{V} + {V}"], "DateArith": ["{D} + {I}", "{D} - {I}"],
    "DateMinusDate": ["{D} - {D}", "({D} - {D}) * {I}"], "Div": ["{I} / {I}", "{F} / {F}"],
    "Neg": ["-{I}", "-{F}", "-{V}"], "Pow": ["{F} ** {F}"], "Abs": ["abs({I})", "abs({F})"],
    "BitwiseLeftShift": ["{I} << {I}"], "BitwiseRightShift": ["{I} >> {I}"],
    "Chr": ["chr(TRY_CAST({I} AS INTEGER))"], "Factorial": ["factorial(TRY_CAST({I} AS INTEGER))"],
    "Sqrt": ["sqrt({F})"], "Ln": ["ln({F})"], "Log": ["log({F})", "log({F}, {F})"], "Exp": ["exp({F})"],
    "Round": ["round({F}, {I})"], "Ceil": ["ceil({F})"], "Floor": ["floor({F})"],
    "Acos": ["acos({F})"], "Cot": ["cot({F})"], "Trunc": ["trunc({F})"], "Atan2": ["atan2({F}, {F})"],
    "StrToTime": ["strptime({S}, '%Y-%m-%d')"], "JSONExtract": ["json_extract({S}, '$.a')"],
    "JSONExtractScalar": ["json_extract_string({S}, '$.a')"], "FromBase64": ["from_base64({S})"],
    "Substring": ["substring({S}, {I}, {I})"], "Left": ["left({S}, {I})"], "SplitPart": ["split_part({S}, ',', {I})"],
    "Unicode": ["unicode({S})"], "Ascii": ["ascii({S})"], "Levenshtein": ["levenshtein({S}, {S})"],
    "RegexpLike": ["regexp_matches({S}, '(a)')"], "RegexpReplace": ["regexp_replace({S}, '(a)', '\\1\\1')"],
    "Year": ["year({D})", "year({T})"], "DateTrunc": ["date_trunc('month', {T})"],
    "DateDiff": ["date_diff('day', {D}, {D})"], "Extract": ["extract(epoch FROM {T})"],
    "DateFromParts": ["make_date({I}, 1, 1)", "make_date(2000, {I}, {I})"],
    "TimestampFromParts": ["make_timestamp({I}, 1, 1, 0, 0, 0)", "make_timestamp(2000, 2, {I}, {I}, 0, 0)",
                           "make_timestamp(2000, 2, 1, 0, {I}, {F})"],
    "make_timestamp": ["make_timestamp({I})"], "StrToDate": ["CAST(strptime({S}, '%Y-%m-%d') AS DATE)"],
    "UnixToTime": ["to_timestamp({F})"], "TimeToStr": ["strftime({T}, '%Y')"], "LastDay": ["last_day({D})"],
    "Dayname": ["dayname({T})"], "TimeToUnix": ["epoch({T})"],
    "to_base": ["to_base({I}, 2)"],
    "even": ["even({F})"], "epoch_ms": ["epoch_ms({I})"], "make_time": ["make_time({I}, 0, 0)", "make_time(1, {I}, {F})"],
    "Right": ["right({S}, {I})"], "TimestampTrunc": ["date_trunc('day', {D})"],
    **{k: [f"{k.lower()}({{F}})"] for k in ("Asin", "Atan", "Cbrt", "Cos", "Sin", "Tan", "Degrees", "Radians",
                                            "Sign", "IsInf", "IsNan")},
    **{k: [f"{k.lower()}({{S}})"] for k in ("Length", "Lower", "Upper", "MD5", "Reverse", "Trim", "Initcap")},
    **{k: [f"{k}({{S}})"] for k in ("strlen", "lcase", "ucase", "ord", "strip_accents", "nfc_normalize")},
    **{k: [f"{k}({{S}}, {{S}})"] for k in ("damerau_levenshtein", "hamming", "jaccard", "jaro_similarity",
                                         "jaro_winkler_similarity", "mismatches", "prefix", "suffix")},
    **{k: [f"{k}({{F}})"] for k in ("isfinite", "signbit", "log10", "log2", "ceiling")},
    **{k: [f"{k}({{T}})", f"{k}({{D}})"] for k in ("century", "decade", "era", "millennium", "yearweek", "isodow",
                                                   "epoch_us", "epoch_ns")},
    **{k: [f"{k.lower()}({{T}})"] for k in ("Day", "Month", "Hour", "Minute", "Second", "Quarter", "Week",
                                           "WeekOfYear", "DayOfWeek", "DayOfWeekIso", "DayOfMonth", "DayOfYear",
                                           "Monthname")},
    "SHA": ["sha1({S})"], "SHA2": ["sha256({S})"], "ToBase64": ["to_base64(CAST({S} AS BLOB))"],
    "Replace": ["replace({S}, 'a', {S})"], "StartsWith": ["starts_with({S}, {S})"], "EndsWith": ["ends_with({S}, {S})"],
    "Contains": ["contains({S}, {S})"], "StrPosition": ["strpos({S}, {S})"], "Concat": ["concat({S}, {I})"],
    "ConcatWs": ["concat_ws({S}, {S}, {S})"], "DPipe": ["{S} || {S}"], "Like": ["{S} LIKE {S}"],
    "ILike": ["{S} ILIKE {S}"], "Glob": ["{S} GLOB {S}"], "SimilarTo": ["{S} SIMILAR TO '(a|b)%'"],
    "RegexpExtract": ["regexp_extract({S}, '(a)', 1)"], "RegexpFullMatch": ["regexp_full_match({S}, 'a+')"],
    "RegexpILike": ["regexp_matches({S}, 'A', 'i')"], "Greatest": ["greatest({I}, {I})"], "Least": ["least({F}, {F})"],
    "Date": ["CAST({T} AS DATE)"], "DateAdd": ["date_add({D}, {V})"], "DateSub": ["date_sub('day', {T}, {T})"],
    "date_part": ["date_part('year', {T})"], "datepart": ["datepart('epoch', {V})"], "hash": ["hash({S}, {F})"],
    "iff": ["iff({B}, {I}, {I})"], "ifnull": ["ifnull({F}, {F})"], "nullif": ["nullif({I}, {I})"],
    "bit_count": ["bit_count({I})"], "Extract2": ["extract(year FROM {V})"],
    **{k: [f"{{I}} {op} {{I}}", f"{{S}} {op} {{S}}"] for k, op in (
        ("EQ", "="), ("NEQ", "<>"), ("GT", ">"), ("GTE", ">="), ("LT", "<"), ("LTE", "<="), ("NullSafeEQ", "IS NOT DISTINCT FROM"),
        ("NullSafeNEQ", "IS DISTINCT FROM"))},
    "Between": ["{F} BETWEEN {F} AND {F}"], "In": ["{I} IN (1, 2)"], "Not": ["NOT {B}"], "And": ["{B} AND {B}"],
    "Or": ["{B} OR {B}"], "Xor": ["xor({I}, {I})"], "Is": ["{B} IS NULL"], "BitwiseAnd": ["{I} & {I}"],
    "BitwiseOr": ["{I} | {I}"], "BitwiseXor": ["xor({I}, {I})"], "BitwiseNot": ["~{I}"],
    "Case": ["CASE WHEN {B} THEN {I} ELSE {I} END"], "If": ["if({B}, {F}, {F})"], "Coalesce": ["coalesce({F}, {F})"],
    "Nullif": ["nullif({F}, {F})"], "Cast": ["CAST({S} AS INTEGER)", "CAST({F} AS TINYINT)", "CAST({T} AS DATE)"],
    "TryCast": ["TRY_CAST({S} AS DATE)"], "Try": ["TRY({I} + {I})"], "Interval": ["{D} + INTERVAL 1 DAY"],
    "TsOrDsAdd": ["{T} + INTERVAL 1 DAY"], "Escape": ["{S} LIKE {S} ESCAPE '!'"],
    **{f"to_{u}": [f"to_{u}({{F}})", f"to_{u}({{I}})"] for u in (
        "seconds", "days", "hours", "minutes", "years", "months", "weeks", "milliseconds", "microseconds")},
}


def _columns(spelling: str) -> list[str]:
    return re.findall(r"\{([A-Z])\}", spelling)


def _expand(spelling: str) -> list[tuple[str, list[str]]]:
    """(spelling, argument letters) for every integer type an ``I`` stands for."""
    letters = _columns(spelling)
    if "I" not in letters:
        return [(spelling, letters)]
    return [(spelling, [("I" + ty) if x == "I" else x for x in letters]) for ty in _INTS]


def table(letters: list[str]) -> str:
    """A VALUES table of every combination of the letters' edge values, columns c0, c1, ..."""
    rows = itertools.product(*[CORPUS[x][1] for x in letters])
    cols = ", ".join(f"TRY_CAST(c{i} AS {CORPUS[x][0]}) AS c{i}" for i, x in enumerate(letters))
    values = ", ".join("(" + ", ".join(r) + ")" for r in rows)
    names = ", ".join(f"c{i}" for i in range(len(letters)))
    return f"(SELECT {cols} FROM (VALUES {values}) v({names}))"


def expression(spelling: str, letters: list[str]) -> exp.Expression:
    holes = iter(range(len(letters)))
    return sqlglot.parse_one(re.sub(r"\{[A-Z]\}", lambda _m: f"c{next(holes)}", spelling), read="duckdb")


def admitted(spelling: str, letters: list[str]) -> bool:
    """Whether the gate admits the spelling over private rows (a refused one never runs)."""
    try:
        allow.check_rowwise(expression(spelling, letters), "WHERE", "t")
    except Error:
        return False
    return True


def fails_without_rows(con: duckdb.DuckDBPyConnection, sql: str, letters: list[str]) -> bool:
    """Whether ``sql`` fails over no rows at all (then its failure does not depend on any row)."""
    try:
        con.sql(f"SELECT count({sql}) FROM {table(letters)[:-1]} LIMIT 0)").fetchall()
    except (duckdb.Error, OverflowError):
        return True
    return False


def raises(con: duckdb.DuckDBPyConnection, sql: str, letters: list[str], example: bool = True) -> str | None:
    """The first failing row of ``sql`` (an expression over c0, c1, ...) over the corpus, or None
    (with ``example`` false, "some row" instead of searching for it)."""
    if fails_without_rows(con, sql, letters):  # the query's own error (binding, a constant): not the data's
        return None
    try:
        con.sql(f"SELECT count({sql}) FROM {table(letters)}").fetchall()
        return None
    except duckdb.BinderException:
        return None  # a spelling DuckDB does not bind for this type: nothing runs
    except (duckdb.Error, OverflowError) as e:
        if not example:
            return f"some row: {str(e).splitlines()[0][:80]}"
    for row in itertools.product(*[CORPUS[x][1] for x in letters]):
        try:
            con.sql(f"SELECT {sql} FROM (SELECT {', '.join(f'TRY_CAST({v} AS {CORPUS[x][0]}) AS c{i}' for i, (v, x) in enumerate(zip(row, letters)))})").fetchall()
        except (duckdb.Error, OverflowError) as e:
            return f"{row}: {str(e).splitlines()[0][:80]}"
    return "some combination"


def allowlist() -> list[str]:
    """Every function and operator the allowlist admits: class names and anonymous names."""
    classes = [c.__name__ for c in allow.ALLOWED if c not in (exp.Column, exp.Identifier, exp.Literal, exp.Null,
                                                               exp.Boolean, exp.Paren, exp.Tuple, exp.DataType,
                                                               exp.DataTypeParam)]
    return sorted(classes) + sorted(allow.ANONYMOUS)
