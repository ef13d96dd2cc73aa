"""The join trees the binder builds are the trees DuckDB's parser reads from their text: Spark's
compiler rewrites them by node type (``HASH(__j1)``, the windows, ``TRY_CAST``), so a tree of
another shape would reach Spark unconverted. Each form is compared with the parse of the text
it stands for; a negative control shows the comparison tells shapes apart."""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from dpsql._privacy.joins import Truncation
from dpsql._sql import joins


def _parsed(text: str) -> exp.Expression:
    return sqlglot.parse_one(text, read="duckdb")


def test_first_rows_is_the_parsed_window() -> None:
    built = joins.first_rows(joins._quoted(["k", 'a"b']), "__j1", 3)
    assert built == _parsed('ROW_NUMBER() OVER (PARTITION BY "k", "a""b" ORDER BY HASH(__j1)) BETWEEN 1 AND 3')


def test_truncation_strategies_are_the_parsed_windows() -> None:
    keys = joins._quoted(["k"], "__t")
    assert joins._keep(Truncation("drop_non_unique", 1), keys) == _parsed('COUNT(*) OVER (PARTITION BY __t."k") = 1')
    assert joins._keep(Truncation("drop_excess", 2), keys) == _parsed(
        'ROW_NUMBER() OVER (PARTITION BY __t."k" ORDER BY HASH(__t)) BETWEEN 1 AND 2')


def test_the_on_condition_is_the_parsed_comparison() -> None:
    (on,) = joins._on([(exp.column("x", "__t", quoted=True), "k")], "__j1", {"k": "INTEGER"})
    assert on == _parsed('TRY_CAST("__t"."x" AS INTEGER) = __j1."k"')


def test_negative_control_another_shape_is_told_apart() -> None:
    built = joins.first_rows(joins._quoted(["k"]), "__j1", 3)
    assert built != _parsed('ROW_NUMBER() OVER (PARTITION BY "k" ORDER BY HASH(__j1)) BETWEEN 1 AND 4')
    assert built != _parsed('ROW_NUMBER() OVER (PARTITION BY "k" ORDER BY HASH(__j1.*)) BETWEEN 1 AND 3')
