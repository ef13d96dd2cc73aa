"""The Python API: ``dpsql.connect()`` and :class:`Connection`.

A query goes parse → bind → plan → rewrite (no data touched, nothing charged), then DuckDB
computes the exact statistics, the ledger is charged atomically, and only then is noise added
and the result returned. A query refused before execution charges nothing. If DuckDB fails at
run time, nothing is charged and the message is withheld (it could quote private values).
"""

from __future__ import annotations

import os
import typing as t
from dataclasses import dataclass

import duckdb

if t.TYPE_CHECKING:
    import pyarrow as pa

    from dpsql.sql.bind import Bound
    from dpsql.engine.plan import Plan
    from dpsql.engine.rewrite import Rewritten

from dpsql.privacy.budget import Cost, format_cost, to_kind
from dpsql.errors import BindError, Error, ExecutionError, OptionError, PolicyError
from dpsql.privacy.ledger import Entry, Ledger
from dpsql.privacy.noise import NoiseSource, default_noise
from dpsql.privacy.policy import Policy, load_policy
from dpsql.result import Result

#: Settings applied to every analyst connection before the configuration is locked.
HARDENING = (
    ("error_on_division_by_zero", "false"),
    ("python_enable_replacements", "false"),
    ("autoinstall_known_extensions", "false"),
    ("autoload_known_extensions", "false"),
    ("allow_community_extensions", "false"),
    ("enable_external_access", "false"),
    ("lock_configuration", "true"),
)


#: DuckDB errors raised while binding (before reading data): their messages are safe to show.
_BIND_ERRORS = (duckdb.BinderException, duckdb.CatalogException, duckdb.ParserException)


@dataclass(frozen=True)
class BudgetStatus:
    total: Cost
    spent: Cost
    remaining: Cost
    kind: str
    history: list[Entry]

    def __str__(self) -> str:
        return (
            f"spent {format_cost(self.spent, self.kind)} of {format_cost(self.total, self.kind)}; "
            f"remaining {format_cost(self.remaining, self.kind)}"
        )


#: Settings without which an analyst connection is not locked down: a DuckDB that lacks one is
#: refused rather than silently left open (the others are conveniences, applied when present).
REQUIRED_SETTINGS = frozenset({
    "enable_external_access", "lock_configuration", "python_enable_replacements",
    "autoinstall_known_extensions", "autoload_known_extensions",
})


def harden(con: duckdb.DuckDBPyConnection) -> None:
    """Lock an analyst connection down: no files, network, extensions or Python scans."""
    current = {n: str(v).lower() for n, v in con.execute("SELECT name, value FROM duckdb_settings()").fetchall()}
    missing = sorted(REQUIRED_SETTINGS - set(current))
    if missing:
        raise Error(f"this DuckDB has no setting {missing[0]}; dpsql cannot lock the connection down")
    if current.get("lock_configuration") == "true":
        # Connections to one database file in one process share a DuckDB instance, and its
        # configuration is already locked: check the settings instead of setting them.
        wrong = [n for n, v in HARDENING if n in current and current[n] != v]
        if wrong:
            raise Error(f"the DuckDB configuration is locked with {wrong[0]} = {current[wrong[0]]}; "
                        "dpsql cannot lock the connection down")
        return
    _private_temp_directory(con)
    for name, value in HARDENING:
        if name in current:
            # GLOBAL: the settings hold for every connection and cursor of this DuckDB instance
            con.execute(f"SET GLOBAL {name} = {value}")


def _private_temp_directory(con: duckdb.DuckDBPyConnection) -> None:
    """Move DuckDB's spill directory from its default to a fresh private one.

    With external access disabled DuckDB still lets COPY, ATTACH and read_csv reach its temp
    directory, and the default one ('.tmp' in the working directory, or '<database>.tmp') is
    shared and guessable. A directory the data owner configured is kept, and so is one DuckDB
    has already spilled into (it cannot be switched then); the binder refuses those statements
    in any case, so this only narrows what a binder bypass could reach.
    """
    import atexit
    import shutil
    import tempfile

    current = con.execute("SELECT current_setting('temp_directory')").fetchone()[0]
    path = con.execute(
        "SELECT path FROM duckdb_databases() WHERE database_name = current_database()"
    ).fetchone()[0]
    if current != (f"{path}.tmp" if path else ".tmp"):
        return
    private = tempfile.mkdtemp(prefix="dpsql-spill-")
    try:
        con.execute("SET temp_directory = ?", [private])
    except duckdb.Error:
        os.rmdir(private)
        return
    atexit.register(shutil.rmtree, private, True)


class Connection:
    """A DuckDB connection seen through a privacy policy."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        policy: Policy,
        ledger: Ledger,
        noise: NoiseSource | None = None,
    ) -> None:
        self._con = con
        self.policy = policy
        self.ledger = ledger
        self.noise = noise or default_noise()
        if ledger.path is not None:
            _refuse_test_noise(self.noise, ledger.path)
        #: the DuckDB database files this connection reads (none in memory)
        self.database_files: tuple[str, ...] = tuple(
            path for (path,) in con.execute("SELECT path FROM duckdb_databases() WHERE path IS NOT NULL").fetchall()
        )
        self._catalog: dict[str, dict[str, str]] = {}
        self._scratch: duckdb.DuckDBPyConnection | None = None
        #: the DuckDB catalog whose schema main holds the policy's tables
        self._database: str = con.execute("SELECT current_database()").fetchone()[0]

    # -- catalog ------------------------------------------------------------------------------

    def _columns(self, table: str) -> dict[str, str] | None:
        """Column name (lower-case) → DuckDB type of a table in schema main, or None."""
        if table in self._catalog:
            return self._catalog[table]
        rows = self._con.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_catalog = ? AND table_schema = 'main' AND lower(table_name) = ? "
            "ORDER BY ordinal_position",
            [self._database, table.lower()],
        ).fetchall()
        if not rows:
            return None
        cols = {name.lower(): dtype.upper() for name, dtype in rows}
        self._catalog[table] = cols
        return cols

    def _describe(self, sql: str) -> list[str]:
        """The column types of a SELECT, bound by DuckDB without running it (reads no data)."""
        try:
            return [str(row[1]) for row in self._con.execute(f"DESCRIBE {sql}").fetchall()]
        except _BIND_ERRORS as err:
            raise BindError(f"DuckDB cannot bind the query: {str(err).splitlines()[0]}") from None

    def tables(self) -> list[str]:
        """Tables the policy declares and the database holds."""
        return [name for name in sorted(self.policy.tables) if self._columns(name) is not None]

    # -- pipeline -----------------------------------------------------------------------------

    def _prepare(self, query: str) -> tuple["Bound", "Plan | None", "Rewritten | None"]:
        # The pipeline (sqlglot, the mechanisms, numpy) is imported on the first query, so
        # that opening a connection, and the shell's first prompt, stay fast.
        from dpsql.sql import dialect
        from dpsql.sql.bind import bind
        from dpsql.engine.plan import plan
        from dpsql.engine.rewrite import rewrite

        parsed = dialect.parse(query)
        bound = bind(parsed, self.policy, self._columns, database=self._database, describe=self._describe)
        if bound.public:
            return bound, None, None
        try:
            p = plan(bound, self.policy)
        except ValueError as err:
            # A calibration outside floating point (e.g. epsilon = 1e-300 makes the noise scale
            # infinite): it depends on the query alone, so say why, as a dpsql error.
            raise OptionError(f"cannot calibrate the noise for these options: {err}") from None
        return bound, p, rewrite(p)

    def explain(self, query: str) -> str:
        """The rewritten SQL, mechanisms, splits and noise scales. Reads no data, spends nothing."""
        bound, p, rw = self._prepare(query)
        if p is None or rw is None:
            return "public query (no private table): runs as plain DuckDB, spends nothing\n" + bound.query.sql(
                dialect="duckdb", pretty=True
            )
        lines = ["DP query", *p.explain_lines(), f"post-processing: {p.bound.outer.sql(dialect='duckdb')}",
                 "rewritten SQL:", _pretty(rw.sql)]
        return "\n".join(lines)

    def rewritten_sql(self, query: str, dialect: str = "duckdb") -> str:
        """The statement that computes the query's exact statistics, in another SQL dialect.

        For data that outgrows one machine: the same statistics query, transpiled by sqlglot
        (e.g. ``dialect="spark"``), can run on a cluster; its rows then go through the same
        release step. Reads no data and spends nothing.
        """
        import sqlglot

        _, p, rw = self._prepare(query)
        if rw is None:
            raise Error("a query on public tables has no DP rewrite")
        return sqlglot.transpile(rw.sql, read="duckdb", write=dialect)[0]

    def sql(self, query: str) -> Result:
        """Run one dpsql statement and return its (noisy) result."""
        bound, p, rw = self._prepare(query)
        if bound.explain:
            text = self.explain(query)
            import pyarrow as pa

            return Result(table=pa.table({"explain": text.splitlines()}))
        if p is None or rw is None:
            return self._public(bound)
        amount = self._amount(p)
        self.ledger.budget.check(self.ledger.spent(), amount)  # BudgetError, nothing charged
        try:
            cur = self._con.execute(rw.sql)
            rows = cur.fetchall()
            names = [d[0] for d in cur.description]
        except _BIND_ERRORS as err:
            # Raised before any row is read: depends on the catalog and the query only.
            msg = str(err).splitlines()[0]
            raise BindError(f"DuckDB cannot bind the query: {msg}") from None
        except duckdb.Error:
            raise ExecutionError(
                "DuckDB failed while computing the statistics; the details are withheld because "
                "they could depend on private values (nothing was charged)"
            ) from None
        self.ledger.charge(amount, query=query.strip(), detail="; ".join(p.mechanisms))
        try:
            from dpsql.engine.release import release

            released = release(p, rw, names, rows, self.noise)
            table = self._post_process(p, released.columns, released.rows)
        except Exception:
            # After the charge, whatever fails (a bug included) may have failed because of the
            # exact statistics, and its message may quote them: one fixed message, no details.
            # The plan refuses what could fail on data (e.g. bounds whose sum can overflow) and
            # the release is total, so this is not expected to happen.
            raise ExecutionError(
                "releasing the result failed; the details are withheld because they could depend "
                "on private values (the budget was charged)"
            ) from None
        notes = []
        if released.groups_suppressed is not None:
            notes.append("groups below the noisy threshold are not shown")
        return Result(table=table, report=released.report, cost=p.cost, notes=notes)

    execute = sql

    def _amount(self, p: Plan) -> Cost:
        """The plan's cost in the ledger's accounting kind (ρ → (ε, δ) needs the query's δ)."""
        if p.cost.rho > 0 and self.ledger.kind != "zcdp" and not p.conversion_delta:
            raise OptionError(
                "with rho, also give delta: the (ε, δ) budget is charged ρ + 2·sqrt(ρ·ln(1/δ)) at that δ"
            )
        return to_kind(p.cost, self.ledger.kind, p.conversion_delta)

    def _public(self, bound: Bound) -> Result:
        try:
            rel = self._con.sql(bound.query.sql(dialect="duckdb"))
            import pyarrow as pa

            table = rel.to_arrow_table() if rel is not None else pa.table({})
        except duckdb.Error as err:
            raise ExecutionError(str(err).splitlines()[0]) from None
        return Result(table=table)

    def _post_process(self, p: Plan, columns: list[str], rows: list[tuple[t.Any, ...]]) -> "pa.Table":
        """Run HAVING / ORDER BY / LIMIT and select-list expressions on the noisy rows only.

        This runs on a separate in-memory DuckDB that holds nothing but the noisy table.
        """
        import pyarrow as pa  # imported on the first release (it is slow to import)

        outer = p.bound.outer
        assert outer is not None
        if p.bound.outer_columns is not None:
            # Only renaming (and key order): no need for a DuckDB round trip.
            nkeys = len(p.bound.group_by)
            rows = sorted(rows, key=lambda r: tuple((v is None, v) for v in r[:nkeys]))
            index = {name: i for i, name in enumerate(columns)}
            picked = [index[c] for c in p.bound.outer_columns]
            arrays = [pa.array([r[i] for r in rows]) for i in picked]
            return pa.Table.from_arrays(arrays, names=p.bound.output_names)
        data = {name: [r[i] for r in rows] for i, name in enumerate(columns)}
        noisy = pa.table(data)
        if self._scratch is None:
            self._scratch = duckdb.connect(":memory:")
            harden(self._scratch)
        self._scratch.register("__noisy", noisy)
        try:
            return self._scratch.sql(outer.sql(dialect="duckdb")).to_arrow_table()
        finally:
            self._scratch.unregister("__noisy")

    @property
    def budget(self) -> BudgetStatus:
        return BudgetStatus(
            total=self.ledger.budget.total,
            spent=self.ledger.spent(),
            remaining=self.ledger.remaining(),
            kind=self.ledger.budget.kind,
            history=self.ledger.history(),
        )

    def close(self) -> None:
        self.ledger.close()
        if self._scratch is not None:
            self._scratch.close()
        self._con.close()

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _pretty(sql: str) -> str:
    import sqlglot

    return sqlglot.transpile(sql, read="duckdb", write="duckdb", pretty=True)[0]


def _refuse_test_noise(noise: NoiseSource, ledger: str) -> None:
    """A durable ledger records releases as private: only the secure noise source may make them."""
    from dpsql.errors import PrivacyError

    if getattr(noise, "secure", False) is not True:
        raise PrivacyError(
            f"a test noise source ({type(noise).__name__}) cannot be used with a durable ledger "
            f"({ledger}): its releases are not private; use the default noise, or a policy without "
            "a ledger"
        )


def connect(
    database: str | os.PathLike[str] | duckdb.DuckDBPyConnection = ":memory:",
    policy: str | os.PathLike[str] | dict[str, t.Any] | Policy | None = None,
    *,
    noise: NoiseSource | None = None,
    init_ledger: bool = False,
    read_only: bool = False,
    setup: t.Callable[[duckdb.DuckDBPyConnection], None] | None = None,
) -> Connection:
    """Open a DP connection.

    ``database`` is a DuckDB file path, ``":memory:"`` or an existing DuckDB connection (which
    dpsql then hardens and owns). ``policy`` is a TOML/YAML path, a dict or a :class:`Policy`.
    ``setup`` runs on the raw connection before hardening (e.g. to load data). The ledger named
    by the policy must exist unless ``init_ledger`` is true; a policy without a ledger keeps an
    in-memory one for the life of the connection. A test noise source (such as ``SeededNoise``)
    is refused with a ledger file: its releases are not private.
    """
    if policy is None:
        raise PolicyError("a policy is required: connect(database, policy='policy.toml')")
    pol = load_policy(policy)
    if noise is not None and pol.ledger is not None:
        _refuse_test_noise(noise, pol.ledger)  # before anything is opened or created
    if isinstance(database, duckdb.DuckDBPyConnection):
        con = database
    else:
        try:
            con = duckdb.connect(str(database), read_only=read_only)
        except duckdb.Error as err:
            raise Error(f"cannot open database {database}: {str(err).splitlines()[0]}") from None
    if setup is not None:
        setup(con)
    harden(con)
    ledger = Ledger.open(pol.ledger, pol.budget, create=init_ledger)
    return Connection(con, pol, ledger, noise=noise)

