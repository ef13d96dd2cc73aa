"""What a DP query's aggregates read: a private table through its FROM chain, inlined.

A :class:`Relation` holds every output column of a level of the FROM chain as an expression over
reserved aliases (``__t`` for the private table's rows, ``__j1, __j2, ...`` for joined tables,
``__f1, ...`` for flat maps), every WHERE of every level as a predicate over the same, and the
FROM clause the rewrite emits after ``<table> AS __t``. No name a user writes reaches the
rewritten statement: columns are resolved here, once, against the levels below.
"""

from __future__ import annotations

import functools
import typing as t
from dataclasses import dataclass, field, replace

from sqlglot import exp

from dpsql._policy.policy import TablePolicy
from dpsql._sql.allow import check_rowwise
from dpsql._sql.build import BASE
from dpsql._sql.size import FILTER, KEY, Bound, inlined
from dpsql._sql.suggest import did_you_mean
from dpsql.errors import BindError

if t.TYPE_CHECKING:
    from dpsql._sql.options import Options

ReadPublic = t.Callable[[str], "list[tuple[t.Any, ...]]"]
"""``read_public(sql) -> rows`` of a query that reads public tables only."""


@dataclass
class JoinContext:
    """What binding a FROM clause with joins needs beyond the policy and the catalog."""

    options: "Options"
    read_public: ReadPublic | None = None
    database: str | None = None
    #: the next number of a reserved join or flat-map alias (``__j1``, ``__f1``, ...)
    counter: list[int] = field(default_factory=lambda: [0])
    #: a WHERE of the SELECT being resolved, or of one around it, looks selective
    #: (:func:`dpsql._sql.links.selective`): a linked table then reads its unit per row
    selective: bool = False

    def alias(self, prefix: str) -> str:
        self.counter[0] += 1
        return f"__{prefix}{self.counter[0]}"



Columns = dict[str, exp.Expression | None]


def base_columns(names: t.Iterable[str]) -> Columns:
    """The columns ``names`` of the private table, each read as ``"__t"."name"``: a new dict
    (the binder adds to it) of nodes built once per set of names and shared, never changed
    (:meth:`Relation.column` hands out copies). Building them for every column of every table
    a query names cost 7 µs a column at each plan.

    >>> cols = base_columns(["age", "sex"])
    >>> cols["age"].sql("duckdb"), cols is base_columns(["age", "sex"])
    ('"__t"."age"', False)
    """
    return dict(_base_columns(tuple(names)))


@functools.lru_cache(maxsize=512)
def _base_columns(names: tuple[str, ...]) -> dict[str, exp.Expression]:
    return {c: exp.column(c, table=BASE, quoted=True) for c in names}


#: placeholder names of bound ``IN (SELECT ...)`` filters while an expression is checked
_FROZEN = "__in"


@dataclass
class Relation:
    """A private table seen through row-wise CTEs, subqueries, joins and flat maps, inlined."""

    table: TablePolicy
    #: output column name -> expression over the reserved aliases (``None``: the name is ambiguous)
    columns: Columns
    #: the name columns may be qualified with (the alias, or the table's or CTE's name)
    alias: str | None
    #: every WHERE of every level, over the reserved aliases
    where: list[exp.Expression] = field(default_factory=list)
    #: what ``__t`` is: ``None`` for the base table itself, else a derived FROM item (a per-unit
    #: subquery, or the private table truncated for a private join)
    source: exp.Expression | None = None
    #: the privacy unit as an expression over ``__t`` (``None`` for row-level privacy)
    unit: exp.Expression | None = None
    #: whether each row is one privacy unit (a GROUP BY of the unit below)
    per_unit: bool = False
    #: a per-unit relation's count columns (``__p1``, ...): the column of the count clipped to
    #: ``0..k`` that a GROUP BY of it reads, and k (dpsql._sql.unitcount)
    count_keys: dict[str, tuple[str, int]] = field(default_factory=dict)
    #: the FROM clause after ``<source> AS __t``: joins and flat maps over reserved names (trees
    #: shared between relations: never changed, copied where they are placed)
    joins: list[exp.Join] = field(default_factory=list)
    #: the aliases whose rows together identify one row of the relation (the row hash)
    hashed: tuple[str, ...] = (BASE,)
    #: row units: the rows of this relation one protected change alters (m, times the factors
    #: of flat maps and joins; see dpsql._privacy.joins). Id units truncate after the joins.
    rows: int = 1
    #: what each join and flat map did to the sensitivity, for EXPLAIN
    steps: list[str] = field(default_factory=list)
    #: a join level: qualified names (``alias.column``) of each of its FROM items
    scopes: dict[str, Columns] | None = None
    #: the join options the FROM clause used (an option given and unused is refused)
    used: set[str] = field(default_factory=set)
    #: whether a join or flat map is in the FROM chain (rows may be dropped or multiplied)
    joined: bool = False
    #: the policy of each joined table, by its reserved alias (bounds of its columns)
    joined_tables: dict[str, TablePolicy] = field(default_factory=dict)
    #: binds ``x IN (SELECT c FROM public_table ...)`` (see dpsql._sql.joins.public_in); None:
    #: subqueries stay refused
    public_in: t.Callable[[exp.In, "Relation"], exp.Expression] | None = None

    def bounds_table(self) -> TablePolicy | None:
        """The table whose per-unit bounds apply to rows joined from several tables of one id unit:
        the one with the largest ``max_rows_per_unit`` (``None`` when that is the FROM table). A join
        along a link gives each row of the linking table one row (``orders JOIN lineitem`` holds a
        customer's line items, not orders), so the largest bound is the one its rows are counted in;
        whichever is chosen, the truncation after the join enforces it.
        """
        if self.table.privacy_unit == "row" or self.per_unit:
            return None
        same = [tp for tp in self.joined_tables.values() if not tp.public and tp.privacy_unit == self.table.privacy_unit]
        best = max([self.table, *same], key=lambda tp: tp.max_rows_per_unit or 0)
        return None if best is self.table else best

    def carried(self, columns: Columns, alias: str | None, where: list[exp.Expression]) -> "Relation":
        """A relation over the same rows (same table, source, unit and joins) with other columns."""
        return replace(self, columns=columns, alias=alias, where=where, scopes=None)

    def from_sql(self, relation: exp.Expression) -> str:
        """DuckDB's text of the FROM chain: ``relation AS __t`` and the joins (:func:`from_sql`)."""
        return from_sql(relation, self.joins)

    def add_scope(self, alias: str, columns: Columns) -> None:
        """Add a FROM item's columns under ``alias`` (a join level); a name both sides have is
        ambiguous unless qualified."""
        assert self.scopes is not None
        if alias in self.scopes:
            raise BindError(f"the name {alias} is used twice in one FROM clause; give one an alias")
        self.scopes[alias] = columns
        for name, expr in columns.items():
            self.columns[name] = None if name in self.columns else expr

    def base_column(self, expr: exp.Expression | None) -> str | None:
        """The policy column an inlined expression reads directly (for bounds and keys)."""
        return base_column(expr) if not self.per_unit else None

    def owner(self, expr: exp.Expression | None) -> tuple[TablePolicy, str] | None:
        """The policy table and column an inlined expression reads directly (for bounds and
        types): a column of the private table, or of a joined table."""
        while isinstance(expr, exp.Paren):
            expr = expr.this
        if not isinstance(expr, exp.Column):
            return None
        if expr.table == BASE:
            return (self.table, expr.name) if not self.per_unit else None
        tp = self.joined_tables.get(expr.table)
        return (tp, expr.name) if tp is not None else None

    def column(self, col: exp.Column, where: str) -> exp.Expression:
        """The expression that a column reference of the next level up stands for."""
        return self._stored(col, where).copy()

    def _stored(self, col: exp.Column, where: str) -> exp.Expression:
        qual = col.table.lower() if col.table else None
        columns = self.columns
        if qual and self.scopes is not None and qual in self.scopes:
            columns = self.scopes[qual]
        elif qual and qual != self.alias:
            raise BindError(f"unknown table or alias {col.table} in {col.sql(dialect='duckdb')}")
        name = col.name.lower()
        if name not in columns:
            raise BindError(f"column {col.name} does not exist in {qual or self.table.name}"
                            + did_you_mean(col.name, [c for c in columns if not c.startswith("__")]))
        expr = columns[name]
        if expr is None:
            raise BindError(f"column {col.name} is ambiguous in {where}: more than one column has "
                            "that name; qualify it with its table")
        return expr

    def substitute(self, node: exp.Expression, where: str) -> exp.Expression:
        """Check ``node`` against the allowlist and rewrite its columns over the reserved aliases.

        ``x IN (SELECT c FROM public_table ...)`` is bound on its own (a filter by public
        values) and stands in the checked expression as a placeholder until the end.
        """
        node = node.copy()
        frozen: dict[str, exp.Expression] = {}
        if self.public_in is not None:
            for sub in list(node.find_all(exp.In, exp.Exists)):  # dpsql._sql.insubquery binds both
                if isinstance(sub, exp.Exists) or sub.args.get("query") is not None:
                    name = f"{_FROZEN}{len(frozen)}"
                    frozen[name] = self.public_in(sub, self)
                    if sub is node:
                        node = exp.column(name)
                    else:
                        sub.replace(exp.column(name))
        def size(col: exp.Column) -> Bound:
            if col.name in frozen and not col.table:
                return FILTER
            return inlined(self._stored(col, where), where, self.table.name)

        bound = check_rowwise(node, where, self.table.name, size)

        def swap(n: exp.Expression) -> exp.Expression:
            if isinstance(n, exp.Column):
                if n.name in frozen and not n.table:
                    return frozen[n.name]
                value = self.column(n, where)
                return value if isinstance(value, (exp.Column, exp.Literal)) else exp.Paren(this=value)
            return n

        out = node.transform(swap, copy=False)
        out.meta[KEY] = bound
        return out


def from_sql(relation: exp.Expression, joins: t.Sequence[exp.Join]) -> str:
    """DuckDB's text of a FROM chain, ``relation AS __t`` and its joins: the one place the
    chain is printed (without sqlglot's defensive copy: DuckDB's generator changes no node of
    a FROM chain, and the copy would cost more than the print).

    >>> from_sql(exp.to_table("t"), [exp.Join(this=exp.to_table("u"), kind="SEMI", on=exp.column("x"))])
    't AS __t SEMI JOIN u ON x'
    """
    return " ".join([f"{relation.sql(dialect='duckdb', copy=False)} AS {BASE}",
                     *(j.sql(dialect="duckdb", copy=False).strip() for j in joins)])


def base_column(expr: exp.Expression | None) -> str | None:
    """The base table column an inlined expression reads directly (for policy bounds and keys)."""
    while isinstance(expr, exp.Paren):
        expr = expr.this
    if isinstance(expr, exp.Column) and expr.table == BASE:
        return expr.name
    return None
