"""Validation of the trailing ``WITH (key = value, ...)`` options clause.

Every check here depends on the query text alone, runs before any data is read, and fails
with an :class:`~dpsql.errors.OptionError` whose one-line message names the key.

The value of ``mechanism`` is only checked to be a name here: the mechanisms live in a higher
layer, and the planner checks the name against their registry (and refuses an option that no
chosen mechanism uses, or ``rho`` with a mechanism that cannot spend it).
"""

from __future__ import annotations

import math
import re
import typing as t
from dataclasses import dataclass, field

from sqlglot import exp

from dpsql._policy.policy import UNIT_BOUNDS
from dpsql._privacy.joins import MAX_FACTOR, Truncation, parse_truncation
from dpsql._sql.keywords import AGGREGATORS, CONTRIBUTION, FOUND_BOUNDS, OPTION_KEYS, SMOOTH_NOISE
from dpsql._sql.suggest import did_you_mean
from dpsql.errors import OptionError

#: The largest number of sample-and-aggregate chunks accepted (each chunk is a group row).
MAX_CHUNKS = 1_000_000
#: The largest per-unit bound a query may give (a sensitivity multiplier: beyond this the
#: noise drowns any answer, and the products of bounds stay exact integers).
MAX_UNIT_BOUND = 1_000_000


@dataclass(frozen=True)
class Options:
    """The validated options of one query. ``None`` means "not given"."""

    mechanism: str | None = None
    epsilon: float | None = None
    delta: float | None = None
    rho: float | None = None
    bound: float | None = None
    chunks: int | None = None
    confidence: float = 0.95
    keys: tuple[tuple[t.Any, ...], ...] | None = None
    aggregator: str = "mean"
    noise: str | None = None
    #: ``'auto'``: aggregates without bounds find them privately (dpsql._privacy.approx_bounds)
    bounds: str | None = None
    #: per-unit contribution bounds for this query (id privacy units; see dpsql._policy.units)
    max_rows_per_unit: int | None = None
    max_groups_per_unit: int | None = None
    max_rows_per_group_per_unit: int | None = None
    #: how an id unit's contribution is bounded: 'truncate', 'clip' or 'auto' (dpsql._compile.perunit)
    contribution: str | None = None
    #: release a noisy count of the units the per-unit bound cut (dpsql._release.release)
    report_dropped: bool = False
    #: joins and flat maps (see dpsql._privacy.joins)
    max_rows: int | None = None
    max_join_rows: int | None = None
    join_truncation: Truncation | None = None
    left_truncation: Truncation | None = None
    right_truncation: Truncation | None = None
    given: frozenset[str] = field(default_factory=frozenset)


def number_value(key: str, node: exp.Expression) -> float:
    sign = 1.0
    while isinstance(node, (exp.Neg, exp.Paren)):
        if isinstance(node, exp.Neg):
            sign = -sign
        node = node.this
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            value = float(node.this)
        except ValueError:
            raise OptionError(f"option '{key}' must be a number, got {node.sql()}") from None
        return sign * value
    if isinstance(node, exp.Literal) and node.is_string:
        # 'nan' / 'inf' written as strings are still numbers the user meant; reject them by name.
        text = node.this.strip().lower()
        if text in ("nan", "inf", "+inf", "-inf", "infinity", "-infinity"):
            raise OptionError(f"option '{key}' must be a finite number, got '{node.this}'")
        raise OptionError(f"option '{key}' must be a number, got the string '{node.this}'")
    if isinstance(node, (exp.Column, exp.Var, exp.Identifier)) and node.name.lower() in (
        "nan",
        "inf",
        "infinity",
    ):
        raise OptionError(f"option '{key}' must be a finite number, got {node.name}")
    raise OptionError(f"option '{key}' must be a number, got {node.sql()}")


def _word(node: exp.Expression) -> str | None:
    """A word written bare or quoted (``laplace``, ``'laplace'``), lower-cased; None if not a word."""
    if isinstance(node, exp.Literal) and node.is_string:
        return str(node.this).strip().lower()
    if isinstance(node, (exp.Column, exp.Var, exp.Identifier)):
        return str(node.name).strip().lower()
    return None


def _string(key: str, node: exp.Expression, choices: t.Sequence[str]) -> str:
    value = _word(node)
    if value is None:
        raise OptionError(f"option '{key}' must be one of {', '.join(choices)}; got {node.sql()}")
    if value not in choices:
        raise OptionError(f"option '{key}' must be one of {', '.join(choices)}; got '{value}'"
                          + did_you_mean(value, choices))
    return value


def _boolean(key: str, node: exp.Expression) -> bool:
    """``true`` or ``false`` (also written as strings or 1 and 0)."""
    word = node.this if isinstance(node, exp.Boolean) or (isinstance(node, exp.Literal) and not node.is_string) \
        else _word(node)
    if word in (True, "true", "1"):
        return True
    if word in (False, "false", "0"):
        return False
    raise OptionError(f"option '{key}' must be true or false; got {node.sql()}")


_NAME = re.compile(r"[a-z_][a-z0-9_]*")


def _name(key: str, node: exp.Expression) -> str:
    """A word, written bare or quoted (``laplace``, ``'laplace'``), lower-cased."""
    value = _word(node)
    if value is None:
        raise OptionError(f"option '{key}' must be a name such as 'laplace'; got {node.sql()}")
    if not _NAME.fullmatch(value):
        raise OptionError(f"option '{key}' must be a name such as 'laplace'; got '{value}'")
    return value


def _literal(key: str, node: exp.Expression) -> t.Any:
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        return number_value(key, node)
    if isinstance(node, exp.Neg):
        return number_value(key, node)
    if isinstance(node, exp.Boolean):
        return node.this
    if isinstance(node, exp.Null):
        return None
    raise OptionError(f"option '{key}' holds {node.sql()}, which is not a literal")


def _keys(node: exp.Expression) -> tuple[tuple[t.Any, ...], ...]:
    if not isinstance(node, (exp.Array, exp.Tuple, exp.Paren)):
        raise OptionError("option 'keys' must be a list such as ['a', 'b'] or [('a', 1), ('b', 2)]")
    items = [node.this] if isinstance(node, exp.Paren) else list(node.expressions)
    out: list[tuple[t.Any, ...]] = []
    for item in items:
        if isinstance(item, (exp.Tuple, exp.Array)):
            out.append(tuple(_literal("keys", x) for x in item.expressions))
        elif isinstance(item, exp.Paren):
            out.append((_literal("keys", item.this),))
        else:
            out.append((_literal("keys", item),))
    if not out:
        raise OptionError("option 'keys' must list at least one key")
    if len({len(k) for k in out}) != 1:
        raise OptionError("option 'keys': every key must have the same number of parts")
    if len(set(out)) != len(out):
        raise OptionError("option 'keys' lists a key twice")
    return tuple(out)


def _finite(key: str, value: float) -> float:
    if math.isnan(value) or math.isinf(value):
        raise OptionError(f"option '{key}' must be a finite number, got {value}")
    return value


def integer_value(key: str, node: exp.Expression, least: int, most: int) -> int:
    """A whole-number option in [least, most]."""
    x = _finite(key, number_value(key, node))
    if x != int(x) or x < least:
        raise OptionError(f"option '{key}' must be an integer >= {least}, got {x:g}")
    if x > most:
        raise OptionError(f"option '{key}' must be at most {most}, got {int(x)}")
    return int(x)


#: Numeric options: whether a value is allowed, and how the message says what is.
_RANGES: dict[str, tuple[t.Callable[[float], bool], str]] = {
    "epsilon": (lambda x: x > 0, "> 0"),
    "rho": (lambda x: x > 0, "> 0"),
    "bound": (lambda x: x > 0, "> 0"),
    "delta": (lambda x: 0 <= x < 1, "in [0, 1)"),
    "confidence": (lambda x: 0 < x < 1, "in (0, 1)"),
}


def parse_options(items: t.Iterable[tuple[str, exp.Expression]]) -> Options:
    """Validate ``(key, value-node)`` pairs from :meth:`DPQuery.option_items`."""
    values: dict[str, t.Any] = {}
    for raw_key, node in items:
        key = raw_key.lower()
        if key in values:
            raise OptionError(f"option '{key}' is given twice")
        if key == "mechanism":
            values[key] = _name(key, node)
        elif key == "aggregator":
            values[key] = _string(key, node, AGGREGATORS)
        elif key == "noise":
            values[key] = _string(key, node, SMOOTH_NOISE)
        elif key == "bounds":
            if _word(node) not in FOUND_BOUNDS:
                raise OptionError(f"option 'bounds' must be 'auto' (bounds found privately), got {node.sql()}; "
                                  "numeric bounds go in the call: DP_SUM(x, 0, 100)")
            values[key] = _word(node)
        elif key in _RANGES:
            in_range, allowed = _RANGES[key]
            x = _finite(key, number_value(key, node))
            if not in_range(x):
                raise OptionError(f"option '{key}' must be {allowed}, got {x:g}")
            values[key] = x
        elif key == "chunks":
            values[key] = integer_value(key, node, 2, MAX_CHUNKS)
        elif key == "keys":
            values[key] = _keys(node)
        elif key == "contribution":
            values[key] = _string(key, node, CONTRIBUTION)
        elif key == "report_dropped":
            values[key] = _boolean(key, node)
        elif key in UNIT_BOUNDS:
            values[key] = integer_value(key, node, 1, MAX_UNIT_BOUND)
        elif key in ("max_rows", "max_join_rows"):
            values[key] = integer_value(key, node, 1, MAX_FACTOR)
        elif key.endswith("_truncation"):
            word = node.this if isinstance(node, exp.Literal) and node.is_string else None
            if word is None:
                raise OptionError(f"option '{key}' must be a string such as 'drop_excess(2)' or 'drop_non_unique'")
            values[key] = parse_truncation(word, f"option '{key}'")
        else:
            known = ", ".join(OPTION_KEYS)
            raise OptionError(f"unknown option '{raw_key}'{did_you_mean(raw_key, OPTION_KEYS)} (known: {known})")
    if "rho" in values and "epsilon" in values:
        raise OptionError("give either 'epsilon' or 'rho', not both")
    return Options(given=frozenset(values), **values)
