"""The type of a DP aggregate's argument: a number where the statistic adds or orders values.

The rewrite reads a column of another type through ``TRY_CAST(... AS DOUBLE)`` so that no
value can make the query fail; over a text column that makes every value NULL, and the release
would be pure noise. Refusing it when the query is bound says what is wrong instead. Only
arguments that are a column of the base table have a known type here (``BoundAggregate.column``
and ``column_type``); an expression, such as an explicit ``TRY_CAST``, is taken as written.
"""

from __future__ import annotations

import typing as t

from dpsql._sql.statistics import Statistic
from dpsql.errors import BindError

INTEGER_TYPES = frozenset({
    "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT",
    "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT",
})
FLOAT_TYPES = frozenset({"FLOAT", "DOUBLE", "REAL"})


def is_number_type(dtype: str) -> bool:
    """Whether DuckDB type ``dtype`` holds numbers (BOOLEAN counts: it reads as 0 or 1)."""
    dtype = dtype.upper()
    return dtype in INTEGER_TYPES or dtype in FLOAT_TYPES or dtype.startswith("DECIMAL") or dtype == "BOOLEAN"


def check_argument_types(aggregates: t.Iterable[t.Any]) -> None:
    """Refuse a DP aggregate other than a count whose argument is a column that holds no numbers.

    ``aggregates`` are :class:`dpsql._sql.bind.BoundAggregate` (not imported: bind calls this).
    """
    for agg in aggregates:
        if agg.statistic is not Statistic.COUNT:
            check_argument_type(agg.label, agg.node, agg.column, agg.column_type)


def check_argument_type(label: str, node: t.Any, column: str | None, column_type: str | None) -> None:
    """Refuse (BindError) the DP aggregate ``node`` (``label``) whose argument is the column
    ``column`` of type ``column_type`` if that type holds no numbers. The binder checks this
    before it asks for bounds: a text column needs converting, not bounds."""
    if column is None or not column_type or is_number_type(column_type):
        return
    name = label.split("(", 1)[0]
    written = node.this
    where = "" if getattr(written, "name", "").lower() == column and written.key == "column" else f"{label}: "
    raise BindError(
        f"{where}{column} is {column_type}; {name} needs a number "
        f"(text that holds numbers can be converted: TRY_CAST({column} AS DOUBLE))"
    )


def whole_numbers(agg: t.Any) -> bool:
    """Whether every clipped value of ``agg`` (a :class:`dpsql._sql.bind.BoundAggregate`) is a
    whole number: its argument is an integer column and both bounds are whole numbers, so the
    rewrite clips in integer arithmetic (public: the query and the catalog)."""
    lower, upper = agg.lower, agg.upper
    return (
        agg.column is not None and (agg.column_type or "").upper() in INTEGER_TYPES
        and lower is not None and upper is not None
        and float(lower).is_integer() and float(upper).is_integer()
        and max(abs(float(lower)), abs(float(upper))) <= 2.0**62
    )
