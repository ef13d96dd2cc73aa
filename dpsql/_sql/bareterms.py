"""WHERE terms that cannot raise, written without TRY, so that DuckDB filters by them in its scan.

A term of a query's WHERE is made total before it reaches the statement (:mod:`dpsql._sql.total`):
TRY(...) around what could raise on some row. TRY also hides the term from DuckDB's filter
pushdown: ``TRY(l_shipdate >= DATE '1994-01-01')`` is evaluated row by row above the scan,
where the bare comparison is handed to the Parquet reader or the table scan, which skips whole
row groups by their min/max (TPC-H Q6: about a fifth of the statement's time).

A comparison raises only where DuckDB casts a row's value to another type. So a term is left
bare when it compares one column of a known catalog type with constants that are exactly values
of that type, and the constants are written in that type: the column is then never cast, and
the term is the comparison the query wrote (the same rows pass). The forms:

* ``x IS NULL``, ``NOT x IS NULL`` of a column;
* ``x op c`` (``=``, ``<>``, ``<``, ``<=``, ``>``, ``>=``, either side), ``x BETWEEN c AND d``,
  ``x IN (c, ...)``, where ``x`` is a column whose type the catalog gives
  (:mod:`dpsql._sql.leaftypes`), and each constant is
  * for an integer type: a whole number within the type's range,
  * for ``DECIMAL(w, s)``: a number with at most ``w - s`` digits before the point and ``s``
    after it,
  * for ``DOUBLE``: any number (DuckDB compares in DOUBLE anyway),
  * for ``DATE``: a string, or a cast of one to DATE (written ``TRY_CAST(... AS DATE)``: a string
    that is no date gives NULL, as the guarded term did),
  * for ``VARCHAR``: a string; for ``BOOLEAN``: TRUE or FALSE.

Anything else keeps its guard. Where the types are not known (Spark's statement, a name two
tables type differently, a column the rewrite made) every term keeps it.
"""

from __future__ import annotations

import re
import typing as t

from sqlglot import exp

_RANGES = {
    "TINYINT": (-(2**7), 2**7 - 1), "SMALLINT": (-(2**15), 2**15 - 1), "INTEGER": (-(2**31), 2**31 - 1),
    "BIGINT": (-(2**63), 2**63 - 1), "HUGEINT": (-(2**127), 2**127 - 1),
    "UTINYINT": (0, 2**8 - 1), "USMALLINT": (0, 2**16 - 1), "UINTEGER": (0, 2**32 - 1),
    "UBIGINT": (0, 2**64 - 1), "UHUGEINT": (0, 2**128 - 1),
}
_DECIMAL = re.compile(r"DECIMAL\((\d+),\s*(\d+)\)")
_PLAIN_NUMBER = re.compile(r"(\d*)(?:\.(\d*))?")
_COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)


def bare(term: exp.Expression, types: t.Mapping[str, str] | None) -> exp.Expression | None:
    """``term`` written so that it cannot raise without TRY, or None if it keeps its guard.

    >>> from sqlglot import parse_one
    >>> types = {"d": "DATE", "q": "DECIMAL(15,2)", "n": "INTEGER", "s": "VARCHAR"}
    >>> def show(sql):
    ...     out = bare(parse_one(sql, read="duckdb"), types)
    ...     return out.sql("duckdb") if out is not None else None
    >>> show("d >= CAST('1994-01-01' AS DATE)")
    "d >= TRY_CAST('1994-01-01' AS DATE)"
    >>> show("q BETWEEN 0.05 AND 0.07")
    'q BETWEEN CAST(0.05 AS DECIMAL(15, 2)) AND CAST(0.07 AS DECIMAL(15, 2))'
    >>> show("24 > q"), show("n IN (1, -2)"), show("s <> 'x'"), show("NOT q IS NULL")
    ('CAST(24 AS DECIMAL(15, 2)) > q', 'n IN (CAST(1 AS INT), CAST(-2 AS INT))', "s <> 'x'", 'NOT q IS NULL')
    >>> show("q < 0.051"), show("n < 1.5"), show("n < 3000000000"), show("s = 1"), show("q < n"), show("z = 1")
    (None, None, None, None, None, None)
    >>> bare(parse_one("__f1.__e = 5"), {"__e": "INTEGER"}) is None
    True
    """
    if not types:
        return None
    node = term.this if isinstance(term, exp.Not) else term
    if isinstance(node, exp.Is) and isinstance(node.this, exp.Column) and isinstance(node.expression, exp.Null):
        return term.copy()
    if isinstance(term, _COMPARISONS):
        sides = [term.this, term.expression]
    elif isinstance(term, exp.Between):
        sides = [term.this, term.args.get("low"), term.args.get("high")]
    elif isinstance(term, exp.In) and not term.args.get("query") and not term.args.get("unnest"):
        sides = [term.this, *term.expressions]
    else:
        return None
    columns = [s for s in sides if isinstance(s, exp.Column)]
    if len(columns) != 1 or any(s is None for s in sides):
        return None
    name = columns[0].name.lower()
    # a reserved name is one the rewrite made (a flat map's element ``__f1.__e``): never a
    # catalog column, whatever a table's own column of that name is typed
    dtype = types.get(name) if not name.startswith("__") else None
    if dtype is None:
        return None
    out = term.copy()
    for side in [s for s in _operands(out) if not isinstance(s, exp.Column)]:
        constant = _constant(side, " ".join(dtype.upper().split()))
        if constant is None:
            return None
        side.replace(constant)
    return out


def _operands(term: exp.Expression) -> list[exp.Expression]:
    if isinstance(term, exp.Between):
        return [term.this, term.args["low"], term.args["high"]]
    if isinstance(term, exp.In):
        return [term.this, *term.expressions]
    return [term.this, term.expression]


def _constant(node: exp.Expression, dtype: str) -> exp.Expression | None:
    """``node`` as a constant of type ``dtype``, exactly, or None."""
    if dtype in ("VARCHAR", "BOOLEAN"):
        ok = isinstance(node, exp.Boolean) if dtype == "BOOLEAN" else isinstance(node, exp.Literal) and node.is_string
        return node.copy() if ok else None
    if dtype == "DATE":
        if isinstance(node, (exp.Cast, exp.TryCast)) and node.to.is_type(exp.DataType.Type.DATE):
            node = node.this
        if isinstance(node, exp.Literal) and node.is_string:
            return exp.TryCast(this=node.copy(), to=exp.DataType.build("DATE"))
        return None
    text = _number(node)
    if text is None:
        return None
    cast = exp.Cast(this=exp.Literal.number(text), to=exp.DataType.build(dtype, dialect="duckdb"))
    if dtype == "DOUBLE":
        return cast
    digits = _PLAIN_NUMBER.fullmatch(text.lstrip("-"))
    if digits is None:
        return None
    whole, fraction = digits.group(1).lstrip("0"), (digits.group(2) or "").rstrip("0")
    if dtype in _RANGES:
        low, high = _RANGES[dtype]
        return cast if not fraction and low <= int(text.split(".")[0] or 0) <= high else None
    decimal = _DECIMAL.fullmatch(dtype)
    if decimal is None:
        return None
    width, scale = int(decimal.group(1)), int(decimal.group(2))
    return cast if len(whole) <= width - scale and len(fraction) <= scale else None


def _number(node: exp.Expression) -> str | None:
    """The text of a number literal, with its sign (``-2`` is ``Neg(2)``); None otherwise."""
    sign = ""
    if isinstance(node, exp.Neg):
        sign, node = "-", node.this
    if isinstance(node, exp.Literal) and not node.is_string and re.fullmatch(r"[\d.eE+-]+", node.this):
        return sign + node.this
    return None
