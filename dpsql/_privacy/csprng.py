"""The random bytes behind discrete Laplace noise: ChaCha20 keyed from the operating system.

:mod:`dpsql._privacy.dlaplace` (every Laplace release: counts, sums and grid values, one value or
a column) reads its randomness as bytes from :func:`random_bytes`. They come from a ChaCha20
keystream (Bernstein 2008; RFC 8439) computed by OpenSSL through the
``cryptography`` package, under a 256-bit key of ``os.urandom`` bytes: the construction of
the operating system's own generator (Linux's ``getrandom`` is a ChaCha20 stream keyed from
its entropy pool), and of the ``RAND_bytes`` DRBG that OpenDP's samplers read. Its output is
indistinguishable from uniform bytes to anyone who does not know the key, which never leaves
this module.

Why not ``os.urandom`` for every byte: it costs a system call per request and about 1.6 ns a
byte, half the time of a long column of discrete Laplace noise; the keystream costs about
0.2 ns a byte (``docs/noise.md``). Draws of a few bytes (the exponential mechanism's choice,
a uniform point of a grid) read ``os.urandom`` and ``secrets`` directly, which is cheaper there.

Keys
    * one stream per thread (a caller may release from several threads at once; a stream is
      never shared, so no lock is needed);
    * a fresh key in a child process: after ``fork`` the parent's streams are dropped, so a
      child never repeats its parent's bytes;
    * a fresh key after :data:`REKEY_BYTES` bytes of one stream, far below the 2^38 bytes
      ChaCha20 gives under one key and nonce (a 32-bit block counter of 64-byte blocks).
"""

from __future__ import annotations

import os
import threading

#: Bytes drawn under one key before a new key is read from ``os.urandom``.
REKEY_BYTES = 2**32
#: Zero bytes the keystream is XORed onto (read through a view: no allocation per call).
_ZEROS = bytes(1 << 16)


class _Stream:
    """One thread's keystream: a fresh key and nonce from ``os.urandom``, and a byte count."""

    def __init__(self) -> None:
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms  # 9 ms to import: on first use

        # the nonce's first 4 bytes are the block counter: from 0, it wraps after 2^38 bytes
        cipher = Cipher(algorithms.ChaCha20(os.urandom(32), bytes(4) + os.urandom(12)), mode=None)
        self.encryptor = cipher.encryptor()
        self.left = REKEY_BYTES


class _Local(threading.local):
    stream: _Stream | None = None


_local = _Local()


def _forget() -> None:
    """In a forked child: a new thread-local holder, so no stream of the parent is read again."""
    global _local
    _local = _Local()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)


def random_bytes(n: int) -> bytes:
    """``n`` uniformly random bytes for a release (see the module's docstring)."""
    if n <= 0:
        return b""
    stream = _local.stream
    if stream is None or stream.left < n:
        stream = _local.stream = _Stream()
    stream.left -= n
    update = stream.encryptor.update
    if n <= len(_ZEROS):
        return update(memoryview(_ZEROS)[:n])
    return b"".join(update(memoryview(_ZEROS)[:min(len(_ZEROS), n - i)]) for i in range(0, n, len(_ZEROS)))
