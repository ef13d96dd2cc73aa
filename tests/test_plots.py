"""Charts: ``Result.plot()``, ``con.budget.plot()`` and the shell's ``.plot FILE``; and a dpsql
error in an executed notebook shows as one line.

Each chart is drawn, written as a PNG and read back (a picture with something on it, of the
size asked for), and its parts are checked: a bar or a point per group, error bars of the
reported half-widths, one step line per analyst. ``DPSQL_DOC_IMAGES=1`` also writes the
pictures the docs show into ``docs/img``.
"""

from __future__ import annotations

import os
import typing as t
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest

import dpsql
from dpsql._privacy.noise import SeededNoise
from dpsql.interfaces.demo import load_adult
from tests.conftest import demo_policy

DOCS_IMG = Path(__file__).resolve().parents[1] / "docs" / "img"


def _png(fig: t.Any, path: Path) -> np.ndarray:
    fig.savefig(path, dpi=80)
    picture = matplotlib.image.imread(path)
    assert picture.shape[0] > 100 and picture.shape[1] > 100
    assert float(picture[..., :3].std()) > 0.05, "the picture is blank"
    if os.environ.get("DPSQL_DOC_IMAGES"):
        fig.savefig(DOCS_IMG / path.name, dpi=80)
    return picture


@pytest.fixture
def con() -> t.Iterator[dpsql.Connection]:
    c = dpsql.connect(":memory:", demo_policy(epsilon=20.0, delta=1e-5), setup=load_adult, noise=SeededNoise(3))
    yield c
    c.close()


def test_grouped_result_is_bars_with_the_reported_intervals(con, tmp_path) -> None:
    res = con.sql("SELECT sex, DP_MEAN(hours_per_week) AS hours FROM adult GROUP BY sex WITH (epsilon = 1)")
    fig = res.plot()
    ax = fig.axes[0]
    bars = ax.patches
    assert len(bars) == 2
    assert [b.get_height() for b in bars] == pytest.approx([r[1] for r in res.fetchall()])
    assert [tick.get_text() for tick in ax.get_xticklabels()] == ["Female", "Male"]
    bar_container = next(c for c in ax.containers if hasattr(c, "errorbar"))
    (errorbar,) = bar_container.errorbar.lines[2]
    segments = errorbar.get_segments()
    half = [abs(seg[1][1] - seg[0][1]) / 2 for seg in segments]
    assert half == pytest.approx(res.intervals("hours"))
    assert "95% intervals" in ax.get_title()
    _png(fig, tmp_path / "plot-grouped-mean.png")


def test_ordered_key_is_a_line_with_a_band(con, tmp_path) -> None:
    res = con.sql("SELECT age, DP_COUNT(*) AS people FROM adult WHERE age BETWEEN 17 AND 80 GROUP BY age "
                  "WITH (epsilon = 1, delta = 1e-6)")
    fig = res.plot()
    ax = fig.axes[0]
    (line,) = ax.get_lines()
    xs = list(line.get_xdata())
    assert xs == sorted(xs) and len(xs) == len(res)
    assert len(ax.collections) == 1  # the interval band
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("age", "people")
    _png(fig, tmp_path / "plot-count-by-age.png")


def test_ungrouped_result_is_a_bar_per_column(con, tmp_path) -> None:
    res = con.sql("SELECT DP_MEAN(age) AS age, DP_MEAN(hours_per_week) AS hours FROM adult WITH (epsilon = 1)")
    ax = res.plot().axes[0]
    assert len(ax.patches) == 2
    assert [tick.get_text() for tick in ax.get_xticklabels()] == ["age", "hours"]


def test_plot_of_a_column_that_does_not_exist_is_one_line(con) -> None:
    res = con.sql("SELECT sex, DP_COUNT(*) AS n FROM adult GROUP BY sex WITH (epsilon = 1)")
    with pytest.raises(dpsql.Error, match="no column nope in the result"):
        res.plot(columns=["nope"])


def test_budget_plot_steps_per_analyst(tmp_path) -> None:
    policy = demo_policy(epsilon=10.0, delta=1e-5)
    policy["budget"]["ledger"] = str(tmp_path / "ledger.sqlite")
    alice = dpsql.connect(":memory:", policy, setup=load_adult, user="alice", init_ledger=True)
    bob = dpsql.connect(":memory:", policy, setup=load_adult, user="bob")
    try:
        alice.sql("SELECT DP_COUNT(*) FROM adult WITH (epsilon = 1)")
        bob.sql("SELECT DP_COUNT(*) FROM adult WITH (mechanism = 'gaussian', epsilon = 0.5, delta = 1e-6)")
        alice.sql("SELECT DP_MEAN(age) FROM adult WITH (epsilon = 2)")
        fig = alice.budget.plot()
    finally:
        alice.close()
        bob.close()
    eps, delta = fig.axes
    labels = [line.get_label() for line in eps.get_lines()]
    assert labels[:3] == ["all analysts", "alice", "bob"]
    total = eps.get_lines()[0]
    assert list(total.get_ydata())[-1] == pytest.approx(3.5)
    assert list(eps.get_lines()[1].get_ydata())[-1] == pytest.approx(3.0)
    # bob stopped after his one charge: his line stays at 0.5 up to the last charge of anyone
    everyone, _, bobs = eps.get_lines()[:3]
    assert list(bobs.get_ydata())[-1] == pytest.approx(0.5)
    assert list(bobs.get_xdata())[-1] == list(everyone.get_xdata())[-1]
    assert "δ" in delta.get_ylabel()
    _png(fig, tmp_path / "plot-budget.png")


def test_shell_plot_writes_the_last_result(con, tmp_path, capsys) -> None:
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    from dpsql.interfaces.repl.shell import run_repl

    out = tmp_path / "chart.png"
    with create_pipe_input() as inp:
        inp.send_text(f".plot {out}\nSELECT sex, DP_COUNT(*) AS n FROM adult GROUP BY sex WITH (epsilon = 1);\n"
                      f".plot {out}\n.plot {tmp_path}/chart.nope\n\x04")
        run_repl(con, input=inp, output=DummyOutput(), history_file=tmp_path / "history")
    captured = capsys.readouterr()
    assert "Error: no result to plot yet: run a query first, then .plot FILE" in captured.err
    assert f"chart written to {out}" in captured.out
    assert matplotlib.image.imread(out).shape[0] > 100
    assert "Error: cannot write" in captured.err and "use .png, .svg or .pdf" in captured.err


# -- a notebook, executed by a real kernel ------------------------------------------------------


def test_executed_notebook_shows_errors_in_one_line_and_plots_as_pictures(tmp_path) -> None:
    import nbformat
    from nbclient import NotebookClient

    cells = [
        "import dpsql\nfrom dpsql.interfaces.demo import connect_demo\ncon = connect_demo()",
        "con.sql('SELECT * FROM adult')",
        "con.sql('SELECT DP_COUNT(*) FORM adult WITH (epsilon = 1)')",
        "con.sql('SELECT sex, DP_COUNT(*) AS n FROM adult GROUP BY sex WITH (epsilon = 1)').plot()",
        "con.budget.plot()",
        "from dpsql.errors import InternalError\ndef broken():\n    raise InternalError('an invariant broke')\nbroken()",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    client = NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(tmp_path)}}, env=env)
    client.execute()
    refused, syntax, chart, budget, internal = (c.outputs for c in nb.cells[1:])
    assert refused[0]["output_type"] == "error"
    assert refused[0]["traceback"] == ["PrivacyError: table adult is private: its rows cannot be selected; only DP "
                                       "aggregates (DP_COUNT, DP_SUM, DP_MEAN, ...) may read it"]
    assert syntax[0]["traceback"][0].startswith("ParseError: syntax error at line 1, column 20 near 'FORM'")
    assert syntax[0]["traceback"][2].strip() == "^^^^"
    for outputs in (chart, budget):
        assert any("image/png" in o.get("data", {}) for o in outputs), outputs
    # a bug keeps its traceback: the frames say where it happened
    trace = internal[0]["traceback"]
    assert trace[0].startswith("Traceback") and any("broken()" in line for line in trace)
    assert trace[-1] == "dpsql.errors.InternalError: an invariant broke"
