"""Start-up time of the interactive shell: process start to the first ``dpsql>`` prompt.

    python bench/repl_startup.py [--runs N] [--tmux]

Each run starts ``python -m dpsql --demo`` on a fresh pseudo-terminal (with a temporary HOME,
so no history is read), answers the terminal's cursor-position query like a real terminal,
and stops the clock when the prompt has been drawn; then it sends Ctrl-D. ``--tmux`` runs
the shell inside tmux instead and polls ``capture-pane`` every 5 ms (coarser, but a real
terminal emulator). For reference it also times, in fresh interpreters, the bare interpreter,
``import dpsql`` and the demo connection. Medians are printed. Target: below 0.5 s.
"""

from __future__ import annotations

import argparse
import os
import re
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

PROMPT = "dpsql> "
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b[=>]|\r")
TIMEOUT = 30.0


def _env(home: str) -> dict[str, str]:
    env = dict(os.environ, HOME=home, XDG_CONFIG_HOME=os.path.join(home, ".config"), TERM="xterm-256color")
    env.pop("PROMPT_TOOLKIT_NO_CPR", None)
    return env


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (Linux; NaN elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")


def pty_run(home: str) -> tuple[float, float]:
    """Seconds from fork to the prompt on a pseudo-terminal: wall clock, and the shell's CPU
    time (which a busy machine inflates much less than the wall clock)."""
    import pty

    start = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:  # child
        os.execve(sys.executable, [sys.executable, "-m", "dpsql", "--demo"], _env(home))
    seen = ""
    try:
        while time.perf_counter() - start < TIMEOUT:
            ready, _, _ = select.select([fd], [], [], 0.05)
            if not ready:
                continue
            try:
                chunk = os.read(fd, 65536).decode("utf-8", "replace")
            except OSError:
                break
            if "\x1b[6n" in chunk:  # cursor position request: answer as a terminal would
                os.write(fd, b"\x1b[1;1R")
            seen += chunk
            if PROMPT.strip() in ANSI.sub("", seen):
                return time.perf_counter() - start, cpu_seconds(pid)
        raise RuntimeError(f"no prompt within {TIMEOUT:.0f} s; output: {ANSI.sub('', seen)[-300:]!r}")
    finally:
        try:
            os.write(fd, b"\x04")
            _, status = os.waitpid(pid, 0)
        finally:
            os.close(fd)


def tmux_run(home: str) -> tuple[float, float]:
    """Seconds from ``tmux new-session`` to the prompt appearing in ``capture-pane``."""
    sock = os.path.join(home, "tmux.sock")
    env = " ".join(f"{k}={v}" for k, v in _env(home).items() if k in ("HOME", "XDG_CONFIG_HOME"))
    cmd = f"env {env} {sys.executable} -m dpsql --demo"
    start = time.perf_counter()
    subprocess.run(["tmux", "-S", sock, "new-session", "-d", "-s", "bench", "-x", "120", "-y", "40", cmd], check=True)
    try:
        while time.perf_counter() - start < TIMEOUT:
            pane = subprocess.run(["tmux", "-S", sock, "capture-pane", "-p", "-t", "bench"],
                                  capture_output=True, text=True).stdout
            if PROMPT.strip() in pane:
                return time.perf_counter() - start, float("nan")
            time.sleep(0.005)
        raise RuntimeError(f"no prompt within {TIMEOUT:.0f} s")
    finally:
        subprocess.run(["tmux", "-S", sock, "kill-server"], capture_output=True)


def python_time(code: str) -> float:
    """Seconds a fresh interpreter takes to run ``code`` and exit."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--tmux", action="store_true", help="measure inside tmux instead of a bare pty")
    args = parser.parse_args()
    if args.tmux and shutil.which("tmux") is None:
        print("tmux not found", file=sys.stderr)
        return 2
    run = tmux_run if args.tmux else pty_run
    times, cpus = [], []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as home:
            wall, cpu = run(home)
        times.append(wall)
        cpus.append(cpu)
    refs = {
        "python -c pass": "pass",
        "import dpsql": "import dpsql",
        "import dpsql + connect_demo()": "import dpsql.interfaces.demo; dpsql.interfaces.demo.connect_demo()",
        "... + import the shell": "import dpsql.interfaces.demo; dpsql.interfaces.demo.connect_demo(); import dpsql.interfaces.repl.shell",
    }
    print(f"start-up to first prompt ({'tmux' if args.tmux else 'pty'}), {args.runs} runs:")
    print(f"  wall: median {statistics.median(times):.3f} s   min {min(times):.3f} s   max {max(times):.3f} s")
    if not args.tmux:
        print(f"  CPU:  median {statistics.median(cpus):.3f} s   (user + system of the shell process)")
    if hasattr(os, "getloadavg"):
        print(f"  load average during the runs: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print("reference (fresh interpreter, median of 5):")
    for label, code in refs.items():
        print(f"  {label:32s} {statistics.median(python_time(code) for _ in range(5)):.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
