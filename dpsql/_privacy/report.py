"""What a release reports: one :class:`ReportEntry` per released column, and number formatting.

Kept apart from the mechanisms so that results can be shown without importing them.
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass


@dataclass
class ReportEntry:
    """What was spent on one released column, and how accurate it is."""

    column: str
    mechanism: str
    epsilon: float
    delta: float = 0.0
    rho: float = 0.0
    sensitivity: float | None = None
    scale: float | None = None
    distribution: str = ""
    ci_half_width: float | None = None
    note: str = ""
    #: the privacy unit and its bounds, e.g. "per patient_id, ≤ 5 rows" (empty for a row unit)
    unit: str = ""

    def as_dict(self) -> dict[str, t.Any]:
        return dict(self.__dict__)



def fmt(x: float | None) -> str:
    if x is None:
        return "-"
    if x == 0 or (1e-3 <= abs(x) < 1e6):
        return f"{x:.6g}"
    return f"{x:.3e}"
