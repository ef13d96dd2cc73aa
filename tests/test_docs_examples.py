"""Every example in README.md and docs/ runs, and prints what the page shows (noise aside).

* ``$ dpsql ... -c "..."`` examples (a trailing ``\\`` continues the command) are run with the
  command's ``main`` in the repository's root. A refusal must read exactly as shown. Otherwise
  the numbers in the table may differ (noise), but not their form (a whole number where the page
  shows one with decimals is a different answer), and every line of the report must read as
  shown with its numbers within 10% (an interval's width moves a little with a noisy count; a
  stale figure does not).
* ``python`` code blocks are run in a scratch folder that holds what they name: ``people.duckdb``
  with its ``policy.toml``, ``visits.parquet`` with ``visits.toml``, a ``visits_df``, and, for the
  blocks that continue an earlier one, ``con`` (the demo) and ``engine`` (the SQLAlchemy demo).
  Spark's block runs in the spark suite.
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest

from dpsql.interfaces.cli import main

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def _commands() -> list[tuple[str, str, list[str]]]:
    """(page, command, the lines shown under it) for each ``$ dpsql ... -c`` example."""
    out = []
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if not line.startswith("$ dpsql "):
                continue
            command, j = line[2:], i + 1
            while command.endswith("\\") and j < len(lines):
                command, j = command[:-1] + " " + lines[j].strip(), j + 1
            if " -c " not in command:
                continue  # a server or a shell session is not re-run here
            shown = []
            for nxt in lines[j:]:
                if nxt.startswith("$ ") or nxt.startswith("```"):
                    break
                if nxt.strip():
                    shown.append(nxt)
            out.append((page.name, command, shown))
    return out


def _form(line: str) -> str:
    """A table line with each number replaced by its form: I (whole) or D (with decimals)."""
    line = _NUMBER.sub(lambda m: "D" if "." in m.group() or "e" in m.group() else "I", line)
    return re.sub("─+", "─", line.replace(" ", ""))


def _close(shown: str, printed: str) -> bool:
    """The same words, and each number within 10% of the one shown."""
    if _NUMBER.sub("N", shown) != _NUMBER.sub("N", printed):
        return False
    for a, b in zip(_NUMBER.findall(shown), _NUMBER.findall(printed)):
        x, y = float(a), float(b)
        if abs(x - y) > 0.1 * max(abs(x), abs(y)) + 1e-12:
            return False
    return True


COMMANDS = _commands()


def test_the_pages_have_command_examples() -> None:
    pages = {page for page, _, _ in COMMANDS}
    assert {"README.md", "privacy-units.md"} <= pages and len(COMMANDS) >= 10


@pytest.mark.parametrize("page,command,shown", COMMANDS, ids=[f"{p}:{c[:60]}" for p, c, _ in COMMANDS])
def test_command_prints_what_the_page_shows(capsys, monkeypatch, page: str, command: str, shown: list[str]) -> None:
    import duckdb

    from dpsql._sql.allow import RAISE_BEFORE_DUCKDB_2

    monkeypatch.chdir(ROOT)
    main(shlex.split(command)[1:])
    out, err = capsys.readouterr()
    printed = [line for line in (out + err).splitlines() if line.strip()]
    if duckdb.__version__.startswith("1.") and any(f"DP_AGG({n}(" in command for n in RAISE_BEFORE_DUCKDB_2):
        assert printed[0].startswith("Error: ") and "is not available in DP_AGG" in printed[0]
        return  # as the README says under the example
    if shown and shown[0].startswith("Error:"):
        assert printed == shown  # refusals are deterministic: exactly as documented
        return
    if shown and shown[-1].strip().endswith("..."):
        shown, printed = shown[:-1], printed[: len(shown) - 1]
    assert len(printed) >= len(shown), (printed, shown)
    for want, got in zip(shown, printed):
        if want.startswith("-- "):
            assert _close(want, got), f"{page}: the report line reads\n  {got}\nwhere the page shows\n  {want}"
        else:
            assert _form(got) == _form(want), f"{page}: the output line reads\n  {got}\nwhere the page shows\n  {want}"


# -- python blocks -------------------------------------------------------------------------------


def _blocks() -> list[tuple[str, int, str]]:
    out = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for k, m in enumerate(re.finditer(r"```python\n(.*?)```", text, flags=re.DOTALL)):
            out.append((page.name, k, m.group(1)))
    return out


BLOCKS = _blocks()

_PEOPLE_POLICY = """
[budget]
epsilon = 10.0
delta = 1e-5
ledger = "people.ledger"

[tables.people]
privacy_unit = "row"

[tables.people.columns]
age = { lower = 0, upper = 100 }
sex = { keys = ["F", "M"] }
"""


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """A folder holding what the examples name, as the current directory."""
    import duckdb

    import dpsql

    con = duckdb.connect(str(tmp_path / "people.duckdb"))
    con.execute("CREATE TABLE people AS SELECT 18 + (i * 7) % 70 AS age, CASE WHEN i % 2 = 0 THEN 'F' ELSE 'M' END "
                "AS sex FROM range(2000) t(i)")
    con.close()
    (tmp_path / "policy.toml").write_text(_PEOPLE_POLICY, encoding="utf-8")
    dpsql.connect(str(tmp_path / "people.duckdb"), str(tmp_path / "policy.toml"), init_ledger=True).close()
    shutil.copy(ROOT / "fixtures" / "visits" / "visits.parquet", tmp_path / "visits.parquet")
    shutil.copy(ROOT / "fixtures" / "visits" / "visits.toml", tmp_path / "visits.toml")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _namespace():
    import duckdb
    import pandas as pd
    import sqlalchemy as sa

    import dpsql
    from dpsql.interfaces.demo import connect_demo

    return {"dpsql": dpsql, "duckdb": duckdb, "pd": pd, "sa": sa, "con": connect_demo(),
            "engine": sa.create_engine("dpsql:///:memory:?demo=1"),
            "visits_df": pd.read_parquet("visits.parquet")}


def test_the_pages_have_python_examples() -> None:
    assert len(BLOCKS) >= 6


@pytest.mark.parametrize("page,index,code", [b for b in BLOCKS if "pyspark" not in b[2]],
                         ids=[f"{p}:{k}" for p, k, c in BLOCKS if "pyspark" not in c])
def test_python_block_runs(scratch, page: str, index: int, code: str) -> None:
    namespace = _namespace()
    exec(compile(code, f"{page}:python-block-{index}", "exec"), namespace)  # noqa: S102 - the page's own example
