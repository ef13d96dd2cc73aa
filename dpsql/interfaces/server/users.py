"""Who may connect to ``dpsql serve``: users, SCRAM-SHA-256 verifiers and budget shares.

Users come from the policy's ``[server.users]`` table, or from a TOML file named by
``[server] users_file`` (relative to the policy), whose ``[users]`` table has the same shape::

    [server.users.alice]
    password = "SCRAM-SHA-256$4096:<salt>$<StoredKey>:<ServerKey>"   # dpsql serve --hash-password
    share = 0.25          # optional: at most a quarter of the dataset's total budget

Only verifiers are stored (the format PostgreSQL writes in ``pg_authid``): a plaintext password
is refused, with the command that makes a verifier. A user's ``share`` caps what the user's own
charges may add up to; the dataset's total is checked by every charge whatever the shares.
"""

from __future__ import annotations

import base64
import os
import tomllib
import typing as t
from dataclasses import dataclass
from pathlib import Path

from scramp import ScramException, ScramMechanism

from dpsql.errors import PolicyError

if t.TYPE_CHECKING:
    from dpsql._policy.policy import Policy

MECHANISM = "SCRAM-SHA-256"
ITERATIONS = 4096


@dataclass(frozen=True)
class User:
    name: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int
    #: the fraction of the dataset's total this user may spend (None: no cap of its own)
    share: float | None = None


def make_verifier(password: str, iterations: int = ITERATIONS) -> str:
    """A SCRAM-SHA-256 verifier of ``password`` (random salt), in PostgreSQL's text form."""
    salt, stored, server, count = ScramMechanism(MECHANISM).make_auth_info(password, iteration_count=iterations)
    b64 = lambda b: base64.b64encode(b).decode("ascii")  # noqa: E731
    return f"{MECHANISM}${count}:{b64(salt)}${b64(stored)}:{b64(server)}"


def parse_verifier(name: str, text: t.Any) -> tuple[bytes, bytes, bytes, int]:
    """(salt, StoredKey, ServerKey, iterations) of a verifier; PolicyError for anything else."""
    hint = f"make one with: dpsql serve --hash-password (it reads the password of user {name} on stdin)"
    if not isinstance(text, str) or not text.startswith(MECHANISM + "$"):
        raise PolicyError(f"server user {name}: password must be a {MECHANISM} verifier, never plaintext; {hint}")
    try:
        _, params, keys = text.split("$")
        count, salt = params.split(":")
        stored, server = keys.split(":")
        parts = [base64.b64decode(x, validate=True) for x in (salt, stored, server)]
        iterations = int(count)
    except ValueError:
        raise PolicyError(f"server user {name}: the password verifier is malformed; {hint}") from None
    if iterations < 1 or len(parts[1]) != 32 or len(parts[2]) != 32:
        raise PolicyError(f"server user {name}: the password verifier is malformed; {hint}")
    return parts[0], parts[1], parts[2], iterations


def load_users(policy: Policy) -> dict[str, User]:
    """The users of the policy's ``[server]`` section (empty: none configured)."""
    server = policy.server
    unknown = set(server) - {"users", "users_file"}
    if unknown:
        raise PolicyError(f"server: unknown key '{sorted(unknown)[0]}' (known: users, users_file)")
    if "users" in server and "users_file" in server:
        raise PolicyError("server: give users or users_file, not both")
    spec: t.Any = server.get("users", {})
    if "users_file" in server:
        spec = _read_users_file(policy, server["users_file"])
    if not isinstance(spec, dict):
        raise PolicyError("server.users must be a table of users")
    users = {}
    for name, entry in spec.items():
        if not isinstance(entry, dict):
            raise PolicyError(f"server user {name} must be a table with password (and share)")
        extra = set(entry) - {"password", "share"}
        if extra:
            raise PolicyError(f"server user {name}: unknown key '{sorted(extra)[0]}' (known: password, share)")
        share = entry.get("share")
        if share is not None and (isinstance(share, bool) or not isinstance(share, (int, float))
                                  or not 0 < share <= 1):
            raise PolicyError(f"server user {name}: share must be a number in (0, 1], got {share!r}")
        salt, stored, key, count = parse_verifier(name, entry.get("password"))
        users[name] = User(name, salt, stored, key, count, None if share is None else float(share))
    return users


def _read_users_file(policy: Policy, name: t.Any) -> t.Any:
    if not isinstance(name, str):
        raise PolicyError("server.users_file must be a file path")
    path = Path(name)
    if not path.is_absolute() and policy.source:
        path = Path(policy.source).parent / path
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise PolicyError(f"server users file {path} cannot be read: {err.strerror or err}") from None
    except tomllib.TOMLDecodeError as err:
        raise PolicyError(f"server users file {path} is not valid TOML: {err}") from None
    if set(data) - {"users"}:
        raise PolicyError(f"server users file {path} must hold only a [users] table")
    return data.get("users", {})


# -- the SCRAM exchange over pg_mimic's stream ----------------------------------------------


def _client_first(server: t.Any, text: str) -> None:
    """Give scramp the client-first message. libpq sends an empty user name (``n=``) because
    the name came in the startup packet; scramp wants one, so parse with a stand-in and keep
    the original bare message, which both sides sign."""
    parts = text.split(",")
    if len(parts) >= 3 and parts[2] == "n=":
        server.set_client_first(",".join([*parts[:2], "n=user", *parts[3:]]))
        server.client_first_bare = ",".join(parts[2:])
    else:
        server.set_client_first(text)


def login_check(users: dict[str, User], password: str | None) -> "ScramVerifierAuth | TrustLoopback":
    """How clients log in: the policy's users; with none, any name with ``password`` (a
    one-time password); with neither, no password at all (loopback only, ``--no-password``)."""
    if users:
        return ScramVerifierAuth(users)
    if password is not None:
        salt, stored, server, count = ScramMechanism(MECHANISM).make_auth_info(password, iteration_count=ITERATIONS)
        return ScramVerifierAuth({}, anyone=User("", salt, stored, server, count))
    return TrustLoopback()


class ScramVerifierAuth:
    """SCRAM-SHA-256 against stored verifiers; an unknown user goes through the exchange
    against a random verifier and is refused at its end, like a wrong password. With
    ``anyone``, every user name is checked against that one verifier instead."""

    def __init__(self, users: dict[str, User], anyone: User | None = None) -> None:
        self.users = users
        self.anyone = anyone

    async def authenticate(self, stream: t.Any, username: str, identity_provider: t.Any) -> bool:
        from pg_mimic import messages
        from pg_mimic.errors import INVALID_PASSWORD, PgError

        user = self.users.get(username, self.anyone)
        known = user is not None
        if user is None:
            user = User(username, os.urandom(16), os.urandom(32), os.urandom(32), ITERATIONS)
        found = user

        def auth_fn(_name: str) -> tuple[bytes, bytes, bytes, int]:
            return found.salt, found.stored_key, found.server_key, found.iterations

        server = ScramMechanism(MECHANISM).make_server(auth_fn)
        stream.write(messages.make_authentication_sasl([MECHANISM]))
        await stream.drain()
        tag, payload = await stream.read_message()
        if tag != messages.PASSWORD:
            raise PgError(INVALID_PASSWORD, "expected a SASLInitialResponse")
        _mechanism, first = messages.parse_sasl_initial_response(payload)
        try:
            _client_first(server, first.decode("utf-8"))
            stream.write(messages.make_authentication_sasl_continue(server.get_server_first().encode("utf-8")))
            await stream.drain()
            tag, payload = await stream.read_message()
            if tag != messages.PASSWORD:
                raise PgError(INVALID_PASSWORD, "expected a SASLResponse")
            server.set_client_final(payload.decode("utf-8"))
            final = server.get_server_final()
        except (ScramException, UnicodeDecodeError):
            return False
        if not known:
            return False
        stream.write(messages.make_authentication_sasl_final(final.encode("utf-8")))
        await stream.drain()
        return True


class TrustLoopback:
    """No users configured and ``--no-password``: any user name, no password (loopback only)."""

    async def authenticate(self, stream: t.Any, username: str, identity_provider: t.Any) -> bool:
        return True
