"""What makes ``dpsql serve`` safe to put on a network: TLS, a password by default, login throttling.

* **TLS** (``--tls-cert FILE --tls-key FILE``, the standard library's :mod:`ssl`): a client that
  asks for TLS (``sslmode=require``, psql's and libpq's default ``prefer``) gets it; with a
  certificate configured, a client that does not ask is refused (its password and the answers
  would cross the network in the clear). Without a certificate the server listens only on a
  loopback address unless ``--allow-plaintext`` says otherwise.
* **A password by default.** With no ``[server.users]``, the server makes a one-time password
  when it starts and prints it; any user name is accepted with it (the ledger records the name
  given). ``--no-password`` accepts local connections without one (a single-user laptop).
* **Throttling.** Each failed login from a client address for a user name doubles the wait
  before that pair's next attempt is examined (0.25 s, 0.5 s, ... up to 30 s) and writes a log
  line; a success clears it. A connection that has not finished its startup and login within
  the login timeout (30 s) is closed, so idle sockets cannot pile up.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import ssl
import sys
import time
import typing as t

from pg_mimic import PgServer, messages
from pg_mimic.stream import ConnectionClosed

from dpsql.errors import Error

#: seconds a client has to finish its startup packet, and separately its login
LOGIN_TIMEOUT = 30.0
#: the first wait after a failed login, doubled with each further failure, and its cap
FIRST_DELAY, MAX_DELAY = 0.25, 30.0


def tls_context(cert: str, key: str) -> ssl.SSLContext:
    """A server context for ``cert`` and ``key`` (PEM files); TLS 1.2 or newer."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    for path in (cert, key):
        if not os.path.isfile(path):
            raise Error(f"--tls-cert/--tls-key: file not found: {path}")
    try:
        context.load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as err:
        raise Error(f"--tls-cert/--tls-key: cannot load the certificate and key: {err}") from None
    return context


def one_time_password() -> str:
    """A fresh password for a server with no users (printed when it starts)."""
    return secrets.token_urlsafe(12)


class Throttle:
    """Failed logins per (client address, user name), and the wait each pair has earned."""

    def __init__(self, first: float = FIRST_DELAY, cap: float = MAX_DELAY, log: t.TextIO | None = None) -> None:
        self.first, self.cap = first, cap
        self.log = log if log is not None else sys.stderr
        self._failures: dict[tuple[str, str], int] = {}

    def delay(self, address: str, user: str) -> float:
        failures = self._failures.get((address, user), 0)
        return 0.0 if failures == 0 else min(self.cap, self.first * 2 ** (failures - 1))

    def failed(self, address: str, user: str) -> None:
        key = (address, user)
        self._failures[key] = self._failures.get(key, 0) + 1
        if len(self._failures) > 100_000:  # a flood of names: forget the oldest half
            for old in list(self._failures)[: len(self._failures) // 2]:
                del self._failures[old]
        print(f"dpsql serve: failed login for user {user!r} from {address} "
              f"({self._failures[key]} in a row; next attempt waits {self.delay(address, user):g} s)",
              file=self.log, flush=True)

    def succeeded(self, address: str, user: str) -> None:
        self._failures.pop((address, user), None)


def peer(stream: t.Any) -> str:
    """The client's address, as the log names it."""
    info = stream.writer.get_extra_info("peername")
    return str(info[0]) if isinstance(info, tuple) and info else "local"


class Guarded:
    """An authentication plugin behind the throttle and the login timeout."""

    def __init__(self, inner: t.Any, throttle: Throttle, timeout: float = LOGIN_TIMEOUT) -> None:
        self.inner, self.throttle, self.timeout = inner, throttle, timeout

    async def authenticate(self, stream: t.Any, username: str, identity_provider: t.Any) -> bool:
        address = peer(stream)
        started = time.monotonic()
        await asyncio.sleep(self.throttle.delay(address, username))
        try:
            remaining = max(0.1, self.timeout - (time.monotonic() - started))
            ok = await asyncio.wait_for(self.inner.authenticate(stream, username, identity_provider), remaining)
        except TimeoutError:
            raise ConnectionClosed from None
        if ok:
            self.throttle.succeeded(address, username)
        else:
            self.throttle.failed(address, username)
        return bool(ok)


class SecureServer(PgServer):
    """pg_mimic's server with TLS negotiation and a timeout on the startup packet."""

    def __init__(self, *args: t.Any, tls: ssl.SSLContext | None = None, timeout: float = LOGIN_TIMEOUT,
                 **kwargs: t.Any) -> None:
        super().__init__(*args, **kwargs)
        self.tls, self.timeout = tls, timeout

    async def _negotiate_startup(self, stream: t.Any) -> dict[str, str] | None:
        try:
            return await asyncio.wait_for(self._startup(stream), self.timeout)
        except TimeoutError:
            raise ConnectionClosed from None

    async def _startup(self, stream: t.Any) -> dict[str, str] | None:
        code, payload = await stream.read_startup_packet()
        encrypted = False
        while code in (messages.SSL_REQUEST_CODE, messages.GSSENC_REQUEST_CODE):
            if code == messages.SSL_REQUEST_CODE and self.tls is not None and not encrypted:
                stream.write(b"S")
                await stream.drain()
                await stream.writer.start_tls(self.tls)
                encrypted = True
            else:
                stream.write(b"N")
                await stream.drain()
            code, payload = await stream.read_startup_packet()
        if code == messages.CANCEL_REQUEST_CODE:
            pid, secret = messages.parse_cancel_request(payload)
            self.cancel(pid, secret)
            await stream.close()
            return None
        if self.tls is not None and not encrypted:
            stream.write(messages.make_error_response({
                "S": "FATAL", "V": "FATAL", "C": "28000",
                "M": "this server requires TLS: connect with sslmode=require"}))
            await stream.drain()
            await stream.close()
            return None
        return messages.parse_startup_message(payload)
