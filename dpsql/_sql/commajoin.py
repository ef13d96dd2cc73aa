"""Comma joins (``FROM a, b WHERE a.k = b.k``) read as the INNER JOINs they are.

The official TPC-H texts join with commas and put the join equalities in WHERE. An inner join's
ON and its WHERE filter the same cross product, so a conjunct of WHERE that equates a column of
a joined table with a column of the tables before it can move into that join's ON without
changing any row of the result (the three-valued ``=`` drops the same rows in both places, and
inner joins commute). :func:`comma_joins` does that move and nothing else; the joins it writes
are then bound exactly as if the query had spelled them (:mod:`dpsql._sql.joins`), so a join
condition taken from WHERE is exactly as safe as one written in ON: the same rules, bounds and
refusals apply.

It moves only what it is sure of. The rewrite applies when every join of the FROM is a comma
join of a table by its name, and moves only equalities of two plain columns whose tables are
known (qualified by an alias, or a name only one of the tables has, per the catalog). A
private table that no other one of the FROM links to is read first (inner joins commute); each further table is joined on the
equalities that tie it to the tables already joined, taken in the written order among those
that have one. A join equality
repeated in every branch of an OR (TPC-H Q19) is factored out first (``(A AND X) OR (A AND Y)``
is ``A AND (X OR Y)`` in three-valued logic too). A table with no such equality is left a comma join, and so refused as a
CROSS JOIN, as before. A query whose projection has ``*`` (whose column order follows the FROM)
is left as written.
"""

from __future__ import annotations

import typing as t

from sqlglot import exp

from dpsql._policy.policy import TablePolicy
from dpsql.errors import BindError, PrivacyError

__all__ = ["comma_joins"]

Declared = t.Callable[[exp.Table], TablePolicy]
Catalog = t.Callable[[str], "dict[str, str] | None"]


def _is_comma(join: exp.Join) -> bool:
    """A join written with a comma: a table by its name, no kind, side, method, ON or USING.

    >>> from sqlglot import parse_one
    >>> [_is_comma(j) for j in parse_one("SELECT 1 FROM a, b JOIN c ON a.x = c.x").args["joins"]]
    [True, False]
    """
    return (isinstance(join.this, exp.Table) and isinstance(join.this.this, exp.Identifier)
            and not any(join.args.get(k) for k in ("kind", "side", "method", "on", "using")))


def _conjuncts(where: exp.Expression | None) -> list[exp.Expression]:
    if where is None:
        return []
    node = where.this
    return list(node.flatten()) if isinstance(node, exp.And) else [node]


def _owner(col: exp.Column, columns: dict[str, set[str]]) -> str | None:
    """The alias of the one table ``col`` belongs to, or None when it is not sure.

    >>> _owner(exp.column("x", "a"), {"a": {"x"}, "b": {"x"}})
    'a'
    >>> _owner(exp.column("x"), {"a": {"x"}, "b": {"x"}}) is None
    True
    >>> _owner(exp.column("y"), {"a": {"x"}, "b": {"y"}})
    'b'
    """
    if col.table:
        alias = col.table.lower()
        return alias if alias in columns and not col.db else None
    found = [alias for alias, names in columns.items() if col.name.lower() in names]
    return found[0] if len(found) == 1 else None


def _pair(node: exp.Expression, columns: dict[str, set[str]]) -> tuple[str, str] | None:
    """The two tables an equality of two plain columns ties, or None."""
    while isinstance(node, exp.Paren):
        node = node.this
    if not isinstance(node, exp.EQ) or not isinstance(node.this, exp.Column) \
            or not isinstance(node.expression, exp.Column):
        return None
    a, b = _owner(node.this, columns), _owner(node.expression, columns)
    return (a, b) if a is not None and b is not None and a != b else None


def _and_terms(node: exp.Expression) -> list[exp.Expression]:
    while isinstance(node, exp.Paren):
        node = node.this
    return list(node.flatten()) if isinstance(node, exp.And) else [node]


def _same(a: exp.Expression, b: exp.Expression) -> bool:
    """Whether two terms are one equality, either way round (``x = y``, ``y = x``)."""
    def key(n: exp.Expression) -> tuple[str, ...]:
        while isinstance(n, exp.Paren):
            n = n.this
        return tuple(sorted((n.this.sql(), n.expression.sql()))) if isinstance(n, exp.EQ) else (n.sql(),)
    return key(a) == key(b)


def _factor(term: exp.Expression, columns: dict[str, set[str]]) -> list[exp.Expression]:
    """``(A AND X) OR (A AND Y)`` as ``A``, ``(X) OR (Y)`` when ``A`` is a join equality of every
    branch (TPC-H Q19): AND distributes over OR in SQL's three-valued logic, so the rows kept
    are the same; anything else is returned as it is.

    >>> cols = {"a": {"x", "p"}, "b": {"y"}}
    >>> t = exp.maybe_parse("(x = y AND p = 1) OR (x = y AND p = 2)")
    >>> [c.sql() for c in _factor(t, cols)]
    ['x = y', '(p = 1) OR (p = 2)']
    >>> [c.sql() for c in _factor(exp.maybe_parse("(x = y AND p = 1) OR p = 2"), cols)]
    ['(x = y AND p = 1) OR p = 2']
    """
    node = term
    while isinstance(node, exp.Paren):
        node = node.this
    if not isinstance(node, exp.Or):
        return [term]
    branches = [_and_terms(b) for b in node.flatten()]
    common = [c for c in branches[0] if _pair(c, columns) is not None
              and all(any(_same(o, c) for o in b) for b in branches[1:])]
    if not common:
        return [term]
    rest = [[c for c in b if not any(_same(c, m) for m in common)] for b in branches]
    if any(not b for b in rest):  # a branch that is the join equality alone: the OR is just it
        return [c.copy() for c in common]
    ors = [exp.Paren(this=exp.and_(*(c.copy() for c in b))) for b in rest]
    out = ors[0]
    for o in ors[1:]:
        out = exp.Or(this=out, expression=o)
    return [*(c.copy() for c in common), out]


def _tables(items: list[exp.Table], declared: Declared, catalog: Catalog
            ) -> tuple[dict[str, set[str]], list[str]] | None:
    """Each table's columns by alias, and the aliases of the private ones; None to leave the query."""
    columns: dict[str, set[str]] = {}
    private: list[str] = []
    targets: set[str] = set()
    names_of: dict[str, str] = {}
    for item in items:
        alias = (item.alias_or_name or item.name).lower()
        try:
            tp = declared(item)
        except (BindError, PrivacyError):
            return None  # the binder says what is wrong with the table
        names = catalog(tp.name)
        if alias in columns or not names:
            return None
        columns[alias] = {c.lower() for c in names}
        if not tp.public:
            private.append(alias)
            targets.add(tp.link.table if tp.link is not None else "")
            names_of[alias] = tp.name
    # read first a private table no other one links to (lineitem before orders): its rows carry
    # the finest grain, so its own bounds and keys apply
    leaves = [a for a in private if names_of[a] not in targets]
    return columns, leaves + [a for a in private if a not in leaves]


def comma_joins(select: exp.Select, declared: Declared, catalog: Catalog) -> None:
    """Rewrite ``select``'s comma joins in place as INNER JOINs on their WHERE equalities.

    >>> from sqlglot import parse_one
    >>> from dpsql._policy.policy import TablePolicy
    >>> q = parse_one("SELECT count(*) FROM part, lineitem WHERE p_partkey = l_partkey AND p_size = 3")
    >>> cols = {"part": {"p_partkey": "INT", "p_size": "INT"}, "lineitem": {"l_partkey": "INT"}}
    >>> tps = {n: TablePolicy(name=n, public=(n == "part")) for n in cols}
    >>> comma_joins(q, lambda tb: tps[tb.name], cols.get)
    >>> q.sql()
    'SELECT COUNT(*) FROM lineitem JOIN part ON p_partkey = l_partkey WHERE p_size = 3'
    """
    joins = select.args.get("joins") or []
    first = select.args["from_"].this
    if not joins or not isinstance(first, exp.Table) or not isinstance(first.this, exp.Identifier) \
            or not all(_is_comma(j) for j in joins) or select.args.get("laterals") \
            or any(isinstance(p, exp.Star) or (isinstance(p, exp.Column) and isinstance(p.this, exp.Star))
                   for p in select.expressions):
        return
    items = [first, *(j.this for j in joins)]
    found = _tables(items, declared, catalog)
    if found is None or not found[1]:
        return
    columns, private = found
    by_alias = {(it.alias_or_name or it.name).lower(): it for it in items}
    rest = [f for c in _conjuncts(select.args.get("where")) for f in _factor(c, columns)]
    placed, waiting = [private[0]], [a for a in by_alias if a != private[0]]
    new_joins: list[exp.Join] = []
    while waiting:
        for alias in waiting:
            mine = [c for c in rest if (p := _pair(c, columns)) and alias in p
                    and (p[0] if p[1] == alias else p[1]) in placed]
            if mine:
                break
        else:
            break  # no table is tied to the joined ones: left as comma joins (a CROSS JOIN, refused)
        rest = [c for c in rest if all(c is not m for m in mine)]
        on = mine[0].copy() if len(mine) == 1 else exp.and_(*(m.copy() for m in mine))
        new_joins.append(exp.Join(this=by_alias[alias].copy(), on=on))
        placed.append(alias)
        waiting.remove(alias)
    new_joins += [exp.Join(this=by_alias[alias].copy()) for alias in waiting]
    select.set("from_", exp.From(this=by_alias[private[0]].copy()))
    select.set("joins", new_joins)
    where = exp.and_(*(c.copy() for c in rest)) if rest else None
    select.set("where", exp.Where(this=where) if where is not None else None)
