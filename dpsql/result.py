"""``Result``: what a query returns — rows that behave like a DuckDB relation, plus a report."""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field

from dpsql.privacy.budget import Cost
from dpsql.privacy.report import ReportEntry, fmt

if t.TYPE_CHECKING:
    import pyarrow as pa


@dataclass
class Result:
    """The (already noisy) answer of a query.

    ``report`` has one :class:`ReportEntry` per released DP column; it is empty for queries on
    public tables. ``cost`` is what the query charged to the ledger.
    """

    table: pa.Table
    report: list[ReportEntry] = field(default_factory=list)
    cost: Cost = field(default_factory=Cost)
    notes: list[str] = field(default_factory=list)
    #: the level of the report's intervals (the query's ``confidence`` option)
    confidence: float = 0.95
    _cursor: int = 0

    @property
    def columns(self) -> list[str]:
        return list(self.table.column_names)

    @property
    def rowcount(self) -> int:
        return self.table.num_rows

    def _rows(self) -> list[tuple[t.Any, ...]]:
        cols = [self.table.column(i).to_pylist() for i in range(self.table.num_columns)]
        return list(zip(*cols)) if cols else []

    def fetchall(self) -> list[tuple[t.Any, ...]]:
        """All remaining rows as tuples (like ``duckdb``'s ``fetchall``)."""
        rows = self._rows()[self._cursor:]
        self._cursor = self.table.num_rows
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

    def df(self) -> t.Any:
        """A pandas DataFrame."""
        return self.table.to_pandas()

    def pl(self) -> t.Any:
        """A polars DataFrame (needs polars installed)."""
        try:
            import polars
        except ImportError:
            from dpsql.errors import Error

            raise Error("Result.pl() needs polars: pip install polars") from None
        return polars.from_arrow(self.table)

    def relation(self, connection: t.Any = None) -> t.Any:
        """A DuckDB relation over the (noisy) rows, on ``connection`` or a fresh in-memory one."""
        import duckdb

        con = connection if connection is not None else duckdb.connect()
        return con.from_arrow(self.table)

    @property
    def description(self) -> list[tuple[t.Any, ...]]:
        return [(name, str(self.table.schema.field(name).type), None, None, None, None, None) for name in self.columns]

    def report_lines(self) -> list[str]:
        """One line per released column: mechanism, spend, ± half-width at the confidence level,
        and for an id privacy unit the bounds it was released under ("per patient_id, ≤ 5 rows")."""
        lines = []
        for e in self.report:
            spend = f"ε={fmt(e.epsilon)}"
            if e.delta:
                spend += f", δ={e.delta:g}"
            if e.rho:
                spend = f"ρ={fmt(e.rho)}"
            level = f"{100 * self.confidence:g}%"
            ci = f"±{fmt(e.ci_half_width)} ({level})" if e.ci_half_width is not None else "no interval"
            extra = "".join(f"; {part}" for part in (e.unit, e.note) if part)
            lines.append(f"{e.column}: {e.mechanism}, {spend}, {ci}{extra}")
        return lines

    def __iter__(self) -> t.Iterator[tuple[t.Any, ...]]:
        return iter(self._rows())

    def __len__(self) -> int:
        return self.table.num_rows

    def __repr__(self) -> str:
        return f"Result(columns={self.columns}, rows={self.table.num_rows}, cost={self.cost})"
