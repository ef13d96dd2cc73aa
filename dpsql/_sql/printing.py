"""Printing a tree without sqlglot's defensive copy, where that is safe.

sqlglot copies a tree before printing it, because a dialect's generator may rewrite a node in
place (DuckDB's rewrites an UNNEST's WITH ORDINALITY, a CONNECT BY, a date difference's unit).
The copy is most of the time of printing a small tree: the reuse key of every query
(:func:`dpsql._query.pipeline._canonical`) and the label of every DP aggregate. A tree of the
nodes listed here only is printed as it is.
"""

from __future__ import annotations

from sqlglot import exp

#: Node types that DuckDB's generator, and so this dialect's, prints without changing them (a
#: generator may rewrite a node in place: an UNNEST's WITH ORDINALITY, a CONNECT BY, a date
#: difference's unit). A SELECT is changed only when it holds CONNECT BY or SEQ functions,
#: neither of which is listed.
_PRINTED_AS_IS = frozenset({
    exp.Select, exp.From, exp.Table, exp.TableAlias, exp.Identifier, exp.Column, exp.Star, exp.Literal,
    exp.Alias, exp.Where, exp.Group, exp.Having, exp.Order, exp.Ordered, exp.Limit, exp.Offset, exp.Paren,
    exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.And, exp.Or, exp.Not, exp.Neg, exp.Is, exp.Null,
    exp.Boolean, exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max, exp.Var,
})


def plain(tree: exp.Expression) -> bool:
    """Whether ``tree`` holds only nodes that printing leaves as they are (those listed, and the
    dialect's own nodes that say so: the DP aggregates, the options, the statement node): it may
    then be printed without a copy first.

    >>> from dpsql._sql import dialect as d
    >>> plain(d.parse("SELECT sex, DP_MEAN(age, 0, 100) FROM adult WHERE age > 30 GROUP BY sex WITH (epsilon = 1)"))
    True
    >>> plain(d.parse("SELECT DP_COUNT(*) FROM (SELECT x FROM unnest([1]) WITH ORDINALITY AS u(x, i)) WITH (epsilon = 1)"))
    False
    """
    return all(type(n) in _PRINTED_AS_IS or getattr(type(n), "printed_as_is", False) for n in tree.walk())
