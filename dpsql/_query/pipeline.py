"""The pipeline seam: text → prepared query → statistics SQL → exact rows → released table.

Every caller goes through these two steps, with the charge between them:

* :func:`prepare` parses, binds, plans and rewrites a query. It reads no data (only the
  catalog, through the engine) and charges nothing; refusals happen here.
* :func:`release` turns the exact rows the engine returned for ``prepared.sql`` into the noisy
  table (noise, report, post-processing). It runs after the budget is charged.

:class:`dpsql.Connection` wires them to a backend (:mod:`dpsql.backends.backend`) and the
ledger; EXPLAIN, the audit harness, the benchmarks and the tests use the same two functions.
"""

from __future__ import annotations

import functools
import typing as t
from dataclasses import dataclass, field

from dpsql.backends.output import OneRow
from dpsql.errors import OptionError

#: the column that carries each released group's position through post-processing
_ROW = "__row"
#: the keys of a public key domain that EXPLAIN lists
_SHOWN = 5
#: The refusal of a query whose bounds are found privately, where one statement is expected.
WAITING = ("this query finds its bounds privately: its statistics statement is written once they are found, "
           "after a first statement (see EXPLAIN); run it with Connection.sql()")

if t.TYPE_CHECKING:
    import pyarrow as pa

    from dpsql._compile.target import Target
    from dpsql._plan.plan import Plan
    from dpsql._plan.rewrite import Rewritten
    from dpsql._policy.policy import Policy
    from dpsql._privacy.noise import NoiseSource
    from dpsql._release.release import Released
    from dpsql._sql.bind import Bound
    from dpsql.backends.backend import Backend, Rows
    from dpsql.backends.columns import Statistics


@dataclass
class PreparedQuery:
    """A query parsed, bound, planned and rewritten: everything that happens before data is read."""

    text: str
    bound: "Bound"
    #: ``None`` for a public query (it runs as plain SQL and spends nothing)
    plan: "Plan | None" = None
    rewritten: "Rewritten | None" = None
    #: what the translation of BigQuery's form and the policy's ``[defaults]`` changed (plain
    #: aggregates mapped, a default budget added)
    rewrites: list[str] = field(default_factory=list)
    #: the statement after those changes, identifiers normalised and options left out (their
    #: validated values are in ``bound.options``): equal for queries that differ only in
    #: whitespace, keyword case or identifier case; see :mod:`dpsql.reuse`
    canonical: str = ""
    #: the engine's SQL target (:attr:`Backend.target <dpsql.backends.backend.Backend.target>`);
    #: None is DuckDB's
    target: "Target | None" = None
    #: bounds found privately (``plan.searches``): the histogram statement that runs first
    #: (:mod:`dpsql._release.found`); ``rewritten`` then holds the widest bounds until they are found
    search_sql: str = ""
    #: the policy it was planned under (the plan is made again with the bounds found)
    policy: "Policy | None" = field(default=None, repr=False, compare=False)

    @property
    def public(self) -> bool:
        return self.plan is None

    @property
    def explain(self) -> bool:
        """Whether the statement was ``EXPLAIN ...``."""
        return self.bound.explain

    @property
    def sql(self) -> str:
        """The statement to run: the statistics query, the public query itself, or for bounds
        found privately the histogram that runs first (:mod:`dpsql._release.found`)."""
        if self.search_sql:
            return self.search_sql
        if self.rewritten is not None:
            return self.rewritten.sql
        text = self.bound.query.sql(dialect="duckdb")
        return self.target.finish(text) if self.target is not None else text

    @functools.cached_property
    def report_sources(self) -> tuple[int | None, ...]:
        """For each output column, the index of the report entry of the DP aggregate it shows
        as released, or None (a group key, or an expression computed from the noisy values).
        Worked out once per prepared query: it depends on the statement alone."""
        from sqlglot import exp

        plan, outer = self.plan, self.bound.outer
        if plan is None or outer is None:
            return ()
        entry = {p.agg.index: j for j, p in enumerate(plan.prepared)}  # the report is in plan order
        sources: list[int | None] = []
        for proj in outer.expressions:
            expr = proj.this if isinstance(proj, exp.Alias) else proj
            name = expr.name if isinstance(expr, exp.Column) and not expr.table else ""
            index = int(name[3:]) if name.startswith("__a") and name[3:].isdigit() else None
            sources.append(entry.get(index) if index is not None else None)
        return tuple(sources)

    def explain_text(self) -> str:
        """Plan, budget split, sensitivities, noise scales and the rewritten SQL."""
        if self.plan is None or self.rewritten is None:
            return "public query (no private table): runs as plain DuckDB, spends nothing\n" + \
                self.bound.query.sql(dialect="duckdb", pretty=True)
        import sqlglot

        if self.target is None:
            pretty = sqlglot.transpile(self.rewritten.statement, read="duckdb", write="duckdb", pretty=True)[0]
        else:
            pretty = self.target.pretty(self.rewritten.statement)
        outer = self.plan.bound.outer
        assert outer is not None
        lines = ["DP query", *self.rewrites, *self.plan.explain_lines(), f"post-processing: {outer.sql(dialect='duckdb')}"]
        if self.search_sql:
            from dpsql._privacy.approx_bounds import K_MAX, WIDEST

            lines += ["bounds SQL (runs first; its counts get noise after the whole query is charged):",
                      self.target.pretty(self.search_sql) if self.target is not None else
                      sqlglot.transpile(self.search_sql, read="duckdb", write="duckdb", pretty=True)[0],
                      "rewritten SQL (written again with the bounds found; shown with the widest, "
                      f"±2^{K_MAX + 1} = ±{WIDEST[1]:.6g}):"]
        else:
            lines.append("rewritten SQL:")
        lines.append(pretty)
        from dpsql._sql.build import value_rows

        for name, domain in self.rewritten.tables.items():
            shown = value_rows(zip(*(c[:_SHOWN] for c in domain.texts)))
            more = f", ... ({len(domain)} rows)" if len(domain) > _SHOWN else ""
            lines.append(f"{name}: the public key domain as DuckDB's text of each key, read by DuckDB as a table: "
                         f"{shown}{more}")
        return "\n".join(lines)


def prepare(text: str, policy: "Policy", engine: "Backend", parsed: t.Any = None) -> PreparedQuery:
    """Parse, bind, plan and rewrite ``text``; raises a dpsql error for anything refused.
    ``parsed``: ``text`` parsed already (it is changed: pass a tree nothing else will read)."""
    # The pipeline (sqlglot, the mechanisms, numpy) is imported on the first query, so that
    # opening a connection, and the shell's first prompt, stay fast.
    from dpsql._plan.plan import plan
    from dpsql._plan.rewrite import rewrite
    from dpsql._sql import dialect, leaftypes
    from dpsql._sql.bigquery import translate
    from dpsql._sql.bind import bind
    from dpsql._sql.plain import apply_defaults

    target = engine.target
    if parsed is None:
        parsed = dialect.parse(text)
    rewrites = translate(parsed, policy) + apply_defaults(parsed, policy)
    canonical = _canonical(parsed)
    database = database_of(parsed.this, policy, engine)
    with leaftypes.columns(_column_types(parsed.this, engine) if target.typed_checks else {}):
        bound = bind(parsed, policy, engine.columns, database=database, describe=engine.describe,
                     read_public=engine.public_rows)
        if bound.public:
            return PreparedQuery(text=text, bound=bound, rewrites=rewrites, canonical=canonical, target=target)
        target.check_query(parsed.this)  # after every refusal the engines share
        try:
            p = plan(bound, policy, engine=engine)
        except ValueError as err:
            # A calibration outside floating point (e.g. epsilon = 1e-300 makes the noise scale
            # infinite): it depends on the query alone, so say why, as a dpsql error.
            raise OptionError(f"cannot calibrate the noise for these options: {err}") from None
        rewritten = rewrite(p, target)
        search_sql = ""
        if p.searches:
            from dpsql._release.found import statement

            search_sql = statement(p, target)
    return PreparedQuery(text=text, bound=bound, plan=p, rewritten=rewritten, rewrites=rewrites,
                         canonical=canonical, target=target, search_sql=search_sql, policy=policy)


def _column_types(tree: t.Any, engine: "Backend") -> dict[str, str]:
    """Name → catalog type of the columns of the tables ``tree`` reads (for the range checks of
    :mod:`dpsql._sql.leaftypes`; a name two tables type differently is left out)."""
    from sqlglot import exp

    from dpsql._sql.leaftypes import merged

    names = {".".join(p for p in (tbl.catalog, tbl.db, tbl.name) if p) for tbl in tree.find_all(exp.Table)}
    return merged(engine.columns(name) for name in sorted(names) if name)


def _canonical(parsed: t.Any) -> str:
    """The statement without its options, identifiers normalised as DuckDB resolves them (every
    name lower-cased, quoted or not), printed in one pass over a copy of the tree (printing may
    change the tree it prints: DuckDB's generator rewrites some forms, such as an UNNEST's WITH
    ORDINALITY, in place, and the binder must still see them), or over the tree itself when it
    holds only nodes printed as they are (:func:`dpsql._sql.printing.plain`).

    >>> from dpsql._sql import dialect
    >>> _canonical(dialect.parse('SELECT DP_COUNT(*) AS "N" FROM People WITH (epsilon = 1)'))
    'SELECT DP_COUNT(*) AS "n" FROM people'
    """
    from dpsql._sql.printing import plain

    return _canonical_generator()(dialect=_dialect()).generate(parsed, copy=not plain(parsed))


def _dialect() -> t.Any:
    from dpsql._sql.dialect import DPSQL

    return DPSQL


@functools.cache
def _canonical_generator() -> t.Any:
    """The printer's class (made once; an instance per statement, as a generator keeps state)."""
    from sqlglot import exp

    from dpsql._sql.dialect import DPSQL, DPQuery

    class Canonical(DPSQL.Generator):  # type: ignore[name-defined,misc]
        TRANSFORMS = {**DPSQL.Generator.TRANSFORMS,
                      DPQuery: lambda self, e: ("EXPLAIN " if e.args.get("explain") else "") + self.sql(e.this)}

        def identifier_sql(self, expression: exp.Identifier) -> str:
            name = expression.name
            if name == name.lower():
                return super().identifier_sql(expression)
            return super().identifier_sql(exp.Identifier(this=name.lower(), quoted=expression.quoted))

    return Canonical


def database_of(query: t.Any, policy: "Policy", engine: "Backend") -> str | None:
    """The DuckDB catalog the query's tables live in: the engine's database, or, when the policy
    has tables elsewhere (an attached database, views over files in ``temp``), theirs.

    The rewrite names every table by its full name in one catalog, so a query may read the
    tables of one catalog; one that mixes catalogs is refused by name.
    """
    catalog_of = engine.catalog_of
    if all(catalog_of(key) == engine.database for key in policy.tables):
        return engine.database
    from dpsql._sql.scope import real_tables
    from dpsql.errors import BindError, Error

    try:
        tables = real_tables(query, policy, engine.columns)
    except Error:
        return engine.database  # the binder refuses the query, in its own order of checks
    catalogs = sorted({catalog_of(tp.name) or "" for _, tp in tables})
    if len(catalogs) > 1:
        names = ", ".join(sorted({tp.name for _, tp in tables}))
        raise BindError(f"a query reads the tables of one database at a time; {names} are in "
                        f"{' and '.join(catalogs)}")
    return (catalogs[0] or None) if catalogs else engine.database


def release(
    prepared: PreparedQuery, names: list[str], rows: "t.Sequence[tuple[t.Any, ...]] | Statistics",
    noise: "NoiseSource", engine: "Backend",
) -> tuple["pa.Table | OneRow", "Released"]:
    """The noisy output table of ``prepared`` from the exact statistics of ``prepared.sql``.

    Call only after the budget is charged. ``rows`` must be exactly what ``prepared.sql``
    returned (``names`` are its column names), from whichever engine ran it: its rows, or the
    same statistics as columns (:class:`~dpsql.backends.columns.Statistics`). An ungrouped
    query that only names its columns gives a :class:`~dpsql.backends.output.OneRow` (its
    ``to_arrow()`` is the table), any other an Arrow table. For bounds found privately the rows
    are the histogram's: the bounds are chosen, and ``engine`` runs the query with them
    (:func:`dpsql._release.found.release_found`).
    """
    from dpsql._release.release import release as release_rows

    assert prepared.plan is not None and prepared.rewritten is not None
    if prepared.search_sql:
        return _release_found(prepared, names, rows, noise, engine)
    if prepared.plan.waiting:  # pragma: no cover - a plan waiting for bounds has its search_sql
        from dpsql.errors import InternalError

        raise InternalError("the bounds of the query are not found yet")
    released = release_rows(prepared.plan, prepared.rewritten, names, rows, noise)
    return _output(prepared, released, engine), released


def _release_found(prepared: PreparedQuery, names: list[str], rows: t.Any, noise: "NoiseSource",
                   engine: "Backend") -> tuple["pa.Table | OneRow", "Released"]:
    """:func:`release` of a query whose bounds are found privately (:mod:`dpsql._release.found`),
    after the charge: the bounds from the histogram's exact ``rows``, then the query with them
    run on ``engine`` and released; its report says which bounds were found, at what cost."""
    import dataclasses

    from dpsql._release import found

    assert prepared.plan is not None and prepared.policy is not None
    bounds = found.choose(prepared.plan, names, rows, noise)
    p, rewritten = found.replan(prepared.plan, prepared.policy, bounds, prepared.target)
    final = dataclasses.replace(prepared, plan=p, rewritten=rewritten, search_sql="")
    fetch: t.Callable[..., tuple[list[str], Rows | Statistics]] = (
        engine.statistics_columns if rewritten.keys else engine.statistics)
    stat_names, stats = (fetch(rewritten.statement, rewritten.arrow_tables) if rewritten.tables
                         else fetch(rewritten.statement))
    from dpsql._release.release import release as release_rows

    released = release_rows(p, rewritten, stat_names, stats, noise)
    found.annotate(p, released)  # before the post-processing reads the released columns
    return _output(final, released, engine), released


def _output(prepared: PreparedQuery, released: "Released", engine: "Backend") -> "pa.Table | OneRow":
    """HAVING / ORDER BY / LIMIT and select-list expressions, on the noisy rows only."""
    import numpy as np

    bound = prepared.bound
    assert bound.outer is not None
    columns = released.columns
    if bound.outer_columns is None:
        return _post_process(bound.outer, released, engine)
    # Only renaming (and key order): no need for a round trip through the engine.
    nkeys = len(bound.group_by)
    index = {name: i for i, name in enumerate(columns)}
    if not nkeys:
        # One row of plain numbers: no Arrow array is built until someone asks for the table.
        row = OneRow.of(bound.output_names, [released.pylist(index[c]) for c in bound.outer_columns])
        if row is not None:
            released.order = np.zeros(1, dtype=np.int64)
            return row
    arrays = released.arrays
    chosen = [arrays[index[c]] for c in bound.outer_columns]
    import pyarrow as pa  # imported on the first release (it is slow to import)

    table = pa.Table.from_arrays(chosen, names=bound.output_names)
    released.order = np.arange(table.num_rows, dtype=np.int64)
    if nkeys and table.num_rows > 1:
        order = key_order_arrays(arrays[:nkeys])
        released.order = order.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
        table = table.take(order)
    return table


def _post_process(outer: t.Any, released: "Released", engine: "Backend") -> "pa.Table":
    """The post-processing SELECT ``outer`` on the released rows, with one more output column
    (taken off again) that carries each row's group, so that per-group facts (the interval
    half-widths) follow their rows through HAVING, ORDER BY and LIMIT."""
    from sqlglot import exp

    carried = outer.copy()
    carried.set("expressions", [*carried.expressions, exp.alias_(exp.column(_ROW), _ROW, quoted=True)])
    table = engine.post_process(carried, [*released.columns, _ROW], released.table(row=_ROW))
    last = table.num_columns - 1
    released.order = table.column(last).to_numpy(zero_copy_only=False).astype("int64", copy=False)
    return table.remove_column(last)


def key_order(rows: list[tuple[t.Any, ...]], nkeys: int) -> list[int]:
    """Row indices in the order of the first ``nkeys`` columns, NULLs last."""
    return key_order_columns([[r[j] for r in rows] for j in range(nkeys)])


def key_order_arrays(keys: "list[pa.Array]") -> "pa.Array":
    """Indices (int64) in the order of the Arrow key columns ``keys``, NULLs last: sorted by
    Arrow, or, for a key type Arrow cannot sort, as :func:`key_order_columns` sorts."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if len(keys) == 1:
        order = _numeric_order(keys[0])
        if order is not None:
            return pa.array(order)
    try:
        table = pa.Table.from_arrays(keys, names=[f"k{j}" for j in range(len(keys))])
        return pc.sort_indices(table, sort_keys=[(f"k{j}", "ascending") for j in range(len(keys))]).cast(pa.int64())
    except (pa.ArrowException, TypeError, ValueError):
        return pa.array(key_order_columns([k.to_pylist() for k in keys]), type=pa.int64())


def _numeric_order(key: "pa.Array") -> "t.Any":
    """For one key column of numbers without NULLs and without repeated keys (one row per
    group): the indices in key order, by numpy's sort (several times faster than Arrow's on
    integers); None for anything else, which Arrow's stable sort orders. With distinct keys the
    order is unique, so the sort's lack of stability shows nothing of the rows' arrival order."""
    import numpy as np
    import pyarrow as pa

    if key.null_count or not (pa.types.is_integer(key.type) or pa.types.is_floating(key.type)):
        return None
    values = key.to_numpy()
    order = np.argsort(values)
    ranked = values[order]
    if np.any(ranked[1:] == ranked[:-1]) or (values.dtype.kind == "f" and np.isnan(ranked[-2:]).all()):
        return None  # ties (two NaNs count as one): let the stable sort decide
    return order.astype(np.int64, copy=False)


def key_order_columns(keys: list[list[t.Any]]) -> list[int]:
    """Indices in the order of the key columns ``keys``, NULLs last: by Arrow, or for a key type
    Arrow cannot hold or sort, by Python's comparison (nothing here may fail)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        table = pa.table({f"k{j}": pa.array(col) for j, col in enumerate(keys)})
        return pc.sort_indices(table, sort_keys=[(f"k{j}", "ascending") for j in range(len(keys))]).to_pylist()
    except (pa.ArrowException, TypeError, ValueError):
        rows = list(zip(*keys))
        return sorted(range(len(rows)), key=lambda i: tuple((v is None, v) for v in rows[i]))
