"""Audit cases for re-weighting (:mod:`dpsql._sql.reweight`): a GROUP BY of an id unit without
max_groups_per_unit, each unit's partials weighted by min(1, k / its rows), rounded toward zero.

The case: k = 2 rows per person, public keys a, b, c; the neighbour adds a person with 3 rows in
each of a and b (6 rows, weight 1/3): each group's count moves by exactly 1, L1 2 = k, the bound
the noise is calibrated to. The negative control takes the weight from the person's rows in the
group only (n_u per group, not over all of them): the person added with 3 rows in each of a, b
and c then counts as 2 rows in every group, L1 6 while the noise is calibrated for 2.
"""

from __future__ import annotations

import typing as t

from sqlglot import exp

import dpsql._compile.reweight as rule

from .harness import AuditCase, Pair, query_pair, values_of_keys

PXG = "pid INTEGER, x DOUBLE, g VARCHAR"
KEYS = ["a", "b", "c"]
COUNT = "SELECT g, DP_COUNT(*) FROM t GROUP BY g WITH (epsilon = 1, mechanism = 'laplace')"
SUM = "SELECT g, DP_SUM(x) FROM t GROUP BY g WITH (epsilon = 1, mechanism = 'laplace')"
OTHERS = [(i, 50.0, KEYS[i % 3]) for i in range(1, 10)]


def reweight_policy() -> dict:
    table = {"privacy_unit": "pid", "max_rows_per_unit": 2,
             "columns": {"x": {"lower": 0.0, "upper": 100.0}, "g": {"keys": KEYS}}}
    return {"neighbouring": "add_remove", "budget": {"epsilon": 1e6, "delta": 0.5}, "tables": {"t": table}}


def _person(groups: t.Sequence[str], x: float = 100.0) -> list[tuple]:
    return [(99, x, g) for g in groups for _ in range(3)]


def _case(sql: str) -> t.Callable[[], Pair]:
    return lambda: query_pair(sql, OTHERS, OTHERS + _person("ab"), reweight_policy(), schema=PXG,
                              pick=values_of_keys(KEYS))


def _per_group_control() -> Pair:
    real = rule.reweight

    def per_group(rows, pre):  # noqa: ANN001, ANN202  (the weight from the group's rows only)
        out = real(rows, pre)  # each (unit, group) its own unit: its rows n_u, one group
        units = next(c.this for c in out.args["with_"].expressions if c.alias == "__units")
        units.set("expressions", [exp.Column(this=exp.Star(), table=exp.to_identifier("__per")),
                                  exp.alias_(exp.column("__c", "__per"), "__nu"), exp.alias_(exp.Literal.number(1), "__ng")])
        return out

    rule.reweight = per_group
    try:
        return query_pair(COUNT, OTHERS, OTHERS + _person("abc"), reweight_policy(), schema=PXG,
                          pick=values_of_keys(KEYS))
    finally:
        rule.reweight = real


REWEIGHT_CASES: list[AuditCase] = [
    AuditCase("laplace grouped count, re-weighted: a person of 3 rows in each of 2 groups, k = 2 (weight 1/3)",
              _case(COUNT), mechanism="laplace", trials=4_000, thorough_trials=30_000),
    AuditCase("laplace grouped sum, re-weighted: a person of 3 rows at U in each of 2 groups, k = 2",
              _case(SUM), mechanism="laplace", trials=4_000, thorough_trials=30_000),
]
REWEIGHT_CONTROLS: list[AuditCase] = [
    AuditCase("laplace grouped count, re-weighted by the rows in the group only: 3 groups of 2 rows' worth",
              _per_group_control, mechanism="laplace", expect="violation", trials=4_000, thorough_trials=30_000),
]

__all__: t.Sequence[str] = ("REWEIGHT_CASES", "REWEIGHT_CONTROLS")
