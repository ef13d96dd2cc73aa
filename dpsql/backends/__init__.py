"""Engines that hold the data: a documented extension point.

A backend is a subclass of :class:`Backend` (:mod:`dpsql.backends.backend`): everything dpsql
asks of the engine that runs the statistics statement and public SQL. DuckDB's is
:class:`~dpsql.backends.duck.DuckDBEngine` (the default), Spark's
:class:`~dpsql.backends.spark.SparkEngine`; ``dpsql.connect(backend, policy=...)`` takes any
other subclass. A backend names the SQL :class:`Target` its statements are written for, and
the statistics statement is written by the :class:`Compiler` registered under that target's
name (:func:`register_compiler`; DuckDB's is the reference, a new one overrides the forms that
differ). The other modules here serve DuckDB and Spark: the statistics as columns, DuckDB's
lockdown and sources, opening a Spark session.
"""

from __future__ import annotations

import importlib
import typing as t

if t.TYPE_CHECKING:
    from dpsql._compile.compiler import Compiler
    from dpsql._compile.compiler import register as register_compiler
    from dpsql._compile.target import Target
    from dpsql.backends.backend import Backend, Tables

_LAZY = {
    "Backend": ("dpsql.backends.backend", "Backend"),
    "Tables": ("dpsql.backends.backend", "Tables"),
    "Compiler": ("dpsql._compile.compiler", "Compiler"),
    "register_compiler": ("dpsql._compile.compiler", "register"),
    "Target": ("dpsql._compile.target", "Target"),
}

__all__ = ["Backend", "Compiler", "Tables", "Target", "register_compiler"]


def __getattr__(name: str) -> t.Any:
    if name in _LAZY:  # imported on first use, as the package's own names are
        module, attribute = _LAZY[name]
        return getattr(importlib.import_module(module), attribute)
    raise AttributeError(f"module 'dpsql.backends' has no attribute {name!r}")
