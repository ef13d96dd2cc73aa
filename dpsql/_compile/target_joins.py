"""The Spark forms of what joins, flat maps and truncation add to a statistics statement.

:class:`dpsql._compile.target.SparkTarget` calls these; each takes a node of the DuckDB statement
(the reference form written by :mod:`dpsql._sql.joins` and :mod:`dpsql._plan.rewrite`) and
gives the Spark node of the same meaning:

==========================================  =========================================================
DuckDB form                                  Spark form
==========================================  =========================================================
``SELECT p FROM x QUALIFY c`` (truncation    ``SELECT * EXCEPT (__keep) FROM (SELECT p, c AS __keep
of a side, of a public table per key, of     FROM x) AS __qualified WHERE __keep``: Spark's own
a unit's rows)                               QUALIFY refuses the ``alias.*`` of a row hash in it
``CROSS JOIN UNNEST(l) AS f(e)``             ``CROSS JOIN LATERAL EXPLODE(l) AS f(e)``, in place
                                             (``LATERAL VIEW`` would move it after every join). A NULL
                                             or empty list gives no row on both (not
                                             ``EXPLODE_OUTER``)
``list_slice(l, b, e)``, ``l[b:e]``          ``SLICE(l, b, e − b + 1)`` for literal ``1 ≤ b``; other
(1-based, both ends included)                bounds are refused on Spark (``SLICE`` raises on a start
                                             of 0 and on a negative length)
``string_split(x, 'sep')`` (a literal        ``SPLIT(x, 'regex', -1)``, the separator's every
separator)                                   non-alphanumeric character escaped (Spark splits by a
                                             Java regex); ``-1`` keeps trailing empty strings, as DuckDB;
                                             ``''`` splits into characters on both
``string_split_regex(x, 're')``              ``SPLIT(x, 're', -1)``: Java's regex syntax, not RE2's
``SEMI JOIN`` / ``ANTI JOIN``                ``LEFT SEMI JOIN`` / ``LEFT ANTI JOIN``
``HASH(__j1)`` of a joined table or flat     ``XXHASH64(__j1.*)`` (see :meth:`SparkTarget.row_hash`)
map (the whole row)
==========================================  =========================================================

Key comparisons stay ``TRY_CAST(x AS type) = __j1.c`` (the same on both engines, total with
ANSI off), and ``x IN (SELECT c FROM public ...)`` is the same syntax on both.
"""

from __future__ import annotations

import re
import typing as t

from sqlglot import exp

from dpsql.errors import BindError

#: The reserved aliases of FROM items whose whole row a ``HASH(...)`` reads: the private
#: table (``__t``), joined tables (``__j1``, ...) and flat maps (``__f1``, ...).
ROW_ALIAS = re.compile(r"^__(t|j\d+|f\d+)$")
#: The column a QUALIFY condition is computed into.
KEEP = "__keep"
#: A slice "to the end": longer than any list.
_TO_END = 2**31 - 1

Form = t.Callable[[exp.Expression], exp.Expression]


def _fn(name: str, *args: exp.Expression) -> exp.Anonymous:
    return exp.Anonymous(this=name, expressions=list(args))


def qualify(select: exp.Select) -> exp.Select:
    """``SELECT p FROM x QUALIFY c``: ``SELECT * EXCEPT (__keep) FROM (SELECT p, c AS __keep
    FROM x) AS __qualified WHERE __keep``.

    The condition is computed in the inner SELECT, where it sees the columns of ``x`` (also
    those ``p`` excludes, such as the row hash) and its window functions run over the same
    rows; names of ``p``'s aliases in it are replaced by their expressions, as QUALIFY
    resolves them. A row whose condition is NULL is dropped by both.
    """
    cond = select.args["qualify"].this.copy()
    aliases = {e.alias: e.this for e in select.expressions if isinstance(e, exp.Alias)}

    def inline(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and not node.table and node.name in aliases:
            return exp.Paren(this=aliases[node.name].copy())
        return node

    cond = cond.transform(inline, copy=False)
    inner = select.copy()
    inner.set("qualify", None)
    inner.append("expressions", exp.alias_(cond, KEEP))
    star = exp.Star(except_=[exp.column(KEEP)])
    outer = exp.Select(expressions=[star])
    outer.set("from_", exp.From(this=exp.Subquery(this=inner, alias=exp.TableAlias(
        this=exp.to_identifier("__qualified")))))
    outer.set("where", exp.Where(this=exp.column(KEEP)))
    return outer


def semi(join: exp.Join) -> exp.Join:
    """``SEMI JOIN`` / ``ANTI JOIN``: ``LEFT SEMI JOIN`` / ``LEFT ANTI JOIN`` (Spark's names)."""
    join.set("side", "LEFT")
    return join


def flat_map(join: exp.Join, form: Form) -> exp.Join:
    """``CROSS JOIN UNNEST(l) AS f(e)``: ``CROSS JOIN LATERAL EXPLODE(l') AS f(e)`` where it
    stands (``l'`` is ``l`` in Spark's forms)."""
    unnest = join.this
    (listed,) = unnest.expressions
    lateral = exp.Lateral(this=exp.Explode(this=listed.copy().transform(form, copy=False)),
                          alias=unnest.args["alias"].copy())
    return exp.Join(this=lateral, kind="CROSS")


def _int(node: exp.Expression | None) -> int | None:
    if isinstance(node, exp.Neg) and _int(node.this) is not None:
        return -t.cast(int, _int(node.this))
    if isinstance(node, exp.Literal) and not node.is_string and str(node.this).isdigit():
        return int(node.this)
    return None


def list_slice(listed: exp.Expression, begin: exp.Expression | None, end: exp.Expression | None,
               form: Form) -> exp.Expression:
    """DuckDB's 1-based slice ``l[b:e]`` (both ends included; a missing end is the list's end)
    as ``SLICE(l, b, length)``, for literal bounds with ``b ≥ 1``."""
    b = 1 if begin is None else _int(begin)
    e = _TO_END if end is None else _int(end)
    if b is None or e is None or b < 1 or e < 0:
        shown = f"[{'' if begin is None else begin.sql('duckdb')}:{'' if end is None else end.sql('duckdb')}]"
        raise BindError(f"on Spark a list slice needs literal bounds 1 <= begin and 0 <= end, not {shown}; "
                        "use max_rows = n to bound the list instead")
    length = max(e - b + 1, 0)
    return _fn("SLICE", listed.copy().transform(form, copy=False), exp.Literal.number(b),
               exp.Literal.number(length))


def split(value: exp.Expression, separator: exp.Expression, regex: bool, form: Form) -> exp.Expression:
    """A string split by a literal separator (or a regex) as Spark's ``SPLIT(x, regex, -1)``."""
    if not (isinstance(separator, exp.Literal) and separator.is_string):
        raise BindError("on Spark a string is split by a literal separator")
    text = separator.this
    if not regex:  # '' splits into characters on both engines
        text = "".join(c if c.isalnum() and c.isascii() else "\\" + c for c in text)
    return _fn("SPLIT", value.copy().transform(form, copy=False), exp.Literal.string(text),
               exp.Literal.number(-1))


def list_form(node: exp.Expression, form: Form, scalar: Form) -> exp.Expression | None:
    """The Spark form of a list slice or a split (see the module's table), or None for a node
    of another kind. ``form`` converts a list inside (slices again), ``scalar`` the string a
    split reads (where ``x[b:e]`` is a substring, not a slice)."""
    if isinstance(node, exp.Bracket) and len(node.expressions) == 1 and isinstance(node.expressions[0], exp.Slice):
        bounds = node.expressions[0]
        return list_slice(node.this, bounds.this, bounds.expression, form)
    if isinstance(node, exp.Anonymous) and node.name.lower() == "list_slice" and len(node.expressions) == 3:
        listed, begin, end = node.expressions
        return list_slice(listed, begin, end, form)
    if isinstance(node, (exp.Split, exp.RegexpSplit)):
        return split(node.this, node.expression, isinstance(node, exp.RegexpSplit), scalar)
    if isinstance(node, exp.Anonymous) and len(node.expressions) == 2:
        name = node.name.lower()
        if name in ("str_split", "string_split", "string_to_array"):
            return split(*node.expressions, regex=False, form=scalar)
        if name in ("regexp_split_to_array", "string_split_regex", "str_split_regex"):
            return split(*node.expressions, regex=True, form=scalar)
    return None
