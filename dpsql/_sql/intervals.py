"""Bounds of an expression by interval arithmetic: what a DP aggregate's argument can be, derived
from the policy's bounds of the columns it reads.

``DP_SUM(l_extendedprice * (1 - l_discount))`` needs bounds for the product. When the policy
bounds ``l_extendedprice`` in [0, 105000] and ``l_discount`` in [0, 0.1], the product lies in
[0, 105000] for every row inside those bounds, so those are its bounds. The idea is range
propagation as Qrlew does it (Qrlew's ``data_type``/``function`` modules give each expression
the image of its inputs' ranges); the code here is this module's own.

What is derived is used like a policy's bounds: the rewritten SQL still clips the argument to
them (:func:`dpsql._plan.rewrite.clip`), so a row outside its columns' bounds, or a value the
rules here got wrong, moves a sum by no more than the bounds say. The bounds are public: they
follow from the query text, the policy and the catalog's types, never from data.

The rules (anything else derives nothing, and the refusal asking for bounds stays):

* a column with policy bounds [L, U] of a numeric type (not FLOAT/REAL: see below): [L, U],
  widened to the decimal each bound was written as (0.3 in a policy is the double just below
  3/10; a DECIMAL column holds 3/10 itself);
* a number literal: its exact decimal value (DuckDB reads ``0.1`` as DECIMAL(2,1));
* ``+``, ``-``, ``*``, unary ``-``, ``abs``, ``/`` by an interval that does not hold 0;
* ``least`` and ``greatest`` (DuckDB skips NULL arguments: the upper bound of ``least`` is the
  least upper bound of the arguments that are never NULL, and likewise for ``greatest``);
* ``CASE`` and ``IF`` (the hull of the branches), ``COALESCE`` (the hull of its arguments);
* ``CAST``/``TRY_CAST`` to an integer type (rounded outward to whole numbers), to
  ``DECIMAL(p, s)`` (outward to multiples of 10^-s), to DOUBLE (unchanged);
* ``year``/``month``/``quarter`` of a date column with date bounds (:func:`date_part_range`).

Rounding. Each step's exact interval (rational arithmetic on the endpoints) is rounded
*outward* to doubles: the lower end to the largest double at or below it, the upper end to the
least double at or above it. DuckDB computes a DOUBLE step as the exact result of its rounded
inputs, rounded to the nearest double; a DECIMAL or integer step exactly. By induction over the
expression, every value DuckDB computes from inputs inside the bounds lies inside the interval:
rounding to nearest never leaves an interval whose ends are doubles. FLOAT (32-bit) arithmetic
rounds to a coarser grid, so FLOAT columns and casts derive nothing. An interval whose ends are
not finite derives nothing. tests/test_intervals.py checks the containment against DuckDB.
"""

from __future__ import annotations

import datetime
import math
import typing as t
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from sqlglot import exp

if t.TYPE_CHECKING:
    from dpsql._sql.relation import Relation

__all__ = ["Derived", "Interval", "date_part_range", "derive", "derive_argument"]

#: sqlglot's names of the integer types a cast may name
_CAST_INTEGERS = frozenset({"TINYINT", "SMALLINT", "INT", "BIGINT", "INT128", "UTINYINT", "USMALLINT", "UINT",
                            "UBIGINT", "UINT128"})
#: the date parts whose values :func:`date_part_range` knows, by name
DATE_PARTS = ("year", "quarter", "month")


def _down(q: Fraction) -> Fraction:
    """The largest double at or below ``q`` (OverflowError past the doubles).

    >>> float(_down(Fraction(1, 10))) < 0.1 <= float(Fraction(1, 10) + 1)
    True
    >>> _down(Fraction(3))
    Fraction(3, 1)
    """
    f = float(q)  # correctly rounded: int / int
    if Fraction(f) > q:
        f = math.nextafter(f, -math.inf)
    return Fraction(f)


def _up(q: Fraction) -> Fraction:
    """The least double at or above ``q``."""
    return -_down(-q)


@dataclass(frozen=True)
class Interval:
    """A closed interval of numbers, exact ends; ``nullable``: the expression may be NULL.

    >>> Interval.of(0, 105000) * (Interval.of(1, 1, False) - Interval.of(0, 0.1))
    Interval(lower=Fraction(0, 1), upper=Fraction(105000, 1), nullable=True)
    """

    lower: Fraction
    upper: Fraction
    nullable: bool = True

    @classmethod
    def of(cls, lower: t.Any, upper: t.Any, nullable: bool = True) -> "Interval":
        """An interval rounded outward to doubles."""
        return cls(_down(Fraction(lower)), _up(Fraction(upper)), nullable)

    def __add__(self, other: "Interval") -> "Interval":
        return Interval.of(self.lower + other.lower, self.upper + other.upper, self.nullable or other.nullable)

    def __sub__(self, other: "Interval") -> "Interval":
        return self + (-other)

    def __neg__(self) -> "Interval":
        return Interval(-self.upper, -self.lower, self.nullable)

    def __mul__(self, other: "Interval") -> "Interval":
        ends = [a * b for a in (self.lower, self.upper) for b in (other.lower, other.upper)]
        return Interval.of(min(ends), max(ends), self.nullable or other.nullable)

    def __truediv__(self, other: "Interval") -> "Interval | None":
        """``self / other``; None when ``other`` holds 0 (DuckDB's x / 0 is ±inf or NaN).

        >>> Interval.of(1, 2) / Interval.of(-1, 1) is None
        True
        """
        if other.lower <= 0 <= other.upper:
            return None
        ends = [a / b for a in (self.lower, self.upper) for b in (other.lower, other.upper)]
        return Interval.of(min(ends), max(ends), self.nullable or other.nullable)

    def abs(self) -> "Interval":
        """``abs(x)``.

        >>> Interval.of(-3, 2).abs()
        Interval(lower=Fraction(0, 1), upper=Fraction(3, 1), nullable=True)
        """
        if self.lower >= 0:
            return self
        if self.upper <= 0:
            return -self
        return Interval(Fraction(0), max(-self.lower, self.upper), self.nullable)

    def hull(self, other: "Interval") -> "Interval":
        """The least interval holding both (a value of either)."""
        return Interval(min(self.lower, other.lower), max(self.upper, other.upper), self.nullable or other.nullable)

    def grid(self, step: Fraction) -> "Interval":
        """Rounded outward to multiples of ``step`` (a cast to integers or to DECIMAL(p, s)).

        >>> Interval.of(0.4, 2.6).grid(Fraction(1))
        Interval(lower=Fraction(0, 1), upper=Fraction(3, 1), nullable=True)
        """
        return Interval.of(math.floor(self.lower / step) * step, math.ceil(self.upper / step) * step, self.nullable)

    @property
    def finite(self) -> bool:
        return math.isfinite(float(self.lower)) and math.isfinite(float(self.upper))

    def floats(self) -> tuple[float, float]:
        """The ends as floats (they are doubles already: exact)."""
        return float(self.lower), float(self.upper)


@dataclass(frozen=True)
class Derived:
    """Bounds derived for an expression, and the column bounds they came from."""

    lower: float
    upper: float
    #: each column read, with its policy bounds (``lineitem.l_discount ∈ [0, 0.1]``)
    sources: tuple[str, ...]

    @property
    def note(self) -> str:
        """How EXPLAIN says where the bounds came from."""
        src = ", ".join(self.sources) if self.sources else "literals only"
        return (f"bounds derived by interval arithmetic from {src} (rounded outward to doubles; "
                "the clip enforces them)")


#: what a column reference of the expression gives: its interval and how EXPLAIN names its
#: bounds, or None (no bounds: nothing is derived)
Leaf = t.Callable[[exp.Column], "tuple[Interval, str] | None"]
#: a date column's bounds (first and last day), or None
DateLeaf = t.Callable[[exp.Column], "tuple[datetime.date, datetime.date, str] | None"]


def derive(expr: exp.Expression, leaf: Leaf, date_leaf: DateLeaf | None = None) -> Derived | None:
    """Bounds of ``expr`` from its columns' (``leaf``), or None when a rule is missing.

    >>> from sqlglot import parse_one
    >>> bounds = {"p": (0, 105000), "d": (0, 0.1)}
    >>> leaf = lambda c: (Interval.of(*bounds[c.name]), f"{c.name} ∈ {list(bounds[c.name])}") if c.name in bounds else None
    >>> d = derive(parse_one("p * (1 - d)"), leaf)
    >>> (d.lower, d.upper, d.sources)
    (0.0, 105000.0, ('p ∈ [0, 105000]', 'd ∈ [0, 0.1]'))
    >>> derive(parse_one("p / (d - 0.05)"), leaf) is None
    True
    >>> derive(parse_one("ln(p)"), leaf) is None
    True
    """
    sources: list[str] = []
    try:
        out = _walk(expr, leaf, date_leaf, sources)
    except (OverflowError, ZeroDivisionError, ValueError, InvalidOperation):
        return None
    if out is None:
        return None
    out = Interval.of(out.lower, out.upper, out.nullable)  # a bare leaf or a hull is not rounded yet
    if not out.finite:
        return None
    lower, upper = out.floats()
    return Derived(lower, upper, tuple(dict.fromkeys(sources)))


def _literal(node: exp.Literal) -> Interval | None:
    """A number literal: its exact decimal value, rounded outward to doubles (DuckDB may read it
    as DECIMAL, exactly, or as DOUBLE, the nearest double)."""
    if node.is_string:
        return None
    value = Fraction(Decimal(str(node.this)))
    return Interval.of(value, value, False)


def _cast(node: exp.Cast, inner: Interval) -> Interval | None:
    """A cast to a numeric type: outward to its grid; None for FLOAT/REAL and anything else."""
    to = node.args.get("to")
    if not isinstance(to, exp.DataType):
        return None
    kind = to.this.name if isinstance(to.this, exp.DataType.Type) else ""
    if kind in _CAST_INTEGERS:
        return inner.grid(Fraction(1))
    if kind == "DOUBLE":
        return inner
    if kind == "DECIMAL":
        params = [p.this.this if isinstance(p.this, exp.Literal) else None for p in to.expressions]
        scale = int(params[1]) if len(params) > 1 and params[1] is not None else (3 if not params else 0)
        return inner.grid(Fraction(1, 10**scale))
    return None


def _nary(node: exp.Expression) -> list[exp.Expression]:
    return [node.this, *node.expressions]


def _extreme(parts: list[Interval], least: bool) -> Interval:
    """``least``/``greatest`` of the parts; DuckDB skips NULL arguments, so the tight end holds
    only through arguments that are never NULL."""
    sure = [p for p in parts if not p.nullable]
    if least:
        upper = min((p.upper for p in sure), default=max(p.upper for p in parts))
        return Interval(min(p.lower for p in parts), min(upper, max(p.upper for p in parts)), not sure)
    lower = max((p.lower for p in sure), default=min(p.lower for p in parts))
    return Interval(max(lower, min(p.lower for p in parts)), max(p.upper for p in parts), not sure)


def _branches(node: exp.Expression) -> tuple[list[exp.Expression], bool] | None:
    """The value branches of CASE / IF and whether one is missing (NULL)."""
    if isinstance(node, exp.Case):  # CASE x WHEN ...: the same values, compared otherwise
        values = [w.args.get("true") for w in node.args.get("ifs") or []]
        default = node.args.get("default")
    else:
        values = [node.args.get("true")]
        default = node.args.get("false")
    if any(v is None for v in values):
        return None
    return [*values, *([default] if default is not None else [])], default is None


_BINARY: dict[type, t.Callable[[Interval, Interval], "Interval | None"]] = {
    exp.Add: lambda a, b: a + b,
    exp.Sub: lambda a, b: a - b,
    exp.Mul: lambda a, b: a * b,
    exp.Div: lambda a, b: a / b,
}


def _walk(node: exp.Expression, leaf: Leaf, date_leaf: DateLeaf | None, sources: list[str]) -> Interval | None:
    def walk(n: exp.Expression) -> Interval | None:
        return _walk(n, leaf, date_leaf, sources)

    if isinstance(node, (exp.Paren, exp.Try)):
        return walk(node.this)
    if isinstance(node, exp.Column):
        got = leaf(node)
        if got is None:
            return None
        sources.append(got[1])
        return got[0]
    if isinstance(node, exp.Literal):
        return _literal(node)
    op = _BINARY.get(type(node))
    if op is not None:
        a, b = walk(node.this), walk(node.expression)
        return op(a, b) if a is not None and b is not None else None
    if isinstance(node, (exp.Neg, exp.Abs)):
        a = walk(node.this)
        return None if a is None else (-a if isinstance(node, exp.Neg) else a.abs())
    if isinstance(node, (exp.Least, exp.Greatest, exp.Coalesce)):
        parts = [walk(p) for p in _nary(node)]
        if any(p is None for p in parts) or not parts:
            return None
        done = t.cast(list[Interval], parts)
        if isinstance(node, exp.Coalesce):  # the first argument that is not NULL
            out = done[0]
            for p in done[1:]:
                out = out.hull(p)
            return Interval(out.lower, out.upper, all(p.nullable for p in done))
        return _extreme(done, isinstance(node, exp.Least))
    if isinstance(node, (exp.Case, exp.If)):
        return _case(node, walk)
    if isinstance(node, (exp.Cast, exp.TryCast)):
        inner = walk(node.this)
        return None if inner is None else _cast(node, inner)
    return _date_part(node, date_leaf, sources)


def _case(node: exp.Expression, walk: t.Callable[[exp.Expression], "Interval | None"]) -> Interval | None:
    got = _branches(node)
    if got is None:
        return None
    values, missing = got
    parts = [walk(v) for v in values if not (isinstance(v, exp.Null))]
    if not parts or any(p is None for p in parts):
        return None
    done = t.cast(list[Interval], parts)
    out = done[0]
    for p in done[1:]:
        out = out.hull(p)
    nullable = missing or any(isinstance(v, exp.Null) for v in values) or any(p.nullable for p in done)
    return Interval(out.lower, out.upper, nullable)


def date_part_of(node: exp.Expression) -> tuple[str, exp.Expression] | None:
    """The date part a node takes (``year``, ``quarter``, ``month``) and of what, or None:
    ``extract(year FROM d)``, ``year(d)``, ``date_part('year', d)``, ``datepart('year', d)``.

    >>> from sqlglot import parse_one
    >>> date_part_of(parse_one("date_part('year', d)", read="duckdb"))[0]
    'year'
    >>> date_part_of(parse_one("extract(month FROM d)", read="duckdb"))[0]
    'month'
    """
    part, of = None, None
    if isinstance(node, exp.Extract):
        part, of = node.this.name, node.expression
    elif isinstance(node, (exp.Year, exp.Month, exp.Quarter)):
        part, of = type(node).__name__, node.this
    elif isinstance(node, exp.Anonymous) and str(node.name).lower() in ("date_part", "datepart") \
            and len(node.expressions) == 2 and isinstance(node.expressions[0], exp.Literal):
        part, of = node.expressions[0].name, node.expressions[1]
    elif isinstance(node, exp.DatePart if hasattr(exp, "DatePart") else ()) and isinstance(node.this, exp.Literal):
        part, of = node.this.name, node.expression
    if part is None or of is None or str(part).lower() not in DATE_PARTS:
        return None
    while isinstance(of, exp.Paren):
        of = of.this
    return str(part).lower(), of


def date_part_range(part: str, first: datetime.date, last: datetime.date) -> list[int]:
    """Every value ``part`` takes on the days from ``first`` to ``last``, in order.

    >>> date_part_range("year", datetime.date(1992, 1, 1), datetime.date(1998, 12, 31))
    [1992, 1993, 1994, 1995, 1996, 1997, 1998]
    >>> date_part_range("month", datetime.date(1995, 11, 5), datetime.date(1996, 2, 1))
    [1, 2, 11, 12]
    >>> date_part_range("quarter", datetime.date(1995, 11, 5), datetime.date(1996, 2, 1))
    [1, 4]
    """
    if part == "year":
        return list(range(first.year, last.year + 1))
    months = set()
    y, m = first.year, first.month
    while (y, m) <= (last.year, last.month) and len(months) < 12:
        months.add(m)
        y, m = (y + 1, 1) if m == 12 else (y, m + 1)
    if part == "month":
        return sorted(months)
    return sorted({(m - 1) // 3 + 1 for m in months})


def _date_part(node: exp.Expression, date_leaf: DateLeaf | None, sources: list[str]) -> Interval | None:
    """A date part of a bounded date column: from its first to its last value."""
    got = date_part_of(node)
    if got is None or date_leaf is None or not isinstance(got[1], exp.Column):
        return None
    bounds = date_leaf(got[1])
    if bounds is None:
        return None
    first, last, source = bounds
    values = date_part_range(got[0], first, last)
    sources.append(source)
    return Interval.of(min(values), max(values))


#: column types whose arithmetic :func:`derive` follows (FLOAT/REAL round to a coarser grid)
_NUMERIC = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
            "UBIGINT", "UHUGEINT", "DOUBLE", "DECIMAL")


def _ends(lower: float, upper: float) -> Interval:
    """A policy's bounds as an interval: each end widened to the decimal it was written as
    (the policy's 0.3 is the double just below 3/10; a DECIMAL column holds 3/10).

    >>> _ends(0.0, 0.3).upper
    Fraction(3, 10)
    """
    lo = min(Fraction(lower), Fraction(Decimal(repr(lower))))
    hi = max(Fraction(upper), Fraction(Decimal(repr(upper))))
    return Interval(lo, hi)


def derive_argument(arg: exp.Expression, rel: "Relation", catalog: t.Callable[[str], "dict[str, str] | None"]
                    ) -> Derived | None:
    """:func:`derive` for a DP aggregate's argument over ``rel`` (columns inlined over the
    reserved aliases): the policy's bounds of each column it reads, of the private table or a
    joined one, when the catalog types the column as a number (public: policy and catalog)."""
    def owned(col: exp.Column) -> tuple[t.Any, str, str] | None:
        owner = rel.owner(col)
        if owner is None:
            return None
        tp, name = owner
        return tp, name, ((catalog(tp.name) or {}).get(name) or "").upper()

    def leaf(col: exp.Column) -> tuple[Interval, str] | None:
        got = owned(col)
        if got is None:
            return None
        tp, name, dtype = got
        bounds = tp.column(name).bounds
        if bounds is None or not dtype.startswith(_NUMERIC):
            return None
        return _ends(*bounds), f"{tp.name}.{name} ∈ [{bounds[0]:g}, {bounds[1]:g}]"

    def date_leaf(col: exp.Column) -> tuple[datetime.date, datetime.date, str] | None:
        got = owned(col)
        dates = got[0].column(got[1]).dates if got is not None else None
        if got is None or dates is None:
            return None
        return dates[0], dates[1], f"{got[0].name}.{got[1]} ∈ [{dates[0]}, {dates[1]}]"

    out = derive(arg, leaf, date_leaf)
    return out if out is not None and out.lower < out.upper else None  # a constant has no bounds to clip to
