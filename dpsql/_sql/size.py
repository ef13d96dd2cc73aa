"""How long a value computed from a row can be, and how much work computing it takes: bounds
known before anything is read.

A function whose output can be much longer than its input gives a timing oracle: under
``CASE WHEN <predicate> THEN <long> ELSE 'b' END``, nested ``replace`` calls turn twenty bytes
into megabytes only on the rows that match, and the query's running time counts them. So every
expression over private rows gets a *size model*, computed in the allowlist's own pass over it
(:func:`dpsql._sql.allow.check_rowwise`):

* each value is at most ``a·L + b`` bytes, where ``L`` is the length of the longest value the
  row holds (as text), and ``a`` and ``b`` follow from the query alone: a literal is its
  length, ``||`` adds, ``CASE`` takes its largest branch, ``replace(s, x, y)`` multiplies ``s``
  by ``max(1, len(y) / max(len(x), 1))``, a fixed-width value (a number, a date, a hash) is
  :data:`~dpsql._sql.sizerules.SCALAR` bytes, and so on (one rule per node:
  :mod:`dpsql._sql.sizerules`);
* the work of an expression per row is the bytes its functions write (a regular expression
  replacement's counted 16 times, with the bytes it reads) and the bytes its searches read
  (``LIKE``, ``contains``, ``regexp_matches``, ...); choosing a value (``CASE``, ``COALESCE``),
  a literal and a fixed-width result do none;
* a value past :data:`MAX_FACTOR` ``·L +`` :data:`MAX_ADDED` is refused, and so is an
  expression whose work passes :data:`MAX_WORK_FACTOR` ``·L +`` :data:`MAX_WORK_ADDED`;
* without a bound the rules refuse: a replacement whose length depends on a row
  (``replace(s, 'a', s)``), a regular expression's pattern computed from a row (RE2 compiles it
  for every row that reaches it), an edit distance (time: the product of the lengths) over a
  long argument.

Matching itself is linear: DuckDB runs regular expressions (``regexp_*``, ``SIMILAR TO``) on
RE2, which never backtracks, and ``LIKE``, ``GLOB`` and ``contains``/``strpos`` measured linear
on inputs built to make a backtracking matcher quadratic (tests/test_oracles.py); before DuckDB
2.0, ``LIKE``, ``ILIKE`` and ``GLOB`` backtrack, so there a pattern must be a literal and one
with several wildcards runs on RE2 (:mod:`dpsql._sql.likes`). Numeric
functions run in constant time whatever their value: ``factorial`` past 33 and ``pow`` past the
range of DOUBLE overflow (NULL under ``TRY``), ``gcd``/``lcm`` work on fixed-width integers.

The bound of a column that a CTE or subquery computed is that of its expression (kept in the
expression's ``meta``), so growth through the FROM chain multiplies as growth in place does.
docs/choices.md ("What dpsql guarantees about query time") gives the limits' reasons.
"""

from __future__ import annotations

import typing as t

from sqlglot import exp

from dpsql._sql.sizerules import ZERO, Bound, Get, Refused, describe, rule_of, sum_of_inputs
from dpsql.errors import PrivacyError

#: a value may be at most this many times as long as the longest value the row holds ...
MAX_FACTOR = 64
#: ... plus this many bytes
MAX_ADDED = 16_384
#: all nodes of one expression together: at most this many times the longest value ...
MAX_WORK_FACTOR = 4_096
#: ... plus this many bytes, per row
MAX_WORK_ADDED = 32_768
#: the key of an expression's bound in its ``meta`` (a CTE's column, once inlined)
KEY = "dpsql_size"

#: a column of the private table (or a joined one): one value of the row
COLUMN = Bound(1.0, 0.0, 0.0, 0.0, True)
#: a bound ``IN (SELECT ...)`` filter, while the expression holding it is checked
FILTER = Bound(0.0, 5.0, 0.0, 0.0, True)


def call_name(node: exp.Expression) -> str:
    """How a message names a node: the function's DuckDB name, or the node type."""
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    if isinstance(node, exp.Func):
        return node.sql_name().lower()
    return type(node).__name__.upper()


def _what(node: exp.Expression) -> str:
    if isinstance(node, exp.DPipe):
        return "||"
    if isinstance(node, exp.Literal):
        return "a literal"
    if isinstance(node, (exp.Func, exp.Anonymous)) and not isinstance(node, (exp.Case, exp.Cast)):
        spelled = node.sql(dialect="duckdb").split("(", 1)[0].strip().lower()  # regexp_like: regexp_matches
        return f"{spelled if spelled.isidentifier() else call_name(node)}()"
    return call_name(node)


def measure(nodes: list[exp.Expression], where: str, table: str,
            column: t.Callable[[exp.Column], Bound] | None = None) -> Bound:
    """The bound of ``nodes[0]``, given all its nodes in breadth-first order (each node before
    its descendants); raises PrivacyError past a limit. ``column`` gives a column's bound (a
    CTE's column: its expression's); without it a column is one value of the row.

    One pass, children first: each node's work and row dependence are added to its parent's."""
    memo: dict[int, Bound] = {}
    below: dict[int, tuple[float, float, bool]] = {}  # the children's work and row dependence

    def get(n: t.Any) -> Bound:
        return memo.get(id(n), ZERO) if n is not None else ZERO

    for node in reversed(nodes):
        if type(node) in _NAMES:  # a column's or unit's name: no value
            continue
        known = node.meta_get(KEY)
        if known is None:
            known = _bound(node, get, column, below.pop(id(node), _NOTHING), where, table)
        memo[id(node)] = known
        if known.wa or known.wb or known.row:
            parent = id(node.parent)
            wa, wb, row = below.get(parent, _NOTHING)
            below[parent] = (wa + known.wa, wb + known.wb, row or known.row)
    return memo.get(id(nodes[0]), ZERO)


_NOTHING = (0.0, 0.0, False)
_NAMES = frozenset({exp.Identifier, exp.Var})


def _bound(node: exp.Expression, get: Get, column: t.Callable[[exp.Column], Bound] | None,
           children: tuple[float, float, bool], where: str, table: str) -> Bound:
    if isinstance(node, exp.Column):
        return column(node) if column is not None else COLUMN
    rule = rule_of(node) or sum_of_inputs
    try:
        out = rule(node, get)
    except Refused as err:
        raise PrivacyError(f"{_what(node)} in {where} of a DP query over {table}: {err}") from None
    a, b = out[0], out[1]
    wa, wb, row = children
    if len(out) == 4:
        wa, wb = wa + out[2], wb + out[3]
    elif not getattr(rule, "cheap", False):
        wa, wb = wa + a, wb + b
    if a > MAX_FACTOR or b > MAX_ADDED:
        raise PrivacyError(
            f"{_what(node)} in {where} of a DP query over {table} could make a value of {describe(a, b)}, "
            f"past dpsql's limit of {MAX_FACTOR}× plus {MAX_ADDED:,} bytes (its running time would show "
            "which rows match): nest fewer functions that lengthen text, or use shorter literals"
        )
    if wa > MAX_WORK_FACTOR or wb > MAX_WORK_ADDED:
        raise PrivacyError(
            f"the expression in {where} of a DP query over {table} could process {describe(wa, wb)} of text "
            f"per row, past dpsql's limit of {MAX_WORK_FACTOR:,}× plus {MAX_WORK_ADDED:,} bytes (its running "
            "time would show which rows match): use fewer or shorter text values"
        )
    return Bound(a, b, wa, wb, row)


def inlined(expr: exp.Expression, where: str, table: str) -> Bound:
    """The bound of an expression a lower level of the FROM chain computed (a CTE's column),
    over the base table's columns: the one its check recorded, else measured now and kept."""
    known = expr.meta_get(KEY)
    if known is not None:
        return known
    if isinstance(expr, exp.Column):
        return COLUMN
    nodes = list(expr.walk(prune=lambda n: n is not expr and (n.meta_get(KEY) is not None
                                                              or isinstance(n, exp.Query))))
    found = measure(nodes, where, table)
    expr.meta[KEY] = found
    return found
