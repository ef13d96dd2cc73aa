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


class _Watcher:
    """The thread that reads the wakeup socket; one per process, started on first use."""

    def __init__(self) -> None:
        self.reader, self.writer = socket.socketpair()
        self.writer.setblocking(False)  # set_wakeup_fd needs a descriptor that never blocks
        self.pid = os.getpid()
        #: the Cancellation now active on the main thread, if any
        self.active: Cancellation | None = None
        threading.Thread(target=self._run, name="dpsql-sigint", daemon=True).start()

    def _run(self) -> None:
        while True:
            try:
                data = self.reader.recv(64)
            except OSError:
                return
            if not data:
                return
            active = self.active
            if active is None:
                continue
            if signal.SIGINT in data:
                active.signalled()
            others = bytes(b for b in data if b != signal.SIGINT)
            if others:  # another signal: its number goes on to the descriptor it was meant for
                active.forward(others)


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
        if err is not None and self.fired and not self._held and not isinstance(err, QueryCancelled):
            # the engine's own failure (DuckDB's InterruptException, a Spark job cancelled)
            raise QueryCancelled() from None

    def _handler(self, signum: int, frame: t.Any) -> None:
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
