"""The grammar's examples parse and round-trip; its near misses fail with a message naming the token."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpsql._sql.dialect import DPQuery, parse, to_sql
from dpsql.errors import ParseError

GRAMMAR = Path(__file__).resolve().parent.parent / "grammar"


def _examples() -> list[str]:
    lines = (GRAMMAR / "examples.sql").read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.strip() and not line.startswith("--")]


def _near_misses() -> list[tuple[str, str]]:
    out = []
    for line in (GRAMMAR / "near_misses.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith("#") or " ==> " not in line:
            continue
        sql, fragment = line.split(" ==> ")
        out.append((sql, fragment))
    return out


@pytest.mark.parametrize("sql", _examples())
def test_example_parses_and_round_trips(sql: str) -> None:
    node = parse(sql)
    assert isinstance(node, DPQuery)
    text = to_sql(node)
    # Printing and parsing again gives the same tree: the dialect round-trips.
    assert parse(text) == node
    assert to_sql(parse(text)) == text


@pytest.mark.parametrize("sql,fragment", _near_misses())
def test_near_miss_is_rejected_with_a_clear_message(sql: str, fragment: str) -> None:
    with pytest.raises(ParseError) as err:
        parse(sql)
    message = str(err.value)
    assert fragment in message
    assert "\n" not in message


def test_examples_and_near_misses_are_not_empty() -> None:
    assert len(_examples()) >= 20
    assert len(_near_misses()) >= 10


def test_options_clause_is_attached_to_the_statement() -> None:
    node = parse("SELECT sex, DP_COUNT(*) FROM adult GROUP BY sex ORDER BY 2 LIMIT 1 WITH (epsilon = 0.5, mechanism = 'laplace')")
    assert [k for k, _ in node.option_items()] == ["epsilon", "mechanism"]
    assert node.this.args["limit"] is not None


def test_explain_flag() -> None:
    assert parse("EXPLAIN SELECT DP_COUNT(*) FROM adult WITH (epsilon = 1)").args.get("explain")
    assert not parse("SELECT DP_COUNT(*) FROM adult WITH (epsilon = 1)").args.get("explain")


def test_dp_functions_are_typed_nodes() -> None:
    from dpsql._sql.dialect import DPAgg, DPCount, DPMean, DPQuantile, DPSum

    node = parse("SELECT DP_COUNT(*), DP_SUM(a, 0, 1), DP_AVG(b), DP_PERCENTILE(c, 0.5), DP_AGG(corr(a, b), -1, 1) FROM t")
    kinds = [type(e) for e in node.this.expressions]
    assert kinds == [DPCount, DPSum, DPMean, DPQuantile, DPAgg]
    s = node.this.expressions[1]
    assert s.args["lower"].this == "0" and s.args["upper"].this == "1"


def test_keyword_lists_match_the_dialect_and_the_options() -> None:
    """The dependency-free word lists (used by the shell) name exactly what the parser accepts."""
    import dataclasses

    from dpsql._sql.dialect import DP_FUNCTIONS
    from dpsql._sql.keywords import DP_FUNCTION_NAMES, OPTION_KEYS
    from dpsql._sql.options import Options

    assert set(DP_FUNCTION_NAMES) == set(DP_FUNCTIONS)
    assert set(OPTION_KEYS) == {f.name for f in dataclasses.fields(Options)} - {"given"}


_PLAIN_FORMS = [
    "SELECT sex, DP_MEAN(age, 0, 100) AS m FROM adult WHERE age > 30 AND NOT sex = 'x' GROUP BY sex "
    "HAVING DP_COUNT(*) > 10 ORDER BY sex DESC LIMIT 3 OFFSET 1 WITH (epsilon = 1, delta = 1e-6)",
    "SELECT DP_SUM(-x * 2 + (y - 1) / 3) FROM t WHERE z IS NULL OR z >= 2.5 WITH (mechanism = 'laplace')",
    "SELECT DP_VAR(income), DP_COUNT(*), DP_QUANTILE(age, 0.5, 0, 100) FROM people WITH (epsilon = 1)",
    "SELECT MAX(a), MIN(a), AVG(a), SUM(a), COUNT(a) FROM t",
]


@pytest.mark.parametrize("sql", [*_examples(), *_PLAIN_FORMS])
def test_a_plain_tree_is_printed_without_a_copy_and_left_as_it_was(sql: str) -> None:
    """:func:`dpsql._sql.printing.plain` trees are printed without sqlglot's copy (the canonical
    text, the aggregates' labels): printing leaves them unchanged and writes the same text."""
    from dpsql._sql.dialect import DPSQL
    from dpsql._sql.printing import plain

    tree = parse(sql)
    if not plain(tree):
        assert sql not in _PLAIN_FORMS
        return
    before, text = repr(tree), tree.sql(dialect=DPSQL, copy=True)
    assert tree.sql(dialect=DPSQL, copy=False) == text
    assert repr(tree) == before
