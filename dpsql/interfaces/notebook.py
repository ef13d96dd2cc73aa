"""The ``%%dpsql`` cell magic for IPython and Jupyter (``%load_ext dpsql``).

    %%dpsql con
    SELECT sex, DP_MEAN(age) AS mean_age FROM adult GROUP BY sex WITH (epsilon = 1)

runs the cell's statements on the :class:`dpsql.Connection` named ``con`` in the notebook's
namespace (with no name, on the only connection there is) and shows each result as a table
with its privacy report under it. The cell's value is the last :class:`dpsql.Result`, so it
can be kept (``res = _``) or named up front with ``--out NAME``. A line ``.budget`` in the cell
shows the budget. A refused statement prints one ``Error:`` line (a syntax error adds the line
and a caret) and the cell stops there; nothing is charged for it. Interrupting the kernel while
a query runs cancels it: the cell stops with a :class:`~dpsql.errors.QueryCancelled` (a
KeyboardInterrupt) shown as one line, ``Query cancelled; nothing was charged``.

jupysql's ``%sql`` is another way in; it needs dpsql's SQLAlchemy dialect, which this module
does not provide.
"""

from __future__ import annotations

import shlex
import sys
import typing as t

from IPython.core.magic import Magics, cell_magic, magics_class

from dpsql.errors import Error
from dpsql.interfaces.console import one_line, pointer_lines, split_script

USAGE = "usage: %%dpsql [CONNECTION] [--out NAME]"


@magics_class
class DPSQLMagics(Magics):
    """``%%dpsql``: run a cell of dpsql statements on a connection of the notebook."""

    @cell_magic
    def dpsql(self, line: str, cell: str) -> t.Any:
        try:
            name, out = _arguments(line)
            con = self._connection(name)
        except Error as err:
            _error(err)
            return None
        result = None
        items = split_script(cell)
        for number, item in enumerate(items, 1):
            if result is not None:
                _display(result)
            try:
                result = con.sql(item.text) if item.kind == "sql" else _special(con, item.text)
            except Error as err:
                where = f"statement {number} (line {item.line}): " if len(items) > 1 else ""
                _error(err, where)
                return None
            except KeyboardInterrupt as err:
                released = getattr(err, "result", None)  # a QueryCancelled after the release
                if released is not None:  # released before Ctrl-C: shown
                    _display(released)
                raise
        if out is not None and result is not None:
            self._namespace()[out] = result
        return result

    def _namespace(self) -> dict[str, t.Any]:
        """The notebook's variables (the magic is registered on a shell, so it has one)."""
        if self.shell is None:
            raise Error("%%dpsql runs inside IPython or Jupyter, after %load_ext dpsql")
        return self.shell.user_ns

    def _connection(self, name: str | None) -> t.Any:
        from dpsql.connection import Connection

        namespace = self._namespace()
        if name is not None:
            if name not in namespace:
                raise Error(f"no variable {name} in the notebook; open one with {name} = dpsql.connect(...)")
            if not isinstance(namespace[name], Connection):
                raise Error(f"{name} is a {type(namespace[name]).__name__}, not a dpsql connection "
                            "(dpsql.connect(...) returns one)")
            return namespace[name]
        found = sorted(k for k, v in namespace.items() if isinstance(v, Connection) and not k.startswith("_"))
        if len(found) == 1:
            return namespace[found[0]]
        if not found:
            raise Error("no dpsql connection in the notebook; open one with con = dpsql.connect(...) "
                        "and run %%dpsql con")
        raise Error(f"name the connection to use: %%dpsql {found[0]} (there are {', '.join(found)})")


def _arguments(line: str) -> tuple[str | None, str | None]:
    try:
        words = shlex.split(line)
    except ValueError:
        raise Error(USAGE) from None
    name = out = None
    while words:
        word = words.pop(0)
        if word in ("--out", "-o"):
            if not words:
                raise Error(USAGE)
            out = words.pop(0)
        elif name is None and word.isidentifier():
            name = word
        else:
            raise Error(USAGE)
    return name, out


def _special(con: t.Any, command: str) -> t.Any:
    word = command.split()[0].rstrip(";").lower()
    if word == ".budget":
        return con.budget
    raise Error(f"unknown command '{word}' in a %%dpsql cell; there only .budget works "
                "(for tables and columns: SHOW TABLES, DESCRIBE t)")


def _display(value: t.Any) -> None:
    from IPython.display import display

    display(value)


def _error(err: Error, where: str = "") -> None:
    print(f"Error: {where}{one_line(err)}", file=sys.stderr)
    for line in pointer_lines(err):
        print(line, file=sys.stderr)


def load_ipython_extension(ipython: t.Any) -> None:
    """Register ``%%dpsql`` (``%load_ext dpsql`` calls this)."""
    ipython.register_magics(DPSQLMagics)
