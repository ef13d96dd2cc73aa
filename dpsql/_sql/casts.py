"""The casts of key values to their group expression's type, as sqlglot trees: what the key
domain's readers (:mod:`dpsql._plan.keys`, :mod:`dpsql._sql.keysource`) ask an engine."""

from __future__ import annotations

from sqlglot import exp


def as_is(dtype: str) -> exp.DataType:
    """DuckDB's name of a type, printed as it is (it came from DuckDB: parsing it again could
    only change it).

    >>> exp.Cast(this=exp.column("x"), to=as_is("DECIMAL(18,3)")).sql("duckdb")
    'CAST(x AS DECIMAL(18,3))'
    """
    return exp.DataType(this=exp.DataType.Type.USERDEFINED, kind=dtype)


def _text(x: exp.Expression) -> exp.Cast:
    return exp.Cast(this=x, to=as_is("VARCHAR"))


def round_trip(x: exp.Expression, dtype: str) -> list[exp.Expression]:
    """The typed value of ``x``, its text, and whether the text casts back to the same value.

    >>> [e.sql("duckdb") for e in round_trip(exp.Placeholder(this="1"), "INTEGER")]  # doctest: +NORMALIZE_WHITESPACE
    ['TRY_CAST($1 AS INTEGER)', 'CAST(TRY_CAST($1 AS INTEGER) AS VARCHAR)',
     'TRY_CAST(CAST(TRY_CAST($1 AS INTEGER) AS VARCHAR) AS INTEGER) IS NOT DISTINCT FROM TRY_CAST($1 AS INTEGER)']
    """
    typed = exp.TryCast(this=x, to=as_is(dtype))
    back = exp.TryCast(this=_text(typed.copy()), to=as_is(dtype))
    return [typed, _text(typed.copy()), exp.NullSafeEQ(this=back, expression=typed.copy())]


def read_back(x: exp.Expression, dtype: str) -> list[exp.Expression]:
    """``x``, the text of ``x`` cast to ``dtype``, and whether that text casts back to ``x``.

    >>> [e.sql("duckdb") for e in read_back(exp.column("__k"), "DATE")]  # doctest: +NORMALIZE_WHITESPACE
    ['__k', 'CAST(CAST(__k AS DATE) AS VARCHAR)', 'TRY_CAST(CAST(CAST(__k AS DATE) AS VARCHAR) AS DATE) IS NOT DISTINCT FROM __k']
    """
    text = _text(exp.Cast(this=x.copy(), to=as_is(dtype)))
    back = exp.TryCast(this=text.copy(), to=as_is(dtype))
    return [x, text, exp.NullSafeEQ(this=back, expression=x.copy())]
