"""The words of the dpsql extension, with no dependencies: DP function names and option keys.

The dialect and the option parser are built on these, and the shell's lexer and completer use
them without importing sqlglot (a test checks the dialect defines exactly these functions).
Mechanism names are not here: the registry of :mod:`dpsql.mechanisms` is their only list.
"""

from __future__ import annotations

DP_FUNCTION_NAMES: tuple[str, ...] = (
    "DP_COUNT", "DP_SUM", "DP_MEAN", "DP_AVG", "DP_VAR", "DP_VARIANCE", "DP_STDDEV", "DP_STD",
    "DP_MEDIAN", "DP_QUANTILE", "DP_PERCENTILE", "DP_MIN", "DP_MAX", "DP_AGG",
)

OPTION_KEYS: tuple[str, ...] = (
    "mechanism", "epsilon", "delta", "rho", "bound", "chunks", "confidence", "keys", "aggregator",
    "noise", "bounds", "max_rows_per_unit", "max_groups_per_unit", "max_rows_per_group_per_unit",
    "contribution", "report_dropped",
    *("max_rows", "max_join_rows", "join_truncation", "left_truncation", "right_truncation"),
)

#: Options of joins and flat maps (see dpsql._privacy.joins): a flat map's rows per input row,
#: a public join's rows per key, and the truncation strategies of a private join's sides.
JOIN_OPTIONS: tuple[str, ...] = ("max_rows", "max_join_rows", "join_truncation", "left_truncation",
                                 "right_truncation")

AGGREGATORS = ("mean", "winsorized")
#: The values of ``contribution``: how an id unit's contribution is bounded (dpsql._compile.perunit).
CONTRIBUTION = ("truncate", "clip", "reweight", "auto")
SMOOTH_NOISE = ("laplace", "cauchy")
#: The values of ``bounds`` (option and DP aggregate argument): bounds found privately.
FOUND_BOUNDS = ("auto",)
