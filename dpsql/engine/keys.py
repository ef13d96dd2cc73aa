"""Public key domains (SPEC §4.5): normalised by DuckDB's own cast, made once, read as a table.

A domain lists keys, one part per GROUP BY expression: the query's ``keys=[...]``, or the
product of the policy's ``keys`` of every GROUP BY column. Each part is cast by DuckDB to the
type of its group expression, in a private in-memory DuckDB that holds no data and reads no
files (:func:`_cast_key`). Refused, before anything runs: a part that does not cast, a number
that the cast changes (16.5 as INTEGER), a value whose text does not read back as itself, and
two keys that become one (DuckDB would put them in one group, released and charged once but
shown twice with fresh noise). Only the query and the policy are read.

:class:`KeyDomain` keeps DuckDB's text of every typed part. The DuckDB statement reads those
texts as a table and casts them back to the group types (:func:`dpsql.compile.domain.typed_keys`),
so a public key has exactly the type a τ-selected key has. The table reaches DuckDB as Arrow
data, not as SQL text: as a ``VALUES`` list, 100,000 keys took DuckDB 0.9 s to parse and
plan. Spark's statement has the domain as a ``VALUES`` list of literals instead (its target
reads no data: ``reads_data = False``, :mod:`dpsql.engine.rewrite`).

A policy's key tuples never change, so the domain of a policy column is made once per column
and type, and a query over 100,000 public keys plans in about a millisecond.
"""

from __future__ import annotations

import atexit
import decimal
import functools
import itertools
import math
import threading
import typing as t
from dataclasses import dataclass

import duckdb

from dpsql.errors import OptionError, PolicyError
from dpsql.sql import build

if t.TYPE_CHECKING:
    import pyarrow as pa

    from dpsql.sql.bind import Bound

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

    def __len__(self) -> int:
        return len(self.rows)

    @functools.cached_property
    def table(self) -> "pa.Table":
        """The texts as an Arrow table of strings, one column per part (``__k0``, ...)."""
        import pyarrow as pa

        return pa.table({build.key(j): pa.array(col, pa.string()) for j, col in enumerate(self.texts)})

    def values(self, alias: str) -> str:
        """The texts as SQL: ``(VALUES ('16'), ...) AS alias(__k0, ...)``."""
        return f"(VALUES {build.value_rows(zip(*self.texts))}) AS {alias}({', '.join(build.keys(len(self.types)))})"


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


def _cast_sql(x: str, dtype: str) -> str:
    """The typed value of ``x``, its text, and whether the text casts back to the same value."""
    typed = f"TRY_CAST({x} AS {dtype})"
    return f"{typed}, CAST({typed} AS VARCHAR), TRY_CAST(CAST({typed} AS VARCHAR) AS {dtype}) IS NOT DISTINCT FROM {typed}"


Cast = tuple[t.Any, "str | None", bool]


def _run_cast(value: t.Any, dtype: str) -> Cast:
    rows = _cast_rows(f"SELECT {_cast_sql('$1', dtype)}", value)
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
                  if type(v) is str or (type(v) is int and -(2**63) <= v < 2**63))
    return _cast_plain(plain, dtype) if len(plain) > 1 else {}


@functools.lru_cache(maxsize=4)
def _cast_plain(plain: tuple[tuple[str, t.Any], ...], dtype: str) -> dict[tuple[str, t.Any], Cast]:
    out: dict[tuple[str, t.Any], Cast] = {}
    for kind, sql_type in _LIST_TYPES.items():
        vals = list(dict.fromkeys(v for k, v in plain if k == kind))
        if len(vals) < 2:
            continue
        sql = (f"SELECT {_cast_sql('x', dtype)} FROM "
               f"(SELECT UNNEST($1::{sql_type}[]) AS x, GENERATE_SUBSCRIPTS($1::{sql_type}[], 1) AS i) ORDER BY i")
        rows = _cast_rows(sql, vals)  # None: left to the casts one by one
        if rows is not None and len(rows) == len(vals):
            out.update({(kind, v): (a, b, bool(c)) for v, (a, b, c) in zip(vals, rows)})
    return out


def _cast_key(value: t.Any, dtype: str, batch: t.Mapping[tuple[str, t.Any], Cast] | None = None) -> _Key:
    """DuckDB's own cast of one key part to ``dtype`` (the type of its group expression); from
    ``batch`` (:func:`_cast_batch`) when it holds the value."""
    if value is None:
        return _Key(None, None, "NULL", True)
    kind = type(value).__name__  # the type name keeps 1, 1.0, True apart
    try:
        cast = batch.get((kind, value)) if batch else None
        typed, text, back = cast if cast is not None else _cast_cached(kind, value, dtype)
    except TypeError:  # unhashable
        typed, text, back = _run_cast(value, dtype)
    exact = True
    if isinstance(value, (int, float)) and not isinstance(value, bool) and text is not None:
        if isinstance(typed, (int, decimal.Decimal)) and not isinstance(typed, bool):
            exact = typed == value
    return _Key(value, typed, text, exact, back)


Error = type[OptionError] | type[PolicyError]


def normalise(keys: t.Iterable[tuple[t.Any, ...]], types: t.Sequence[str], where: str, error: Error) -> KeyDomain:
    """The domain of ``keys`` (tuples of one part per type), each part cast by DuckDB to its
    type; ``where`` names the domain in the refusals (module docstring)."""
    keys = list(keys)
    batches = [_cast_batch((k[j] for k in keys if len(k) > j), dtype) if len(keys) > 1 else {}
               for j, dtype in enumerate(types)]
    rows: list[tuple[t.Any, ...]] = []
    texts: list[tuple[str | None, ...]] = []
    seen: dict[tuple[t.Any, ...], tuple[_Key, ...]] = {}
    for key in keys:
        parts = tuple(_cast_key(v, dtype, batch) for v, dtype, batch in zip(key, types, batches))
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
def _policy_domain(columns: tuple[tuple[_Same, str, str], ...]) -> KeyDomain:
    """The product of the policy's domains of ``columns`` (their keys, type and policy path)."""
    parts = [normalise(((k,) for k in keys.obj), [dtype], where, PolicyError) for keys, dtype, where in columns]
    if len(parts) == 1:
        return parts[0]
    sizes = [len(p) for p in parts]
    texts = []
    for j, part in enumerate(parts):
        inner, outer = math.prod(sizes[j + 1:]), math.prod(sizes[:j])
        texts.append(tuple(v for v in part.texts[0] for _ in range(inner)) * outer)
    rows = tuple(tuple(itertools.chain.from_iterable(k)) for k in itertools.product(*(p.rows for p in parts)))
    return KeyDomain(tuple(dtype for _, dtype, _ in columns), rows, tuple(texts))


def public_domain(bound: "Bound") -> KeyDomain | None:
    """The public key domain of a grouped query, or None (keys are then τ-selected)."""
    opts = bound.options
    width = len(bound.group_by)
    types = [*bound.group_types[:width], *["VARCHAR"] * (width - len(bound.group_types))]
    if opts.keys is not None:
        if not width:
            raise OptionError("option 'keys' needs a GROUP BY")
        if any(len(k) != width for k in opts.keys):
            raise OptionError(f"option 'keys': each key must have {width} part(s), one per GROUP BY expression")
        return normalise(opts.keys, types, "keys", OptionError)
    assert bound.table is not None
    columns = []
    for col, dtype in zip(bound.group_columns, types):
        keys = bound.table.column(col).keys if col else None
        if keys is None:
            return None
        columns.append((_Same(keys), dtype, f"tables.{bound.table.name}.columns.{col}.keys"))
    return _policy_domain(tuple(columns))
