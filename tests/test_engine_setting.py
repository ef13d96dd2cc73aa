"""The policy's ``[engine]`` section: parsed strictly, used by ``dpsql`` and ``dpsql serve`` when
no ``--engine`` is given (the command line wins), ignored by ``dpsql.connect``.

None of these start Spark: where the engine chosen is Spark, pyspark is hidden in the child
process, so that reaching Spark shows as the one line naming the missing extra.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

import dpsql
from dpsql._policy.engine_setting import EngineSetting
from dpsql._policy.policy import load_policy
from dpsql.errors import Error, PolicyError
from dpsql.interfaces.engines import choose

ROOT = Path(__file__).resolve().parents[1]
VISITS = ROOT / "fixtures" / "visits" / "visits.parquet"
BASE = {"budget": {"epsilon": 1.0}, "tables": {"t": {"public": True}}}
NO_PYSPARK = "sys.modules['pyspark'] = None  # import pyspark fails, as when it is not installed"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
MISSING = 'needs pyspark, which is not installed: pip install "dpsql[spark]" (and Java 17 or later)'


def with_engine(engine: object) -> dict:
    return {**BASE, "engine": engine}


def test_without_the_section_the_engine_is_duckdb() -> None:
    assert load_policy(BASE).engine == EngineSetting("duckdb", None)


def test_the_section_is_read() -> None:
    assert load_policy(with_engine({"name": "spark"})).engine == EngineSetting("spark", None)
    assert load_policy(with_engine({"name": "Spark", "master": " sc://h:15002 "})).engine == \
        EngineSetting("spark", "sc://h:15002")
    assert load_policy(with_engine({"name": "duckdb"})).engine == EngineSetting("duckdb", None)


@pytest.mark.parametrize(("engine", "message"), [
    ({"name": "postgres"}, "engine.name: unknown engine 'postgres'; use 'duckdb' or 'spark'"),
    ({"name": 3}, "engine.name: unknown engine 3; use 'duckdb' or 'spark'"),
    ({"name": "spark", "workers": 2}, "engine: unknown key 'workers'"),
    ({"name": "duckdb", "master": "local[2]"}, 'engine.master is for name = "spark" (this policy names duckdb)'),
    ({"master": "local[2]"}, 'engine.master is for name = "spark" (this policy names duckdb)'),
    ({"name": "spark", "master": ""}, "engine.master must be a Spark master URL"),
    ("spark", 'engine must be a table of settings ([engine] name = "spark")'),
])
def test_a_bad_section_is_one_line_naming_the_key(engine: object, message: str) -> None:
    with pytest.raises(PolicyError) as err:
        load_policy(with_engine(engine))
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_the_command_line_wins_over_the_policy() -> None:
    spark = load_policy(with_engine({"name": "spark", "master": "sc://h:15002"}))
    duck = load_policy(BASE)
    assert choose(None, None, duck) == ("duckdb", None)
    assert choose(None, None, None) == ("duckdb", None)
    assert choose(None, None, spark) == ("spark", "sc://h:15002")
    assert choose("spark", None, spark) == ("spark", "sc://h:15002")  # the policy's master still applies
    assert choose(None, "local[1]", spark) == ("spark", "local[1]")
    assert choose("duckdb", None, spark) == ("duckdb", None)
    assert choose("spark", None, duck) == ("spark", "local[2]")
    with pytest.raises(Error, match="^--spark-master is for --engine spark$"):
        choose(None, "local[1]", duck)
    with pytest.raises(Error, match="^--spark-master is for --engine spark$"):
        choose("duckdb", "local[1]", spark)


def test_connect_takes_its_engine_from_its_argument() -> None:
    """dpsql.connect runs where its first argument is: a policy naming Spark opens on DuckDB."""
    con = dpsql.connect(":memory:", with_engine({"name": "spark", "master": "sc://nowhere:1"}),
                        setup=lambda c: c.execute("CREATE TABLE t AS SELECT 1 AS x"))
    try:
        assert con.engine.name == "duckdb"
        assert con.sql("SELECT x FROM t").table.to_pylist() == [{"x": 1}]
    finally:
        con.close()


# -- the commands -------------------------------------------------------------------------------


def run(*args: str, cwd: Path, hide_pyspark: bool = True) -> subprocess.CompletedProcess[str]:
    prelude = NO_PYSPARK if hide_pyspark else ""
    code = f"import sys\n{prelude}\nfrom dpsql.interfaces.cli import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True,
                          env=ENV, timeout=120)


@pytest.fixture
def spark_policy(tmp_path: Path) -> Path:
    duckdb.execute(f"COPY (SELECT * FROM '{VISITS}') TO '{tmp_path / 'visits.csv'}' (HEADER)")
    path = tmp_path / "p.toml"
    path.write_text('[budget]\nepsilon = 10\n[engine]\nname = "spark"\n[tables.visits]\nprivacy_unit = "patient_id"\n'
                    'max_rows_per_unit = 5\nsource = "visits.csv"\n', encoding="utf-8")
    return path


def test_cli_uses_the_policy_engine_when_none_is_given(spark_policy: Path) -> None:
    done = run("--policy", str(spark_policy), "-c", "SELECT DP_COUNT(*) FROM visits WITH (epsilon = 1)",
               cwd=spark_policy.parent)
    assert (done.returncode, done.stderr) == (1, f"Error: --engine spark {MISSING}\n")


def test_cli_engine_duckdb_wins_over_the_policy(spark_policy: Path) -> None:
    done = run("--policy", str(spark_policy), "--engine", "duckdb", "--format", "csv", "--no-report",
               "-c", "SELECT DP_COUNT(*) AS n FROM visits WITH (epsilon = 1)", cwd=spark_policy.parent)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "n" and int(float(done.stdout.splitlines()[1])) > 0


def test_serve_uses_the_policy_engine_when_none_is_given(spark_policy: Path) -> None:
    done = run("serve", "--policy", str(spark_policy), "--port", "0", cwd=spark_policy.parent)
    assert (done.returncode, done.stderr) == (1, f"Error: --engine spark {MISSING}\n")


def test_an_unknown_engine_in_the_policy_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('[budget]\nepsilon = 1\n[engine]\nname = "sparkk"\n', encoding="utf-8")
    for command in ([], ["serve"]):
        done = run(*command, "--policy", str(path), "-c", "SELECT 1", cwd=tmp_path) if not command else \
            run(*command, "--policy", str(path), "--port", "0", cwd=tmp_path)
        assert (done.returncode, done.stderr) == \
            (1, "Error: engine.name: unknown engine 'sparkk'; use 'duckdb' or 'spark'\n")
