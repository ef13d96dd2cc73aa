"""Rendering results as aligned tables, CSV or JSON (shared by the CLI and the REPL)."""

from __future__ import annotations

import csv
import io
import json
import math
import typing as t

from dpsql.display import render_table

__all__ = ["FORMATS", "render", "render_csv", "render_json", "render_table"]

FORMATS = ("table", "csv", "json")


def render_csv(columns: list[str], rows: list[tuple[t.Any, ...]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if v is None else v for v in row])
    return buf.getvalue().rstrip("\n")


def _json_value(value: t.Any) -> t.Any:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    return str(value)


def render_json(columns: list[str], rows: list[tuple[t.Any, ...]]) -> str:
    """A JSON list of row objects."""
    return json.dumps([{c: _json_value(v) for c, v in zip(columns, row)} for row in rows], indent=2)


def render(fmt: str, columns: list[str], rows: list[tuple[t.Any, ...]]) -> str:
    if fmt == "csv":
        return render_csv(columns, rows)
    if fmt == "json":
        return render_json(columns, rows)
    return render_table(columns, rows)
