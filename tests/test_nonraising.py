"""No allowlisted call over private rows raises, so DuckDB's TRY never falls back (issue 27 §3).

tests/raising.py evaluates every probed spelling over a corpus of edge values without TRY; here
each spelling's form from :mod:`dpsql._sql.nonraising` must raise nothing, except the calls still
open (:data:`OPEN`, in docs/choices.md), and must equal ``TRY(raw)`` on every row (DuckDB's value
where DuckDB does not raise, NULL where it does).
"""

from __future__ import annotations

import re

import duckdb
import pytest
import sqlglot

from dpsql._sql import leaftypes
from dpsql._sql.nonraising import OLDER, OPEN, RAISES
from dpsql._sql.total import total, unwrapped
from tests import raising

#: Allowlisted nodes with no probe of their own: the parts of a literal JSON path, probed through
#: json_extract. A new allowlisted name lands in raising.CALLS, or this test fails.
UNPROBED = frozenset({"JSONPath", "JSONPathKey", "JSONPathRoot", "JSONPathSubscript", "JSONPathWildcard"})


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    return duckdb.connect()


def _cases() -> list[tuple[str, str, list[str]]]:
    """Every probe spelling the gate admits over private rows, per argument type."""
    return [(name, s, letters) for name, spellings in raising.CALLS.items() for sp in spellings
            for s, letters in raising._expand(sp) if raising.admitted(s, letters)]


def test_every_allowlisted_name_is_probed() -> None:
    unprobed = set(raising.allowlist()) - set(raising.CALLS)
    assert unprobed == UNPROBED, sorted(unprobed ^ UNPROBED)


def _guarded(e: sqlglot.exp.Expression, letters: list[str], typed: bool) -> str:
    """The form that cannot raise: with the columns' types known (as a query's catalog gives
    them, dpsql._sql.leaftypes) or not (the general checks over ``typeof``)."""
    if not typed:
        return unwrapped(e).sql("duckdb")
    with leaftypes.columns({f"c{i}": raising.CORPUS[x][0] for i, x in enumerate(letters)}):
        return unwrapped(e).sql("duckdb")


@pytest.mark.parametrize("typed", [False, True], ids=["typeof", "typed"])
def test_guarded_forms_raise_nothing_but_the_open_ones(typed: bool, con: duckdb.DuckDBPyConnection) -> None:
    still: set[str] = set()
    for name, spelling, letters in _cases():
        e = raising.expression(spelling, letters)
        if raising.raises(con, _guarded(e, letters, typed), letters, example=False):
            still.add(name)
    assert still == set(OPEN), (sorted(still - set(OPEN)), sorted(set(OPEN) - still))


def test_every_fixed_call_raised_before(con: duckdb.DuckDBPyConnection) -> None:
    """The table of :data:`RAISES` is measured: each name there raised without its rule."""
    raised = {name for name, s, letters in _cases()
              if raising.raises(con, raising.expression(s, letters).sql("duckdb"), letters, example=False)}
    assert set(RAISES) <= raised, sorted(set(RAISES) - raised)


#: Where a guarded form may differ from DuckDB's value: NULL for a result within 1e-11 of a
#: 64-bit, 128-bit or DECIMAL(38, 0) limit (the range check is in DOUBLE), or a date in the last
#: or first year of TIMESTAMP's range under date_trunc.
_LIMITS = (2.0**63, 2.0**64, 2.0**127, 2.0**128, 1e38)
_NEAR_LIMIT = ("(new IS NULL AND (" + " OR ".join(
    f"abs(abs(TRY_CAST(old AS DOUBLE)) / {x!r} - 1) < 1e-11" for x in _LIMITS) + ")"
    " OR new IS NULL AND year(TRY_CAST(old AS TIMESTAMP)) IN (-290308, 294247))")


#: Calls whose meaning is DuckDB's own function, not sqlglot's text of it: ``date_add(d, v)`` of an
#: INTERVAL column is ``d + INTERVAL (v) DAY`` in sqlglot, which fails on every row.
NATIVE = frozenset({"DateAdd"})


@pytest.mark.parametrize("typed", [False, True], ids=["typeof", "typed"])
@pytest.mark.parametrize("name", sorted(set(raising.CALLS) - set(OPEN)))
def test_guarded_values_equal_duckdbs_or_null(name: str, typed: bool, con: duckdb.DuckDBPyConnection) -> None:
    """Meaning kept, for every probed call (raising or not): on every corpus row the guarded form
    equals TRY(raw), DuckDB's value where it does not raise and NULL where it does."""
    for spelling in raising.CALLS[name]:
        for s, letters in raising._expand(spelling):
            e = raising.expression(s, letters)
            raw, new = e.sql("duckdb"), _guarded(e, letters, typed)
            if name in NATIVE:  # sqlglot's own text of it fails on every row: DuckDB's function is the meaning
                holes = iter(range(len(letters)))
                raw = re.sub(r"\{[A-Z]\}", lambda _m: f"c{next(holes)}", s)
            if not raising.admitted(s, letters):
                continue
            # before DuckDB 2.0, the minimum % -1 raises; the form gives 2.0's value, 0
            also = " AND NOT (old IS NULL AND new = 0)" if OLDER and name == "Mod" else ""
            try:
                bad = con.sql(f"SELECT count(*) FROM (SELECT TRY({raw}) AS old, ({new}) AS new "
                              f"FROM {raising.table(letters)}) WHERE old IS DISTINCT FROM new "
                              f"AND NOT {_NEAR_LIMIT}{also}").fetchall()[0][0]
            except duckdb.Error:
                assert raising.fails_without_rows(con, raw, letters), (s, letters)
                continue
            assert bad == 0, (s, letters)


@pytest.mark.parametrize("value, form", [
    ("json_extract(s, '$')", "JSON_VALID(s)"),
    ("strptime(s, '%Y-%m-%d')", "TRY_STRPTIME(s"),
    ("(9223372036854775807 + age) > 0", "TYPEOF(9223372036854775807 + age)"),
    ("to_seconds(x) IS NULL", "ABS(TRY_CAST(x AS DOUBLE)) <= 9223372036854.0"),
    ("age // n", "<> 0 THEN CASE WHEN"),
    ("from_base64(s)", "REGEXP_FULL_MATCH(s, '([A-Za-z0-9+/]{4})*"),
    ("chr(x)", "BETWEEN 0 AND 1114111"),
    ("-age", "TYPEOF(-age)"),
])
def test_the_rewrite_holds_the_guarded_form(value: str, form: str) -> None:
    assert form in total(sqlglot.parse_one(value, read="duckdb")).sql("duckdb")
