"""The privacy-budget ledger: durable, atomic across processes, charged before release.

A SQLite file holds a one-row header (accounting kind, original total, creation
time) and one row per charge. A charge is one ``BEGIN IMMEDIATE`` transaction
(sum what is spent, check the total, insert), so two processes never both spend
the last of the budget; WAL with ``synchronous=FULL`` makes a returned charge
survive a crash or ``kill -9``. Callers release a result only after
:meth:`Ledger.charge` has returned. The total in force is the budget passed to
:meth:`Ledger.open` (the header records the original one; if a policy lowers it
below what is spent, nothing remains); the kind must match the header. A file
that is missing, not a ledger or damaged raises LedgerError and is never reset.
"""

from __future__ import annotations

import contextlib
import math
from fractions import Fraction
import os
import sqlite3
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType

from .budget import KIND_NAMES, KINDS, Budget, Cost, to_kind
from .errors import BudgetError, LedgerError

__all__ = ["Entry", "Ledger"]

_MAGIC = b"SQLite format 3\x00"
_APPLICATION_ID = 0x64707371  # "dpsq"
_FORMAT = 1
_TIMEOUT_S = 30.0  # concurrent processes wait for the write lock rather than fail
_HEADER_COLS = ["id", "format", "kind", "total_epsilon", "total_delta", "total_rho", "created"]
_ENTRY_COLS = ["id", "time", "epsilon", "delta", "rho", "query", "detail"]
_SCHEMA = (
    "CREATE TABLE ledger_header (id INTEGER PRIMARY KEY CHECK (id = 1),"
    " format INTEGER NOT NULL, kind TEXT NOT NULL, total_epsilon REAL NOT NULL,"
    " total_delta REAL NOT NULL, total_rho REAL NOT NULL, created TEXT NOT NULL)",
    "CREATE TABLE ledger_entries (id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " time TEXT NOT NULL, epsilon REAL NOT NULL CHECK (epsilon >= 0),"
    " delta REAL NOT NULL CHECK (delta >= 0), rho REAL NOT NULL CHECK (rho >= 0),"
    " query TEXT NOT NULL, detail TEXT NOT NULL)",
)

@dataclass(frozen=True)
class Entry:
    """One charge recorded in the ledger (its cost is in the ledger's kind)."""

    id: int
    time: datetime
    cost: Cost
    query: str
    detail: str


def _now() -> str:
    """The current UTC time, ISO 8601 with microseconds."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


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

    def read(self, conn: sqlite3.Connection, name: str) -> Cost:
        rows = conn.execute(
            "SELECT id, epsilon, delta, rho FROM ledger_entries WHERE id > ? ORDER BY id",
            (self.last_id,),
        ).fetchall()
        for row_id, *values in rows:
            if not all(isinstance(v, (int, float)) and math.isfinite(v) and v >= 0 for v in values):
                raise LedgerError(f"budget ledger {name} is corrupted: entry {row_id} costs {values!r}")
            for i, v in enumerate(values):
                self.sums[i] += Fraction(v)
            self.last_id = row_id
        try:
            return Cost(*(float(x) for x in self.sums))
        except BudgetError as e:
            raise LedgerError(f"budget ledger {name} is corrupted: entries sum to {e}") from e


def _spent(conn: sqlite3.Connection, name: str) -> Cost:
    """Sums of every entry's ε, δ, ρ (exact); refuses impossible entries."""
    return _Totals().read(conn, name)


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


def _validate(conn: sqlite3.Connection, name: str, budget: Budget) -> tuple[Cost, str]:
    """Check that ``conn`` holds a sound ledger for ``budget``; return (original total, created)."""
    bad = f"budget ledger {name} is corrupted:"
    check = [str(r[0]).replace("\n", " ") for r in conn.execute("PRAGMA integrity_check")]
    if check != ["ok"]:
        why = "; ".join(check[:3])
        raise LedgerError(f"budget ledger {name} failed its integrity check: {why}")
    if conn.execute("PRAGMA application_id").fetchone()[0] != _APPLICATION_ID:
        raise LedgerError(f"budget ledger {name} is not a dpsql budget ledger")
    for table, expected in (("ledger_header", _HEADER_COLS), ("ledger_entries", _ENTRY_COLS)):
        if [r[1] for r in conn.execute(f"PRAGMA table_info({table})")] != expected:
            raise LedgerError(f"{bad} table {table} is missing or altered")
    rows = conn.execute(f"SELECT {', '.join(_HEADER_COLS[1:])} FROM ledger_header").fetchall()
    if len(rows) != 1:
        raise LedgerError(f"{bad} it has {len(rows)} header rows")
    fmt, kind, eps, delta, rho, created = rows[0]
    if fmt != _FORMAT or kind not in KINDS or not isinstance(created, str):
        raise LedgerError(f"{bad} unknown header (format {fmt!r}, kind {kind!r})")
    try:
        original = Cost(eps, delta, rho)
    except BudgetError as e:
        raise LedgerError(f"{bad} header total: {e}") from e
    if kind != budget.kind:
        raise LedgerError(f"budget ledger {name} accounts in {KIND_NAMES[kind]} but the policy's "
                          f"budget is {budget.kind_name}; use a separate ledger")
    _spent(conn, name)
    return original, created


class Ledger:
    """A privacy-budget ledger; get one with :meth:`Ledger.open`."""

    def __init__(self, conn: sqlite3.Connection, path: str | None, budget: Budget,
                 original_total: Cost, created: str) -> None:
        self._conn: sqlite3.Connection | None = conn
        self._name = path if path is not None else "<in-memory>"
        self._lock = threading.RLock()
        self.path = path
        self.budget = budget
        self.kind = budget.kind  # "approx" or "zcdp"
        self.original_total = original_total  # as recorded in the header at creation
        self.created = created  # ISO 8601 UTC creation time from the header
        self._totals = _Totals()

    @classmethod
    def open(cls, path: str | os.PathLike[str] | None, budget: Budget, *,
             create: bool = False) -> Ledger:
        """Open the ledger at ``path`` (``None``: a fresh in-memory ledger for one process).

        A missing file is created only when ``create`` is true. Raises
        LedgerError (naming the file) if it is missing, not a ledger, damaged
        or accounts in another kind than ``budget``.
        """
        if path is None:
            conn = _connect(None)
            _initialise(conn, budget)
            return cls(conn, None, budget, budget.total, _now())
        name = os.fspath(path)
        if not os.path.lexists(name):
            if not create:
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
            original, created = _validate(conn, name, budget)
            conn.execute("PRAGMA journal_mode = WAL")  # only now: never alter a foreign file
            conn.execute("PRAGMA synchronous = FULL")
        except BaseException as e:
            conn.close()
            if isinstance(e, sqlite3.Error):
                raise LedgerError(f"budget ledger {name} is not a valid ledger: {e}") from e
            raise
        return cls(conn, name, budget, original, created)

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

    def charge(self, cost: Cost, query: str = "", detail: str = "") -> int:
        """Record ``cost`` if it fits in the remaining budget; return the new entry id.

        Check and insert are one ``BEGIN IMMEDIATE`` transaction, durably committed
        on return. A zero cost writes nothing and returns 0. Raises BudgetError
        (nothing charged) if the cost exceeds what remains or has no equivalent in
        the ledger's kind, LedgerError if the ledger cannot be written.
        """
        if not isinstance(cost, Cost):
            raise TypeError(f"charge() needs a Cost, got {type(cost).__name__}")
        if cost.is_zero():
            return 0
        amount = to_kind(cost, self.kind)
        with self._db("could not be charged") as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                self.budget.check(self._totals.read(conn, self._name), amount)  # BudgetError: roll back
                cur = conn.execute(
                    "INSERT INTO ledger_entries (time, epsilon, delta, rho, query, detail)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (_now(), amount.epsilon, amount.delta, amount.rho, str(query), str(detail)))
                entry_id = int(cur.lastrowid or 0)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                raise
        return entry_id

    def spent(self) -> Cost:
        """The sum of every recorded charge (in the ledger's kind)."""
        with self._db("cannot be read") as conn:
            return self._totals.read(conn, self._name)

    def remaining(self) -> Cost:
        """What is left of the total: ε and δ, or ρ (never negative)."""
        return self.budget.remaining(self.spent())

    def history(self) -> list[Entry]:
        """Every recorded charge, oldest first."""
        with self._db("cannot be read") as conn:
            rows = conn.execute(
                f"SELECT {', '.join(_ENTRY_COLS)} FROM ledger_entries ORDER BY id").fetchall()
        return [Entry(i, datetime.fromisoformat(t), Cost(e, d, r), q, dt)
                for i, t, e, d, r, q, dt in rows]

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
