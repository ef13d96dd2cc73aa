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
  (what the output table of the row form has), or of their text where it infers none;
* a list of structs with integer and floating-point fields (a histogram, a window of order
  statistics) is a :class:`~dpsql.mechanisms.batch.Lists`: int64 and float64 arrays of every
  element, whose :meth:`~dpsql.mechanisms.batch.Lists.objects` are the rows' lists of dicts.

Only the DuckDB types listed in :data:`ARROW_TYPES` take the Arrow form (their Arrow values
read back as the Python values DuckDB's rows give); a statistics query with any other column
type is fetched as rows, and so is a result whose lists hold a NULL struct or field, or a
HUGEINT past int64 (:meth:`Statistics.from_arrow` checks before any release).
"""

from __future__ import annotations

import re
import typing as t

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dpsql.backends.output import plain
from dpsql.mechanisms.batch import Lists, object_column

_NUMBER = r"(?:TINYINT|SMALLINT|INTEGER|BIGINT|UTINYINT|USMALLINT|UINTEGER|HUGEINT|FLOAT|DOUBLE)"
#: ``STRUCT(name TYPE, ...)[]``: a list of structs whose fields are numbers read as int64 / float64.
_STRUCT_LIST = re.compile(rf"STRUCT\((\w+ {_NUMBER}(?:, \w+ {_NUMBER})*)\)\[\]")
#: DuckDB column types fetched as Arrow (see the module docstring).
ARROW_TYPES = re.compile(rf"(BOOLEAN|{_NUMBER}|VARCHAR|DECIMAL\(\d+,\s*\d+\)|{_STRUCT_LIST.pattern})")
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
        columns: list[t.Any] = [col.combine_chunks() for col in table.columns]
        for j, ty in enumerate(types):
            if _STRUCT_LIST.fullmatch(str(ty).upper()):
                columns[j] = _lists(columns[j])
                if columns[j] is None:
                    return None
        return cls(table.column_names, columns, table.num_rows, hugeint)

    def filter(self, mask: np.ndarray) -> "Statistics":
        """The groups where ``mask`` is true, in order."""
        keep = pa.array(mask, type=pa.bool_())
        cols = [col.filter(keep) if isinstance(col, pa.Array) else _take(col, mask) for col in self.columns]
        return Statistics(self.names, cols, int(mask.sum()), self.hugeint)

    def values(self, j: int) -> np.ndarray:
        """Column ``j`` as a statistic: int64 or float64 where exact and without NULL, else the
        rows' Python values in an object array (NULL as None)."""
        typed, nulls = self.stat(j)
        if isinstance(typed, Lists):
            return typed.objects()
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
        if not isinstance(col, pa.Array):  # Lists, or an object array of the rows' values
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
            return key_array(col.tolist())
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
        return key_array(self.values(j).tolist())


def key_array(values: list[t.Any]) -> "pa.Array":
    """A key column of Python values as ``pa.array`` types it, or as their text when it cannot
    (``uuid.UUID`` before pyarrow 19): a key's type must not make a release fail after the charge."""
    try:
        return pa.array(values)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return pa.array([None if v is None else str(v) for v in values], pa.string())


def _lists(col: "pa.Array") -> Lists | None:
    """A list-of-structs column as :class:`Lists`, or None when an element is NULL, has a NULL
    field or a HUGEINT field past int64 (those are read from rows)."""
    flat = col.flatten()  # the elements of the non-NULL lists, whatever the array's offset
    if flat.null_count:
        return None
    fields = {}
    for field, values in zip(flat.type, flat.flatten()):
        if values.null_count:
            return None
        if pa.types.is_decimal(values.type):
            try:
                fields[field.name] = pc.cast(values, pa.int64()).to_numpy(zero_copy_only=False)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return None
        else:
            kind = np.float64 if values.type in _FLOATS else np.int64
            fields[field.name] = values.to_numpy(zero_copy_only=False).astype(kind, copy=False)
    lengths = pc.fill_null(pc.list_value_length(col), 0).to_numpy(zero_copy_only=False)
    offsets = np.zeros(len(col) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    valid = col.is_valid().to_numpy(zero_copy_only=False) if col.null_count else None
    return Lists(offsets, fields, valid)


def _take(col: "np.ndarray | Lists", mask: np.ndarray) -> "np.ndarray | Lists":
    """The groups of a row-form or :class:`Lists` column where ``mask`` is true."""
    if not isinstance(col, Lists):
        return col[mask]
    lengths = np.diff(col.offsets)
    element = np.repeat(mask, lengths)
    offsets = np.zeros(int(mask.sum()) + 1, dtype=np.int64)
    np.cumsum(lengths[mask], out=offsets[1:])
    return Lists(offsets, {name: a[element] for name, a in col.fields.items()},
                 None if col.valid is None else col.valid[mask])


def _as_expected(duck: str, arrow: "pa.DataType") -> bool:
    """Whether DuckDB's Arrow export of a column of type ``duck`` has the type read here."""
    duck = str(duck).upper()
    struct = _STRUCT_LIST.fullmatch(duck)
    if struct:
        if not (pa.types.is_list(arrow) or pa.types.is_large_list(arrow)) or \
                not pa.types.is_struct(arrow.value_type):
            return False
        fields = [f.split(" ") for f in struct.group(1).split(", ")]
        kinds = arrow.value_type
        return len(fields) == kinds.num_fields and all(
            name.lower() == f.name.lower() and _as_expected(ty, f.type) for (name, ty), f in zip(fields, kinds))
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


def python_values(values: t.Any) -> list[t.Any]:
    """``column_array(values).to_pylist()`` where that is known without Arrow (numbers in a
    numpy array, or a list of one value that Arrow holds as itself: None, a float, an int64),
    else by that very call."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "if":
        return values.astype(np.int64 if values.dtype.kind == "i" else np.float64, copy=False).tolist()
    if isinstance(values, list) and len(values) == 1 and plain(values[0]):
        return list(values)
    return column_array(values).to_pylist()
