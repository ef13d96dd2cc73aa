"""The policy's ``[defaults]`` section: what a data owner opts into for SQL as BI tools write it.

::

    [defaults]
    epsilon = 0.1                 # spent by a query that gives no WITH (epsilon = ...) (or rho = ...)
    delta = 1e-7                  # added too, unless the query gives its own delta
    # rho = 0.005                 # instead of epsilon: a default zCDP spend
    plain_aggregates = true       # COUNT/SUM/AVG/... over private tables become DP aggregates
    reuse_releases = "forever"    # or a duration ("90s", "15m", "1h", "7d") or "off"
    bounds = "auto"               # an aggregate without bounds finds them privately (docs/bounds.md)

Every key is optional. Without the section, a query must give its budget and use DP
aggregates (as before), and an identical query reuses its earlier release for ever
(``reuse_releases = "forever"``, see docs/choices.md).
"""

from __future__ import annotations

import math
import re
import typing as t
from dataclasses import dataclass

from dpsql.errors import PolicyError

__all__ = ["Defaults", "parse_defaults", "parse_duration", "FOREVER"]

#: ``reuse_releases = "forever"``: a release is reused however old it is
FOREVER = math.inf

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhd])\s*")


@dataclass(frozen=True)
class Defaults:
    """The policy's ``[defaults]``; see the module docstring."""

    epsilon: float | None = None
    delta: float | None = None
    rho: float | None = None
    plain_aggregates: bool = False
    #: seconds for which an identical query reuses an earlier release: ``FOREVER``, or 0 (off)
    reuse_seconds: float = FOREVER
    #: ``"auto"``: a DP aggregate over a column without bounds finds them privately, spending a
    #: share of its budget (``dpsql._privacy.approx_bounds``); None: such an aggregate is refused
    bounds: str | None = None

    @property
    def budget_given(self) -> bool:
        """Whether the section gives a default budget for queries that give none."""
        return self.epsilon is not None or self.rho is not None

    @property
    def reuse_text(self) -> str:
        """The knob as written: ``forever``, ``off`` or a duration in seconds."""
        if self.reuse_seconds == FOREVER:
            return "forever"
        if self.reuse_seconds == 0:
            return "off"
        return f"{self.reuse_seconds:g}s"


def parse_duration(where: str, value: t.Any) -> float:
    """``"forever"`` → :data:`FOREVER`, ``"off"`` → 0, ``"90s"`` / ``"15m"`` / ``"1h"`` / ``"7d"`` → seconds."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "forever":
            return FOREVER
        if text == "off":
            return 0.0
        m = _DURATION.fullmatch(text)
        if m:
            seconds = float(m.group(1)) * _UNITS[m.group(2)]
            if seconds > 0 and math.isfinite(seconds):
                return seconds
    raise PolicyError(f"{where} must be \"forever\", \"off\" or a duration such as \"30s\", \"15m\", "
                      f"\"1h\", \"7d\"; got {value!r}")


def _positive(where: str, value: t.Any, *, below_one: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise PolicyError(f"{where} must be a finite number, got {value!r}")
    if below_one and not 0 <= value < 1:
        raise PolicyError(f"{where} must be in [0, 1), got {value:g}")
    if not below_one and value <= 0:
        raise PolicyError(f"{where} must be > 0, got {value:g}")
    return float(value)


def parse_defaults(spec: t.Any) -> Defaults:
    """The ``[defaults]`` table of a policy (a dict), checked key by key."""
    if not isinstance(spec, dict):
        raise PolicyError("defaults must be a table of settings")
    known = ("epsilon", "delta", "rho", "plain_aggregates", "reuse_releases", "bounds")
    unknown = set(spec) - set(known)
    if unknown:
        raise PolicyError(f"defaults: unknown key '{sorted(unknown)[0]}' (known: {', '.join(known)})")
    eps = _positive("defaults.epsilon", spec["epsilon"]) if "epsilon" in spec else None
    rho = _positive("defaults.rho", spec["rho"]) if "rho" in spec else None
    delta = _positive("defaults.delta", spec["delta"], below_one=True) if "delta" in spec else None
    if eps is not None and rho is not None:
        raise PolicyError("defaults: give epsilon (and delta) or rho, not both")
    if delta is not None and eps is None and rho is None:
        raise PolicyError("defaults.delta needs defaults.epsilon (or defaults.rho)")
    plain = spec.get("plain_aggregates", False)
    if not isinstance(plain, bool):
        raise PolicyError("defaults.plain_aggregates must be true or false")
    reuse = parse_duration("defaults.reuse_releases", spec["reuse_releases"]) \
        if "reuse_releases" in spec else FOREVER
    bounds = spec.get("bounds")
    if bounds is not None and bounds != "auto":
        raise PolicyError(f"defaults.bounds must be \"auto\" (bounds found privately), got {bounds!r}")
    return Defaults(epsilon=eps, delta=delta, rho=rho, plain_aggregates=plain, reuse_seconds=reuse, bounds=bounds)
