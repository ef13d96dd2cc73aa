"""Links: a table whose rows belong to a privacy unit through a foreign key (issue 29).

A policy may say, instead of a ``privacy_unit``, which row of another table each row belongs
to; that row's unit is then this row's unit, and chains are followed::

    [tables.customer]
    privacy_unit = "c_custkey"
    [tables.orders]
    link = { o_custkey = "customer.c_custkey" }
    max_rows_per_unit = 40          # orders per customer
    [tables.lineitem]
    link = { l_orderkey = "orders.o_orderkey" }
    max_rows_per_unit = 200         # line items per customer

Which unit a row belongs to (the attribution; :mod:`dpsql._sql.links` writes it in SQL)
    * a row of the unit table (``customer``): its unit column;
    * a row whose link points at the unit column (``orders``: ``o_custkey`` IS the customer
      key): its link value, in the type of the unit column (compared in that one type, so that
      the truncation partitions by the values every table is joined on);
    * any other linked row (``lineitem``): the unit of the target rows whose target column
      equals its link value; when several target rows share that value (the target column
      is not a key in the data: nothing is assumed), the **smallest** of their units.
    A row whose link value is NULL, matches no target row, or whose target rows have no unit
    (an orphan) belongs to no unit and is dropped.

Why the smallest unit, and why orphans are dropped (the neighbouring relation)
    Neighbours differ in every row attributed to one unit u (all of a customer's orders and
    line items, and their customer row). The guarantee needs the attribution of every other
    row to be the same in both, so that the truncated rows of every other unit are the same.
    Removing u's rows removes target rows of unit u only; a row of unit v ≠ u keeps a target
    row of unit v (the one that made v the smallest), and every target row left has a unit
    at least v, so the smallest is still v (by induction along the chain). An orphan stays an
    orphan: removing rows creates no match. "Any one of the matches" (an arbitrary pick, or
    the row with the smallest hash) would not do: the pick could move to u's row in one
    neighbour and not the other; nor would "keys that occur once only": removing u's duplicate
    of a key would hand the rows on that key to another unit.

    Orphans are dropped rather than each made a unit of its own: an orphan is still somebody's
    row (a line item whose order row is missing), and one person could have any number of
    them, which a unit per row would release unbounded. Putting all orphans in one unit (as
    NULL ids of an id column are) would be safe too, since the orphans are the same rows in
    both neighbours, but it would add an arbitrary k of them to every answer; dropping them is
    the same privacy and says plainly that they are not counted.

Guarantee: with every linked table's rows truncated per unit as below, each released statistic
is (ε, δ)-DP under add/remove of one unit's attributed rows in every table, with the
sensitivities of :mod:`dpsql._policy.units`: the truncated rows of a neighbour differ from the
data's in that unit's rows only. The idea of declaring a foreign-key path to the privacy unit is
cwida/privacy's ``PRIVACY_LINK`` (a DuckDB extension); per-unit bounds over the rows a unit
reaches are Tumult's AddRowsWithID/MaxRowsPerID (seed 004) and Wilson et al., "Differentially
Private SQL with Bounded User Contribution" (PoPETs 2020). The attribution rule (the smallest
unit), the orphan rule and their argument are dpsql's own.

The rows are bounded per unit: each linked table's ``max_rows_per_unit`` is rows of that table
per unit (200 line items per customer, not per order), enforced by the same truncation as an
id unit's (:mod:`dpsql._policy.units`).
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, replace

from dpsql.errors import PolicyError

#: a :class:`dpsql._policy.policy.TablePolicy` (not imported: the policy module imports this one)
TablePolicy = t.Any


@dataclass(frozen=True)
class Link:
    """``link = { column = "table.target" }``: this table's ``column`` holds the ``target``
    value of the row of ``table`` each row belongs to."""

    column: str
    table: str
    target: str

    def __str__(self) -> str:
        return f"{self.column} → {self.table}.{self.target}"


def parse_link(where: str, spec: t.Any) -> Link:
    """The ``link`` of table policy ``where``: one ``column = "table.column"`` entry.

    >>> parse_link("tables.orders", {"O_CustKey": "Customer.C_CustKey"})
    Link(column='o_custkey', table='customer', target='c_custkey')
    >>> parse_link("tables.orders", {"o_custkey": "c_custkey"})
    Traceback (most recent call last):
    dpsql.errors.PolicyError: tables.orders.link.o_custkey must name a table's column, e.g. "customer.c_custkey"
    """
    if not isinstance(spec, dict) or len(spec) != 1:
        raise PolicyError(f'{where}.link must be one column = "table.column", e.g. '
                          'link = { o_custkey = "customer.c_custkey" }')
    (column, value), = spec.items()
    table, _, target = value.rpartition(".") if isinstance(value, str) else ("", "", "")
    if not (isinstance(column, str) and column.strip() and table.strip() and target.strip()):
        raise PolicyError(f'{where}.link.{column} must name a table\'s column, e.g. "customer.c_custkey"')
    table = table.strip().lower()
    if table.startswith("main.") and table.count(".") == 1:
        table = table[len("main."):]
    return Link(column=column.strip().lower(), table=table, target=target.strip().lower())


def table_link(where: str, spec: dict[str, t.Any]) -> Link | None:
    """A table policy's ``link``, if any; refused beside a privacy_unit of its own, on a public
    table, or with a unit_name (a linked table's individuals are its unit table's)."""
    if "link" not in spec:
        return None
    link = parse_link(where, spec["link"])
    if "privacy_unit" in spec:
        raise PolicyError(f"{where}.link: table {where[len('tables.'):]} has its own privacy_unit "
                          f"({spec['privacy_unit']}); a table has a privacy_unit or a link, not both")
    for key in ("public", "unit_name"):
        if spec.get(key):
            raise PolicyError(f"{where}.link: a linked table takes its unit from table {link.table}; drop {key}")
    return link


def resolve_links(tables: dict[str, TablePolicy]) -> dict[str, TablePolicy]:
    """``tables`` with every linked table's unit found (its ``unit_root`` and ``privacy_unit``:
    the unit table its links reach and that table's unit column); PolicyError, one line naming
    the key, for a link to an unknown, public or row-unit table, or a cycle."""
    out = dict(tables)
    for name, tp in sorted(tables.items()):
        if tp.link is None:
            continue
        root = _root(tables, name)
        out[name] = replace(tp, unit_root=root.name, privacy_unit=root.privacy_unit,
                            unit_name=root.unit_name or root.name)
    return out


def _root(tables: dict[str, TablePolicy], name: str) -> TablePolicy:
    """The unit table that ``name``'s links reach."""
    seen = [name]
    tp = tables[name]
    while tp.link is not None:
        key = f"tables.{tp.name}.link.{tp.link.column}"
        target = tables.get(tp.link.table)
        if target is None:
            raise PolicyError(f"{key}: no table {tp.link.table} in the policy; a link names a table the "
                              "policy declares and one of its columns")
        if target.public:
            raise PolicyError(f"{key}: table {target.name} is public; a link leads to the table of the "
                              "privacy unit (a public table's rows belong to nobody), so drop the link or "
                              f"give {target.name} a privacy_unit")
        if target.name in seen:
            path = " → ".join([*seen[seen.index(target.name):], target.name])
            raise PolicyError(f"{key}: the links form a cycle ({path}); a chain of links must end at a table "
                              "with a privacy_unit")
        if target.link is None and target.privacy_unit == "row":
            raise PolicyError(f"{key}: table {target.name}'s privacy unit is a row; a link leads to a table "
                              "whose privacy_unit is an id column")
        seen.append(target.name)
        tp = target
    return tp


def renamed_links(tables: dict[str, TablePolicy], renamed: t.Mapping[str, str]) -> dict[str, TablePolicy]:
    """The linked tables of ``tables`` with their links and unit roots under the new keys of
    ``renamed`` (old key -> new key: ``db.main.t`` is ``t`` once ``db`` is the connection's)."""
    out = {}
    for name, tp in tables.items():
        if tp.link is not None:
            link = replace(tp.link, table=renamed.get(tp.link.table, tp.link.table))
            out[name] = replace(tp, link=link, unit_root=renamed.get(tp.unit_root or "", tp.unit_root))
    return out


def check_link_columns(tp: TablePolicy, have: t.Mapping[str, str], target_have: t.Mapping[str, str] | None) -> None:
    """Refuse a link whose column (or target column) the tables do not have."""
    from dpsql.errors import did_you_mean

    if tp.link is None:
        return
    key = f"tables.{tp.name}.link.{tp.link.column}"
    if tp.link.column not in have:
        raise PolicyError(f"{key}: table {tp.name} has no column {tp.link.column}"
                          f"{did_you_mean(tp.link.column, have, exact=True)}")
    if target_have is not None and tp.link.target not in target_have:
        raise PolicyError(f"{key}: table {tp.link.table} has no column {tp.link.target}"
                          f"{did_you_mean(tp.link.target, target_have, exact=True)}")
