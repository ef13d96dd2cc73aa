"""``BudgetStatus``: the budget a connection's ledger holds (total, spent, remaining, history),
shown as tables in a terminal and a notebook and drawn by :meth:`BudgetStatus.plot`."""

from __future__ import annotations

import typing as t
from dataclasses import dataclass

from dpsql._accounting.budget import Cost, format_cost
from dpsql._accounting.ledger import BudgetLedger, Entry
from dpsql.display import html_lines, html_table, render_table


@dataclass(frozen=True)
class BudgetStatus:
    total: Cost
    spent: Cost
    remaining: Cost
    kind: str
    history: list[Entry]

    @classmethod
    def of(cls, ledger: BudgetLedger) -> "BudgetStatus":
        """What ``ledger`` records now."""
        spent = ledger.spent()
        return cls(total=ledger.budget.total, spent=spent, remaining=ledger.budget.remaining(spent),
                   kind=ledger.budget.kind, history=ledger.history())

    def __str__(self) -> str:
        return (
            f"spent {format_cost(self.spent, self.kind)} of {format_cost(self.total, self.kind)}; "
            f"remaining {format_cost(self.remaining, self.kind)}"
        )

    # -- display: a small table of total / spent / remaining, and the history ----------------

    def amounts(self) -> tuple[list[str], list[tuple[t.Any, ...]]]:
        """Columns and rows of the total, spent and remaining budget (ε and δ, or ρ)."""
        if self.kind == "zcdp":
            return ["budget", "ρ"], [(name, round(c.rho, 12)) for name, c in self._parts()]
        return ["budget", "ε", "δ"], [(name, round(c.epsilon, 12), c.delta) for name, c in self._parts()]

    def plot(self, title: str | None = None) -> t.Any:
        """The cumulative spend over time (ε and δ, or ρ), in total and per analyst where the
        ledger records who spent; returns the :class:`matplotlib.figure.Figure`."""
        from dpsql.plot import budget_chart

        return budget_chart(self, title)

    def _parts(self) -> list[tuple[str, Cost]]:
        return [("total", self.total), ("spent", self.spent), ("remaining", self.remaining)]

    def history_rows(self, width: int = 60) -> tuple[list[str], list[tuple[t.Any, ...]]]:
        """Columns and rows of the history: one row per charge, queries cut to ``width`` characters."""
        rows = []
        for entry in self.history:
            query = " ".join(entry.query.split())
            rows.append((entry.id, entry.time.astimezone().strftime("%H:%M:%S"), format_cost(entry.cost, self.kind),
                         entry.detail, query if len(query) <= width else query[:width - 1] + "…"))
        return ["#", "time", "cost", "mechanisms", "query"], rows

    def __repr__(self) -> str:
        lines = [render_table(*self.amounts())]
        if self.history:
            lines.append(render_table(*self.history_rows()))
        else:
            lines.append("no query has spent budget yet")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        history = html_table(*self.history_rows(), caption="history") if self.history else \
            html_lines(["no query has spent budget yet"])
        return html_table(*self.amounts()) + history

