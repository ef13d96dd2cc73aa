"""On Spark, expressions may use only functions that cannot fail on a value there (no TRY).

These run without Spark: the check is a pass over the query. ``tests/test_spark.py`` shows the
attack on a real Spark session.
"""

from __future__ import annotations

import pytest

from dpsql._compile.target import DUCKDB, SPARK
from dpsql._sql import dialect
from dpsql.errors import BindError

REFUSED = [
    # a pattern computed from a row: Java compiles it when a row reaches it
    ("SELECT DP_COUNT(*) FROM adult WHERE regexp_matches('x', CASE WHEN age = 90 THEN '(' ELSE 'x' END) "
     "WITH (epsilon = 1)", "regexp_matches()"),
    ("SELECT DP_COUNT(*) FROM adult WHERE regexp_matches(workclass, '(?P<n>a)') WITH (epsilon = 1)",
     "regexp_matches()"),
    ("SELECT DP_SUM(length(regexp_replace(workclass, '(a)', '\\1'))) FROM adult WITH (epsilon = 1)",
     "regexp_replace()"),
    ("SELECT DP_COUNT(*) FROM adult WHERE split_part(workclass, '-', 0) = 'x' WITH (epsilon = 1)",
     "split_part()"),
    ("WITH c AS (SELECT age FROM adult WHERE regexp_matches(workclass, 'a')) SELECT DP_COUNT(*) FROM c "
     "WITH (epsilon = 1)", "regexp_matches()"),
    ("SELECT DP_COUNT(*) FROM adult WHERE workclass LIKE 'a\\%' WITH (epsilon = 1)", "backslash"),
    ("SELECT DP_COUNT(*) FROM adult WHERE workclass LIKE CASE WHEN age = 90 THEN 'a' ELSE 'b' END "
     "WITH (epsilon = 1)", "literal"),
    ("SELECT DP_COUNT(*) FROM adult WHERE workclass ILIKE '%x' ESCAPE '!' WITH (epsilon = 1)", "ESCAPE"),
    ("SELECT sex, DP_COUNT(*) FROM adult GROUP BY sex, md5(workclass) WITH (epsilon = 1)", "md5()"),
    # interval arithmetic overflows on a chosen row, ANSI or not
    ("SELECT DP_COUNT(*) FROM adult WHERE CASE WHEN age = 90 THEN DATE '2020-01-01' + INTERVAL 100000000 YEAR "
     "ELSE DATE '2020-01-01' END > DATE '2000-01-01' WITH (epsilon = 1)", "INTERVAL"),
    # a key named by its position or alias runs on Spark too
    ("SELECT regexp_extract(workclass, '(a)', 1) AS w, DP_COUNT(*) FROM adult GROUP BY 1 WITH (epsilon = 1)",
     "regexp_extract()"),
    ("SELECT regexp_extract(workclass, '(a)', 1) AS w, DP_COUNT(*) FROM adult GROUP BY w WITH (epsilon = 1)",
     "regexp_extract()"),
]

ACCEPTED = [
    "SELECT DP_COUNT(*) FROM adult WHERE workclass LIKE 'Priv%' AND lower(sex) = 'male' WITH (epsilon = 1)",
    "SELECT sex, ROUND(DP_MEAN(age), 1) FROM adult GROUP BY sex WITH (epsilon = 1)",
    "SELECT DP_SUM(CASE WHEN age > 40 THEN abs(age - 40) ELSE 0 END, 0, 60) FROM adult WITH (epsilon = 1)",
    # post-processing runs in DuckDB, on the noisy rows: any allowed function
    "SELECT sex, DP_COUNT(*) AS n FROM adult GROUP BY sex HAVING regexp_matches(sex, '^M') WITH (epsilon = 1)",
    "SELECT sex, concat(sex, ': ', DP_COUNT(*)) FROM adult GROUP BY sex WITH (epsilon = 1)",
]


@pytest.mark.parametrize(("sql", "named"), REFUSED)
def test_what_could_fail_on_spark_is_refused_by_name(sql: str, named: str) -> None:
    query = dialect.parse(sql).this
    DUCKDB.check_query(query)  # DuckDB runs it inside TRY(...)
    with pytest.raises(BindError, match="Spark") as info:
        SPARK.check_query(query)
    assert named in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("sql", ACCEPTED)
def test_total_functions_pass(sql: str) -> None:
    SPARK.check_query(dialect.parse(sql).this)
