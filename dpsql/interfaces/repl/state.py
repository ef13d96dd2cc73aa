"""The shell's mutable state: output format, timer, the ``.output`` and ``.once`` targets and
their streams.

Kept apart from the executor and the special commands so that both can use it without
importing each other.
"""

from __future__ import annotations

import os
import sys
import typing as t
from dataclasses import dataclass, field

from dpsql.errors import Error

#: How deep ``.read`` may nest (a file that reads itself stops here).
MAX_READ_DEPTH = 16
#: Files SQLite and DuckDB keep next to a database: overwriting one damages the database too.
SIDE_FILES = ("-wal", "-shm", "-journal", ".wal")


@dataclass
class ReplState:
    """The shell's mutable state and its output streams."""

    con: t.Any
    fmt: str = "table"
    timer: bool = False
    quit: bool = False
    #: ``.types on``: column types on a second header line of tables
    types: bool = False
    #: ``.maxrows N``: rows a table shows (0: all)
    max_rows: int = 0
    #: the file ``.output FILE`` opened, or ``None`` for standard output
    target_file: t.TextIO | None = None
    target_name: str | None = None
    #: the file ``.once FILE`` opened: the next statement's output goes there, then it is closed
    once_file: t.TextIO | None = None
    read_depth: int = 0
    #: the files ``.read`` is running, innermost last
    read_files: list[str] = field(default_factory=list)
    #: the last result a statement returned (``.plot`` draws it)
    last: t.Any = None
    #: called after every statement that may have spent budget (the shell refreshes its toolbar)
    on_change: list[t.Callable[[], None]] = field(default_factory=list)
    #: called after ``.open`` replaced :attr:`con` (the completer reads the new catalog)
    on_open: list[t.Callable[[], None]] = field(default_factory=list)
    #: runs a script of statements and special commands (``.read``); set by the executor
    script_runner: t.Callable[["ReplState", str], None] | None = None

    # -- streams --------------------------------------------------------------------------------

    @property
    def target(self) -> t.TextIO:
        """Where results go: the ``.once`` file, the ``.output`` file or standard output."""
        if self.once_file is not None:
            return self.once_file
        return self.target_file if self.target_file is not None else sys.stdout

    def echo(self, text: str = "") -> None:
        """Print ``text`` on the terminal (standard output), whatever ``.output`` says."""
        print(text, file=sys.stdout, flush=True)

    def emit(self, text: str) -> None:
        """Print ``text`` on the target."""
        print(text, file=self.target, flush=True)

    def error(self, message: str, detail: t.Sequence[str] = ()) -> None:
        """Print ``Error: message`` on standard error, in red on a terminal; then the ``detail``
        lines (a syntax error's line and caret)."""
        text = "\n".join([f"Error: {message}", *detail])
        stream = sys.stderr
        if isatty(stream):
            from prompt_toolkit import print_formatted_text
            from prompt_toolkit.formatted_text import FormattedText

            print_formatted_text(FormattedText([("ansired", text)]), file=stream)
            stream.flush()
        else:
            print(text, file=stream, flush=True)

    def set_output(self, path: str | None) -> None:
        """Send results to ``path`` (truncated) or, with ``None``, back to standard output.

        Refuses (Error) a path that is, or resolves to, a file of the connection: see
        :func:`refuse_connection_file`.
        """
        fh = self._open(path) if path is not None else None
        self.close_output()
        if fh is not None:
            self.target_file, self.target_name = fh, path

    def set_once(self, path: str) -> None:
        """Send the next statement's output to ``path`` (truncated); :meth:`end_once` after it."""
        fh = self._open(path)
        self.end_once()
        self.once_file = fh

    def end_once(self) -> None:
        """Close the ``.once`` file, if any: output goes where it went before."""
        if self.once_file is not None:
            self.once_file.close()
            self.once_file = None

    def _open(self, path: str) -> t.TextIO:
        refuse_connection_file(self.con, path)
        try:
            return open(path, "w", encoding="utf-8")  # noqa: SIM115 - kept open until .output or the next result
        except OSError as err:
            raise Error(f"cannot write {path}: {err.strerror}") from None

    def close_output(self) -> None:
        """Close the ``.output`` file, if any (and a ``.once`` file not used yet)."""
        self.end_once()
        if self.target_file is not None:
            self.target_file.close()
        self.target_file, self.target_name = None, None

    def changed(self) -> None:
        for callback in self.on_change:
            callback()

    def opened(self, con: t.Any) -> None:
        """``.open`` made ``con`` the connection: tell whoever reads the catalog."""
        self.con = con
        for callback in self.on_open:
            callback()
        self.changed()

    def close_opened(self, original: t.Any) -> None:
        """At the end: close the DuckDB of a connection ``.open`` made (the ledger is
        ``original``'s, which its owner closes)."""
        if self.con is not original:
            self.con.engine.close()


def connection_files(con: t.Any) -> list[tuple[str, str]]:
    """``(what, path)`` of the files ``con`` depends on: its budget ledger, database, data files
    and policy."""
    files = []
    ledger = getattr(getattr(con, "ledger", None), "path", None)
    if ledger:
        files.append(("the budget ledger", ledger))
    files += [("the database", path) for path in getattr(con, "database_files", ())]
    files += [("a data file", path) for path in getattr(con, "data_files", ())]
    source = getattr(getattr(con, "policy", None), "source", None)
    if source:
        files.append(("the policy file", source))
    return files


def refuse_connection_file(con: t.Any, path: str) -> None:
    """Raise Error if writing ``path`` would write over a file of ``con`` or one of its side files
    (``-wal``, ``-shm``, ``-journal``, ``.wal``), also through symbolic or hard links."""
    real = os.path.realpath(path)
    try:
        stat = os.stat(path)
    except OSError:
        stat = None  # does not exist (yet): only its resolved path can match
    for what, file in connection_files(con):
        for suffix in ("", *SIDE_FILES):
            guarded = file + suffix
            same = os.path.realpath(guarded) == real
            if not same and stat is not None:
                try:
                    same = os.path.samestat(stat, os.stat(guarded))
                except OSError:
                    pass
            if same:
                which = f"the {suffix} file of {what}" if suffix else what
                raise Error(f"cannot write results to {path}: it is {which} {file} of this connection; "
                            "choose another file")


def isatty(stream: t.Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
