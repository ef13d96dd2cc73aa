"""Forms that cannot raise: the rules that keep DuckDB's ``TRY`` from ever falling back.

:func:`dpsql._sql.total.total` wraps every expression over private rows in ``TRY(...)``. When any
row of a vector raises inside ``TRY``, DuckDB evaluates that vector again row by row, so the run
time grows with the number of rows that fail, and counts the rows of any predicate. The rules
here rewrite each allowlisted call that can raise (the table is measured by ``tests/raising.py``
over a corpus of edge values; ``RAISES`` below names each one and the inputs that make it raise)
into a form that returns NULL where DuckDB would raise and DuckDB's own value elsewhere:

* a ``try_`` variant where DuckDB has one (``strptime`` becomes ``try_strptime``);
* a ``CASE`` guard over the argument's domain (``json_extract`` only where ``json_valid``,
  ``chr`` only for code points, ``factorial`` only in 0..33, ``to_seconds`` only inside the
  interval's range): DuckDB evaluates a CASE branch only on the rows its condition selects, so
  the guarded call never sees a bad row;
* integer arithmetic (``+ - * // %``, unary ``-``, ``abs``) guarded by a range check of the
  result in DOUBLE against the range of DuckDB's own result type (``typeof(...)``, which DuckDB
  folds to a constant when it plans the statement). The check's DOUBLE values are computed
  from the chain's leaves, so a chain of n operations grows by O(n²) nodes, not 2ⁿ; a result
  within 10^-12 of a 64-bit, 128-bit or DECIMAL(38, s) type's limit is NULL (DOUBLE rounding).

``TRY`` stays around the result as the last safety net. Spark's statement takes the guards back
out (:func:`unguarded`): it has its own total forms and no row-by-row fallback. Every rule is a small function of a
sqlglot tree, built from a template whose ``__a``/``__b``/``__r`` columns are replaced.
"""

from __future__ import annotations

import contextvars
import functools
import typing as t

import sqlglot
from sqlglot import exp

from dpsql._sql.rangecheck import Fits, checked_range

#: What raises in DuckDB 2.0 over the corpus of ``tests/raising.py``, with the class of input
#: that makes it raise, and the form of this module that cannot (tests/test_nonraising.py).
RAISES: dict[str, tuple[str, str]] = {
    "Add": ("an integer or DECIMAL(38, s) result past its type's range", "range guard"),
    "Sub": ("an integer or DECIMAL(38, s) result past its type's range", "range guard"),
    "Mul": ("an integer or DECIMAL(38, s) result past its type's range", "range guard"),
    "DateArith": ("a day past DATE's range (d + n, d - n)", "range guard on the day number"),
    "Add2": ("a TIMESTAMP past its range (ts + INTERVAL, d + INTERVAL), INTERVAL parts past INTEGER",
             "range guard in days"),
    "Interval": ("as Add2 (d + INTERVAL 1 DAY past TIMESTAMP's range)", "range guard in days"),
    "TsOrDsAdd": ("as Add2 (ts + INTERVAL 1 DAY at the end of TIMESTAMP's range)", "range guard in days"),
    "DateAdd": ("date_add(d, v) of an INTERVAL column, which sqlglot writes INTERVAL (v) DAY: every row",
                "d + v where v is an interval, else d + to_days(v)"),
    "Neg": ("the minimum of a signed integer type, any unsigned value but 0", "range guard"),
    "Abs": ("the minimum of a signed integer type", "range guard"),
    "IntDiv": ("a zero divisor (also in DOUBLE); the minimum // -1", "divisor and range guard"),
    "Mod": ("a zero divisor (also in DOUBLE)", "divisor guard"),
    "BitwiseLeftShift": ("a negative value or count, a count past the width, a result past the range",
                         "sign, count and range guard"),
    "StrToTime": ("text that does not match the format", "try_strptime"),
    "JSONExtract": ("text that is not JSON ('' included)", "json_valid guard"),
    "JSONExtractScalar": ("text that is not JSON ('' included)", "json_valid guard"),
    "FromBase64": ("text that is not base64 (length, padding, bytes)", "base64 pattern guard"),
    "Chr": ("a negative number, a surrogate or past U+10FFFF", "code point guard"),
    "Factorial": ("a negative number or one past 33", "0..33 guard"),
    "Substring": ("an offset or length past 2^32", "range guard"),
    "Left": ("a length past 2^32", "range guard"),
    "to_base": ("a negative number", "sign guard"),
    "TimestampTrunc": ("a date or timestamp in the first or last year of TIMESTAMP's range", "year guard"),
    "DateFromParts": ("a year, month or day out of range (Feb 30 included)", "calendar guard"),
    "TimestampFromParts": ("a year, month, day, hour, minute or second out of range", "calendar guard"),
    "UnixToTime": ("epoch seconds past TIMESTAMP's range", "range guard"),
    "epoch_ms": ("milliseconds past TIMESTAMP's range", "range guard"),
    "make_timestamp": ("microseconds past TIMESTAMP's range", "range guard"),
    "hamming": ("'' or strings of different lengths", "length guard"),
    "mismatches": ("'' or strings of different lengths", "length guard"),
    "jaccard": ("''", "length guard"),
    "epoch_us": ("a DATE past TIMESTAMP's range", "year guard"),
    "epoch_ns": ("a date or timestamp outside 1677-2262", "year guard"),
    **{f"to_{unit}": ("a count past INTERVAL's range (or past INTEGER)", "range guard") for unit in (
        "seconds", "milliseconds", "minutes", "hours", "weeks", "years")},
}
def _older() -> bool:
    """Whether the DuckDB in use is older than 2.0, whose math functions raise where 2.0's give
    NaN or an infinity (``ln(0)``, ``acos(2)``, ``cos('inf')``), ``TINYINT`` min % -1 overflows,
    ``yearweek`` raises past DATE's range and ``hamming`` compares bytes, not characters."""
    import duckdb

    return int(duckdb.__version__.split(".")[0]) < 2


OLDER = _older()
#: What raises only before DuckDB 2.0, with its form here (used only there: 2.0's values are kept).
RAISES_BEFORE_2: dict[str, tuple[str, str]] = {
    **{k: ("a number outside the function's domain (log of 0, acos of 2)", "domain guard")
       for k in ("Sqrt", "Ln", "Log", "log10", "log2", "Acos", "Asin")},
    **{k: ("an infinite or NaN angle (cot: also 0)", "finite guard") for k in ("Cos", "Sin", "Tan", "Cot")},
    "Mod": ("a zero divisor; the minimum % -1", "divisor guard; x % -1 as x % 1"),
    "yearweek": ("a date past DATE's range", "year guard"),
    "hamming": ("'' or strings of different byte lengths", "length guard"),
    "mismatches": ("'' or strings of different byte lengths", "length guard"),
}
if OLDER:  # date_trunc at TIMESTAMP's ends raises only from 2.0 on
    RAISES = {k: v for k, v in {**RAISES, **RAISES_BEFORE_2}.items() if k != "TimestampTrunc"}

#: Calls that raise for which dpsql has no total form: refused over private rows
#: (:data:`dpsql._sql.allow._WHY`).
REFUSED: dict[str, str] = {
    "gcd": "the minimum of BIGINT or HUGEINT", "greatest_common_divisor": "as gcd",
    "lcm": "a result past BIGINT; the minimum of BIGINT", "least_common_multiple": "as lcm",
}
#: What stays open (docs/choices.md): TRY still makes it total, at the cost of its fallback.
OPEN: dict[str, str] = {}

#: The largest count of each interval unit DuckDB accepts (its range is ±2^63 µs, months and days in INTEGER).
_INTERVAL_LIMITS = {
    "seconds": "9223372036854.0", "milliseconds": "9223372036854775.0", "minutes": "153722867280.0",
    "hours": "2562047788.0", "days": "2147483647.0", "months": "2147483647.0", "weeks": "306783378.0",
    "years": "178956970.0",
}

_WIDTH = ("CASE typeof(__t) WHEN 'TINYINT' THEN 7 WHEN 'SMALLINT' THEN 15 WHEN 'INTEGER' THEN 31"
          " WHEN 'BIGINT' THEN 63 WHEN 'HUGEINT' THEN 127 WHEN 'UTINYINT' THEN 7 WHEN 'USMALLINT' THEN 15"
          " WHEN 'UINTEGER' THEN 31 WHEN 'UBIGINT' THEN 63 WHEN 'UHUGEINT' THEN 127 ELSE 1e9 END")



_TEMPLATES: dict[str, str] = {
    "json": "CASE WHEN json_valid(__a) THEN __r END",
    "base64": "CASE WHEN regexp_full_match(__a, '([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?') "
              "THEN __r END",
    "chr": "CASE WHEN TRY_CAST(__a AS BIGINT) BETWEEN 0 AND 1114111 AND NOT TRY_CAST(__a AS BIGINT) "
           "BETWEEN 55296 AND 57343 THEN __r END",
    "factorial": "CASE WHEN TRY_CAST(__a AS DOUBLE) BETWEEN 0 AND 33 THEN __r END",
    "abs_below": "CASE WHEN abs(TRY_CAST(__a AS DOUBLE)) <= __b THEN __r END",
    "two_below": "CASE WHEN abs(TRY_CAST(__a AS DOUBLE)) <= 4294967295 AND abs(TRY_CAST(__b AS DOUBLE)) <= 4294967295 "
                 "THEN __r END",
    "nonnegative": "CASE WHEN TRY_CAST(__a AS DOUBLE) >= 0 THEN __r END",
    "trunc": "CASE WHEN year(__a) <= -290308 OR year(__a) >= 294247 THEN NULL ELSE __r END",
    "make_date": "CASE WHEN TRY_CAST(__a AS DOUBLE) BETWEEN -5877640 AND 5877640 AND TRY_CAST(__b AS DOUBLE) "
                 "BETWEEN 1 AND 12 THEN CASE WHEN TRY_CAST(__c AS DOUBLE) BETWEEN 1 AND "
                 "day(last_day(make_date(TRY_CAST(__a AS INTEGER), TRY_CAST(__b AS INTEGER), 1))) THEN __r END END",
    "clock": "CASE WHEN TRY_CAST(__a AS DOUBLE) BETWEEN 0 AND 24 AND TRY_CAST(__b AS DOUBLE) BETWEEN 0 AND 59 "
             "AND TRY_CAST(__c AS DOUBLE) >= 0 AND TRY_CAST(__c AS DOUBLE) < 60 THEN __r END",
    "same_length": "CASE WHEN length(__a) > 0 AND length(__a) = length(__b) THEN __r END",
    "both_long": "CASE WHEN length(__a) > 0 AND length(__b) > 0 THEN __r END",
    "years": "CASE WHEN year(__a) BETWEEN __b AND __c THEN __r END",
    "micros": "CASE WHEN TRY_CAST(__a AS HUGEINT) BETWEEN -9223372022400000000 AND 9223372036854775806 THEN __r END",
    "divisor": "CASE WHEN __b <> 0 THEN __r END",
    "fits": "CASE WHEN __f THEN __r END",
    # a literal fragment with the constant _WIDTH in it, parsed once by _template
    "shift": f"CASE WHEN TRY_CAST(__b AS DOUBLE) >= 0 AND TRY_CAST(__b AS DOUBLE) <= {_WIDTH} "
             "AND COALESCE(TRY_CAST(__a AS DOUBLE) >= 0, true) THEN __r END",
    "leaf": "COALESCE(__a, __b - DATE '1970-01-01', epoch(__c) / 86400.0)",
    "positive": "CASE WHEN TRY_CAST(__a AS DOUBLE) > 0 THEN __r END",
    "at_least_0": "CASE WHEN TRY_CAST(__a AS DOUBLE) >= 0 THEN __r END",
    "log_base": "CASE WHEN TRY_CAST(__a AS DOUBLE) > 0 AND TRY_CAST(__a AS DOUBLE) <> 1 "
                "AND TRY_CAST(__b AS DOUBLE) > 0 THEN __r END",
    "unit": "CASE WHEN TRY_CAST(__a AS DOUBLE) BETWEEN -1 AND 1 THEN __r END",
    "finite": "CASE WHEN isfinite(TRY_CAST(__a AS DOUBLE)) THEN __r END",
    "finite_nonzero": "CASE WHEN isfinite(TRY_CAST(__a AS DOUBLE)) AND TRY_CAST(__a AS DOUBLE) <> 0 THEN __r END",
    "minus_one": "CASE WHEN __b = -1 THEN 1 ELSE __b END",
    "same_bytes": "CASE WHEN length(__a) > 0 AND length(__a) = length(__b) AND strlen(__a) = strlen(__b) THEN __r END",
}


@functools.cache
def _template(name: str) -> exp.Expression:
    return sqlglot.parse_one(_TEMPLATES[name], read="duckdb")


def _fill(name: str, fresh: tuple[str, ...] = ("r", "f"), **parts: exp.Expression) -> exp.Expression:
    """The template ``name`` with its ``__a``, ``__b``, ... columns replaced by ``parts`` (``__t``
    is the expression as written, read only by ``typeof``, which DuckDB folds to a constant when
    it plans the statement, so it is never evaluated). A part named in ``fresh`` was built for
    this call alone: its first use takes it as it is, later ones copy it (copying a guarded
    argument at every level of a nested expression made planning quadratic in its size).

    >>> _fill("json", a=exp.column("s"), r=exp.column("v")).sql("duckdb")
    'CASE WHEN JSON_VALID(s) THEN v END'
    """
    unused = set(fresh)

    def swap(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Column) and not n.table and n.name.startswith("__") and n.name[2:] in parts:
            key = n.name[2:]
            if key in unused:
                unused.discard(key)
                return parts[key]
            return parts[key].copy()
        return n

    return _template(name).copy().transform(swap, copy=False)


#: id of a node of the expression being guarded → its DuckDB type, where dpsql._sql.leaftypes
#: could tell (set by dpsql._sql.totalforms around one arithmetic region).
KINDS: contextvars.ContextVar[t.Mapping[int, str] | None] = contextvars.ContextVar("kinds", default=None)


def _kind(node: exp.Expression) -> str | None:
    kinds = KINDS.get()
    return kinds.get(id(node)) if kinds else None


_TEMPORAL = ("DATE", "TIMESTAMP", "TIMESTAMP WITH TIME ZONE", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS")

ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.IntDiv, exp.Mod, exp.BitwiseLeftShift)
_DOUBLE = exp.DataType.build("DOUBLE")
_DATE = exp.DataType.build("DATE")


def _pow2(count: exp.Expression) -> exp.Expression:
    return exp.Pow(this=exp.Literal.number(2), expression=count)


def _shadow(raw: exp.Expression) -> exp.Expression:
    """``raw``'s value in DOUBLE, computed from the leaves of its arithmetic (each leaf read
    through its guarded form and TRY_CAST, so nothing here raises).

    >>> _shadow(sqlglot.parse_one("a + 2")).sql("duckdb")[:48]
    'COALESCE(TRY_CAST(a AS DOUBLE), TRY_CAST(a AS DA'
    """
    if isinstance(raw, exp.Paren):
        return exp.Paren(this=_shadow(raw.this))
    if isinstance(raw, (exp.Add, exp.Sub, exp.Mul)):
        return type(raw)(this=_shadow(raw.this), expression=_shadow(raw.expression))
    if isinstance(raw, (exp.IntDiv, exp.Mod)):  # a quotient bounds both well enough for a range check
        return exp.Div(this=_shadow(raw.this), expression=_shadow(raw.expression))
    if isinstance(raw, exp.BitwiseLeftShift):
        return exp.Mul(this=exp.Paren(this=_shadow(raw.this)), expression=_pow2(_shadow(raw.expression)))
    if isinstance(raw, (exp.Neg, exp.Abs)):
        return type(raw)(this=_shadow(raw.this))
    return _leaf(raw, _DOUBLE)


def _leaf(raw: exp.Expression, to: exp.DataType) -> exp.Expression:
    """A leaf's value as a number: itself, a date's or timestamp's day number, or an interval's
    length in days (DATE ± n, DATE - DATE, TIMESTAMP ± INTERVAL, INTERVAL ± INTERVAL).

    >>> _leaf(exp.column("d"), _DOUBLE).sql("duckdb")
    "COALESCE(TRY_CAST(d AS DOUBLE), TRY_CAST(d AS DATE) - CAST('1970-01-01' AS DATE), EPOCH(TRY_CAST(d AS INTERVAL)) / 86400.0)"
    """
    kind = _kind(raw)
    value = raw.copy()  # a column, a constant or a bound value (dpsql._sql.totalforms): nothing to guard
    if isinstance(value, exp.Literal) and not value.is_string or kind is not None and kind not in (*_TEMPORAL, "INTERVAL"):
        return exp.TryCast(this=value, to=to.copy())
    if kind == "INTERVAL":  # in parentheses: sqlglot prints nested operators without them
        value = exp.TryCast(this=value, to=exp.DataType.build("INTERVAL"))  # binds whatever it is
        return exp.Paren(this=exp.Div(this=exp.Anonymous(this="epoch", expressions=[value]),
                                      expression=exp.Literal.number("86400.0")))
    if kind is not None:
        return exp.Paren(this=exp.Sub(this=exp.TryCast(this=value, to=_DATE.copy()),
                                      expression=exp.cast(exp.Literal.string("1970-01-01"), "DATE")))
    return _fill("leaf", ("a", "b", "c"), a=exp.TryCast(this=value, to=to.copy()),
                 b=exp.TryCast(this=value.copy(), to=_DATE.copy()),
                 c=exp.TryCast(this=value.copy(), to=exp.DataType.build("INTERVAL")))


def _nonzero(node: exp.Expression) -> bool:
    """Whether ``node`` is a number literal other than 0 (a divisor that needs no guard).

    >>> _nonzero(exp.Literal.number(100)), _nonzero(exp.Literal.number("0.0")), _nonzero(exp.column("b"))
    (True, False, False)
    """
    if not (isinstance(node, exp.Literal) and not node.is_string):
        return False
    try:
        return float(node.this) != 0
    except ValueError:
        return False


def arithmetic(raw: exp.Expression, new: exp.Expression) -> exp.Expression:
    """``new`` (``raw`` with guarded children) where its value fits its type, else NULL.

    >>> arithmetic(sqlglot.parse_one("a + 1"), sqlglot.parse_one("a + 1")).sql("duckdb")[:40]
    "CASE WHEN CASE WHEN TYPEOF(a + 1) IN ('T"
    """
    if raw.find(exp.Column) is None:  # a constant: DuckDB folds it when it plans, before any row
        return new
    if isinstance(raw, exp.Mod):  # |a % b| < |b|: only a zero divisor raises (before 2.0, min % -1 too)
        if OLDER and not (_nonzero(raw.expression) and raw.expression.this not in ("-1", "-1.0")):
            new = exp.Mod(this=new.this, expression=exp.Paren(this=_fill("minus_one", b=new.expression)))
        return new if _nonzero(raw.expression) else _fill("divisor", b=exp.Paren(this=_shadow(raw.expression)), r=new)
    kind = _kind(raw)
    value = exp.null() if kind is not None and checked_range(kind) is None else exp.Paren(this=_shadow(raw))
    check = Fits(this=value, type=raw.copy(), kind=exp.Literal.string(kind) if kind is not None else None)
    out = _fill("fits", f=check, r=new)
    if isinstance(raw, exp.IntDiv):
        return _fill("divisor", ("b", "r"), b=exp.Paren(this=_shadow(raw.expression)), r=out)
    if isinstance(raw, exp.BitwiseLeftShift):
        return _fill("shift", a=exp.Paren(this=_shadow(raw.this)), b=exp.Paren(this=_shadow(raw.expression)),
                     r=out, t=raw)
    return out


def _strptime(new: exp.StrToTime) -> exp.Expression:
    """``strptime(x, f)`` as ``try_strptime(x, f)`` (DuckDB's own form that returns NULL).

    >>> _strptime(sqlglot.parse_one("strptime(s, '%Y')", read="duckdb")).sql("duckdb")
    "TRY_STRPTIME(s, '%Y')"
    """
    fmt = new.args["format"]
    if isinstance(new, exp.StrToDate):  # DuckDB's form is CAST(strptime(...) AS DATE)
        return exp.Cast(this=exp.Anonymous(this="try_strptime", expressions=[new.this, fmt]),
                        to=exp.DataType.build("DATE"))
    return exp.Anonymous(this="try_strptime", expressions=[new.this, fmt])


def _args(node: exp.Expression) -> list[exp.Expression]:
    """A call's arguments in order (sqlglot keeps some by name)."""
    if isinstance(node, exp.Anonymous):
        return list(node.expressions)
    return [v for v in node.args.values() if isinstance(v, exp.Expression)] + list(node.expressions)


def _named(name: str, new: exp.Expression) -> exp.Expression | None:
    """The rule of an anonymous call, if it has one."""
    args = new.expressions
    if name.startswith("to_") and name[3:] in _INTERVAL_LIMITS and args:
        return _fill("abs_below", a=args[0], b=exp.Literal.number(_INTERVAL_LIMITS[name[3:]]), r=new)
    if name == "to_base" and args:
        return _fill("nonnegative", a=args[0], r=new)
    if name == "make_time" and len(args) == 3:
        return _fill("clock", a=args[0], b=args[1], c=args[2], r=new)
    if name in ("hamming", "mismatches") and len(args) == 2:
        return _fill("same_length", a=args[0], b=args[1], r=new)
    if name == "jaccard" and len(args) == 2:
        return _fill("both_long", a=args[0], b=args[1], r=new)
    if name in ("epoch_us", "epoch_ns") and args:
        lo, hi = (-290307, 294246) if name == "epoch_us" else (1678, 2261)
        return _fill("years", a=args[0], b=exp.Literal.number(lo), c=exp.Literal.number(hi), r=new)
    if name == "make_timestamp" and len(args) == 1:
        return _fill("micros", a=args[0], r=new)
    if name == "make_timestamp" and len(args) == 6:
        return _fill("make_date", a=args[0], b=args[1], c=args[2],
                     r=_fill("clock", a=args[3], b=args[4], c=args[5], r=new))
    return None


#: Before DuckDB 2.0: each math function's domain guard (:data:`RAISES_BEFORE_2`).
_DOMAINS: dict[type[exp.Expression], str] = {
    exp.Sqrt: "at_least_0", exp.Ln: "positive", exp.Acos: "unit", exp.Asin: "unit",
    exp.Cos: "finite", exp.Sin: "finite", exp.Tan: "finite", exp.Cot: "finite_nonzero",
}


def _older_rule(raw: exp.Expression, new: exp.Expression) -> exp.Expression | None:
    """The rule of a call that raises only before DuckDB 2.0, if ``raw`` is one.

    >>> _older_rule(sqlglot.parse_one("log(2, x)"), sqlglot.parse_one("log(2, x)")).sql("duckdb")[:40]
    'CASE WHEN TRY_CAST(2 AS DOUBLE) > 0 AND '
    """
    if isinstance(raw, exp.Log):
        if new.args.get("expression") is None:
            return _fill("positive", a=new.this, r=new)
        return _fill("log_base", a=new.this, b=new.expression, r=new)
    template = _DOMAINS.get(type(raw))
    if template is not None:
        return _fill(template, a=new.this, r=new)
    if isinstance(raw, exp.Anonymous) and raw.name.lower() == "yearweek" and new.expressions:
        return _fill("years", a=new.expressions[0], b=exp.Literal.number(-5877640),
                     c=exp.Literal.number(5881579), r=new)
    if isinstance(raw, exp.Anonymous) and raw.name.lower() in ("hamming", "mismatches") and len(new.expressions) == 2:
        return _fill("same_bytes", a=new.expressions[0], b=new.expressions[1], r=new)
    return None


def _one(raw: exp.Expression, new: exp.Expression) -> exp.Expression:
    """The rule for one node (``new`` is ``raw`` with guarded children)."""
    if OLDER:
        older = _older_rule(raw, new)
        if older is not None:
            return older
    if isinstance(raw, (*ARITHMETIC, exp.Neg, exp.Abs)):
        return arithmetic(raw, new)
    if isinstance(raw, (exp.StrToTime, exp.StrToDate)):
        return _strptime(t.cast(exp.StrToTime, new))
    if isinstance(raw, (exp.JSONExtract, exp.JSONExtractScalar)):
        return _fill("json", a=new.this, r=new)
    if isinstance(raw, exp.FromBase64):
        return _fill("base64", a=new.this, r=new)
    if isinstance(raw, exp.Chr):
        return _fill("chr", a=_args(new)[0], r=new)
    if isinstance(raw, exp.Factorial):
        return _fill("factorial", a=new.this, r=new)
    if isinstance(raw, (exp.Substring, exp.Left, exp.Right)):
        nums = [a for k, a in new.args.items() if k != "this" and isinstance(a, exp.Expression)]
        return _fill("two_below", a=nums[0], b=nums[-1], r=new) if nums else new
    if isinstance(raw, (exp.DateTrunc, exp.TimestampTrunc)):
        return _fill("trunc", a=new.this, r=new)
    if isinstance(raw, exp.DateFromParts):
        return _fill("make_date", a=new.args["year"], b=new.args["month"], c=new.args["day"], r=new)
    if isinstance(raw, exp.TimestampFromParts):
        a = new.args
        date = _fill("make_date", a=a["year"], b=a["month"], c=a["day"], r=new)
        return _fill("clock", a=a["hour"], b=a["min"], c=a["sec"], r=date) if a.get("hour") is not None else date
    if isinstance(raw, exp.UnixToTime):  # to_timestamp (seconds), epoch_ms, make_timestamp (µs)
        scale = new.args.get("scale")
        scale = int(scale.this) if isinstance(scale, exp.Literal) and scale.this.isdigit() else 0
        if scale == exp.UnixToTime.MICROS:
            return _fill("micros", a=new.this, r=new)
        limit = "9223372036854775.0" if scale == exp.UnixToTime.MILLIS else "9223372036854.0"
        return _fill("abs_below", a=new.this, b=exp.Literal.number(limit), r=new)
    if isinstance(raw, exp.Anonymous):
        return _named(raw.name.lower(), new) or new
    return new


rule = _one  #: the form of one node that cannot raise (``new`` is ``raw`` with guarded children)
