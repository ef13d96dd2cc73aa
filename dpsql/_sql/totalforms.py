"""The walk that gives a whole expression its forms that cannot raise, in size linear in its own.

:mod:`dpsql._sql.nonraising` holds the rule of each call that can raise. A rule reads some of its
arguments more than once: ``json_extract(x, p)`` becomes ``CASE WHEN json_valid(x) THEN x -> p
END``, and a range check of ``a * b`` reads ``a`` and ``b`` in its condition, in ``typeof`` and in
the product. Pasting a guarded argument twice at every level of a nested call doubles the
statement per level: sixteen nested calls made a statement DuckDB took minutes to plan. So:

* A rule is applied to a *light* node whose arguments are placeholders; afterwards each
  placeholder is replaced by the guarded argument. An argument the rule reads once, or one so
  small that its copies add at most :data:`BUDGET` nodes, is pasted in place.
* Any other argument is computed once and bound to a lambda parameter:
  ``list_transform([x], LAMBDA __dpsql_p0 : <the rule over __dpsql_p0>)[1]``. The rule's
  condition and call both read the parameter, so the statement grows by a constant per node
  whatever the nesting (DuckDB 1.4 to 2.0 run such lambdas; a lambda costs several times a CASE
  per row, which is why small arguments are pasted instead).
* Integer arithmetic is checked over a whole region of nested operations at once, in DOUBLE
  from the region's leaves (:func:`dpsql._sql.nonraising.arithmetic`), so ``a * (1 - b)`` over
  columns needs no lambda. A region holds at most :data:`REGION` operations (a check reads its
  region's leaves once per level); a deeper chain is cut into regions, each bound as above.

Names starting with ``__`` are reserved (:mod:`dpsql._sql.build`), so no column a query names can
be taken for a parameter. Spark's statement takes every form back to the call it guards
(:func:`unguarded`); the original is kept in the node's ``meta`` behind a holder that copies of
the tree share (a tree copied per level would otherwise copy every level's original again).
"""

from __future__ import annotations

import typing as t

import sqlglot  # noqa: F401 - the doctests parse with it
from sqlglot import exp

from dpsql._sql import leaftypes, likes, nonraising, rangecheck

#: The most nodes that the copies of one pasted argument may add to a rule's form.
BUDGET = 64
#: The most operations (and parentheses) of one arithmetic region.
REGION = 12

_ARITH = (*nonraising.ARITHMETIC, exp.Neg, exp.Abs)
_INERT = (exp.Column, exp.Literal, exp.Null, exp.Boolean, exp.DataType, exp.Identifier, exp.Var, exp.Star,
          exp.Query, exp.Subquery, exp.Placeholder, exp.Parameter)
_HOLE = "dpsql_hole"


class _Original:
    """The original form of a guarded node, shared (never copied) by copies of the tree."""

    __slots__ = ("tree",)

    def __init__(self, tree: exp.Expression) -> None:
        self.tree = tree

    def __deepcopy__(self, memo: t.Any) -> _Original:
        return self


def _inert(node: exp.Expression) -> bool:
    """Whether ``node`` needs no guard: a column or literal, or a constant (DuckDB folds a constant
    when it plans, before any row, so whether it fails does not depend on the data).

    >>> _inert(sqlglot.parse_one("json_extract('x', '$')")), _inert(sqlglot.parse_one("abs(a)"))
    (True, False)
    """
    return isinstance(node, _INERT) or node.find(exp.Column) is None


def _tally(node: exp.Expression, counts: dict[t.Any, int] | None = None, times: int = 1) -> int:
    """The weight of ``node``'s text: its nodes, each as many times as it is printed (a
    :class:`~dpsql._sql.rangecheck.Fits` prints its value and type several times), adding each
    placeholder's count to ``counts``."""
    key = _hole_of(node)
    if key is not None and counts is not None:
        counts[key] = counts.get(key, 0) + times
    fits = isinstance(node, rangecheck.Fits)
    total = times * (node.weight() if fits else 1)
    for k, value in node.args.items():
        inner = times * node.copies().get(k, 1) if fits else times
        for child in value if isinstance(value, list) else [value]:
            if isinstance(child, exp.Expression):
                total += _tally(child, counts, inner)
    return total


def _rebuilt(node: exp.Expression, child: t.Callable[[exp.Expression], exp.Expression]) -> exp.Expression:
    """A new node of ``node``'s class whose expression arguments are ``child`` of each."""
    args: dict[str, t.Any] = {}
    for key, value in node.args.items():
        if isinstance(value, exp.Expression):
            args[key] = child(value)
        elif isinstance(value, list):
            args[key] = [child(v) if isinstance(v, exp.Expression) else v for v in value]
        else:
            args[key] = value
    return node.__class__(**args)


def _hole(i: int, kind: str = "value") -> exp.Column:
    """Placeholder ``i``: for the guarded value, or (``kind="type"``) for an expression of its
    type that is only read by ``typeof``, which may be the raw argument."""
    col = exp.column(f"__dpsql_{kind}{i}")
    col.meta[_HOLE] = (kind, i)
    return col


def _hole_of(node: exp.Expression) -> tuple[str, int] | None:
    return node._meta.get(_HOLE) if isinstance(node, exp.Column) and node._meta else None


def _param(body: exp.Expression) -> str:
    """A parameter name no lambda inside ``body`` uses (one more than the lambdas it holds)."""
    return f"__dpsql_p{sum(1 for n in body.walk() if isinstance(n, exp.Lambda))}"


def _lambda(value: exp.Expression, body: exp.Expression, name: str) -> exp.Expression:
    """``list_transform([value], LAMBDA name : body)[1]``: ``body`` with ``value`` computed once.

    >>> _lambda(exp.column("x"), exp.to_identifier("p"), "p").sql("duckdb")
    'LIST_TRANSFORM([x], LAMBDA p : p)[1]'
    """
    fn = exp.Transform(this=exp.Array(expressions=[value]),
                       expression=exp.Lambda(this=body, expressions=[exp.to_identifier(name)]))
    return exp.Bracket(this=fn, expressions=[exp.Literal.number(0)])  # sqlglot counts from 0


def _bind(out: exp.Expression, values: list[exp.Expression], original: exp.Expression,
          raws: list[exp.Expression] | None = None) -> exp.Expression:
    """``out`` (a rule's form over placeholders) with each placeholder's guarded value (its raw
    argument, ``raws``, where only its type is read): pasted where the copies stay within
    :data:`BUDGET`, else bound once by a lambda; ``original`` kept for :func:`unguarded`."""
    counts: dict[t.Any, int] = {}
    _tally(out, counts)
    types = raws or values
    names: dict[int, str] = {}
    for i, value in enumerate(values):
        extra = (counts.get(("value", i), 0) - 1) * _tally(value) + counts.get(("type", i), 0) * _tally(types[i])
        if extra > BUDGET:
            names[i] = _param(out) + f"_{i}"

    def fill(n: exp.Expression) -> exp.Expression:
        hole = _hole_of(n)
        if hole is None:
            return n
        kind, i = hole
        if i in names:
            return exp.to_identifier(names[i])
        return (values if kind == "value" else types)[i].copy()

    out = out.transform(fill, copy=False)
    for i in sorted(names, reverse=True):  # the first value outermost; each is computed before its body runs
        out = _lambda(values[i], out, names[i])
    out.meta["unguarded"] = _Original(original)
    return out


def _light(node: exp.Expression, new: exp.Expression) -> tuple[exp.Expression, exp.Expression,
                                                                  list[exp.Expression]]:
    """``node`` and ``new`` (its guarded copy) with each argument that is not inert replaced by the
    same placeholder, and the guarded arguments in placeholder order."""
    values: list[exp.Expression] = []
    raw_args: dict[str, t.Any] = {}
    new_args: dict[str, t.Any] = {}

    def one(raw: exp.Expression, guarded: exp.Expression) -> tuple[exp.Expression, exp.Expression]:
        if _inert(raw):
            return raw.copy(), guarded
        values.append(guarded)
        return _hole(len(values) - 1), _hole(len(values) - 1)

    for key, value in node.args.items():
        other = new.args.get(key)
        if isinstance(value, exp.Expression):
            raw_args[key], new_args[key] = one(value, other)
        elif isinstance(value, list):
            pairs = [one(v, o) if isinstance(v, exp.Expression) else (v, o) for v, o in zip(value, other)]
            raw_args[key], new_args[key] = [p[0] for p in pairs], [p[1] for p in pairs]
        else:
            raw_args[key] = new_args[key] = value
    return node.__class__(**raw_args), node.__class__(**new_args), values


def _call(node: exp.Expression) -> exp.Expression:
    """The guarded form of a call that is not arithmetic."""
    new = _rebuilt(node, guard)
    light_raw, light_new, values = _light(node, new)
    out = nonraising.rule(light_raw, light_new)
    if out is light_new:
        return new
    return _bind(out, values, new)


def _region(node: exp.Expression, room: list[int], leaves: list[exp.Expression]) -> exp.Expression:
    """``node``'s arithmetic region (at most ``room`` operations) with each leaf that is not inert
    replaced by a placeholder; the leaves are appended to ``leaves`` in placeholder order."""
    if isinstance(node, (*_ARITH, exp.Paren)) and room[0] > 0 and not _inert(node):
        room[0] -= 1
        return _rebuilt(node, lambda c: _region(c, room, leaves))
    if _inert(node):
        return node.copy()
    leaves.append(node)
    return _hole(len(leaves) - 1)


def _checked(light: exp.Expression) -> exp.Expression:
    """Each operation of a region checked (leaves are placeholders, columns or constants)."""
    if isinstance(light, _ARITH):
        return nonraising.arithmetic(light, _rebuilt(light, _checked))
    if isinstance(light, exp.Paren):
        return exp.Paren(this=_checked(light.this))
    return light.copy()


def _typed(out: exp.Expression) -> exp.Expression:
    """``out`` with the placeholders that only a range check's ``typeof`` reads made type
    placeholders (filled with the raw argument, which is never evaluated there)."""
    for fits in list(out.find_all(rangecheck.Fits)):
        for n in list(fits.args["type"].walk()):
            hole = _hole_of(n)
            if hole is not None:
                n.replace(_hole(hole[1], "type"))
    return out


def _arithmetic(node: exp.Expression) -> exp.Expression:
    """The guarded form of an arithmetic region rooted at ``node``."""
    leaves: list[exp.Expression] = []
    light = _region(node, [REGION], leaves)
    values = [guard(leaf) for leaf in leaves]

    def plain(n: exp.Expression) -> exp.Expression:  # the region over guarded leaves, unchecked
        hole = _hole_of(n)
        return values[hole[1]].copy() if hole is not None else n

    original = light.copy().transform(plain, copy=False)
    token = nonraising.KINDS.set(_kinds(light, leaves))
    try:
        checked = _checked(light)
    finally:
        nonraising.KINDS.reset(token)
    return _bind(_typed(checked), values, original, leaves)


def _kinds(light: exp.Expression, leaves: list[exp.Expression]) -> dict[int, str] | None:
    """The DuckDB type of each operation and leaf of a region (dpsql._sql.leaftypes), by node id,
    or None when one cannot be known before the data."""
    def raw(n: exp.Expression) -> exp.Expression:
        hole = _hole_of(n)
        return leaves[hole[1]].copy() if hole is not None else n

    nodes = [n for n in light.walk() if isinstance(n, (*_ARITH, exp.Column))]
    types = leaftypes.types_of([n.copy().transform(raw, copy=False) for n in nodes])
    return {id(n): typ for n, typ in zip(nodes, types)} if types is not None else None


def guard(node: exp.Expression) -> exp.Expression:
    """A copy of ``node`` in which no allowlisted call can raise (see the module's docstring).

    >>> guard(sqlglot.parse_one("json_extract(s, '$.a')", read="duckdb")).sql("duckdb")
    "CASE WHEN JSON_VALID(s) THEN s -> '$.a' END"
    >>> e = "json_extract(json_extract(json_extract(json_extract(s, '$.a'), '$.b'), '$.c'), '$.d')"
    >>> guard(sqlglot.parse_one(e, read="duckdb")).sql("duckdb").count("LAMBDA")
    1
    """
    if _inert(node):
        return node.copy()
    if isinstance(node, _ARITH):
        return _arithmetic(node)
    older = likes.as_regexp(node) if nonraising.OLDER else None
    if older is not None:  # DuckDB before 2.0 backtracks on LIKE
        out = guard(older)
        out.meta["unguarded"] = _Original(_rebuilt(node, guard))
        return out
    if _day_add(node):
        out = guard(exp.Add(this=node.this.copy(), expression=_days(node.expression)))
        out.meta["unguarded"] = _Original(_rebuilt(node, guard))
        return out
    return _call(node)


def _day_add(node: exp.Expression) -> bool:
    """Whether ``node`` is ``date_add(d, v)`` of a value that is no interval written as such:
    sqlglot prints it ``d + INTERVAL (v) DAY``, which fails on every row where ``v`` is an
    INTERVAL column, and past INTEGER where it is a number."""
    if not isinstance(node, exp.DateAdd) or node.args.get("unit") is not None:
        return False
    return not isinstance(node.expression, (exp.Interval, exp.Literal))


def _days(value: exp.Expression) -> exp.Expression:
    """``value`` as an interval: itself where it is one, else that many days (NULL past INTEGER).

    >>> _days(exp.column("v")).sql("duckdb")
    'COALESCE(TRY_CAST(v AS INTERVAL), TO_DAYS(TRY_CAST(v AS INT)))'
    """
    as_days = exp.Anonymous(this="to_days", expressions=[exp.TryCast(this=value.copy(), to=exp.DataType.build("INT"))])
    return exp.Coalesce(this=exp.TryCast(this=value.copy(), to=exp.DataType.build("INTERVAL")), expressions=[as_days])


def guarded(node: exp.Expression) -> exp.Expression:
    """:func:`guard` of ``node`` (a statement's expressions, a predicate, a key, ...)."""
    return guard(node)


def unguarded(tree: exp.Expression) -> exp.Expression:
    """``tree`` with every form of this module back to the call it guards: Spark has its own
    total forms (``try_*`` arithmetic with ANSI off, :mod:`dpsql._sql.spark_gate` refusing the
    rest), and DuckDB's ``typeof`` names, ``try_strptime``, DATE arithmetic or lambdas mean
    something else there.

    >>> e = guard(sqlglot.parse_one("abs(a + 1) > 0"))
    >>> unguarded(e).sql("duckdb")
    'ABS(a + 1) > 0'
    """
    def back(node: exp.Expression) -> exp.Expression:
        inner = node._meta.get("unguarded") if node._meta else None
        return unguarded(inner.tree.copy()) if isinstance(inner, _Original) else node

    return tree.transform(back, copy=False)
