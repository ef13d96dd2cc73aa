"""SmartNoise SQL metadata (``PUMS.yaml`` and the like) read as a dpsql policy.

SmartNoise's metadata nests collection → schema → table → column. Each table becomes a policy
table named ``schema.table`` (SmartNoise's own queries say ``FROM PUMS.PUMS``; schema ``main``
or an empty schema gives the bare name); a column marked ``private_id`` is the privacy unit and
``max_ids`` its ``max_rows_per_unit``; ``lower`` and ``upper`` are column bounds. The metadata
holds no budget: the policy gets ε = 1, to be set with the ledger.
"""

from __future__ import annotations

import typing as t

from dpsql.errors import PolicyError


def looks_like_smartnoise(data: dict[str, t.Any]) -> bool:
    """Whether ``data`` has SmartNoise's shape (three levels of tables, no dpsql sections)."""
    if {"budget", "tables"} & set(data):
        return False

    def depth3(d: t.Any) -> bool:
        return isinstance(d, dict) and all(
            isinstance(s, dict) and all(isinstance(tb, dict) for tb in s.values())
            for s in d.values()
        )

    return bool(data) and all(depth3(v) for v in data.values())


def from_smartnoise(data: dict[str, t.Any]) -> dict[str, t.Any]:
    """The dpsql policy (as a dict, checked by the usual parser) of SmartNoise metadata."""
    tables: dict[str, dict[str, t.Any]] = {}
    for _collection, schemas in data.items():
        for schema, tables_spec in schemas.items():
            for tname, tspec in tables_spec.items():
                columns: dict[str, dict[str, t.Any]] = {}
                unit = "row"
                for cname, cspec in tspec.items():
                    if not isinstance(cspec, dict):
                        continue
                    if cspec.get("private_id"):
                        unit = cname.lower()
                    lower, upper = cspec.get("lower"), cspec.get("upper")
                    if lower is not None and upper is not None:
                        columns[cname.lower()] = {"lower": lower, "upper": upper}
                max_ids = tspec.get("max_ids", 1)
                if isinstance(max_ids, bool) or not isinstance(max_ids, int) or max_ids < 1:
                    raise PolicyError(f"{tname}.max_ids must be an integer >= 1")
                key = tname.lower() if schema.lower() in ("main", "") else f"{schema.lower()}.{tname.lower()}"
                tables[key] = {"privacy_unit": unit, "max_rows_per_unit": max_ids, "columns": columns}
    return {"budget": {"epsilon": 1.0}, "tables": tables}
