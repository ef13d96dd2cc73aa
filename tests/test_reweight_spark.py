"""Re-weighting (dpsql._sql.reweight) on Spark: nothing in it depends on a hash, so Spark's exact
statistics are DuckDB's, integer for integer (weighted partials, kept groups, key counts)."""

from __future__ import annotations

import pytest

from tests.test_spark import check_same_statistics, exact, pairs  # noqa: F401  (the fixture)

pytestmark = pytest.mark.spark

QUERIES = [
    "SELECT ward, DP_COUNT(*), DP_COUNT(stay), DP_SUM(cost), DP_MEAN(stay), DP_VAR(cost) FROM visits GROUP BY ward "
    "WITH (epsilon = 1, max_rows_per_unit = 2)",
    "SELECT ward, DP_SUM(cost) FROM visits WHERE stay > 1 GROUP BY ward WITH (epsilon = 1, max_rows_per_unit = 3, "
    "report_dropped = true)",
    "SELECT DP_COUNT(*), DP_MEAN(cost) FROM visits WITH (epsilon = 1, max_rows_per_unit = 2, contribution = 'reweight')",
]


@pytest.mark.parametrize("query", QUERIES)
def test_reweighting_gives_the_same_statistics_on_spark(pairs, query: str) -> None:  # noqa: F811
    duck, _ = pairs["loose"]
    prepared = duck.prepare(query)
    assert prepared.plan.units.mode == "reweight", prepared.plan.units.mode_reason
    _, rows = exact(duck, query)
    assert rows and any(v not in (None, 0) for r in rows for v in r)
    check_same_statistics(pairs["loose"], query)


def test_the_weights_bind_on_spark(pairs) -> None:  # noqa: F811
    """Half of the 4,000 patients hold more than 2 of the 13,343 visits: apportioned, each counts
    exactly 2 visits over its wards, so the ward counts add up to Σ min(visits, 2) (6,760, as
    truncation keeps) on both engines, ward by ward alike."""
    query = "SELECT ward, DP_COUNT(*) FROM visits GROUP BY ward WITH (epsilon = 1, max_rows_per_unit = 2)"
    raw = pairs["loose"][0].engine.connection
    bound = raw.execute("SELECT SUM(LEAST(n, 2)) FROM (SELECT COUNT(*) AS n FROM visits GROUP BY patient_id)").fetchone()[0]
    duck, spark = (sorted(exact(con, query)[1]) for con in pairs["loose"])
    assert duck == spark and sum(r[1] for r in duck) == bound == 6760
