"""The statistics DP aggregates compute, with the facts the planner needs about each.

Every DP aggregate node class of the dialect names its :class:`Statistic`
(:attr:`dpsql._sql.dialect.DPAggregate.statistic`); every mechanism lists the statistics it
answers (:attr:`dpsql.mechanisms.base.Mechanism.statistics`). What the planner needs to know
about a statistic is data on its member, so that no other module keeps a list of statistics:

* ``default_mechanism``: the mechanism used when the query names none (or says ``'auto'``);
* ``zcdp_mechanism``: the default instead when the query spends ρ (zCDP) and names no
  mechanism; ``None`` keeps ``default_mechanism`` (which may then refuse ρ);
* ``quantile``: the p an aggregate without a p argument stands for (median ½, min 0, max 1);
* ``sums`` / ``squares``: whether an exact row-by-row computation adds up the clipped values
  (and their squares), so that bounds must keep such a sum finite.

The members are strings (``Statistic.MEAN == "mean"``), so messages and comparisons read as
before. Adding a statistic: a member here, a node class in the dialect, its function names in
:mod:`dpsql._sql.keywords`, and the statistic in the ``statistics`` of the mechanisms that
answer it (docs/design.md, "Adding a mechanism or a DP aggregate").
"""

from __future__ import annotations

import enum
import typing as t


class _Facts(t.NamedTuple):
    default_mechanism: str
    zcdp_mechanism: str | None = None
    quantile: float | None = None
    sums: bool = False
    squares: bool = False


class Statistic(enum.StrEnum):
    """What a DP aggregate computes; see the module docstring for the facts each carries."""

    default_mechanism: str
    zcdp_mechanism: str | None
    quantile: float | None
    sums: bool
    squares: bool

    def __new__(cls, value: str, facts: _Facts) -> "Statistic":
        member = str.__new__(cls, value)
        member._value_ = value
        member.default_mechanism = facts.default_mechanism
        member.zcdp_mechanism = facts.zcdp_mechanism
        member.quantile = facts.quantile
        member.sums = facts.sums
        member.squares = facts.squares
        return member

    COUNT = "count", _Facts("laplace", zcdp_mechanism="gaussian")
    SUM = "sum", _Facts("laplace", zcdp_mechanism="gaussian", sums=True)
    MEAN = "mean", _Facts("laplace", zcdp_mechanism="gaussian", sums=True)
    VAR = "var", _Facts("laplace", zcdp_mechanism="gaussian", sums=True, squares=True)
    STDDEV = "stddev", _Facts("laplace", zcdp_mechanism="gaussian", sums=True, squares=True)
    MEDIAN = "median", _Facts("exponential", quantile=0.5)
    QUANTILE = "quantile", _Facts("exponential")
    MIN = "min", _Facts("exponential", quantile=0.0)
    MAX = "max", _Facts("exponential", quantile=1.0)
    AGG = "agg", _Facts("saa")

    def default(self, zcdp: bool = False) -> str:
        """The mechanism for this statistic when the query names none (``zcdp``: it spends ρ)."""
        if zcdp and self.zcdp_mechanism is not None:
            return self.zcdp_mechanism
        return self.default_mechanism


__all__ = ["Statistic"]
