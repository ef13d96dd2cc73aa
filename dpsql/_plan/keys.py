"""Public key domains (SPEC §4.5): normalised by DuckDB's own cast, made once, read as a table.

A domain lists keys, one part per GROUP BY expression: the query's ``keys=[...]``, or the
product of the policy's ``keys`` of every GROUP BY column. Each part is cast by DuckDB to the
type of its group expression, in a private in-memory DuckDB that holds no data and reads no
files (:func:`_cast_key`). Refused, before anything runs: a part that does not cast, a number
that the cast changes (16.5 as INTEGER), a value whose text does not read back as itself, and
two keys that become one (DuckDB would put them in one group, released and charged once but
shown twice with fresh noise). Only the query and the policy are read.

:class:`KeyDomain` keeps DuckDB's text of every typed part. The DuckDB statement reads those
texts as a table and casts them back to the group types (:func:`dpsql._compile.domain.typed_keys`),
so a public key has exactly the type a τ-selected key has. The table reaches DuckDB as Arrow
data, not as SQL text: as a ``VALUES`` list, 100,000 keys took DuckDB 0.9 s to parse and
plan. Spark's statement has the domain as a ``VALUES`` list of literals instead (its target
reads no data: ``reads_data = False``, :mod:`dpsql._plan.rewrite`).

A policy's key tuples never change, so the domain of a policy column is made once per column
and type, and a query over 100,000 public keys plans in about a millisecond.

Where the cast is done. A part that casts to itself (a str to VARCHAR, an int inside an integer
type, a bool to BOOLEAN, a date to DATE) is cast in Python, exactly as DuckDB would
(:func:`_pure`); any other by the private DuckDB above, or, on an engine that casts keys itself
(``Backend.casts_keys``: Spark), by that engine, in a statement of literals only: planning on
Spark opens no DuckDB.

Besides the query's ``keys`` and the policy's, a GROUP BY expression may have a domain from
:mod:`dpsql._sql.keysource`: the part's values of a date column's bounds, or the distinct values
of a public table's column, read from that table alone through the engine.
"""

from __future__ import annotations

import atexit
import dataclasses
import datetime
import decimal
import functools
import itertools
import math
import threading
import typing as t
from dataclasses import dataclass

import duckdb
from sqlglot import exp

from dpsql._sql import build, casts
from dpsql.errors import Error, OptionError, PolicyError

if t.TYPE_CHECKING:
    import pyarrow as pa

    from dpsql._sql.bind import Bound
    from dpsql._sql.keysource import KeySource
    from dpsql.backends.backend import Backend

#: A private in-memory DuckDB that holds no data and reads no files, used only to cast public
#: key values to the type of their group expression; created on first use, shared by all.
_CASTER: duckdb.DuckDBPyConnection | None = None
_CASTER_LOCK = threading.Lock()
_CASTER_CONFIG = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "lock_configuration": True,
}


@dataclass(frozen=True, eq=False)
class KeyDomain:
    """A public key domain after DuckDB's cast, in the order given (the policy's: a product,
    the last column varying fastest)."""

    #: the DuckDB type of each group expression
    types: tuple[str, ...]
    #: each key as a ``VALUES`` list writes it: a part's typed value when it is a plain SQL
    #: literal, else DuckDB's text of it
    rows: tuple[tuple[t.Any, ...], ...]
    #: DuckDB's text of every typed part (None for NULL), one tuple per part
    texts: tuple[tuple[str | None, ...], ...]
    #: where the keys came from, when not from the query or the policy's keys (for EXPLAIN)
    source: str = ""

    def __len__(self) -> int:
        return len(self.rows)

    @functools.cached_property
    def table(self) -> "pa.Table":
        """The texts as an Arrow table of strings, one column per part (``__k0``, ...)."""
        import pyarrow as pa

        return pa.table({build.key(j): pa.array(col, pa.string()) for j, col in enumerate(self.texts)})



@dataclass(frozen=True)
class _Key:
    """One key part after DuckDB's cast to its group expression's type."""

    given: t.Any  # as written in the query or the policy
    typed: t.Any  # DuckDB's value (None for NULL, or when the cast fails)
    text: str | None  # DuckDB's text of ``typed``; None when the cast fails
    exact: bool  # False when a number changes in the cast (16.5 → INTEGER 16)
    reads_back: bool = True  # whether ``text`` cast to the type gives ``typed`` again

    @property
    def literal(self) -> t.Any:
        """What a ``VALUES`` list of the domain writes: the typed value when it is a plain SQL
        literal, else DuckDB's text of it, which DuckDB casts back to the same value."""
        v = self.typed
        if v is None or isinstance(v, (bool, int, str)) or (isinstance(v, float) and math.isfinite(v)):
            return v
        return self.text

    @property
    def identity(self) -> t.Any:
        """Equal for two parts DuckDB groups together (NaN is one group, unlike in Python)."""
        return ("NaN",) if isinstance(self.typed, float) and math.isnan(self.typed) else self.typed


def _cast_rows(sql: str, value: t.Any) -> list[tuple[t.Any, ...]] | None:
    """The rows of ``sql`` with the parameter ``value`` on the shared casting connection (made on
    first use), or None when DuckDB does not take it."""
    global _CASTER
    with _CASTER_LOCK:
        if _CASTER is None:
            _CASTER = duckdb.connect(":memory:", config=_CASTER_CONFIG)
            atexit.register(_CASTER.close)
        try:
            return _CASTER.execute(sql, [value]).fetchall()
        except (duckdb.Error, TypeError, ValueError, OverflowError):  # not a value DuckDB can take
            return None


def _cast_sql(x: exp.Expression, dtype: str) -> str:
    """``SELECT`` the typed value of ``x``, its text, and whether the text casts back to the
    same value (:func:`dpsql._sql.casts.round_trip`)."""
    return exp.Select(expressions=casts.round_trip(x, dtype)).sql(dialect="duckdb")


Cast = tuple[t.Any, "str | None", bool]

#: the integer types by their range: a Python int inside it casts to itself
_INT_RANGES = {
    "TINYINT": (-(2**7), 2**7), "SMALLINT": (-(2**15), 2**15), "INTEGER": (-(2**31), 2**31),
    "BIGINT": (-(2**63), 2**63), "HUGEINT": (-(2**127), 2**127), "UTINYINT": (0, 2**8),
    "USMALLINT": (0, 2**16), "UINTEGER": (0, 2**32), "UBIGINT": (0, 2**64), "UHUGEINT": (0, 2**128),
}


def _pure(value: t.Any, dtype: str) -> Cast | None:
    """The cast of ``value`` to ``dtype`` where it is the value itself and its text is Python's
    (a str to VARCHAR, an int inside an integer type, a bool to BOOLEAN, a date of years 1 to
    9999 to DATE), or None: then an engine casts it. No DuckDB is opened for these.

    >>> _pure(16, "INTEGER"), _pure("x", "VARCHAR"), _pure(2**31, "INTEGER"), _pure("16", "INTEGER")
    ((16, '16', True), ('x', 'x', True), None, None)
    """
    kind, dtype = type(value), dtype.upper()
    if kind is str and dtype == "VARCHAR":
        return (value, value, True)
    if kind is int and dtype in _INT_RANGES:
        lo, hi = _INT_RANGES[dtype]
        return (value, str(value), True) if lo <= value < hi else None
    if kind is bool and dtype == "BOOLEAN":
        return (value, "true" if value else "false", True)
    if kind is datetime.date and dtype == "DATE":
        return (value, value.isoformat(), True)
    return None


#: how a key part is cast when :func:`_pure` does not know: the value and the type, to
#: (typed value, its text, whether the text reads back)
Caster = t.Callable[[t.Any, str], Cast]


def _run_cast(value: t.Any, dtype: str) -> Cast:
    rows = _cast_rows(_cast_sql(exp.Placeholder(this="1"), dtype), value)
    return (rows[0][0], rows[0][1], bool(rows[0][2])) if rows else (None, None, False)


@functools.lru_cache(maxsize=4096)
def _cast_cached(kind: str, value: t.Any, dtype: str) -> Cast:
    return _run_cast(value, dtype)


#: Python types DuckDB binds as one SQL type whatever the value (ints only within BIGINT): their
#: casts can run for a whole list in one statement
_LIST_TYPES = {"str": "VARCHAR", "int": "BIGINT"}


def _cast_batch(values: t.Iterable[t.Any], dtype: str) -> dict[tuple[str, t.Any], Cast]:
    """:func:`_run_cast` of the strings and the ints within BIGINT among ``values``, one statement
    per kind (keyed by type name and value); a kind whose statement fails is left to
    :func:`_run_cast`. A domain of 100,000 keys cast one by one took 20 s. The casts of the
    last few lists are kept (a query's ``keys=`` is cast again by every plan of the query)."""
    plain = tuple((type(v).__name__, v) for v in values
                  if (type(v) is str or (type(v) is int and -(2**63) <= v < 2**63)) and _pure(v, dtype) is None)
    return _cast_plain(plain, dtype) if len(plain) > 1 else {}


@functools.lru_cache(maxsize=4)
def _cast_plain(plain: tuple[tuple[str, t.Any], ...], dtype: str) -> dict[tuple[str, t.Any], Cast]:
    out: dict[tuple[str, t.Any], Cast] = {}
    for kind, sql_type in _LIST_TYPES.items():
        vals = list(dict.fromkeys(v for k, v in plain if k == kind))
        if len(vals) < 2:
            continue
        rows = _cast_rows(_cast_list(dtype, sql_type), vals)  # None: left to the casts one by one
        if rows is not None and len(rows) == len(vals):
            out.update({(kind, v): (a, b, bool(c)) for v, (a, b, c) in zip(vals, rows)})
    return out


@functools.lru_cache(maxsize=64)
def _cast_list(dtype: str, sql_type: str) -> str:
    """The casts of each element of the list ``$1`` (of ``sql_type``), in the list's order."""
    listed = exp.Cast(this=exp.Placeholder(this="1"), to=exp.DataType.build(sql_type + "[]", dialect="duckdb"))
    source = exp.select(exp.alias_(exp.Unnest(expressions=[listed]), "x"),
                        exp.alias_(exp.Anonymous(this="GENERATE_SUBSCRIPTS", expressions=[listed.copy(), exp.Literal.number(1)]), "i"))
    select = exp.Select(expressions=casts.round_trip(exp.column("x"), dtype)).from_(source.subquery())
    return select.order_by("i").sql(dialect="duckdb")


def _cast_key(value: t.Any, dtype: str, batch: t.Mapping[tuple[str, t.Any], Cast] | None = None,
              caster: Caster | None = None) -> _Key:
    """DuckDB's own cast of one key part to ``dtype`` (the type of its group expression): in
    Python where that is exact (:func:`_pure`), else from ``batch`` (:func:`_cast_batch`) when
    it holds the value, else by ``caster`` (an engine's), else in the private caster."""
    if value is None:
        return _Key(None, None, "NULL", True)
    kind = type(value).__name__  # the type name keeps 1, 1.0, True apart
    pure = _pure(value, dtype)
    try:
        cast = pure if pure is not None else batch.get((kind, value)) if batch else None
        if cast is None and caster is not None:
            cast = caster(value, dtype)
        typed, text, back = cast if cast is not None else _cast_cached(kind, value, dtype)
    except TypeError:  # unhashable
        typed, text, back = caster(value, dtype) if caster is not None else _run_cast(value, dtype)
    exact = True
    if isinstance(value, (int, float)) and not isinstance(value, bool) and text is not None:
        if isinstance(typed, (int, decimal.Decimal)) and not isinstance(typed, bool):
            exact = typed == value
    return _Key(value, typed, text, exact, back)


def engine_caster(engine: "Backend") -> Caster | None:
    """The cast of key parts on ``engine`` when it casts keys itself (``casts_keys``: Spark, so
    that its planning opens no DuckDB): a statement of literals only, read by the engine's
    :meth:`~dpsql.backends.backend.Backend.public_rows`. None: the private caster does it."""
    if not engine.casts_keys:
        return None

    def cast(value: t.Any, dtype: str) -> Cast:
        try:
            rows = engine.public_rows(_cast_sql(exp.convert(value), dtype))
        except (Error, ValueError, TypeError):  # not a value the engine takes
            return (None, None, False)
        return (rows[0][0], rows[0][1], bool(rows[0][2])) if rows else (None, None, False)

    return cast


ErrorType = type[OptionError] | type[PolicyError]


def normalise(keys: t.Iterable[tuple[t.Any, ...]], types: t.Sequence[str], where: str, error: ErrorType,
              caster: Caster | None = None) -> KeyDomain:
    """The domain of ``keys`` (tuples of one part per type), each part cast by DuckDB to its
    type (or by ``caster``, an engine's); ``where`` names the domain in the refusals (module
    docstring)."""
    keys = list(keys)
    batches = [_cast_batch((k[j] for k in keys if len(k) > j), dtype) if len(keys) > 1 and caster is None else {}
               for j, dtype in enumerate(types)]
    rows: list[tuple[t.Any, ...]] = []
    texts: list[tuple[str | None, ...]] = []
    seen: dict[tuple[t.Any, ...], tuple[_Key, ...]] = {}
    for key in keys:
        parts = tuple(_cast_key(v, dtype, batch, caster) for v, dtype, batch in zip(key, types, batches))
        for part, dtype in zip(parts, types):
            if part.text is None:
                raise error(f"{where}: {part.given!r} is not a valid {dtype}")
            if not part.exact:
                raise error(f"{where}: {part.given!r} is not a valid {dtype} (it would become {part.text})")
            if not part.reads_back:
                raise error(f"{where}: {part.given!r} as {dtype} ({part.text}) does not read back from its "
                            "text, so it cannot be a public key")
        identity = tuple(p.identity for p in parts)
        if identity in seen:
            first = seen[identity]
            if len(parts) == 1:
                raise error(f"{where}: {first[0].given!r} and {parts[0].given!r} are the same "
                            f"{types[0]} key {parts[0].text}")
            a, b = tuple(p.given for p in first), tuple(p.given for p in parts)
            same = ", ".join(str(p.text) for p in parts)
            raise error(f"{where}: {a!r} and {b!r} are the same key ({same}) of types ({', '.join(types)})")
        seen[identity] = parts
        rows.append(tuple(p.literal for p in parts))
        texts.append(tuple(None if p.given is None else p.text for p in parts))
    return KeyDomain(tuple(types), tuple(rows), tuple(zip(*texts)) if texts else tuple(() for _ in types))


class _Same:
    """A key of a cache that is equal only to itself: a policy's key tuple, found by identity
    (hashing 100,000 keys on every plan would cost more than looking the domain up)."""

    __slots__ = ("obj",)

    def __init__(self, obj: object) -> None:
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.obj is self.obj


@functools.lru_cache(maxsize=16)  # a domain of 100,000 keys keeps about 20 MB
def _policy_domain(columns: tuple[tuple[_Same, str, str], ...], engine: "Backend | None" = None) -> KeyDomain:
    """The product of the policy's domains of ``columns`` (their keys, type and policy path),
    cast by ``engine`` when it casts keys itself (:func:`engine_caster`)."""
    caster = engine_caster(engine) if engine is not None else None
    return _product([normalise(((k,) for k in keys.obj), [dtype], where, PolicyError, caster)
                     for keys, dtype, where in columns])


def _product(parts: list[KeyDomain]) -> KeyDomain:
    """Every combination of the parts' keys, the last part varying fastest."""
    if len(parts) == 1:
        return parts[0]
    sizes = [len(p) for p in parts]
    texts = []
    for j, part in enumerate(parts):
        inner, outer = math.prod(sizes[j + 1:]), math.prod(sizes[:j])
        texts.append(tuple(v for v in part.texts[0] for _ in range(inner)) * outer)
    rows = tuple(tuple(itertools.chain.from_iterable(k)) for k in itertools.product(*(p.rows for p in parts)))
    sources = "; ".join(p.source for p in parts if p.source)
    return KeyDomain(tuple(p.types[0] for p in parts), rows, tuple(texts), sources)


def _read_domain(rows: t.Sequence[tuple[t.Any, ...]], dtype: str, where: str) -> KeyDomain:
    """A domain from an engine's rows ``(key, its text, whether the text reads back)`` of a
    public table's distinct values (:meth:`KeySource.sql <dpsql._sql.keysource.KeySource.sql>`)."""
    keys: list[_Key] = []
    seen: set[t.Any] = set()
    for value, text, back in rows:
        key = _Key(value, value, "NULL" if value is None else text, True, bool(back) or value is None)
        if key.text is None or not key.reads_back:
            raise PolicyError(f"{where}: {value!r} as {dtype} ({text}) does not read back from its text, so it "
                              "cannot be a public key; give keys=[...]")
        if key.identity in seen:  # pragma: no cover - DISTINCT made them distinct
            continue
        seen.add(key.identity)
        keys.append(key)
    texts = (tuple(None if k.given is None else k.text for k in keys),)
    return KeyDomain((dtype,), tuple((k.literal,) for k in keys), texts, where)


def _source_domain(source: "KeySource", dtype: str, engine: "Backend | None", caster: Caster | None
                   ) -> KeyDomain | None:
    """The domain of one GROUP BY expression from a :class:`~dpsql._sql.keysource.KeySource`:
    its values (a date part), or a public table's distinct values read by ``engine``."""
    if source.values is not None:
        domain = normalise(((v,) for v in source.values), [dtype], source.where, PolicyError, caster)
        return dataclasses.replace(domain, source=source.where)
    if engine is None:
        return None
    return _read_domain(engine.public_rows(source.sql(dtype)), dtype, source.where)


def public_domain(bound: "Bound", engine: "Backend | None" = None) -> KeyDomain | None:
    """The public key domain of a grouped query, or None (keys are then τ-selected): the
    query's ``keys``, else for each GROUP BY expression the policy's keys of its column or a
    source of :mod:`dpsql._sql.keysource` (a public table's column read by ``engine``, a date
    part of a bounded date column)."""
    opts = bound.options
    width = len(bound.group_by)
    types = [*bound.group_types[:width], *["VARCHAR"] * (width - len(bound.group_types))]
    caster = engine_caster(engine) if engine is not None else None
    if opts.keys is not None:
        if not width:
            raise OptionError("option 'keys' needs a GROUP BY")
        if any(len(k) != width for k in opts.keys):
            raise OptionError(f"option 'keys': each key must have {width} part(s), one per " + "GROUP BY expression")
        return normalise(opts.keys, types, "keys", OptionError, caster)
    assert bound.table is not None
    by = engine if caster is not None else None  # the private caster's domains are shared by all engines
    columns: list[tuple[_Same, str, str]] = []
    parts: list[KeyDomain | None] = []
    for j, (col, dtype) in enumerate(zip(bound.group_columns, types)):
        keys = bound.table.column(col).keys if col else None
        if keys is not None:
            columns.append((_Same(keys), dtype, f"tables.{bound.table.name}.columns.{col}.keys"))
            parts.append(None)
            continue
        source = bound.group_sources[j] if j < len(bound.group_sources) else None
        part = _source_domain(source, dtype, engine, caster) if source is not None else None
        if part is None:
            return None
        parts.append(part)
    if all(p is None for p in parts):
        return _policy_domain(tuple(columns), by)
    policy = iter([_policy_domain((c,), by) for c in columns])
    return _product([p if p is not None else next(policy) for p in parts])
