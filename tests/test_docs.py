"""The README tells the truth: its set-up commands, its tables match the code, its links resolve.

Its examples (and those of docs/) are run and compared in tests/test_docs_examples.py."""

from __future__ import annotations

import re
from pathlib import Path

from dpsql._sql.options import parse_options

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_lists_the_two_setup_commands() -> None:
    assert 'pip install -e . && dpsql --demo -c "SELECT DP_MEAN(age) FROM adult WITH (epsilon = 1)"' in README
    assert 'pip install -e ".[test]" && pytest' in README


def test_readme_option_table_matches_the_parser() -> None:
    section = README.split("| key | meaning |", 1)[1].split("\n\n", 1)[0]
    table = re.findall(r"^\| `([a-z_`, ]+)` \|", section, flags=re.MULTILINE)
    documented = {k.strip(" `") for row in table for k in row.split(",")}
    from sqlglot import exp

    for key in documented:
        value = {"mechanism": exp.Literal.string("laplace"), "keys": exp.Array(expressions=[exp.Literal.string("a")]),
                 "aggregator": exp.Literal.string("mean"), "noise": exp.Literal.string("laplace"),
                 "confidence": exp.Literal.number("0.9"), "delta": exp.Literal.number("0.1"),
                 "bounds": exp.Literal.string("auto"), "contribution": exp.Literal.string("clip"),
                 "report_dropped": exp.Boolean(this=True),
                 **{k: exp.Literal.string("drop_excess(2)") for k in
                    ("join_truncation", "left_truncation", "right_truncation")}}.get(
            key, exp.Literal.number("2"))
        parse_options([(key, value)])  # every documented key is accepted
    from dpsql._sql.keywords import OPTION_KEYS

    assert documented == set(OPTION_KEYS)


def test_docs_linked_from_the_readme_exist() -> None:
    for link in re.findall(r"\]\(((?:docs|grammar|fixtures)/[^)]+)\)", README):
        assert (ROOT / link).exists(), link
