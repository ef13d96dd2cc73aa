"""Rule: the public key domain as a relation of the statement (``__keys``).

DuckDB reads the domain as a table handed over as data (``__domain``: DuckDB's text of each
key, one column per key part) and casts each part back to its group expression's type::

    (SELECT CAST(__k0 AS type) AS __k0, ... FROM __domain) AS __keys

A statement that runs on its own has ``__domain`` written in as a ``VALUES`` list of those
texts (:func:`values`; :attr:`dpsql._plan.rewrite.Rewritten.sql`); an engine that is handed
no data has the keys' literals instead (:meth:`dpsql._compile.spark.SparkCompiler.key_source`).
The rows of a ``VALUES`` list are written once as literals (:func:`dpsql._sql.build.value_rows`,
sqlglot's quoting) and carried as one node: thousands of keys as a node each made most of
the time of writing the statement. Fixtures: ``fixtures/compile/domain.sql``.
"""

from __future__ import annotations

import typing as t

from sqlglot import exp

from dpsql._compile.nodes import alias, col, name, select, subquery, table, verbatim
from dpsql._sql import build


def _type(dtype: str) -> exp.DataType:
    """DuckDB's name of a type, printed as it is (it came from DuckDB: parsing it again could
    only change it)."""
    return exp.DataType(this=exp.DataType.Type.USERDEFINED, kind=dtype)


def typed_keys(types: t.Sequence[str], source: str = build.DOMAIN) -> exp.Subquery:
    """The domain ``source`` (text columns ``__k0``, ...) cast to the group ``types``, as ``__keys``.

    >>> typed_keys(["VARCHAR", "INTEGER"]).sql("duckdb")
    '(SELECT CAST(__k0 AS VARCHAR) AS __k0, CAST(__k1 AS INTEGER) AS __k1 FROM __domain) AS __keys'
    """
    names = build.keys(len(types))
    casts = [alias(exp.Cast(this=col(k), to=_type(d)), k) for k, d in zip(names, types)]
    return subquery(select(casts, table(source)), build.KEYS)


def values(rows: t.Iterable[t.Sequence[t.Any]], width: int, as_: str) -> exp.Values:
    """``(VALUES (...), ...) AS as_(__k0, ...)``, each value as :func:`dpsql._sql.build.literal`
    writes it.

    >>> values([("a", 1), (None, 2)], 2, "__domain").sql("duckdb")
    "(VALUES ('a', 1), (NULL, 2)) AS __domain(__k0, __k1)"
    """
    return exp.Values(expressions=[verbatim(build.value_rows(rows))],
                      alias=exp.TableAlias(this=name(as_), columns=[name(k) for k in build.keys(width)]))
