"""The released row of an ungrouped query, kept as Python values until a table is asked for.

A query without GROUP BY whose post-processing only names its columns releases one row of
Python numbers. Building an Arrow table of it costs more than everything else that happens
after DuckDB returns the statistics, and the most common reader (``fetchall()``, the DB-API,
the command's text output) wants the Python values back. :class:`OneRow` holds the row and
builds the table, with the very call the eager path makes, the first time it is needed.

Only values whose Arrow form is known to round-trip are kept this way (``None``, ``float``, and
``int`` within int64), so the table, when built, cannot fail and gives back exactly these
values: nothing that can fail is deferred past the release.
"""

from __future__ import annotations

import typing as t

if t.TYPE_CHECKING:
    import pyarrow as pa

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def plain(value: t.Any) -> bool:
    """Whether Arrow holds ``value`` as itself: NULL, a double, or an int64 (not a bool)."""
    kind = type(value)
    return value is None or kind is float or (kind is int and _INT64_MIN <= value <= _INT64_MAX)


class OneRow:
    """One output row: column names and plain values; :meth:`to_arrow` makes the table."""

    __slots__ = ("names", "values")

    num_rows = 1

    def __init__(self, names: list[str], values: list[t.Any]) -> None:
        self.names = list(names)
        self.values = list(values)

    @classmethod
    def of(cls, names: list[str], columns: list[list[t.Any]]) -> OneRow | None:
        """The row of ``columns`` (one list per output column), or None unless there are
        columns and each holds one plain value."""
        if not columns or len(names) != len(columns) or not all(len(col) == 1 and plain(col[0]) for col in columns):
            return None
        return cls(names, [col[0] for col in columns])

    @property
    def column_names(self) -> list[str]:
        return list(self.names)

    @property
    def num_columns(self) -> int:
        return len(self.names)

    def rows(self) -> list[tuple[t.Any, ...]]:
        return [tuple(self.values)]

    def to_arrow(self) -> "pa.Table":
        """The table the eager path builds: one Arrow array per column, types inferred."""
        import pyarrow as pa

        return pa.Table.from_arrays([pa.array([v]) for v in self.values], names=self.names)
