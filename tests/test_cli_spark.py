"""``dpsql --engine spark``: the command starts a Spark session, makes the policy's source files
and the data files on the command line temporary views, and answers as on DuckDB.

The checks that need no Spark (a missing pyspark, arguments that cannot run on Spark) are in
the default suite and start no JVM; the one run on Spark (marker ``spark``) starts one session
in a subprocess and runs a script of statements there.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

ROOT = Path(__file__).resolve().parents[1]
VISITS = ROOT / "fixtures" / "visits" / "visits.parquet"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
POLICY = """
[budget]
epsilon = 1e9
delta = 1e-5
[tables.visits]
privacy_unit = "patient_id"
max_rows_per_unit = 5
{source}
[tables.visits.columns]
stay = {{ lower = 0, upper = 30 }}
ward = {{ keys = ["cardiology", "emergency", "maternity", "oncology", "orthopaedics"] }}
"""


def dpsql(*args: str, cwd: Path, prelude: str = "") -> subprocess.CompletedProcess[str]:
    """The command in a fresh interpreter; ``prelude`` runs first (e.g. to hide pyspark)."""
    code = f"import sys\n{prelude}\nfrom dpsql.interfaces.cli import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True,
                          env=ENV, timeout=300)


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    duckdb.execute(f"COPY (SELECT * FROM '{VISITS}') TO '{tmp_path / 'visits.csv'}' (HEADER)")
    path = tmp_path / "p.toml"
    path.write_text(POLICY.format(source='source = "visits.csv"'), encoding="utf-8")
    return path


NO_PYSPARK = "sys.modules['pyspark'] = None  # import pyspark fails, as when it is not installed"


def test_without_pyspark_one_line_names_the_extra(policy: Path) -> None:
    done = dpsql("--policy", str(policy), "--engine", "spark", "-c", "SELECT 1", cwd=policy.parent,
                 prelude=NO_PYSPARK)
    assert done.returncode == 1
    assert done.stderr == ('Error: --engine spark needs pyspark, which is not installed: '
                           'pip install "dpsql[spark]" (and Java 17 or later)\n')


@pytest.mark.parametrize(("args", "message"), [
    (["db.duckdb", "--engine", "spark"], "--engine spark reads data files (.parquet, .csv, .json) and the Spark "
                                         "catalog, not a DuckDB database: db.duckdb"),
    (["--spark-master", "local[1]"], "--spark-master is for --engine spark"),
    (["--engine", "spark", "--create"], "--create makes a DuckDB database; --engine spark reads data files "
                                        "where they are"),
])
def test_arguments_spark_cannot_run_are_refused_before_it_starts(policy: Path, args: list[str], message: str) -> None:
    # pyspark hidden: a refusal that came after starting Spark would name the extra instead
    done = dpsql("--policy", str(policy), *args, "-c", "SELECT 1", cwd=policy.parent, prelude=NO_PYSPARK)
    assert (done.returncode, done.stderr) == (1, f"Error: {message}\n")


def test_demo_is_duckdb_only(policy: Path) -> None:
    done = dpsql("--demo", "--engine", "spark", "-c", "SELECT 1", cwd=policy.parent, prelude=NO_PYSPARK)
    assert done.stderr == "Error: --demo runs on DuckDB; on Spark give --policy FILE and the data files\n"


@pytest.mark.spark
def test_cli_on_spark(policy: Path) -> None:
    """One session: a policy source (CSV), statements, a dot command, a refusal, the budget."""
    kept = duckdb.execute(f"SELECT SUM(LEAST(n, 5)) FROM (SELECT COUNT(*) AS n FROM '{VISITS}' "
                          "GROUP BY patient_id)").fetchone()[0]
    script = policy.parent / "q.sql"
    script.write_text(
        "SELECT DP_COUNT(*) AS n FROM visits WITH (epsilon = 1e6);\n"
        ".tables\n"
        "SELECT ward, DP_COUNT(*) AS n FROM visits GROUP BY ward ORDER BY ward WITH (epsilon = 1e6);\n"
        "SELECT DP_SUM(cost) FROM visits WITH (epsilon = 1);\n",
        encoding="utf-8")
    done = dpsql("--policy", str(policy), "--engine", "spark", "--format", "csv", "--no-report", "--budget",
                 "-f", str(script), cwd=policy.parent)
    assert done.returncode == 1  # the DP_SUM on an unbounded column is refused, after the rest ran
    out = done.stdout.splitlines()
    assert out[0:2] == ["n", str(kept)]  # Σ min(rows of a patient, 5): no hash in it
    assert any("visits" in line and "private" in line for line in out)
    wards = out[out.index("ward,n") + 1:out.index("ward,n") + 6]
    assert [w.split(",")[0] for w in wards] == ["cardiology", "emergency", "maternity", "oncology", "orthopaedics"]
    assert sum(int(w.split(",")[1]) for w in wards) <= 5 * kept
    assert any("spent ε=2000000.000" in line for line in out)  # two charges, the refusal none
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error")]
    assert len(errors) == 1 and "cost" in errors[0], done.stderr
    assert "WARN" not in done.stderr  # Spark's own log does not reach the command's stderr
