"""Values that cannot be told from 0 are flagged (an empty public-key group printed a clamped
bound or a negative sum with no flag): the report says how many groups, ``df()`` carries their
rows, and the flag is read from the released values and their intervals only."""

from __future__ import annotations

import math
import re

import pytest

import dpsql
from dpsql._privacy.noise import SeededNoise
from dpsql.interfaces.demo import load_adult
from tests.conftest import demo_policy

#: Female has no row here (sex has public keys, so its group is released anyway); Male has many
QUERY = ("SELECT sex, DP_COUNT(*) AS n, DP_SUM(age) AS s, DP_MEAN(age) AS m FROM adult "
         "WHERE sex = 'Male' AND age > 30 GROUP BY sex WITH (epsilon = 1)")


@pytest.fixture
def con() -> dpsql.Connection:
    c = dpsql.connect(":memory:", demo_policy(epsilon=20.0, delta=1e-5), setup=load_adult, noise=SeededNoise(5))
    yield c
    c.close()


def test_an_empty_group_is_flagged_and_a_full_one_is_not(con) -> None:
    res = con.sql(QUERY)
    rows = res.fetchall()
    assert [r[0] for r in rows] == ["Female", "Male"]
    assert res.within_noise("n") == [True, False]  # a count of an empty group: 0 or noise
    for column in ("n", "s", "m"):
        widths = res.intervals(column)
        k = res.columns.index(column)
        assert res.within_noise(column) == [abs(r[k]) <= w for r, w in zip(rows, widths)]
        assert res.within_noise(column)[1] is False
    assert res.within_noise("sex") == [False, False]  # a key has no interval
    lines = res.report_lines()
    assert "1 of 2 groups within noise of 0" in lines[0]


def test_df_carries_the_flagged_rows(con) -> None:
    frame = con.sql(QUERY).df()
    report = frame.attrs["dpsql_report"]
    assert report[0]["output_columns"] == ["n"] and report[0]["within_noise_rows"] == [0]
    assert all(entry["within_noise_rows"] in ([], [0]) for entry in report)


def test_a_result_far_from_zero_has_no_flag(con) -> None:
    res = con.sql("SELECT sex, DP_COUNT(*) AS n FROM adult GROUP BY sex WITH (epsilon = 1)")
    assert res.within_noise("n") == [False, False]
    assert "within noise" not in " ".join(res.report_lines())
    assert res.df().attrs["dpsql_report"][0]["within_noise_rows"] == []


def test_one_row_says_so_in_the_report_and_the_command_prints_it(con, capsys) -> None:
    res = con.sql("SELECT DP_COUNT(*) AS n FROM adult WHERE age > 200 WITH (epsilon = 1)")
    assert res.within_noise("n") == [True]
    assert res.report_lines()[0].endswith("within noise of 0: the value is smaller than its interval (few or no rows)")
    from dpsql.interfaces.cli import main

    main(["--demo", "-c", "SELECT DP_COUNT(*) AS n FROM adult WHERE age > 200 WITH (epsilon = 1)"])
    out = capsys.readouterr().out
    # the command draws its own noise: the count of no rows is within its interval 95% of the time,
    # and the line says so exactly when it is
    value = float(re.search(r"│\s*(-?[\d.]+)\s*│", out).group(1))
    width = float(re.search(r"±([\d.]+)", out).group(1))
    assert ("within noise of 0" in out) == (abs(value) <= width), out


def test_no_interval_is_never_flagged(con) -> None:
    res = con.sql("SELECT sex, DP_MEDIAN(age) AS med FROM adult WHERE age > 200 GROUP BY sex WITH (epsilon = 1)")
    widths = res.intervals("med")
    assert res.within_noise("med") == [not math.isnan(w) and abs(v) <= w
                                       for v, w in zip([r[1] for r in res.fetchall()], widths)]
