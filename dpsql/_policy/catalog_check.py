"""Checks of a policy against the database it is used with: the columns it names exist.

Separate from :mod:`dpsql._policy.policy` (which reads a policy without a database) because it
needs the catalog: :class:`dpsql.connection.Connection` runs it once when it opens.
"""

from __future__ import annotations

import typing as t

from dpsql._policy.links import check_link_columns
from dpsql.errors import PolicyError, did_you_mean

if t.TYPE_CHECKING:
    from dpsql._policy.policy import Policy


def check_against_catalog(policy: "Policy", columns: t.Callable[[str], "dict[str, str] | None"]) -> None:
    """Refuse a policy that names columns its tables do not have (PolicyError naming both).

    ``columns(table)`` gives a table's columns (lower-case), or ``None`` for a table the
    database does not hold (yet): such a table is checked when a query first reads it.
    A misspelt id column would otherwise make every query fail, and a misspelt bounded column
    or key domain would be silently ignored.
    """
    for name, tp in sorted(policy.tables.items()):
        have = columns(name)
        if have is None:
            continue
        if tp.link is not None:
            check_link_columns(tp, have, columns(tp.link.table))
        elif tp.privacy_unit != "row" and tp.privacy_unit not in have:
            raise PolicyError(
                f"tables.{name}.privacy_unit: table {name} has no column {tp.privacy_unit}"
                f"{did_you_mean(tp.privacy_unit, have, exact=True)}"
            )
        if not tp.public:
            _check_enums(name, tp, have)
        for col, spec in sorted(tp.columns.items()):
            if col not in have:
                what = "key domain" if spec.keys is not None and spec.bounds is None else "bounds"
                raise PolicyError(
                    f"tables.{name}.columns.{col}: table {name} has no column {col} (the policy gives "
                    f"it {what}){did_you_mean(col, have, exact=True)}"
                )


def _check_enums(name: str, tp: t.Any, have: dict[str, str]) -> None:
    """Refuse an ENUM column of a private table whose values the policy does not declare: the
    type's dictionary is part of the schema, which dpsql shows (``DESCRIBE``, information_schema,
    a probe's types), and it is often made from the data (``CREATE TYPE ... AS ENUM (SELECT
    DISTINCT ...)``): the set of values present would leave without noise.

    >>> from dpsql._policy.policy import TablePolicy
    >>> _check_enums("t", TablePolicy(name="t"), {"sex": "VARCHAR"})
    >>> _check_enums("t", TablePolicy(name="t"), {"dx": "ENUM('HIV', 'flu')"})
    Traceback (most recent call last):
    dpsql.errors.PolicyError: table t is private and its column dx is an ENUM, whose values dpsql would show with the schema; declare them as public keys (columns.dx.keys = [...]) or store the column as VARCHAR
    """
    for col, ty in sorted(have.items()):
        spec = tp.columns.get(col)
        if ty.upper().startswith("ENUM") and (spec is None or spec.keys is None):
            raise PolicyError(f"table {name} is private and its column {col} is an ENUM, whose values dpsql would "
                              f"show with the schema; declare them as public keys (columns.{col}.keys = [...]) "
                              "or store the column as VARCHAR")
