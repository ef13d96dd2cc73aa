"""The statistics statement as a typed plan: what it is made of, before any SQL is written.

:func:`dpsql._plan.rewrite.statement` builds a :class:`Statement` from a
:class:`dpsql._plan.plan.Plan` (the one place that reads the planner's output for this); a compiler (:mod:`dpsql._compile.compiler`,
one per engine) turns it into one sqlglot tree and that into text once. The parts:

* :class:`Source` — the rows: the bound FROM chain (:class:`Relation`), the filters, the group
  keys, the value columns (:class:`Clipped`, :class:`Fixed`, :class:`Column`), the privacy
  unit, and for an id unit the :class:`Truncation` of each unit's rows or their
  :class:`PreAggregation` (per-unit partial statistics, clipped);
* :class:`Stat` — one column of the per-group statistics, a mechanism's aggregate;
* :class:`Subquery` — a mechanism's per-group subquery (a sqlglot ``Select``);
* :class:`SharedHistogram` — the order-statistics histogram the statistics may be read from;
* the public key domain (:class:`dpsql._plan.keys.KeyDomain`) the statistics are joined to;
* ``Statement.dropped`` — ``report_dropped``: the bounds whose cut units are counted.

Every node holds sqlglot expressions or plain values: nothing here is SQL text except DuckDB's
text of the binder's FROM chain, printed once when it was bound, beside its trees (:class:`Relation`).
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass

from sqlglot import exp

from dpsql._sql import build

if t.TYPE_CHECKING:
    from dpsql._compile.perunit import Aggregate
    from dpsql._policy.units import UnitBounds
    from dpsql.mechanisms.fixed import FixedPoint


class KeyDomain(t.Protocol):
    """A public key domain (:class:`dpsql._plan.keys.KeyDomain`): the DuckDB type of each key
    part, each key as a ``VALUES`` list writes it, and DuckDB's text of every part."""

    @property
    def types(self) -> tuple[str, ...]: ...

    @property
    def rows(self) -> tuple[tuple[t.Any, ...], ...]: ...

    @property
    def texts(self) -> tuple[tuple[str | None, ...], ...]: ...


@dataclass(frozen=True)
class Relation:
    """The FROM chain of the statistics: the private relation as ``__t`` and the joins and
    flat maps the binder built (:attr:`dpsql._sql.bind.Bound.joins`: trees, shared, never changed)."""

    table: exp.Expression
    joins: tuple[exp.Join, ...] = ()
    #: DuckDB's text of the whole chain (``bound.from_sql``)
    text: str = ""


@dataclass(frozen=True)
class Column:
    """A column of ``__src``: ``expr AS name`` (a group key, an inner argument, an unclipped value)."""

    name: str
    expr: exp.Expression


@dataclass(frozen=True)
class Clipped:
    """A value clipped to [lower, upper] (:func:`dpsql._compile.clip.clip`)."""

    name: str
    arg: exp.Expression
    lower: float
    upper: float
    dtype: str | None = None


@dataclass(frozen=True)
class Fixed:
    """A value as its integer on a fixed-point grid (:func:`dpsql._compile.clip.fixed_point`)."""

    name: str
    arg: exp.Expression
    grid: "FixedPoint"
    dtype: str | None = None


Value = Column | Clipped | Fixed


@dataclass(frozen=True)
class Truncation:
    """What one unit may contribute (:mod:`dpsql._policy.units`): at most ``max_rows`` rows, or
    ``max_rows_per_group`` rows in each of at most ``max_groups`` groups of ``keys``."""

    max_rows: int
    max_groups: int | None = None
    max_rows_per_group: int | None = None
    keys: tuple[str, ...] = ()

    @property
    def by_groups(self) -> bool:
        return self.max_groups is not None and bool(self.keys)

    @classmethod
    def of(cls, units: "UnitBounds", keys: t.Sequence[str]) -> "Truncation":
        """The bounds in force for an id unit, over the group ``keys`` (used only with g)."""
        g, r = units.max_groups, units.max_rows_per_group
        return cls(int(units.max_rows), None if g is None else int(g), None if r is None else int(r),
                   tuple(keys) if g is not None else ())


@dataclass(frozen=True)
class PreAggregation:
    """An id unit bounded by pre-aggregation (:mod:`dpsql._compile.perunit`): one row per (unit,
    group) of every aggregate's partial statistics, each clipped to ``cap`` rows' worth; with
    ``max_groups`` and ``keys``, each unit keeps its ``max_groups`` groups of smallest
    ``HASH(unit, keys)``; ``reweight``: instead, every partial of a unit weighted by
    min(1, cap / its rows) (:mod:`dpsql._sql.reweight`, cap = k, no groups bound)."""

    aggregates: tuple["Aggregate", ...]
    cap: int
    max_groups: int | None = None
    keys: tuple[str, ...] = ()
    reweight: bool = False

    @classmethod
    def of(cls, units: "UnitBounds", keys: t.Sequence[str], aggregates: t.Sequence["Aggregate"]) -> "PreAggregation":
        """The bounds in force for an id unit: c = r with g and keys, else k (re-weighted: k)."""
        if units.mode == "reweight":
            return cls(tuple(aggregates), int(units.max_rows), None, tuple(keys), True)
        grouped = bool(keys) and units.max_groups is not None
        r = units.max_rows_per_group
        cap = int(r if grouped and r is not None else units.max_rows)
        return cls(tuple(aggregates), cap, int(units.max_groups) if grouped and units.max_groups is not None else None,
                   tuple(keys))


@dataclass(frozen=True)
class Source:
    """The rows the statistics read (``__src``)."""

    relation: Relation
    where: tuple[exp.Expression, ...] = ()
    keys: tuple[Column, ...] = ()
    values: tuple[Value, ...] = ()
    #: an id unit (``__u``) with the hash of the whole row (``__h``) over these aliases
    unit: exp.Expression | None = None
    hashed: tuple[str, ...] = ()
    #: a row unit counted by units: ``HASH(__t) AS __u``
    row_unit: bool = False
    truncation: Truncation | None = None
    #: instead of the truncation: the unit's rows aggregated, then clipped (no row hash)
    preaggregation: PreAggregation | None = None


@dataclass(frozen=True)
class Stat:
    """``expr AS column`` in the statistics; ``plain``: a mechanism's own expression (it may be
    read from the shared histogram or put back into the aggregate over the rows)."""

    column: str
    expr: exp.Expression
    plain: bool = True


@dataclass(frozen=True)
class Subquery:
    """A mechanism's per-group SELECT, as ``alias``, adding ``columns`` besides the keys;
    ``value_counts``: the column holding the value histogram ``[{v, c}]`` of ``value``, when
    it returns one (an engine may read ``COUNT(value)`` from it)."""

    alias: str
    select: exp.Select
    columns: tuple[str, ...]
    value: str = ""
    value_counts: str | None = None


@dataclass(frozen=True)
class SharedHistogram:
    """The histogram of one aggregate's values, NULLs in a bucket of their own, that the
    statistics are read from; ``separate``: ``__src`` is read again rather than buffered."""

    values: build.Values
    separate: bool = False


@dataclass(frozen=True)
class Statement:
    source: Source
    keys: tuple[str, ...]
    stats: tuple[Stat, ...]
    subqueries: tuple[Subquery, ...] = ()
    histogram: SharedHistogram | None = None
    domain: KeyDomain | None = None
    #: (aggregate index, statistic) -> column, and the column a key's selection reads
    columns: tuple[tuple[tuple[int, str], str], ...] = ()
    key_selection_column: str | None = None
    #: ``report_dropped``: the bounds whose cut units ``__cut`` counts over the unbounded rows
    dropped: Truncation | None = None
