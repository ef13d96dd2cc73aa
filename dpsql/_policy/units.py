"""Privacy units by id: the contribution bounds a query runs under, and their sensitivities.

A table whose privacy unit is an id column protects all rows of one id together (Tumult's
AddRowsWithID; SPEC §3, §6). Nothing bounds how many rows one id holds in the data, so every
query bounds it itself: the rewritten SQL truncates each unit's rows after the WHERE and before
any aggregate sees them (:mod:`dpsql._plan.rewrite`), and the sensitivities follow from the
bounds in force, never from the data.

The bounds (policy keys and query options of the same names; the query's value wins)
    * ``max_rows_per_unit`` k (Tumult's MaxRowsPerID): at most k rows of a unit survive;
    * ``max_groups_per_unit`` g (MaxGroupsPerID), GROUP BY only: a unit reaches at most g
      groups; with it, ``max_rows_per_group_per_unit`` r (MaxRowsPerGroupPerID, default k):
      at most r rows of a unit in each of those groups.

Which rows survive
    Ungrouped, or grouped without g: the k rows of the unit with the smallest hash of the
    whole row (``ROW_NUMBER() OVER (PARTITION BY unit ORDER BY HASH(row))``). With g: the g
    groups of the unit with the smallest hash of (unit, group keys), and in each the r rows
    with the smallest row hash. The choice depends on the unit's own rows (after the WHERE)
    and, for g, the group keys: never on other units' rows, so the truncated table of a
    neighbour differs from the truncated table of the data only in that unit's rows. Rows
    whose id is NULL form one unit.

Sensitivities (the multipliers of the per-row sensitivities of SPEC §4.1; s = the policy's
``group_size``)
    Truncation makes one unit at most k rows, or at most r rows in each of at most g groups.
    Removing (or adding) one unit then moves the vector of per-group counts, or of per-group
    sums of values in [L, U] (per row at most c = 1 or max(|L|, |U|)), by

    * k rows: L1 ≤ k·c and L2 ≤ k·c (all k rows may fall in one group);
    * g groups × r rows: L1 ≤ r·g·c, L2 ≤ sqrt(g·(r·c)²) = r·√g·c (at most g coordinates
      move, each by at most r·c).

    That is Tumult's guide to sensitivity (seed 004): Laplace sensitivity grows like rows ×
    groups, Gaussian like rows × √groups. :attr:`UnitBounds.l1` and :attr:`UnitBounds.l2` are
    these multipliers (times s: s units together move at most s times as far, by the triangle
    inequality). A mechanism multiplies its per-row sensitivity by ``l1`` (Laplace, and every
    data-dependent mechanism, through ``Context.max_rows``) or ``l2`` (Gaussian). Under
    ``replace`` the per-row factors of SPEC §4.1 already cover a row that leaves one group
    and joins another, so the same multipliers apply. ``tests/test_units.py`` checks both
    against every neighbour of small multi-row tables, run through the rewritten SQL.

Group keys
    A key selected by τ-thresholding counts units, not rows (COUNT(DISTINCT unit)): one unit
    moves each group's count by at most s and reaches at most :attr:`UnitBounds.reach` groups
    (s·g, or s·k without g); see ``KeySelection`` in :mod:`dpsql._plan.plan`.

A row unit (``privacy_unit = "row"``) is not truncated: one row is one unit, and
``max_rows_per_unit`` = m protects m rows together (Tumult's AddMaxRows(m)): L1 = L2 = m·s.

Unit keys (:func:`unit_key_problem`)
    A unit is the set of rows that hold one id value, and every part of a query must agree on
    which values are one: the truncation (a window's PARTITION BY), ``COUNT(DISTINCT unit)``,
    a per-unit GROUP BY, the hash that puts a unit in one chunk and, for tables that share a
    unit, the join that equates their unit columns. Within one type DuckDB and Spark agree
    everywhere (even on floating-point ids: -0.0 equals, groups and hashes with 0.0, and NaN
    with NaN). Across two types they cannot: the join compares through a cast (``'1'``,
    ``'01'``, ``' 1'`` and ``'+1'`` all cast to the INTEGER 1, the DOUBLEs 1.4 and 0.6 to 1)
    while the truncation partitions each table by its own values, so one person would be
    several units and the bound would not hold. Unit columns of two types are refused, with
    the fix, before anything runs. Tables linked to a unit (:mod:`dpsql._policy.links`) have no
    unit column of their own: their unit is read in the unit column's type, so every table
    partitions by the same values.
"""

from __future__ import annotations

import math
import typing as t
from dataclasses import dataclass, field

from dpsql.errors import OptionError

if t.TYPE_CHECKING:
    from dpsql._policy.policy import TablePolicy

#: Where a bound in force came from.
POLICY, QUERY, DEFAULT = "policy", "query", "default"

#: How an id unit's contribution is bounded: row truncation, or pre-aggregation and clipping of
#: each unit's partial statistics (dpsql._compile.perunit); the same bounds and multipliers.
TRUNCATE, CLIP = "truncate", "clip"


@dataclass(frozen=True)
class UnitBounds:
    """The privacy unit of one query's table and the contribution bounds in force."""

    #: the id column (lower-case), or ``"row"``
    unit: str
    #: k: rows per unit (for a row unit: rows protected together)
    max_rows: int
    #: g, when in force (GROUP BY queries on an id unit only)
    max_groups: int | None = None
    #: r, in force with g (``max_rows`` unless given)
    max_rows_per_group: int | None = None
    #: the policy's group privacy: units protected together
    group_size: int = 1
    #: for each bound in force, where it came from: "policy", "query" or "default"
    sources: t.Mapping[str, str] = field(default_factory=dict)
    #: a row unit read through joins or flat maps: the rows of the joined relation one
    #: protected change alters (m times the factors; dpsql._privacy.joins), else None
    joined_rows: int | None = None
    #: what each join and flat map did (EXPLAIN)
    steps: tuple[str, ...] = ()
    #: id units: TRUNCATE (rows) or CLIP (per-unit partials, dpsql._compile.perunit), and why
    mode: str = TRUNCATE
    mode_reason: str = ""

    @property
    def rows(self) -> int:
        """Rows one protected change alters, before the group size: k (id units, after
        truncation), or m times the join and flat-map factors (row units)."""
        if self.joined_rows is not None and not self.by_id:
            return self.joined_rows
        return self.max_rows

    @property
    def by_id(self) -> bool:
        """Whether the unit is an id column (whose rows the rewrite truncates)."""
        return self.unit != "row"

    @property
    def by_groups(self) -> bool:
        """Whether a unit is bounded by groups × rows per group (g and r) rather than by k."""
        return self.max_groups is not None

    @property
    def l1(self) -> int:
        """The L1 multiplier of per-row sensitivities: k, or r·g (times the group size)."""
        if self.max_groups is not None and self.max_rows_per_group is not None:
            return self.group_size * self.max_rows_per_group * self.max_groups
        return self.group_size * self.rows

    @property
    def l2(self) -> float:
        """The L2 multiplier of per-row sensitivities: k, or r·√g (times the group size)."""
        if self.max_groups is not None and self.max_rows_per_group is not None:
            return self.group_size * self.max_rows_per_group * math.sqrt(self.max_groups)
        return float(self.group_size * self.rows)

    @property
    def reach(self) -> int:
        """The most groups one protected change can reach: s·g, or s·k (rows: m·s)."""
        if self.max_groups is not None:
            return self.group_size * self.max_groups
        return self.group_size * self.rows

    @property
    def per_group(self) -> int:
        """The most one protected change moves one group's key count: s units (an id unit,
        whose keys count units), or m·s rows (a row unit, whose keys count rows)."""
        return self.group_size if self.by_id else self.group_size * self.rows

    @property
    def note(self) -> str:
        """What a report line says about the unit: ``per patient_id, ≤ 5 rows``; empty for a
        row unit."""
        if not self.by_id:
            return ""
        who = f"per {self.unit}" if self.group_size == 1 else f"per {self.group_size} {self.unit}s together"
        if self.max_groups is not None:
            return f"{who}, ≤ {self.max_groups} groups × {self.max_rows_per_group} rows{self._how}"
        return f"{who}, ≤ {self.max_rows} rows{self._how}"

    @property
    def _how(self) -> str:
        return ", pre-aggregated" if self.mode == CLIP else ""

    def explain(self) -> list[str]:
        """EXPLAIN's lines on the unit: the unit, the bounds in force and where each came from,
        what the rewritten SQL keeps, and the sensitivity multipliers."""
        if not self.by_id:
            rows = "one row" if self.max_rows == 1 else f"{self.max_rows} rows together (max_rows_per_unit)"
            line = f"privacy unit: a row ({rows}); no truncation"
            if self.group_size > 1:
                line += f"; group privacy: {self.group_size} units"
            lines = [line, *self.steps]
            if self.joined_rows is not None:
                lines.append(f"rows one protected change alters after the joins and flat maps: {self.joined_rows}; "
                             f"sensitivity multiplier × {_num(self.l1)}")
            return lines

        def said(name: str, value: int | None) -> str:
            return f"{name} = {value} ({_source_text(self.sources.get(name, POLICY))})"

        lines = [f"privacy unit: {self.unit} (all rows of one {self.unit})", *self.steps]
        clip = self.mode == CLIP
        if self.max_groups is not None:
            lines.append(f"bounds: {said('max_groups_per_unit', self.max_groups)}, "
                         f"{said('max_rows_per_group_per_unit', self.max_rows_per_group)}")
            lines.append(self._clip_line(self.max_rows_per_group, True) if clip else f"truncation (in the rewritten SQL, after the WHERE): each {self.unit} keeps "
                         f"{_count(self.max_groups, 'group')} (smallest hash of {self.unit} and the keys) and "
                         f"{_count(self.max_rows_per_group, 'row')} in each (smallest hash of the whole row)")
        else:
            lines.append(f"bounds: {said('max_rows_per_unit', self.max_rows)}")
            lines.append(self._clip_line(self.max_rows, False) if clip else f"truncation (in the rewritten SQL, after the WHERE): each {self.unit} keeps "
                         f"{_count(self.max_rows, 'row')} (smallest hash of the whole row)")
        group = f" × group size {self.group_size}" if self.group_size > 1 else ""
        if self.mode_reason:  # the mode chosen for this query (dpsql._compile.perunit.choose)
            lines.insert(-1, f"bounding: {'pre-aggregation' if clip else 'row truncation'} "
                         f"(contribution = '{self.mode}'; {_source_text(self.mode_reason)})")
        lines.append(f"sensitivity multipliers{group}: L1 (Laplace, data-dependent) × {_num(self.l1)}, "
                     f"L2 (Gaussian) × {_num(self.l2)}")
        return lines


    def _clip_line(self, cap: int | None, groups: bool) -> str:
        where = f"in each of at most {self.max_groups} groups (smallest hash of {self.unit} and the keys)" \
            if groups else "over all its rows"
        return (f"pre-aggregation (in the rewritten SQL, after the WHERE): each {self.unit}'s rows are "
                f"aggregated {where}, then its count is clipped to {cap}, a sum's total to {cap} × the "
                f"row bounds, a mean's or variance's sums re-weighted to {cap} rows when it has more")


def _source_text(source: str) -> str:
    return {POLICY: "policy", QUERY: "query", DEFAULT: "default: max_rows_per_unit"}.get(source, source)


def _count(n: int | None, noun: str) -> str:
    return f"at most {n} {noun}" + ("" if n == 1 else "s")


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.6g}"


def resolve(table: "TablePolicy", given: t.Mapping[str, int], grouped: bool, group_size: int = 1) -> UnitBounds:
    """The bounds in force for one query on ``table``: the query's ``given`` options over the
    policy's values. Refuses (OptionError, from the query and the policy alone) a bound on a
    row-unit table, g or r without GROUP BY, r without g, and k where g and r (given, not
    defaulted to k) bound the GROUP BY instead: each would do nothing."""
    name = table.name
    if table.privacy_unit == "row":
        if given:
            key = sorted(given)[0]
            raise OptionError(f"table {name}'s privacy unit is a row: option '{key}' applies only to "
                              "tables whose privacy unit is an id column")
        return UnitBounds(unit="row", max_rows=table.max_rows_per_unit, group_size=group_size,
                          sources={"max_rows_per_unit": POLICY})
    if not grouped:
        for key in ("max_groups_per_unit", "max_rows_per_group_per_unit"):
            if key in given:
                raise OptionError(f"option '{key}' needs a GROUP BY")
    sources: dict[str, str] = {}

    def pick(key: str, policy_value: int | None) -> int | None:
        if key in given:
            sources[key] = QUERY
            return int(given[key])
        if policy_value is not None:
            sources[key] = POLICY
        return policy_value

    k = pick("max_rows_per_unit", table.max_rows_per_unit)
    assert k is not None
    if not grouped:
        return UnitBounds(unit=table.privacy_unit, max_rows=k, group_size=group_size,
                          sources={"max_rows_per_unit": sources["max_rows_per_unit"]})
    g = pick("max_groups_per_unit", table.max_groups_per_unit)
    r = pick("max_rows_per_group_per_unit", table.max_rows_per_group_per_unit)
    if g is None:
        if "max_rows_per_group_per_unit" in given:
            raise OptionError(f"option 'max_rows_per_group_per_unit' needs max_groups_per_unit (in the query "
                              f"or in the policy of table {name})")
        return UnitBounds(unit=table.privacy_unit, max_rows=k, group_size=group_size,
                          sources={"max_rows_per_unit": sources["max_rows_per_unit"]})
    if r is None:
        r, sources["max_rows_per_group_per_unit"] = k, DEFAULT
    elif "max_rows_per_unit" in given:
        raise OptionError(f"option 'max_rows_per_unit' has no effect in this GROUP BY: max_groups_per_unit = {g} "
                          f"and max_rows_per_group_per_unit = {r} bound each unit; set those instead")
    return UnitBounds(unit=table.privacy_unit, max_rows=k, max_groups=g, max_rows_per_group=r,
                      group_size=group_size, sources=sources)


def unit_key_problem(keys: t.Sequence[tuple[str, str | None]]) -> str | None:
    """What is wrong with ``keys`` as the columns of one privacy unit, or None if nothing is.

    ``keys`` are (name as shown, type) of the id columns a join (or a link) compares as one
    unit. They must be of one type, so that the values the join compares are the values the
    truncation partitions by. The problem is a one-line message that names the fix.
    """
    shown = [(name, " ".join(str(type_).upper().split()) if type_ is not None else None) for name, type_ in keys]
    for name, type_ in shown:
        if type_ is None:
            return f"the type of the unit column {name} cannot be read; check that its table exists"
    for name, type_ in shown[1:]:
        if type_ != shown[0][1]:
            first, first_type = shown[0]
            return (f"the unit columns {first} ({first_type}) and {name} ({type_}) differ in type, and a cast "
                    "would make one person several units ('1', '01' and ' 1' cast to one number); store them "
                    "in one type, or declare in the policy a view that casts one of them, e.g. "
                    f"CAST({name.rpartition('.')[2]} AS {first_type})")
    return None
