"""Honest accuracy: each group's own interval, kept with its row through post-processing."""

from __future__ import annotations

import math

import pytest

import dpsql
from dpsql._privacy.noise import SeededNoise
from dpsql.interfaces.demo import load_adult
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
    from dpsql._query.pipeline import prepare

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
    """Each row's width is its own group's: the noisy count it implies (the mechanism's formula,
    as above) is that group's, within the count's noise. (Two runs of the query are not
    compared value for value: DuckDB returns the groups in no fixed order, so a seeded source
    gives each group other draws in another run.)"""
    res = _run(MEAN + post + OPTIONS)
    rows, widths = res.fetchall(), res.intervals("age")
    assert len(rows) == len(widths) >= 1
    mechanism = _prepared_mean()
    q = (1 + res.confidence) / 2
    hn, hs = mechanism.parts["n"].ci(q), mechanism.parts["s1"].ci(q)
    centre = float(mechanism.fixed.midpoint)
    exact = _exact_counts()
    for (race, mean, _), width in zip(rows, widths):
        noisy_count = (hs + abs(mean - centre) * hn) / width + hn
        assert noisy_count == pytest.approx(exact[race], abs=10 * mechanism.parts["n"].scale), race
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


VISITS = ("fixtures/visits/visits.parquet", "fixtures/visits/visits.toml")


def _visits(sql: str) -> dpsql.Result:
    con = dpsql.connect(*VISITS, noise=SeededNoise(1))
    try:
        return con.sql(sql)
    finally:
        con.close()


@pytest.mark.parametrize(("sql", "words"), [
    ("SELECT DP_SUM(cost) FROM visits WITH (epsilon = 1, max_rows_per_unit = 2, contribution = 'truncate')",
     "rows beyond max_rows_per_unit = 2 per patient_id are dropped; the interval covers the noise, not that bias"),
    ("SELECT ward, DP_MEAN(cost) FROM visits GROUP BY ward WITH (epsilon = 1, contribution = 'truncate')",
     "rows beyond max_rows_per_group_per_unit = 2 per group and max_groups_per_unit = 3 groups per patient_id "
     "are dropped; the interval covers the noise, not that bias"),
    # pre-aggregation (the default for these statistics) clips instead of dropping rows
    ("SELECT DP_SUM(cost) FROM visits WITH (epsilon = 1, max_rows_per_unit = 2)",
     "each patient_id counts as at most 2 rows (its sums clipped or re-weighted); the interval covers the noise, "
     "not that bias"),
    ("SELECT ward, DP_MEAN(cost) FROM visits GROUP BY ward WITH (epsilon = 1)",
     "groups beyond max_groups_per_unit = 3 per patient_id are dropped; each patient_id counts as at most 2 rows "
     "(its sums clipped or re-weighted); the interval covers the noise, not that bias"),
])
def test_a_unit_bound_that_may_drop_rows_says_so_and_what_the_interval_covers(sql: str, words: str) -> None:
    res = _visits(sql)
    assert all(e.note.endswith(words) for e in res.report)
    assert all(line.endswith(words) for line in res.report_lines())


def test_the_words_on_dropped_rows_do_not_depend_on_the_data() -> None:
    sql = "SELECT DP_COUNT(*) AS n FROM visits WHERE stay > {} WITH (epsilon = 1)"
    assert _visits(sql.format(0)).report[0].note == _visits(sql.format(10)).report[0].note != ""


def test_one_row_per_unit_drops_nothing_and_says_nothing_of_it() -> None:
    res = _visits("WITH per AS (SELECT patient_id, count(*) AS v FROM visits GROUP BY patient_id) "
                  "SELECT DP_MEAN(v, 0, 30) FROM per WITH (epsilon = 1)")
    assert "dropped" not in res.report[0].note


def test_a_row_unit_drops_nothing_and_says_nothing_of_it() -> None:
    assert "dropped" not in _run("SELECT DP_COUNT(*) FROM adult" + OPTIONS).report[0].note


def test_a_threshold_that_releases_no_group_says_why_and_what_to_change() -> None:
    res = _visits("SELECT stay, DP_COUNT(*) AS n FROM visits WHERE stay > 28 GROUP BY stay "
                  "WITH (epsilon = 0.1, delta = 1e-6)")
    assert res.rowcount == 0
    (note,) = [n for n in res.notes if n.startswith("no group passed")]
    assert "τ = " in note and "keys = [...]" in note and "more epsilon or delta" in note
    assert "max_groups_per_unit (now 3)" in note
    assert "groups below the noisy threshold are not shown" not in res.notes


def test_a_threshold_that_releases_groups_keeps_its_short_note() -> None:
    res = _visits("SELECT stay, DP_COUNT(*) AS n FROM visits GROUP BY stay WITH (epsilon = 1, delta = 1e-6)")
    assert res.rowcount > 0
    assert "groups below the noisy threshold are not shown" in res.notes
    assert not any(n.startswith("no group passed") for n in res.notes)


def test_public_keys_have_no_threshold_note() -> None:
    res = _run("SELECT race, DP_COUNT(*) FROM adult WHERE age > 200 GROUP BY race" + OPTIONS)
    assert not any("threshold" in n for n in res.notes)
