"""BigQuery's differential-privacy syntax, translated into the dpsql form before binding.

For analysts who know GoogleSQL for BigQuery (or ZetaSQL, where it comes from)::

    SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-5,
        max_groups_contributed = 2, privacy_unit_column = id)
      item, AVG(quantity, contribution_bounds_per_group => (0, 100)) AS average_quantity
    FROM professors GROUP BY item

is the dpsql query ``SELECT item, DP_MEAN(quantity, 0, 100) AS average_quantity FROM
professors GROUP BY item WITH (epsilon = 1, delta = 1e-5, max_groups_per_unit = 2)``. The
dialect parses the clause and the bounds (:class:`~dpsql._sql.dialect.DifferentialPrivacyClause`,
:class:`~dpsql._sql.dialect.ContributionBounds`) and :func:`dpsql._sql.dialect.check_form` refuses what is
malformed as a statement; :func:`translate` rewrites the tree in place, with the policy at hand,
and says what it did in lines that EXPLAIN and the result's report show. Everything else (the
budget, the mechanisms, the refusals of the binder) is the dpsql query's.

What maps (``docs/bigquery.md`` has the whole story and the semantic differences):

* options: ``epsilon`` and ``delta`` as they are; ``max_groups_contributed`` becomes
  ``max_groups_per_unit`` and ZetaSQL's ``max_rows_contributed`` ``max_rows_per_unit`` (on a
  table whose privacy unit is a row both bound nothing and are left out, as is
  ``max_groups_contributed`` without GROUP BY); ``privacy_unit_column`` must name the policy's
  privacy unit of every private table read, and is then left out: dpsql protects the unit the
  policy declares, never one a query chooses. Any other key is refused by name.
* aggregates of the main SELECT: ``COUNT(*)``, ``COUNT(x)``, ``SUM``, ``AVG``, ``VAR_POP``,
  ``STDDEV_POP``, ``PERCENTILE_CONT(x, p)`` become ``DP_COUNT``, ``DP_SUM``, ``DP_MEAN``,
  ``DP_VAR``, ``DP_STDDEV``, ``DP_QUANTILE``; their contribution bounds become the DP
  aggregate's bounds, which clip each row. ``COUNT``'s bounds bound a unit's count in a group: on
  a row unit that count is 1 and the bounds are left out; on an id unit the upper bound becomes
  the unit's row bound (``max_rows_per_group_per_unit`` when groups per unit are bounded, else
  ``max_rows_per_unit``). Any other aggregate is refused by name.
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field

from sqlglot import exp

from dpsql._policy.policy import Policy, TablePolicy
from dpsql._sql import dialect as d
from dpsql._sql.options import MAX_UNIT_BOUND, integer_value, number_value
from dpsql._sql.plain import duckdb_name, literal_quantile
from dpsql._sql.suggest import did_you_mean
from dpsql.errors import OptionError, PrivacyError

__all__ = ["OPTIONS", "translate"]

#: BigQuery's options (and ZetaSQL's ``max_rows_contributed``), with the dpsql option each
#: becomes (``privacy_unit_column`` is checked against the policy, and then left out).
OPTIONS: dict[str, str | None] = {
    "epsilon": "epsilon",
    "delta": "delta",
    "max_groups_contributed": "max_groups_per_unit",
    "max_rows_contributed": "max_rows_per_unit",
    "privacy_unit_column": None,
}

#: The aggregates with a DP meaning and the dpsql aggregate each becomes (COUNT and
#: PERCENTILE_CONT have their own cases).
_SIMPLE: dict[type[exp.Expression], type[d.DPAggregate]] = {
    exp.Sum: d.DPSum,
    exp.Avg: d.DPMean,
    exp.VariancePop: d.DPVar,
    exp.StddevPop: d.DPStddev,
}
_NAMES = "COUNT, SUM, AVG, VAR_POP, STDDEV_POP, PERCENTILE_CONT(x, p)"


@dataclass
class _Seen:
    """What the aggregates of a query asked for, beyond their own translation."""

    #: each bounded COUNT's upper bound
    counts: list[int] = field(default_factory=list)
    #: a SUM or AVG with ``contribution_bounds_per_group``
    per_group: bool = False
    notes: list[str] = field(default_factory=list)


def translate(parsed: d.DPQuery, policy: Policy) -> list[str]:
    """Rewrite a BigQuery-form ``parsed`` into the dpsql form in place; one line per change.

    A statement without ``WITH DIFFERENTIAL_PRIVACY`` is left as it is (and ``[]`` returned).
    Without ``epsilon`` in its OPTIONS, the policy's ``[defaults]`` must give a budget.
    Refusals are :class:`OptionError` (options) or :class:`PrivacyError` (aggregates), raised
    before anything is read or charged.

    >>> from dpsql._policy.policy import load_policy
    >>> pol = load_policy({"budget": {"epsilon": 1},
    ...                    "tables": {"t": {"privacy_unit": "id", "max_rows_per_unit": 3}}})
    >>> q = d.parse("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, privacy_unit_column = id) "
    ...             "COUNT(*, contribution_bounds_per_group => (0, 2)) AS n FROM t")
    >>> for line in translate(q, pol):
    ...     print(line)
    BigQuery form: WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, privacy_unit_column = id) → WITH (epsilon = 1, max_rows_per_unit = 2)
    privacy_unit_column = id: the policy's privacy unit of table t
    BigQuery aggregate COUNT(*, contribution_bounds_per_group => (0, 2)) → DP_COUNT(*)
    COUNT's upper contribution bound 2 → max_rows_per_unit = 2: each id keeps at most 2 rows, for every aggregate of the query
    >>> d.to_sql(q)
    'SELECT DP_COUNT(*) AS n FROM t WITH (epsilon = 1, max_rows_per_unit = 2)'
    """
    select = parsed.this
    clause = select.args.get("hint") if isinstance(select, exp.Select) else None
    if not isinstance(clause, d.DifferentialPrivacyClause):
        return []
    written = d.to_sql(clause).strip()
    select.set("hint", None)
    given = _given(clause)
    if "epsilon" not in given and not policy.defaults.budget_given:
        raise OptionError("say how much budget the query spends: WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = ...)")
    private = _private_tables(select, policy)
    notes = _check_unit(given.pop("privacy_unit_column", None), private)
    seen = _Seen()
    _aggregates(select, seen)
    grouped = select.args.get("group") is not None
    options = _options(given, private, grouped, seen)
    if options:
        parsed.set("options", d.DPOptions(expressions=[exp.EQ(this=exp.var(k), expression=v) for k, v in options]))
    result = d.to_sql(parsed.args["options"]) if options else "no options"
    return [f"BigQuery form: {written} → {result}", *notes, *seen.notes]


# ---------------------------------------------------------------------------------------------
# options


def _given(clause: d.DifferentialPrivacyClause) -> dict[str, exp.Expression]:
    """The OPTIONS by lower-case key: known keys, each once, the bounds whole numbers."""
    given: dict[str, exp.Expression] = {}
    for eq in clause.expressions:
        raw = eq.this.name
        key = raw.lower()
        if key not in OPTIONS:
            raise OptionError(f"unknown option '{raw}' in WITH DIFFERENTIAL_PRIVACY OPTIONS (...)"
                              f"{did_you_mean(raw, OPTIONS)} (known: {', '.join(OPTIONS)})")
        if key in given:
            raise OptionError(f"option '{key}' is given twice")
        given[key] = eq.expression
    if "max_groups_contributed" in given and "max_rows_contributed" in given:
        raise OptionError("give max_groups_contributed or max_rows_contributed, not both: they bound a "
                          "privacy unit in two different ways")
    for key in ("max_groups_contributed", "max_rows_contributed"):
        if key in given:
            integer_value(key, given[key], 1, MAX_UNIT_BOUND)
    return given


def _private_tables(select: exp.Select, policy: Policy) -> list[TablePolicy]:
    """The private tables of the policy the statement names (CTE names aside)."""
    ctes = {cte.alias_or_name.lower() for cte in select.find_all(exp.CTE)}
    found: dict[str, TablePolicy] = {}
    for table in select.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier) or (not table.db and table.name.lower() in ctes):
            continue
        for key in policy.resolve(table.name, table.db or None, table.catalog or None):
            tp = policy.table(key)
            if tp is not None and not tp.public:
                found[tp.name] = tp
    return [found[name] for name in sorted(found)]


def _check_unit(node: exp.Expression | None, private: list[TablePolicy]) -> list[str]:
    """Refuse a ``privacy_unit_column`` that is not the policy's unit of each private table."""
    if node is None:
        return []
    if isinstance(node, exp.Column) or (isinstance(node, exp.Literal) and node.is_string):
        name, written = node.name, node.sql(dialect="duckdb")
    else:
        raise OptionError(f"option 'privacy_unit_column' must name a column, got {node.sql(dialect='duckdb')}")
    for tp in private:
        if tp.privacy_unit == "row":
            raise OptionError(f"privacy_unit_column = {written}: the privacy unit of table {tp.name} is a row, "
                              "not a column; leave privacy_unit_column out")
        if tp.privacy_unit.lower() != name.lower():
            raise OptionError(f"privacy_unit_column = {written} is not the privacy unit of table {tp.name}, "
                              f"which is {tp.privacy_unit}; write privacy_unit_column = {tp.privacy_unit} or leave it out")
    names = ", ".join(tp.name for tp in private)
    return [f"privacy_unit_column = {written}: the policy's privacy unit of table {names}"] if private else []


def _options(given: dict[str, exp.Expression], private: list[TablePolicy], grouped: bool,
             seen: _Seen) -> list[tuple[str, exp.Expression]]:
    """The dpsql options for ``given``, with notes in ``seen`` on what was left out or added."""
    out = [(key, given[key]) for key in ("epsilon", "delta") if key in given]
    by_id = [tp for tp in private if tp.privacy_unit != "row"]
    if private and not by_id:
        names = ", ".join(tp.name for tp in private)
        for key in ("max_groups_contributed", "max_rows_contributed"):
            if key in given:
                seen.notes.append(f"{key} = {given[key].sql()} is left out: a privacy unit of {names} is one "
                                  "row, in one group")
        if seen.counts:
            seen.notes.append(f"COUNT's contribution bounds are left out: a privacy unit of {names} is one row, "
                              "so its count in a group is 1, within the bounds")
        return out
    groups, rows = given.get("max_groups_contributed"), given.get("max_rows_contributed")
    if groups is not None and not grouped:
        seen.notes.append("max_groups_contributed = " + groups.sql() + " is left out: without GROUP BY the query "
                          "has one group")
    elif groups is not None:
        out.append(("max_groups_per_unit", groups))
    by_groups = grouped and bool(by_id) and (groups is not None or all(tp.max_groups_per_unit for tp in by_id))
    if rows is not None:
        if by_groups:
            raise OptionError("max_rows_contributed cannot bound this GROUP BY: "
                              + f"the policy of table {by_id[0].name} bounds a {by_id[0].privacy_unit} by groups "
                              f"(max_groups_per_unit = {by_id[0].max_groups_per_unit}); give max_groups_contributed instead")
        out.append(("max_rows_per_unit", rows))
    if seen.counts and by_id:
        out += _count_rows(seen, rows, by_groups, grouped, by_id[0].privacy_unit)
    if seen.per_group and by_id:
        seen.notes.append(f"contribution_bounds_per_group on table {by_id[0].name}: dpsql clips each row to the "
                          f"bounds and keeps at most the rows its bounds allow per {by_id[0].privacy_unit}, where "
                          f"BigQuery clamps each {by_id[0].privacy_unit}'s total in a group")
    return out


def _count_rows(seen: _Seen, rows: exp.Expression | None, by_groups: bool, grouped: bool,
                unit: str) -> list[tuple[str, exp.Expression]]:
    """The row bound of an id unit that the COUNTs' upper contribution bound becomes."""
    highs = sorted(set(seen.counts))
    if len(highs) > 1:
        raise OptionError(f"the COUNTs give different upper contribution bounds ({highs[0]} and {highs[1]}); "
                          "dpsql bounds a unit's rows once per query: give them the same upper bound")
    high = highs[0]
    if rows is not None:
        given = integer_value("max_rows_contributed", rows, 1, MAX_UNIT_BOUND)
        if given != high:
            raise OptionError(f"max_rows_contributed = {given} and COUNT's upper contribution bound {high} "
                              "disagree; dpsql bounds a unit's rows once per query: give one of them")
        return []
    if by_groups:
        key, where = "max_rows_per_group_per_unit", " in each of its groups"
    else:
        key, where = "max_rows_per_unit", " (in all its groups together; BigQuery bounds each group)" if grouped else ""
    seen.notes.append(f"COUNT's upper contribution bound {high} → {key} = {high}: each {unit} keeps at most "
                      f"{high} rows{where}, for every aggregate of the query")
    return [(key, exp.Literal.number(high))]


# ---------------------------------------------------------------------------------------------
# aggregates


def _aggregates(select: exp.Select, seen: _Seen) -> None:
    """Replace the main SELECT's aggregates (and contribution bounds) by DP aggregates."""
    for node in list(select.find_all(d.ContributionBounds, exp.AggFunc)):
        if isinstance(node, d.DPAggregate) or isinstance(node.parent, d.ContributionBounds) \
                or node.parent is None or not d.own_scope(node, select):
            continue
        bounds = node if isinstance(node, d.ContributionBounds) else None
        plain = node.this if bounds is not None else node
        dp = _dp(plain, bounds, seen)
        before = _written(node)
        if node.parent is select and node.arg_key == "expressions":
            node.replace(exp.alias_(dp, duckdb_name(plain), quoted=True))  # DuckDB's column name
        else:
            node.replace(dp)
        seen.notes.append(f"BigQuery aggregate {before} → {d.to_sql(dp)}")
    seen.notes[:] = list(dict.fromkeys(seen.notes))


def _dp(plain: exp.Expression, bounds: d.ContributionBounds | None, seen: _Seen) -> d.DPAggregate:
    """The dpsql aggregate for ``plain`` with ``bounds``; refuses one without a DP meaning."""
    extra = any(v for k, v in plain.args.items() if k not in ("this", "expression", "big_int"))
    if isinstance(plain, exp.Count) and not extra:
        if bounds is not None:
            seen.counts.append(_count_bound(bounds))
        arg = plain.this
        return d.DPCount(this=exp.Star() if arg is None or isinstance(arg, exp.Star) else arg.copy())
    pair = {"lower": bounds.args["lower"].copy(), "upper": bounds.args["upper"].copy()} if bounds else {}
    if type(plain) in _SIMPLE and not extra and plain.args.get("expression") is None:
        seen.per_group = seen.per_group or (bounds is not None and bounds.text("per") == "group")
        return _SIMPLE[type(plain)](this=plain.this.copy(), **pair)
    if isinstance(plain, exp.PercentileCont) and not extra and not isinstance(plain.parent, exp.WithinGroup):
        p = literal_quantile(plain.args.get("expression"))
        if p is None:
            raise PrivacyError(f"{_written(bounds or plain)}: the percentile must be a number in [0, 1]")
        return d.DPQuantile(this=plain.this.copy(), quantile=exp.Literal.number(p), **pair)
    raise PrivacyError(f"{_written(bounds or plain)} is not one of the differentially private aggregates of "
                       f"BigQuery's form ({_NAMES}); use dpsql's DP aggregates with a trailing WITH (...)")


def _count_bound(bounds: d.ContributionBounds) -> int:
    """The upper bound of COUNT's contribution bounds: whole numbers, lower 0 or 1, upper >= 1."""
    key = "contribution_bounds_per_group"
    low, high = number_value(key, bounds.args["lower"]), number_value(key, bounds.args["upper"])
    if low not in (0, 1) or high != int(high) or not 1 <= high <= MAX_UNIT_BOUND:
        raise OptionError(f"COUNT's {key} => ({low:g}, {high:g}): a unit's count in a group is a whole number; "
                          f"give a lower bound of 0 or 1 and a whole upper bound from 1 to {MAX_UNIT_BOUND}")
    return int(high)


def _written(node: exp.Expression) -> str:
    """A node as the query wrote it (BigQuery's aggregate spelling, bounds included)."""
    if isinstance(node, exp.PercentileCont) and not isinstance(node.parent, exp.WithinGroup):
        args = [d.to_sql(a) for a in (node.this, node.args.get("expression")) if a is not None]
        return f"PERCENTILE_CONT({', '.join(args)})"  # not DuckDB's QUANTILE_CONT
    return t.cast(str, node.sql(dialect=d.DPSQL))
