"""A small run of the benchmark suite: it runs, its numbers are finite and its report renders.

No timing targets are asserted here: the suite is about the bench's plumbing, and the machine
running the tests may be busy. The real numbers come from ``python bench/run.py --all``.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import accuracy, joins, report, speed, units  # noqa: E402
from bench.common import machine  # noqa: E402


@pytest.fixture(scope="module")
def speed_run() -> dict:
    return speed.run_speed(10_000, repeat=1, log=lambda _msg: None, plan_runs=3)


def test_speed_runs_every_available_case(speed_run) -> None:
    ran = {r["case"] for r in speed_run["results"]}
    skipped = {s["case"] for s in speed_run["skipped"]}
    assert ran | skipped == {c.name for c in speed.CASES}
    assert {"count", "sum", "mean", "var", "group_by_zip_mean"} <= ran
    for case in speed.CASES:
        assert (case.name in ran) == speed.available(case)
    for r in speed_run["results"]:
        for key in ("plain_s", "floor_s", "dpsql_s", "dp_over_floor", "dp_over_plain", "plan_ms"):
            assert math.isfinite(r[key]) and r[key] > 0, (r["case"], key, r[key])
    assert speed_run["peak_mib"] > 0


def test_report_renders(speed_run, tmp_path) -> None:
    acc = accuracy.run_accuracy(3, log=lambda _msg: None, epsilons=(1.0,))
    assert acc["results"]
    for r in acc["results"]:
        assert r["n"] == 3 and (math.isfinite(r["median"]) or r["null"] == 3)
    res = {
        "machine": machine(), "command": "python bench/run.py --all", "runtime_s": 1.0,
        "config": {"sizes": [10_000], "repeat": 1, "releases": 3, "peers": False},
        "speed": {"10000": speed_run}, "peers": {}, "accuracy": acc,
        "repl": {"error": "not run in the tests"}, "notes": ["a smoke run"],
    }
    targets = report.targets(res)
    assert any(t["target"].startswith("DP_MEAN") for t in targets)
    assert all(t["met"] in (True, False, None) for t in targets)
    text = report.render(res, ["bench-speed-ratio.png"])
    assert "| COUNT(*) |" in text and "## Performance targets" in text and "mean(age)" in text
    assert "nan" not in text.lower().replace("nanosecond", "")
    path = report.write(res, tmp_path)
    assert path.read_text().startswith("# Benchmarks")
    assert (tmp_path / "img" / "bench-speed-ratio.png").stat().st_size > 1000


def test_privacy_unit_cases_run_and_their_section_renders(tmp_path) -> None:
    run = units.run_units(20_000, 5_000, repeat=1, log=lambda _msg: None)
    assert {r["case"] for r in run["results"]} == {c.name for c in units.CASES}
    for r in run["results"]:
        assert set(r["times"]) == {"row-level", "floor, window", "floor, per-unit aggregation", "dpsql",
                                   "dpsql, row unit"}
        assert all(math.isfinite(v) and v > 0 for v in r["times"].values())
        assert r["fastest_floor"] in ("window", "per-unit aggregation")
    text = units.section(run, "python bench/run.py --units")
    assert text.startswith(units.HEADING) and "| MEAN(income), ≤ 5 rows per unit |" in text
    page = tmp_path / "benchmarks.md"
    page.write_text("# Benchmarks\n\n## Speed\n\nfast\n\n## Other systems\n\npeers\n")
    units.write_section(text, page)
    once = page.read_text()
    assert once.index("## Speed") < once.index(units.HEADING) < once.index("## Other systems")
    units.write_section(text, page)  # replaced in place, not added twice
    assert page.read_text() == once


def test_join_cases_run_and_their_section_renders(tmp_path) -> None:
    run = joins.run(20_000, repeat=1, log=lambda _msg: None)
    assert {r["case"] for r in run["results"]} == set(joins.CASES)
    assert all(r["times"]["dpsql"] > 0 and r["ratio"] > 0 for r in run["results"])
    text = joins.section(run, "python -m bench.joins")
    page = tmp_path / "benchmarks.md"
    page.write_text("# Benchmarks\n\n## Speed\n\nx\n", encoding="utf-8")
    joins.write_section(text, page)
    joins.write_section(text, page)  # replaced in place, not added twice
    assert page.read_text(encoding="utf-8").count(joins.HEADING) == 1
