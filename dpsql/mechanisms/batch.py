"""Columns of groups: what the release step hands a mechanism, and what a vectorised one returns.

:class:`Groups` is the exact statistics of every group as columns (one array per statistic),
and still a sequence of per-group mappings, so a mechanism that releases group by group reads it
as before. :class:`ReleasedColumn` is the released values of every group with one report entry
for the whole column: a mechanism that computes in numpy returns it, and the engine reads its
values and summary without building an entry per group. :class:`Lists` is a statistic that is a
list of structs per group (a histogram, a window of order statistics), flattened into arrays. All
are plain containers: nothing here reads data or draws noise.
"""

from __future__ import annotations

import dataclasses
import typing as t

import numpy as np

from dpsql._privacy.report import ReportEntry


def object_column(values: t.Iterable[t.Any], size: int) -> np.ndarray:
    """``values`` as a one-dimensional object array (lists inside stay single elements)."""
    return np.fromiter(values, dtype=object, count=size)


class Lists:
    """A statistic that is, per group, a list of structs with numeric fields (or NULL), flattened.

    Element i of group g is at ``offsets[g] + i`` of every array in ``fields`` (int64 or
    float64, one per struct field); ``valid`` marks the groups whose list is not NULL (None:
    every group's). :meth:`objects` gives what a row holds: per group a list of dicts of Python
    ints and floats, or None. :meth:`of` builds it from those rows' values.
    """

    def __init__(self, offsets: np.ndarray, fields: t.Mapping[str, np.ndarray],
                 valid: np.ndarray | None = None) -> None:
        self.offsets = offsets
        self.fields = dict(fields)
        self.valid = valid

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @classmethod
    def of(cls, column: "Lists | t.Sequence[t.Any]", dtypes: t.Mapping[str, t.Any]) -> "Lists":
        """``column`` as it is, or the per-group lists of mappings (None for NULL) of a row form,
        each field in ``dtypes`` converted to its numpy type as ``float()`` or ``int()`` would."""
        if isinstance(column, Lists):
            return column
        lists = [() if x is None else x for x in column]
        lengths = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
        offsets = np.zeros(len(lists) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        size = int(offsets[-1])
        fields = {name: np.fromiter((e[name] for x in lists for e in x), dtype=ty, count=size)
                  for name, ty in dtypes.items()}
        valid = np.fromiter((x is not None for x in column), dtype=bool, count=len(lists))
        return cls(offsets, fields, None if valid.all() else valid)

    def objects(self) -> np.ndarray:
        """Per group the list of dicts a row holds (Python ints and floats), None for NULL."""
        names = list(self.fields)
        items = [dict(zip(names, vals)) for vals in zip(*(self.fields[n].tolist() for n in names))]
        bounds = self.offsets.tolist()
        out = object_column((items[a:b] for a, b in zip(bounds, bounds[1:])), len(self))
        if self.valid is not None:
            out[~self.valid] = None
        return out


class Groups(t.Sequence[t.Mapping[str, t.Any]]):
    """The exact statistics of ``size`` groups, one array per statistic name.

    A column is an object array of Python values (NULL as None), or, when every value is a
    number of that type, an int64 or float64 array, with NULL held as 0 and marked in
    ``nulls[name]`` (a boolean mask), or a :class:`Lists` for a list of structs per group.
    :meth:`array` hands out a column as it is when it has no NULL, :meth:`numbers` reads NULL
    as 0, :meth:`column` and the per-group mappings always give the Python values (None for
    NULL).
    """

    def __init__(self, columns: t.Mapping[str, "np.ndarray | Lists"], size: int,
                 nulls: t.Mapping[str, np.ndarray | None] | None = None) -> None:
        self.columns = dict(columns)
        self.size = size
        self.nulls = {name: mask for name, mask in (nulls or {}).items() if mask is not None}
        self._objects: dict[str, np.ndarray] = {}

    @classmethod
    def of(cls, groups: t.Sequence[t.Mapping[str, t.Any]]) -> "Groups":
        """Columns from a sequence of per-group mappings (a :class:`Groups` is returned as is)."""
        if isinstance(groups, Groups):
            return groups
        names = list(groups[0]) if groups else []
        return cls({name: object_column((g.get(name) for g in groups), len(groups)) for name in names},
                   len(groups))

    def array(self, name: str) -> "np.ndarray | Lists":
        """The statistic ``name`` of every group: int64 or float64 as held when it has no NULL,
        else the Python values (an object array); a :class:`Lists` as it is."""
        if name in self.nulls:
            return self.column(name)
        col = self.columns.get(name)
        return col if col is not None else np.full(self.size, None, dtype=object)

    def column(self, name: str) -> np.ndarray:
        """The statistic ``name`` of every group as Python values (``None`` where a group lacks it)."""
        col = self.columns.get(name)
        if col is None:
            return np.full(self.size, None, dtype=object)
        if isinstance(col, Lists):
            if name not in self._objects:
                self._objects[name] = col.objects()
            return self._objects[name]
        if col.dtype == object:
            return col
        if name not in self._objects:
            out = col.astype(object)  # int64 → int, float64 → float
            if name in self.nulls:
                out[self.nulls[name]] = None
            self._objects[name] = out
        return self._objects[name]

    def numbers(self, name: str) -> np.ndarray:
        """The statistic as float64, NULL read as 0 (as :func:`dpsql.mechanisms.base.num`)."""
        col = self.columns.get(name)
        if isinstance(col, Lists):
            raise TypeError(f"statistic {name} is a list per group, not a number")
        if col is None:
            col = np.full(self.size, None, dtype=object)
        if col.dtype != object:
            return col.astype(np.float64)  # NULLs are held as 0
        return np.array([0.0 if x is None else x for x in col], dtype=np.float64) if self.size else \
            np.zeros(0)

    def __len__(self) -> int:
        return self.size

    @t.overload
    def __getitem__(self, i: int) -> t.Mapping[str, t.Any]: ...
    @t.overload
    def __getitem__(self, i: slice) -> t.Sequence[t.Mapping[str, t.Any]]: ...
    def __getitem__(self, i: t.Any) -> t.Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.size))]
        if not -self.size <= i < self.size:
            raise IndexError(i)
        return {name: self.column(name)[i] for name in self.columns}


class ReleasedColumn(t.Sequence[tuple[t.Any, ReportEntry]]):
    """Released values of every group and the report of the column.

    ``values`` is a list of Python values, or a numpy array of numbers (int64 or float64) that
    the engine reads as a whole column; ``template`` is the report entry every group shares but
    for its interval, ``widths`` the half-width of each group's interval (or None when it has
    none). As a sequence it is the ``(value, entry)`` pairs
    :meth:`dpsql.mechanisms.base.Prepared.release_many` returns, values as Python numbers.
    """

    def __init__(self, values: list[t.Any] | np.ndarray, template: ReportEntry,
                 widths: np.ndarray | None = None) -> None:
        self.values = values
        self.template = template
        self.widths = widths

    def __len__(self) -> int:
        return len(self.values)

    def _width(self, i: int) -> float | None:
        return None if self.widths is None else float(self.widths[i])

    @t.overload
    def __getitem__(self, i: int) -> tuple[t.Any, ReportEntry]: ...
    @t.overload
    def __getitem__(self, i: slice) -> t.Sequence[tuple[t.Any, ReportEntry]]: ...
    def __getitem__(self, i: t.Any) -> t.Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        value = self.values[i]
        if isinstance(value, np.generic):
            value = value.item()
        return value, dataclasses.replace(self.template, ci_half_width=self._width(i))

    def summary(self) -> ReportEntry:
        """One entry for the column (at least one group): for several, the widest interval over them."""
        n = len(self)
        if n == 1:
            return self[0][1]
        first = self.template
        widest = None if self.widths is None else float(np.max(self.widths))
        return dataclasses.replace(
            first, ci_half_width=widest,
            note=(first.note + "; " if first.note else "") + f"widest of {n} groups",
        )
