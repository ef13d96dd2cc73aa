"""SQL templates as sqlglot trees: a constant text parsed once, then copied and filled per query.

A template is DuckDB SQL whose variable parts are names with the prefix ``_Z_`` (slots). It
is parsed on first use (:func:`parsed`, cached); :func:`fill` copies it and fills every slot
by its value:

* a ``str``: the name itself becomes that name (a CTE, a table or a column: ``_Z_h AS (...)``);
* a table (``exp.Table``) where the slot is a table: its name, schema and catalog (the slot's
  alias stays);
* an expression: the column ``_Z_x`` becomes (a copy of) it;
* a sequence (names or expressions): the column ``_Z_keys`` in a list (a select list, GROUP
  BY, PARTITION BY) becomes those items, names qualified as the slot is (``m._Z_keys``); with
  none the item goes, and so does a GROUP BY or PARTITION BY left empty.

The mechanisms' per-group subqueries (the order statistics of :mod:`dpsql._sql.build`, the
chunks of SAA) are built so: every compiler takes them as trees and none parses SQL text for
them; the constant part is parsed once per process. The mechanisms keep the last trees they
built (``functools.lru_cache`` on their arguments): such a tree is shared by the plans that ask
for the same subquery, so it is never changed: a compiler that rewrites it copies it first
(:meth:`dpsql._compile.spark.SparkCompiler.mechanism`), and DuckDB's keeps its text with it
(:meth:`dpsql._compile.compiler.Compiler.mechanism`).

>>> fill("SELECT _Z_keys, COUNT(*) AS __c FROM _Z_src GROUP BY _Z_keys", keys=["__k0"], src="__src").sql()
'SELECT __k0, COUNT(*) AS __c FROM __src GROUP BY __k0'
>>> fill("SELECT _Z_keys, COUNT(*) AS __c FROM _Z_src GROUP BY _Z_keys", keys=[], src="__src").sql()
'SELECT COUNT(*) AS __c FROM __src'
>>> fill("SELECT * FROM _Z_t AS x", t=exp.table_("a b", db="s", quoted=True)).sql()
'SELECT * FROM "s"."a b" AS x'
"""

from __future__ import annotations

import functools
import typing as t

import sqlglot
from sqlglot import exp

PREFIX = "_Z_"

Slot = str | exp.Expression | t.Sequence[str | exp.Expression]


@functools.cache
def parsed(text: str) -> exp.Expression:
    """The template ``text`` (DuckDB SQL) parsed, once per process: never changed, only copied."""
    return t.cast(exp.Expression, sqlglot.parse_one(text, read="duckdb"))


Path = tuple[tuple[str, int | None], ...]


@functools.cache
def _slots(text: str) -> tuple[tuple[Path, str], ...]:
    """Where the slots of the template are (the path from the root to each slot's name, and
    the slot), last first: filling one then moves none of those still to fill."""
    out = []
    for ident in parsed(text).find_all(exp.Identifier):
        if ident.this.startswith(PREFIX):
            path, node = [], ident
            while node.parent is not None:
                path.append((node.arg_key, node.index))
                node = node.parent
            out.append((tuple(reversed(path)), ident.this[len(PREFIX):]))
    return tuple(reversed(out))


def _at(tree: exp.Expression, path: Path) -> exp.Expression:
    node = tree
    for key, index in path:
        node = node.args[key] if index is None else node.args[key][index]
    return node


def fill(text: str, **slots: Slot) -> exp.Expression:
    """A copy of the template ``text`` with its slots filled (see the module's docstring)."""
    tree = parsed(text).copy()
    used: set[int] = set()
    for path, slot in _slots(text):
        ident = _at(tree, path)
        value = slots[slot]
        if isinstance(value, str):
            ident.set("this", value)
            continue
        column = ident.parent
        if isinstance(column, exp.Table) and isinstance(value, exp.Table):
            for key in ("this", "db", "catalog"):
                part = value.args.get(key)
                column.set(key, part.copy() if part is not None else None)
            continue
        assert isinstance(column, exp.Column), f"slot {slot} is not a column"
        if isinstance(value, exp.Expression):
            column.replace(_once(value, used))
        else:
            qualifier = column.table
            items = [exp.column(v, qualifier or None) if isinstance(v, str) else _once(v, used) for v in value]
            _splice(column, items)
    return tree


def _once(value: exp.Expression, used: set[int]) -> exp.Expression:
    """``value`` the first time it is placed, a copy after that (a node has one parent)."""
    if id(value) in used or value.parent is not None:
        return value.copy()
    used.add(id(value))
    return value


def _splice(node: exp.Expression, items: list[exp.Expression]) -> None:
    """Put ``items`` where ``node`` is in its parent's list; drop a GROUP BY or PARTITION BY
    left empty."""
    parent, key = node.parent, node.arg_key
    assert parent is not None
    siblings = parent.args[key]
    at = next(i for i, s in enumerate(siblings) if s is node)
    rest = [*siblings[:at], *items, *siblings[at + 1:]]
    if rest:
        parent.set(key, rest)
    elif isinstance(parent, exp.Group):
        parent.pop()
    else:
        parent.set(key, None)


def conjunction(terms: t.Sequence[exp.Expression]) -> exp.Expression:
    """``a AND b AND ...``; ``TRUE`` for none."""
    out: exp.Expression | None = None
    for term in terms:
        term = exp.Paren(this=term) if isinstance(term, exp.Connector) else term
        out = term if out is None else exp.And(this=out, expression=term)
    return out if out is not None else exp.Boolean(this=True)


def same_keys(left: str, right: str, names: t.Sequence[str]) -> list[exp.Expression]:
    """``left.k IS NOT DISTINCT FROM right.k`` for every key (NULL is a key like any other).

    >>> [e.sql("duckdb") for e in same_keys("a", "m", ["__k0"])]
    ['a.__k0 IS NOT DISTINCT FROM m.__k0']
    """
    return [exp.NullSafeEQ(this=exp.column(k, left), expression=exp.column(k, right)) for k in names]


def double(x: float) -> exp.Cast:
    """``CAST(x AS DOUBLE)``, ``x`` written as its ``repr`` (:func:`dpsql._sql.build.literal`).

    >>> double(0.5).sql("duckdb")
    'CAST(0.5 AS DOUBLE)'
    """
    return exp.Cast(this=exp.Literal(this=repr(float(x)), is_string=False),
                    to=exp.DataType(this=exp.DataType.Type.DOUBLE))


def number(x: int | float) -> exp.Literal:
    """A number written as its ``repr``."""
    return exp.Literal(this=repr(x), is_string=False)
