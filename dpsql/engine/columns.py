"""Exact statistics as columns: the form the release step reads, from rows or from Arrow.

An engine returns the statistics of every group. Turned into Python tuples, 100,000 groups cost
more than the query that computed them, so DuckDB hands them over as an Arrow table and the
release reads whole columns. The row form (what another engine, or
``Connection.release(prepared, names, rows)``, passes) is converted into the same
:class:`Statistics`, so there is one release path.

Both forms must give every mechanism exactly the values it would read from the rows, so the law
of every released value is the same whichever form the statistics came in:

* a statistic column is a numpy array: int64 or float64 when its values are exactly those
  numbers (integers of at most 64 bits, HUGEINT that fits in int64, FLOAT and DOUBLE), with
  NULL as 0 and a mask of the NULLs beside it, otherwise an object array of the Python values
  DuckDB's rows hold;
* a key column is an Arrow array of the type ``pyarrow.array`` infers from those Python values
  (what the output table of the row form has).

Only the DuckDB types listed in :data:`ARROW_TYPES` take the Arrow form (their Arrow values
read back as the Python values DuckDB's rows give); a statistics query with any other column
type is fetched as rows.
"""

from __future__ import annotations

import re
import typing as t

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dpsql.mechanisms.batch import object_column

#: DuckDB column types fetched as Arrow (see the module docstring).
ARROW_TYPES = re.compile(
    r"(BOOLEAN|TINYINT|SMALLINT|INTEGER|BIGINT|UTINYINT|USMALLINT|UINTEGER|HUGEINT|FLOAT|DOUBLE|VARCHAR"
    r"|DECIMAL\(\d+,\s*\d+\))"
)
#: Arrow types whose values are read as int64 / float64 without a change of value.
_INTS = (pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32())
_FLOATS = (pa.float32(), pa.float64())


def arrow_types(types: t.Sequence[str]) -> bool:
    """Whether a statistics query with these DuckDB column types is fetched as Arrow."""
    return all(ARROW_TYPES.fullmatch(str(ty).upper()) for ty in types)


class Statistics:
    """The exact statistics of ``size`` groups: one column per name, Arrow or Python values."""

    def __init__(self, names: t.Sequence[str], columns: t.Sequence[t.Any], size: int,
                 hugeint: t.Collection[int] = ()) -> None:
        self.names = list(names)
        #: per column: a ``pa.Array`` (Arrow form) or an object numpy array (row form)
        self.columns = list(columns)
        self.size = size
        #: indices of Arrow columns that were HUGEINT in DuckDB (Arrow decimal128(38, 0))
        self.hugeint = frozenset(hugeint)

    def __len__(self) -> int:
        return self.size

    @classmethod
    def from_rows(cls, names: t.Sequence[str], rows: t.Sequence[tuple[t.Any, ...]]) -> "Statistics":
        """The row form: each column an object array of the rows' values."""
        size = len(rows)
        transposed = list(zip(*rows)) if rows else [() for _ in names]
        return cls(names, [object_column(col, size) for col in transposed], size)

    @classmethod
    def from_arrow(cls, table: "pa.Table", types: t.Sequence[str]) -> "Statistics | None":
        """The Arrow form of a DuckDB result whose column types satisfy :func:`arrow_types`, or
        None if a column's Arrow type is not the one this module reads (then fetch rows)."""
        if len(types) != table.num_columns or not all(map(_as_expected, types, table.schema.types)):
            return None
        hugeint = [j for j, ty in enumerate(types) if str(ty).upper() == "HUGEINT"]
        return cls(table.column_names, [col.combine_chunks() for col in table.columns], table.num_rows, hugeint)

    def filter(self, mask: np.ndarray) -> "Statistics":
        """The groups where ``mask`` is true, in order."""
        keep = pa.array(mask, type=pa.bool_())
        cols = [col.filter(keep) if isinstance(col, pa.Array) else col[mask] for col in self.columns]
        return Statistics(self.names, cols, int(mask.sum()), self.hugeint)

    def values(self, j: int) -> np.ndarray:
        """Column ``j`` as a statistic: int64 or float64 where exact and without NULL, else the
        rows' Python values in an object array (NULL as None)."""
        typed, nulls = self.stat(j)
        if nulls is None:
            return typed
        out = typed.astype(object)
        out[nulls] = None
        return out

    def stat(self, j: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Column ``j`` as a statistic and its NULLs: an int64 or float64 array with NULL as 0
        and the mask of the NULLs (None when there are none), or, for other values, the rows'
        Python values in an object array (NULL as None) and None."""
        col = self.columns[j]
        if not isinstance(col, pa.Array):
            return col, None
        nulls = col.is_null().to_numpy(zero_copy_only=False) if col.null_count else None
        filled = pc.fill_null(col, 0) if col.null_count else col
        typed = None
        if col.type in _INTS:
            typed = filled.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
        elif col.type in _FLOATS:
            typed = filled.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
        elif j in self.hugeint:
            try:
                typed = pc.cast(filled, pa.int64()).to_numpy(zero_copy_only=False)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                typed = None
        if typed is not None:
            return typed, nulls
        values = col.to_pylist()
        if j in self.hugeint:  # DuckDB's rows hold HUGEINT as Python int, Arrow as Decimal
            values = [None if v is None else int(v) for v in values]
        return object_column(values, self.size), None

    def key(self, j: int) -> "pa.Array":
        """Column ``j`` as a released key: the Arrow array ``pa.array`` makes of the rows' values."""
        col = self.columns[j]
        if not isinstance(col, pa.Array):
            return pa.array(col.tolist())
        if j not in self.hugeint and not pa.types.is_decimal(col.type) and col.null_count < len(col):
            if col.type in _INTS:
                return col.cast(pa.int64())
            if col.type in _FLOATS:
                return col.cast(pa.float64())
            if pa.types.is_boolean(col.type):
                return col
            if pa.types.is_string(col.type) or pa.types.is_large_string(col.type) or \
                    pa.types.is_string_view(col.type):
                return col.cast(pa.string())
        return pa.array(self.values(j).tolist())


def _as_expected(duck: str, arrow: "pa.DataType") -> bool:
    """Whether DuckDB's Arrow export of a column of type ``duck`` has the type read here."""
    duck = str(duck).upper()
    if duck == "HUGEINT":
        return pa.types.is_decimal(arrow) and arrow.scale == 0
    if duck.startswith("DECIMAL"):
        return pa.types.is_decimal(arrow)
    if duck == "VARCHAR":
        return pa.types.is_string(arrow) or pa.types.is_large_string(arrow) or pa.types.is_string_view(arrow)
    if duck == "BOOLEAN":
        return pa.types.is_boolean(arrow)
    if duck in ("FLOAT", "DOUBLE"):
        return arrow in _FLOATS
    return arrow in _INTS


def column_array(values: t.Any) -> "pa.Array":
    """A released column (a list of Python values or a numpy array of numbers) as Arrow, of the
    type ``pa.array`` gives the list of its Python values."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "if":
        return pa.array(values.astype(np.int64 if values.dtype.kind == "i" else np.float64, copy=False))
    if isinstance(values, np.ndarray):
        values = values.tolist()
    return pa.array(values)
