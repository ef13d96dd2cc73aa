"""Small constructors of sqlglot nodes for the compilers (:mod:`dpsql._compile`).

They call the node classes directly: sqlglot's builders (``exp.select``, ``exp.column`` with a
string, ``exp.alias_``) parse or copy their arguments, which made most of the planning time
when the statement was first built as a tree. A name given here is a reserved name
(:mod:`dpsql._sql.build`), never a user's: it is written unquoted.
"""

from __future__ import annotations

import typing as t

from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB


def name(text: str) -> exp.Identifier:
    """An unquoted identifier."""
    return exp.Identifier(this=text, quoted=False)


def col(column: str, table: str = "") -> exp.Column:
    """``table.column`` (or ``column``).

    >>> col("__k0", "__keys").sql()
    '__keys.__k0'
    """
    if table:
        return exp.Column(this=name(column), table=name(table))
    return exp.Column(this=name(column))


def star(table: str = "", exclude: t.Sequence[str] = ()) -> exp.Expression:
    """``*``, ``table.*`` or ``* EXCLUDE (names)``."""
    node = exp.Star(except_=[col(c) for c in exclude]) if exclude else exp.Star()
    return exp.Column(this=node, table=name(table)) if table else node


def alias(node: exp.Expression, as_: str) -> exp.Alias:
    """``node AS as_``."""
    return exp.Alias(this=node, alias=name(as_))


def number(x: int | float | str) -> exp.Literal:
    """A number literal written as given (``repr`` of a float)."""
    return exp.Literal(this=x if isinstance(x, str) else repr(x), is_string=False)


def fn(func: str, *args: exp.Expression) -> exp.Anonymous:
    """``FUNC(args)``, a function sqlglot prints by its name."""
    return exp.Anonymous(this=func, expressions=list(args))


def table(relation: str, as_: str = "") -> exp.Table:
    """A relation by its (reserved) name, perhaps aliased."""
    node = exp.Table(this=name(relation))
    if as_:
        node.set("alias", exp.TableAlias(this=name(as_)))
    return node


def subquery(select: exp.Expression, as_: str) -> exp.Subquery:
    """``(select) AS as_``."""
    return exp.Subquery(this=select, alias=exp.TableAlias(this=name(as_)))


class _Printed:
    """A subtree and its text once printed: shared by every copy of the :class:`Shared` node
    that holds it (a copy of the node copies nothing else)."""

    def __init__(self, tree: exp.Expression) -> None:
        self.tree, self.text = tree, ""

    def __deepcopy__(self, memo: dict[int, t.Any]) -> "_Printed":
        return self

    def sql(self, generator: t.Any) -> str:
        if not self.text:
            self.text = generator.sql(self.tree)
        return self.text


class Shared(exp.Expression):
    """A subtree written several times in a statement (the operand of a clip's ``CASE``),
    printed by the statement's one print the first time it is met and copied as text after
    (:data:`PRINTED`, the dialect that prints it). Nothing reads inside it once it is built."""

    arg_types: t.ClassVar[dict[str, bool]] = {}

    @classmethod
    def of(cls, tree: exp.Expression) -> "Shared":
        node = cls()
        node.meta["printed"] = _Printed(tree)
        return node


#: DuckDB's generator class (a class attribute of its dialect, which mypy cannot take as a base)
_DUCKDB_GENERATOR: t.Any = DuckDB.Generator


class PRINTED(DuckDB):
    """DuckDB's dialect, that prints a :class:`Shared` subtree once per statement.

    >>> x = Shared.of(exp.Mul(this=exp.column("x"), expression=number(2)))
    >>> exp.Case(ifs=[exp.If(this=exp.LT(this=x, expression=number(0)), true=number(0))], default=x.copy()).sql(PRINTED)
    'CASE WHEN x * 2 < 0 THEN 0 ELSE x * 2 END'
    """

    class Generator(_DUCKDB_GENERATOR):
        TRANSFORMS = {**DuckDB.Generator.TRANSFORMS, Shared: lambda self, e: e.meta["printed"].sql(self)}


def verbatim(text: str) -> exp.Var:
    """Text printed as it is: SQL an earlier stage wrote (the binder's FROM chain)."""
    return exp.Var(this=text)


def conjunction(conditions: t.Sequence[exp.Expression]) -> exp.Expression | None:
    """``a AND b AND ...`` with each OR (or other connective) in parentheses; None for none."""
    out: exp.Expression | None = None
    for c in conditions:
        c = exp.Paren(this=c) if isinstance(c, exp.Connector) else c
        out = c if out is None else exp.And(this=out, expression=c)
    return out


def select(projections: t.Sequence[exp.Expression], source: exp.Expression | None = None,
           where: t.Sequence[exp.Expression] = (), group: t.Sequence[str] = ()) -> exp.Select:
    """``SELECT projections FROM source WHERE ... GROUP BY group``.

    >>> select([col("__k0")], table("__src"), group=["__k0"]).sql()
    'SELECT __k0 FROM __src GROUP BY __k0'
    """
    node = exp.Select(expressions=list(projections))
    if source is not None:
        node.set("from_", exp.From(this=source))
    cond = conjunction(where)
    if cond is not None:
        node.set("where", exp.Where(this=cond))
    if group:
        node.set("group", exp.Group(expressions=[col(g) for g in group]))
    return node


def same_keys(left: str, right: str, keys: t.Sequence[str],
              *also: exp.Expression) -> exp.Expression:
    """``left.k IS NOT DISTINCT FROM right.k AND ...`` for every key, then ``also``; ``TRUE``
    for none.

    >>> same_keys("__keys", "__stats", ["__k0"]).sql("duckdb")
    '__keys.__k0 IS NOT DISTINCT FROM __stats.__k0'
    """
    terms: list[exp.Expression] = [exp.NullSafeEQ(this=col(k, left), expression=col(k, right)) for k in keys]
    return conjunction([*terms, *also]) or exp.Boolean(this=True)


class Forms(t.Protocol):
    """What a rule asks of the engine's compiler (:class:`dpsql._compile.compiler.Compiler`)."""

    def relation(self, rel: t.Any) -> tuple[exp.Expression, list[exp.Join]]: ...

    def integer(self, x: exp.Expression) -> exp.Expression: ...

    def once(self, x: exp.Expression) -> exp.Expression: ...

    def row_hash(self, aliases: t.Sequence[str]) -> exp.Expression: ...

    def truncated(self, rows: exp.Select, cut: t.Any) -> exp.Select: ...

    def preaggregated(self, rows: exp.Select, pre: t.Any) -> exp.Select: ...
