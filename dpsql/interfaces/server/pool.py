"""The worker pool: dpsql runs off the event loop, one dpsql connection per worker thread.

Each worker has its own :class:`dpsql.Connection` on a cursor of the one locked-down DuckDB
(cursors are separate connections to the same database), or on Spark on an engine of its own
over the server's one Spark session, and all of them share one
:class:`~dpsql._accounting.ledger.Ledger`, whose charges are serialised by a lock and a SQLite
``BEGIN IMMEDIATE`` transaction. Before each statement the worker's connection is given the
ledger as the statement's user sees it (:class:`UserLedger`): charges record the user, and a
user with a budget share may spend at most that share of the total.
"""

from __future__ import annotations

import asyncio
import threading
import typing as t
from concurrent.futures import ThreadPoolExecutor

from dpsql._accounting.budget import Budget, Cost
from dpsql._accounting.ledger import Ledger
from dpsql.connection import Connection

from .columns import Binder

if t.TYPE_CHECKING:
    from dpsql._accounting.ledger import Entry

    from .users import User

T = t.TypeVar("T")


class UserLedger:
    """The shared ledger as one user sees it: what the connection checks and charges."""

    def __init__(self, ledger: Ledger, user: str, share: float | None) -> None:
        self.shared = ledger
        self.user = user
        self.path = ledger.path
        self.kind = ledger.kind
        total = ledger.budget.total
        self.share_total = None if share is None else Cost(total.epsilon * share, total.delta * share,
                                                           total.rho * share)
        #: the user's share (checked before the statistics run); the total is checked by the charge
        self.budget = ledger.budget if self.share_total is None else Budget(self.share_total)

    def spent(self) -> Cost:
        return self.shared.spent() if self.share_total is None else self.shared.spent_by(self.user)

    def remaining(self) -> Cost:
        return self.budget.remaining(self.spent())

    def history(self) -> list[Entry]:
        return [e for e in self.shared.history() if e.user == self.user]

    def charge(self, cost: Cost, query: str = "", detail: str = "", *, user: str = "") -> int:
        # the entry records the authenticated user, whatever the connection's ``user`` says
        return self.shared.charge(cost, query=query, detail=detail, user=self.user, user_total=self.share_total)

    def find_release(self, key: str, max_age: float) -> t.Any:
        return self.shared.find_release(key, max_age)

    def store_release(self, key: str, entry: int, payload: bytes) -> bool:
        return self.shared.store_release(key, entry, payload)

    def close(self) -> None:
        """The shared ledger stays open: the pool closes it."""


class Worker:
    """What one worker thread holds."""

    def __init__(self, main: Connection) -> None:
        # its own engine over the server's data: a cursor of the one DuckDB, or an engine over
        # the one Spark session (Backend.sibling)
        self.connection = Connection(main.engine.sibling(), main.policy, main.ledger, noise=main.noise)
        self.binder = Binder()

    def close(self) -> None:
        self.binder.close()
        self.connection.engine.close()


class Pool:
    """Runs dpsql work in ``size`` threads, each with its own :class:`Worker`."""

    def __init__(self, main: Connection, size: int) -> None:
        if not isinstance(main.ledger, Ledger):  # each user's view (UserLedger) is made from it
            raise TypeError("the server's main connection must hold the ledger itself, not a view of it")
        self.main = main
        #: the one ledger every user's share is charged to
        self.ledger = main.ledger
        self.size = size
        self._local = threading.local()
        self._workers: list[Worker] = []
        self._lock = threading.Lock()
        self._executor = ThreadPoolExecutor(max_workers=size, thread_name_prefix="dpsql-worker")

    def _worker(self) -> Worker:
        worker = getattr(self._local, "worker", None)
        if worker is None:
            with self._lock:  # the main connection's cursor() is not called concurrently
                worker = Worker(self.main)
                self._workers.append(worker)
            self._local.worker = worker
        return worker

    async def run(self, fn: t.Callable[[Worker], T]) -> T:
        """Run ``fn(worker)`` on a worker thread; the event loop keeps serving other clients."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: fn(self._worker()))

    def ledger_for(self, user: User | None, name: str) -> UserLedger:
        return UserLedger(self.ledger, name, user.share if user is not None else None)

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        for worker in self._workers:
            worker.close()
        self.main.close()
