"""The Python API: ``dpsql.connect()`` and :class:`Connection`.

A query goes through the pipeline of :mod:`dpsql._query.pipeline`: prepare (parse, bind, plan,
rewrite; no data touched, nothing charged), then the backend (:mod:`dpsql.backends.backend`;
DuckDB unless told otherwise) computes the exact statistics, the ledger is charged atomically,
and only then is noise added and the result returned. A query refused before execution charges
nothing. If the engine fails at run time, nothing is charged and the message is withheld (it
could quote private values).
"""

from __future__ import annotations

import contextlib
import os
import typing as t
from collections import OrderedDict

import duckdb

from dpsql._accounting.budget import Cost, format_cost, to_kind
from dpsql._accounting.ledger import BudgetLedger, Ledger
from dpsql._policy.catalog_check import check_against_catalog
from dpsql._policy.policy import Policy, load_policy
from dpsql._privacy.noise import NoiseSource, default_noise
from dpsql._query.pipeline import WAITING, PreparedQuery, prepare, release
from dpsql._sql.depth import nested_refused
from dpsql.backends.backend import Backend
from dpsql.backends.duck import DuckDBEngine
from dpsql.backends.sandbox import harden
from dpsql.backends.sources import expose_registered, open_sources, with_files
from dpsql.budget_status import BudgetStatus
from dpsql.errors import Error, ExecutionError, LedgerError, OptionError, PolicyError, PrivacyError, QueryCancelled
from dpsql.result import Result

if t.TYPE_CHECKING:
    from dpsql._query.cancel import Cancellation
    from dpsql.backends.backend import Rows
    from dpsql.backends.columns import Statistics

#: Plans a connection keeps, most recently used first (:meth:`Connection.prepare`).
PLANS_KEPT = 256

RELEASE_FAILED = (
    "releasing the result failed; the details are withheld because they could depend on private "
    "values (the budget was charged)"
)


class _PublicReads:
    """``engine`` as planning sees it, counting the queries of public rows planning runs (a
    public join's key multiplicity, a key domain): a plan that read none depends on the text,
    the policy and the catalog alone, and is kept even when it joins (links between private
    tables)."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self.reads = 0

    def __getattr__(self, name: str) -> t.Any:  # every other member is the backend's own (delegation)
        return getattr(self._backend, name)

    def public_rows(self, sql: str) -> t.Any:
        self.reads += 1
        return self._backend.public_rows(sql)


class Connection:
    """A DuckDB connection seen through a privacy policy."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection | Backend,
        policy: Policy,
        ledger: BudgetLedger,
        noise: NoiseSource | None = None,
        located: dict[str, str] | None = None,
        *,
        user: str | None = None,
    ) -> None:
        # a DuckDB connection, or a backend (dpsql.backends.spark.SparkEngine, or any other)
        self.engine: Backend = DuckDBEngine(con) if isinstance(con, duckdb.DuckDBPyConnection) else con
        self.engine.located.update(located or {})
        if policy.database is None and self.engine.database is not None:
            policy = policy.in_database(self.engine.database)
        check_against_catalog(policy, self.engine.columns)
        self.policy = policy
        self.ledger = ledger
        self.noise = noise or default_noise()
        #: who asks: part of the key under which releases are reused (None is a user too)
        self.user = user
        if ledger.path is not None:
            _refuse_test_noise(self.noise, ledger.path)
        #: recent plans by statement text (:meth:`prepare`)
        self._plans: OrderedDict[str, PreparedQuery] = OrderedDict()
        #: recent statement texts found not to be zero-row probes: the answer depends on the
        #: text, the policy and the catalog alone, so the text is not parsed again to ask
        self._not_probes: OrderedDict[str, None] = OrderedDict()
        #: whether the DuckDB connection was the caller's (``connect(duckdb_connection, ...)``):
        #: locking it down locked the caller's whole DuckDB instance; the repr says so
        self.locked_caller_connection = False

    def __repr__(self) -> str:
        where = ", ".join(self.database_files) or self.engine.place
        policy = self.policy.source or "a policy"
        try:
            budget = f"; remaining {format_cost(self.ledger.remaining(), self.ledger.budget.kind)}"
        except Exception:  # closed
            budget = ""
        text = f"<dpsql.Connection to {where}, {policy}, tables: {', '.join(sorted(self.policy.tables))}{budget}>"
        if self.locked_caller_connection:
            text += ("\nNOTE: the DuckDB connection given to dpsql.connect() is locked down for good: no file "
                     "access, no extensions, no changes of settings, for every connection of its DuckDB "
                     "instance (DuckDB keeps these settings per instance, not per connection)")
        return text

    @property
    def data_files(self) -> tuple[str, ...]:
        """Files the locked-down DuckDB may still read (the views over data files read them)."""
        return self.engine.data_files()

    @property
    def database_files(self) -> tuple[str, ...]:
        """The DuckDB database files this connection reads (none in memory)."""
        return self.engine.files

    def columns(self, table: str) -> dict[str, str] | None:
        """Column name (lower-case) → DuckDB type of a table (a policy key: ``name`` in schema
        main, ``schema.name`` or ``catalog.schema.name``), or None."""
        return self.engine.columns(table)

    def tables(self) -> list[str]:
        """Tables the policy declares and the database holds."""
        return [name for name in sorted(self.policy.tables) if self.engine.columns(name) is not None]

    # -- pipeline -----------------------------------------------------------------------------

    def prepare(self, query: str, parsed: t.Any = None) -> PreparedQuery:
        """Parse, bind, plan and rewrite ``query``: refusals happen here. Reads no data, spends nothing.

        A statement this connection has planned before (the same text) reuses its plan, as a
        prepared statement would: a plan depends on the text, the policy and the tables'
        columns, which a connection reads once. Plans of joins that read public rows while
        planning (a public join's key multiplicity) are made again every time. Nothing in a plan depends on private data,
        and a plan is never changed once made. ``parsed``: ``query`` parsed already, used (and
        changed) only when there is no plan yet.
        """
        hit = self._plans.get(query)
        if hit is not None:
            self._plans.move_to_end(query)
            return hit
        engine = _PublicReads(self.engine)
        with nested_refused():
            prepared = prepare(query, self.policy, t.cast(Backend, engine), parsed)
        # a join read no public rows (links between private tables): its plan is the text's alone
        if not prepared.bound.joined or engine.reads == 0:
            self._plans[query] = prepared
            if len(self._plans) > PLANS_KEPT:
                self._plans.popitem(last=False)
        return prepared

    def explain(self, query: str) -> str:
        """The rewritten SQL, mechanisms, splits and noise scales. Reads no data, spends nothing."""
        return self.prepare(query).explain_text()

    def rewritten_sql(self, query: str, dialect: str = "duckdb") -> str:
        """The statement that computes the query's exact statistics, in another SQL dialect.

        For data that outgrows one machine: ``dialect="spark"`` gives the statement written for
        Spark by :data:`dpsql._compile.target.SPARK` (the form ``connect(spark_session, ...)`` runs);
        any other dialect is a plain sqlglot transpile of the DuckDB statement, unchecked. The
        rows it returns go through :meth:`release`. Reads no data and spends nothing.
        """
        import sqlglot

        from dpsql._compile.target import TARGETS

        prepared = self.prepare(query)
        if prepared.public or prepared.search_sql:
            raise Error(WAITING if prepared.search_sql else "a query on public tables has no DP rewrite")
        assert prepared.plan is not None
        if dialect == self.engine.target.name:
            return prepared.sql
        if self.engine.target is not TARGETS["duckdb"]:  # the reference form the others are written from
            raise Error(f"this connection runs on {self.engine.name}; its statements are in that dialect only")
        if dialect in TARGETS:
            from dpsql._plan.rewrite import rewrite

            return rewrite(prepared.plan, TARGETS[dialect]).sql
        return sqlglot.transpile(prepared.sql, read="duckdb", write=dialect)[0]

    def sql(self, query: str) -> Result:
        """Run one dpsql statement and return its (noisy) result.

        ``DESCRIBE t``, ``SHOW TABLES``, ``SHOW COLUMNS FROM t`` and ``information_schema``
        queries are answered from the policy and the catalog (:mod:`dpsql.describe`).

        Ctrl-C stops the engine at once and raises :class:`~dpsql.errors.QueryCancelled` (a
        KeyboardInterrupt); nothing is charged, unless it came after the charge: then the
        release is finished and kept in the exception's ``result`` (:mod:`dpsql._query.cancel`).
        """
        from dpsql._query.cancel import Cancellation

        guard = Cancellation(self.engine.cancel)
        try:
            with guard, nested_refused():  # the release turns its own failures into one message
                result, charged = self._answer(query, guard)
        except QueryCancelled:
            raise
        except KeyboardInterrupt:  # raised by another handler, before the charge (which holds it back)
            raise QueryCancelled() from None
        if guard.late and charged is not None:
            raise QueryCancelled(f"Query cancelled after its release: {format_cost(charged, self.ledger.kind)} "
                                 "was charged; the result is kept", result=result)
        return result

    def _answer(self, query: str, guard: "Cancellation") -> tuple[Result, Cost | None]:
        """The result of ``query`` and what it charged (None: nothing)."""
        from dpsql._query.probe import NOTE, answer_probe, parse_if_probe_like
        from dpsql.describe import answer

        catalog = answer(self, query)
        if catalog is not None:
            return catalog, None
        parsed = None
        if query in self._not_probes:
            self._not_probes.move_to_end(query)
        else:
            parsed = parse_if_probe_like(query)  # parsed once: the tree goes on to prepare()
            empty = answer_probe(query, self.policy, self.engine, parsed) if parsed is not None else None
            if empty is not None:
                return Result(table=empty, notes=[NOTE]), None
            self._not_probes[query] = None
            if len(self._not_probes) > PLANS_KEPT:
                self._not_probes.popitem(last=False)
        prepared = self.prepare(query, parsed)
        if prepared.explain:
            import pyarrow as pa

            return Result(table=pa.table({"explain": prepared.explain_text().splitlines()})), None
        guard.check()
        if prepared.public:
            return Result(table=self.engine.public(prepared.sql)), None
        reused = self._reused(prepared)
        if reused is not None:
            return reused, None
        amount = self._check_budget(prepared)  # BudgetError, nothing charged, before any data is read
        guard.check()
        rows: Rows | Statistics
        if prepared.search_sql:  # bounds found privately: their histogram first (dpsql._release.found)
            names, rows = self.engine.statistics(prepared.search_sql)
            guard.hold()  # the charge, the query with the found bounds and the release finish
            return self.release(prepared, names, rows), amount
        # grouped statistics as columns (Arrow where the engine gives it, DuckDB), else as rows (one
        # ungrouped row comes faster as a tuple: an Arrow export costs about 0.4 ms)
        rewritten = prepared.rewritten
        assert rewritten is not None
        fetch: t.Callable[..., tuple[list[str], Rows | Statistics]] = (
            self.engine.statistics_columns if rewritten.keys else self.engine.statistics)
        if rewritten.tables:  # a public key domain, handed to the engine as data
            names, rows = fetch(rewritten.statement, rewritten.arrow_tables)
        else:
            names, rows = fetch(rewritten.statement)
        guard.hold()  # a Ctrl-C from here on lets the charge and the release finish
        return self.release(prepared, names, rows), amount

    execute = sql

    def release(self, prepared: PreparedQuery, names: list[str], rows: "t.Sequence[tuple[t.Any, ...]] | Statistics") -> Result:
        """Charge the budget for ``prepared`` and release the exact ``rows`` of its statistics query.

        The hook for statistics computed by another engine: ``rows`` (with column ``names``)
        must be what ``prepared.sql`` returned there (for bounds found privately, their histogram:
        the query then runs on this connection's engine). The charge commits before any noise is
        drawn; whatever fails after it gives one fixed message.
        """
        if prepared.plan is None:
            raise Error("a query on public tables has nothing to release")
        # The charge itself checks the amount against the durable ledger, in its transaction:
        # no second read of the ledger before it (sql() checked before reading any data).
        amount = self._amount(prepared)
        entry = self.ledger.charge(amount, query=prepared.text.strip(), detail="; ".join(prepared.plan.mechanisms),
                                   user=self.user or "")
        try:
            table, released = release(prepared, names, rows, self.noise, self.engine)
        except Exception:
            # After the charge, whatever fails (a bug included) may have failed because of the
            # exact statistics, and its message may quote them: one fixed message, no details.
            # The plan refuses what could fail on data (e.g. bounds whose sum can overflow) and
            # the release is total, so this is not expected to happen.
            raise ExecutionError(RELEASE_FAILED) from None
        notes = [*prepared.rewrites, *released.notes(prepared.plan)]
        result = Result(table=table, report=released.report, cost=prepared.plan.cost, notes=notes,
                        confidence=prepared.bound.options.confidence, sources=list(prepared.report_sources),
                        widths=released.row_widths())
        self._keep(prepared, entry, result)
        return result

    # -- reuse of releases (dpsql.reuse) ------------------------------------------------------

    def _reuse_key(self, prepared: PreparedQuery) -> str | None:
        """The key the release of ``prepared`` is kept under, or None when it is not kept: reuse
        is off in the policy, or the noise is a test source (its releases are not private)."""
        if self.policy.defaults.reuse_seconds <= 0 or getattr(self.noise, "secure", False) is not True:
            return None
        from dpsql.reuse import key

        return key(prepared, self.policy, database=[self.engine.database, *self.engine.files],
                   kind=self.ledger.kind, user=self.user)

    def _reused(self, prepared: PreparedQuery) -> Result | None:
        """The earlier release of the same query, if the policy allows reusing it: no charge."""
        key = self._reuse_key(prepared)
        stored = self.ledger.find_release(key, self.policy.defaults.reuse_seconds) if key else None
        if stored is None:
            return None
        from dpsql.reuse import decode

        return decode(stored)

    def _keep(self, prepared: PreparedQuery, entry: int, result: Result) -> None:
        """Store a release for reuse, after its charge. Failing to store it only means that the
        same query is charged again later, so no failure here reaches the caller."""
        key = self._reuse_key(prepared)
        if key is None or entry <= 0:
            return
        from dpsql.reuse import encode

        with contextlib.suppress(Exception):
            self.ledger.store_release(key, entry, encode(result))

    def _amount(self, prepared: PreparedQuery) -> Cost:
        """The plan's cost in the ledger's kind (OptionError if it has none); reads no ledger."""
        p = prepared.plan
        assert p is not None
        if p.cost.rho > 0 and self.ledger.kind != "zcdp" and not p.conversion_delta:
            raise OptionError(
                "with rho, also give delta: the (ε, δ) budget is charged ρ + 2·sqrt(ρ·ln(1/δ)) at that δ"
            )
        return to_kind(p.cost, self.ledger.kind, p.conversion_delta)

    def _check_budget(self, prepared: PreparedQuery) -> Cost:
        """The plan's cost in the ledger's kind, refused (BudgetError) if it exceeds what the
        durable ledger says remains (read now, never from a copy kept by the connection)."""
        amount = self._amount(prepared)
        self.ledger.budget.check(self.ledger.spent(), amount)
        return amount

    @property
    def budget(self) -> BudgetStatus:
        return BudgetStatus.of(self.ledger)

    def close(self) -> None:
        self.ledger.close()
        self.engine.close()

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def report_sources(prepared: PreparedQuery) -> list[int | None]:
    """For each output column, the index of the report entry of the DP aggregate it shows as
    released, or None (a group key, or an expression computed from the noisy values)."""
    return list(prepared.report_sources)


def _missing_ledger(database: t.Any, policy: t.Any, pol: Policy) -> str:
    """The message for a policy whose ledger file does not exist: how to create it, exactly."""
    db = database if isinstance(database, (str, os.PathLike)) else "DATABASE"
    source = policy if isinstance(policy, (str, os.PathLike)) else (pol.source or "POLICY")
    return (f"budget ledger {pol.ledger} does not exist; create it once with "
            f"dpsql.connect({str(db)!r}, {str(source)!r}, init_ledger=True), or on the command line: "
            f"dpsql {db} --policy {source} --init-ledger; dpsql never starts a fresh budget silently")


def _refuse_test_noise(noise: NoiseSource, ledger: str) -> None:
    """A durable ledger records releases as private: only the secure noise source may make them."""
    if getattr(noise, "secure", False) is not True:
        raise PrivacyError(
            f"a test noise source ({type(noise).__name__}) cannot be used with a durable ledger "
            f"({ledger}): its releases are not private; use the default noise, or a policy without "
            "a ledger"
        )


def _refuse_data_file(database: t.Any, policy: t.Any) -> None:
    """A data file is not a database: DuckDB would create a database under its name if it is
    missing, or fail to read it as one. Say which, and how to open it."""
    from dpsql.backends.sources import reader_of

    if not isinstance(database, (str, os.PathLike)) or reader_of(str(database)) is None:
        return
    if not os.path.exists(database):
        raise Error(f"data file {database} does not exist")
    source = policy if isinstance(policy, (str, os.PathLike)) else "POLICY"
    raise Error(f"{database} is a data file, not a DuckDB database: give it as the table's source in the "
                f"policy (source = \"{database}\") and connect without a database, or run dpsql {database} "
                f"--policy {source}")


def _is_spark_session(obj: object) -> bool:
    """Whether ``obj`` is a PySpark session (classic or Spark Connect), without importing pyspark."""
    cls = type(obj)
    return cls.__module__.startswith("pyspark.") and cls.__name__ == "SparkSession"


def connect(
    database: t.Any = ":memory:",
    policy: str | os.PathLike[str] | dict[str, t.Any] | Policy | None = None,
    *,
    noise: NoiseSource | None = None,
    init_ledger: bool = False,
    read_only: bool = False,
    setup: t.Callable[[duckdb.DuckDBPyConnection], None] | None = None,
    user: str | None = None,
) -> Connection:
    """Open a DP connection.

    ``database`` may also be a ``pyspark.sql.SparkSession``: the statistics then run on Spark
    (:mod:`dpsql.backends.spark`, ``docs/spark.md``), over the tables and views of its catalog;
    a policy table with ``source = ...`` files becomes a temporary view of the session. Or it is
    a :class:`~dpsql.backends.backend.Backend` (any other engine), which the connection then owns.

    ``database`` is a DuckDB file path, ``":memory:"``, data files (a Parquet, CSV or JSON path
    or glob, or a list of them: as on the command line, they become the policy's table of the
    same name, or its one table, in an in-memory database) or an existing DuckDB connection,
    which dpsql then locks down and owns: DuckDB keeps file access, extensions and the
    configuration lock per instance, so every connection and cursor of that DuckDB instance
    loses them for good (tables and pandas/Arrow objects registered on it before stay readable,
    as the policy allows). ``policy`` is a TOML/YAML path, TOML text (a string of several lines), a dict or a
    :class:`Policy`.
    ``setup`` runs on the raw connection before hardening (e.g. to load data). The ledger named
    by the policy must exist unless ``init_ledger`` is true; a policy without a ledger keeps an
    in-memory one for the life of the connection. A test noise source (such as ``SeededNoise``)
    is refused with a ledger file: its releases are not private. ``user`` names who asks (a
    server passes its client's user name): releases are reused only for the same user.
    """
    if policy is None:
        raise PolicyError("a policy is required: connect(database, policy='policy.toml')")
    pol = load_policy(policy)
    given, (database, pol) = database, with_files(database, pol)  # data files: the policy's table, in memory
    if noise is not None and pol.ledger is not None:
        _refuse_test_noise(noise, pol.ledger)  # before anything is opened or created
    if pol.ledger is not None and not init_ledger and not os.path.lexists(pol.ledger):
        raise LedgerError(_missing_ledger(given, policy, pol))  # before anything is opened
    if _is_spark_session(database):
        from dpsql.backends.spark import SparkEngine
        from dpsql.backends.spark_open import open_spark_sources

        if setup is not None:
            setup(database)
        open_spark_sources(database, pol)
        database = SparkEngine(database)
    elif isinstance(database, Backend) and setup is not None:
        raise Error("setup= runs on a DuckDB connection or a Spark session; load a backend's data before connecting")
    if isinstance(database, Backend):
        return Connection(database, pol, Ledger.open(pol.ledger, pol.budget, create=init_ledger), noise=noise,
                          user=user)
    if isinstance(database, duckdb.DuckDBPyConnection):
        con = database
    else:
        _refuse_data_file(database, policy)
        try:
            con = duckdb.connect(str(database), read_only=read_only)
        except duckdb.Error as err:
            raise Error(f"cannot open database {database}: {str(err).splitlines()[0]}") from None
    try:
        if setup is not None:
            setup(con)
        expose_registered(con, pol)
        located = open_sources(con, pol)
        harden(con)
    except BaseException:
        if con is not database:
            con.close()
        raise
    ledger = Ledger.open(pol.ledger, pol.budget, create=init_ledger)
    connection = Connection(con, pol, ledger, noise=noise, located=located, user=user)
    connection.locked_caller_connection = con is database
    return connection

