"""Special commands of the interactive shell (``.tables``, ``\\d adult``, ``.budget``, ...).

Every command is a function ``(state, arg) -> None`` registered with :func:`command`, which
records it in :data:`COMMANDS` (name → :class:`Command`: function, help, aliases, ...) and its
aliases in :data:`ALIASES`. :func:`dispatch` parses a line and calls the command; a wrong
argument raises :class:`dpsql.errors.Error`, which the shell prints as ``Error: ...``.
"""

from __future__ import annotations

import shlex
import typing as t

from dpsql._accounting.budget import format_cost
from dpsql.errors import Error
from dpsql.interfaces.output import FORMATS, render_table
from dpsql.interfaces.repl.state import MAX_READ_DEPTH

if t.TYPE_CHECKING:
    from dpsql.interfaces.repl.state import ReplState

Handler = t.Callable[["ReplState", str], None]


class Command(t.NamedTuple):
    """A registered special command."""

    func: Handler
    help: str
    aliases: tuple[str, ...] = ()
    #: the argument as shown by ``.help`` (``"TABLE"``, ``"on|off"``)
    usage: str = ""
    #: what the completer offers for the argument: ``"table"``, ``"file"``, words, or ``None``
    arg: t.Any = None


#: name (with its leading dot) → command
COMMANDS: dict[str, Command] = {}
#: alias → name
ALIASES: dict[str, str] = {}


def command(
    name: str, help: str, *, aliases: t.Sequence[str] = (), usage: str = "", arg: t.Any = None
) -> t.Callable[[Handler], Handler]:
    """Register the decorated function as the special command ``name``."""

    def register(func: Handler) -> Handler:
        COMMANDS[name] = Command(func, help, tuple(aliases), usage, arg)
        for alias in aliases:
            ALIASES[alias] = name
        return func

    return register


def resolve(word: str) -> str | None:
    """The command name ``word`` denotes (a name or an alias), or ``None``."""
    word = word.lower() if word.startswith(".") else word
    if word in COMMANDS:
        return word
    return ALIASES.get(word)


def dispatch(state: ReplState, line: str) -> None:
    """Run the special command on ``line`` (``.schema adult;`` → ``.schema`` with ``adult``)."""
    word, _, arg = line.strip().partition(" ")
    word = word.rstrip(";")
    name = resolve(word)
    if name is None:
        raise Error(f"unknown command '{word}'; .help lists the commands")
    COMMANDS[name].func(state, arg.strip().rstrip(";").strip())


def is_once(line: str) -> bool:
    """Whether ``line`` is the ``.once`` command (whose file waits for what comes next)."""
    words = line.split()
    return bool(words) and resolve(words[0].rstrip(";")) == ".once"


def completion_kinds() -> dict[str, t.Any]:
    """``{name or alias: argument kind}`` for the completer."""
    kinds = {name: cmd.arg for name, cmd in COMMANDS.items()}
    kinds.update({alias: COMMANDS[name].arg for alias, name in ALIASES.items()})
    return kinds


def _one_path(arg: str, usage: str) -> str:
    try:
        parts = shlex.split(arg)
    except ValueError:
        parts = [arg]
    if len(parts) != 1:
        raise Error(f"usage: {usage}")
    return parts[0]


def _on_off(arg: str, name: str) -> bool:
    value = arg.lower()
    if value not in ("on", "off"):
        raise Error(f"usage: {name} on|off")
    return value == "on"


# -- the commands -----------------------------------------------------------------------------


@command(".help", "show this help, or the help of one command", aliases=("\\?",), usage="[COMMAND]")
def _help(state: ReplState, arg: str) -> None:
    if arg:
        name = resolve(arg if arg.startswith(("\\", ".")) else "." + arg)
        if name is None:
            raise Error(f"unknown command '{arg}'; .help lists the commands")
        names = [name]
    else:
        names = list(COMMANDS)
    rows = []
    for name in names:
        cmd = COMMANDS[name]
        rows.append((f"{name} {cmd.usage}".strip(), ", ".join(cmd.aliases), cmd.help))
    width = max(len(r[0]) for r in rows)
    for usage, aliases, text in rows:
        also = f"  [{aliases}]" if aliases else ""
        state.emit(f"{usage.ljust(width)}  {text}{also}")
    if not arg:
        state.emit("SQL statements end with ';' and may span lines; Ctrl-C clears the input or cancels a "
                   "running query, Ctrl-D exits.")


@command(".tables", "list the tables the policy declares", aliases=("\\dt",))
def _tables(state: ReplState, arg: str) -> None:
    policy = state.con.policy
    rows = []
    for name in state.con.tables():
        tp = policy.tables[name]
        if tp.public:
            rows.append((name, "public", "", ""))
        else:
            rows.append((name, "private", tp.privacy_unit, tp.max_rows_per_unit))
    state.emit(render_table(["table", "access", "privacy unit", "max rows per unit"], rows))


@command(".schema", "columns of a table (or of all): types, and the policy's bounds and keys",
         aliases=("\\d",), usage="[TABLE]", arg="table")
def _schema(state: ReplState, arg: str) -> None:
    names = [arg.lower()] if arg else state.con.tables()
    parts = arg.lower().split(".")
    if arg and len(parts) <= 3:  # hospital.admissions: the declared table that name means
        found = state.con.policy.resolve(*reversed(parts), exists=state.con.columns)
        names = found if len(found) == 1 else names
    for name in names:
        tp = state.con.policy.tables.get(name)
        columns = state.con.columns(name) if tp is not None else None
        if tp is None or columns is None:
            raise Error(f"no table '{arg}' in the policy and the database; .tables lists them")
        if tp.public:
            state.emit(f"{name}: public (read as plain DuckDB, no budget spent)")
        else:
            state.emit(f"{name}: private; privacy unit {tp.privacy_unit}, at most {tp.max_rows_per_unit} "
                       f"row(s) per unit{_group_bounds(tp)}")
        rows = []
        for col, dtype in columns.items():
            cp = tp.column(col)
            bounds = f"[{cp.lower:g}, {cp.upper:g}]" if cp.bounds else ""
            keys = ", ".join(map(str, cp.keys)) if cp.keys else ""
            rows.append((col, dtype, bounds, keys))
        state.emit(render_table(["column", "type", "bounds", "keys"], rows))


def _group_bounds(tp: t.Any) -> str:
    """``; in a GROUP BY at most 3 group(s) × 2 row(s) per unit`` when the policy bounds groups."""
    if tp.max_groups_per_unit is None:
        return ""
    rows = tp.max_rows_per_group_per_unit or tp.max_rows_per_unit
    return "; in a GROUP BY at most " + f"{tp.max_groups_per_unit} group(s) × {rows} row(s) per unit"


@command(".policy", "the privacy policy: neighbouring, budget, ledger, tables")
def _policy(state: ReplState, arg: str) -> None:
    pol = state.con.policy
    kind = pol.budget.kind
    state.emit(f"neighbouring: {pol.neighbouring}" + (f" (groups of {pol.group_size})" if pol.group_size > 1 else ""))
    state.emit(f"budget: {format_cost(pol.budget.total, kind)} ({kind})")
    state.emit(f"ledger: {pol.ledger or 'in memory (for the life of this shell)'}")
    for name in sorted(pol.tables):
        tp = pol.tables[name]
        if tp.public:
            state.emit(f"table {name}: public")
            continue
        bounded = sorted(c for c, cp in tp.columns.items() if cp.bounds)
        keyed = sorted(c for c, cp in tp.columns.items() if cp.keys)
        state.emit(f"table {name}: private; privacy unit {tp.privacy_unit}, at most {tp.max_rows_per_unit} "
                   f"row(s) per unit{_group_bounds(tp)}")
        state.emit(f"  bounds: {', '.join(bounded) or '(none)'}")
        state.emit(f"  keys: {', '.join(keyed) or '(none)'}")


@command(".budget", "budget spent and remaining, and every charge so far")
def _budget(state: ReplState, arg: str) -> None:
    status = state.con.budget
    state.emit(str(status))
    columns, rows = status.history_rows()
    if rows:
        state.emit(render_table(columns, rows))
    else:
        state.emit("no query has spent budget yet")


@command(".explain", "mechanisms, budget split, noise scales and rewritten SQL; reads no data",
         usage="QUERY")
def _explain(state: ReplState, arg: str) -> None:
    if not arg:
        raise Error("usage: .explain QUERY")
    state.emit(state.con.explain(arg))


@command(".mode", "output format of results", usage="|".join(FORMATS), arg=FORMATS)
def _mode(state: ReplState, arg: str) -> None:
    if not arg:
        state.echo(f"mode: {state.fmt}")
        return
    if arg.lower() not in FORMATS:
        raise Error(f"usage: .mode {'|'.join(FORMATS)}")
    state.fmt = arg.lower()


@command(".read", "run the statements (and special commands) in FILE", usage="FILE", arg="file")
def _read(state: ReplState, arg: str) -> None:
    path = _one_path(arg, ".read FILE")
    if state.read_depth >= MAX_READ_DEPTH:
        raise Error(f".read nested deeper than {MAX_READ_DEPTH} files")
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as err:
        raise Error(f"cannot read {path}: {err.strerror}") from None
    if state.script_runner is None:  # pragma: no cover - the executor always sets it
        raise Error(".read is not available here")
    state.read_depth += 1
    state.read_files.append(path)
    try:
        state.script_runner(state, text)
    finally:
        state.read_files.pop()
        state.read_depth -= 1


@command(".output", "send results to FILE; with no FILE, back to the screen", usage="[FILE]", arg="file")
def _output(state: ReplState, arg: str) -> None:
    if not arg:
        state.set_output(None)
        return
    path = _one_path(arg, ".output [FILE]")
    state.set_output(path)
    state.echo(f"results go to {path}; .output alone sends them back to the screen")


@command(".plot", "write a chart of the last result (values and their intervals) to FILE (.png, .svg, .pdf)",
         usage="FILE", arg="file")
def _plot(state: ReplState, arg: str) -> None:
    path = _one_path(arg, ".plot FILE")
    if state.last is None:
        raise Error("no result to plot yet: run a query first, then .plot FILE")
    try:
        state.last.plot().savefig(path)
    except OSError as err:
        raise Error(f"cannot write {path}: {err.strerror or err}") from None
    except ValueError as err:  # matplotlib: an extension it has no writer for
        raise Error(f"cannot write {path}: {err}; use .png, .svg or .pdf") from None
    state.echo(f"chart written to {path}")


@command(".once", "send the output of the next statement (or command) to FILE, then to the screen again",
         usage="FILE", arg="file")
def _once(state: ReplState, arg: str) -> None:
    state.set_once(_one_path(arg, ".once FILE"))


@command(".maxrows", "rows a table shows at most (0: all of them)", usage="N")
def _maxrows(state: ReplState, arg: str) -> None:
    if not arg:
        state.echo(f"maxrows: {state.max_rows or 'all'}")
        return
    if not arg.isdigit():
        raise Error("usage: .maxrows N (a whole number of rows; 0 shows them all)")
    state.max_rows = int(arg)


@command(".types", "show each column's type under its name in tables", usage="on|off", arg=("on", "off"))
def _types(state: ReplState, arg: str) -> None:
    _toggle(state, arg, "types")


@command(".open", "the same policy and budget on another DuckDB database FILE", usage="FILE", arg="file")
def _open(state: ReplState, arg: str) -> None:
    from dpsql.interfaces.repl.reopen import reopen

    path = _one_path(arg, ".open FILE")
    state.opened(reopen(state.con, path))
    tables = ", ".join(state.con.tables()) or "none of the policy's tables"
    state.echo(f"opened {path} (tables: {tables}); the budget goes on: remaining "
               f"{format_cost(state.con.ledger.remaining(), state.con.ledger.kind)}")


@command(".timer", "show how long each query takes", usage="on|off", arg=("on", "off"))
def _timer(state: ReplState, arg: str) -> None:
    _toggle(state, arg, "timer")


def _toggle(state: ReplState, arg: str, name: str) -> None:
    """``.NAME on|off`` sets the shell's switch ``name``; ``.NAME`` alone says how it is set."""
    if not arg:
        state.echo(f"{name}: {'on' if getattr(state, name) else 'off'}")
        return
    setattr(state, name, _on_off(arg, f".{name}"))


@command(".quit", "leave the shell; Ctrl-D on an empty line does too", aliases=(".exit", "\\q"))
def _quit(state: ReplState, arg: str) -> None:
    state.quit = True
