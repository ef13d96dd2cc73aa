"""A date column's bounds in a policy: ``bounds = ["1992-01-01", "1998-12-31"]``, its first and
last day (ISO text or TOML dates). They give the key domain of a date part of the column
(``GROUP BY year(l_shipdate)``, :mod:`dpsql._sql.keysource`) and the bounds of one as a value
(:mod:`dpsql._sql.intervals`); as every public domain and bound, they are enforced by the
rewritten SQL (the key join, the clip), never assumed of the data."""

from __future__ import annotations

import datetime
import typing as t

from dpsql.errors import PolicyError


def date_bounds(where: str, value: t.Any) -> tuple[datetime.date, datetime.date] | None:
    """A date column's ``bounds``: two dates, the first before the last; None when not given.

    >>> date_bounds("tables.li.columns.ship", ["1992-01-01", "1998-12-31"])
    (datetime.date(1992, 1, 1), datetime.date(1998, 12, 31))
    >>> date_bounds("tables.li.columns.ship", ["1992-01-01"])
    Traceback (most recent call last):
    dpsql.errors.PolicyError: tables.li.columns.ship.bounds must be two dates, e.g. ["1992-01-01", "1998-12-31"]
    """
    if value is None:
        return None
    try:
        first, last = (v if type(v) is datetime.date else datetime.date.fromisoformat(v) for v in value)
    except (TypeError, ValueError):
        raise PolicyError(f'{where}.bounds must be two dates, e.g. ["1992-01-01", "1998-12-31"]') from None
    if not first < last:
        raise PolicyError(f"{where}.bounds: {first} must be before {last}")
    return (first, last)
