"""How long a value computed from a row can be, and how much work computing it takes: bounds
known before anything is read.

A function whose output can be much longer than its input gives a timing oracle: under
``CASE WHEN <predicate> THEN <long> ELSE 'b' END``, nested ``replace`` calls turn twenty bytes
into megabytes only on the rows that match, and the query's running time counts them. So every
expression over private rows gets a *size model*, computed in the same pass as the allowlist
check (:func:`dpsql.sql.allow.check_rowwise`):

* each node's output is at most ``a·L + b`` bytes, where ``L`` is the length of the longest
  value the row holds (a column's text), and ``a`` and ``b`` follow from the query alone: a
  literal is ``b = len(literal)``, ``x || y`` adds, ``CASE`` takes the largest branch,
  ``replace(s, x, y)`` multiplies ``s`` by ``max(1, len(y) / max(len(x), 1))``, a fixed-width
  value (a number, a date, a hash) is at most :data:`SCALAR` bytes of text, and so on (the
  table :data:`_RULES`);
* a value past :data:`MAX_FACTOR` ``·L +`` :data:`MAX_ADDED` is refused, and so is an
  expression whose nodes together build more than :data:`MAX_WORK_FACTOR` ``·L +``
  :data:`MAX_WORK_ADDED` bytes of text per row (many copies of a long value). Choosing among
  values (``CASE``, ``COALESCE``), fixed-width values and literals build nothing;
* a replacement whose length depends on a row (``replace(s, 'a', s)``) has no such bound and
  is refused; a regular expression's pattern must not be computed from a row (it would be
  compiled for every row that reaches it); an edit distance, whose time grows with the product
  of its arguments' lengths, takes arguments of at most :data:`PAIR_FACTOR` ``·L +``
  :data:`PAIR_ADDED` bytes.

Matching itself is linear: DuckDB runs regular expressions (``regexp_*``, ``SIMILAR TO``) on
RE2, which never backtracks, and ``LIKE``, ``GLOB`` and ``contains``/``strpos`` measured linear
on inputs built to make a backtracking matcher quadratic (tests/test_oracles.py). Numeric
functions run in constant time whatever their value: ``factorial`` past 33 and ``pow`` past the
range of DOUBLE overflow (NULL under ``TRY``), ``gcd``/``lcm`` work on 64- or 128-bit integers.

The bound of a column that a CTE or subquery computed is that of its expression (kept in the
expression's ``meta``), so nesting through the FROM chain multiplies as nesting in place does.
"""

from __future__ import annotations

import typing as t

from sqlglot import exp

from dpsql.errors import PrivacyError

#: a value may be at most this many times as long as the longest value the row holds ...
MAX_FACTOR = 64
#: ... plus this many bytes
MAX_ADDED = 16_384
#: all nodes of one expression together: at most this many times the longest value ...
MAX_WORK_FACTOR = 4_096
#: ... plus this many bytes, per row
MAX_WORK_ADDED = 32_768
#: the work of a byte that a regular expression replacement reads or writes
REGEX_WORK = 16
#: an argument of an edit distance (quadratic time) may be at most this many times L ...
PAIR_FACTOR = 4
#: ... plus this many bytes
PAIR_ADDED = 256
#: the longest text of any fixed-width value (a HUGEINT written as a BIT string)
SCALAR = 128
#: the key of an expression's bound in its ``meta`` (a CTE's column, once inlined)
KEY = "dpsql_size"


class Bound(t.NamedTuple):
    """Output length ``a·L + b`` bytes; the work of the whole subtree ``wa·L + wb``; whether
    the value depends on a row."""

    a: float
    b: float
    wa: float
    wb: float
    row: bool


ZERO = Bound(0.0, 0.0, 0.0, 0.0, False)
COLUMN = Bound(1.0, 0.0, 0.0, 0.0, True)
#: a bound ``IN (SELECT ...)`` filter, while the expression holding it is checked
FILTER = Bound(0.0, 5.0, 0.0, 0.0, True)

Size = tuple[float, float]
Get = t.Callable[[t.Any], Bound]


def call_name(node: exp.Expression) -> str:
    """How a message names a node: the function's DuckDB name, or the node type."""
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    if isinstance(node, exp.Func):
        return node.sql_name().lower()
    return type(node).__name__.upper()


def _length(a: float, b: float) -> str:
    """``a·L + b`` in words."""
    if not a:
        return f"{b:,.0f} bytes"
    return f"{a:g}× the row's longest value" + (f" plus {b:,.0f} bytes" if b else "")


def _what(node: exp.Expression) -> str:
    if isinstance(node, exp.DPipe):
        return "||"
    if isinstance(node, exp.Literal):
        return "a literal"
    if isinstance(node, (exp.Func, exp.Anonymous)) and not isinstance(node, (exp.Case, exp.Cast)):
        spelled = node.sql(dialect="duckdb").split("(", 1)[0].strip().lower()  # regexp_like: regexp_matches
        return f"{spelled if spelled.isidentifier() else call_name(node)}()"
    return call_name(node)


class _Refused(Exception):
    """A rule's refusal; :func:`measure` adds where and over which table."""


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


def _sum(node: t.Any, get: Get) -> Size:
    a = b = 0.0
    for child in node.iter_expressions():
        c = get(child)
        a, b = a + c.a, b + c.b
    return a, b


def _tuple(node: t.Any, get: Get) -> Size:
    return _sum(node, get)


_cheap(_tuple)


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


def _constant_length(node: t.Any, part: t.Any, role: str, get: Get) -> float:
    """The most bytes ``part`` can hold, which must not depend on a row's values."""
    c = get(part)
    if c.a:
        raise _Refused(f"its {role} must be a literal: one whose length depends on a row would multiply "
                       "the length of each value")
    return c.b


def _replace(node: exp.Replace, get: Get) -> Size:
    new = _constant_length(node, node.args.get("replacement"), "replacement", get)
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
    r = _constant_length(node, rep, "replacement", get)
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
        raise _Refused("its pattern must be a literal, not computed from a row: a pattern is compiled "
                       "for every row that reaches it, and that time would show which rows do")


@_cheap
def _reads(node: t.Any, get: Get) -> tuple[float, float]:
    """The bytes a search reads: its arguments, once."""
    wa = wb = 0.0
    for child in node.iter_expressions():
        c = get(child)
        wa, wb = wa + c.a, wb + c.b
    return wa, wb


def _search(node: t.Any, get: Get) -> Work:
    """LIKE, GLOB, contains, hamming, ...: a fixed-width answer after one pass over the
    arguments (DuckDB's matchers measured linear, also on inputs that make backtracking
    quadratic)."""
    wa, wb = _reads(node, get)
    return 0.0, 5.0 if isinstance(node, exp.Predicate) else float(SCALAR), wa, wb


def _matches(node: t.Any, get: Get) -> Work:
    _constant_pattern(node, node.expression, get)
    return _search(node, get)


def _extract(node: t.Any, get: Get) -> Work:
    _constant_pattern(node, node.expression, get)
    a, b = _this(node, get)
    wa, wb = _reads(node, get)
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
            raise _Refused(
                f"its time grows with the product of its arguments' lengths, and one could be "
                f"{_length(c.a, c.b)} (at most {PAIR_FACTOR}× plus "
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
    "Column": _sum, "Literal": _literal, "Null": _fixed(4), "Paren": _first_arg, "Try": _first_arg,
    "Tuple": _tuple, "DPipe": _sum, "Concat": _sum, "ConcatWs": _concat_ws, "Case": _case, "If": _if,
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
        "even", "gcd", "lcm", "greatest_common_divisor", "least_common_multiple", "strlen", "hash",
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


def measure(nodes: list[exp.Expression], where: str, table: str,
            column: t.Callable[[exp.Column], Bound] | None = None) -> Bound:
    """The bound of ``nodes[0]``, given all its nodes in breadth-first order (each node before
    its descendants); raises PrivacyError past a limit. ``column`` gives a column's bound (a
    CTE's column: its expression's); without it a column is one value of the row.

    One pass, children first: each node's work and row dependence are added to its parent's."""
    memo: dict[int, Bound] = {}
    below: dict[int, tuple[float, float, bool]] = {}  # the children's work and row dependence

    def get(n: t.Any) -> Bound:
        return memo.get(id(n), ZERO) if n is not None else ZERO

    for node in reversed(nodes):
        if type(node) in _NAMES:  # a column's or unit's name: no value
            continue
        known = node.meta_get(KEY)
        if known is None:
            known = _bound(node, get, column, below.pop(id(node), _NOTHING), where, table)
        memo[id(node)] = known
        if known.wa or known.wb or known.row:
            parent = id(node.parent)
            wa, wb, row = below.get(parent, _NOTHING)
            below[parent] = (wa + known.wa, wb + known.wb, row or known.row)
    return memo.get(id(nodes[0]), ZERO)


_NOTHING = (0.0, 0.0, False)
_NAMES = frozenset({exp.Identifier, exp.Var})


def _bound(node: exp.Expression, get: Get, column: t.Callable[[exp.Column], Bound] | None,
           children: tuple[float, float, bool], where: str, table: str) -> Bound:
    if isinstance(node, exp.Column):
        return column(node) if column is not None else COLUMN
    rule = rule_of(node) or _sum
    try:
        out = rule(node, get)
    except _Refused as err:
        raise PrivacyError(f"{_what(node)} in {where} of a DP query over {table}: {err}") from None
    a, b = out[0], out[1]
    wa, wb, row = children
    if len(out) == 4:
        wa, wb = wa + out[2], wb + out[3]
    elif not getattr(rule, "cheap", False):
        wa, wb = wa + a, wb + b
    if a > MAX_FACTOR or b > MAX_ADDED:
        raise PrivacyError(
            f"{_what(node)} in {where} of a DP query over {table} could make a value of {_length(a, b)}, "
            f"past dpsql's limit of {MAX_FACTOR}× plus {MAX_ADDED:,} bytes (its running time would show "
            "which rows match): nest fewer functions that lengthen text, or use shorter literals"
        )
    if wa > MAX_WORK_FACTOR or wb > MAX_WORK_ADDED:
        raise PrivacyError(
            f"the expression in {where} of a DP query over {table} could build {_length(wa, wb)} of text "
            f"per row, past dpsql's limit of {MAX_WORK_FACTOR:,}× plus {MAX_WORK_ADDED:,} bytes (its running "
            "time would show which rows match): use fewer or shorter text values"
        )
    return Bound(a, b, wa, wb, row)


def inlined(expr: exp.Expression, where: str, table: str) -> Bound:
    """The bound of an expression a lower level of the FROM chain computed (a CTE's column),
    over the base table's columns: the one its check recorded, else measured now and kept."""
    known = expr.meta_get(KEY)
    if known is not None:
        return known
    if isinstance(expr, exp.Column):
        return COLUMN
    nodes = list(expr.walk(prune=lambda n: n is not expr and (n.meta_get(KEY) is not None
                                                              or isinstance(n, exp.Query))))
    found = measure(nodes, where, table)
    expr.meta[KEY] = found
    return found
