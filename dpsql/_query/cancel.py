"""Ctrl-C while a query runs: the engine stops within a moment, and nothing is charged.

Python runs a signal's handler only between the bytecodes of the main thread, and DuckDB's
Python client looks for a pending signal only between the tasks of a statement. A long task (a
join, a large aggregate) kept Ctrl-C waiting for a minute or more, and the client then raised a
bare ``RuntimeError("Query interrupted")``. Here the signal is acted on when it arrives:

* while :class:`Cancellation` is active (on the main thread, around one query), Python's own
  C-level signal handler writes the signal's number to a socket (``signal.set_wakeup_fd``);
* a watcher thread, blocked on that socket, wakes at once and calls the engine's ``cancel()``
  (DuckDB's ``connection.interrupt()``, Spark's ``cancelAllJobs()``), while the main thread is
  still inside the engine, and calls it again every :data:`AGAIN` seconds until the query
  stops (a statement that had not started yet, or a Spark job not yet submitted, misses the
  first call); the engine's call then fails, and that failure becomes
  :class:`~dpsql.errors.QueryCancelled`;
* the Python-level SIGINT handler only records the signal (it raises nothing inside the
  engine's code); the previous handler and wakeup descriptor are put back afterwards.
* one Ctrl-C reaches both the handler and the watcher, in either order: a query that saw one
  writes a marker to the socket when it ends, and the watcher drops SIGINT bytes read before
  that marker, so that a watcher slow to wake never cancels the query after.

The budget is charged after the statistics ran. :meth:`Cancellation.hold` marks that point: a
Ctrl-C before it cancels the query and nothing is charged; a Ctrl-C after it lets the charge
and the release finish (:attr:`Cancellation.late`), so that a charged result is never lost.

On another thread than the main one, or when SIGINT is ignored or left to the operating
system's default, nothing is installed: the query runs as it would without this module.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import typing as t

from dpsql.errors import QueryCancelled

#: seconds between two calls of the engine's ``cancel()`` after Ctrl-C, until the query stops
AGAIN = 0.25

#: the byte a finished query writes to the wakeup socket after the SIGINTs it saw (no signal is 0)
_BARRIER = 0


class _Watcher:
    """The thread that reads the wakeup socket; one per process, started on first use."""

    def __init__(self) -> None:
        self.reader, self.writer = socket.socketpair()
        self.writer.setblocking(False)  # set_wakeup_fd needs a descriptor that never blocks
        self.pid = os.getpid()
        #: the Cancellation now active on the main thread, if any
        self.active: Cancellation | None = None
        #: barriers written and not yet read: SIGINT bytes before them belong to finished queries
        self.barriers = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._run, name="dpsql-sigint", daemon=True).start()

    def _run(self) -> None:
        while True:
            try:
                data = self.reader.recv(64)
            except OSError:
                return
            if not data:
                return
            self.dispatch(data)

    def dispatch(self, data: bytes) -> None:
        """Act on bytes read from the wakeup socket: a SIGINT cancels the active query, unless
        it came before a :data:`_BARRIER` still unread (it was then seen by the handler of a query
        already over); another signal's byte goes on to the descriptor it was meant for."""
        for byte in data:
            if byte == _BARRIER:
                with self._lock:
                    self.barriers -= 1
                continue
            active = self.active
            if byte != signal.SIGINT:
                if active is not None:
                    active.forward(bytes([byte]))
            elif active is not None and not self.barriers:
                active.signalled()

    def barrier(self) -> None:
        """A query that saw Ctrl-C is over: the SIGINT bytes still unread are its own, and are
        dropped up to the marker written here (a watcher slow to wake would else cancel the next
        query with them)."""
        with self._lock:  # counted first: the watcher may read the marker before send() returns
            self.barriers += 1
        try:
            self.writer.send(bytes([_BARRIER]))
        except OSError:  # the buffer is full: the marker is not there to be read
            with self._lock:
                self.barriers -= 1


_WATCHER: _Watcher | None = None


def _watcher() -> _Watcher:
    global _WATCHER
    if _WATCHER is None or _WATCHER.pid != os.getpid():  # a forked child has no such thread
        _WATCHER = _Watcher()
    return _WATCHER


class Cancellation:
    """Around one query: Ctrl-C calls ``cancel`` at once and makes the query raise
    :class:`QueryCancelled` (see the module's docstring)."""

    def __init__(self, cancel: t.Callable[[], None] | None) -> None:
        self.cancel = cancel
        #: Ctrl-C came before :meth:`hold`: the query is cancelled, nothing is charged
        self.fired = False
        #: Ctrl-C came after :meth:`hold`: the charge and the release went on
        self.late = False
        self._held = False
        #: the SIGINT handler ran: the watcher may yet read that signal's byte, after this query
        self._seen = False
        self._done = threading.Event()
        self._installed: tuple[t.Any, int, _Watcher | None, Cancellation | None] | None = None

    def __enter__(self) -> "Cancellation":
        if threading.current_thread() is not threading.main_thread():
            return self
        previous = signal.signal(signal.SIGINT, self._handler)
        if not callable(previous):  # ignored, or the system's default: not ours to change
            signal.signal(signal.SIGINT, previous)
            return self
        shared = _watcher()
        watcher: _Watcher | None = shared
        try:
            old_fd = signal.set_wakeup_fd(shared.writer.fileno(), warn_on_full_buffer=False)
        except (ValueError, OSError):  # no wakeup descriptor: the handler still records Ctrl-C
            watcher, old_fd = None, -1
        self._installed = (previous, old_fd, watcher, watcher.active if watcher else None)
        if watcher is not None:
            watcher.active = self
        return self

    def __exit__(self, kind: t.Any, err: BaseException | None, tb: t.Any) -> None:
        self._done.set()
        if self._installed is not None:
            previous, old_fd, watcher, outer = self._installed
            self._installed = None
            if watcher is not None:
                watcher.active = outer
                signal.set_wakeup_fd(old_fd)
            signal.signal(signal.SIGINT, previous)  # runs a signal still pending with ours first
            if watcher is not None and self._seen:
                watcher.barrier()
        if err is not None and self.fired and not self._held and not isinstance(err, QueryCancelled):
            # the engine's own failure (DuckDB's InterruptException, a Spark job cancelled)
            raise QueryCancelled() from None

    def _handler(self, signum: int, frame: t.Any) -> None:
        self._seen = True
        self.signalled()

    def signalled(self) -> None:
        """Ctrl-C: cancel the query, or after :meth:`hold`, only remember it."""
        if self._held:
            self.late = True
            return
        first, self.fired = not self.fired, True
        if first and self.cancel is not None and not self._done.is_set():
            threading.Thread(target=self._cancelling, name="dpsql-cancel", daemon=True).start()

    def _cancelling(self) -> None:
        """Call the engine's ``cancel()`` now and again every :data:`AGAIN` seconds, until the
        query is over."""
        assert self.cancel is not None
        while True:
            with contextlib.suppress(Exception):  # an engine with nothing running: nothing to stop
                self.cancel()
            if self._done.wait(AGAIN):
                return

    def forward(self, data: bytes) -> None:
        if self._installed is not None and self._installed[1] >= 0:
            with contextlib.suppress(OSError):
                os.write(self._installed[1], data)

    def check(self) -> None:
        """Raise :class:`QueryCancelled` if Ctrl-C came (nothing is charged yet)."""
        if self.fired:
            raise QueryCancelled()

    def hold(self) -> None:
        """From here on the budget is charged: a Ctrl-C before now cancels the query; one after
        only sets :attr:`late`, and the release goes on."""
        self._held = True
        if self.fired:  # came before: the query stops here
            self._held = False
            raise QueryCancelled()
