"""``dpsql serve`` on a network: TLS with a certificate made here, login throttling, idle sockets.

Real clients on loopback only: psycopg (and psql, with the ``clients`` marker) with
``sslmode=require`` against a self-signed certificate; wrong passwords in a row, timed; raw
sockets that never send a startup packet.
"""

from __future__ import annotations

import datetime as dt
import shutil
import socket
import subprocess
import time

import psycopg
import pytest

from tests.serve.harness import PASSWORDS, start


def _self_signed(directory) -> tuple[str, str]:
    """A certificate for localhost and 127.0.0.1 and its key, as PEM files in ``directory``."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "server.crt", directory / "server.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_path), str(key_path)


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tls")
    cert, key = _self_signed(directory)
    srv = start(directory, extra=["--tls-cert", cert, "--tls-key", key])
    srv.cert = cert
    yield srv
    srv.stop()


def _dsn(srv, user: str = "alice", password: str | None = None, **extra: str) -> str:
    words = [f"host={srv.host}", f"port={srv.port}", "dbname=adult", f"user={user}",
             f"password={PASSWORDS[user] if password is None else password}"]
    return " ".join(words + [f"{k}={v}" for k, v in extra.items()])


def test_tls_is_served_and_required(tls_server) -> None:
    assert "TLS on" in "".join(tls_server.log)
    with psycopg.connect(_dsn(tls_server, sslmode="require")) as con:
        assert con.pgconn.ssl_in_use
        assert con.execute("SELECT DP_COUNT(*) AS n FROM adult WITH (epsilon = 0.1)").fetchall()[0][0] > 0
    with psycopg.connect(_dsn(tls_server, sslmode="verify-full", sslrootcert=tls_server.cert)) as con:
        assert con.pgconn.ssl_in_use
    with pytest.raises(psycopg.OperationalError, match="requires TLS"):
        psycopg.connect(_dsn(tls_server, sslmode="disable"))


@pytest.mark.clients
def test_psql_with_sslmode_require(tls_server) -> None:
    exe = shutil.which("psql")
    assert exe, "psql is missing: install Debian's postgresql-client"
    out = subprocess.run([exe, "-X", f"host={tls_server.host} port={tls_server.port} dbname=adult user=carol "
                          "sslmode=require", "-c", "SELECT DP_COUNT(*) AS n FROM adult WITH (epsilon = 0.1)"],
                         capture_output=True, text=True, timeout=60,
                         env={"PGPASSWORD": PASSWORDS["carol"], "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert "(1 row)" in out.stdout


def test_a_missing_certificate_is_one_line(tmp_path) -> None:
    import sys

    out = subprocess.run([sys.executable, "-m", "dpsql", "serve", "--demo", "--port", "0", "--tls-cert",
                          str(tmp_path / "nope.crt"), "--tls-key", str(tmp_path / "nope.key")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert out.stderr.strip() == f"Error: --tls-cert/--tls-key: file not found: {tmp_path / 'nope.crt'}"


def test_wrong_passwords_wait_longer_each_time_and_are_logged(tmp_path) -> None:
    srv = start(tmp_path)
    try:
        took = []
        for _ in range(4):
            begin = time.monotonic()
            with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
                psycopg.connect(_dsn(srv, password="wrong"))
            took.append(time.monotonic() - begin)
        # waits before the 2nd, 3rd and 4th attempts: 0.25, 0.5 and 1 s
        assert took[3] >= 0.95 and took[2] >= 0.45 and took[1] >= 0.2
        begin = time.monotonic()
        with psycopg.connect(_dsn(srv, user="bob")):  # another user is not slowed down
            pass
        assert time.monotonic() - begin < 0.9
    finally:
        srv.stop()
    log = srv.process.stderr.read()
    assert log.count("failed login for user 'alice' from 127.0.0.1") == 4
    assert "4 in a row; next attempt waits 2 s" in log


def test_unauthenticated_sockets_are_closed_after_the_login_timeout(tmp_path) -> None:
    srv = start(tmp_path, extra=["--login-timeout", "1"])
    try:
        idle = [socket.create_connection((srv.host, srv.port)) for _ in range(40)]
        time.sleep(1.8)
        for sock in idle:
            sock.settimeout(2)
            assert sock.recv(1) == b""  # closed by the server
            sock.close()
        with psycopg.connect(_dsn(srv)) as con:  # a client that logs in in time is served
            assert con.execute("SELECT 1 AS one FROM education_levels LIMIT 1").fetchall() == [(1,)]
    finally:
        srv.stop()
