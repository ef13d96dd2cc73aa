"""Text and HTML tables for results and the budget: the CLI, the shell and notebooks share them.

Kept light (no pandas, no pyarrow) so that the command and the shell start quickly.
"""

from __future__ import annotations

import html
import math
import typing as t


def cell(value: t.Any) -> str:
    """One value as the tables show it: NULL, floats to 6 significant digits."""
    if value is None:
        return "NULL"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        return f"{value:.6g}" if abs(value) < 1e15 else f"{value:.6e}"
    return str(value)


def _numeric(rows: t.Sequence[t.Sequence[t.Any]], i: int) -> bool:
    return all(isinstance(r[i], (int, float)) and not isinstance(r[i], bool) for r in rows if r[i] is not None)


def render_table(columns: t.Sequence[str], rows: t.Sequence[t.Sequence[t.Any]],
                 types: t.Sequence[str] | None = None) -> str:
    """A box-drawn table like DuckDB's CLI: numbers right-aligned, text left-aligned; with
    ``types``, each column's type on a second header line, under its name."""
    cells = [[cell(v) for v in row] for row in rows]
    widths = [len(c) for c in columns]
    if types is not None:
        widths = [max(w, len(ty)) for w, ty in zip(widths, types)]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row)]
    numeric = [_numeric(rows, i) for i in range(len(columns))]

    def line(left: str, mid: str, right: str) -> str:
        return left + mid.join("─" * (w + 2) for w in widths) + right

    def fmt_row(values: list[str], align_numbers: bool) -> str:
        parts = []
        for v, w, num in zip(values, widths, numeric):
            parts.append(" " + (v.rjust(w) if (num and align_numbers) else v.ljust(w)) + " ")
        return "│" + "│".join(parts) + "│"

    out = [line("┌", "┬", "┐"), fmt_row(list(columns), False)]
    if types is not None:
        out.append(fmt_row(list(types), False))
    out.append(line("├", "┼", "┤"))
    out += [fmt_row(r, True) for r in cells]
    out.append(line("└", "┴", "┘"))
    if not rows:
        out.append("(0 rows)")
    return "\n".join(out)


def html_table(columns: t.Sequence[str], rows: t.Sequence[t.Sequence[t.Any]], caption: str = "") -> str:
    """An HTML table (escaped), numbers right-aligned, as notebooks show it."""
    numeric = [_numeric(rows, i) for i in range(len(columns))]
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
    body = []
    for row in rows:
        tds = "".join(
            f'<td style="text-align: right">{html.escape(cell(v))}</td>' if num else f"<td>{html.escape(cell(v))}</td>"
            for v, num in zip(row, numeric)
        )
        body.append(f"<tr>{tds}</tr>")
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f'<table class="dataframe">{cap}<thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def html_lines(lines: t.Sequence[str]) -> str:
    """Lines of text under a table (the privacy report), each escaped."""
    if not lines:
        return ""
    text = "<br>".join(html.escape(line) for line in lines)
    return f'<div style="font-family: monospace; font-size: 0.9em; margin-top: 0.4em">{text}</div>'
