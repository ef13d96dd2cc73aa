-- Every statement in this file must parse (tests/test_grammar.py), one per line.
SELECT DP_COUNT(*) FROM adult WITH (epsilon = 1)
SELECT DP_COUNT() FROM adult WITH (epsilon = 1)
SELECT DP_COUNT(workclass) FROM adult WITH (epsilon = 0.5)
SELECT DP_SUM(age) FROM adult WITH (epsilon = 1)
SELECT DP_SUM(age, 0, 100) FROM adult WITH (epsilon = 1)
SELECT DP_SUM(age, bounds => (0, 100)) FROM adult WITH (epsilon = 1)
SELECT DP_SUM(age * 2, -10, 210) FROM adult WITH (epsilon = 1)
SELECT DP_MEAN(age) FROM adult WITH (mechanism = 'smooth', epsilon = 1, delta = 1e-6)
SELECT DP_AVG(age) FROM adult WITH (epsilon = 1)
SELECT DP_VAR(age), DP_STDDEV(age) FROM adult WITH (epsilon = 1)
SELECT sex, DP_COUNT(*) AS n, DP_MEAN(hours_per_week) AS h FROM adult WHERE age >= 30 GROUP BY sex WITH (epsilon = 0.5)
SELECT sex, DP_COUNT(*) AS n FROM adult GROUP BY sex HAVING n > 100 ORDER BY n DESC LIMIT 1 WITH (epsilon = 1)
SELECT DP_MEDIAN(age) FROM adult WITH (mechanism = 'ptr', bound = 1, epsilon = 1, delta = 1e-6)
SELECT DP_QUANTILE(age, 0.9) FROM adult WITH (epsilon = 1)
SELECT DP_PERCENTILE(age, 0.25, 0, 100) FROM adult WITH (epsilon = 1)
SELECT DP_MIN(age), DP_MAX(age) FROM adult WITH (mechanism = 'exponential', epsilon = 1)
SELECT DP_AGG(regr_slope(hours_per_week, age), -1, 1) FROM adult WITH (mechanism = 'saa', chunks = 300, epsilon = 1)
SELECT DP_AGG(corr(age, education_num), bounds => (-1, 1)) FROM adult WITH (mechanism = 'saa', aggregator = 'winsorized', epsilon = 1)
SELECT occupation, DP_COUNT(*) FROM adult GROUP BY occupation WITH (epsilon = 1, delta = 1e-6)
SELECT sex, DP_COUNT(*) FROM adult GROUP BY sex WITH (epsilon = 1, keys = ['Female', 'Male'])
SELECT sex, income, DP_COUNT(*) FROM adult GROUP BY sex, income WITH (epsilon = 1, keys = [('Female', '>50K'), ('Male', '>50K')])
SELECT DP_MEAN(age) FROM adult WITH (mechanism = 'gaussian', rho = 0.5, delta = 1e-6)
SELECT DP_MEAN(a) FROM (SELECT age AS a FROM adult WHERE sex = 'Male') AS s WITH (epsilon = 1)
WITH older AS (SELECT age FROM adult WHERE age > 60) SELECT DP_COUNT(*) FROM older WITH (epsilon = 1)
SELECT DP_SUM(age) / DP_COUNT(*) AS ratio FROM adult WITH (epsilon = 1, confidence = 0.9)
EXPLAIN SELECT DP_MEAN(age) FROM adult WITH (epsilon = 1)
SELECT DP_COUNT(*) FROM adult WITH (epsilon = 1);
SELECT education, education_num FROM education_levels ORDER BY education_num
SELECT ward, DP_COUNT(*) FROM visits GROUP BY ward WITH (epsilon = 1, delta = 1e-6, max_groups_per_unit = 3, max_rows_per_group_per_unit = 2)
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-5, max_groups_contributed = 2, privacy_unit_column = id) item, AVG(quantity, contribution_bounds_per_group => (0, 100)) AS average_quantity FROM professors GROUP BY item
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*, contribution_bounds_per_group => (0, 5)) AS n, COUNT(ward) FROM visits
select with differential_privacy options (epsilon = 0.5, delta = 1e-6) sex, sum(age, contribution_bounds_per_group => (0, 100)) as s from adult where age >= 30 group by sex
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) VAR_POP(age), STDDEV_POP(age, contribution_bounds_per_row => (0, 100)), PERCENTILE_CONT(age, 0.5, contribution_bounds_per_row => (0, 100)) FROM adult
SELECT WITH DIFFERENTIAL_PRIVACY sex, COUNT(*) AS n FROM adult GROUP BY sex HAVING COUNT(*) > 100 ORDER BY n DESC
EXPLAIN SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, max_rows_contributed = 2, privacy_unit_column = visits.patient_id) SUM(cost, contribution_bounds_per_row => (0, 1000)) FROM visits
WITH older AS (SELECT age FROM adult WHERE age > 60) SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) AVG(age, contribution_bounds_per_group => (60, 100)) FROM older
SELECT DP_MEAN(capital_gain, bounds => 'auto') FROM adult WITH (epsilon = 1)
SELECT DP_QUANTILE(capital_gain, 0.9, bounds => 'auto') FROM adult WITH (epsilon = 1)
SELECT sex, DP_SUM(capital_gain) FROM adult GROUP BY sex WITH (epsilon = 1, bounds = 'auto')
