"""Long vectors of independent noise, drawn in chunks on several threads.

OpenDP's samplers run in native code without holding the interpreter lock, and each draw of a
vector measurement is independent of the others, so the chunks of a vector can be drawn at the
same time: the output is the concatenation, in order, and has the same law as one call. Short
vectors are drawn in one call, where a thread would cost more than it saves. Each process has
its own pool (a pool inherited through ``fork`` has no threads behind it).
"""

from __future__ import annotations

import functools
import os
import typing as t
from concurrent.futures import ThreadPoolExecutor

T = t.TypeVar("T")
R = t.TypeVar("R")

#: Fewest values per chunk: below twice this a vector is drawn in one call.
MIN_CHUNK = 2048
#: Most threads drawing at once.
MAX_WORKERS = 8


def workers() -> int:
    """Threads to draw with: the CPUs this process may use, at most :data:`MAX_WORKERS`."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_WORKERS))


@functools.lru_cache(maxsize=1)
def _pool(pid: int, size: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(size, thread_name_prefix="dpsql-noise")


def map_chunks(draw: t.Callable[[list[T]], list[R]], values: list[T], min_chunk: int | None = None) -> list[R]:
    """``draw`` over consecutive chunks of ``values`` (at least ``min_chunk``, default
    :data:`MIN_CHUNK`, each), results concatenated in order (numpy arrays of numbers into one
    array)."""
    n, size = len(values), workers()
    parts = min(size, n // (min_chunk or MIN_CHUNK))
    if parts < 2:
        return draw(values)
    step = -(-n // parts)
    pieces = list(_pool(os.getpid(), size).map(draw, [values[i:i + step] for i in range(0, n, step)]))
    return _concatenate(pieces)


def _concatenate(pieces: list[t.Any]) -> t.Any:
    """The pieces in order: one numpy array when every piece is a numpy array of one kind of
    number (int or float), else one list of their elements."""
    kinds = {getattr(getattr(p, "dtype", None), "kind", None) for p in pieces}
    if len(kinds) == 1 and kinds <= {"i", "f"}:
        import numpy

        return numpy.concatenate(pieces)
    out: list[t.Any] = []
    for piece in pieces:
        out.extend(piece.tolist() if hasattr(piece, "tolist") else piece)
    return out
