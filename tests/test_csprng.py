"""The byte source of discrete Laplace noise: a ChaCha20 stream per thread, keyed from the
operating system, never shared with a forked child, rekeyed after REKEY_BYTES."""

from __future__ import annotations

import collections
import os
import threading

import pytest

from dpsql._privacy import csprng, dlaplace


def test_lengths_and_fresh_bytes() -> None:
    for n in (0, 1, 7, 8, 65535, 65536, 65537, 200_001):
        assert len(csprng.random_bytes(n)) == n
    draws = {csprng.random_bytes(16) for _ in range(1000)}
    assert len(draws) == 1000


def test_bytes_are_uniform() -> None:
    """Chi-square of 2^20 bytes over 256 cells (255 degrees of freedom; 340 is the 0.0003 tail),
    and the same test rejects bytes with one value twice as likely."""
    def chi2(data: bytes) -> float:
        counts = collections.Counter(data)
        expected = len(data) / 256
        return sum((counts.get(v, 0) - expected) ** 2 / expected for v in range(256))

    data = csprng.random_bytes(1 << 20)
    assert chi2(data) < 340
    skewed = data + bytes([7]) * ((1 << 20) // 256)
    assert chi2(skewed) > 340


def test_threads_have_their_own_streams() -> None:
    got: dict[int, bytes] = {}

    def draw(i: int) -> None:
        got[i] = csprng.random_bytes(64)

    threads = [threading.Thread(target=draw, args=(i,)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(set(got.values())) == 4


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX only")
def test_a_forked_child_does_not_repeat_its_parent() -> None:
    csprng.random_bytes(32)  # the parent's stream exists before the fork
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next bytes, to the parent
        try:
            os.write(write, csprng.random_bytes(32))
        finally:
            os._exit(0)
    os.close(write)
    child = os.read(read, 32)
    os.close(read)
    os.waitpid(pid, 0)
    parent = csprng.random_bytes(32)
    assert len(child) == 32 and child != parent


def test_a_stream_takes_a_new_key_after_its_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    keys: list[bytes] = []
    real = os.urandom

    def counted(n: int) -> bytes:
        out = real(n)
        if n == 32:
            keys.append(out)
        return out

    monkeypatch.setattr(csprng, "REKEY_BYTES", 100)
    monkeypatch.setattr(csprng.os, "urandom", counted)
    monkeypatch.setattr(csprng, "_local", csprng._Local())
    csprng.random_bytes(60)
    csprng.random_bytes(40)  # 100 bytes under the first key
    assert len(keys) == 1
    csprng.random_bytes(1)
    assert len(keys) == 2


def test_discrete_laplace_reads_the_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[int] = []

    def spy(n: int) -> bytes:
        asked.append(n)
        return os.urandom(n)

    monkeypatch.setattr(dlaplace, "random_bytes", spy)
    dlaplace.secure_bytes(8)
    assert asked == [8]
