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

The same file keeps releases for reuse (:mod:`dpsql._accounting.releases`, table
``ledger_releases``, created by the first one stored): each is written after the charge that
paid for it commits, and only if that charge is recorded.

The file itself (schema, creation, checks on open, migration, exact sums of the entries) is
:mod:`dpsql._accounting.ledger_file`.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Protocol

from dpsql._accounting import releases
from dpsql._accounting.budget import KIND_NAMES, Budget, Cost, to_kind
from dpsql._accounting.ledger_file import (
    ENTRY_COLS,
    HEADER_AND_NEW_ENTRIES,
    Totals,
    add_user_column,
    check_current,
    check_file,
    check_releases_table,
    connect,
    create_file,
    format_total,
    header_total,
    immediate,
    initialise,
    now,
    same_total,
    spent_by,
    validate,
)
from dpsql._accounting.releases import StoredRelease
from dpsql.errors import LedgerError

__all__ = ["BudgetLedger", "Entry", "Ledger", "StoredRelease", "format_total"]

#: ``detail`` of the zero-cost entry that records a change of the total
TOTAL_CHANGED = "total changed from {old} to {new}"


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
    #: who spent it: the server's user name, or ``connect(..., user=...)``; empty when unnamed
    user: str = ""


# Fixed text: the ledger's own column names, joined once.
_HISTORY = "SELECT " + ", ".join(ENTRY_COLS) + " FROM ledger_entries ORDER BY id"

class BudgetLedger(Protocol):
    """What a connection checks and charges: a :class:`Ledger`, or a view of one (a server
    user's share, ``dpsql.interfaces.server.pool.UserLedger``)."""

    path: str | None
    kind: str
    budget: Budget

    def charge(self, cost: Cost, query: str = "", detail: str = "", *, user: str = "") -> int: ...

    def spent(self) -> Cost: ...

    def remaining(self) -> Cost: ...

    def history(self) -> list[Entry]: ...

    def find_release(self, key: str, max_age: float, /) -> StoredRelease | None: ...

    def store_release(self, key: str, entry: int, payload: bytes, /) -> bool: ...

    def close(self) -> None: ...


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
        self._totals = Totals()

    @classmethod
    def open(cls, path: str | os.PathLike[str] | None, budget: Budget | None, *,
             create: bool = False, read_only: bool = False) -> Ledger:
        """Open the ledger at ``path`` (``None``: a fresh in-memory ledger for one process).

        A missing file is created only when ``create`` is true, with ``budget`` as its total.
        Raises LedgerError (naming the file) if it is missing, not a ledger, damaged, or its
        total is not ``budget``'s (kind and amounts). ``budget=None`` opens an existing file
        with the total it records (to read it, or to change it with :meth:`set_total`).
        ``read_only`` opens an existing file without writing to it, also one the caller may not
        write (``dpsql --budget``): every charge is then refused.
        """
        if path is None:
            if budget is None:
                raise LedgerError("an in-memory budget ledger needs a budget")
            conn = connect(None)
            initialise(conn, budget)
            return cls(conn, None, budget, now())
        name = os.fspath(path)
        if not os.path.lexists(name):
            if budget is None or not create:
                raise LedgerError(
                    f"budget ledger {name} does not exist; create it with create=True "
                    "(dpsql --init-ledger); dpsql never starts a fresh budget silently")
            create_file(name, budget)
        check_file(name, read_only)
        try:
            conn = connect(name, read_only)
        except sqlite3.Error as e:
            raise LedgerError(f"budget ledger {name} cannot be opened: {e}") from e
        try:
            recorded, created = validate(conn, name, budget)
            if read_only:
                check_current(conn, name)
            else:
                conn.execute("PRAGMA journal_mode = WAL")  # only now: never alter a foreign file
                conn.execute("PRAGMA synchronous = FULL")
                add_user_column(conn)
            check_releases_table(conn, name)
        except BaseException as e:
            conn.close()
            if isinstance(e, sqlite3.Error):
                raise LedgerError(f"budget ledger {name} is not a valid ledger: {e}") from e
            raise
        return cls(conn, name, recorded, created)

    def _db(self, action: str) -> "_Held":
        """Hold the lock and the connection; turn SQLite failures into LedgerError."""
        return _Held(self, action)

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
        with self._db("could not be charged") as conn, immediate(conn):
            # one statement reads the header's total and the entries added since the last read
            read = conn.execute(HEADER_AND_NEW_ENTRIES, (self._totals.last_id,)).fetchall()
            row = read[0][:3] if len(read) >= 1 else None  # no row: no header (refused below)
            opened = self.budget.total
            # the very floats the ledger was opened with: unchanged (anything else is checked)
            same = row == (opened.epsilon, opened.delta, opened.rho)
            total = opened if same else header_total(conn, self._name, row)
            if not same and not same_total(total, opened):
                raise LedgerError(
                    f"the total of budget ledger {self._name} was changed to "
                    f"{format_total(total, self.kind)} after it was opened with "
                    f"{format_total(self.budget.total, self.kind)}; open it again")
            entries = [r[3:] for r in read if r[3] is not None]
            self.budget.check(self._totals.add(entries, self._name), amount)  # BudgetError: roll back
            if user_total is not None:
                Budget(user_total).check(spent_by(conn, self._name, user), amount)
            cur = conn.execute(
                "INSERT INTO ledger_entries (time, epsilon, delta, rho, query, detail, user)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (now(), amount.epsilon, amount.delta, amount.rho, str(query), str(detail), str(user)))
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
            with immediate(conn):
                old = header_total(conn, self._name)
                changed = not same_total(old, budget.total)
                new = budget.total if changed else old
                if changed:
                    conn.execute(
                        "UPDATE ledger_header SET total_epsilon = ?, total_delta = ?, total_rho = ?",
                        (new.epsilon, new.delta, new.rho))
                    change = TOTAL_CHANGED.format(old=format_total(old, self.kind),
                                                  new=format_total(new, self.kind))
                    conn.execute(
                        "INSERT INTO ledger_entries (time, epsilon, delta, rho, query, detail)"
                        " VALUES (?, 0, 0, 0, ?, ?)", (now(), reason.strip(), change))
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
        with self._db("could not store a release") as conn, immediate(conn):
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
            return spent_by(conn, self._name, user)

    def remaining(self) -> Cost:
        """What is left of the total: ε and δ, or ρ (never negative)."""
        return self.budget.remaining(self.spent())

    def history(self) -> list[Entry]:
        """Every recorded charge and change of the total, oldest first."""
        with self._db("cannot be read") as conn:
            rows = conn.execute(_HISTORY).fetchall()
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


class _Held:
    """:meth:`Ledger._db`: the ledger's lock held and its connection given for a block; a SQLite
    error escaping the block becomes LedgerError naming ``action``. A class rather than a
    generator: every check and charge enters it, and ``contextlib``'s machinery cost more."""

    __slots__ = ("ledger", "action")

    def __init__(self, ledger: Ledger, action: str) -> None:
        self.ledger, self.action = ledger, action

    def __enter__(self) -> sqlite3.Connection:
        ledger = self.ledger
        ledger._lock.acquire()
        if ledger._conn is None:
            ledger._lock.release()
            raise LedgerError(f"budget ledger {ledger._name} is closed")
        return ledger._conn

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.ledger._lock.release()
        if isinstance(exc, sqlite3.Error):
            raise LedgerError(f"budget ledger {self.ledger._name} {self.action}: {exc}") from exc
