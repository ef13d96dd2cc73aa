"""Subqueries that filter the rows of a DP query: ``IN (SELECT ...)`` and ``[NOT] EXISTS (...)``.

Two shapes are bound, each a filter whose outcome for a row depends on that row and on rows that
one person's change cannot reach through any other row:

* **over a public table**: ``x IN (SELECT c FROM public_table [WHERE p])`` and
  ``EXISTS (SELECT ... FROM public_table WHERE p)``. The subquery's rows are public, so whether a
  private row is kept depends on that row and public values only, like any WHERE.
* **over a private table of the same privacy unit** (a semi join, TPC-H Q4, Q21, Q22):
  ``[NOT] EXISTS (SELECT ... FROM t2 WHERE t2.unit = outer.unit AND p)`` and
  ``x [NOT] IN (SELECT c FROM t2 WHERE t2.unit = outer.unit AND p)`` (or, without the equality,
  ``unit [NOT] IN (SELECT unit_of_t2 FROM t2 [WHERE p])``). The equality on the unit, a conjunct
  of the subquery's WHERE, is required: it is what keeps the filter inside one person's rows.

Sensitivity of the same-unit semi join (the proof EXPLAIN's unit line relies on)
    Write a database ``D`` as the disjoint union of ``D_v``, the rows of each unit ``v`` in every
    table (a row of ``t2`` is the unit's whose value its unit column holds). Let ``R(D)`` be the
    outer relation before the filter: a private table, possibly joined along its unit with other
    tables of that unit and with public tables, so that each row ``r`` carries one unit
    ``unit(r)`` and the rows of ``R(D)`` of unit ``v`` are a function of ``D_v`` and public data.
    The filter keeps ``r`` iff ``∃ s ∈ t2(D): s.unit = unit(r) ∧ p(r, s)`` (or its negation, or
    the three-valued IN over ``{c(s) : s.unit = unit(r) ∧ p(r, s)}``). Every ``s`` with
    ``s.unit = unit(r)`` is in ``D_unit(r)``, since ``=`` holds for no NULL, and the unit columns
    are of one type (:func:`dpsql._policy.units.unit_key_problem`), so ``=`` equates exactly the
    values the per-unit truncation tells apart. Hence the filter's outcome for ``r`` is
    ``f(r, D_unit(r))``, and the filtered relation's rows of unit ``v`` are a function of
    ``D_v`` and public data alone. Adding or removing one unit ``u`` (all of ``D_u``) therefore
    changes only the rows of unit ``u``, exactly as a row-wise WHERE would; the per-unit bounds
    (``max_rows_per_unit``, groups per unit, ...) then hold as they are, and every sensitivity
    the plan derives for the relation with a row-wise filter is unchanged: the semi join
    multiplies nothing (factor 1). Without the unit equality the outcome for ``r`` could depend
    on another person's rows (one person's row could switch every other person's rows in or
    out), which is why it is refused. ``tests/test_semijoin.py`` checks this by brute force over
    every person's removal and addition on small tables, with a negative control (the equality
    check lifted) that the brute force catches.

``unit [NOT] IN (SELECT unit_of_t2 FROM t2 ...)`` runs with the unit equality made explicit, so a
row of ``t2`` whose unit is NULL belongs to nobody and is in no one's set (plain SQL would make
every ``NOT IN`` NULL because of it: one such row would drop everyone's rows).

**Linked tables** (TPC-H Q4 and Q21: ``EXISTS (SELECT * FROM lineitem WHERE l_orderkey =
o_orderkey AND ...)`` over ``orders``). When the inner or the outer table reaches its unit
through a link (:mod:`dpsql._policy.links`), the subquery must be correlated on the unit or on a
link key (an equality :func:`dpsql._sql.links.is_link_pair` accepts: ``l_orderkey = o_orderkey``,
``o_custkey = c_custkey``, or ``l2.l_orderkey = l1.l_orderkey`` on one link column), or, for
IN, compare such a pair itself (``o_orderkey [NOT] IN (SELECT l_orderkey FROM lineitem ...)``:
the same semi join as EXISTS with the equality), and the rewrite does not rely on it: it reads the inner table with the joins up its links (the same
attribution the truncation uses) and adds the unit equality ``unit(s) = unit(r)`` itself. The
proof above then holds as written, ``s.unit`` being the attributed unit: by the links'
neighbouring relation every other unit's attributed rows are the same in both neighbours, so
the inner rows of unit ``unit(r)`` are a function of ``D_unit(r)``. A link key that is not a key
in the data (an order key under two customers) then tests each row against its own
customer's rows only, never another's. The link equality is required though the unit equality
is what protects: it is what makes the added equality change no answer where keys are keys.
IN keeps its three-valued meaning over the unit's own rows (a NULL outer key, or a NULL among
the unit's selected values, makes NOT IN unknown), which is still ``f(r, D_unit(r))``; a NULL
link key of the inner table is an orphan, in nobody's set. Everything else in a subquery over
private rows stays refused (see
:mod:`dpsql._sql.allow`). The SQL the filter becomes is total: values are cast with TRY_CAST and
predicates wrapped so that no row can make it fail.
"""

from __future__ import annotations

import typing as t
import zlib

from sqlglot import exp

from dpsql._policy.policy import Policy, TablePolicy
from dpsql._policy.units import unit_key_problem
from dpsql._sql.allow import check_rowwise
from dpsql._sql.joins import Catalog, Declared, qualified, try_cast
from dpsql._sql.links import is_link_pair, link_unit
from dpsql._sql.relation import Columns, Relation
from dpsql._sql.size import COLUMN, Bound, inlined
from dpsql._sql.template import conjunction
from dpsql._sql.total import total
from dpsql.errors import PrivacyError

_SHAPE = "SELECT ... FROM public_table [WHERE ...], or FROM a table of the same unit"


def _refuse(msg: str) -> t.NoReturn:
    raise PrivacyError(msg)


def _sql(node: exp.Expression) -> str:
    return node.sql(dialect="duckdb")


def _conjuncts(node: exp.Expression | None) -> list[exp.Expression]:
    """The top-level AND terms of ``node`` (parentheses removed).

    >>> [_sql(c) for c in _conjuncts(exp.maybe_parse("a = 1 AND (b = 2 AND c < 3)"))]
    ['a = 1', 'b = 2', 'c < 3']
    """
    if node is None:
        return []
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    return [node]


class _Inner:
    """The subquery's one table under a reserved alias, and the resolution of the names in its
    WHERE: a name of the inner table (unqualified, or qualified by its alias), else the outer
    query's (a correlated reference)."""

    def __init__(self, node: exp.Expression, query: exp.Select, declared: Declared, catalog: Catalog,
                 what: str) -> None:
        source = query.args.get("from_")
        table = source.this if source is not None else None
        if not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier):
            _refuse(f"{what} in a DP query may only be {_SHAPE}")
        if any(v for k, v in table.args.items() if k not in ("this", "db", "catalog", "alias")):
            _refuse(f"{what}: table-level operators (TABLESAMPLE, PIVOT, ...) are not allowed in a DP query")
        self.tp: TablePolicy = declared(table)
        self.types = catalog(self.tp.name) or {}
        self.alias = (table.alias_or_name or table.name).lower()
        self.name = f"__i{zlib.crc32(node.sql().encode()) % 10**8}"
        self.what = what
        self.columns: Columns = {c: exp.column(c, table=self.name, quoted=True) for c in self.types}

    def is_inner(self, col: exp.Column) -> bool:
        qual = col.table.lower() if col.table else None
        return qual == self.alias if qual else col.name.lower() in self.columns

    def resolve(self, col: exp.Column, rel: Relation) -> exp.Expression:
        """A name of the subquery's WHERE over the reserved aliases. A public table's subquery
        sees only its own table (a filter by public values needs no correlation)."""
        if self.is_inner(col) or self.tp.public:
            return Relation(self.tp, self.columns, self.alias).column(col, self.what)
        return rel.column(col, self.what)

    def predicate(self, where: exp.Expression, rel: Relation) -> exp.Expression:
        """``where`` over the reserved aliases, on the allowlist and made total."""
        def size(col: exp.Column) -> Bound:
            return COLUMN if self.is_inner(col) or self.tp.public else inlined(rel.column(col, self.what), self.what, rel.table.name)

        node = where.copy()
        check_rowwise(node, self.what, self.tp.name, size)

        def swap(n: exp.Expression) -> exp.Expression:
            if isinstance(n, exp.Column):
                value = self.resolve(n, rel)
                return value if isinstance(value, (exp.Column, exp.Literal)) else exp.Paren(this=value)
            return n

        return total(node.transform(swap, copy=False))

    def select(self, picked: exp.Expression, database: str | None, joins: list[exp.Join],
               terms: list[exp.Expression]) -> exp.Select:
        """``SELECT picked FROM table AS __i... joins WHERE terms``: the subquery over reserved names."""
        out = exp.select(picked).from_(exp.alias_(qualified(self.tp, database), self.name, table=True), copy=False)
        if joins:
            out.set("joins", [j.copy() for j in joins])
        if terms:
            out.set("where", exp.Where(this=conjunction(terms)))
        return out


def _same_unit(inner: _Inner, rel: Relation, catalog: Catalog) -> None:
    """Refuse a subquery over a private table unless it has the outer rows' id unit, in one type."""
    tp, outer = inner.tp, rel.table
    what = inner.what
    if rel.unit is None or rel.per_unit or tp.privacy_unit == "row":
        _refuse(f"{what} over private table {tp.name} is allowed only between tables of one id privacy unit "
                f"(a semi join within each person's rows); {outer.name if rel.unit is None else tp.name}'s "
                "unit is a row")
    same_root = (tp.link is not None or outer.link is not None) and \
        (tp.unit_root or tp.name) == (outer.unit_root or outer.name)  # linked to one unit table
    if tp.name != outer.name and not same_root and (tp.unit_name is None or tp.unit_name != outer.unit_name):
        _refuse(f"{what} over private table {tp.name}: it does not share {outer.name}'s privacy unit; if "
                f"{tp.privacy_unit} and {outer.privacy_unit} identify the same individuals, give both tables "
                "the same unit_name in the policy")
    if tp.link is not None or outer.link is not None:
        return  # linked units are read in the unit column's type (dpsql._sql.links), on both sides
    if problem := unit_key_problem([(f"{outer.name}.{outer.privacy_unit}", (catalog(outer.name) or {}).get(outer.privacy_unit)),
                                    (f"{tp.name}.{tp.privacy_unit}", inner.types.get(tp.privacy_unit))]):
        _refuse(problem)


def _column_pairs(where: exp.Expression | None) -> t.Iterator[tuple[exp.Column, exp.Column]]:
    """Each conjunct ``a = b`` of two columns, as ``(a, b)`` and as ``(b, a)``."""
    for term in _conjuncts(where):
        if isinstance(term, exp.EQ) and isinstance(term.this, exp.Column) and isinstance(term.expression, exp.Column):
            yield term.this, term.expression
            yield term.expression, term.this


def _correlated(inner: _Inner, rel: Relation, where: exp.Expression | None) -> bool:
    """Whether a conjunct of the subquery's WHERE equates the inner table's unit column with the
    outer rows' unit (``rel.unit``), both as the columns themselves."""
    assert rel.unit is not None
    unit = _sql(rel.unit)
    for mine, theirs in _column_pairs(where):
        if inner.is_inner(mine) and mine.name.lower() == inner.tp.privacy_unit \
                and not inner.is_inner(theirs) and _sql(inner.resolve(theirs, rel)) == unit:
            return True
    return False


def _link_correlated(inner: _Inner, rel: Relation, where: exp.Expression | None) -> bool:
    """Whether a conjunct of the subquery's WHERE equates a column of the inner table with a
    column of an outer private table along a link (either way, or one link column with itself)."""
    for mine, theirs in _column_pairs(where):
        if not inner.is_inner(mine) or inner.is_inner(theirs):
            continue
        owner = rel.owner(inner.resolve(theirs, rel))
        if owner is not None and not owner[0].public and \
                is_link_pair(inner.tp, mine.name.lower(), owner[0], owner[1]):
            return True
    return False


def _linked_unit(inner: _Inner, rel: Relation, policy: Policy | None, catalog: Catalog,
                 database: str | None) -> tuple[list[exp.Join], list[exp.Expression]]:
    """The joins up the inner table's links (after its FROM item) and the conditions that keep
    its rows of the outer row's unit only: ``unit(s) = unit(r)``."""
    assert rel.unit is not None
    if inner.tp.link is None:
        return [], [_same(inner.columns[inner.tp.privacy_unit], rel.unit)]  # type: ignore[arg-type]
    if policy is None:
        _refuse(f"{inner.what} over linked table {inner.tp.name} is not supported here")
    count = iter(range(1, 1000))
    found = link_unit(inner.tp, inner.name, policy, catalog, database, lambda: f"{inner.name}l{next(count)}")
    return list(found.joins), [*found.where, _same(found.unit, rel.unit)]


def _same(unit: exp.Expression, outer: exp.Expression) -> exp.EQ:
    """``unit = outer``: the inner row's unit is the outer row's (``=``: a NULL unit is nobody's)."""
    return exp.EQ(this=unit.copy(), expression=outer.copy())


def _fix(inner: _Inner, rel: Relation) -> str:
    """The correlation to add, for the refusal: along the inner table's link, or on the unit."""
    link = inner.tp.link
    if link is not None:
        return f"{inner.alias}.{link.column} = {link.table}.{link.target}"
    outer = rel.table
    theirs = outer.link.column if outer.link is not None else outer.privacy_unit
    return f"{inner.alias}.{inner.tp.privacy_unit} = {outer.name}.{theirs}"


def _link_keyed(inner: _Inner, rel: Relation, picked: exp.Column, value: exp.Expression) -> bool:
    """Whether ``x IN (SELECT c ...)`` compares along a link: ``c`` a column of the inner table
    and ``x`` (as bound over the outer rows) a column of an outer private table, the two a link
    pair (``o_orderkey IN (SELECT l_orderkey FROM lineitem ...)``), the correlation EXISTS
    spells as ``l_orderkey = o_orderkey`` in its WHERE."""
    owner = rel.owner(value)
    return owner is not None and not owner[0].public and \
        is_link_pair(inner.tp, picked.name.lower(), owner[0], owner[1])


def _in_fix(inner: _Inner, rel: Relation) -> str:
    """The refusal of an IN between linked tables that compares along no link: which column to
    select and test, and the WHERE equality that would do instead."""
    tp, outer = inner.tp, rel.table
    pair = None
    if tp.link is not None and tp.link.table == outer.name:
        pair = (tp.link.target, tp.link.column)
    elif outer.link is not None and outer.link.table == tp.name:
        pair = (outer.link.column, outer.link.target)
    elif tp.name == outer.name and tp.link is not None:
        pair = (tp.link.column, tp.link.column)
    test = f"compare a link key with the column it links ({pair[0]} IN (SELECT {pair[1]} FROM {tp.name} ...)), " \
        if pair else ""
    return (f"IN over private table {tp.name} must compare within one person's rows: {test}or correlate it "
            f"on a link key: add {_fix(inner, rel)} to its WHERE")


def _is_linked(inner: _Inner, rel: Relation) -> bool:
    return not inner.tp.public and (inner.tp.link is not None or rel.table.link is not None)


def _query_of(node: exp.Expression, what: str) -> exp.Select:
    shape = _SHAPE.replace("SELECT ...", "SELECT column") if isinstance(node, exp.In) else _SHAPE
    sub = node.args.get("query") if isinstance(node, exp.In) else node.this
    query = sub.this if isinstance(sub, exp.Subquery) else sub
    if isinstance(query, exp.Select) and query.args.get("joins"):
        _refuse(f"{what} in a DP query may read one table only; join the tables in the outer query")
    if not isinstance(query, exp.Select) or any(
            v for k, v in query.args.items() if k not in ("expressions", "from_", "where")):
        _refuse(f"{what} in a DP query may only be {shape}: no GROUP BY, HAVING, DISTINCT, LIMIT or "
                "set operation inside")
    return query


def _exists(node: exp.Exists, rel: Relation, declared: Declared, catalog: Catalog,
            database: str | None, policy: Policy | None = None) -> exp.Expression:
    what = "EXISTS (SELECT ...)"
    query = _query_of(node, what)
    inner = _Inner(node, query, declared, catalog, what)
    where = query.args["where"].this if query.args.get("where") is not None else None
    linked = _is_linked(inner, rel)
    if not inner.tp.public:
        _same_unit(inner, rel, catalog)
        if not _correlated(inner, rel, where) and not (linked and _link_correlated(inner, rel, where)):
            _refuse(f"EXISTS over private table {inner.tp.name} must be correlated on the privacy unit"
                    f"{' or a link key' if linked else ''}, so that each row is tested against its own person's "
                    f"rows only: add {_fix(inner, rel)} to its WHERE")
    joins, terms = _linked_unit(inner, rel, policy, catalog, database) if linked else ([], [])
    if where is not None:
        terms.append(inner.predicate(where, rel))
    return exp.Paren(this=exp.Exists(this=inner.select(exp.Literal.number(1), database, joins, terms)))


def _in(node: exp.In, rel: Relation, declared: Declared, catalog: Catalog,
        database: str | None, policy: Policy | None = None) -> exp.Expression:
    what = "IN (SELECT ...)"
    query = _query_of(node, what)
    if len(query.expressions) != 1 or not isinstance(query.expressions[0], exp.Column):
        _refuse(f"{what} in a DP query may only be SELECT column FROM public_table [WHERE ...], or FROM a "
                "table of the same unit")
    inner = _Inner(node, query, declared, catalog, what)
    where = query.args["where"].this if query.args.get("where") is not None else None
    picked = query.expressions[0]
    if not inner.is_inner(picked):
        _refuse(f"{what}: the subquery must select a column of {inner.tp.name}")
    value = rel.substitute(node.this, what)
    on_units = False
    linked = _is_linked(inner, rel)
    if not inner.tp.public:
        _same_unit(inner, rel, catalog)
        on_units = picked.name.lower() == inner.tp.privacy_unit and _sql(value) == _sql(rel.unit)
        keyed = linked and _link_keyed(inner, rel, picked, value)
        if not (on_units or keyed or _correlated(inner, rel, where) or (linked and _link_correlated(inner, rel, where))):
            _refuse(_in_fix(inner, rel) if linked else
                    f"IN over private table {inner.tp.name} must compare within one person's rows: select its "
                    f"unit column and test the unit ({rel.table.privacy_unit} IN (SELECT {inner.tp.privacy_unit} "
                    f"...)), or add {inner.alias}.{inner.tp.privacy_unit} = {rel.table.name}."
                    f"{rel.table.privacy_unit} to its WHERE")
    terms = [inner.predicate(where, rel)] if where is not None else []
    joins: list[exp.Join] = []
    if linked:  # the unit equality through the links, whatever the correlation
        joins, unit_terms = _linked_unit(inner, rel, policy, catalog, database)
        terms = unit_terms + terms
    elif not inner.tp.public and on_units:  # the set holds the unit's own value only: made explicit
        terms.insert(0, _same(inner.columns[inner.tp.privacy_unit], rel.unit))  # type: ignore[arg-type]
    col = inner.resolve(picked, rel)
    ctype = inner.types.get(picked.name.lower(), "VARCHAR")
    query = inner.select(col, database, joins, terms)
    return exp.Paren(this=exp.In(this=try_cast(total(value), ctype), query=exp.Subquery(this=query)))


def public_in(declared: Declared, catalog: Catalog, database: str | None, policy: Policy | None = None
              ) -> t.Callable[[exp.Expression, Relation], exp.Expression]:
    """A binder of filtering subqueries (``IN (SELECT ...)``, ``EXISTS (SELECT ...)``) for
    :class:`Relation`: over a public table, or over a private table of the outer rows' unit
    correlated on that unit (see the module docstring for the shapes and the proof).

    ``x`` of ``x IN`` is bound over the outer rows (allowed expressions only) and cast to the
    selected column's type, so that no value can make the comparison fail; the subquery's WHERE
    is checked like a private predicate and made total too.
    """
    def bind(node: exp.Expression, rel: Relation) -> exp.Expression:
        if isinstance(node, exp.Exists):
            return _exists(node, rel, declared, catalog, database, policy)
        assert isinstance(node, exp.In)
        return _in(node, rel, declared, catalog, database, policy)

    return bind
