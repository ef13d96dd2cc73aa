"""Releases kept in the ledger file for reuse: the published (noisy) values of a query, tied to
the charge that paid for them.

Re-publishing a release is post-processing: it spends nothing. A row here always belongs to a
charge of nonzero cost in ``ledger_entries`` (:func:`store` inserts only then), and is written
after that charge committed: a crash in between leaves a charge without a stored release, so a
later identical query is charged again (safe); a stored release without a charge cannot exist.
The payload is whatever the caller publishes (:mod:`dpsql.reuse`): noisy values, never seeds.
"""

from __future__ import annotations

import math
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime

__all__ = ["SCHEMA", "COLUMNS", "StoredRelease", "store", "find"]

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS ledger_releases (key TEXT NOT NULL,"
    " entry INTEGER NOT NULL REFERENCES ledger_entries (id), payload BLOB NOT NULL,"
    " PRIMARY KEY (key, entry))"
)
COLUMNS = ["key", "entry", "payload"]


@dataclass(frozen=True)
class StoredRelease:
    """A release kept for reuse: the charge that paid for it, when, and its stored form."""

    entry: int
    time: datetime
    payload: bytes


def store(conn: sqlite3.Connection, key: str, entry: int, payload: bytes) -> bool:
    """Insert the release (inside the caller's transaction) if charge ``entry`` exists and cost
    something; return whether a row was written. The first release creates the table, so a
    ledger that never stored one stays as it was created."""
    conn.execute(SCHEMA)
    cur = conn.execute(
        "INSERT OR IGNORE INTO ledger_releases (key, entry, payload) SELECT ?, id, ? "
        "FROM ledger_entries WHERE id = ? AND (epsilon > 0 OR delta > 0 OR rho > 0)",
        (str(key), sqlite3.Binary(payload), int(entry)))
    return cur.rowcount == 1


def _exists(conn: sqlite3.Connection) -> bool:
    return conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'ledger_releases'").fetchone() is not None


def find(conn: sqlite3.Connection, key: str, max_age_seconds: float) -> StoredRelease | None:
    """The newest release under ``key`` whose charge is at most ``max_age_seconds`` old."""
    if max_age_seconds <= 0 or not _exists(conn):
        return None
    row = conn.execute(
        "SELECT r.entry, e.time, r.payload FROM ledger_releases r "
        "JOIN ledger_entries e ON e.id = r.entry WHERE r.key = ? ORDER BY r.entry DESC LIMIT 1",
        (str(key),)).fetchone()
    if row is None:
        return None
    entry, when, payload = row
    try:
        time = datetime.fromisoformat(when)
    except (TypeError, ValueError):
        return None  # an unreadable time: charge again rather than guess the age
    if math.isfinite(max_age_seconds) and (datetime.now(UTC) - time).total_seconds() > max_age_seconds:
        return None
    return StoredRelease(int(entry), time, bytes(payload))
