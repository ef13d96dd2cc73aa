"""mypy passes on the package, with the configuration and the list of known debt in pyproject.toml."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_passes_on_the_package(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    # A cache of its own: a stale shared cache could hide an error, or report one already fixed.
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(tmp_path / "cache")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
