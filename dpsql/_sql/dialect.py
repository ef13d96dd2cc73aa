"""The dpsql SQL dialect: DuckDB's, plus DP aggregates, a trailing options clause and EXPLAIN.

Following sqlglot's own dialects, the extension is a handful of expression classes and a
parser/generator that extend DuckDB's tables of functions. ``parse()`` is the entry point: it
returns a :class:`DPQuery` wrapping the statement, its options and whether it was EXPLAINed.

Grammar (see ``grammar/dpsql.ebnf``)::

    dp_statement  = [ "EXPLAIN" ] statement [ options ] [ ";" ]
    options       = "WITH" "(" option { "," option } ")"
    option        = identifier "=" literal

BigQuery's form, ``SELECT WITH DIFFERENTIAL_PRIVACY [OPTIONS (...)] ...`` with
``contribution_bounds_per_group`` / ``_per_row`` in its aggregates, is parsed here into
:class:`DifferentialPrivacyClause` and :class:`ContributionBounds` nodes, and translated into
the dpsql form by :mod:`dpsql._sql.bigquery`.
"""

from __future__ import annotations

import logging
import re
import typing as t

import sqlglot
from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB
from sqlglot.errors import ParseError as SqlglotParseError
from sqlglot.errors import TokenError
from sqlglot.tokens import TokenType

from dpsql._sql.depth import nested_refused
from dpsql._sql.numbers import retokenize
from dpsql._sql.statistics import Statistic
from dpsql.errors import ParseError

__all__ = [
    "DPSQL",
    "DPAggregate",
    "DPCount",
    "DPSum",
    "DPMean",
    "DPVar",
    "DPStddev",
    "DPMedian",
    "DPQuantile",
    "DPMin",
    "DPMax",
    "DPAgg",
    "DPOptions",
    "DPQuery",
    "DP_FUNCTIONS",
    "DifferentialPrivacyClause",
    "ContributionBounds",
    "parse",
]


class DPAggregate(exp.AggFunc):
    """Base of every DP aggregate. ``this`` is the argument (``Star`` for ``DP_COUNT(*)``).

    ``lower``/``upper`` are optional literal bounds given in the call. A subclass gives its SQL
    names and the :class:`~dpsql._sql.statistics.Statistic` it computes (which carries its default
    mechanism and the other facts the planner needs) in its class line,
    ``class DPSum(..., names=("DP_SUM",), statistic=Statistic.SUM)``, and its ``arg_types`` only
    when they are not ``x [, lower, upper]``.
    """

    #: what the mechanisms compute (``Statistic.COUNT``, ``Statistic.SUM``, ...)
    statistic: t.ClassVar[Statistic]
    printed_as_is: t.ClassVar[bool] = True  # dpsql._sql.printing
    #: the arguments of most DP aggregates: ``x [, lower, upper]``, or ``x, bounds => 'auto'``
    #: (``bounds`` holds the string ``'auto'``: bounds found privately; never positional)
    arg_types = {"this": True, "lower": False, "upper": False, "bounds": False}

    def __init_subclass__(cls, names: tuple[str, ...] = (), statistic: Statistic | None = None,
                          **kwargs: t.Any) -> None:
        super().__init_subclass__(**kwargs)
        if names:
            assert statistic is not None
            cls._sql_names, cls.statistic = list(names), statistic


class DPCount(exp.Expression, DPAggregate, names=("DP_COUNT",), statistic=Statistic.COUNT):
    arg_types = {"this": False}


class DPSum(exp.Expression, DPAggregate, names=("DP_SUM",), statistic=Statistic.SUM): ...


class DPMean(exp.Expression, DPAggregate, names=("DP_MEAN", "DP_AVG"), statistic=Statistic.MEAN): ...


class DPVar(exp.Expression, DPAggregate, names=("DP_VAR", "DP_VARIANCE"), statistic=Statistic.VAR): ...


class DPStddev(exp.Expression, DPAggregate, names=("DP_STDDEV", "DP_STD"), statistic=Statistic.STDDEV): ...


class DPMedian(exp.Expression, DPAggregate, names=("DP_MEDIAN",), statistic=Statistic.MEDIAN): ...


class DPQuantile(exp.Expression, DPAggregate, names=("DP_QUANTILE", "DP_PERCENTILE"),
                 statistic=Statistic.QUANTILE):
    """``DP_QUANTILE(x, p [, lower, upper])``: ``quantile`` holds p."""

    arg_types = {"this": True, "quantile": True, "lower": False, "upper": False, "bounds": False}


class DPMin(exp.Expression, DPAggregate, names=("DP_MIN",), statistic=Statistic.MIN): ...


class DPMax(exp.Expression, DPAggregate, names=("DP_MAX",), statistic=Statistic.MAX): ...


class DPAgg(exp.Expression, DPAggregate, names=("DP_AGG",), statistic=Statistic.AGG):
    """``DP_AGG(aggregate_expression, lower, upper)``: any DuckDB aggregate via sample-and-aggregate."""


DP_FUNCTIONS: dict[str, type[DPAggregate]] = {
    name: cls
    for cls in (DPCount, DPSum, DPMean, DPVar, DPStddev, DPMedian, DPQuantile, DPMin, DPMax, DPAgg)
    for name in cls._sql_names
}


class DPOptions(exp.Expression):
    """The trailing ``WITH (key = value, ...)`` clause; ``expressions`` are ``exp.EQ`` nodes."""

    printed_as_is: t.ClassVar[bool] = True  # dpsql._sql.printing

    arg_types = {"expressions": True}


class DPQuery(exp.Expression):
    """A parsed dpsql statement: ``this`` is the query, ``options`` the clause, ``explain`` a flag."""

    printed_as_is: t.ClassVar[bool] = True  # dpsql._sql.printing

    # ``with_`` only exists transiently: a leading WITH clause parsed around the whole statement
    # is moved onto the query by :func:`parse`.
    arg_types = {"this": True, "options": False, "explain": False, "with_": False}

    @property
    def query(self) -> exp.Expression:
        return self.this

    def option_items(self) -> list[tuple[str, exp.Expression]]:
        opts = self.args.get("options")
        if not opts:
            return []
        return [(eq.this.name, eq.expression) for eq in opts.expressions]


class DifferentialPrivacyClause(exp.Expression):
    """BigQuery's ``WITH DIFFERENTIAL_PRIVACY [OPTIONS (key = value, ...)]`` right after SELECT,
    kept as the SELECT's ``hint``; ``expressions`` are ``exp.EQ`` nodes (none without OPTIONS)."""

    printed_as_is: t.ClassVar[bool] = True  # dpsql._sql.printing

    arg_types = {"expressions": False}


class ContributionBounds(exp.Expression):
    """A BigQuery DP aggregate's ``contribution_bounds_per_group|row => (lower, upper)``: ``this``
    is the aggregate without it (``exp.Avg``, ...), ``per`` the word ``group`` or ``row``."""

    arg_types = {"this": True, "per": True, "lower": True, "upper": True}


#: BigQuery's DP aggregates (and ZetaSQL's VAR_POP, and STDDEV_POP) by name: their node class and
#: which contribution bounds they take (BigQuery: per group for COUNT, SUM and AVG, per row for
#: PERCENTILE_CONT; per row is also dpsql's own meaning of bounds, so SUM and AVG take it too).
BIGQUERY_AGGREGATES: dict[str, tuple[type[exp.Expression], tuple[str, ...]]] = {
    "COUNT": (exp.Count, ("group",)),
    "SUM": (exp.Sum, ("group", "row")),
    "AVG": (exp.Avg, ("group", "row")),
    "VAR_POP": (exp.VariancePop, ("row",)),
    "STDDEV_POP": (exp.StddevPop, ("row",)),
    "PERCENTILE_CONT": (exp.PercentileCont, ("row",)),
}


def _bounded(name: str, plain: t.Callable[[list[exp.Expression]], exp.Expression]
             ) -> t.Callable[[list[exp.Expression]], exp.Expression]:
    """DuckDB's builder of aggregate ``name``, also accepting a trailing BigQuery
    ``contribution_bounds_per_group|row => (lower, upper)``."""
    kinds = BIGQUERY_AGGREGATES[name][1]

    def builder(args: list[exp.Expression]) -> exp.Expression:
        named = [a for a in args if isinstance(a, (exp.Kwarg, exp.PropertyEQ))]
        if not named:
            return plain(args)
        key = named[0].this.name.lower()
        if len(named) > 1 or args[-1] is not named[0] or not key.startswith("contribution_bounds_per_"):
            raise SqlglotParseError(f"{name} takes one named argument, last: contribution_bounds_per_"
                                    f"{kinds[0]} => (lower, upper)")
        per = key[len("contribution_bounds_per_"):]
        if per not in kinds:
            raise SqlglotParseError(f"{name} takes contribution_bounds_per_{kinds[0]} => (lower, upper), "
                                    f"not {key}")
        value = named[0].expression
        if not isinstance(value, exp.Tuple) or len(value.expressions) != 2:
            raise SqlglotParseError(f"{name}: {key} => must be a pair (lower, upper)")
        inner = plain(args[:-1])
        errors = inner.error_messages(args[:-1])
        if errors:
            raise SqlglotParseError(f"{name}: {errors[0]}")
        lower, upper = value.expressions
        return ContributionBounds(this=inner, per=exp.var(per), lower=lower, upper=upper)

    return builder


def _build(cls: type[DPAggregate]) -> t.Callable[[list[exp.Expression]], exp.Expression]:
    """Build a DP aggregate from positional args, accepting ``bounds => (l, u)`` named args."""

    def builder(args: list[exp.Expression]) -> exp.Expression:
        positional: list[exp.Expression] = []
        named: dict[str, exp.Expression] = {}
        for arg in args:
            if isinstance(arg, (exp.Kwarg, exp.PropertyEQ)):
                named[arg.this.name.lower()] = arg.expression
            elif named:
                raise SqlglotParseError(
                    f"{cls._sql_names[0]}: positional argument after a named one"
                )
            else:
                positional.append(arg)
        slots = [k for k in cls.arg_types if k != "bounds"]
        if len(positional) > len(slots):
            raise SqlglotParseError(
                f"{cls._sql_names[0]} takes at most {len(slots)} arguments, got {len(positional)}"
            )
        kwargs: dict[str, t.Any] = dict(zip(slots, positional))
        for key, value in named.items():
            if key == "bounds":
                if "lower" not in cls.arg_types:
                    raise SqlglotParseError(f"{cls._sql_names[0]} takes no bounds")
                if "lower" in kwargs or "upper" in kwargs:
                    raise SqlglotParseError(f"{cls._sql_names[0]}: bounds given twice")
                if _is_auto(value) and "bounds" in cls.arg_types:
                    kwargs["bounds"] = exp.Literal.string("auto")
                    continue
                if not isinstance(value, (exp.Tuple, exp.Paren, exp.Array)) or len(
                    _items(value)
                ) != 2:
                    raise SqlglotParseError(
                        f"{cls._sql_names[0]}: bounds => must be a pair (lower, upper) or 'auto'"
                    )
                lo, hi = _items(value)
                kwargs["lower"], kwargs["upper"] = lo, hi
            elif key in ("lower", "upper", "quantile", "p") and key != "this":
                slot = "quantile" if key == "p" else key
                if slot not in cls.arg_types:
                    raise SqlglotParseError(f"{cls._sql_names[0]} has no argument '{key}'")
                if slot in kwargs or (slot in ("lower", "upper") and "bounds" in kwargs):
                    raise SqlglotParseError(f"{cls._sql_names[0]}: '{key}' given twice")
                kwargs[slot] = value
            else:
                raise SqlglotParseError(f"{cls._sql_names[0]} has no argument '{key}'")
        if ("lower" in kwargs) != ("upper" in kwargs):
            raise SqlglotParseError(f"{cls._sql_names[0]}: give both lower and upper bounds")
        for slot, required in cls.arg_types.items():
            if required and slot not in kwargs:
                raise SqlglotParseError(f"{cls._sql_names[0]}: missing argument '{slot}'")
        if cls is DPCount and kwargs.get("this") is None:
            kwargs["this"] = exp.Star()
        return cls(**kwargs)

    return builder


def _is_auto(node: exp.Expression) -> bool:
    """``'auto'`` (or ``auto``): bounds found privately."""
    if isinstance(node, exp.Literal) and node.is_string:
        return str(node.this).strip().lower() == "auto"
    return isinstance(node, (exp.Column, exp.Var)) and not getattr(node, "table", "") and node.name.lower() == "auto"


def _items(node: exp.Expression) -> list[exp.Expression]:
    if isinstance(node, exp.Paren):
        return [node.this]
    return list(node.expressions)


class DPSQL(DuckDB):
    """DuckDB's dialect plus the DP aggregates, ``WITH (...)`` options and ``EXPLAIN``."""

    class Tokenizer(DuckDB.Tokenizer):
        def tokenize(self, sql: str) -> list:  # ``1e9+0.001`` is two numbers (dpsql._sql.numbers)
            return retokenize(sql, super().tokenize)

    class Parser(DuckDB.Parser):
        FUNCTIONS = {
            **DuckDB.Parser.FUNCTIONS,
            **{name: _build(cls) for name, cls in DP_FUNCTIONS.items()},
            **{name: _bounded(name, DuckDB.Parser.FUNCTIONS[name]) for name in BIGQUERY_AGGREGATES},
        }

        def _parse_table_hints(self) -> list[exp.Expr] | None:
            # DuckDB has no table hints; ``FROM t WITH (...)`` is the dpsql options clause.
            return None

        def _parse_statement(self) -> exp.Expression | None:
            if self._curr is None:
                return None
            stmt = super()._parse_statement()
            if self._match_pair(TokenType.WITH, TokenType.L_PAREN):
                return DPQuery(this=stmt, options=DPOptions(expressions=self._parse_option_list("WITH")))
            return stmt

        def _parse_hint(self) -> t.Any:
            # BigQuery's ``SELECT WITH DIFFERENTIAL_PRIVACY ...`` sits where a hint would.
            after_select = self._prev is not None and self._prev.token_type == TokenType.SELECT
            if after_select and self._curr is not None and self._curr.token_type == TokenType.WITH \
                    and self._next is not None and self._next.text.upper() in ("DIFFERENTIAL_PRIVACY", "ANONYMIZATION"):
                self._advance(2)
                if self._prev.text.upper() == "ANONYMIZATION":
                    self.raise_error("WITH ANONYMIZATION is ZetaSQL's older form; write WITH DIFFERENTIAL_PRIVACY")
                items: list[exp.Expression] = []
                if self._match_text_seq("OPTIONS"):
                    if not self._match(TokenType.L_PAREN):
                        self.raise_error("Expected '(' after OPTIONS")
                    items = self._parse_option_list("OPTIONS")
                return DifferentialPrivacyClause(expressions=items)
            return super()._parse_hint()

        def _parse_option_list(self, clause: str) -> list[exp.Expression]:
            """``key = value, ...)`` after ``WITH (`` or ``OPTIONS (``."""
            items: list[exp.Expression] = []
            while True:
                key_token = self._curr
                if key_token is None or key_token.token_type == TokenType.R_PAREN:
                    self.raise_error(f"Expected an option name in {clause} (...)")
                key = self._parse_var(any_token=True)
                if key is None:
                    self.raise_error(f"Expected an option name in {clause} (...)")
                if not self._match(TokenType.EQ):
                    self.raise_error(f"Expected '=' after option '{key.name}'")
                value = self._parse_bitwise()
                if value is None:
                    self.raise_error(f"Expected a value for option '{key.name}'")
                items.append(exp.EQ(this=key, expression=value))
                if not self._match(TokenType.COMMA):
                    break
            if not self._match(TokenType.R_PAREN):
                self.raise_error(f"Expected ')' to close {clause} (...)")
            return items

    class Generator(DuckDB.Generator):
        TRANSFORMS = {
            **DuckDB.Generator.TRANSFORMS,
            DPQuery: lambda self, e: _dpquery_sql(self, e),
            DPOptions: lambda self, e: "WITH (" + ", ".join(self.sql(x) for x in e.expressions) + ")",
            DifferentialPrivacyClause: lambda self, e: " WITH DIFFERENTIAL_PRIVACY" + (
                " OPTIONS (" + ", ".join(self.sql(x) for x in e.expressions) + ")" if e.expressions else ""),
            ContributionBounds: lambda self, e: _bounds_sql(self, e),
        }

        def dpaggregate_sql(self, e: DPAggregate) -> str:  # pragma: no cover - dispatched below
            return _dpaggregate_sql(self, e)


def _dpquery_sql(gen: t.Any, e: DPQuery) -> str:
    parts = ["EXPLAIN " if e.args.get("explain") else "", gen.sql(e.this)]
    if e.args.get("options"):
        parts.append(" " + gen.sql(e.args["options"]))
    return "".join(parts)


def _bounds_sql(gen: t.Any, e: ContributionBounds) -> str:
    inner = e.this
    name = next(n for n, (cls, _) in BIGQUERY_AGGREGATES.items() if type(inner) is cls)
    args = [gen.sql(inner, "this") or "*", gen.sql(inner, "expression")]
    bound = f"contribution_bounds_per_{e.text('per')} => ({gen.sql(e, 'lower')}, {gen.sql(e, 'upper')})"
    return f"{name}({', '.join(a for a in [*args, bound] if a)})"


def _dpaggregate_sql(gen: t.Any, e: DPAggregate) -> str:
    args = [gen.sql(e.args[k]) if k != "bounds" else f"bounds => {gen.sql(e.args[k])}"
            for k in e.arg_types if e.args.get(k) is not None]
    return f"{e._sql_names[0]}({', '.join(args)})"


for _cls in set(DP_FUNCTIONS.values()):
    DPSQL.Generator.TRANSFORMS[_cls] = _dpaggregate_sql


_EXPLAIN = re.compile(r"^\s*EXPLAIN\b(\s+ANALY[SZ]E\b)?", re.IGNORECASE)


def parse(sql: str) -> DPQuery:
    """Parse one dpsql statement into a :class:`DPQuery`.

    Raises :class:`dpsql.errors.ParseError` with a one-line message naming the token.
    """
    text = sql.strip()
    while text.endswith(";"):
        text = text[:-1].rstrip()
    explain = False
    m = _EXPLAIN.match(text)
    if m:
        if m.group(1):
            raise ParseError("EXPLAIN ANALYZE is not allowed: it runs the query and reveals row counts")
        explain = True
        text = text[m.end():].strip()
    if not text:
        raise ParseError("empty statement")
    quiet = logging.getLogger("sqlglot")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # no "falling back to Command" warnings on stderr
    try:
        with nested_refused():
            statements = sqlglot.parse(text, dialect=DPSQL)
    except SqlglotParseError as err:
        from dpsql._sql.syntax import syntax_error

        raise syntax_error(err, sql, text) from None
    except TokenError as err:
        raise ParseError(f"cannot tokenize the statement: {err}") from None
    finally:
        quiet.setLevel(level)
    statements = [s for s in statements if s is not None]
    if len(statements) != 1:
        raise ParseError(f"expected one statement, got {len(statements)}")
    stmt = statements[0]
    if isinstance(stmt, exp.Command):
        word = stmt.name.upper() or "this"
        raise ParseError(f"unsupported statement: {word} is not allowed")
    if not isinstance(stmt, DPQuery):
        stmt = DPQuery(this=stmt)
    if stmt.args.get("with_") is not None:
        stmt.this.set("with_", stmt.args["with_"])
        stmt.set("with_", None)
    if explain:
        stmt.set("explain", True)
    if stmt.find(DifferentialPrivacyClause, ContributionBounds) is not None:
        check_form(stmt)
    for node in stmt.find_all(exp.Initcap):
        if node.this is not None and node.this.find(exp.Initcap) is not None:
            # DuckDB has no initcap: sqlglot spells it as an expression that cannot hold another
            raise ParseError("initcap() cannot hold another initcap(): apply it once")
    return stmt


def own_scope(node: exp.Expression, select: exp.Select) -> bool:
    """Whether ``node`` belongs to ``select`` itself (not to a subquery or CTE inside it)."""
    parent = node.parent
    while parent is not None and parent is not select:
        if isinstance(parent, (exp.Select, exp.Subquery, exp.CTE, exp.SetOperation)):
            return False
        parent = parent.parent
    return parent is select


def check_form(stmt: DPQuery) -> None:
    """Refuse (ParseError) a DP clause that is not the main SELECT's, a DP clause with a trailing
    ``WITH (...)`` too, and contribution bounds outside the main SELECT of a DP clause.

    >>> check_form(parse("SELECT WITH DIFFERENTIAL_PRIVACY COUNT(*) FROM t"))
    >>> parse("SELECT WITH DIFFERENTIAL_PRIVACY COUNT(*) FROM t WITH (epsilon = 1)")
    Traceback (most recent call last):
    ...
    dpsql.errors.ParseError: give the options in WITH DIFFERENTIAL_PRIVACY OPTIONS (...) or in a trailing WITH (...), not in both
    """
    select = stmt.this
    clause = select.args.get("hint") if isinstance(select, exp.Select) else None
    ours = clause if isinstance(clause, DifferentialPrivacyClause) else None
    if any(node is not ours for node in stmt.find_all(DifferentialPrivacyClause)):
        raise ParseError("WITH DIFFERENTIAL_PRIVACY belongs right after the statement's main SELECT, "
                         "not in a subquery, a CTE or a set operation")
    if ours is not None and stmt.args.get("options") is not None:
        raise ParseError("give the options in WITH DIFFERENTIAL_PRIVACY OPTIONS (...) or in a trailing "
                         "WITH (...), not in both")
    for node in stmt.find_all(ContributionBounds):
        if ours is None or not own_scope(node, select):
            raise ParseError(to_sql(node) + ": contribution bounds belong to the aggregates of a SELECT WITH "
                             "DIFFERENTIAL_PRIVACY; in the dpsql form the bounds are the DP aggregate's: "
                             "DP_SUM(x, bounds => (0, 100))")


def to_sql(node: exp.Expression) -> str:
    """Render a node in the dpsql dialect (round trip of :func:`parse`), without sqlglot's
    defensive copy when the tree is :func:`dpsql._sql.printing.plain`."""
    from dpsql._sql.printing import plain

    return node.sql(dialect=DPSQL, copy=not plain(node))


# sqlglot's compiled build cannot run this dialect: say so at once (dpsql._sql.compiled)
from dpsql._sql.compiled import check_build  # noqa: E402 - needs DPSQL, defined above

check_build(DPSQL().parser)
