"""Session statements, recognised on sqlglot's PostgreSQL tokens rather than on the raw text.

``SET``, ``SHOW``, ``RESET``, ``DISCARD``, ``BEGIN``/``START TRANSACTION``, ``COMMIT``/``END``,
``ROLLBACK``/``ABORT``, ``SAVEPOINT``, ``RELEASE``, ``ROLLBACK TO``, ``UNLISTEN``, and the refusals
of ``COPY`` and ``LISTEN``/``NOTIFY``. sqlglot's parser leaves most of these as an opaque
command, so they are read from its token stream (``read="postgres"``): comments, case, quoted
names, strings (``'...'``, ``E'...'``, ``$$...$$``) and a trailing semicolon are the tokenizer's
business, and a variant spelling reads the same as the plain one.

Settings live in the connection's session variables (pg_mimic's ``session_vars``, which its
``current_setting()`` reads too); ``SHOW`` answers from them, then from the server's fixed
settings, else with an empty string.
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass

from pg_mimic import ResultColumn, StaticStatement
from pg_mimic.errors import PgError
from sqlglot.dialects.postgres import Postgres
from sqlglot.tokens import Token, TokenType

from .columns import TEXT
from .pgtables import SETTINGS

COPY_REFUSED = "COPY is not supported by dpsql serve; export with psql's \\o FILE or the dpsql command's --format csv"


class _Tokenizer(Postgres.Tokenizer):
    COMMANDS: t.ClassVar[set[TokenType]] = set()  # SHOW, FETCH, EXECUTE, ...: their words as tokens too


_NAMES = (TokenType.STRING, TokenType.IDENTIFIER, TokenType.NUMBER, TokenType.BYTE_STRING,
          TokenType.HEREDOC_STRING, TokenType.NATIONAL_STRING)


@dataclass
class Words:
    """A statement's tokens (without trailing semicolons) and its text."""

    sql: str
    tokens: list[Token]

    def keyword(self, i: int) -> str:
        """The upper-case word at ``i`` when it is a bare word (not quoted, not a string), else ''."""
        if i >= len(self.tokens) or self.tokens[i].token_type in _NAMES:
            return ""
        return self.tokens[i].text.upper()

    def name(self, i: int) -> str | None:
        """The name at ``i``: a bare word folded to lower case, or a quoted name as written."""
        if i >= len(self.tokens):
            return None
        tok = self.tokens[i]
        if tok.token_type == TokenType.IDENTIFIER:
            return tok.text
        if tok.token_type in _NAMES or not (tok.text[:1].isalpha() or tok.text[:1] == "_"):
            return None
        return tok.text.lower()

    def rest(self, i: int) -> str:
        """The text from token ``i`` to the end (what follows ``FOR`` in a DECLARE, ...)."""
        if i >= len(self.tokens):
            return ""
        return self.sql[self.tokens[i].start:self.tokens[-1].end + 1]

    def matches(self, *words: str, at: int = 0) -> bool:
        return all(self.keyword(at + k) == w for k, w in enumerate(words))


def words(sql: str) -> Words | None:
    """The tokens of one statement, or None (it does not tokenize, or it is several statements)."""
    try:
        tokens = _Tokenizer(dialect=Postgres()).tokenize(sql)
    except Exception:
        return None
    while tokens and tokens[-1].token_type == TokenType.SEMICOLON:
        tokens.pop()
    if not tokens or any(tok.token_type == TokenType.SEMICOLON for tok in tokens):
        return None
    return Words(sql, tokens)


def split(sql: str) -> list[str]:
    """The statements of a simple-query string, each as its own text, split on the semicolons
    between tokens (one in a string or a comment does not split); the whole text when it holds
    one statement or does not tokenize."""
    try:
        tokens = _Tokenizer(dialect=Postgres()).tokenize(sql)
    except Exception:
        return [sql]
    parts, first = [], None
    for tok in tokens:
        if tok.token_type == TokenType.SEMICOLON:
            if first is not None:
                parts.append(sql[first:tok.start])
            first = None
        elif first is None:
            first = tok.start  # a statement's text starts at its first word (its tag comes from it)
    if first is not None:
        parts.append(sql[first:])
    return parts if len(parts) > 1 else [sql]


def is_dpsql_statement(w: Words | None) -> bool:
    """dpsql's own catalog statements: ``SHOW [ALL] TABLES``, ``SHOW COLUMNS ...``, ``DESCRIBE t``."""
    if w is None:
        return False
    head = w.keyword(0)
    if head in ("DESCRIBE", "DESC"):
        return len(w.tokens) > 1
    return head == "SHOW" and (w.matches("TABLES", at=1) or w.matches("ALL", "TABLES", at=1)
                               or w.matches("COLUMNS", at=1))


# -- settings --------------------------------------------------------------------------------

#: SHOW of several words, and the setting each shows
_PHRASES = {"transaction isolation level": "transaction_isolation", "time zone": "timezone",
            "session authorization": "session_authorization"}


def setting(connection: t.Any, name: str) -> str:
    """The value of setting ``name`` on ``connection``: the session's, else the server's, else ''."""
    name = name.lower()
    if name in connection.session_vars:
        return connection.session_vars[name]
    if name in ("server_version", "client_encoding") and name in connection.server.parameter_status:
        return connection.server.parameter_status[name]
    if name == "session_authorization":
        return connection.username
    return SETTINGS.get(name, "")


def _show(connection: t.Any, w: Words) -> StaticStatement:
    if len(w.tokens) == 2 and w.keyword(1) == "ALL":
        names = sorted(set(SETTINGS) | set(connection.session_vars))
        rows = [(n, setting(connection, n), "") for n in names]
        return StaticStatement(w.sql, [ResultColumn(c, TEXT) for c in ("name", "setting", "description")], rows)
    parts = [w.name(i) or w.keyword(i).lower() for i in range(1, len(w.tokens))]
    phrase = " ".join(parts)
    if not phrase:
        raise PgError("42601", "SHOW needs the name of a setting: SHOW search_path, SHOW ALL")
    name = _PHRASES.get(phrase.lower(), phrase if len(parts) == 1 else phrase.replace(" ", "_"))
    return StaticStatement(w.sql, [ResultColumn(name, TEXT)], [(setting(connection, name),)])


def _value_text(w: Words, start: int) -> str | None:
    """The value of ``SET x TO value[, value]``, as SHOW gives it back; None for DEFAULT."""
    if w.keyword(start) == "DEFAULT" and len(w.tokens) == start + 1:
        return None
    items, current = [], ""
    for tok in w.tokens[start:]:
        if tok.token_type == TokenType.COMMA:
            items.append(current)
            current = ""
        elif tok.token_type == TokenType.IDENTIFIER:
            current += '"' + tok.text.replace('"', '""') + '"'
        elif tok.token_type in _NAMES:
            current += tok.text
        else:
            current += tok.text.lower() if tok.text[:1].isalpha() else tok.text
    items.append(current)
    return ", ".join(items)


def _set(connection: t.Any, w: Words) -> StaticStatement:
    at = 2 if w.keyword(1) in ("SESSION", "LOCAL") else 1
    if w.keyword(at) == "TIME" and w.keyword(at + 1) == "ZONE":
        name, start = "timezone", at + 2
    elif w.keyword(at) in ("SCHEMA", "NAMES"):
        name, start = ("search_path" if w.keyword(at) == "SCHEMA" else "client_encoding"), at + 1
    elif w.keyword(at) in ("TRANSACTION", "CHARACTERISTICS", "ROLE", "AUTHORIZATION", "CONSTRAINTS"):
        return StaticStatement(w.sql, None, [])  # accepted; nothing to change for a read-only server
    elif w.name(at) is not None and w.keyword(at + 1) in ("TO", "="):
        name, start = (w.name(at) or "").lower(), at + 2
    else:
        raise PgError("42601", "SET takes a name and a value: SET name TO value (or SET name = value)")
    if start >= len(w.tokens):
        raise PgError("42601", f"SET {name} needs a value: SET {name} TO value")
    value = _value_text(w, start)
    if name == "timezone" and w.keyword(start) == "LOCAL" and len(w.tokens) == start + 1:
        value = None

    def apply() -> None:
        if value is None:
            connection.session_vars.pop(name, None)
        else:
            connection.session_vars[name] = value

    return StaticStatement(w.sql, None, [], apply)


def _reset(connection: t.Any, w: Words) -> StaticStatement:
    if len(w.tokens) != 2:
        raise PgError("42601", "RESET takes one setting, or ALL: RESET search_path")
    everything = w.keyword(1) == "ALL"
    name = (w.name(1) or "").lower()
    return StaticStatement(w.sql, None, [], connection.session_vars.clear if everything
                           else lambda: connection.session_vars.pop(name, None))


def _discard(connection: t.Any, w: Words) -> StaticStatement:
    session = connection.session

    def apply() -> None:
        if w.keyword(1) == "ALL":  # as PostgreSQL: settings, prepared statements and cursors go
            connection.session_vars.clear()
            session.discard()

    return StaticStatement(w.sql, None, [], apply)


# -- transactions ---------------------------------------------------------------------------

_TRANSACTION_WORDS = ("WORK", "TRANSACTION")


def _transaction(connection: t.Any, w: Words) -> StaticStatement | None:
    head = w.keyword(0)
    session = connection.session
    if head in ("BEGIN", "START"):
        if head == "START" and w.keyword(1) != "TRANSACTION":
            return None

        def begin() -> None:
            connection.tx_status = b"T"

        return StaticStatement("BEGIN", None, [], begin)
    at = 2 if w.keyword(1) in _TRANSACTION_WORDS else 1
    if head in ("ROLLBACK", "ABORT") and w.keyword(at) == "TO" and head == "ROLLBACK":
        name = w.name(at + 2 if w.keyword(at + 1) == "SAVEPOINT" else at + 1)
        return StaticStatement("ROLLBACK", None, [], lambda: session.rollback_to(name))
    if head in ("COMMIT", "END", "ROLLBACK", "ABORT"):
        if at < len(w.tokens) and not w.matches("AND", at=at):
            return None  # COMMIT PREPARED and the like: not a session statement

        def end() -> None:
            connection.tx_status = b"I"
            session.end_transaction()

        return StaticStatement("ROLLBACK" if head in ("ROLLBACK", "ABORT") else "COMMIT", None, [], end)
    if head == "SAVEPOINT":
        name = w.name(1)
        return StaticStatement("SAVEPOINT", None, [], lambda: session.savepoint(name))
    if head == "RELEASE":
        name = w.name(2 if w.keyword(1) == "SAVEPOINT" else 1)
        return StaticStatement("RELEASE", None, [], lambda: session.release(name))
    return None


# -- the middleware -------------------------------------------------------------------------

def _refuse_copy(connection: t.Any, w: Words) -> StaticStatement:
    raise PgError("0A000", COPY_REFUSED)


def _refuse_listen(connection: t.Any, w: Words) -> StaticStatement:
    raise PgError("0A000", f"{w.keyword(0)} is not supported by dpsql serve: it answers queries only, "
                           "and sends no notifications")


def _nothing(connection: t.Any, w: Words) -> StaticStatement:
    return StaticStatement(w.sql, None, [])


_HANDLERS: dict[str, t.Callable[[t.Any, Words], StaticStatement | None]] = {
    "SET": _set, "SHOW": _show, "RESET": _reset, "DISCARD": _discard, "COPY": _refuse_copy,
    "LISTEN": _refuse_listen, "NOTIFY": _refuse_listen, "UNLISTEN": _nothing,
    **{k: _transaction for k in ("BEGIN", "START", "COMMIT", "END", "ROLLBACK", "ABORT", "SAVEPOINT", "RELEASE")},
}


def answer(connection: t.Any, w: Words | None) -> StaticStatement | None:
    """The answer to a session statement, or None when ``w`` is not one."""
    if w is None or is_dpsql_statement(w):
        return None
    handler = _HANDLERS.get(w.keyword(0))
    return handler(connection, w) if handler is not None else None


__all__ = ["COPY_REFUSED", "Words", "answer", "is_dpsql_statement", "setting", "split", "words"]
