"""How joins and flat maps change what one protected change can reach (seed 004, SPEC §6).

A DP aggregate's sensitivity is a per-row sensitivity (SPEC §4.1) times the number of rows of
its input that one protected change can alter. For a table whose privacy unit is a row, with
``max_rows_per_unit`` = m (Tumult's AddMaxRows(m)), that number starts at m and grows through
the FROM clause:

* **flat map** (``UNNEST``) of at most F elements per row: each changed row becomes at most
  F rows, so the number is multiplied by F (the bound, not the actual count of elements: the
  actual count is data). The rewrite cuts every list to F elements, so F holds.
* **public join** on keys where the public table holds at most M rows per key: each changed
  private row meets at most M public rows (or, in a LEFT JOIN, one row of NULLs), so the
  number is multiplied by M. M is read from the public table when the query is planned (it
  is public) or given by the query; either way the rewrite keeps at most M rows per key of
  the public table, so M holds even if the table changes in between.
* **semi and anti joins** and ``IN (SELECT ... FROM public)``: a filter; no factor.
* **private join** of two private tables, each truncated by a :class:`Truncation` on its join
  key: with T the rows a side keeps per key, S the strategy's stability and R the rows of the
  side that one protected change alters, the join's output changes by at most
  ``T_left·S_right·R_right + T_right·S_left·R_left`` rows (seed 004, "Private joins"). One
  protected change may touch both sides (a person in both tables), hence the sum: a change of
  R_left truncated rows of the left side (at most S_left·R_left rows after truncation) meets
  at most T_right rows each, and symmetrically. In a ``LEFT JOIN`` a left row whose matches
  all leave keeps one row of NULLs instead (and one that gains its first match loses it): a
  change of the right side alters up to two joined rows per left row, so the right side counts
  with stability 2 whatever its strategy (drop_non_unique's 1 undercounts: one more right row
  under a unique key turns its T_left joined rows into T_left rows of NULLs, 2·T_left changes).

For a table whose privacy unit is an id column (AddRowsWithID), joins and flat maps do not
change the protected change: every joined row carries the unit of its private row, and the
rewrite truncates each unit's rows *after* the joins (see :mod:`dpsql._policy.units`). Two
such tables may be joined only when they share the unit (policy ``unit_name``) and the join
equates their unit columns; no truncation strategy is needed then.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dpsql.errors import OptionError

#: The largest truncation threshold, list length or join multiplicity a query may give.
MAX_FACTOR = 1_000_000

_EXCESS = re.compile(r"drop_?excess\s*\(\s*(\d+)\s*\)")
_NON_UNIQUE = re.compile(r"drop_?non_?unique(\s*\(\s*\))?")


@dataclass(frozen=True)
class Truncation:
    """A truncation strategy for one side of a private join (Tumult's two).

    * ``drop_excess(k)``: keep at most k rows per join key (the k of smallest row hash).
      Threshold T = k; stability S = 2: adding a row to a key can push out one kept row, so
      the kept rows change by two.
    * ``drop_non_unique``: keep a key's row only when the key has exactly one row.
      T = 1; S = 1: adding a row either adds itself (a new key) or removes the key's one kept
      row (a second row for it), never both.
    """

    name: str
    threshold: int

    @property
    def stability(self) -> int:
        return 2 if self.name == "drop_excess" else 1

    def __str__(self) -> str:
        return f"drop_excess({self.threshold})" if self.name == "drop_excess" else "drop_non_unique"


def parse_truncation(text: str, where: str) -> Truncation:
    """``drop_excess(k)`` or ``drop_non_unique`` (also ``DropExcess(k)``, ``DropNonUnique``)."""
    value = text.strip().lower()
    m = _EXCESS.fullmatch(value)
    if m:
        k = int(m.group(1))
        if not 1 <= k <= MAX_FACTOR:
            raise OptionError(f"{where}: drop_excess(k) needs 1 <= k <= {MAX_FACTOR}, got {k}")
        return Truncation("drop_excess", k)
    if _NON_UNIQUE.fullmatch(value):
        return Truncation("drop_non_unique", 1)
    raise OptionError(f"{where} must be 'drop_excess(k)' or 'drop_non_unique', got '{text}'")


def right_stability(right: Truncation, left_join: bool = False) -> int:
    """S_right in the join's bound: the strategy's stability, and at least 2 in a LEFT JOIN."""
    return max(right.stability, 2) if left_join else right.stability


def private_join_rows(left: Truncation, right: Truncation, rows_left: int, rows_right: int,
                      left_join: bool = False) -> int:
    """Rows of a private join's output that one protected change alters:
    ``T_left·S_right·R_right + T_right·S_left·R_left`` (seed 004), with S_right from
    :func:`right_stability`."""
    return (left.threshold * right_stability(right, left_join) * rows_right
            + right.threshold * left.stability * rows_left)
