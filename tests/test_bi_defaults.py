"""The policy's [defaults]: a default budget, plain aggregates mapped to DP ones, zero-row probes."""

from __future__ import annotations

import copy

import pytest

import dpsql
from dpsql._policy.defaults import FOREVER, parse_defaults
from dpsql._policy.policy import policy_from_dict
from dpsql._privacy.noise import SeededNoise
from dpsql.errors import BindError, OptionError, PolicyError, PrivacyError

BASE = {
    "budget": {"epsilon": 100.0, "delta": 1e-5},
    "tables": {
        "people": {"columns": {"age": {"lower": 0, "upper": 100}, "sex": {"keys": ["a", "b"]}}},
        "codes": {"public": True},
    },
}


def _setup(con) -> None:
    con.execute("CREATE TABLE people AS SELECT (range % 90)::INT AS age, "
                "CASE WHEN range % 3 = 0 THEN 'a' ELSE 'b' END AS sex, range AS id FROM range(2000)")
    con.execute("CREATE TABLE codes AS SELECT range AS code FROM range(5)")


def _connect(defaults: dict | None = None, setup=_setup, seed: int | None = 0) -> dpsql.Connection:
    policy = copy.deepcopy(BASE)
    if defaults is not None:
        policy["defaults"] = defaults
    noise = SeededNoise(seed) if seed is not None else None
    return dpsql.connect(":memory:", policy, setup=setup, noise=noise)


BI = {"epsilon": 0.5, "delta": 1e-7, "plain_aggregates": True}


# -- the section ---------------------------------------------------------------------------------


def test_defaults_parse_and_are_off_without_the_section() -> None:
    d = policy_from_dict(copy.deepcopy(BASE)).defaults
    assert (d.epsilon, d.rho, d.plain_aggregates, d.reuse_seconds) == (None, None, False, FOREVER)
    d = parse_defaults({"rho": 0.01, "plain_aggregates": True, "reuse_releases": "90m"})
    assert (d.rho, d.plain_aggregates, d.reuse_seconds) == (0.01, True, 5400.0)
    assert parse_defaults({"reuse_releases": "off"}).reuse_seconds == 0
    assert parse_defaults({"reuse_releases": "Forever"}).reuse_seconds == FOREVER


@pytest.mark.parametrize(("spec", "message"), [
    ({"epsilon": 0}, "defaults.epsilon must be > 0"),
    ({"epsilon": "1"}, "defaults.epsilon must be a finite number"),
    ({"epsilon": 1, "rho": 1}, "not both"),
    ({"delta": 1e-6}, "defaults.delta needs defaults.epsilon"),
    ({"epsilon": 1, "delta": 1}, r"defaults.delta must be in \[0, 1\)"),
    ({"plain_aggregates": "yes"}, "plain_aggregates must be true or false"),
    ({"reuse_releases": "1 week"}, "reuse_releases must be"),
    ({"reuse_releases": 60}, "reuse_releases must be"),
    ({"reuse_releases": "0s"}, "reuse_releases must be"),
    ({"epsilom": 1}, "unknown key 'epsilom'"),
])
def test_bad_defaults_are_refused_by_name(spec: dict, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        policy_from_dict({**copy.deepcopy(BASE), "defaults": spec})


# -- default budget --------------------------------------------------------------------------------


def test_without_defaults_a_query_must_give_its_budget() -> None:
    con = _connect()
    with pytest.raises(OptionError, match="say how much budget"):
        con.sql("SELECT DP_COUNT(*) FROM people")
    assert con.budget.spent.epsilon == 0


def test_default_budget_is_spent_by_a_query_without_options() -> None:
    con = _connect({"epsilon": 0.25})
    r = con.sql("SELECT DP_COUNT(*) AS n FROM people")
    assert r.cost.epsilon == pytest.approx(0.25)
    assert any("epsilon = 0.25" in n and "[defaults]" in n for n in r.notes)
    r = con.sql("SELECT DP_COUNT(*) AS n FROM people WITH (epsilon = 1)")  # its own budget wins
    assert r.cost.epsilon == pytest.approx(1.0)
    assert not any("[defaults]" in n for n in r.notes)
    assert con.budget.spent.epsilon == pytest.approx(1.25)


def test_default_delta_selects_group_keys_and_rho_default() -> None:
    con = _connect({"epsilon": 1.0, "delta": 1e-6})
    r = con.sql("SELECT id % 7 AS g, DP_COUNT(*) FROM people GROUP BY g")  # keys by a noisy threshold
    assert r.cost.delta > 0
    con = _connect({"rho": 0.5, "delta": 1e-6})
    r = con.sql("SELECT DP_MEAN(age) FROM people")
    assert r.report[0].rho == pytest.approx(0.5)


# -- plain aggregates ------------------------------------------------------------------------------


def test_plain_aggregates_are_refused_unless_the_policy_opts_in() -> None:
    con = _connect({"epsilon": 1.0})
    with pytest.raises(PrivacyError, match=r"aggregate count\(\) over private table people is not"):
        con.sql("SELECT COUNT(*) FROM people")
    assert con.budget.spent.epsilon == 0


def test_plain_aggregates_become_dp_ones_with_policy_bounds() -> None:
    con = _connect(BI)
    r = con.sql("SELECT COUNT(*), COUNT(age), AVG(age), SUM(age), MEDIAN(age), "
                "QUANTILE_CONT(age, 0.25), PERCENTILE_CONT(0.75) WITHIN GROUP (ORDER BY age), "
                "VAR_POP(age), VAR_SAMP(age), STDDEV_POP(age), STDDEV_SAMP(age), MIN(age), MAX(age) FROM people")
    assert r.columns[:3] == ["count_star()", "count(age)", "avg(age)"]
    # VAR_POP and VAR_SAMP (STDDEV_POP and STDDEV_SAMP) are one DP aggregate: one release each
    assert len(r.report) == 11 and r.cost.epsilon == pytest.approx(0.5)
    mapped = " | ".join(r.notes)
    for before, after in [("COUNT(*)", "DP_COUNT(*)"), ("AVG(age)", "DP_MEAN(age)"), ("SUM(age)", "DP_SUM(age)"),
                          ("MEDIAN(age)", "DP_MEDIAN(age)"), ("QUANTILE_CONT(age, 0.25)", "DP_QUANTILE(age, 0.25)"),
                          ("VAR_POP(age)", "DP_VAR(age)"), ("STDDEV_SAMP(age)", "DP_STDDEV(age)"),
                          ("MIN(age)", "DP_MIN(age)"), ("MAX(age)", "DP_MAX(age)")]:
        assert f"{before} → {after}" in mapped
    assert "DP_QUANTILE(age, 0.75)" in mapped
    row = r.fetchall()[0]
    assert 0 <= row[11] <= row[12] <= 100  # DP_MIN, DP_MAX within the policy's bounds


def test_percentile_descending_is_one_minus_p() -> None:
    con = _connect(BI)
    text = con.explain("SELECT PERCENTILE_CONT(0.1) WITHIN GROUP (ORDER BY age DESC) FROM people")
    assert "→ DP_QUANTILE(age, 0.9)" in text


def test_explain_says_which_aggregate_became_which() -> None:
    con = _connect(BI)
    text = con.explain("SELECT sex, COUNT(*) FROM people GROUP BY sex")
    assert "plain aggregate COUNT(*) → DP_COUNT(*)" in text
    assert "from the policy's [defaults]" in text
    assert con.budget.spent.epsilon == 0


def test_bi_tool_queries() -> None:
    con = _connect(BI)
    superset = ("SELECT sex AS sex, COUNT(*) AS count FROM (SELECT * FROM people) AS virtual_table "
                "GROUP BY sex ORDER BY count DESC LIMIT 10000")
    r = con.sql(superset)
    assert r.columns == ["sex", "count"] and {k for k, _ in r.fetchall()} <= {"a", "b"}
    r = con.sql("WITH t AS (SELECT * FROM people WHERE age > 10) SELECT sex, AVG(age) FROM t GROUP BY sex "
                "HAVING COUNT(*) > 0 ORDER BY COUNT(*) DESC")
    assert r.columns == ["sex", "avg(age)"]


def test_plain_aggregates_elsewhere_are_left_alone() -> None:
    con = _connect(BI)
    # a public table: plain SQL, exact answer, nothing spent
    assert con.sql("SELECT COUNT(*) FROM codes").fetchall() == [(5,)]
    # a DP aggregate already in the query: nothing is mapped, the binder decides as before
    with pytest.raises(PrivacyError):
        con.sql("SELECT DP_COUNT(*), SUM(age) FROM people")
    # aggregates inside a subquery are not the SELECT's own: refused as before
    with pytest.raises(PrivacyError, match="not differentially private"):
        con.sql("SELECT n FROM (SELECT COUNT(*) AS n FROM people)")
    # a FILTER clause and QUANTILE_DISC are not mapped
    with pytest.raises(PrivacyError):
        con.sql("SELECT COUNT(*) FILTER (WHERE age > 3) FROM people")
    with pytest.raises(PrivacyError):
        con.sql("SELECT QUANTILE_DISC(age, 0.5) FROM people")
    # rows are still not selectable
    with pytest.raises(PrivacyError, match="rows cannot be selected"):
        con.sql("SELECT * FROM people")
    assert con.budget.spent.epsilon == 0


def test_plain_sum_without_bounds_is_refused() -> None:
    con = _connect(BI)
    with pytest.raises(PrivacyError, match="no bounds for column id"):
        con.sql("SELECT SUM(id) FROM people")


# -- zero-row probes -------------------------------------------------------------------------------


def _exploding(con) -> None:
    """A table whose values raise when read: a probe that read data would fail."""
    con.execute("CREATE VIEW people AS SELECT CASE WHEN range >= 0 THEN error('the data was read') END::INT "
                "AS age, 'a' AS sex, range AS id FROM range(10)")
    con.execute("CREATE TABLE codes AS SELECT range AS code FROM range(5)")


@pytest.mark.parametrize("query", [
    "SELECT * FROM people WHERE 1=0",
    "SELECT * FROM people WHERE false",
    "SELECT age, sex FROM people LIMIT 0",
    "SELECT * FROM (SELECT * FROM people) AS virtual_table WHERE 1 = 0",
])
def test_row_probe_gives_names_and_types_only(query: str) -> None:
    con = _connect({}, setup=_exploding, seed=None)
    r = con.sql(query)
    assert r.rowcount == 0 and r.cost.epsilon == 0
    assert "age" in r.columns and str(r.table.schema.field("age").type) == "int32"
    assert "zero-row probe" in r.notes[0]
    assert con.budget.spent.epsilon == 0 and not con.budget.history


def test_dp_probe_types_from_the_plan() -> None:
    con = _connect(BI, setup=_exploding, seed=None)
    r = con.sql("SELECT sex, COUNT(*) AS n, AVG(age) AS m, COUNT(*) + 1 AS n1 FROM people GROUP BY sex LIMIT 0")
    assert r.columns == ["sex", "n", "m", "n1"] and r.rowcount == 0
    types = [str(f.type) for f in r.table.schema]
    assert types == ["string", "int64", "double", "int64"]
    r = con.sql("SELECT DP_MEAN(age) FROM people LIMIT 0 WITH (epsilon = 1)")
    assert r.rowcount == 0 and r.columns == ["DP_MEAN(age)"]
    assert con.budget.spent.epsilon == 0


def test_an_aggregate_under_a_false_where_is_a_query_not_a_probe() -> None:
    con = _connect(BI)
    r = con.sql("SELECT DP_COUNT(*) AS n FROM people WHERE 1=0")  # SQL gives one row: a DP release
    assert r.rowcount == 1 and r.cost.epsilon > 0
    # rows of a subquery that aggregates: a probe, but of a query the binder refuses (the DP
    # aggregates must be in the outer SELECT), so it is refused too
    with pytest.raises(PrivacyError):
        con.sql("SELECT * FROM (SELECT sex, COUNT(*) AS n FROM people GROUP BY sex) AS q WHERE 1=0")


def test_probe_of_a_refused_query_is_refused() -> None:
    con = _connect({}, setup=_exploding, seed=None)
    with pytest.raises(OptionError, match="say how much budget"):  # no default budget
        con.sql("SELECT DP_COUNT(*) FROM people LIMIT 0")
    with pytest.raises(PrivacyError, match="not differentially private"):  # plain aggregates not opted in
        con.sql("SELECT COUNT(*) FROM people WHERE 1=0")
    with pytest.raises(PrivacyError):  # an undeclared table
        con.sql("SELECT * FROM duckdb_settings() WHERE 1=0")
    with pytest.raises((PrivacyError, BindError)):
        con.sql("SELECT * FROM nowhere WHERE 1=0")
    with pytest.raises(PrivacyError):  # a file function
        con.sql("SELECT * FROM read_csv('x.csv') LIMIT 0")


def test_not_a_probe() -> None:
    con = _connect(BI)
    r = con.sql("SELECT COUNT(*) FROM people WHERE 1=1")
    assert r.rowcount == 1 and r.cost.epsilon > 0
    r = con.sql("SELECT COUNT(*) FROM people WHERE age = 0 OR 1=0")
    assert r.rowcount == 1
    assert con.sql("SELECT * FROM codes LIMIT 0").rowcount == 0  # public: runs as it is


def test_the_readme_defaults_section_is_a_valid_policy_section() -> None:
    import re
    import tomllib
    from pathlib import Path

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("### SQL as BI tools write it", 1)[1]
    block = re.search(r"```toml\n(.*?)```", section, re.S)
    assert block is not None
    d = parse_defaults(tomllib.loads(block.group(1))["defaults"])
    assert d.epsilon == 0.1 and d.plain_aggregates and d.reuse_seconds == FOREVER
