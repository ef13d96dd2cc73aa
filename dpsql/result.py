"""``Result``: what a query returns — rows that behave like a DuckDB relation, plus a report."""

from __future__ import annotations

import gc
import typing as t

from dpsql._accounting.budget import Cost
from dpsql._privacy.report import ReportEntry, fmt
from dpsql.backends.output import OneRow
from dpsql.display import html_lines, html_table, render_table
from dpsql.errors import Error

#: rows a Result shows in its text and HTML forms (all of them are in fetchall(), df(), ...)
SHOWN_ROWS = 40

if t.TYPE_CHECKING:
    import pyarrow as pa


class Result:
    """The (already noisy) answer of a query.

    ``report`` has one :class:`ReportEntry` per released DP aggregate; it is empty for queries
    on public tables. ``cost`` is what the query charged to the ledger. ``sources`` maps each
    output column to the index of the report entry of the DP aggregate it shows as released
    (``None`` for group keys and for expressions computed from the noisy values, whose
    accuracy the report does not give). A report entry of grouped output gives the widest
    interval over the groups; :meth:`intervals` and ``df(intervals=True)`` give each row's own.

    ``table`` is an Arrow table, or the one row of an ungrouped release
    (:class:`~dpsql.backends.output.OneRow`), made an Arrow table the first time ``table`` is
    read: the rows, columns and length are answered from the row itself.
    """

    def __init__(
        self,
        table: "pa.Table | OneRow",
        report: list[ReportEntry] | None = None,
        cost: Cost | None = None,
        notes: list[str] | None = None,
        confidence: float = 0.95,
        sources: list[int | None] | None = None,
        widths: list[list[float]] | None = None,
    ) -> None:
        self._table = table
        self.report: list[ReportEntry] = report if report is not None else []
        self.cost = cost if cost is not None else Cost()
        self.notes: list[str] = notes if notes is not None else []
        #: the level of the report's intervals (the query's ``confidence`` option)
        self.confidence = confidence
        self.sources: list[int | None] = sources if sources is not None else []
        #: per report entry, the half-width of each row's interval (NaN: none); empty when
        #: unknown, and then every row reads its entry's ``ci_half_width``
        self.widths: list[list[float]] = widths if widths is not None else []
        self._cursor = 0
        self._relation_connection: t.Any = None

    @property
    def table(self) -> "pa.Table":
        """The rows as an Arrow table."""
        if isinstance(self._table, OneRow):
            self._table = self._table.to_arrow()
        return self._table

    @property
    def columns(self) -> list[str]:
        return list(self._table.column_names)

    @property
    def rowcount(self) -> int:
        return self._table.num_rows

    def _rows(self) -> list[tuple[t.Any, ...]]:
        if isinstance(self._table, OneRow):
            return self._table.rows()
        cols = [_pylist(self._table.column(i)) for i in range(self._table.num_columns)]
        if not cols:
            return []
        # 100,000 new tuples set off the cyclic collector several times (half the time spent);
        # tuples of numbers and strings hold no cycles, so it waits until they are built
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return list(zip(*cols))
        finally:
            if was_enabled:
                gc.enable()

    def fetchall(self) -> list[tuple[t.Any, ...]]:
        """All remaining rows as tuples (like ``duckdb``'s ``fetchall``)."""
        rows = self._rows()[self._cursor:]
        self._cursor = self.rowcount
        return rows

    def fetchone(self) -> tuple[t.Any, ...] | None:
        rows = self._rows()
        if self._cursor >= len(rows):
            return None
        self._cursor += 1
        return rows[self._cursor - 1]

    def fetchmany(self, size: int = 1) -> list[tuple[t.Any, ...]]:
        rows = self._rows()[self._cursor:self._cursor + size]
        self._cursor += len(rows)
        return rows

    def arrow(self) -> pa.Table:
        return self.table

    def df(self, intervals: bool = False) -> t.Any:
        """A pandas DataFrame; its ``attrs["dpsql_report"]`` holds the report, one dict per entry.

        With ``intervals=True``, each column that is a DP aggregate as released is followed by
        ``<column>_ci``: the half-width of each row's confidence interval at the query's
        ``confidence`` level (a group's own: a mean's depends on its noisy count; NaN where the
        mechanism gives none). Columns computed from the noisy values get no interval.
        """
        frame = self.table.to_pandas()
        frame.attrs["dpsql_report"] = self.report_dicts()
        if not intervals:
            return frame
        for k in reversed(range(len(self.columns))):
            entry = self.entry_of(k)
            if entry is None:
                continue
            name = f"{self.columns[k]}_ci"
            if name in self.columns:
                raise Error(f"df(intervals=True): the result already has a column {name}")
            frame.insert(k + 1, name, self.intervals(k))
        return frame

    def intervals(self, column: int | str) -> list[float]:
        """The half-width of each row's confidence interval for ``column`` (a position or a name)
        at the query's ``confidence`` level; NaN where there is none (a key, a value computed from
        the noisy ones, a mechanism that gives no interval)."""
        k = self.columns.index(column) if isinstance(column, str) else column
        j = self.sources[k] if k < len(self.sources) else None
        if j is not None and j < len(self.widths) and len(self.widths[j]) == self.rowcount:
            return [float(w) for w in self.widths[j]]
        entry = self.report[j] if j is not None else None
        width = entry.ci_half_width if entry is not None else None
        return [float("nan") if width is None else float(width)] * self.rowcount

    def within_noise(self, column: int | str) -> list[bool]:
        """For each row, whether ``column``'s released value is no farther from 0 than its
        interval's half-width: nothing tells it from 0, as for a group that is small or empty
        (a count clamped at 0, a negative sum of non-negative values, a mean at a bound).
        Computed from the released values and their widths only; False without an interval.

        >>> from dpsql.backends.output import OneRow
        >>> r = Result(OneRow(["n"], [3.0]), sources=[None])
        >>> r.within_noise("n")
        [False]
        """
        k = self.columns.index(column) if isinstance(column, str) else column
        values = (self._table.rows()[0][k:k + 1] if isinstance(self._table, OneRow)
                  else _pylist(self._table.column(k)))
        return [isinstance(v, (int, float)) and not isinstance(v, bool) and w == w and abs(v) <= w
                for v, w in zip(values, self.intervals(k))]

    def _within_noise_of(self, entry: int) -> list[bool]:
        """within_noise of the first output column that shows report entry ``entry``."""
        k = next((k for k, src in enumerate(self.sources) if src == entry), None)
        return [] if k is None else self.within_noise(k)

    def plot(self, columns: t.Sequence[str] | None = None, title: str | None = None) -> t.Any:
        """A chart of the released values with their confidence intervals as error bars (bars by
        group, or a line over an ordered key); returns the :class:`matplotlib.figure.Figure`
        (matplotlib is the ``plot`` extra). ``columns``: the value columns to draw."""
        from dpsql.plot import result_chart

        return result_chart(self, self._rows(), columns, title)

    def entry_of(self, column: int | str) -> ReportEntry | None:
        """The report entry of output column ``column`` (a position or a name), or None if the
        column is not a DP aggregate as released."""
        k = self.columns.index(column) if isinstance(column, str) else column
        j = self.sources[k] if k < len(self.sources) else None
        return self.report[j] if j is not None else None

    def report_dicts(self) -> list[dict[str, t.Any]]:
        """The report as plain dicts, each with its confidence level and the output columns it
        describes."""
        out = []
        for j, entry in enumerate(self.report):
            columns = [c for c, src in zip(self.columns, self.sources) if src == j]
            flags = self._within_noise_of(j)
            out.append({**entry.as_dict(), "confidence": self.confidence, "output_columns": columns,
                        "within_noise_rows": [i for i, flag in enumerate(flags) if flag]})
        return out

    def pl(self) -> t.Any:
        """A polars DataFrame (needs polars installed)."""
        try:
            import polars
        except ImportError:
            raise Error("Result.pl() needs polars: pip install polars") from None
        return polars.from_arrow(self.table)

    def relation(self, connection: t.Any = None) -> t.Any:
        """A DuckDB relation over the (noisy) rows, on ``connection`` or a fresh in-memory one."""
        import duckdb

        con = connection if connection is not None else duckdb.connect()
        if connection is None:
            # DuckDB 1.x closes a connection nothing refers to, and its relations with it
            self._relation_connection = con
        return con.from_arrow(self.table)

    @property
    def description(self) -> list[tuple[t.Any, ...]]:
        return [(name, str(self.table.schema.field(name).type), None, None, None, None, None) for name in self.columns]

    def report_lines(self) -> list[str]:
        """One line per released column: mechanism, spend, ± half-width at the confidence level,
        and for an id privacy unit the bounds it was released under ("per patient_id, ≤ 5 rows")."""
        lines = []
        for j, e in enumerate(self.report):
            spend = f"ε={fmt(e.epsilon)}"
            if e.delta:
                spend += f", δ={e.delta:g}"
            if e.rho:
                spend = f"ρ={fmt(e.rho)}"
            level = f"{100 * self.confidence:g}%"
            ci = f"±{fmt(e.ci_half_width)} ({level})" if e.ci_half_width is not None else "no interval"
            extra = "".join(f"; {part}" for part in (e.unit, self._noise_note(j), e.note) if part)
            lines.append(f"{e.column}: {e.mechanism}, {spend}, {ci}{extra}")
        return lines

    def _noise_note(self, entry: int) -> str:
        """The report's flag for values that cannot be told from 0 (see :meth:`within_noise`);
        their rows are in ``df().attrs["dpsql_report"]``'s ``within_noise_rows``."""
        flags = self._within_noise_of(entry)
        n = sum(flags)
        if not n:
            return ""
        if len(flags) == 1:
            return "within noise of 0: the value is smaller than its interval (few or no rows)"
        return f"{n} of {len(flags)} groups within noise of 0 (few or no rows; df().attrs lists them)"

    def __iter__(self) -> t.Iterator[tuple[t.Any, ...]]:
        return iter(self._rows())

    def __len__(self) -> int:
        return self.rowcount

    # -- display -----------------------------------------------------------------------------

    def _shown(self) -> tuple[list[tuple[t.Any, ...]], str]:
        rows = self._rows()
        more = f"{len(rows)} rows, the first {SHOWN_ROWS} shown" if len(rows) > SHOWN_ROWS else ""
        return rows[:SHOWN_ROWS], more

    def __repr__(self) -> str:
        """The rows as a table (like the ``dpsql`` command), then the report, one line each."""
        if self.columns == ["explain"]:
            return "\n".join(str(row[0]) for row in self._rows())
        rows, more = self._shown()
        lines = [render_table(self.columns, rows)] + ([f"({more})"] if more else [])
        lines += [f"-- {line}" for line in [*self.report_lines(), *self.notes]]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        """The rows as an HTML table with the report under it (Jupyter shows this)."""
        import html

        if self.columns == ["explain"]:
            return f"<pre>{html.escape(repr(self))}</pre>"
        rows, more = self._shown()
        return html_table(self.columns, rows) + html_lines(
            ([f"({more})"] if more else []) + [*self.report_lines(), *self.notes])


def _pylist(column: "pa.ChunkedArray") -> list[t.Any]:
    """A column as Python values: through numpy for numbers without NULLs (the same ints and
    floats, faster for many rows), else by Arrow."""
    import pyarrow as pa

    kind = column.type
    if not column.null_count and (pa.types.is_integer(kind) or pa.types.is_floating(kind)
                                  or pa.types.is_boolean(kind)):
        return column.to_numpy().tolist()
    return column.to_pylist()
