"""Names and shared pieces of the SQL that dpsql generates.

Every name a generated statement introduces (CTEs, aliases, columns) is defined here, and all
of them start with ``__`` (:data:`RESERVED_PREFIX`), which the binder refuses in queries
(:func:`dpsql._sql.scope.check_reserved`): no name a user writes can stand for one of them.

The pieces are text. Their shapes are fixed, and building trees with sqlglot's builders (which
copy and re-parse) would cost most of the planning time; only string literals go through
sqlglot, for its quoting.
"""

from __future__ import annotations

import functools
import typing as t
from dataclasses import dataclass

from sqlglot import exp

from dpsql._sql import template
from dpsql.errors import InternalError

# -- reserved names ------------------------------------------------------------------------------

#: Names starting with this are reserved for the generated SQL.
RESERVED_PREFIX = "__"
#: The alias under which the rewrite reads the base table.
BASE = "__t"
#: The CTE of source rows: group keys, clipped values and the privacy unit, one row per table row.
SRC = "__src"
#: The CTE of exact statistics, one row per group.
STATS = "__stats"
#: The public key domain, typed: ``(SELECT CAST(__k0 AS type) AS __k0, ... FROM __domain) AS __keys``.
KEYS = "__keys"
#: The public key domain as DuckDB's text of each key: a table handed to DuckDB as data, or a
#: ``VALUES`` list in a statement that runs on its own (:mod:`dpsql._plan.keys`).
DOMAIN = "__domain"
#: The table of released rows that the post-processing SELECT reads.
NOISY = "__noisy"
#: The privacy unit in ``__src``: the id, or a hash of the whole row of the base table.
UNIT = "__u"
#: The hash of the whole row of the base table, which orders a unit's rows for truncation.
ROW_HASH = "__h"
#: The rows of an id unit before truncation (the inner SELECT of ``__src``).
UNTRUNCATED = "__rows_in"
#: With max_groups_per_unit: a row's rank among its unit's rows in its group (1 for the first).
ROW_IN_GROUP = "__r"
#: The one column of ``__src`` when nothing else is needed.
ROW = "__row"
#: The rows of a group, counted for τ-thresholding of its key.
KEY_COUNT = "__keys_n"
#: The rows of a group, counted when the statistics need nothing else.
ROWS = "__rows"
#: The chunk of a source row (sample and aggregate).
CHUNK = "__chunk"
#: The alias of a subquery carried as verbatim text.
RAW = "__q"
#: The histogram of one DP aggregate's values, NULLs included, that ``__stats`` is read from
#: (:func:`histogram`; ``dpsql._plan.rewrite``).
HIST = "__hist"


def key(j: int) -> str:
    """The ``j``-th group key, in ``__src``, ``__stats`` and ``__noisy``."""
    return f"__k{j}"


def keys(count: int) -> list[str]:
    """The names of ``count`` group keys."""
    return [key(j) for j in range(count)]


def value(i: int) -> str:
    """The clipped argument of DP aggregate ``i`` in ``__src``."""
    return f"__v{i}"


def agg(i: int) -> str:
    """The released value of DP aggregate ``i`` in ``__noisy``."""
    return f"__a{i}"


def argument(i: int, j: int) -> str:
    """The ``j``-th argument of DP_AGG ``i``'s inner aggregate, as a column of ``__src``."""
    return f"__i{i}_{j}"


def subquery(i: int) -> str:
    """The CTE of DP aggregate ``i``'s per-group subquery."""
    return f"__sq{i}"


def stat(i: int, name: str) -> str:
    """The result column of statistic ``name`` of DP aggregate ``i``."""
    return f"a{i}_{name}"


class Scratch:
    """The names of one subquery's own CTEs and columns: ``scratch("w").pts == "__w_pts"``."""

    def __init__(self, tag: str) -> None:
        self.tag = tag

    def __getattr__(self, part: str) -> str:
        if part.startswith("_"):
            raise AttributeError(part)
        name = f"{RESERVED_PREFIX}{self.tag}_{part}"
        setattr(self, part, name)  # from now on a plain attribute
        return name


@functools.cache
def scratch(tag: str) -> Scratch:
    """The :class:`Scratch` names of ``tag`` (one object per tag: names are made once)."""
    return Scratch(tag)


# -- literals ------------------------------------------------------------------------------------


def literal(x: t.Any, *, double: bool = False) -> str:
    """A Python value as a SQL literal: NULL, TRUE or FALSE, a number (its ``repr``), or a
    quoted string; with ``double``, the number ``float(x)`` as ``CAST(... AS DOUBLE)``."""
    if double:
        return f"CAST({float(x)!r} AS DOUBLE)"
    if x is None:
        return "NULL"
    if isinstance(x, bool):
        return "TRUE" if x else "FALSE"
    if isinstance(x, (int, float)):
        return repr(x)
    # sqlglot's DuckDB string literal, written directly (a key domain holds thousands of them)
    return "'" + str(x).replace("'", "''") + "'"


# -- group keys ----------------------------------------------------------------------------------


def value_rows(rows: t.Iterable[t.Sequence[t.Any]]) -> str:
    """The rows of a ``VALUES`` list, each value as :func:`literal` writes it: ``('a', 1), ...``."""
    return ", ".join(f"({', '.join(map(literal, row))})" for row in rows)


# -- order statistics ----------------------------------------------------------------------------

# A mechanism's per-group subquery (the CTEs of its order statistics or chunks) is built from
# templates parsed once (:mod:`dpsql._sql.template`) and carried into the statement as a tree
# (:func:`dpsql.mechanisms.base.raw_select`): every compiler takes it as it is, none parses text.

#: Buckets of the order-statistics histogram (a power of two: a cheap hash aggregate, and few
#: distinct values per bucket). They decide only which rows the second pass reads.
BUCKETS = 1 << 12


@dataclass(frozen=True)
class Values:
    """The clipped values of one DP aggregate: column ``value`` of the CTE ``source``, in
    [``lower``, ``upper``], per group of ``keys``."""

    source: str
    keys: tuple[str, ...]
    value: str
    lower: float
    upper: float
    #: whether every value is a whole number (an integer column clipped to whole-number bounds)
    integer: bool = False
    #: the CTE holding :func:`histogram` of these values, which the order statistics then read
    #: instead of scanning ``source`` for it ("": they build their own)
    histogram: str = ""

    @property
    def one_per_bucket(self) -> bool:
        """:func:`one_per_bucket` of these values."""
        return one_per_bucket(self.lower, self.upper, self.integer)


def one_per_bucket(lower: float, upper: float, integer: bool) -> bool:
    """Whether a value histogram (GROUP BY value) has at most :data:`BUCKETS` rows per group:
    whole numbers in a range of at most that many."""
    return integer and upper - lower < BUCKETS


_BUCKET = "CAST(FLOOR((_Z_v - _Z_lo) * _Z_scale) AS BIGINT)"
_HIST_ONE = "SELECT _Z_keys, _Z_v AS __b, COUNT(*) AS __c, _Z_v AS __lo, _Z_v AS __hi FROM _Z_src GROUP BY ALL"
_HIST = "SELECT _Z_keys, _Z_b AS __b, COUNT(*) AS __c, MIN(_Z_v) AS __lo, MAX(_Z_v) AS __hi FROM _Z_src GROUP BY ALL"
_SHARED = "SELECT * FROM _Z_hist WHERE NOT __b IS NULL"
_CUMULATIVE = """
SELECT *, _Z_extra
FROM (SELECT *, SUM(__c) OVER (PARTITION BY _Z_keys ORDER BY __b ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
             AS __cum, SUM(__c) OVER (PARTITION BY _Z_keys) AS __n FROM _Z_h)
"""
_TWO_PASSES = """
WITH _Z_need AS (
  SELECT * FROM _Z_hist WHERE _Z_near
), _Z_multi AS (
  SELECT _Z_keys, __b, __cum - __c AS __below, _Z_carry, __lo, __hi FROM _Z_need WHERE __lo < __hi
), _Z_vals0 AS (
  SELECT _Z_keys, _Z_b AS __b, _Z_v AS __val, COUNT(*) AS __c FROM _Z_src
  WHERE _Z_b IN (SELECT __b FROM _Z_multi)
  GROUP BY ALL
), _Z_vals AS (
  SELECT m._Z_keys, m.__b, a.__val, a.__c, m.__below, m._Z_carry
  FROM _Z_vals0 AS a JOIN _Z_multi AS m ON _Z_match
), _Z_pts AS (
  SELECT * FROM (
    SELECT _Z_keys, __lo AS __val, __c, __cum, _Z_carry FROM _Z_need WHERE __lo = __hi
    UNION ALL
    SELECT _Z_keys, __val, __c, __below + SUM(__c) OVER (PARTITION BY _Z_keys, __b ORDER BY __val
             ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS __cum, _Z_carry FROM _Z_vals
  ) WHERE _Z_near
)
SELECT 1
"""
_ONE_PASS = """
WITH _Z_need AS (
  SELECT * FROM _Z_hist WHERE _Z_near
), _Z_pts AS (
  SELECT _Z_keys, __lo AS __val, __c, __cum, _Z_carry FROM _Z_need
)
SELECT 1
"""

#: columns a mechanism adds to the histogram rows: name → expression (:func:`order_statistics`)
Extra = t.Mapping[str, exp.Expression]


def cte(name: str, body: exp.Expression) -> exp.CTE:
    """``name AS (body)``."""
    return exp.CTE(this=body, alias=exp.TableAlias(this=exp.to_identifier(name)))


def _bucket(values: Values, buckets: int = BUCKETS) -> exp.Expression:
    """⌊(x − L)·buckets/(U − L)⌋: 0 .. buckets − 1, and U in a bucket of its own.

    >>> _bucket(Values("__src", (), "__v0", 0.0, 8.0), 4).sql("duckdb")
    'CAST(FLOOR((__v0 - CAST(0.0 AS DOUBLE)) * CAST(0.5 AS DOUBLE)) AS BIGINT)'
    """
    scale = buckets / (values.upper - values.lower)
    return template.fill(_BUCKET, v=values.value, lo=template.double(values.lower), scale=template.double(scale))


def histogram(values: Values, *, nulls: bool = True, buckets: int = BUCKETS) -> exp.Select:
    """The SELECT of the order statistics' histogram of ``values``, per group: the bucket
    ``__b`` (the value itself when :attr:`Values.one_per_bucket`), the count ``__c``, the least
    and greatest value ``__lo`` and ``__hi``. With ``nulls``, the rows whose value is NULL are
    counted too, in a bucket NULL of their group: the histogram then also holds each group's
    ``COUNT(*)`` (the sum of ``__c``) and ``COUNT(value)`` (the sum over the other buckets), so
    a statement can read those counts from it rather than aggregating the rows again.

    >>> histogram(Values("__src", ("__k0",), "__v0", 0, 9, True), nulls=False).sql("duckdb")
    'SELECT __k0, __v0 AS __b, COUNT(*) AS __c, __v0 AS __lo, __v0 AS __hi FROM __src WHERE NOT __v0 IS NULL GROUP BY ALL'
    """
    slots = {"keys": values.keys, "v": values.value, "src": values.source}
    if values.one_per_bucket:
        tree = template.fill(_HIST_ONE, **slots)
    else:
        tree = template.fill(_HIST, b=_bucket(values, buckets), **slots)
    if not nulls:
        known = exp.Not(this=exp.Is(this=exp.column(values.value), expression=exp.Null()))
        tree.set("where", exp.Where(this=known))
    return t.cast(exp.Select, tree)


def _histogram_cte(values: Values, names: Scratch, buckets: int = BUCKETS) -> exp.CTE:
    """The CTE ``names.h``: the histogram of the non-NULL values, built here or read from the
    shared one (:attr:`Values.histogram`, built with :data:`BUCKETS`)."""
    if values.histogram and buckets == BUCKETS:
        return cte(names.h, template.fill(_SHARED, hist=values.histogram))
    return cte(names.h, histogram(values, nulls=False, buckets=buckets))


def order_histogram(values: Values, names: Scratch) -> list[exp.CTE]:
    """The CTE ``names.h``: per group, one row per distinct non-NULL value of
    :attr:`Values.one_per_bucket` values, ``__b`` = ``__lo`` = ``__hi`` = the value and its
    count ``__c``; read from the shared histogram when there is one."""
    if not values.one_per_bucket:
        raise InternalError("a value histogram needs whole numbers in a range of at most BUCKETS")
    return [_histogram_cte(values, names)]


def order_statistics(values: Values, names: Scratch, near: exp.Expression,
                     extra: Extra | None = None, buckets: int = BUCKETS) -> list[exp.CTE]:
    """CTEs (the text after ``WITH``) for the distinct values of a window of ranks, per group,
    in two passes over ``values.source`` and no sort of the table.

    A histogram of ``buckets`` equal-width buckets on [L, U] (per group and bucket ``__b``: the
    count ``__c``, ``__lo`` and ``__hi``); window sums give each bucket its cumulative count
    ``__cum`` and the group its size ``__n``. ``extra`` adds columns to the histogram rows
    (name → SQL over those columns; it may use windows over the group,
    ``OVER (PARTITION BY`` the keys ``)``). The buckets meeting the window are expanded to their
    distinct values: a bucket with one value is exact as it is, the values of the others are
    counted in a second pass over the rows whose bucket number is one of theirs (a semi join
    on the bucket: one hash probe per row; a value range bounded by scalar subqueries ran as
    two nested-loop joins over every row, as long as the histogram itself).

    ``near`` says whether a rank range (``__cum`` − ``__c``, ``__cum``] meets the window; it may
    use ``__n`` and the ``extra`` columns. Two CTEs are for the caller:

    * ``names.hist``: the histogram, one row per group and bucket (with ``__n`` and ``extra``);
    * ``names.pts``: the distinct values ``__val`` whose rank range meets the window, with
      multiplicity ``__c``, cumulative rank ``__cum``, ``__n`` and the ``extra`` columns.

    Buckets only decide which rows the second pass reads: ``pts`` is the same for any count.
    """
    if values.one_per_bucket:
        return value_histogram(values, names, near, extra)
    bucket = _bucket(values, buckets)
    match = template.conjunction([*template.same_keys("a", "m", values.keys),
                                  exp.EQ(this=exp.column("__b", "a"), expression=exp.column("__b", "m"))])
    tree = template.fill(_TWO_PASSES, keys=values.keys, carry=["__n", *(extra or {})], near=near, b=bucket,
                         v=values.value, src=values.source, match=match, **_names(names))
    return [_histogram_cte(values, names, buckets), _cumulative(values, names, extra), *tree.args["with_"].expressions]


def _names(names: Scratch) -> dict[str, str]:
    return {part: getattr(names, part) for part in ("hist", "need", "multi", "vals0", "vals", "pts")}



def _cumulative(values: Values, names: Scratch, extra: Extra | None) -> exp.CTE:
    """The CTE ``names.hist``: ``names.h`` with the cumulative count ``__cum``, the group size
    ``__n`` and the ``extra`` columns."""
    added = [exp.alias_(e, name) for name, e in (extra or {}).items()]
    return cte(names.hist, template.fill(_CUMULATIVE, extra=added, keys=values.keys, h=names.h))


def value_histogram(values: Values, names: Scratch, near: exp.Expression,
                    extra: Extra | None = None) -> list[exp.CTE]:
    """:func:`order_statistics` for whole numbers in a range of at most :data:`BUCKETS`: one
    pass, GROUP BY value, gives the exact histogram (a bucket per value), and every order
    statistic follows from its cumulative counts. Same CTEs and columns."""
    tree = template.fill(_ONE_PASS, keys=values.keys, carry=["__n", *(extra or {})], near=near,
                         hist=names.hist, need=names.need, pts=names.pts)
    return [_histogram_cte(values, names), _cumulative(values, names, extra), *tree.args["with_"].expressions]
