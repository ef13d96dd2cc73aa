"""The range check of integer, decimal and temporal arithmetic: one node, printed by DuckDB's
generator (:mod:`dpsql._sql.nonraising` places it, :mod:`dpsql._sql.totalforms` weighs it).

Without known types the check reads the result's type from ``typeof(...)``, which DuckDB folds
when it plans; with them (:mod:`dpsql._sql.leaftypes`) it is the type asserted and literal
bounds.
"""

from __future__ import annotations

import re
import typing as t

import sqlglot
from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB

from dpsql._sql.dialect import DPSQL

#: The bounds of the result's type (``typeof`` is folded to a constant when DuckDB plans, and so
#: is every CASE over it). A 64- or 128-bit integer or DECIMAL(38, s) bound is 10^-12 inside the
#: type's limit: the DOUBLE value of a chain is exact only to its rounding.
_LO = ("CASE typeof(__t) WHEN 'TINYINT' THEN -128 WHEN 'SMALLINT' THEN -32768 WHEN 'INTEGER' THEN -2147483648"
       " WHEN 'BIGINT' THEN -9.2233720368455e18 WHEN 'HUGEINT' THEN -1.7014118346044e38 WHEN 'DATE' THEN -2147483646"
       " WHEN 'UTINYINT' THEN 0 WHEN 'USMALLINT' THEN 0 WHEN 'UINTEGER' THEN 0 WHEN 'UBIGINT' THEN 0"
       " WHEN 'UHUGEINT' THEN 0"
       " ELSE -0.999999999999 * 10.0 ** (38 - TRY_CAST(regexp_extract(typeof(__t), ',(\\d+)\\)', 1) AS INTEGER)) END")
_HI = ("CASE typeof(__t) WHEN 'TINYINT' THEN 127 WHEN 'SMALLINT' THEN 32767 WHEN 'INTEGER' THEN 2147483647"
       " WHEN 'BIGINT' THEN 9.2233720368455e18 WHEN 'HUGEINT' THEN 1.7014118346044e38 WHEN 'DATE' THEN 2147483646"
       " WHEN 'UTINYINT' THEN 255 WHEN 'USMALLINT' THEN 65535 WHEN 'UINTEGER' THEN 4294967295"
       " WHEN 'UBIGINT' THEN 1.8446744073691e19 WHEN 'UHUGEINT' THEN 3.4028236692090e38"
       " ELSE 0.999999999999 * 10.0 ** (38 - TRY_CAST(regexp_extract(typeof(__t), ',(\\d+)\\)', 1) AS INTEGER)) END")
_CHECKED = ("typeof(__t) IN ('TINYINT', 'SMALLINT', 'INTEGER', 'BIGINT', 'HUGEINT', 'UTINYINT', 'USMALLINT',"
            " 'UINTEGER', 'UBIGINT', 'UHUGEINT', 'DATE') OR starts_with(typeof(__t), 'DECIMAL(38,')")
#: NULL in the DOUBLE value is a NULL leaf (or an infinite date), on which DuckDB does not raise.
#: TIMESTAMP and INTERVAL results are checked in days (an INTERVAL leaf counts by DuckDB's
#: ``epoch``, a year as 365.25 days, a month of the rest as 30; a TIMESTAMP leaf by its day):
#: 0.1% and 31 days inside TIMESTAMP's range (±106,751,991 days; the ns type's ±106,751), and an
#: INTERVAL within ±1.06e8 days, where none of its three parts (INTEGER months and days, BIGINT
#: microseconds) can have overflowed.
_INSTANTS = ("typeof(__t) IN ('TIMESTAMP', 'TIMESTAMP WITH TIME ZONE', 'TIMESTAMP_S', 'TIMESTAMP_MS', "
             "'TIMESTAMP_NS', 'INTERVAL')")
_DAYS = "CASE typeof(__t) WHEN 'TIMESTAMP_NS' THEN 106613 WHEN 'INTERVAL' THEN 106000000 ELSE 106645208 END"
# A literal fragment made of the constant pieces above (no value of a query enters it), parsed
# once into _FITS_TEXT.
_FITS = (f"CASE WHEN {_CHECKED} THEN COALESCE(__a BETWEEN {_LO} AND {_HI}, true) "
         f"WHEN {_INSTANTS} THEN COALESCE(abs(__a) <= {_DAYS}, true) ELSE true END")
#: How many times :data:`_FITS` prints its value (``__a``) and its typed expression (``__t``).
FITS_COPIES = {"this": _FITS.count("__a"), "type": _FITS.count("__t")}

class Fits(exp.Expression):
    """Whether the DOUBLE value ``this`` lies in the range of the type of ``type`` (an expression
    read only by ``typeof``, which DuckDB folds when it plans): :data:`_FITS`. One node in the
    tree whatever the text it prints, so that copying and walking a guarded expression costs
    little; printed by DuckDB's generator only (Spark's statement has no guards,
    :func:`dpsql._sql.totalforms.unguarded`)."""

    arg_types = {"this": True, "type": True, "kind": False}

    def copies(self) -> dict[str, int]:
        """How many times the value and the typed expression are printed."""
        return {"this": 1, "type": 1} if self.args.get("kind") else FITS_COPIES

    def weight(self) -> int:
        """The nodes' worth of text the check itself prints."""
        return 12 if self.args.get("kind") else 300


#: :data:`_FITS` as DuckDB text, cut at its parts (``__a`` the value, ``__t`` the typed expression).
_FITS_TEXT = re.split(r"\b(__a|__t)\b", sqlglot.parse_one(_FITS, read="duckdb").sql("duckdb"))


#: The range of each type a check is known to have (``typeof`` folded by dpsql._sql.leaftypes):
#: integers and DATE's day numbers as in :data:`_LO`/:data:`_HI`, TIMESTAMP and INTERVAL in days
#: as in :data:`_DAYS`.
_RANGES: dict[str, tuple[str, str]] = {
    "TINYINT": ("-128", "127"), "SMALLINT": ("-32768", "32767"), "INTEGER": ("-2147483648", "2147483647"),
    "BIGINT": ("-9.2233720368455e18", "9.2233720368455e18"), "HUGEINT": ("-1.7014118346044e38", "1.7014118346044e38"),
    "DATE": ("-2147483646", "2147483646"), "UTINYINT": ("0", "255"), "USMALLINT": ("0", "65535"),
    "UINTEGER": ("0", "4294967295"), "UBIGINT": ("0", "1.8446744073691e19"), "UHUGEINT": ("0", "3.4028236692090e38"),
    **{k: ("-106645208", "106645208") for k in ("TIMESTAMP", "TIMESTAMP WITH TIME ZONE", "TIMESTAMP_S", "TIMESTAMP_MS")},
    "TIMESTAMP_NS": ("-106613", "106613"), "INTERVAL": ("-106000000", "106000000"),
}


def checked_range(kind: str) -> tuple[str, str] | None:
    """The range a result of DuckDB type ``kind`` must stay in, or None where none can be left
    (DOUBLE, FLOAT, a DECIMAL narrower than 38 digits, text...).

    >>> checked_range("INTEGER"), checked_range("DECIMAL(38,2)"), checked_range("DECIMAL(18,2)")
    (('-2147483648', '2147483647'), ('-0.999999999999e36', '0.999999999999e36'), None)
    """
    if kind in _RANGES:
        return _RANGES[kind]
    if kind.startswith("DECIMAL(38,"):
        top = f"0.999999999999e{38 - int(kind[len('DECIMAL(38,'):-1])}"
        return "-" + top, top
    return None


def _fits_sql(gen: t.Any, e: Fits) -> str:
    kind = e.args.get("kind")
    if kind is not None:  # the type is asserted: were it another, the value is NULL, not unchecked
        same = f"TYPEOF({gen.sql(e, 'type')}) = {gen.sql(kind)}"
        bounds = checked_range(kind.name)
        if bounds is None:
            return same
        return f"({same} AND COALESCE({gen.sql(e, 'this')} BETWEEN {bounds[0]} AND {bounds[1]}, true))"
    parts = {"__a": gen.sql(e, "this"), "__t": gen.sql(e, "type")}
    return "".join(parts.get(piece, piece) for piece in _FITS_TEXT)


def _register() -> None:
    """Teach DuckDB's generators :class:`Fits` (sqlglot builds each generator's table of
    handlers once, on first use, so a table built before this import is dropped)."""
    from sqlglot import generator

    for cls in (DuckDB.Generator, DPSQL.Generator):
        cls.TRANSFORMS[Fits] = _fits_sql
    getattr(generator, "_DISPATCH_CACHE", {}).clear()


_register()
