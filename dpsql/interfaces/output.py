"""Rendering results as aligned tables, CSV or JSON (shared by the CLI and the REPL)."""

from __future__ import annotations

import csv
import io
import json
import math
import typing as t

from dpsql.display import render_table

__all__ = ["FORMATS", "render", "render_csv", "render_json", "render_result", "render_table", "type_name"]

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


#: Arrow's names of the types results hold → the names DuckDB's CLI shows under a column
_TYPE_NAMES = {"string": "varchar", "large_string": "varchar", "string_view": "varchar", "bool": "boolean",
               "date32[day]": "date", "float": "float", "halffloat": "float", "binary": "blob",
               "large_binary": "blob"}


def type_name(arrow_type: t.Any) -> str:
    """The name DuckDB's CLI gives the Arrow type of a result column: ``int64``, ``double``,
    ``varchar``, ``decimal(38,0)``, ``timestamp``, ``int64[]``, ..."""
    text = str(arrow_type)
    if text.startswith(("list<", "large_list<")):
        return type_name(arrow_type.value_type) + "[]"
    if text.startswith("decimal"):
        return "decimal" + text[text.index("("):].replace(" ", "")
    if text.startswith("timestamp"):
        return "timestamp with time zone" if "tz=" in text else "timestamp"
    return _TYPE_NAMES.get(text, text)


def render_result(fmt: str, result: t.Any, *, types: bool = False, max_rows: int = 0) -> str:
    """A result's rows in ``fmt``; in table mode with its column types under the names
    (``types``) and at most ``max_rows`` rows (0: all), saying how many there are."""
    rows = result.fetchall()
    if fmt != "table":
        return render(fmt, result.columns, rows)
    shown = rows[:max_rows] if max_rows and len(rows) > max_rows else rows
    names = [type_name(f.type) for f in result.table.schema] if types else None
    text = render_table(result.columns, shown, types=names)
    if len(shown) < len(rows):
        text += f"\n({len(rows)} rows, the first {len(shown)} shown; .maxrows changes how many)"
    return text


def render(fmt: str, columns: list[str], rows: list[tuple[t.Any, ...]]) -> str:
    if fmt == "csv":
        return render_csv(columns, rows)
    if fmt == "json":
        return render_json(columns, rows)
    return render_table(columns, rows)
