"""The size rules: for each node an expression over private rows may hold, how long its value
can be given its inputs' (``a·L + b`` bytes), and the work it does. The model, its limits and
the pass that applies them: :mod:`dpsql._sql.size`.
"""

from __future__ import annotations

import typing as t

from sqlglot import exp

from dpsql._sql.nonraising import OLDER

#: the longest text of any fixed-width value (a HUGEINT written as a BIT string)
SCALAR = 128
#: the work of a byte that a regular expression replacement reads or writes
REGEX_WORK = 16
#: an argument of an edit distance (quadratic time) may be at most this many times L ...
PAIR_FACTOR = 4
#: ... plus this many bytes
PAIR_ADDED = 256


class Bound(t.NamedTuple):
    """Output length ``a·L + b`` bytes; the work of the whole subtree ``wa·L + wb``; whether
    the value depends on a row."""

    a: float
    b: float
    wa: float
    wb: float
    row: bool


ZERO = Bound(0.0, 0.0, 0.0, 0.0, False)

Size = tuple[float, float]
Get = t.Callable[[t.Any], Bound]


class Refused(Exception):
    """A rule's refusal: why (the pass adds which function, where and over which table)."""


def describe(a: float, b: float) -> str:
    """``a·L + b`` in words."""
    if not a:
        return f"{b:,.0f} bytes"
    return f"{a:g}× the row's longest value" + (f" plus {b:,.0f} bytes" if b else "")


# --- rules: a node and its children's bounds -> the node's output length ----------------------
# A rule marked cheap builds no new text: a fixed-width value, or one of its inputs chosen
# (CASE, COALESCE). The others build their output, which counts towards the expression's work.

#: a rule's result: the output's length, and optionally the work the node itself does (by
#: default: the bytes it writes, none for a cheap rule)
Work = tuple[float, float, float, float]
Rule = t.Callable[[t.Any, Get], Size | Work]


def _cheap(rule: Rule) -> Rule:
    rule.cheap = True  # type: ignore[attr-defined]
    return rule


#: the rules whose output length does not depend on the input's (each test of a value that
#: could grow covers every other rule: tests/test_oracles.py)
FIXED: set[Rule] = set()


def _fixed_width(rule: Rule) -> Rule:
    FIXED.add(rule)
    return _cheap(rule)


@_fixed_width
def _scalar(node: t.Any, get: Get) -> Size:
    return 0.0, float(SCALAR)


@_fixed_width
def _boolean(node: t.Any, get: Get) -> Size:
    return 0.0, 5.0


def _fixed(n: int) -> Rule:
    def rule(node: t.Any, get: Get) -> Size:
        return 0.0, float(n)
    return _fixed_width(rule)


def _this(node: t.Any, get: Get) -> Size:
    """At most as long as the first argument (a part of it, or its bytes re-ordered)."""
    c = get(_first(node))
    return c.a, c.b


def _scaled(f: float, extra: float = 0.0) -> Rule:
    def rule(node: t.Any, get: Get) -> Size:
        c = get(_first(node))
        return f * c.a, f * c.b + extra
    return rule


def sum_of_inputs(node: t.Any, get: Get) -> Size:
    """The inputs' lengths added (concatenation; also what a node without a rule gets)."""
    a = b = 0.0
    for child in node.iter_expressions():
        c = get(child)
        a, b = a + c.a, b + c.b
    return a, b


@_cheap
def _tuple(node: t.Any, get: Get) -> Size:
    return sum_of_inputs(node, get)


def _largest(parts: t.Iterable[t.Any], get: Get) -> Size:
    a = b = 0.0
    for part in parts:
        if part is not None:
            c = get(part)
            a, b = max(a, c.a), max(b, c.b)
    return a, b


@_cheap
def _all_largest(node: t.Any, get: Get) -> Size:
    return _largest(node.iter_expressions(), get)


@_cheap
def _case(node: exp.Case, get: Get) -> Size:
    return _largest([*(node.args.get("ifs") or []), node.args.get("default")], get)


@_cheap
def _if(node: exp.If, get: Get) -> Size:
    return _largest([node.args.get("true"), node.args.get("false")], get)


@_cheap
def _first_arg(node: t.Any, get: Get) -> Size:
    c = get(node.this)
    return c.a, c.b


@_fixed_width
def _literal(node: exp.Literal, get: Get) -> Size:
    return 0.0, float(len(str(node.this).encode("utf-8")))


def _first(node: t.Any) -> t.Any:
    if isinstance(node, exp.Anonymous) or node.this is None:
        return node.expressions[0] if node.expressions else None
    return node.this


def _concat_ws(node: exp.ConcatWs, get: Get) -> Size:
    sep, *parts = node.expressions
    s = get(sep)
    a = b = 0.0
    for part in parts:
        c = get(part)
        a, b = a + c.a, b + c.b
    gaps = max(len(parts) - 1, 0)
    return a + gaps * s.a, b + gaps * s.b


def _constantdescribe(node: t.Any, part: t.Any, role: str, get: Get) -> float:
    """The most bytes ``part`` can hold, which must not depend on a row's values."""
    c = get(part)
    if c.a:
        raise Refused(f"its {role} must be a literal: one whose length depends on a row would multiply "
                       "the length of each value")
    return c.b


def _replace(node: exp.Replace, get: Get) -> Size:
    new = _constantdescribe(node, node.args.get("replacement"), "replacement", get)
    old = node.expression
    least = len(str(old.this).encode("utf-8")) if isinstance(old, exp.Literal) and old.is_string else 1
    f = max(1.0, new / max(least, 1))
    c = get(node.this)
    return f * c.a, f * c.b


def _rewrite(text: str) -> tuple[int, int]:
    """A regexp_replace replacement read as RE2 does: its backreferences (``\\0`` to ``\\9``,
    each a copy of part of a match) and the bytes it writes besides (an escaped character
    counted as its two bytes)."""
    raw = text.encode("utf-8")
    refs = other = i = 0
    while i < len(raw):
        if raw[i] == 0x5C and i + 1 < len(raw):  # a backslash and the byte it escapes
            if 0x30 <= raw[i + 1] <= 0x39:
                refs += 1
            else:
                other += 2
            i += 2
        else:
            other += 1
            i += 1
    return refs, other


def _regexp_replace(node: exp.RegexpReplace, get: Get) -> Size:
    """Matches do not overlap: the copies of matched text add up to at most L per
    backreference, and there are at most L + 1 matches (empty ones included) of the rest."""
    _constant_pattern(node, node.expression, get)
    rep = node.args.get("replacement")
    r = _constantdescribe(node, rep, "replacement", get)
    mods = node.args.get("modifiers")
    every = mods is not None and (not isinstance(mods, exp.Literal) or "g" in str(mods.this))
    if isinstance(rep, exp.Literal):
        k, other = _rewrite(str(rep.this))
    else:  # only its length is known: the worst split of it for each case
        k, other = (0, r) if every else (r // 2, r)
    c = get(node.this)
    f = 1 + k + other if every else 1 + k
    a, b = f * c.a, f * c.b + other
    # RE2 takes about as long per match as replace() per byte: count 16 per byte read and written
    return a, b, REGEX_WORK * (a + c.a), REGEX_WORK * (b + c.b)


def _constant_pattern(node: t.Any, pattern: t.Any, get: Get) -> None:
    if get(pattern).row:
        raise Refused("its pattern must be a literal, not computed from a row: a pattern is compiled "
                       "for every row that reaches it, and that time would show which rows do")


def _search(node: t.Any, get: Get) -> Work:
    """LIKE, GLOB, contains, hamming, ...: a fixed-width answer after one pass over the
    arguments (DuckDB's matchers measured linear, also on inputs that make backtracking
    quadratic). Before DuckDB 2.0, LIKE, ILIKE and GLOB backtrack: their pattern must be a
    literal, which :mod:`dpsql._sql.likes` gives to RE2."""
    if OLDER and isinstance(node, (exp.Like, exp.ILike, exp.Glob)):
        _constant_pattern(node, node.expression, get)
    wa, wb = sum_of_inputs(node, get)  # the bytes it reads: its arguments, once
    return 0.0, 5.0 if isinstance(node, exp.Predicate) else float(SCALAR), wa, wb


def _matches(node: t.Any, get: Get) -> Work:
    _constant_pattern(node, node.expression, get)
    return _search(node, get)


def _extract(node: t.Any, get: Get) -> Work:
    _constant_pattern(node, node.expression, get)
    a, b = _this(node, get)
    wa, wb = sum_of_inputs(node, get)
    return a, b, a + wa, b + wb


def _initcap(node: exp.Initcap, get: Get) -> Size:
    # DuckDB has no initcap: sqlglot writes a regular expression built from the delimiters
    _constant_pattern(node, node.expression, get)
    return _scaled(2.0)(node, get)


def _pair(node: t.Any, get: Get) -> Work:
    """Edit distances: time grows with the product of the two lengths, so both are bounded."""
    parts = node.expressions[:2] if isinstance(node, exp.Anonymous) else [node.this, node.expression]
    for part in parts:
        c = get(part)
        if c.a > PAIR_FACTOR or c.b > PAIR_ADDED:
            raise Refused(
                f"its time grows with the product of its arguments' lengths, and one could be "
                f"{describe(c.a, c.b)} (at most {PAIR_FACTOR}× plus "
                f"{PAIR_ADDED} bytes): compare shorter values"
            )
    return _search(node, get)


def _cast(node: exp.Cast, get: Get) -> Size:
    to = node.args.get("to")
    if isinstance(to, exp.DataType) and to.this in _TEXT_TYPES:
        # a BLOB as text writes each byte as \xAB, as a BIT string as eight digits; text as a
        # BLOB reads \xAB as one byte
        f = 8 if to.this == exp.DataType.Type.BIT else 1 if to.this in _BLOB_TYPES else 4
        c = get(node.this)
        return f * c.a, max(f * c.b, float(SCALAR))
    return 0.0, float(SCALAR)


def _time_to_str(node: exp.TimeToStr, get: Get) -> Size:
    # each byte of the format gives at most 16 (%Z: a zone name; %c, %A, %B: a few words)
    fmt = node.args.get("format")
    this = node.this
    if isinstance(this, exp.Literal) and this.is_string:  # strftime('%Y', d)
        fmt = this
    if fmt is not None and not (isinstance(fmt, exp.Literal) and fmt.is_string):
        raise Refused("its format must be a literal, not computed from a row")
    if fmt is not None and "%n" in fmt.name:
        # DuckDB 1.4 reserves 9 bytes for %n (nanoseconds), writes 6 and returns the other 3 as
        # whatever the buffer held
        raise Refused("its format may not use %n (nanoseconds): DuckDB 1.4 returns uninitialised bytes "
                      "for it; use %f (microseconds)")
    c = get(fmt) if fmt is not None else ZERO
    return 16 * c.a, 16 * c.b + SCALAR


def _json(node: t.Any, get: Get) -> Size:
    # a fragment is written again: 1e20 becomes 100000000000000000000.0 (4 bytes to 23)
    return _scaled(6.0, SCALAR)(node, get)


_TEXT_TYPES = frozenset(getattr(exp.DataType.Type, n) for n in (
    "TEXT", "VARCHAR", "CHAR", "NCHAR", "NVARCHAR", "NAME", "BPCHAR", "BLOB", "VARBINARY", "BINARY",
    "JSON", "BIT", "LONGTEXT", "MEDIUMTEXT", "TINYTEXT", "LONGBLOB", "MEDIUMBLOB", "TINYBLOB",
) if hasattr(exp.DataType.Type, n))

_BLOB_TYPES = frozenset(getattr(exp.DataType.Type, n) for n in (
    "BLOB", "VARBINARY", "BINARY", "LONGBLOB", "MEDIUMBLOB", "TINYBLOB",
) if hasattr(exp.DataType.Type, n))

_SCALARS = (
    # arithmetic, numbers, dates and times: fixed-width values
    "Add", "Sub", "Mul", "Div", "IntDiv", "Mod", "Neg", "Pow", "Interval",
    "Abs", "Ceil", "Floor", "Round", "Sqrt", "Cbrt", "Ln", "Log", "Exp", "Sign", "Trunc", "Factorial",
    "Degrees", "Radians", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Atan2", "Cot",
    "Length", "Ascii", "Unicode",
    "Year", "Month", "Day", "Hour", "Minute", "Second", "Week", "WeekOfYear", "Quarter",
    "DayOfWeek", "DayOfWeekIso", "DayOfMonth", "DayOfYear", "Extract", "TimestampTrunc",
    "DateTrunc", "DateDiff", "DateAdd", "DateSub", "TsOrDsAdd", "DateFromParts", "StrToTime",
    "StrToDate", "UnixToTime", "TimeToUnix", "LastDay", "Dayname", "Monthname", "Date",
    "TimestampFromParts",
)
_BOOLEANS = (
    "EQ", "NEQ", "GT", "GTE", "LT", "LTE", "NullSafeEQ", "NullSafeNEQ", "Is", "And", "Or", "Not",
    "Between", "In", "Escape", "IsNan", "IsInf", "Boolean",
)
_SEARCHES = ("Like", "ILike", "Glob", "Contains", "StartsWith", "EndsWith", "StrPosition")
_SAME = ("Substring", "Trim", "Left", "Right", "Reverse", "SplitPart", "FromBase64", "BitwiseNot",
         "BitwiseLeftShift", "BitwiseRightShift", "Nullif")
_LARGEST = ("Greatest", "Least", "Coalesce", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "Xor")
_ZERO = ("Identifier", "Var", "DataType", "DataTypeParam", "JSONPath", "JSONPathKey", "JSONPathRoot",
         "JSONPathSubscript", "JSONPathWildcard")

#: node class name -> rule (see the module docstring; each allowlisted node has one: tests/test_size.py)
BY_CLASS: dict[str, Rule] = {
    **dict.fromkeys(_SCALARS, _scalar), **dict.fromkeys(_BOOLEANS, _boolean),
    **dict.fromkeys(_SAME, _this), **dict.fromkeys(_LARGEST, _all_largest),
    **dict.fromkeys(_ZERO, _fixed(0)), **dict.fromkeys(_SEARCHES, _search),
    "Column": sum_of_inputs, "Literal": _literal, "Null": _fixed(4), "Paren": _first_arg, "Try": _first_arg,
    "Tuple": _tuple, "DPipe": sum_of_inputs, "Concat": sum_of_inputs, "ConcatWs": _concat_ws, "Case": _case, "If": _if,
    "Cast": _cast, "TryCast": _cast, "Lower": _scaled(2.0), "Upper": _scaled(2.0), "Initcap": _initcap,
    "Replace": _replace, "RegexpReplace": _regexp_replace, "RegexpExtract": _extract,
    "RegexpLike": _matches, "RegexpFullMatch": _matches, "RegexpILike": _matches, "SimilarTo": _matches,
    "MD5": _fixed(32), "SHA": _fixed(40), "SHA2": _fixed(128), "Chr": _fixed(4),
    "ToBase64": _scaled(4 / 3, 4.0), "JSONExtract": _json, "JSONExtractScalar": _json,
    "Levenshtein": _pair, "TimeToStr": _time_to_str,
}


@_cheap
def _iff(node: exp.Anonymous, get: Get) -> Size:
    return _largest(node.expressions[1:], get)


#: DuckDB functions sqlglot keeps as ``Anonymous``, by lower-case name
NAMED: dict[str, Rule] = {
    **dict.fromkeys((
        "even", "strlen", "hash",
        "ord", "bit_count", "to_base", "date_part", "datepart", "ceiling", "log10", "log2",
        "yearweek", "isodow", "era", "decade", "century", "millennium",
        "epoch_ms", "epoch_us", "epoch_ns", "make_time", "make_timestamp", "to_days", "to_hours",
        "to_minutes", "to_seconds", "to_years", "to_months", "to_weeks", "to_milliseconds",
        "to_microseconds",
    ), _scalar),
    **dict.fromkeys(("isfinite", "signbit"), _boolean),
    **dict.fromkeys(("prefix", "suffix", "hamming", "jaccard", "mismatches"), _search),
    # Unicode: case mapping changes a code point's UTF-8 length by at most 3/2 (2 -> 3 bytes);
    # NFC and canonical decomposition grow text at most 3 times (UAX #15, "Stream-Safe Text")
    "lcase": _scaled(2.0), "ucase": _scaled(2.0), "strip_accents": _scaled(3.0), "nfc_normalize": _scaled(3.0),
    "iff": _iff, "ifnull": _all_largest, "nullif": _this,
    "damerau_levenshtein": _pair, "jaro_similarity": _pair, "jaro_winkler_similarity": _pair,
}

_RULE_CACHE: dict[type, Rule] = {}


def rule_of(node: exp.Expression) -> Rule | None:
    """The size rule of ``node`` (None: it has none, e.g. a function not on the allowlist)."""
    if isinstance(node, exp.Anonymous):
        return NAMED.get(str(node.name).lower())
    return rule_of_type(type(node))


def rule_of_type(cls: type[exp.Expression]) -> Rule | None:
    """The size rule of a node class: its own, else that of the nearest class it derives from."""
    if cls not in _RULE_CACHE:
        found = next((BY_CLASS[k.__name__] for k in cls.__mro__ if k.__name__ in BY_CLASS), None)
        if found is None:
            return None
        _RULE_CACHE[cls] = found
    return _RULE_CACHE[cls]
