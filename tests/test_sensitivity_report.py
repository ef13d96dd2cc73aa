"""The data owner's sensitivity report (raw data: administrators only) and its command."""

from __future__ import annotations

import math

import duckdb
import pytest

import dpsql
from dpsql._privacy import sensitivity as sens
from dpsql.admin.sensitivity_report import SensitivityReport, sensitivity_report
from dpsql.interfaces import cli
from dpsql.interfaces.demo import load_adult

from .conftest import demo_policy


@pytest.fixture(scope="module")
def raw() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(":memory:")
    load_adult(con)
    yield con
    con.close()


def test_refuses_a_dpsql_connection_and_other_objects(raw) -> None:
    con = dpsql.connect(":memory:", demo_policy(), setup=load_adult)
    with pytest.raises(TypeError, match="never a dpsql.Connection"):
        sensitivity_report(con, "adult", "age", "median", 0, 100, echo=False)
    with pytest.raises(TypeError, match="duckdb connection"):
        sensitivity_report("adult.duckdb", "adult", "age", "median", 0, 100, echo=False)
    assert not any("sensitivity" in name and "report" in name for name in dir(dpsql.Connection))
    con.close()


def test_mean_report_on_adult(raw, capsys) -> None:
    rep = sensitivity_report(raw, "adult", "age", "mean", 0, 100, b_values=(0.005, 1e-9),
                             k_values=range(0, 5), delta=1e-6)
    n = 32561
    assert isinstance(rep, SensitivityReport) and rep.n == n
    assert rep.value == pytest.approx(38.58164675532078)
    assert rep.distances == {0.005: 12562, 1e-9: 0}
    assert rep.a[1] == pytest.approx(100 / (n - 1))
    assert rep.smooth == pytest.approx(100 / n) and rep.laplace_scale == pytest.approx(200 / n)
    assert rep.ptr_threshold == 27 and rep.pass_probability(12562) == 1.0
    assert rep.pass_probability(0) < 1e-6
    text = capsys.readouterr().out
    assert "for the data owner only" in text and "D(b = 0.005) = 12562" in text


def test_median_report_matches_the_analytic_module(raw, tmp_path) -> None:
    x = sorted(float(r[0]) for r in raw.execute("SELECT age FROM adult").fetchall())
    path = tmp_path / "median.png"
    rep = sensitivity_report(raw, "adult", "age", "median", 0, 100, b_values=(0.5, 1.0),
                             k_values=range(0, 3), plot_path=str(path), echo=False)
    beta = 1 / (2 * math.log(2e6))
    assert rep.beta == pytest.approx(beta) and rep.value == 37.0
    assert rep.local_sensitivity == sens.local_sensitivity("median", x, 0, 100)
    assert rep.distances == {0.5: 400, 1.0: 858}
    assert rep.smooth == pytest.approx(sens.smooth_sensitivity("median", x, beta, 0, 100))
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    assert "figure written" in str(rep)


def test_command(tmp_path, capsys) -> None:
    db = tmp_path / "adult.duckdb"
    con = duckdb.connect(str(db))
    load_adult(con)
    con.close()
    png = tmp_path / "out.png"
    status = cli.main(["sensitivity", str(db), "--table", "adult", "--column", "age", "--stat", "median",
                       "--lower", "0", "--upper", "100", "--b", "1", "--k-max", "20", "--plot", str(png)])
    out = capsys.readouterr().out
    assert status == 0 and "n = 32561" in out and "D(b = 1) = 858" in out and png.exists()
    status = cli.main(["sensitivity", str(db), "--table", "adult", "--column", "nope", "--stat", "mean",
                       "--lower", "0", "--upper", "1"])
    assert status == 1 and capsys.readouterr().err.startswith("Error: cannot read adult.nope")
    with pytest.raises(SystemExit) as exc:
        cli.main(["sensitivity", "--table", "adult", "--column", "age", "--lower", "0", "--upper", "1"])
    assert exc.value.code == 2  # neither DATABASE nor --demo
    status = cli.main(["sensitivity", "--demo", "--table", "adult", "--column", "hours_per_week",
                       "--stat", "quantile", "--p", "0.9", "--lower", "0", "--upper", "100", "--k-max", "5"])
    assert status == 0 and "p = 0.9" in capsys.readouterr().out
