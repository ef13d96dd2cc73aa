"""The README tells the truth: its commands run, its errors read as shown, its tables match the code."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from dpsql.interfaces.cli import main
from dpsql.sql.options import parse_options

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _readme_commands() -> list[tuple[str, list[str]]]:
    """Each ``$ dpsql ...`` line of the README with the output lines printed under it."""
    out = []
    lines = README.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("$ dpsql ") and " -c " in line:  # the shell session is not re-run
            shown = []
            for nxt in lines[i + 1:]:
                if nxt.startswith("$ ") or nxt.startswith("```"):
                    break
                shown.append(nxt)
            out.append((line[2:], [s for s in shown if s.strip()]))
    return out


@pytest.mark.parametrize("command,shown", _readme_commands())
def test_readme_command_output_has_the_shown_shape(capsys, command: str, shown: list[str]) -> None:
    argv = shlex.split(command)[1:]
    main(argv)
    out, err = capsys.readouterr()
    printed = (out + err).splitlines()
    if _refused_by_this_duckdb(command):  # as the README says under the example
        assert printed[0].startswith("Error: ") and "is not available in DP_AGG" in printed[0]
        return
    if shown and shown[0].startswith("Error:"):
        assert printed == shown  # refusals are deterministic: exactly as documented
        return
    numbers = re.compile(r"-?\d+(\.\d+)?(e-?\d+)?")
    if shown and shown[-1].strip().endswith("..."):
        shown = shown[:-1]
        printed = printed[: len(shown)]
    # Noise changes the numbers, never the layout, the column names or the report's wording.
    def shape(line: str) -> str:
        return re.sub("─+", "─", numbers.sub("N", line).replace(" ", ""))

    assert [shape(s) for s in printed][: len(shown)] == [shape(s) for s in shown]


def _refused_by_this_duckdb(command: str) -> bool:
    """Whether ``command`` uses a DP_AGG aggregate that DuckDB 1.x raises in (refused there)."""
    import duckdb

    from dpsql.sql.allow import RAISE_BEFORE_DUCKDB_2

    used = {name for name in RAISE_BEFORE_DUCKDB_2 if f"DP_AGG({name}(" in command}
    return bool(used) and duckdb.__version__.startswith("1.")


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
                 **{k: exp.Literal.string("drop_excess(2)") for k in
                    ("join_truncation", "left_truncation", "right_truncation")}}.get(
            key, exp.Literal.number("2"))
        parse_options([(key, value)])  # every documented key is accepted
    from dpsql.sql.keywords import OPTION_KEYS

    assert documented == set(OPTION_KEYS)


def test_docs_linked_from_the_readme_exist() -> None:
    for link in re.findall(r"\]\(((?:docs|grammar|fixtures)/[^)]+)\)", README):
        assert (ROOT / link).exists(), link
