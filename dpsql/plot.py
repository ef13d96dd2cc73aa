"""Charts of a result and of the budget (matplotlib, an optional extra, imported on first use).

* :func:`result_chart` (``Result.plot()``): each released DP column against the group keys, with
  its confidence interval as error bars: bars over categorical keys, a line with a band over an
  ordered key (numbers, dates), one bar per column for an ungrouped result. Values computed from
  the noisy ones (no report entry) are drawn without an interval.
* :func:`budget_chart` (``con.budget.plot()``): the cumulative spend over time, ε (and δ when any
  was spent) or ρ, in total and per analyst where the ledger records who spent.

Both draw on a :class:`matplotlib.figure.Figure` made without pyplot (no global state; safe in
the server's threads) and return it; IPython and Jupyter show it as a PNG.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import functools
import io
import typing as t

from dpsql.errors import Error

if t.TYPE_CHECKING:
    from matplotlib.figure import Figure

#: a Result and a BudgetStatus (not imported: they import this module)
Result = t.Any
BudgetStatus = t.Any

#: an ordered key with at least this many groups is drawn as a line
_LINE_FROM = 8


@functools.cache
def _chart_class() -> type:
    """matplotlib's Figure that shows itself as a PNG in IPython and Jupyter (a figure made
    without pyplot has no picture form unless the inline backend was switched on)."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise Error("plots need matplotlib: pip install 'dpsql[plot]'") from None

    class Chart(Figure):
        def _repr_png_(self) -> bytes:
            buffer = io.BytesIO()
            self.savefig(buffer, format="png", dpi=96)
            return buffer.getvalue()

    return Chart


def _figure(**kw: t.Any) -> "Figure":
    return t.cast("Figure", _chart_class()(**kw))


def _ordered(values: list[t.Any]) -> bool:
    """Whether keys are numbers or dates (drawn on a scale, in order), not categories."""
    kinds = (int, float, decimal.Decimal, _dt.date, _dt.datetime)
    return bool(values) and all(isinstance(v, kinds) and not isinstance(v, bool) for v in values)


def _label(row: tuple[t.Any, ...]) -> str:
    return " | ".join("NULL" if v is None else str(v) for v in row)


def _number(value: t.Any) -> float:
    return float("nan") if value is None else float(value)


def result_chart(result: Result, rows: list[tuple[t.Any, ...]], columns: t.Sequence[str] | None = None,
                 title: str | None = None) -> "Figure":
    """The chart of ``result`` with its ``rows`` (see the module's docstring); ``columns``: the
    value columns to draw (default: every DP aggregate as released, else every numeric column
    that is not a key)."""
    names = result.columns
    released = [n for k, n in enumerate(names) if result.entry_of(k) is not None]
    keys = [n for n in names if n not in released]
    if columns is None:
        columns = released or [n for n in names if rows and all(isinstance(r[names.index(n)], (int, float))
                                                               for r in rows)]
        keys = [n for n in keys if n not in columns]
    else:
        missing = [c for c in columns if c not in names]
        if missing:
            raise Error(f"plot: no column {missing[0]} in the result; its columns are {', '.join(names)}")
        keys = [n for n in keys if n not in columns]
    if not columns:
        raise Error("plot: the result has no numeric column to draw")
    fig = _figure(figsize=(7, 4), layout="constrained")
    ax = fig.add_subplot()
    key_rows = [tuple(r[names.index(k)] for k in keys) for r in rows]
    single = [r[0] for r in key_rows] if len(keys) == 1 else []
    if not keys:
        _bars_ungrouped(ax, result, columns, rows)
    elif single and _ordered(single) and len(single) >= _LINE_FROM:
        _lines(ax, result, columns, rows, single)
        ax.set_xlabel(keys[0])
    else:
        _bars(ax, result, columns, rows, [_label(r) for r in key_rows])
        ax.set_xlabel(" | ".join(keys))
    ax.set_title(title or _title(result))
    if len(columns) > 1 and keys:
        ax.legend()
    elif len(columns) == 1 and keys:
        ax.set_ylabel(columns[0])  # one value column: its name, where several get a legend
    return fig


def _title(result: Result) -> str:
    if not result.report:
        return "exact (public) values"
    return f"noisy values, {round(100 * result.confidence)}% intervals"


def _bars_ungrouped(ax: t.Any, result: Result, columns: t.Sequence[str], rows: list[tuple[t.Any, ...]]) -> None:
    values = [_number(rows[0][result.columns.index(c)]) if rows else float("nan") for c in columns]
    errors = [result.intervals(c)[0] if rows else float("nan") for c in columns]
    ax.bar(range(len(columns)), values, yerr=errors, capsize=4, color="C0")
    ax.set_xticks(range(len(columns)), columns)


def _bars(ax: t.Any, result: Result, columns: t.Sequence[str], rows: list[tuple[t.Any, ...]],
          labels: list[str]) -> None:
    width = 0.8 / len(columns)
    for j, name in enumerate(columns):
        k = result.columns.index(name)
        xs = [i + (j - (len(columns) - 1) / 2) * width for i in range(len(rows))]
        ax.bar(xs, [_number(r[k]) for r in rows], width=width, yerr=result.intervals(name), capsize=3,
               label=name, color=f"C{j}")
    ax.set_xticks(range(len(rows)), labels, rotation=45 if len(rows) > 6 else 0, ha="right" if len(rows) > 6 else "center")


def _lines(ax: t.Any, result: Result, columns: t.Sequence[str], rows: list[tuple[t.Any, ...]],
           xs: list[t.Any]) -> None:
    order = sorted(range(len(rows)), key=lambda i: xs[i])
    x = [xs[i] for i in order]
    for j, name in enumerate(columns):
        k = result.columns.index(name)
        y = [_number(rows[i][k]) for i in order]
        widths = result.intervals(name)
        err = [widths[i] for i in order]
        ax.plot(x, y, marker="o", markersize=3, label=name, color=f"C{j}")
        low = [a - e for a, e in zip(y, err)]
        high = [a + e for a, e in zip(y, err)]
        ax.fill_between(x, low, high, alpha=0.2, color=f"C{j}")


def budget_chart(status: BudgetStatus, title: str | None = None) -> "Figure":
    """The cumulative spend of ``status.history`` over time (see the module's docstring)."""
    entries = [e for e in status.history if e.cost.epsilon or e.cost.delta or e.cost.rho]
    parts = [("ρ", "rho")] if status.kind == "zcdp" else [("ε", "epsilon")]
    if status.kind != "zcdp" and any(e.cost.delta for e in entries):
        parts.append(("δ", "delta"))
    fig = _figure(figsize=(7, 3 * len(parts)), layout="constrained")
    axes = fig.subplots(len(parts), 1, sharex=True, squeeze=False)[:, 0]
    users = sorted({e.user for e in entries if e.user})
    for ax, (symbol, attr) in zip(axes, parts):
        total = float(getattr(status.total, attr))
        end = max((e.time for e in entries), default=None)
        _steps(ax, entries, attr, "all analysts" if users else "spent", "C0", end)
        for j, user in enumerate(users):
            _steps(ax, [e for e in entries if e.user == user], attr, user, f"C{j + 1}", end)
        if total and total != float("inf"):
            ax.axhline(total, color="grey", linestyle="--", linewidth=1, label=f"total {symbol} = {total:g}")
        ax.set_ylabel(f"cumulative {symbol}")
        ax.legend(loc="upper left")
    axes[0].set_title(title or f"privacy budget spent ({len(entries)} charges)")
    if entries:
        from matplotlib.dates import AutoDateLocator, ConciseDateFormatter

        locator = AutoDateLocator()
        axes[-1].xaxis.set_major_locator(locator)
        axes[-1].xaxis.set_major_formatter(ConciseDateFormatter(locator))
    if not entries:
        axes[0].text(0.5, 0.5, "no query has spent budget yet", transform=axes[0].transAxes, ha="center")
    return fig


def _steps(ax: t.Any, entries: list[t.Any], attr: str, label: str, color: str, end: t.Any) -> None:
    """One analyst's (or everyone's) cumulative spend as steps from 0 at their first charge to
    what they had spent by ``end``, the last charge of anyone: an analyst who stopped early
    keeps a level line to the right edge instead of ending where the others go on."""
    if not entries:
        return
    times, sums, acc = [], [], 0.0
    for e in entries:
        acc += float(getattr(e.cost, attr))
        times.append(e.time)
        sums.append(acc)
    ax.step([times[0], *times, end], [0.0, *sums, acc], where="post", label=label, color=color)
