"""The bench's growth chart, release-step line and memory table render from results of
several sizes, and the memory child measures a query (at a tiny size: plumbing only)."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import growth, memory, report, speed  # noqa: E402
from bench.common import machine  # noqa: E402


def test_growth_and_memory_sections_render(tmp_path) -> None:
    run = speed.run_speed(5_000, repeat=1, log=lambda _msg: None, plan_runs=2,
                          only=["mean", "group_by_zip_mean", "median_exponential"])
    grouped = next(r for r in run["results"] if r["case"] == "group_by_zip_mean")
    assert grouped["release_ms_per_1000_groups"] > 0 and grouped["groups"] > 0
    sizes = {str(n): copy.deepcopy(run) for n in (1_000_000, 10_000_000, 100_000_000)}
    mem = memory.measure(5_000, ["mean"], log=lambda _msg: None)
    entry = mem["cases"]["mean"]
    assert entry["plain"]["peak_mib"] > 0 and entry["dpsql"]["peak_mib"] > 0 and entry["ratio"] > 0
    res = {"machine": machine(), "command": "python bench/run.py --all --huge", "runtime_s": 1.0,
           "config": {"sizes": [int(s) for s in sizes], "repeat": 1, "releases": 0, "peers": False},
           "speed": sizes, "peers": {}, "accuracy": {}, "memory": mem,
           "repl": {"error": "not run in the tests"}, "notes": []}
    assert growth.growth_chart(res, tmp_path, report.CASE_TITLES) == "bench-growth.png"
    assert (tmp_path / "bench-growth.png").stat().st_size > 1000
    text = report.render(res, ["bench-growth.png"])
    assert "### Growth with the table size" in text and "100,000,000 rows" in text
    assert "per 1,000 groups" in text and "Peak resident memory at 5,000 rows" in text
