"""Honest accuracy: each group's own interval, kept with its row through post-processing."""

from __future__ import annotations

import math

import pytest

import dpsql
from dpsql.interfaces.demo import load_adult
from dpsql.privacy.noise import SeededNoise
from tests.conftest import demo_policy

MEAN = "SELECT race, DP_MEAN(age) AS age, DP_COUNT(*) AS n FROM adult GROUP BY race"
OPTIONS = " WITH (epsilon = 0.5)"


def _run(sql: str, seed: int = 5) -> dpsql.Result:
    con = dpsql.connect(":memory:", demo_policy(epsilon=1e9, delta=0.5), setup=load_adult, noise=SeededNoise(seed))
    try:
        return con.sql(sql)
    finally:
        con.close()


def _exact_counts() -> dict[str, int]:
    import duckdb

    con = duckdb.connect()
    load_adult(con)
    return dict(con.sql("SELECT race, count(*) FROM adult GROUP BY race").fetchall())


def test_a_grouped_mean_has_each_groups_own_interval_from_its_noisy_count() -> None:
    res = _run(MEAN + OPTIONS)
    widths = res.intervals("age")
    rows = res.fetchall()
    assert len(widths) == len(rows) == 5
    assert len(set(widths)) == 5  # groups of 300 and of 28,000 people are not equally accurate
    entry = res.entry_of("age")
    assert entry is not None and entry.ci_half_width == pytest.approx(max(widths))
    # The mechanism's formula, (hs + |mean − c|·hn) / (n − hn), gives back each group's count.
    mechanism = _prepared_mean()
    q = (1 + res.confidence) / 2
    hn, hs = mechanism.parts["n"].ci(q), mechanism.parts["s1"].ci(q)
    centre = float(mechanism.fixed.midpoint)
    exact = _exact_counts()
    for (race, mean, _), width in zip(rows, widths):
        noisy_count = (hs + abs(mean - centre) * hn) / width + hn
        assert noisy_count == pytest.approx(exact[race], abs=10 * mechanism.parts["n"].scale)
    # a count's noise does not depend on the group: one width for all
    assert len(set(res.intervals("n"))) == 1


def _prepared_mean():
    from dpsql.engine.pipeline import prepare

    con = dpsql.connect(":memory:", demo_policy(epsilon=1e9, delta=0.5), setup=load_adult, noise=SeededNoise(0))
    try:
        prepared = prepare(MEAN + OPTIONS, con.policy, con.engine)
    finally:
        con.close()
    assert prepared.plan is not None
    return prepared.plan.prepared[0]


@pytest.mark.parametrize("post", [
    " ORDER BY age DESC",
    " ORDER BY n LIMIT 3",
    " HAVING n > 1000 ORDER BY race DESC",
])
def test_the_widths_follow_their_rows_through_post_processing(post: str) -> None:
    plain = _run(MEAN + OPTIONS)
    own = {row[0]: (row[1], w) for row, w in zip(plain.fetchall(), plain.intervals("age"))}
    res = _run(MEAN + post + OPTIONS)
    rows, widths = res.fetchall(), res.intervals("age")
    assert len(rows) == len(widths) >= 1
    for (race, mean, _), width in zip(rows, widths):
        assert (mean, width) == own[race]
    frame = res.df(intervals=True)
    assert list(frame.columns) == ["race", "age", "age_ci", "n", "n_ci"]
    assert frame["age_ci"].tolist() == widths


def test_an_expression_column_has_no_interval_and_the_others_keep_theirs() -> None:
    res = _run("SELECT race, DP_MEAN(age) + 0 AS shifted, DP_MEAN(age) AS age FROM adult GROUP BY race "
               "ORDER BY race DESC" + OPTIONS)
    assert all(math.isnan(w) for w in res.intervals("shifted"))
    assert len(set(res.intervals("age"))) == 5


def test_an_ungrouped_release_has_its_one_interval() -> None:
    res = _run("SELECT DP_MEAN(age) AS age FROM adult" + OPTIONS)
    entry = res.entry_of("age")
    assert entry is not None and res.intervals("age") == [entry.ci_half_width]
