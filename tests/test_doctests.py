"""Every docstring example in the package runs and prints what it shows."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import dpsql

#: modules that need an optional extra or a live engine to import
_SKIP = ("dpsql.__main__", "dpsql.backends.spark", "dpsql.backends.spark_open", "dpsql.interfaces.server",
         "dpsql.interfaces.notebook")

MODULES = sorted(
    m.name for m in pkgutil.walk_packages(dpsql.__path__, "dpsql.") if not m.name.startswith(_SKIP)
)


def test_modules_are_found() -> None:
    assert "dpsql._sql.shadow" in MODULES and len(MODULES) > 80


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    failures, _ = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert failures == 0, f"{failures} docstring example(s) of {name} fail"
