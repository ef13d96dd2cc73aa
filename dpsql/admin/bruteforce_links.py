"""The brute-force oracle for linked tables: whose row is whose, and every unit neighbour.

Tables are lists of rows (dicts, column -> value). :func:`attribute` finds each row's privacy
unit the way :mod:`dpsql._policy.links` defines it, in plain Python and independently of the
SQL that dpsql writes: a unit table's row has its unit column (NULL is one unit, as for an id
column); a row whose link points at the unit holds its unit; any other linked row takes the
smallest unit of the target rows whose target column equals its link value; a row with none
(a NULL link, no match, or matches without a unit) is an orphan (:data:`ORPHAN`), and so is
every row of a table neither ``units`` nor ``links`` names (a public table).

:func:`unit_neighbours` gives, for every unit of a dataset, the dataset with all rows of that
unit removed (in every table): the add/remove neighbours of issue 29's relation, read in both
directions (the dataset is the neighbour with the unit added). Over every neighbour of small
datasets, the tests compare how far each released statistic moves with its sensitivity.
"""

from __future__ import annotations

import typing as t
from collections.abc import Iterator, Mapping

Row = dict[str, t.Any]
Tables = dict[str, list[Row]]


class _Orphan:
    def __repr__(self) -> str:
        return "ORPHAN"


#: the unit of a row that belongs to no unit
ORPHAN: t.Any = _Orphan()
#: the unit of a unit table's rows whose unit column is NULL (one unit, as for id columns)
NULL_UNIT = ("NULL",)


class Link(t.NamedTuple):
    column: str
    table: str
    target: str


def attribute(tables: Mapping[str, list[Row]], units: Mapping[str, str],
              links: Mapping[str, Link]) -> dict[str, list[t.Any]]:
    """Each row's unit, by table (``units``: unit table -> its unit column; ``links``: linked
    table -> its link).

    >>> tables = {"c": [{"id": 1}, {"id": 2}], "o": [{"k": 7, "c": 2}, {"k": 7, "c": 1}, {"k": 8, "c": None}],
    ...           "l": [{"k": 7}, {"k": 8}, {"k": None}, {"k": 9}]}
    >>> got = attribute(tables, {"c": "id"}, {"o": Link("c", "c", "id"), "l": Link("k", "o", "k")})
    >>> got["o"], got["l"]
    ([2, 1, ORPHAN], [1, ORPHAN, ORPHAN, ORPHAN])
    """
    out: dict[str, list[t.Any]] = {}

    def holds_unit(table: str, column: str) -> bool:
        if table in units:
            return units[table] == column
        link = links[table]
        return column == link.column and holds_unit(link.table, link.target)

    def of(table: str) -> list[t.Any]:
        if table in out:
            return out[table]
        rows = tables[table]
        if table in units:
            out[table] = [NULL_UNIT if r[units[table]] is None else r[units[table]] for r in rows]
            return out[table]
        if table not in links:  # a public table: its rows are nobody's, and stay
            out[table] = [ORPHAN] * len(rows)
            return out[table]
        link = links[table]
        if holds_unit(link.table, link.target):
            out[table] = [ORPHAN if r[link.column] is None else r[link.column] for r in rows]
            return out[table]
        target, target_units = tables[link.table], of(link.table)
        found = []
        for r in rows:
            matches = [u for tr, u in zip(target, target_units)
                       if r[link.column] is not None and tr[link.target] == r[link.column]
                       and u is not ORPHAN and u is not NULL_UNIT]
            found.append(min(matches) if matches else ORPHAN)
        out[table] = found
        return found

    for name in tables:
        of(name)
    return out


def unit_neighbours(tables: Mapping[str, list[Row]], units: Mapping[str, str],
                    links: Mapping[str, Link]) -> Iterator[tuple[t.Any, Tables]]:
    """(unit, the dataset without every row of that unit) for each unit of ``tables``."""
    owners = attribute(tables, units, links)
    seen: list[t.Any] = []
    for name in tables:
        for u in owners[name]:
            if u is not ORPHAN and u not in seen:
                seen.append(u)
    for u in seen:
        yield u, {name: [r for r, owner in zip(rows, owners[name]) if owner != u or owner is ORPHAN]
                  for name, rows in tables.items()}
