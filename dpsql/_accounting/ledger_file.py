"""The budget ledger's SQLite file: its schema, its creation, the checks made when it is opened,
the migration of older files, and the exact sums of its entries (:mod:`dpsql._accounting.ledger`
charges and reads it through these)."""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
import tempfile
import typing as t
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

from dpsql._accounting import releases
from dpsql._accounting.budget import KIND_NAMES, KINDS, TOLERANCE, ZCDP, Budget, Cost
from dpsql.errors import BudgetError, LedgerError

MAGIC = b"SQLite format 3\x00"
APPLICATION_ID = 0x64707371  # "dpsq"
FORMAT = 1
TIMEOUT_S = 30.0  # concurrent processes wait for the write lock rather than fail
HEADER_COLS = ["id", "format", "kind", "total_epsilon", "total_delta", "total_rho", "created"]
# Fixed text: the header's own column names, joined once.
_HEADER = "SELECT " + ", ".join(HEADER_COLS[1:]) + " FROM ledger_header"
ENTRY_COLS = ["id", "time", "epsilon", "delta", "rho", "query", "detail", "user"]
#: the entry columns of ledgers made before charges recorded who spent them (migrated on open)
ENTRY_COLS_V1 = ENTRY_COLS[:-1]
ADD_USER = "ALTER TABLE ledger_entries ADD COLUMN user TEXT NOT NULL DEFAULT ''"
SCHEMA = (
    "CREATE TABLE ledger_header (id INTEGER PRIMARY KEY CHECK (id = 1),"
    " format INTEGER NOT NULL, kind TEXT NOT NULL, total_epsilon REAL NOT NULL,"
    " total_delta REAL NOT NULL, total_rho REAL NOT NULL, created TEXT NOT NULL)",
    "CREATE TABLE ledger_entries (id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " time TEXT NOT NULL, epsilon REAL NOT NULL CHECK (epsilon >= 0),"
    " delta REAL NOT NULL CHECK (delta >= 0), rho REAL NOT NULL CHECK (rho >= 0),"
    " query TEXT NOT NULL, detail TEXT NOT NULL, user TEXT NOT NULL DEFAULT '')",
)

FIX = ("a ledger's total is fixed when it is created; to change it, run "
        "dpsql --policy FILE --set-budget (or Ledger.set_total), which records the change")


def format_total(total: Cost, kind: str) -> str:
    """A ledger total in full, e.g. ``ε=10, δ=1e-05`` or ``ρ=0.5``."""
    if kind == ZCDP:
        return f"ρ={total.rho:.15g}"
    return f"ε={total.epsilon:.15g}, δ={total.delta:.15g}"


def same_total(a: Cost, b: Cost) -> bool:
    """Whether two totals are equal up to a tiny relative tolerance (float round trips)."""
    return all(math.isclose(x, y, rel_tol=TOLERANCE, abs_tol=0.0)
               for x, y in ((a.epsilon, b.epsilon), (a.delta, b.delta), (a.rho, b.rho)))


def now() -> str:
    """The current UTC time, ISO 8601 with microseconds."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


class immediate:  # lower case: it reads as a function, ``with immediate(conn):``
    """One ``BEGIN IMMEDIATE`` transaction: committed at the end of the block, rolled back
    (as far as SQLite still can) when anything escapes it, the COMMIT included. A class rather
    than a generator: every charge runs it, and ``contextlib``'s machinery cost more than the
    transaction's Python."""

    __slots__ = ("conn",)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if kind is None:
            try:
                self.conn.execute("COMMIT")
                return
            except BaseException:
                self._roll_back()
                raise
        self._roll_back()

    def _roll_back(self) -> None:
        if self.conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self.conn.execute("ROLLBACK")


def connect(target: str | None, read_only: bool = False) -> sqlite3.Connection:
    """Connect with explicit transactions (BEGIN is ours); ``None`` means in memory.

    ``read_only``: SQLite refuses every write. Without a ``-wal`` file next to the ledger (no
    writer has it open, and its last one folded the log back in), the file is read as immutable:
    a read-only SQLite in WAL mode would otherwise create ``-wal`` and ``-shm`` files, which it
    cannot in a directory the reader may not write to, and which, left behind with the reader's
    owner, would stop the ledger's owner from charging it."""
    if target is None:
        return sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    mode = "rw"  # never create a file
    if read_only:
        mode = "ro" if os.path.exists(target + "-wal") else "ro&immutable=1"
    uri = f"{Path(target).absolute().as_uri()}?mode={mode}"
    return sqlite3.connect(uri, uri=True, timeout=TIMEOUT_S, isolation_level=None,
                           check_same_thread=False)


def initialise(conn: sqlite3.Connection, budget: Budget) -> None:
    """Write the schema and the header row into an empty database."""
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute(f"PRAGMA user_version = {FORMAT}")
    conn.execute("BEGIN IMMEDIATE")
    for statement in SCHEMA:
        conn.execute(statement)
    total = budget.total
    conn.execute("INSERT INTO ledger_header VALUES (1, ?, ?, ?, ?, ?, ?)",
                 (FORMAT, budget.kind, total.epsilon, total.delta, total.rho, now()))
    conn.execute("COMMIT")


def create_file(path: str, budget: Budget) -> None:
    """Create a ledger at ``path`` atomically: build it aside, then hard-link it in.

    If another process creates ``path`` first, its ledger is kept untouched. The
    directory's filesystem must support hard links (every local POSIX one does).
    """
    directory = os.path.dirname(os.path.abspath(path))
    tmp = ""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".dpsql-ledger-", suffix=".tmp", dir=directory)
        os.close(fd)
        conn = connect(tmp)
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
            initialise(conn, budget)
        finally:
            conn.close()  # checkpoints the WAL into the file
        try:
            os.link(tmp, path)  # atomic, and fails if the name exists
        except FileExistsError:
            return  # another process created it first: keep theirs
        with contextlib.suppress(OSError):  # make the directory entry durable (POSIX)
            dir_fd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
    except (sqlite3.Error, OSError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else e
        raise LedgerError(f"cannot create budget ledger {path}: {why}") from e
    finally:
        for leftover in (tmp, tmp + "-wal", tmp + "-shm") if tmp else ():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(leftover)


#: Every finite double (and every whole number) is a whole multiple of 2^-1074, the smallest
#: subnormal: sums of ledger entries are kept exactly as whole numbers of that unit (Python's
#: integers, as exact as fractions and much cheaper to add).
UNIT_BITS = 1074


def exact_units(v: int | float) -> int:
    """``v`` (finite) in units of 2^-1074, exactly."""
    n, d = v.as_integer_ratio()  # d is a power of two, at most 2^1074
    return n << (UNIT_BITS + 1 - d.bit_length())


def units_float(units: int) -> float:
    """A sum in units of 2^-1074 as the nearest float (integer division is correctly rounded;
    OverflowError past the float range)."""
    return units / (1 << UNIT_BITS)


class Totals:
    """Exact running sums of the entries read so far (entries are append-only, ids increase).

    Each check reads only the entries added since the last one, so a long ledger costs no more
    to charge than a short one. Sums are kept as exact fractions of the stored floats.
    """

    def __init__(self) -> None:
        self.last_id = 0
        #: the sums in units of 2^-1074 (:func:`exact_units`)
        self.sums = [0, 0, 0]
        #: the sums as a Cost, while no entry was read since it was made
        self._cost: Cost | None = Cost()

    def read(self, conn: sqlite3.Connection, name: str) -> Cost:
        """The sums of every entry, reading (always) the entries added since the last read."""
        rows = conn.execute(
            "SELECT id, epsilon, delta, rho FROM ledger_entries WHERE id > ? ORDER BY id",
            (self.last_id,),
        ).fetchall()
        return self.add(rows, name)

    def add(self, rows: list[tuple[t.Any, ...]], name: str) -> Cost:
        """The sums after adding ``rows`` (id, ε, δ, ρ), the entries after the last one read."""
        if not rows and self._cost is not None:
            return self._cost  # nothing new: the sums, and so their Cost, are unchanged
        self._cost = None
        for row_id, *values in rows:
            if not all(isinstance(v, (int, float)) and math.isfinite(v) and v >= 0 for v in values):
                raise LedgerError(f"budget ledger {name} is corrupted: entry {row_id} costs {values!r}")
            for i, v in enumerate(values):
                self.sums[i] += exact_units(v)
            self.last_id = row_id
        try:
            self._cost = Cost(*(units_float(x) for x in self.sums))
        except BudgetError as e:
            raise LedgerError(f"budget ledger {name} is corrupted: entries sum to {e}") from e
        return self._cost


HEADER_TOTAL = "SELECT total_epsilon, total_delta, total_rho FROM ledger_header"
#: a charge's one read: the header's total with each entry after a given id (NULLs if none)
HEADER_AND_NEW_ENTRIES = (
    "SELECT h.total_epsilon, h.total_delta, h.total_rho, e.id, e.epsilon, e.delta, e.rho"
    " FROM ledger_header AS h LEFT JOIN ledger_entries AS e ON e.id > ? WHERE h.id = 1 ORDER BY e.id")


def header_total(conn: sqlite3.Connection, name: str, row: tuple[float, ...] | None = None) -> Cost:
    """The total the header records now (another process may have changed it); ``row``: the
    header's total columns, already read in the caller's transaction."""
    if row is None:
        row = conn.execute(HEADER_TOTAL).fetchone()
    if row is None:
        raise LedgerError(f"budget ledger {name} is corrupted: it has no header row")
    try:
        return Cost(*row)
    except BudgetError as e:
        raise LedgerError(f"budget ledger {name} is corrupted: header total: {e}") from e


def spent(conn: sqlite3.Connection, name: str) -> Cost:
    """Sums of every entry's ε, δ, ρ (exact); refuses impossible entries."""
    return Totals().read(conn, name)


def spent_by(conn: sqlite3.Connection, name: str, user: str) -> Cost:
    """Exact sums of the entries of one user."""
    sums = [0, 0, 0]
    for values in conn.execute("SELECT epsilon, delta, rho FROM ledger_entries WHERE user = ?", (user,)):
        for i, v in enumerate(values):
            sums[i] += exact_units(v)
    try:
        return Cost(*(units_float(x) for x in sums))
    except BudgetError as e:
        raise LedgerError(f"budget ledger {name} is corrupted: entries sum to {e}") from e


def check_file(path: str, read_only: bool = False) -> None:
    """Refuse before SQLite touches it a path that is not a (writable, unless ``read_only``)
    SQLite file."""
    try:
        with open(path, "rb") as f:
            head = f.read(100)
    except OSError as e:
        raise LedgerError(f"budget ledger {path} cannot be read: {e.strerror or e}") from e
    if len(head) < 100 or not head.startswith(MAGIC):
        raise LedgerError(f"budget ledger {path} is not a SQLite database (not a dpsql ledger)")
    if not read_only and not os.access(path, os.W_OK):
        raise LedgerError(f"budget ledger {path} is not writable; queries charge it, so they need write "
                          "access to it (dpsql --budget only reads it)")


def validate(conn: sqlite3.Connection, name: str, budget: Budget | None) -> tuple[Budget, str]:
    """Check that ``conn`` holds a sound ledger for ``budget`` (``None``: any); return the
    budget its header records and its creation time."""
    bad = f"budget ledger {name} is corrupted:"
    check = [str(r[0]).replace("\n", " ") for r in conn.execute("PRAGMA integrity_check")]
    if check != ["ok"]:
        why = "; ".join(check[:3])
        raise LedgerError(f"budget ledger {name} failed its integrity check: {why}")
    if conn.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
        raise LedgerError(f"budget ledger {name} is not a dpsql budget ledger")
    for table, expected in (("ledger_header", HEADER_COLS), ("ledger_entries", ENTRY_COLS)):
        found = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
        if found != expected and not (table == "ledger_entries" and found == ENTRY_COLS_V1):
            raise LedgerError(f"{bad} table {table} is missing or altered")
    rows = conn.execute(_HEADER).fetchall()
    if len(rows) != 1:
        raise LedgerError(f"{bad} it has {len(rows)} header rows")
    fmt, kind, eps, delta, rho, created = rows[0]
    if fmt != FORMAT or kind not in KINDS or not isinstance(created, str):
        raise LedgerError(f"{bad} unknown header (format {fmt!r}, kind {kind!r})")
    try:
        recorded = Budget(Cost(eps, delta, rho))
    except BudgetError as e:
        raise LedgerError(f"{bad} header total: {e}") from e
    if recorded.kind != kind:
        raise LedgerError(f"{bad} header total {recorded.total} is not in its kind {kind!r}")
    if budget is not None and kind != budget.kind:
        raise LedgerError(f"budget ledger {name} accounts in {KIND_NAMES[kind]} but the policy's "
                          f"budget is {budget.kind_name}; use a separate ledger")
    if budget is not None and not same_total(recorded.total, budget.total):
        raise LedgerError(
            f"budget ledger {name} has a total of {format_total(recorded.total, kind)} but the "
            f"policy's budget is {format_total(budget.total, kind)}; {FIX}")
    spent(conn, name)
    return recorded, created


def add_user_column(conn: sqlite3.Connection) -> None:
    """Migrate a ledger made before entries recorded their user: add the column (empty for the
    old entries), in one transaction that another process may have done first."""
    with immediate(conn):
        if [r[1] for r in conn.execute("PRAGMA table_info(ledger_entries)")] == ENTRY_COLS_V1:
            conn.execute(ADD_USER)


def check_current(conn: sqlite3.Connection, name: str) -> None:
    """Refuse, when it is opened read-only, a ledger made before entries recorded their user
    (opening it with write access migrates it)."""
    if [r[1] for r in conn.execute("PRAGMA table_info(ledger_entries)")] == ENTRY_COLS_V1:
        raise LedgerError(f"budget ledger {name} was made by an older dpsql; open it once with write "
                          "access (a query run by its owner) to bring it up to date")


def check_releases_table(conn: sqlite3.Connection, name: str) -> None:
    """Refuse an altered table of reusable releases (the first release stored creates it)."""
    columns = [r[1] for r in conn.execute("PRAGMA table_info(ledger_releases)")]
    if columns and columns != releases.COLUMNS:
        raise LedgerError(f"budget ledger {name} is corrupted: table ledger_releases is altered")
