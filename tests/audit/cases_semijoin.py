"""Audit cases for semi joins within one privacy unit (``EXISTS`` over another table of the unit).

The case: ``t`` and ``u`` are tables of one unit (``pid``); the DP sum over ``t`` keeps the rows
whose person has a row in ``u``. The neighbour adds one person, with a row in each table, so the
sum moves by at most U = 100 (the proof is in :mod:`dpsql._sql.insubquery`). The negative control
lifts the check that the subquery is correlated on the unit: ``EXISTS (SELECT * FROM u WHERE
w = 1)`` is then one flag for everyone, and the person added with only a ``u`` row switches ten
other people's rows in, moving the sum by 1,000 while the noise is calibrated for 100.
"""

from __future__ import annotations

import typing as t

import dpsql._sql.insubquery as insubquery

from .harness import AuditCase, Pair, query_pair

PX = "pid INTEGER, x DOUBLE"
U = "pid INTEGER, w INTEGER"
CORRELATED = ("SELECT DP_SUM(x) FROM t WHERE EXISTS (SELECT * FROM u WHERE u.pid = t.pid AND w = 1) "
              "WITH (epsilon = 1)")
UNCORRELATED = "SELECT DP_SUM(x) FROM t WHERE EXISTS (SELECT * FROM u WHERE w = 1) WITH (epsilon = 1)"


def semi_policy() -> dict:
    person = {"privacy_unit": "pid", "unit_name": "person", "max_rows_per_unit": 1}
    return {"neighbouring": "add_remove", "budget": {"epsilon": 1e6, "delta": 0.5},
            "tables": {"t": {**person, "columns": {"x": {"lower": 0.0, "upper": 100.0}}}, "u": person}}


def _correlated_case() -> Pair:
    x = [(1, 50.0), (2, 100.0)]
    return query_pair(CORRELATED, x, [*x, (3, 100.0)], semi_policy(), schema=PX,
                      extra={"u": (U, [(1, 1), (2, 0)])}, extra_prime={"u": (U, [(1, 1), (2, 0), (3, 1)])})


def _uncorrelated_control() -> Pair:
    real = insubquery._correlated
    insubquery._correlated = lambda *a: True  # type: ignore[assignment]  # the check lifted
    try:
        x = [(p, 100.0) for p in range(1, 11)]
        return query_pair(UNCORRELATED, x, x, semi_policy(), schema=PX,
                          extra={"u": (U, [])}, extra_prime={"u": (U, [(11, 1)])})
    finally:
        insubquery._correlated = real  # type: ignore[assignment]


SEMIJOIN_CASES: list[AuditCase] = [
    AuditCase("laplace sum over t EXISTS (u of the same unit, correlated on it), a person added to both",
              _correlated_case, mechanism="laplace"),
]
SEMIJOIN_CONTROLS: list[AuditCase] = [
    AuditCase("laplace sum over t EXISTS (u, not correlated on the unit): one u row switches ten people in",
              _uncorrelated_control, mechanism="laplace", expect="violation"),
]

__all__: t.Sequence[str] = ("SEMIJOIN_CASES", "SEMIJOIN_CONTROLS")
