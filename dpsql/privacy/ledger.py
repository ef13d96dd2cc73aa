"""The privacy-budget ledger: durable, atomic across processes, charged before release.

A SQLite file holds a one-row header (accounting kind, total, creation time)
and one row per charge. A charge is one ``BEGIN IMMEDIATE`` transaction (sum
what is spent, check the total, insert), so two processes never both spend the
last of the budget; WAL with ``synchronous=FULL`` makes a returned charge
survive a crash or ``kill -9``. Callers release a result only after
:meth:`Ledger.charge` has returned. The total is fixed when the ledger is
created: opening it with a budget of another kind or another total is refused,
so editing a policy file cannot raise it. Only :meth:`Ledger.set_total` changes
it, and records the change as a zero-cost entry in the history. A file that is
missing, not a ledger or damaged raises LedgerError and is never reset.

The same file keeps releases for reuse (:mod:`dpsql.privacy.releases`, table
``ledger_releases``, created by the first one stored): each is written after the charge that
paid for it commits, and only if that charge is recorded.
"""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
import tempfile
import threading
import typing as t
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from types import TracebackType

from dpsql.errors import BudgetError, LedgerError
from dpsql.privacy import releases
from dpsql.privacy.budget import KIND_NAMES, KINDS, TOLERANCE, ZCDP, Budget, Cost, to_kind
from dpsql.privacy.releases import StoredRelease

__all__ = ["Entry", "Ledger", "StoredRelease", "format_total"]

_MAGIC = b"SQLite format 3\x00"
_APPLICATION_ID = 0x64707371  # "dpsq"
_FORMAT = 1
_TIMEOUT_S = 30.0  # concurrent processes wait for the write lock rather than fail
_HEADER_COLS = ["id", "format", "kind", "total_epsilon", "total_delta", "total_rho", "created"]
_ENTRY_COLS = ["id", "time", "epsilon", "delta", "rho", "query", "detail", "user"]
#: the entry columns of ledgers made before charges recorded who spent them (migrated on open)
_ENTRY_COLS_V1 = _ENTRY_COLS[:-1]
_ADD_USER = "ALTER TABLE ledger_entries ADD COLUMN user TEXT NOT NULL DEFAULT ''"
_SCHEMA = (
    "CREATE TABLE ledger_header (id INTEGER PRIMARY KEY CHECK (id = 1),"
    " format INTEGER NOT NULL, kind TEXT NOT NULL, total_epsilon REAL NOT NULL,"
    " total_delta REAL NOT NULL, total_rho REAL NOT NULL, created TEXT NOT NULL)",
    "CREATE TABLE ledger_entries (id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " time TEXT NOT NULL, epsilon REAL NOT NULL CHECK (epsilon >= 0),"
    " delta REAL NOT NULL CHECK (delta >= 0), rho REAL NOT NULL CHECK (rho >= 0),"
    " query TEXT NOT NULL, detail TEXT NOT NULL, user TEXT NOT NULL DEFAULT '')",
)

#: ``detail`` of the zero-cost entry that records a change of the total
TOTAL_CHANGED = "total changed from {old} to {new}"
_FIX = ("a ledger's total is fixed when it is created; to change it, run "
        "dpsql --policy FILE --set-budget (or Ledger.set_total), which records the change")


@dataclass(frozen=True)
class Entry:
    """One charge recorded in the ledger (its cost is in the ledger's kind).

    A change of the total (:meth:`Ledger.set_total`) is an entry of zero cost whose ``detail``
    says ``total changed from ... to ...`` and whose ``query`` gives the reason.
    """

    id: int
    time: datetime
    cost: Cost
    query: str
    detail: str
    #: who spent it (the server's user name); empty for the Python API and the command
    user: str = ""


def format_total(total: Cost, kind: str) -> str:
    """A ledger total in full, e.g. ``ε=10, δ=1e-05`` or ``ρ=0.5``."""
    if kind == ZCDP:
        return f"ρ={total.rho:.15g}"
    return f"ε={total.epsilon:.15g}, δ={total.delta:.15g}"


def _same_total(a: Cost, b: Cost) -> bool:
    """Whether two totals are equal up to a tiny relative tolerance (float round trips)."""
    return all(math.isclose(x, y, rel_tol=TOLERANCE, abs_tol=0.0)
               for x, y in ((a.epsilon, b.epsilon), (a.delta, b.delta), (a.rho, b.rho)))


def _now() -> str:
    """The current UTC time, ISO 8601 with microseconds."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


@contextlib.contextmanager
def _immediate(conn: sqlite3.Connection) -> Iterator[None]:
    """One ``BEGIN IMMEDIATE`` transaction: committed at the end of the block, rolled back
    (as far as SQLite still can) when anything escapes it."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        raise


def _connect(target: str | None) -> sqlite3.Connection:
    """Connect with explicit transactions (BEGIN is ours); ``None`` means in memory."""
    if target is None:
        return sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    uri = f"{Path(target).absolute().as_uri()}?mode=rw"  # mode=rw: never create a file
    return sqlite3.connect(uri, uri=True, timeout=_TIMEOUT_S, isolation_level=None,
                           check_same_thread=False)


def _initialise(conn: sqlite3.Connection, budget: Budget) -> None:
    """Write the schema and the header row into an empty database."""
    conn.execute(f"PRAGMA application_id = {_APPLICATION_ID}")
    conn.execute(f"PRAGMA user_version = {_FORMAT}")
    conn.execute("BEGIN IMMEDIATE")
    for statement in _SCHEMA:
        conn.execute(statement)
    t = budget.total
    conn.execute("INSERT INTO ledger_header VALUES (1, ?, ?, ?, ?, ?, ?)",
                 (_FORMAT, budget.kind, t.epsilon, t.delta, t.rho, _now()))
    conn.execute("COMMIT")


def _create_file(path: str, budget: Budget) -> None:
    """Create a ledger at ``path`` atomically: build it aside, then hard-link it in.

    If another process creates ``path`` first, its ledger is kept untouched. The
    directory's filesystem must support hard links (every local POSIX one does).
    """
    directory = os.path.dirname(os.path.abspath(path))
    tmp = ""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".dpsql-ledger-", suffix=".tmp", dir=directory)
        os.close(fd)
        conn = _connect(tmp)
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
            _initialise(conn, budget)
        finally:
            conn.close()  # checkpoints the WAL into the file
        try:
            os.link(tmp, path)  # atomic, and fails if the name exists
        except FileExistsError:
            return  # another process created it first: keep theirs
        with contextlib.suppress(OSError):  # make the directory entry durable (POSIX)
            dir_fd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
    except (sqlite3.Error, OSError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else e
        raise LedgerError(f"cannot create budget ledger {path}: {why}") from e
    finally:
        for leftover in (tmp, tmp + "-wal", tmp + "-shm") if tmp else ():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(leftover)


class _Totals:
    """Exact running sums of the entries read so far (entries are append-only, ids increase).

    Each check reads only the entries added since the last one, so a long ledger costs no more
    to charge than a short one. Sums are kept as exact fractions of the stored floats.
    """

    def __init__(self) -> None:
        self.last_id = 0
        self.sums = [Fraction(0), Fraction(0), Fraction(0)]
        #: the sums as a Cost, while no entry was read since it was made
        self._cost: Cost | None = Cost()

    def read(self, conn: sqlite3.Connection, name: str) -> Cost:
        """The sums of every entry, reading (always) the entries added since the last read."""
        rows = conn.execute(
            "SELECT id, epsilon, delta, rho FROM ledger_entries WHERE id > ? ORDER BY id",
            (self.last_id,),
        ).fetchall()
        return self.add(rows, name)

    def add(self, rows: list[tuple[t.Any, ...]], name: str) -> Cost:
        """The sums after adding ``rows`` (id, ε, δ, ρ), the entries after the last one read."""
        if not rows and self._cost is not None:
            return self._cost  # nothing new: the sums, and so their Cost, are unchanged
        self._cost = None
        for row_id, *values in rows:
            if not all(isinstance(v, (int, float)) and math.isfinite(v) and v >= 0 for v in values):
                raise LedgerError(f"budget ledger {name} is corrupted: entry {row_id} costs {values!r}")
            for i, v in enumerate(values):
                self.sums[i] += Fraction(v)
            self.last_id = row_id
        try:
            self._cost = Cost(*(float(x) for x in self.sums))
        except BudgetError as e:
            raise LedgerError(f"budget ledger {name} is corrupted: entries sum to {e}") from e
        return self._cost


_HEADER_TOTAL = "SELECT total_epsilon, total_delta, total_rho FROM ledger_header"
#: a charge's one read: the header's total with each entry after a given id (NULLs if none)
_HEADER_AND_NEW_ENTRIES = (
    "SELECT h.total_epsilon, h.total_delta, h.total_rho, e.id, e.epsilon, e.delta, e.rho"
    " FROM ledger_header AS h LEFT JOIN ledger_entries AS e ON e.id > ? WHERE h.id = 1 ORDER BY e.id")


def _header_total(conn: sqlite3.Connection, name: str, row: tuple[float, ...] | None = None) -> Cost:
    """The total the header records now (another process may have changed it); ``row``: the
    header's total columns, already read in the caller's transaction."""
    if row is None:
        row = conn.execute(_HEADER_TOTAL).fetchone()
    if row is None:
        raise LedgerError(f"budget ledger {name} is corrupted: it has no header row")
    try:
        return Cost(*row)
    except BudgetError as e:
        raise LedgerError(f"budget ledger {name} is corrupted: header total: {e}") from e


def _spent(conn: sqlite3.Connection, name: str) -> Cost:
    """Sums of every entry's ε, δ, ρ (exact); refuses impossible entries."""
    return _Totals().read(conn, name)


def _spent_by(conn: sqlite3.Connection, name: str, user: str) -> Cost:
    """Exact sums of the entries of one user."""
    sums = [Fraction(0), Fraction(0), Fraction(0)]
    for values in conn.execute("SELECT epsilon, delta, rho FROM ledger_entries WHERE user = ?", (user,)):
        for i, v in enumerate(values):
            sums[i] += Fraction(v)
    try:
        return Cost(*(float(x) for x in sums))
    except BudgetError as e:
        raise LedgerError(f"budget ledger {name} is corrupted: entries sum to {e}") from e


def _check_file(path: str) -> None:
    """Refuse before SQLite touches it a path that is not a writable SQLite file."""
    try:
        with open(path, "rb") as f:
            head = f.read(100)
    except OSError as e:
        raise LedgerError(f"budget ledger {path} cannot be read: {e.strerror or e}") from e
    if len(head) < 100 or not head.startswith(_MAGIC):
        raise LedgerError(f"budget ledger {path} is not a SQLite database (not a dpsql ledger)")
    if not os.access(path, os.W_OK):
        raise LedgerError(f"budget ledger {path} is not writable")


def _validate(conn: sqlite3.Connection, name: str, budget: Budget | None) -> tuple[Budget, str]:
    """Check that ``conn`` holds a sound ledger for ``budget`` (``None``: any); return the
    budget its header records and its creation time."""
    bad = f"budget ledger {name} is corrupted:"
    check = [str(r[0]).replace("\n", " ") for r in conn.execute("PRAGMA integrity_check")]
    if check != ["ok"]:
        why = "; ".join(check[:3])
        raise LedgerError(f"budget ledger {name} failed its integrity check: {why}")
    if conn.execute("PRAGMA application_id").fetchone()[0] != _APPLICATION_ID:
        raise LedgerError(f"budget ledger {name} is not a dpsql budget ledger")
    for table, expected in (("ledger_header", _HEADER_COLS), ("ledger_entries", _ENTRY_COLS)):
        found = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
        if found != expected and not (table == "ledger_entries" and found == _ENTRY_COLS_V1):
            raise LedgerError(f"{bad} table {table} is missing or altered")
    rows = conn.execute(f"SELECT {', '.join(_HEADER_COLS[1:])} FROM ledger_header").fetchall()
    if len(rows) != 1:
        raise LedgerError(f"{bad} it has {len(rows)} header rows")
    fmt, kind, eps, delta, rho, created = rows[0]
    if fmt != _FORMAT or kind not in KINDS or not isinstance(created, str):
        raise LedgerError(f"{bad} unknown header (format {fmt!r}, kind {kind!r})")
    try:
        recorded = Budget(Cost(eps, delta, rho))
    except BudgetError as e:
        raise LedgerError(f"{bad} header total: {e}") from e
    if recorded.kind != kind:
        raise LedgerError(f"{bad} header total {recorded.total} is not in its kind {kind!r}")
    if budget is not None and kind != budget.kind:
        raise LedgerError(f"budget ledger {name} accounts in {KIND_NAMES[kind]} but the policy's "
                          f"budget is {budget.kind_name}; use a separate ledger")
    if budget is not None and not _same_total(recorded.total, budget.total):
        raise LedgerError(
            f"budget ledger {name} has a total of {format_total(recorded.total, kind)} but the "
            f"policy's budget is {format_total(budget.total, kind)}; {_FIX}")
    _spent(conn, name)
    return recorded, created


def _add_user_column(conn: sqlite3.Connection) -> None:
    """Migrate a ledger made before entries recorded their user: add the column (empty for the
    old entries), in one transaction that another process may have done first."""
    with _immediate(conn):
        if [r[1] for r in conn.execute("PRAGMA table_info(ledger_entries)")] == _ENTRY_COLS_V1:
            conn.execute(_ADD_USER)


def _check_releases_table(conn: sqlite3.Connection, name: str) -> None:
    """Refuse an altered table of reusable releases (the first release stored creates it)."""
    columns = [r[1] for r in conn.execute("PRAGMA table_info(ledger_releases)")]
    if columns and columns != releases.COLUMNS:
        raise LedgerError(f"budget ledger {name} is corrupted: table ledger_releases is altered")


class Ledger:
    """A privacy-budget ledger; get one with :meth:`Ledger.open`."""

    def __init__(self, conn: sqlite3.Connection, path: str | None, budget: Budget,
                 created: str) -> None:
        self._conn: sqlite3.Connection | None = conn
        self._name = path if path is not None else "<in-memory>"
        self._lock = threading.RLock()
        self.path = path
        self.budget = budget  # the total the header records
        self.kind = budget.kind  # "approx" or "zcdp"
        self.created = created  # ISO 8601 UTC creation time from the header
        self._totals = _Totals()

    @classmethod
    def open(cls, path: str | os.PathLike[str] | None, budget: Budget | None, *,
             create: bool = False) -> Ledger:
        """Open the ledger at ``path`` (``None``: a fresh in-memory ledger for one process).

        A missing file is created only when ``create`` is true, with ``budget`` as its total.
        Raises LedgerError (naming the file) if it is missing, not a ledger, damaged, or its
        total is not ``budget``'s (kind and amounts). ``budget=None`` opens an existing file
        with the total it records (to read it, or to change it with :meth:`set_total`).
        """
        if path is None:
            if budget is None:
                raise LedgerError("an in-memory budget ledger needs a budget")
            conn = _connect(None)
            _initialise(conn, budget)
            return cls(conn, None, budget, _now())
        name = os.fspath(path)
        if not os.path.lexists(name):
            if budget is None or not create:
                raise LedgerError(
                    f"budget ledger {name} does not exist; create it with create=True "
                    "(dpsql --init-ledger); dpsql never starts a fresh budget silently")
            _create_file(name, budget)
        _check_file(name)
        try:
            conn = _connect(name)
        except sqlite3.Error as e:
            raise LedgerError(f"budget ledger {name} cannot be opened: {e}") from e
        try:
            recorded, created = _validate(conn, name, budget)
            conn.execute("PRAGMA journal_mode = WAL")  # only now: never alter a foreign file
            conn.execute("PRAGMA synchronous = FULL")
            _add_user_column(conn)
            _check_releases_table(conn, name)
        except BaseException as e:
            conn.close()
            if isinstance(e, sqlite3.Error):
                raise LedgerError(f"budget ledger {name} is not a valid ledger: {e}") from e
            raise
        return cls(conn, name, recorded, created)

    @contextlib.contextmanager
    def _db(self, action: str) -> Iterator[sqlite3.Connection]:
        """Hold the lock and the connection; turn SQLite failures into LedgerError."""
        with self._lock:
            if self._conn is None:
                raise LedgerError(f"budget ledger {self._name} is closed")
            try:
                yield self._conn
            except sqlite3.Error as e:
                raise LedgerError(f"budget ledger {self._name} {action}: {e}") from e

    def charge(self, cost: Cost, query: str = "", detail: str = "", *, user: str = "",
               user_total: Cost | None = None) -> int:
        """Record ``cost`` if it fits in the remaining budget; return the new entry id.

        Check and insert are one ``BEGIN IMMEDIATE`` transaction, durably committed
        on return. A zero cost writes nothing and returns 0. Raises BudgetError
        (nothing charged) if the cost exceeds what remains or has no equivalent in
        the ledger's kind, LedgerError if the ledger cannot be written or its total was
        changed (by :meth:`set_total` elsewhere) since it was opened. ``user`` is recorded with
        the entry; with ``user_total`` (that user's share of the total) the user's own charges,
        this one included, must also fit in it, checked in the same transaction.
        """
        if not isinstance(cost, Cost):
            raise TypeError(f"charge() needs a Cost, got {type(cost).__name__}")
        if cost.is_zero():
            return 0
        amount = to_kind(cost, self.kind)
        with self._db("could not be charged") as conn, _immediate(conn):
            # one statement reads the header's total and the entries added since the last read
            read = conn.execute(_HEADER_AND_NEW_ENTRIES, (self._totals.last_id,)).fetchall()
            row = read[0][:3] if len(read) >= 1 else None  # no row: no header (refused below)
            opened = self.budget.total
            # the very floats the ledger was opened with: unchanged (anything else is checked)
            same = row == (opened.epsilon, opened.delta, opened.rho)
            total = opened if same else _header_total(conn, self._name, row)
            if not same and not _same_total(total, opened):
                raise LedgerError(
                    f"the total of budget ledger {self._name} was changed to "
                    f"{format_total(total, self.kind)} after it was opened with "
                    f"{format_total(self.budget.total, self.kind)}; open it again")
            entries = [r[3:] for r in read if r[3] is not None]
            self.budget.check(self._totals.add(entries, self._name), amount)  # BudgetError: roll back
            if user_total is not None:
                Budget(user_total).check(_spent_by(conn, self._name, user), amount)
            cur = conn.execute(
                "INSERT INTO ledger_entries (time, epsilon, delta, rho, query, detail, user)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (_now(), amount.epsilon, amount.delta, amount.rho, str(query), str(detail), str(user)))
            entry_id = int(cur.lastrowid or 0)
        return entry_id

    def set_total(self, budget: Budget, reason: str) -> Cost:
        """Make ``budget``'s total the ledger's; return the total it replaces.

        The header is updated and the change recorded (a zero-cost entry: ``detail`` says
        ``total changed from ... to ...``, ``query`` gives ``reason``) in one ``BEGIN IMMEDIATE``
        transaction. An equal total writes nothing. Raises LedgerError if ``budget`` accounts
        in another kind (a ledger keeps its kind) or the ledger cannot be written.
        """
        if not isinstance(budget, Budget):
            raise TypeError(f"set_total() needs a Budget, got {type(budget).__name__}")
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError("set_total() needs a reason, which is recorded with the change")
        if budget.kind != self.kind:
            raise LedgerError(f"budget ledger {self._name} accounts in {KIND_NAMES[self.kind]}; "
                              f"its total cannot become {budget.kind_name}: use a separate ledger")
        with self._db("could not change its total") as conn:
            with _immediate(conn):
                old = _header_total(conn, self._name)
                changed = not _same_total(old, budget.total)
                new = budget.total if changed else old
                if changed:
                    conn.execute(
                        "UPDATE ledger_header SET total_epsilon = ?, total_delta = ?, total_rho = ?",
                        (new.epsilon, new.delta, new.rho))
                    change = TOTAL_CHANGED.format(old=format_total(old, self.kind),
                                                  new=format_total(new, self.kind))
                    conn.execute(
                        "INSERT INTO ledger_entries (time, epsilon, delta, rho, query, detail)"
                        " VALUES (?, 0, 0, 0, ?, ?)", (_now(), reason.strip(), change))
            self.budget = Budget(new)  # what the header now records
        return old

    def store_release(self, key: str, entry: int, payload: bytes) -> bool:
        """Keep ``payload`` (a release as published: noisy values, never noise seeds) for reuse
        under ``key``, tied to the charge ``entry`` that paid for it; return whether it was kept.

        Call only after :meth:`charge` has returned ``entry``: the row is written only if that
        charge is recorded with a nonzero cost, so a stored release without a charge cannot
        exist. A crash before this call leaves a charge without a stored release, which only
        means an identical query later is charged again.
        """
        if entry <= 0:
            return False
        with self._db("could not store a release") as conn, _immediate(conn):
            return releases.store(conn, key, entry, payload)

    def find_release(self, key: str, max_age_seconds: float) -> StoredRelease | None:
        """The newest release kept under ``key`` whose charge is at most ``max_age_seconds``
        old (``math.inf``: any age), or None."""
        with self._db("cannot be read") as conn:
            return releases.find(conn, key, max_age_seconds)

    def spent(self) -> Cost:
        """The sum of every recorded charge (in the ledger's kind)."""
        with self._db("cannot be read") as conn:
            return self._totals.read(conn, self._name)

    def spent_by(self, user: str) -> Cost:
        """The sum of the charges recorded for ``user``."""
        with self._db("cannot be read") as conn:
            return _spent_by(conn, self._name, user)

    def remaining(self) -> Cost:
        """What is left of the total: ε and δ, or ρ (never negative)."""
        return self.budget.remaining(self.spent())

    def history(self) -> list[Entry]:
        """Every recorded charge and change of the total, oldest first."""
        with self._db("cannot be read") as conn:
            rows = conn.execute(
                f"SELECT {', '.join(_ENTRY_COLS)} FROM ledger_entries ORDER BY id").fetchall()
        return [Entry(i, datetime.fromisoformat(t), Cost(e, d, r), q, dt, u)
                for i, t, e, d, r, q, dt, u in rows]

    def close(self) -> None:
        """Close the ledger (idempotent); later calls raise LedgerError."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
