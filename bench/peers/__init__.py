"""Other DP systems, each in its own virtual environment under ``bench/.peers/`` (git-ignored).

:func:`ensure` creates a peer's environment with the interpreter running the bench and
installs its packages with pip (from the package index only); a peer that cannot be installed
is skipped with the last line of pip's error. :func:`run` executes the peer's runner script
(``bench/peers/<name>_runner.py``) with that environment's python; the runner reads a Parquet
file and writes JSON.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import typing as t
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENVS = HERE.parent / ".peers"
#: Working directory of the runners (Spark and Tumult leave scratch files in theirs).
WORK = HERE.parent / "out" / "peers-work"


@dataclass
class Peer:
    name: str
    title: str
    packages: list[str]
    needs: list[str] = field(default_factory=list)  # programs that must be on PATH
    #: seconds for the accuracy run (releases round-robin until then)
    accuracy_budget: float = 300.0
    #: fewer accuracy releases than asked for, for a peer too slow to draw that many
    accuracy_releases: int | None = None

    @property
    def venv(self) -> Path:
        return VENVS / self.name

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def runner(self) -> Path:
        return HERE / f"{self.name}_runner.py"


PEERS: list[Peer] = [
    Peer("smartnoise", "SmartNoise SQL", ["smartnoise-sql", "duckdb", "pyarrow"]),
    Peer("opendp", "OpenDP (Polars)", ["opendp[polars]", "pyarrow"]),
    Peer("tumult", "Tumult Analytics", ["tmlt.analytics", "pyarrow"], needs=["java"],
         accuracy_budget=900.0, accuracy_releases=50),
    # diffprivlib 0.6.6 imports names that scikit-learn 1.7 removed.
    Peer("diffprivlib", "diffprivlib", ["diffprivlib", "scikit-learn<1.7", "pyarrow"]),
    Peer("pipelinedp", "PipelineDP (local)", ["pipeline-dp", "pyarrow"], accuracy_budget=420.0),
]


def _last_error_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines()
             if ln.strip() and not ln.startswith("WARNING: Location") and not ln.startswith("[notice]")]
    errors = [ln for ln in lines if ln.startswith("ERROR") or "rror" in ln]
    return (errors or lines or ["pip failed without output"])[-1][:300]


def ensure(peer: Peer, log: t.Callable[[str], None] = print, timeout: float = 1800) -> str | None:
    """Create and fill the peer's environment if needed. Returns None, or why it is skipped."""
    for prog in peer.needs:
        if shutil.which(prog) is None:
            return f"{prog} not found on PATH"
    marker = peer.venv / ".bench-installed"
    want = json.dumps(peer.packages)
    if peer.python.exists() and marker.exists() and marker.read_text() == want:
        return None
    log(f"installing {peer.title} into its environment ({', '.join(peer.packages)}) ...")
    try:
        if not peer.python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(peer.venv)], check=True,
                           capture_output=True, text=True, timeout=300)
        proc = subprocess.run(
            [str(peer.python), "-m", "pip", "install", "--disable-pip-version-check", "-q", *peer.packages],
            capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"pip install did not finish within {timeout:.0f} s"
    except subprocess.CalledProcessError as err:
        return f"cannot create a virtual environment: {_last_error_line(err.stderr or '')}"
    if proc.returncode != 0:
        return f"pip install failed: {_last_error_line(proc.stderr + proc.stdout)}"
    marker.write_text(want)
    return None


def run(peer: Peer, args: list[str], timeout: float, log: t.Callable[[str], None] = print) -> dict[str, t.Any]:
    """Run the peer's runner; returns its JSON, or ``{"error": reason}``."""
    work = WORK / peer.name
    work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        cmd = [str(peer.python), str(peer.runner), *args, "--out", str(out)]
        env = dict(os.environ, PYTHONWARNINGS="ignore", PYTHONPATH=str(HERE))
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=str(work))
        except subprocess.TimeoutExpired:
            return {"error": f"did not finish within {timeout:.0f} s"}
        if proc.returncode != 0 or not out.exists():
            return {"error": f"runner failed: {_last_error_line(proc.stderr)}"}
        return json.loads(out.read_text())
