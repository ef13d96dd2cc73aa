"""The policy's ``[engine]`` section: where the command line and the server run the statistics.

::

    [engine]
    name = "spark"                # or "duckdb" (the default without the section)
    master = "local[2]"           # with name = "spark": a Spark master URL, or sc://host:port

It is a deployment setting, like ``[server]``: it changes neither what a query may release nor
what it costs, and the same policy gives the same refusals on either engine. ``dpsql`` and
``dpsql serve`` use it when no ``--engine`` is given (``--engine`` and ``--spark-master`` win);
``dpsql.connect()`` takes its engine from its first argument and does not read it.
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass

from dpsql.errors import PolicyError

__all__ = ["ENGINES", "EngineSetting", "parse_engine"]

#: The engines a policy (and ``--engine``) may name.
ENGINES = ("duckdb", "spark")


@dataclass(frozen=True)
class EngineSetting:
    """The policy's ``[engine]``: the engine's name and, for Spark, its master URL (None: the default)."""

    name: str = "duckdb"
    master: str | None = None


def parse_engine(spec: t.Any) -> EngineSetting:
    """``[engine]`` as written in a policy; one-line :class:`PolicyError` naming the key otherwise."""
    if not isinstance(spec, dict):
        raise PolicyError('engine must be a table of settings ([engine] name = "spark")')
    unknown = set(spec) - {"name", "master"}
    if unknown:
        raise PolicyError(f"engine: unknown key '{sorted(unknown)[0]}'")
    name = spec.get("name", "duckdb")
    if not isinstance(name, str) or name.lower() not in ENGINES:
        raise PolicyError(f"engine.name: unknown engine {name!r}; use " + " or ".join(map(repr, ENGINES)))
    name = name.lower()
    master = spec.get("master")
    if master is not None:
        if not isinstance(master, str) or not master.strip():
            raise PolicyError('engine.master must be a Spark master URL ("local[2]", "spark://host:7077", '
                              '"sc://host:15002")')
        if name != "spark":
            raise PolicyError(f'engine.master is for name = "spark" (this policy names {name})')
        master = master.strip()
    return EngineSetting(name=name, master=master)
