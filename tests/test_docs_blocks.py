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
from dpsql.interfaces.demo import load_adult
from dpsql.privacy.noise import SeededNoise
from dpsql.privacy.policy import policy_from_dict
from tests.conftest import demo_policy

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _blocks(language: str) -> list[tuple[str, int, str]]:
    out = []
    for page in PAGES:
        if page.name == "benchmarks.md":
            continue
        text = page.read_text(encoding="utf-8")
        for k, m in enumerate(re.finditer(rf"^```{language}\n(.*?)^```", text, flags=re.S | re.M)):
            out.append((page.name, k, m.group(1)))
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
