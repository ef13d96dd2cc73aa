"""The ``sql`` and ``toml`` blocks of README.md and docs/ (tests/test_docs_examples.py runs the
``$ dpsql ... -c`` commands and the ``python`` blocks).

* Every ``toml`` block is TOML, and the policy it shows (or the part of one: a table, a section)
  is accepted by the policy loader, filled out to a whole policy where it is a part.
* Every ``sql`` block is released on the data it names (the Adult demo, the visits fixture,
  TPC-H SF 0.01, BigQuery's professors table) without being refused, or is on a page whose
  blocks a test elsewhere runs: ``ELSEWHERE`` names that test, which must read the page.
  docs/benchmarks.md's blocks are the statistics statements dpsql writes (checked by the bench
  tests), not queries to run.
"""

from __future__ import annotations

import copy
import re
import tomllib
from pathlib import Path

import pytest

import dpsql
from dpsql._policy.policy import policy_from_dict
from dpsql._privacy.noise import SeededNoise
from dpsql.interfaces.demo import load_adult
from tests.conftest import demo_policy
from tests.test_docs_examples import scratch  # noqa: F401, F811  (the fixture: the folder the examples name)

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _fenced(text: str) -> list[tuple[str, str]]:
    r"""(language, body) of each fenced block of ``text``, in order.

    >>> _fenced("a\n```sql\nSELECT 1\n```\n```\nout\n```\n")
    [('sql', 'SELECT 1\n'), ('', 'out\n')]
    """
    out, language, body = [], None, []
    for line in text.splitlines():
        if line.startswith("```") and language is None:
            language, body = line[3:].strip(), []
        elif line.startswith("```"):
            out.append((language, "".join(f"{b}\n" for b in body)))
            language = None
        elif language is not None:
            body.append(line)
    return out


def _blocks(language: str) -> list[tuple[str, int, str]]:
    out = []
    for page in PAGES:
        if page.name == "benchmarks.md":
            continue
        bodies = [body for lang, body in _fenced(page.read_text(encoding="utf-8")) if lang == language]
        out += [(page.name, k, body) for k, body in enumerate(bodies)]
    return out


TOML = _blocks("toml")
SQL = _blocks("sql")


def _whole(part: dict) -> dict:
    """``part`` filled out to a policy: a budget, and a privacy unit for a table that gives
    neither one, a link nor ``public`` (a snippet that shows one setting of a table)."""
    policy = copy.deepcopy(part)
    policy.setdefault("budget", {"epsilon": 1.0, "delta": 1e-6})
    for spec in policy.get("tables", {}).values():
        if not ({"privacy_unit", "link", "public"} & set(spec)):
            spec["privacy_unit"] = "row"
    return policy


def test_the_pages_have_toml_and_sql_blocks() -> None:
    assert len(TOML) >= 8 and len(SQL) >= 12


@pytest.mark.parametrize("page,index,text", TOML, ids=[f"{p}:{k}" for p, k, _ in TOML])
def test_toml_block_is_a_policy_the_loader_accepts(page: str, index: int, text: str) -> None:
    part = tomllib.loads(text)
    policy = policy_from_dict(_whole(part), source=str(ROOT / page))
    assert set(part.get("tables", {})) <= set(policy.tables)


# -- sql blocks -----------------------------------------------------------------------------------

#: pages whose blocks are over tables this file does not build, and the test that runs each of
#: them (that test reads the page's blocks itself)
ELSEWHERE = {"joins.md": ("tests/test_joins.py", "test_the_docs_page_shows_what_explain_prints")}


def _adult() -> dpsql.Connection:
    policy = demo_policy(epsilon=100.0, delta=1e-3)
    policy["defaults"] = {"epsilon": 0.1, "plain_aggregates": True}  # docs/bi.md's chart query
    return dpsql.connect(":memory:", policy, setup=load_adult, noise=SeededNoise(1))


def _visits() -> dpsql.Connection:
    visits = ROOT / "fixtures" / "visits"
    return dpsql.connect(str(visits / "visits.parquet"), str(visits / "visits.toml"), noise=SeededNoise(1))


def _tpch() -> dpsql.Connection:
    return dpsql.connect(":memory:", str(ROOT / "fixtures" / "policies" / "tpch.toml"), noise=SeededNoise(1))


def _professors() -> dpsql.Connection:
    from tests.test_bigquery import _professors as professors

    return professors()


DATA = {"adult": _adult, "visits": _visits, "lineitem": _tpch, "professors": _professors}


def _statements(text: str) -> list[str]:
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


def _data_of(statement: str) -> str | None:
    named = re.findall(r"\bFROM\s+(\w+)", statement, flags=re.I)
    return next((n for n in named if n in DATA), None)


@pytest.mark.parametrize("page,index,text", SQL, ids=[f"{p}:{k}" for p, k, _ in SQL])
def test_sql_block_is_released_or_run_by_a_named_test(page: str, index: int, text: str) -> None:
    if page in ELSEWHERE:
        path, name = ELSEWHERE[page]
        held = (ROOT / path).read_text(encoding="utf-8")
        body = held[held.index(f"def {name}("):]
        assert f'"{page}"' in body.split("\ndef ")[0], f"{path}::{name} no longer runs {page}'s blocks"
        return
    for statement in _statements(text):
        data = _data_of(statement)
        assert data, f"{page}: no test data for {statement!r}: add it to DATA or ELSEWHERE"
        con = DATA[data]()
        try:
            result = con.sql(statement)
            assert len(result.fetchall()) >= 1
            assert result.report, f"{page}: {statement!r} released no DP aggregate"
        finally:
            con.close()


# -- EXPLAIN output the pages show ------------------------------------------------------------------

#: (page, the shown block's first words, the query whose EXPLAIN it shows, its data)
EXPLAIN_SHOWN = [
    ("bigquery.md", "BigQuery form:", "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-5, "
     "max_groups_contributed = 2, privacy_unit_column = id) item, AVG(quantity, contribution_bounds_per_group "
     "=> (0, 100)) AS average_quantity FROM professors GROUP BY item", "professors"),
    ("privacy-units.md", "bounds: max_rows_per_unit = 5 (policy)", "SELECT DP_SUM(cost) FROM visits WITH (epsilon = 1)",
     "visits"),
    ("bounds.md", "DP_SUM(l_extendedprice * (1 - l_discount)): mechanism",
     "SELECT DP_SUM(l_extendedprice * (1 - l_discount)) FROM lineitem WITH (epsilon = 1)", "lineitem"),
]


@pytest.mark.parametrize("page,first,query,data", EXPLAIN_SHOWN, ids=[p for p, *_ in EXPLAIN_SHOWN])
def test_explain_prints_what_the_page_shows(page: str, first: str, query: str, data: str) -> None:
    """Each part of the shown block (``...`` stands for what the page leaves out; a wrapped
    line continues the one above) is in what EXPLAIN prints."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    block = next(body for language, body in _fenced(text) if not language and body.startswith(first))
    con = DATA[data]()
    try:
        printed = " ".join(con.explain(query).split())
    finally:
        con.close()
    for part in " ".join(block.split()).split("..."):
        part = part.strip(" ;")
        assert part in printed, f"{page}: EXPLAIN no longer prints {part!r}"


# -- shell sessions -------------------------------------------------------------------------------


def _sessions() -> list[tuple[str, int, str]]:
    out = []
    for page in (ROOT / "README.md", ROOT / "docs" / "repl.md"):
        bodies = [body for _, body in _fenced(page.read_text(encoding="utf-8")) if "\ndpsql> " in "\n" + body]
        out += [(page.name, k, body) for k, body in enumerate(bodies)]
    return out


SESSIONS = _sessions()


def _typed_and_shown(block: str) -> tuple[str, list[str], list[str]]:
    """What the session types (each statement or command, its continuation lines joined), and
    what it shows on standard output and on standard error (an ``Error:`` line and its caret)."""
    typed, out, err = [], [], []
    for line in block.splitlines():
        if line.startswith("$ "):
            continue  # the command that starts the shell
        if line.rstrip() == "dpsql>":
            break  # the last prompt and the toolbar under it
        if line.startswith("dpsql> "):
            typed.append(line[len("dpsql> "):])
        elif line.startswith("   ..> "):
            typed[-1] += "\n" + line[len("   ..> "):]
        elif line.startswith("Error:") or (err and line.startswith("  ") and err[-1] is not None):
            err.append(line)
        elif line.strip():
            out.append(line)
    return "\n".join(typed) + "\n", out, err


@pytest.mark.parametrize("page,index,block", SESSIONS, ids=[f"{p}:{k}" for p, k, _ in SESSIONS])
def test_shell_session_prints_what_the_page_shows(capsys, tmp_path, page: str, index: int, block: str) -> None:
    """The session typed into the shell prints what the page shows, noise aside (the rules of
    tests/test_docs_examples.py: table lines keep their form, report lines their numbers within
    10%, errors read exactly as shown)."""
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    from dpsql.interfaces.demo import connect_demo
    from dpsql.interfaces.repl.shell import run_repl
    from tests.test_docs_examples import _close, _form

    typed, out, err = _typed_and_shown(block)
    con = connect_demo()
    try:
        with create_pipe_input() as inp:
            inp.send_text(typed + "\x04")
            run_repl(con, input=inp, output=DummyOutput(), history_file=tmp_path / "history")
    finally:
        con.close()
    captured = capsys.readouterr()
    printed = [ln for ln in captured.out.splitlines() if ln.strip()]
    assert [ln for ln in captured.err.splitlines() if ln.strip()] == err
    assert len(printed) >= len(out), (printed, out)
    for want, got in zip(out, printed):
        if want.startswith("-- "):
            assert _close(want, got), f"{page}: the report line reads\n  {got}\nwhere the page shows\n  {want}"
        else:
            assert _form(got) == _form(want), f"{page}: the output line reads\n  {got}\nwhere the page shows\n  {want}"


# -- notebook magics --------------------------------------------------------------------------------


def _magic_block(page: str, first: str) -> str:
    text = (ROOT / page).read_text(encoding="utf-8")
    return next(body for _, body in _fenced(text) if body.startswith(first))


def test_the_magic_blocks_run_in_ipython(scratch) -> None:  # noqa: F811 - the fixture imported above
    """README's ``%%dpsql con`` cell and docs/bi.md's jupysql lines, in the folder that holds
    the ``people.duckdb`` and ``policy.toml`` they name."""
    import os

    os.environ.setdefault("PLOOMBER_STATS_ENABLED", "false")  # jupysql sends no usage statistics
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "dpsql")
    ip.user_ns["con"] = dpsql.connect("people.duckdb", "policy.toml")
    try:
        cell = ip.run_cell(_magic_block("README.md", "%%dpsql con"))
        assert cell.success, cell.error_in_exec
        assert [r[0] for r in cell.result.fetchall()] == ["F", "M"]
    finally:
        ip.user_ns.pop("con").close()
    outcomes = []
    for line in _magic_block("docs/bi.md", "%load_ext sql").splitlines():
        cell = ip.run_cell(line)
        assert cell.success, (line, cell.error_in_exec or cell.error_before_exec)
        outcomes.append(cell.result)
    ip.run_line_magic("sql", "--close dp")
    assert sorted(r[0] for r in outcomes[2]) == ["F", "M"]
    assert "people" in str(outcomes[3])



# -- docs/bi.md's walkthrough with psql (a real client: the ``clients`` marker) ----------------------


def _table_form(line: str) -> str:
    """A psql table line with its numbers as I or D, spaces and runs of dashes collapsed, and a
    number the page cuts with ``...`` read as the whole number."""
    line = re.sub(r"(\d)\.\.\.", r"\1", line)
    line = re.sub(r"-?\d+\.\d+", "D", line)
    line = re.sub(r"\b\d+\b", "I", line)
    return re.sub("-+", "-", line.replace(" ", ""))


@pytest.mark.clients
def test_the_psql_walkthrough_prints_what_the_page_shows(tmp_path) -> None:
    import shutil
    import subprocess

    from tests.serve.harness import launch

    exe = shutil.which("psql")
    assert exe, "psql is missing: install Debian's postgresql-client"
    block = _magic_block("docs/bi.md", "$ dpsql serve --demo").splitlines()
    srv = launch(["--demo"], tmp_path)
    try:
        shown_password = re.search(r"one-time password (\S+)", block[3]).group(1)
        for want, got in zip(block[1:4], srv.log[:3]):
            pattern = re.escape(want).replace("5433", r"\d+").replace(re.escape("..."), ".*")
            assert re.fullmatch(pattern.replace(re.escape(shown_password), r"\S+"), got.rstrip("\n")), (want, got)
        typed = [re.sub(r"\s+--.*$", "", ln.split("adult=> ", 1)[1]) for ln in block if ln.startswith("adult=> ")]
        args = [exe, "-X", "-h", srv.host, "-p", str(srv.port), "-U", "analyst", "-d", "adult"]
        for statement in typed:
            args += ["-c", statement]
        out = subprocess.run(args, capture_output=True, text=True, timeout=120,
                             env={"PGPASSWORD": srv.password or "", "PATH": "/usr/bin:/bin"})
    finally:
        srv.stop()
    printed = [_table_form(ln) for ln in out.stdout.splitlines()]
    shown = [ln for ln in block if ln.strip() and not ln.startswith(("$ ", "dpsql serve:", "adult=> ", "ERROR:"))]
    for want in shown:
        assert _table_form(want) in printed, f"docs/bi.md shows\n  {want}\nwhich psql did not print:\n{out.stdout}"
    errors = [ln for ln in block if ln.startswith("ERROR:")]
    assert [ln for ln in out.stderr.splitlines() if ln.startswith("ERROR:")] == errors
    assert "older" not in out.stderr and "EXPLAIN" not in out.stderr
    assert "DP query" in out.stdout and out.stdout.count("education_levels") >= 2  # EXPLAIN, SHOW TABLES
