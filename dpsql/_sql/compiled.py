"""sqlglot's compiled build, refused in one line.

``sqlglotc`` (what the ``sqlglot[c]`` extra installs) compiles sqlglot's parser, generator and
nodes so that no Python class may extend them, and dpsql's dialect (:mod:`dpsql._sql.dialect`)
is made of such extensions: without this check the first query fails with "interpreted classes
cannot inherit from compiled", which names neither the cause nor the fix.
"""

from __future__ import annotations

import typing as t

from dpsql.errors import Error

#: What dpsql says when sqlglot's compiled build is installed (see :func:`check_build`).
COMPILED_SQLGLOT = ("sqlglot's compiled build (the package sqlglotc, which sqlglot[c] installs) is in this "
                    "Python environment, and dpsql's SQL dialect extends sqlglot's classes, which that build "
                    "does not allow: run pip uninstall sqlglotc")


def check_build(make: t.Callable[[], t.Any]) -> None:
    """Refuse sqlglot's compiled build in one line (the module docstring). ``make``: what is
    built to find out (the dialect's parser).

    >>> from dpsql._sql.dialect import DPSQL
    >>> check_build(DPSQL().parser)
    >>> def compiled(): raise TypeError("interpreted classes cannot inherit from compiled")
    >>> check_build(compiled)
    Traceback (most recent call last):
    dpsql.errors.Error: sqlglot's compiled build (the package sqlglotc, ...
    """
    try:
        make()
    except TypeError as err:
        if "compiled" in str(err):
            raise Error(COMPILED_SQLGLOT) from None
        raise
