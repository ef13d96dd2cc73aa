"""``dpsql serve`` on Spark: one server process owns one local Spark session, chosen by the
policy's ``[engine]`` section, and serves psycopg clients as the DuckDB server does.

The checks that need no Spark (``--processes``, arguments Spark cannot serve) run in the default
suite with pyspark hidden, so that a refusal that came after starting Spark would name the
missing extra instead. The others carry the ``spark`` marker and share one server (one JVM).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import threading
import time
import typing as t
from pathlib import Path

import duckdb
import psycopg
import pytest

from dpsql._accounting.ledger import Ledger
from dpsql._policy.policy import load_policy
from dpsql.interfaces.server.main import build_parser, child_command
from dpsql.interfaces.server.users import make_verifier

ROOT = Path(__file__).resolve().parents[1]
VISITS = ROOT / "fixtures" / "visits" / "visits.parquet"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
NO_PYSPARK = "sys.modules['pyspark'] = None  # import pyspark fails, as when it is not installed"
PASSWORDS = {"ann": "ann-secret", "bob": "bob-secret"}
WARDS = ["cardiology", "emergency", "maternity", "oncology", "orthopaedics"]
POLICY = """
[budget]
epsilon = 100
delta = 1e-5
ledger = "serve.ledger"
[engine]
name = "spark"
master = "local[2]"
[tables.visits]
privacy_unit = "patient_id"
max_rows_per_unit = 5
source = "visits.csv"
[tables.visits.columns]
stay = {{ lower = 0, upper = 30 }}
ward = {{ keys = {wards} }}
[server.users.ann]
password = "{ann}"
[server.users.bob]
password = "{bob}"
share = 0.01
"""


def write_policy(directory: Path) -> Path:
    duckdb.execute(f"COPY (SELECT * FROM '{VISITS}') TO '{directory / 'visits.csv'}' (HEADER)")
    path = directory / "policy.toml"
    path.write_text(POLICY.format(wards=WARDS, ann=make_verifier(PASSWORDS["ann"]), bob=make_verifier(PASSWORDS["bob"])),
                    encoding="utf-8")
    return path


def serve(*args: str, cwd: Path, hide_pyspark: bool = True) -> subprocess.CompletedProcess[str]:
    prelude = NO_PYSPARK if hide_pyspark else ""
    code = f"import sys\n{prelude}\nfrom dpsql.interfaces.server.main import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True, env=ENV,
                          timeout=120)


# -- no Spark needed ----------------------------------------------------------------------------


def test_processes_on_a_local_master_are_refused_before_spark_starts(tmp_path: Path) -> None:
    policy = write_policy(tmp_path)
    done = serve("--policy", str(policy), "--port", "0", "--processes", "2", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (1, (
        "Error: --processes above 1 on Spark needs a Spark Connect master (--spark-master sc://host:port): with "
        "local[2] each process would start a Spark driver of its own; use --workers for more threads on the one "
        "session\n"))


def test_processes_over_spark_connect_still_need_a_ledger_file(tmp_path: Path) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text('[budget]\nepsilon = 1\n[engine]\nname = "spark"\n', encoding="utf-8")
    done = serve("--policy", str(policy), "--spark-master", "sc://127.0.0.1:1", "--processes", "2", cwd=tmp_path)
    assert done.returncode == 1 and "needs a policy with a budget.ledger file" in done.stderr


def test_more_processes_over_spark_connect_are_clients_of_the_same_server(tmp_path: Path) -> None:
    policy = write_policy(tmp_path)
    args = build_parser().parse_args(["--policy", str(policy), "--spark-master", "sc://10.0.0.5:15002",
                                      "--processes", "3", "--workers", "4"])
    command = child_command(args, 5555, load_policy(policy))
    assert command[command.index("--engine") + 1] == "spark"
    assert command[command.index("--spark-master") + 1] == "sc://10.0.0.5:15002"
    assert command[command.index("--port") + 1] == "5555" and "--reuse-port" in command
    # the command line's engine goes to the children, whatever the policy says
    duck = argparse.Namespace(**{**vars(args), "engine": "duckdb", "spark_master": None, "database": "db.duckdb"})
    command = child_command(duck, 5555, load_policy(policy))
    assert command[command.index("--engine") + 1] == "duckdb" and "--spark-master" not in command
    assert "db.duckdb" in command


@pytest.mark.parametrize(("args", "message"), [
    (["db.duckdb"], "--engine spark reads data files (.parquet, .csv, .json) and the Spark catalog, not a DuckDB "
                    "database: db.duckdb"),
    (["--engine", "duckdb", "--spark-master", "local[1]"], "--spark-master is for --engine spark"),
])
def test_arguments_spark_cannot_serve_are_refused_before_it_starts(tmp_path: Path, args: list[str],
                                                                   message: str) -> None:
    policy = write_policy(tmp_path)
    done = serve("--policy", str(policy), "--port", "0", *args, cwd=tmp_path)
    assert (done.returncode, done.stderr) == (1, f"Error: {message}\n")


def test_demo_is_served_on_duckdb_only(tmp_path: Path) -> None:
    done = serve("--demo", "--engine", "spark", "--port", "0", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (
        1, "Error: --demo serves DuckDB; on Spark give --policy FILE (and a data file, or source tables)\n")


# -- on Spark ------------------------------------------------------------------------------------


class Server(t.NamedTuple):
    process: subprocess.Popen[str]
    port: int
    ledger: Path
    log: list[str]

    def entries(self, user: str | None = None) -> list[t.Any]:
        with Ledger.open(str(self.ledger), None) as led:
            return [e for e in led.history() if user is None or e.user == user]

    def connect(self, user: str = "ann") -> psycopg.Connection[t.Any]:
        return psycopg.connect(f"host=127.0.0.1 port={self.port} dbname=visits user={user} "
                               f"password={PASSWORDS[user]}", autocommit=True)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> t.Iterator[Server]:
    directory = tmp_path_factory.mktemp("serve-spark")
    policy = write_policy(directory)
    process = subprocess.Popen([sys.executable, "-m", "dpsql", "serve", "--policy", str(policy), "--port", "0",
                                "--init-ledger", "--workers", "3"],
                               cwd=directory, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV)
    assert process.stderr is not None
    log: list[str] = []
    deadline = time.monotonic() + 180
    port = None
    while port is None and time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            break
        log.append(line)
        m = re.search(r"listening on [\d.]+:(\d+)", line)
        port = int(m.group(1)) if m else None
    if port is None:
        process.kill()
        raise AssertionError("dpsql serve --engine spark did not start: " + "".join(log))
    yield Server(process, port, directory / "serve.ledger", log)
    process.terminate()
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()


@pytest.mark.spark
def test_the_server_says_it_runs_on_spark(server: Server) -> None:
    assert "statistics on spark" in server.log[0] and "tables: visits" in server.log[0]


@pytest.mark.spark
def test_dp_query_is_noisy_and_charged_once(server: Server) -> None:
    kept = duckdb.execute(f"SELECT SUM(LEAST(n, 5)) FROM (SELECT COUNT(*) AS n FROM '{VISITS}' "
                          "GROUP BY patient_id)").fetchone()[0]
    before = len(server.entries("ann"))
    with server.connect() as con:
        cur = con.execute("SELECT ward, DP_COUNT(*) AS n, DP_MEAN(stay) AS m FROM visits GROUP BY ward "
                          "ORDER BY ward WITH (epsilon = 1)")
        assert [c.type_code for c in cur.description] == [25, 20, 701]  # text, int8, float8
        rows = cur.fetchall()
        assert [r[0] for r in rows] == WARDS and all(0 <= r[2] <= 30 for r in rows)
        assert abs(sum(r[1] for r in rows) - kept) < 500  # Σ min(rows of a patient, 5), plus noise
        # ε = 0.001: noise of scale 5,000 (a count of patients contributing 5 rows): not the exact count
        (n,), = con.execute("SELECT DP_COUNT(*) AS n FROM visits WITH (epsilon = 0.001)").fetchall()
        assert isinstance(n, int) and n != kept
    entries = server.entries("ann")[before:]
    assert [e.query.split("WITH")[-1] for e in entries] == [" (epsilon = 1)", " (epsilon = 0.001)"]
    assert [round(e.cost.epsilon, 6) for e in entries] == [1.0, 0.001]


@pytest.mark.spark
def test_an_identical_query_reuses_its_release(server: Server) -> None:
    query = "SELECT DP_SUM(stay) AS s FROM visits WITH (epsilon = 0.25)"
    before = len(server.entries("ann"))
    with server.connect() as con:
        first = con.execute(query).fetchall()
        again = con.execute(query).fetchall()
    assert first == again and len(server.entries("ann")) == before + 1


@pytest.mark.spark
def test_catalog_and_describe_read_nothing_and_charge_nothing(server: Server) -> None:
    before = len(server.entries())
    with server.connect() as con:
        assert con.execute("SELECT table_name FROM information_schema.tables").fetchall() == [("visits",)]
        columns = dict(con.execute("SELECT column_name, data_type FROM information_schema.columns "
                                   "WHERE table_name = 'visits'").fetchall())
        assert columns["ward"] == "text" and columns["patient_id"] == "integer"
        assert con.execute("SHOW TABLES").fetchall() == [("visits", "private")]
        pg = con.pgconn
        pg.prepare(b"s1", b"SELECT ward, DP_COUNT(*) AS n FROM visits WHERE stay > $1 GROUP BY ward "
                          b"WITH (epsilon = 5)")
        desc = pg.describe_prepared(b"s1")
        assert [desc.fname(i) for i in range(desc.nfields)] == [b"ward", b"n"]
        assert [desc.ftype(i) for i in range(desc.nfields)] == [25, 20]
        probe = con.execute("SELECT ward, DP_MEAN(stay) AS m FROM visits GROUP BY ward LIMIT 0 WITH (epsilon = 5)")
        assert probe.fetchall() == [] and [c.type_code for c in probe.description] == [25, 701]
        assert con.execute("SELECT 1 AS one, 'a' AS a").fetchall() == [(1, "a")]  # no table: plain SQL on Spark
    assert len(server.entries()) == before


@pytest.mark.spark
def test_refusals_charge_nothing(server: Server) -> None:
    before = len(server.entries())
    with server.connect() as con:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="private"):
            con.execute("SELECT * FROM visits")
        with pytest.raises(psycopg.Error, match="no bounds for column cost"):
            con.execute("SELECT DP_SUM(cost) FROM visits WITH (epsilon = 1)")
    with server.connect("bob") as con:  # bob's share is 1% of ε = 100
        with pytest.raises(psycopg.errors.ConfigurationLimitExceeded):
            con.execute("SELECT DP_COUNT(*) FROM visits WITH (epsilon = 2)")
        assert con.execute("SELECT DP_COUNT(*) AS n FROM visits WITH (epsilon = 0.5)").fetchall()[0][0] > 0
    assert [e.user for e in server.entries()[before:]] == ["bob"]


@pytest.mark.spark
def test_clients_in_parallel_share_the_session(server: Server) -> None:
    before = len(server.entries("ann"))
    answers: list[t.Any] = []
    errors: list[BaseException] = []

    def client(k: int) -> None:
        try:
            with server.connect() as con:
                for j in range(2):
                    answers.append(con.execute(f"SELECT DP_COUNT(*) AS n FROM visits WHERE stay > {k * 2 + j} "
                                               "WITH (epsilon = 0.1)").fetchall())
        except BaseException as err:  # noqa: BLE001 - reported by the assertion below
            errors.append(err)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert not errors and len(answers) == 6
    assert len(server.entries("ann")) == before + 6
