"""Start ``dpsql serve`` in a subprocess on a free port, on a DuckDB file of the Adult data."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb

from dpsql._accounting.ledger import Ledger
from dpsql.interfaces.demo import load_adult
from dpsql.interfaces.server.users import make_verifier

PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret", "jdbc": "jdbc-secret", "carol": "carol-secret"}
SHARES = {"bob": 0.01}

POLICY = """
[budget]
epsilon = 100.0
delta = 1e-5
ledger = "serve.ledger"

[tables.adult]
privacy_unit = "row"
[tables.adult.columns]
age = {{ lower = 0, upper = 100 }}
sex = {{ keys = ["Female", "Male"] }}

[tables.education_levels]
public = true

[defaults]
reuse_releases = "{reuse}"
{defaults}

{server}
"""


def users_section() -> str:
    lines = []
    for name, password in PASSWORDS.items():
        lines += [f"[server.users.{name}]", f'password = "{make_verifier(password)}"']
        if name in SHARES:
            lines.append(f"share = {SHARES[name]}")
    return "\n".join(lines)


@dataclass
class Server:
    process: subprocess.Popen
    host: str
    port: int
    ledger: str
    directory: Path
    log: list[str]
    #: the one-time password a server without users printed (None with users or --no-password)
    password: str | None = None

    def entries(self, user: str | None = None) -> list:
        with Ledger.open(self.ledger, None) as led:
            return [e for e in led.history() if user is None or e.user == user]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()


def make_database(directory: Path) -> Path:
    path = directory / "adult.duckdb"
    con = duckdb.connect(str(path))
    load_adult(con)
    con.close()
    return path


def start(directory: Path, users: bool = True, extra: list[str] | None = None, reuse: str = "off",
          defaults: str = "") -> Server:
    """A server on ``directory``; ``reuse`` is the policy's reuse_releases (off: every execution
    is charged, which is what most of these tests count); ``defaults``, more lines of the
    policy's [defaults] (a default budget, plain aggregates, as BI tools need)."""
    database = directory / "adult.duckdb"
    if not database.exists():
        make_database(directory)
    policy = directory / ("policy.toml" if users else "policy-open.toml")
    policy.write_text(POLICY.format(server=users_section() if users else "", reuse=reuse, defaults=defaults), encoding="utf-8")
    return launch([str(database), "--policy", str(policy), "--init-ledger", *(extra or [])], directory)


def launch(args: list[str], directory: Path, ledger: str = "serve.ledger", wait: float = 60,
           environ: dict[str, str] | None = None) -> Server:
    """``dpsql serve ARGS --port 0`` run in ``directory`` (in ``environ``, default this process's
    environment), once it listens (within ``wait`` seconds); ``ledger`` is the policy's ledger
    file, in ``directory``."""
    env = dict(os.environ if environ is None else environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, "-m", "dpsql", "serve", *args, "--port", "0"]
    process = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env,
                               cwd=directory)
    log: list[str] = []
    deadline = time.monotonic() + wait
    assert process.stderr is not None
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            break
        log.append(line)
        m = re.search(r"listening on ([\d.]+):(\d+)", line)
        if m:
            log += [process.stderr.readline(), process.stderr.readline()]  # TLS, then how to log in
            found = re.search(r"one-time password (\S+)", log[-1])
            return Server(process, m.group(1), int(m.group(2)), str(directory / ledger), directory, log,
                          found.group(1) if found else None)
    process.kill()
    raise AssertionError("dpsql serve did not start: " + "".join(log))
