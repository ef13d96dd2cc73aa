"""Room on the stack for deeply nested statements, and one refusal when a statement needs more.

sqlglot parses, copies and prints a tree by recursion: each level of ``abs(abs(...))``,
``CASE WHEN CASE WHEN ...`` or ``NOT NOT ...`` costs it 10 to 25 Python frames, so Python's
default limit of 1,000 frames is reached near 40 levels, sooner when the caller is itself deep
(a notebook, a test runner, a server thread). Left alone, that surfaces as a ``RecursionError``
from whichever pass hits it first, an internal error, and where it hits depends on the caller.

dpsql therefore works on a statement with the limit raised to :data:`FRAMES` (never lowered) and
turns a ``RecursionError`` raised before the charge into one :class:`~dpsql.errors.ParseError`
naming the fix. Whether a statement fits depends on its text only, never on data. After the
charge nothing walks the analyst's tree. Measured: 300 levels of each shape above fit, 1,000 do
not; a flat ``OR`` of 5,000 terms fits. 8,000 Python frames stay far inside a thread's C stack
on CPython 3.11+, whose Python-to-Python calls use none.

>>> import sys
>>> before = sys.getrecursionlimit()
>>> with room():
...     sys.getrecursionlimit() >= FRAMES
True
>>> sys.getrecursionlimit() == before
True
"""

from __future__ import annotations

import contextlib
import sys
import threading
import typing as t

from dpsql.errors import ParseError

#: the recursion limit while dpsql works on a statement
FRAMES = 8000

TOO_DEEP = ("the statement is nested too deeply for dpsql (a few hundred levels of calls, CASEs or NOTs "
            "at most): write the nested part as a CTE or with fewer levels")

_lock = threading.Lock()
_holders = 0
_saved = 0


@contextlib.contextmanager
def room() -> t.Iterator[None]:
    """Raise the recursion limit to :data:`FRAMES` while the block runs (threads share one count)."""
    global _holders, _saved
    with _lock:
        if _holders == 0:
            _saved = sys.getrecursionlimit()
            if _saved < FRAMES:
                sys.setrecursionlimit(FRAMES)
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and sys.getrecursionlimit() == FRAMES and _saved < FRAMES:
                sys.setrecursionlimit(_saved)


@contextlib.contextmanager
def nested_refused() -> t.Iterator[None]:
    """Run the block with :func:`room`; a ``RecursionError`` in it becomes :data:`TOO_DEEP`.

    >>> with nested_refused():
    ...     def down(n): return down(n + 1)
    ...     down(0)
    Traceback (most recent call last):
    dpsql.errors.ParseError: the statement is nested too deeply for dpsql ...
    """
    with room():
        try:
            yield
        except RecursionError:
            raise ParseError(TOO_DEEP) from None
