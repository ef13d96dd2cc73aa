"""f-strings in dpsql/ that contain SQL words, each one named and classed: the statement is a typed
plan compiled to sqlglot trees (issue 28), so an f-string may build SQL only where a listed
reason says why, and at most 15 may; every other such f-string is a message to the analyst (a
refusal, an EXPLAIN line) that names a clause. A new f-string with an SQL word fails this test
until it is listed here, as SQL with its reason or as a message.

The pattern is the one a reviewer would grep for: SELECT, FROM, WHERE, GROUP BY, JOIN,
CASE WHEN, QUALIFY, OVER (, UNION, VALUES in the literal parts of an f-string.
"""

from __future__ import annotations

import ast
import re
import typing as t
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "dpsql"
SQL = re.compile(r"\b(SELECT|FROM|WHERE|GROUP BY|JOIN|CASE WHEN|QUALIFY|OVER \(|UNION|VALUES)\b")

#: f-strings that build SQL: (module, start of the literal text) → why it is text
BUILDS_SQL = {
    ("_sql/nonraising.py", "CASE WHEN TRY_CAST(__b AS DOUBLE) >= 0"):
        "a constant guard template, parsed once into a tree whose placeholders are replaced",
    ("_sql/rangecheck.py", "CASE WHEN {} THEN COALESCE(__a BETWEEN"):
        "a constant range-check template of typeof() cases, parsed once",
    ("interfaces/server/session.py", "SELECT {}"):
        "the server's parameter-description probe: the client's own EXECUTE arguments, typed by DuckDB",
}

#: f-strings that are messages (refusals, EXPLAIN lines) naming SQL clauses: module → how many
MESSAGES = {
    "_compile/perunit.py": 1,
    "_policy/units.py": 5,
    "_sql/aliaslist.py": 3,
    "_sql/bind.py": 4,
    "_sql/insubquery.py": 6,
    "_sql/joins.py": 8,
    "_sql/onfilter.py": 1,
    "_sql/relation.py": 1,
    "_sql/reweight.py": 1,
    "_sql/scope.py": 5,
}


def _nodes(root: Path) -> t.Iterator[tuple[str, ast.AST]]:
    """(module, node) of every node of every module under ``root``."""
    for path in sorted(root.rglob("*.py")):
        module = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            yield module, node


def _text(node: ast.JoinedStr) -> str:
    """An f-string's literal parts, with {} for each value."""
    return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)


def _sites(root: Path = PACKAGE) -> list[tuple[str, str, int, ast.JoinedStr]]:
    """(module, literal text with {} for each value, line, node) of every f-string with SQL words."""
    return [(module, _text(node), node.lineno, node) for module, node in _nodes(root)
            if isinstance(node, ast.JoinedStr) and SQL.search(_text(node).replace("{}", ""))]


def _builds_sql(module: str, text: str) -> bool:
    return any(module == m and text.startswith(start) for m, start in BUILDS_SQL)


def _unlisted(root: Path = PACKAGE) -> list[str]:
    """What the listing above does not account for (empty when it matches the source)."""
    sites = _sites(root)
    out = [f"{m}: listed SQL not found ({start})" for m, start in BUILDS_SQL
           if not any(module == m and text.startswith(start) for module, text, _, _ in sites)]
    counts: dict[str, int] = {}
    for module, text, _, _ in sites:
        if not _builds_sql(module, text):
            counts[module] = counts.get(module, 0) + 1
    out += [f"{m}: {counts.get(m, 0)} messages, listed {MESSAGES.get(m, 0)}"
            for m in sorted({*counts, *MESSAGES}) if counts.get(m, 0) != MESSAGES.get(m, 0)]
    return out


def _handed_to_a_parser(root: Path = PACKAGE) -> list[str]:
    """f-strings with SQL words passed straight to what parses or runs SQL, other than the listed
    templates."""
    runs = {"parse_one", "parse", "maybe_parse", "execute", "sql", "condition", "verbatim", "Anonymous"}
    out = []
    for module, node in _nodes(root):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        for arg in node.args if name in runs else ():
            if isinstance(arg, ast.JoinedStr) and SQL.search(_text(arg)) and not _builds_sql(module, _text(arg)):
                out.append(f"{module}:{node.lineno}")
    return out


def test_every_fstring_with_sql_words_is_listed_as_sql_or_as_a_message() -> None:
    assert len(BUILDS_SQL) <= 15
    assert _unlisted() == [], "an f-string with SQL words was added or removed: list it here, as SQL or as a message"


def test_no_message_reaches_a_parser_or_an_engine() -> None:
    """A message f-string is never handed to what parses or runs SQL (parse_one, execute, sql,
    maybe_parse, condition, verbatim): only the listed templates are."""
    assert _handed_to_a_parser() == []


def test_the_checks_catch_a_new_site(tmp_path: Path) -> None:
    """Negative control: a copy of the package with one more message and one f-string handed to
    the parser fails both checks."""
    import shutil

    shutil.copytree(PACKAGE, tmp_path / "dpsql", ignore=shutil.ignore_patterns("__pycache__"))
    extra = tmp_path / "dpsql" / "_sql" / "scope.py"
    extra.write_text(extra.read_text(encoding="utf-8") + '\n\ndef _probe(x):\n'
                     '    return sqlglot.parse_one(f"SELECT {x} FROM t")\n', encoding="utf-8")
    assert _unlisted(tmp_path / "dpsql") == ["_sql/scope.py: 6 messages, listed 5"]
    assert _handed_to_a_parser(tmp_path / "dpsql") == [f"_sql/scope.py:{len(extra.read_text().splitlines())}"]
