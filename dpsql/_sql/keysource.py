"""Where a GROUP BY key's public domain can come from besides the policy's ``keys``.

Two sources, both public by construction (they read the query, the policy and public tables,
never a private row):

* **a column of a public table** joined into the query (``GROUP BY n_name`` after ``JOIN
  nation``): its distinct values, read from the public table alone (never from the join, whose
  rows depend on private data) by a statement over that table only;
* **a date part of a bounded date column** (``extract(year FROM l_shipdate)``, ``year(...)``,
  ``date_part('month', ...)``, ``quarter``) when the policy bounds the column
  (``bounds = ["1992-01-01", "1998-12-31"]``): every value the part takes between the bounds.

Like any public domain, every key gets a row whether the data has it or not, and data keys
outside it (a date outside the policy's bounds) are dropped: the domain is enforced by the key
join of the rewritten statement, never assumed (:mod:`dpsql._plan.keys` makes the domain).
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass

from sqlglot import exp

from dpsql._sql import casts
from dpsql._sql.intervals import date_part_of, date_part_range
from dpsql._sql.joins import qualified
from dpsql._sql.unitcount import count_domain

if t.TYPE_CHECKING:
    from dpsql._sql.relation import Relation


@dataclass(frozen=True)
class KeySource:
    """A public key domain of one GROUP BY expression: values, or a statement to read them."""

    #: how messages and EXPLAIN name it
    where: str
    #: the keys, when known from the policy alone (a date part)
    values: tuple[t.Any, ...] | None = None
    #: else the public table (qualified, DuckDB SQL) and its column (quoted) whose distinct values
    #: are the keys
    table: str | None = None
    column: str | None = None

    def sql(self, dtype: str) -> str:
        """The statement over the public table alone: each distinct value, DuckDB's text of it cast
        to ``dtype``, and whether that text reads back as the same value."""
        assert self.table is not None and self.column is not None
        # the table and column are DuckDB text the binder wrote (qualified, quoted): kept as they are
        distinct = exp.select(exp.alias_(exp.Var(this=self.column), "__k")).distinct().from_(exp.Var(this=self.table))
        out = exp.Select(expressions=casts.read_back(exp.column("__k"), dtype)).from_(distinct.subquery())
        return out.order_by(exp.Ordered(this=exp.column("__k"), nulls_first=False)).sql(dialect="duckdb")


def key_sources(group_by: t.Sequence[exp.Expression], rel: "Relation", database: str | None
                ) -> list[KeySource | None]:
    """For each GROUP BY expression (over the reserved aliases), its public domain source or None."""
    return [_source(g, rel, database) for g in group_by]


def _source(g: exp.Expression, rel: "Relation", database: str | None) -> KeySource | None:
    while isinstance(g, exp.Paren):
        g = g.this
    counted = count_domain(g, rel)  # a per-unit count clipped to 0..k
    if counted is not None:
        return KeySource(counted[0], values=counted[1])
    owner = rel.owner(g)
    if owner is not None:
        tp, name = owner
        if not tp.public:
            return None
        return KeySource(f"the distinct values of public table {tp.name}.{name}",
                         table=qualified(tp, database).sql(dialect="duckdb"),
                         column=exp.to_identifier(name, quoted=True).sql(dialect="duckdb"))
    part = date_part_of(g)
    if part is None:
        return None
    owner = rel.owner(part[1])
    dates = owner[0].column(owner[1]).dates if owner is not None else None
    if owner is None or dates is None:
        return None
    values = tuple(date_part_range(part[0], *dates))
    return KeySource(f"the {part[0]}s of {owner[0].name}.{owner[1]} between its bounds {dates[0]} and {dates[1]}",
                     values=values)
