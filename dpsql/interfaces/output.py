"""Rendering results as aligned tables, CSV or JSON (shared by the CLI and the REPL)."""

from __future__ import annotations

import csv
import io
import json
import math
import typing as t

FORMATS = ("table", "csv", "json")


def _cell(value: t.Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        return f"{value:.6g}" if abs(value) < 1e15 else f"{value:.6e}"
    return str(value)


def render_table(columns: list[str], rows: list[tuple[t.Any, ...]]) -> str:
    """A box-drawn table like DuckDB's CLI: numbers right-aligned, text left-aligned."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [len(c) for c in columns]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row)]
    numeric = [
        all(isinstance(r[i], (int, float)) and not isinstance(r[i], bool) for r in rows if r[i] is not None)
        for i in range(len(columns))
    ]

    def line(left: str, mid: str, right: str) -> str:
        return left + mid.join("─" * (w + 2) for w in widths) + right

    def fmt_row(values: list[str], align_numbers: bool) -> str:
        parts = []
        for v, w, num in zip(values, widths, numeric):
            parts.append(" " + (v.rjust(w) if (num and align_numbers) else v.ljust(w)) + " ")
        return "│" + "│".join(parts) + "│"

    out = [line("┌", "┬", "┐"), fmt_row(columns, False), line("├", "┼", "┤")]
    out += [fmt_row(r, True) for r in cells]
    out.append(line("└", "┴", "┘"))
    if not rows:
        out.append("(0 rows)")
    return "\n".join(out)


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
