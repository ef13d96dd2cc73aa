"""dpsql over Spark Connect: a live server (``spark_connect`` in conftest.py, one for the whole
run) reached through ``dpsql.connect(SparkSession.builder.remote(url).getOrCreate(), policy)``,
``dpsql --engine spark --spark-master sc://...`` and ``dpsql serve --spark-master sc://...``.

The Connect session sees the test data through temporary views its client creates: the Python
program makes them with ``spark.read.parquet``, the command and the server from the policy's
``source`` (a CSV file). The server runs on this machine, so it reads the same paths. It admits
clients with its token only, which they find in the environment (``SPARK_CONNECT_AUTHENTICATE_TOKEN``).
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import time
import typing as t
from pathlib import Path

import duckdb
import psycopg
import pytest

import dpsql
from tests.conftest import demo_policy
from tests.serve.harness import launch
from tests.spark_connect_server import TOKEN, ConnectServer
from tests.test_spark import ADULT, ADULT_QUERIES, REFUSED, VISITS, VISITS_QUERIES, loose_visits_policy, same

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
WARDS = ["cardiology", "emergency", "maternity", "oncology", "orthopaedics"]
POLICY = """
[budget]
epsilon = {epsilon}
delta = 1e-5
{ledger}
[tables.visits]
privacy_unit = "patient_id"
max_rows_per_unit = 5
source = "visits.csv"
[tables.visits.columns]
stay = {{ lower = 0, upper = 30 }}
ward = {{ keys = {wards} }}
"""

#: One query of each form the Spark target writes: key domains, HAVING/ORDER/LIMIT after the
#: release, order statistics (the one-value histogram, PTR, smooth sensitivity), the Gaussian
#: variance, distinct counts, CTEs, date filters and per-unit subqueries.
STATISTICS = [("adult", q) for q in ADULT_QUERIES if q in {
    "SELECT DP_COUNT(*) FROM adult WHERE age > 50 WITH (epsilon = 1)",
    "SELECT occupation, DP_COUNT(*) FROM adult GROUP BY occupation WITH (epsilon = 1, keys = ['Sales', 'Nowhere'])",
    "SELECT sex, DP_COUNT(*) AS n, DP_SUM(age) / DP_COUNT(*) AS ratio FROM adult GROUP BY sex "
    "HAVING DP_COUNT(*) > 100 ORDER BY n DESC LIMIT 1 WITH (epsilon = 1)",
    "SELECT DP_MEDIAN(fnlwgt, 0, 1e6), DP_QUANTILE(fnlwgt, 0.01, 0, 1e6) FROM adult WITH (epsilon = 1)",
    "SELECT DP_MEDIAN(age) FROM adult WITH (mechanism = 'ptr', bound = 5, epsilon = 1, delta = 1e-6)",
    "SELECT DP_MEDIAN(age) FROM adult WITH (mechanism = 'smooth', epsilon = 1, delta = 1e-6)",
    "SELECT DP_VAR(age), DP_STDDEV(hours_per_week) FROM adult WITH (mechanism = 'gaussian', epsilon = 1, delta = 1e-6)",
    "SELECT DP_COUNT(DISTINCT workclass) FROM adult WITH (epsilon = 1)",
}] + [("loose", q) for q in VISITS_QUERIES if q.startswith((
    "SELECT ward, DP_COUNT(*), DP_MEAN(stay)", "WITH per AS", "SELECT ward, DP_QUANTILE(stay, 0.5)"))]
FRAGILE = ("CREATE OR REPLACE TEMP VIEW fragile AS SELECT age, CASE WHEN age > 80 "
           "THEN raise_error('age 90 of Alice') ELSE age END AS x FROM adult")
RELEASE = "SELECT sex, DP_COUNT(*) AS n, DP_MEAN(age) AS a FROM adult GROUP BY sex ORDER BY sex WITH (epsilon = 1)"


def exact(con: dpsql.Connection, query: str) -> tuple[list[str], list[tuple[t.Any, ...]]]:
    return con.engine.statistics(con.prepare(query).sql)


def duckdb_connections() -> dict[str, dpsql.Connection]:
    raw = duckdb.connect()
    raw.execute(f"CREATE TABLE visits AS SELECT * FROM '{VISITS}'")
    return {"adult": dpsql.connect(":memory:", demo_policy(epsilon=1e9, delta=0.5),
                                   setup=lambda c: c.execute(f"CREATE TABLE adult AS SELECT * FROM '{ADULT}'")),
            "loose": dpsql.connect(raw, loose_visits_policy())}


def test_python_api_over_spark_connect(spark_connect: ConnectServer, tmp_path: Path) -> None:
    """The same statistics and refusals as on DuckDB, a release charged once, an error while
    reading withheld and not charged, all through one Spark Connect session."""
    fragile = {"budget": {"epsilon": 10.0}, "tables": {"fragile": {
        "privacy_unit": "row", "max_rows_per_unit": 1, "columns": {"x": {"lower": 0, "upper": 100}}}}}
    steps = [("statistics", name, q) for name, q in STATISTICS] + [("prepare", "adult", q) for q in REFUSED]
    steps += [("sql", "adult", RELEASE), ("sql", "fragile", "SELECT DP_SUM(x) FROM fragile WITH (epsilon = 1)")]
    program = {"url": spark_connect.url, "views": {"adult": str(ADULT), "visits": str(VISITS)}, "sql": [FRAGILE],
               "connections": {"adult": demo_policy(epsilon=1e9, delta=0.5), "loose": loose_visits_policy(),
                               "fragile": fragile},
               "steps": steps}
    (tmp_path / "program.pickle").write_bytes(pickle.dumps(program))
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "spark_connect_client.py"),
                           str(tmp_path / "program.pickle"), str(tmp_path / "result.pickle")],
                          capture_output=True, text=True, env=spark_connect.env(ENV), timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    result = pickle.loads((tmp_path / "result.pickle").read_bytes())
    answers = dict(zip([(kind, name, q) for kind, name, q in steps], result["steps"]))
    assert len(STATISTICS) == 11 and len(answers) == len(steps)
    duck = duckdb_connections()
    try:
        order = lambda rows: sorted(rows, key=repr)  # noqa: E731  (groups come in any order)
        for name, query in STATISTICS:
            status, *value = answers[("statistics", name, query)]
            assert status == "ok", (query, value)
            names, rows = exact(duck[name], query)
            assert value[0][0] == names and same(order(value[0][1]), order(rows)), query
        for query in REFUSED:
            with pytest.raises(dpsql.Error) as on_duck:
                duck["adult"].prepare(query)
            assert answers[("prepare", "adult", query)] == ("error", type(on_duck.value).__name__,
                                                            str(on_duck.value)), query
    finally:
        for con in duck.values():
            con.close()
    status, released = answers[("sql", "adult", RELEASE)]
    assert status == "ok" and [r["sex"] for r in released] == ["Female", "Male"]
    assert abs(released[1]["n"] - 21790) < 50 and 30 < released[1]["a"] < 50
    status, kind, message = answers[("sql", "fragile", "SELECT DP_SUM(x) FROM fragile WITH (epsilon = 1)")]
    assert (status, kind) == ("error", "ExecutionError") and "withheld" in message and "Alice" not in message
    # the engine is Spark; Spark Connect hides the parallelism, so the session's own partitions apply
    assert result["connections"]["adult"] == ("spark", None, pytest.approx(1.0))
    assert result["connections"]["fragile"] == ("spark", None, 0.0)  # nothing charged for the failure


def visits_csv(directory: Path) -> int:
    """The visits fixture as CSV in ``directory``; Σ min(rows of a patient, 5), the rows a count keeps."""
    duckdb.execute(f"COPY (SELECT * FROM '{VISITS}') TO '{directory / 'visits.csv'}' (HEADER)")
    return duckdb.execute(f"SELECT SUM(LEAST(n, 5)) FROM (SELECT COUNT(*) AS n FROM '{VISITS}' "
                          "GROUP BY patient_id)").fetchone()[0]


def test_command_over_spark_connect(spark_connect: ConnectServer, tmp_path: Path) -> None:
    kept = visits_csv(tmp_path)
    policy = tmp_path / "p.toml"
    policy.write_text(POLICY.format(epsilon="1e9", ledger="", wards=WARDS), encoding="utf-8")
    script = tmp_path / "q.sql"
    script.write_text(
        "SELECT DP_COUNT(*) AS n FROM visits WITH (epsilon = 1e6);\n"
        ".tables\n"
        "SELECT ward, DP_COUNT(*) AS n FROM visits GROUP BY ward ORDER BY ward WITH (epsilon = 1e6);\n"
        "SELECT DP_SUM(cost) FROM visits WITH (epsilon = 1);\n",
        encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "dpsql", "--policy", str(policy), "--engine", "spark",
                           "--spark-master", spark_connect.url, "--format", "csv", "--no-report", "--budget",
                           "-f", str(script)], cwd=tmp_path, capture_output=True, text=True,
                          env=spark_connect.env(ENV), timeout=600)
    assert done.returncode == 1  # the DP_SUM on an unbounded column is refused, after the rest ran
    out = done.stdout.splitlines()
    assert out[0:2] == ["n", str(kept)]  # ε = 1e6: the count rounds to the exact Σ min(rows, 5)
    assert any("visits" in line and "private" in line for line in out)
    wards = out[out.index("ward,n") + 1:out.index("ward,n") + 6]
    assert [w.split(",")[0] for w in wards] == WARDS
    assert sum(int(w.split(",")[1]) for w in wards) <= 5 * kept
    assert any("spent ε=2000000.000" in line for line in out)  # two charges, the refusal none
    # stderr holds dpsql's one line and nothing of pyspark's (warnings, logs)
    assert done.stderr.splitlines() == [
        f"Error: statement 3 (line 4 of {script}): DP_SUM(cost): no bounds for column cost; give them in the "
        "call, e.g. DP_SUM(cost, 0, 100), or in the policy, or opt in to bounds found privately with "
        "DP_SUM(cost, bounds => 'auto') (spends 25% of its ε)"], done.stderr


def listeners(port: int) -> int:
    """How many sockets listen on ``port`` of 127.0.0.1 (one per process of ``--processes``)."""
    text = Path("/proc/net/tcp").read_text(encoding="ascii")
    return sum(1 for line in text.splitlines()[1:]
               if line.split()[1] == f"0100007F:{port:04X}" and line.split()[3] == "0A")


def test_server_processes_over_spark_connect(spark_connect: ConnectServer, tmp_path: Path) -> None:
    """``--processes 2`` on Spark Connect: two server processes, each a client of the one Connect
    server with its own session and views, answering psycopg clients and sharing the ledger."""
    kept = visits_csv(tmp_path)
    policy = tmp_path / "p.toml"
    policy.write_text(POLICY.format(epsilon=100, ledger='ledger = "serve.ledger"', wards=WARDS), encoding="utf-8")
    srv = launch(["--policy", str(policy), "--engine", "spark", "--spark-master", spark_connect.url,
                  "--processes", "2", "--init-ledger"], tmp_path, wait=600, environ=spark_connect.env())
    try:
        assert "statistics on spark" in srv.log[0] and "tables: visits" in srv.log[0], srv.log
        until = time.monotonic() + 300
        while listeners(srv.port) < 2 and time.monotonic() < until and srv.process.poll() is None:
            time.sleep(1)  # the second process listens once its Connect session and view are made
        assert listeners(srv.port) == 2
        for k in range(6):  # the kernel spreads the connections over both processes
            with psycopg.connect(f"host=127.0.0.1 port={srv.port} dbname=visits user=u{k} "
                                 f"password={srv.password}", autocommit=True) as con:
                rows = con.execute("SELECT ward, DP_COUNT(*) AS n FROM visits GROUP BY ward ORDER BY ward "
                                   "WITH (epsilon = 1)").fetchall()
                assert [r[0] for r in rows] == WARDS and abs(sum(r[1] for r in rows) - kept) < 200
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    con.execute("SELECT * FROM visits")
        assert [(e.user, round(e.cost.epsilon, 6)) for e in srv.entries()] == [(f"u{k}", 1.0) for k in range(6)]
    finally:
        srv.stop()


@pytest.mark.parametrize("command", [[], ["serve", "--port", "0"]])
def test_an_unreachable_server_is_refused_at_once(tmp_path: Path, command: list[str]) -> None:
    """Nothing listens on port 1: one line naming the address and what to check, without the
    Connect client's minutes of retries."""
    visits_csv(tmp_path)
    policy = tmp_path / "p.toml"
    policy.write_text(POLICY.format(epsilon=1, ledger="", wards=WARDS), encoding="utf-8")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "dpsql", *command, "--policy", str(policy), "--engine", "spark",
                           "--spark-master", "sc://127.0.0.1:1", *([] if command else ["-c", "SELECT 1"])],
                          cwd=tmp_path, capture_output=True, text=True, env=ENV, timeout=120)
    assert (done.returncode, done.stderr) == (1, (
        "Error: cannot reach the Spark Connect server at 127.0.0.1:1 (Connection refused); check --spark-master "
        "(or the policy's [engine] master) and that the server runs\n"))
    assert time.monotonic() - started < 60


def test_a_client_without_the_token_is_refused_in_one_line(spark_connect: ConnectServer, tmp_path: Path) -> None:
    """The server's login refused: one line when the session opens, the URL's token never shown."""
    visits_csv(tmp_path)
    policy = tmp_path / "p.toml"
    policy.write_text(POLICY.format(epsilon=1, ledger="", wards=WARDS), encoding="utf-8")
    without = {k: v for k, v in ENV.items() if k != TOKEN}
    for url, reason in ((spark_connect.url, "No authentication token provided"),
                        (f"{spark_connect.url}/;token=not-{spark_connect.token}", None)):
        done = subprocess.run([sys.executable, "-m", "dpsql", "--policy", str(policy), "--engine", "spark",
                               "--spark-master", url, "-c", "SELECT 1"],
                              cwd=tmp_path, capture_output=True, text=True, env=without, timeout=300)
        shown = url.replace(f"not-{spark_connect.token}", "<hidden>")
        assert done.returncode == 1 and done.stdout == "", done.stderr
        assert done.stderr.startswith(f"Error: cannot use the Spark Connect server at {shown}: "), done.stderr
        assert done.stderr.endswith("(UNAUTHENTICATED); give the server's token in the environment variable "
                                    "SPARK_CONNECT_AUTHENTICATE_TOKEN (or as ;token=... in the URL)\n"), done.stderr
        assert reason is None or reason in done.stderr
        assert len(done.stderr.splitlines()) == 1 and spark_connect.token not in done.stderr
