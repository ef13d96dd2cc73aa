"""Privacy policies: which tables are private, their privacy unit, bounds, keys and the budget.

A policy is a TOML or YAML file (or a ``dict`` of the same shape)::

    neighbouring = "add_remove"          # or "replace"
    [budget]
    epsilon = 10.0
    delta = 1e-5
    ledger = "adult.ledger"              # optional; relative to the policy file
    [defaults]                           # optional: see dpsql._policy.defaults
    epsilon = 0.1                        # spent by a query without WITH (epsilon = ...)
    plain_aggregates = true              # COUNT/SUM/AVG/... become DP aggregates
    reuse_releases = "1h"                # an identical query reuses its release (default forever)
    [tables.adult]
    privacy_unit = "row"
    max_rows_per_unit = 1
    [tables.adult.columns]
    age = { lower = 0, upper = 100 }
    sex = { keys = ["Female", "Male"] }
    [tables.visits]
    privacy_unit = "patient_id"          # an id column: all rows of one patient are one unit
    max_rows_per_unit = 5                # k: at most 5 rows per patient (enforced in SQL)
    max_groups_per_unit = 3              # g (optional): in a GROUP BY, at most 3 groups per patient
    max_rows_per_group_per_unit = 2      # r (optional, needs g; default k): at most 2 rows in each
    [tables.notes]
    link = { visit_id = "visits.visit_id" }  # each note is a visit's, and so its patient's
    max_rows_per_unit = 20               # notes per patient (dpsql._policy.links)
    [tables."sales.orders"]               # a table of schema sales
    privacy_unit = "customer_id"
    max_rows_per_unit = 10
    [tables.wards]
    public = true                        # source: files dpsql opens as this table (relative path)
    source = "wards/*.parquet"
    [engine]                             # optional: where dpsql / dpsql serve run (engine_setting)
    name = "spark"
    [attach]
    hospital = "hospital.duckdb"         # attached read-only as catalog hospital
    [tables."hospital.main.admissions"]  # catalog.schema.table: a table of an attached database
    privacy_unit = "row"

A table's name has one to three parts, ``[[catalog.]schema.]table``, as in DuckDB: a bare name
is a table of schema ``main`` of the connection's database, ``schema.table`` one of another
schema there, and ``catalog.schema.table`` one of an attached database (or of the connection's
database named in full). A query names a table the same ways (see :meth:`Policy.resolve`).
A table with a ``source`` (a file, a glob or a list of them: Parquet, CSV, TSV or JSON) is a
view dpsql creates over those files when the connection opens, before it is locked down.

The three bounds of an id unit are enforced in the rewritten SQL of every query (see
:mod:`dpsql._policy.units`); a query may override them for itself with options of the same
names. A row unit takes only ``max_rows_per_unit`` (protect m rows together).

SmartNoise SQL metadata YAML (``Collection: Schema: Table: {column: {type, lower, upper}}``)
is imported (dpsql._policy.smartnoise): ``row_privacy: True`` gives a row unit, a
``private_id`` column an id unit, ``max_ids`` the row bound; each table keeps its schema
(``PUMS.PUMS``, or the bare name when unique); the budget defaults to ε = 1, δ = 0 in memory.

Tables not named in the policy are not readable at all: dpsql denies by default.
"""

from __future__ import annotations

import datetime
import math
import os
import re
import tomllib
import typing as t
from dataclasses import dataclass, field, replace
from pathlib import Path

from dpsql._accounting.budget import Budget, Cost
from dpsql._policy.datebounds import date_bounds
from dpsql._policy.defaults import Defaults, parse_defaults
from dpsql._policy.engine_setting import EngineSetting, parse_engine
from dpsql._policy.links import Link, renamed_links, resolve_links, table_link
from dpsql._policy.smartnoise import from_smartnoise, looks_like_smartnoise
from dpsql._privacy.joins import Truncation, parse_truncation
from dpsql.errors import Error, PolicyError

NEIGHBOURING = ("add_remove", "replace")

#: The per-unit contribution bounds a table policy (and a query's options) may give.
UNIT_BOUNDS = ("max_rows_per_unit", "max_groups_per_unit", "max_rows_per_group_per_unit")


@dataclass(frozen=True)
class ColumnPolicy:
    """Public facts about one column: clipping bounds and a public key domain."""

    lower: float | None = None
    upper: float | None = None
    keys: tuple[t.Any, ...] | None = None
    #: a date column's first and last day (``bounds = ["1992-01-01", "1998-12-31"]``)
    dates: tuple[datetime.date, datetime.date] | None = None

    @property
    def bounds(self) -> tuple[float, float] | None:
        if self.lower is None or self.upper is None:
            return None
        return (self.lower, self.upper)


@dataclass(frozen=True)
class TablePolicy:
    """How one table is protected."""

    name: str
    public: bool = False
    privacy_unit: str = "row"
    max_rows_per_unit: int = 1
    #: id units, GROUP BY: the most groups one unit may contribute to (None: not bounded)
    max_groups_per_unit: int | None = None
    #: id units, GROUP BY with ``max_groups_per_unit``: the most rows per (unit, group)
    #: (None: ``max_rows_per_unit``)
    max_rows_per_group_per_unit: int | None = None
    columns: dict[str, ColumnPolicy] = field(default_factory=dict)
    #: id units: the name of the individuals the unit column identifies; tables with the same
    #: ``unit_name`` identify the same individuals (and may be joined on their unit columns)
    unit_name: str | None = None
    #: id units: how a unit's contribution is bounded, "truncate" or "clip" (None: the query's
    #: option, else the one with less noise; dpsql._compile.perunit)
    contribution: str | None = None
    #: private joins: the truncation strategy of this table's side (a query option overrides it)
    join_truncation: Truncation | None = None
    #: data files (paths or globs, absolute) dpsql opens as this table; empty: a table of the database
    source: tuple[str, ...] = ()
    #: the row of another table each row belongs to (dpsql._policy.links); ``privacy_unit`` is
    #: then the unit column of ``unit_root``, the unit table the links reach
    link: Link | None = None
    unit_root: str | None = None

    def column(self, name: str) -> ColumnPolicy:
        return self.columns.get(name.lower(), ColumnPolicy())

    @property
    def catalog(self) -> str | None:
        """The DuckDB catalog (attached database) of a ``catalog.schema.table`` name; ``None``
        for a table of the connection's own database."""
        parts = self.name.split(".")
        return parts[0] if len(parts) == 3 else None

    @property
    def schema(self) -> str:
        """The database schema the table lives in: ``main`` unless the name says ``schema.table``."""
        parts = self.name.split(".")
        return parts[-2] if len(parts) > 1 else "main"

    @property
    def table_name(self) -> str:
        """The table's name within its schema."""
        return self.name.rsplit(".", 1)[-1]


@dataclass(frozen=True)
class Policy:
    """A whole policy. Table and column names are stored lower-case (DuckDB is case-insensitive)."""

    tables: dict[str, TablePolicy]
    budget: Budget
    neighbouring: str = "add_remove"
    ledger: str | None = None
    #: protect groups of this many privacy units (Hamming distance k); sensitivities scale by k
    group_size: int = 1
    source: str | None = None
    #: catalog name -> database file attached read-only when the connection opens
    attach: dict[str, str] = field(default_factory=dict)
    #: the connection's own database (its DuckDB catalog name), once known: ``db.schema.table``
    #: names then mean ``schema.table`` (see :meth:`in_database`)
    database: str | None = None
    #: the ``[server]`` section, read by ``dpsql serve`` (users, passwords, budget shares)
    server: dict[str, t.Any] = field(default_factory=dict)
    #: the ``[defaults]`` section (default budget, plain aggregates, reuse of releases)
    defaults: Defaults = field(default_factory=Defaults)
    #: the ``[engine]`` section, read by ``dpsql`` and ``dpsql serve`` (not by ``dpsql.connect``)
    engine: EngineSetting = field(default_factory=EngineSetting)

    def table(self, name: str) -> TablePolicy | None:
        """The table declared under ``name`` (``table`` in schema main, ``schema.table``, or
        ``catalog.schema.table``)."""
        parts = name.lower().split(".")
        return self.tables.get(self.key(*reversed(parts))) if len(parts) <= 3 else None

    def key(self, name: str, schema: str | None = None, catalog: str | None = None) -> str:
        """The policy's key of table ``[[catalog.]schema.]name``: the shortest name that says
        where it is (``t`` for ``<this database>.main.t``, ``s.t``, ``c.s.t``)."""
        name, schema = name.lower(), (schema or "main").lower()
        catalog = catalog.lower() if catalog else None
        if catalog is None or catalog == self.database:
            return name if schema == "main" else f"{schema}.{name}"
        return f"{catalog}.{schema}.{name}"

    def resolve(self, name: str, schema: str | None = None, catalog: str | None = None,
                exists: t.Callable[[str], object] | None = None) -> list[str]:
        """The keys of the tables a reference ``[[catalog.]schema.]name`` can mean, resolved as
        DuckDB resolves it; more than one means the reference is ambiguous, none that no such
        table exists. A table counts if the policy declares it or ``exists(key)`` is true
        (the catalog: a table the policy does not declare is found, to be refused by name).

        * ``catalog.schema.name``: that table.
        * ``schema.name``: schema ``schema`` of the connection's database, or schema ``main``
          of the attached database ``schema``; if both hold a table ``name``, it is ambiguous
          (DuckDB refuses it too).
        * ``name``: schema ``main`` of the connection's database; if that holds no such table,
          the one declared table of that name in any schema or catalog (SmartNoise's queries
          say ``FROM PUMS`` for ``PUMS.PUMS``); several are ambiguous.
        """
        name = name.lower()
        if catalog:
            keys = [self.key(name, schema, catalog)]
        elif schema:
            keys = list(dict.fromkeys([self.key(name, schema), self.key(name, "main", schema)]))
        else:
            keys = [name]
        found = [k for k in keys if k in self.tables or (exists is not None and exists(k))]
        if found or schema or catalog:
            return found
        return sorted(k for k, tp in self.tables.items() if tp.table_name == name)

    def in_database(self, database: str) -> "Policy":
        """This policy on a connection whose own database is ``database``: tables named
        ``database.schema.table`` become ``schema.table`` (PolicyError if that names a table twice)."""
        database = database.lower()
        tables: dict[str, TablePolicy] = {}
        moved = replace(self, database=database, tables=tables)
        was: dict[str, str] = {}
        for key, tp in sorted(self.tables.items(), key=lambda kv: kv[0].count(".")):
            new = moved.key(tp.table_name, tp.schema, tp.catalog)
            if new in tables:
                raise PolicyError(f"tables.{key}: names the same table as tables.{was[new]} "
                                  f"(database {database} is the connection's own)")
            tables[new], was[new] = (tp if new == key else replace(tp, name=new)), key
        tables.update(renamed_links(tables, {old: new for new, old in was.items()}))
        return moved

    @property
    def sources(self) -> list[TablePolicy]:
        """The tables that are views over data files."""
        return [tp for _, tp in sorted(self.tables.items()) if tp.source]

    @property
    def private_tables(self) -> list[str]:
        return sorted(n for n, tp in self.tables.items() if not tp.public)


def _num(where: str, value: t.Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PolicyError(f"{where} must be a number, got {value!r}")
    value = float(value)
    if math.isnan(value) or math.isinf(value):
        raise PolicyError(f"{where} must be finite, got {value}")
    return value


def _column(table: str, name: str, spec: t.Any) -> ColumnPolicy:
    where = f"tables.{table}.columns.{name}"
    if not isinstance(spec, dict):
        raise PolicyError(f"{where} must be a table of lower/upper/keys")
    unknown = set(spec) - {"lower", "upper", "keys", "type", "nullable", "private_id", "cardinality", "bounds"}
    if unknown:
        raise PolicyError(f"{where}: unknown key '{sorted(unknown)[0]}'")
    lower = _num(f"{where}.lower", spec["lower"]) if "lower" in spec else None
    upper = _num(f"{where}.upper", spec["upper"]) if "upper" in spec else None
    if (lower is None) != (upper is None):
        raise PolicyError(f"{where}: give both lower and upper")
    if lower is not None and upper is not None and not lower < upper:
        raise PolicyError(f"{where}: lower ({lower:g}) must be below upper ({upper:g})")
    keys = spec.get("keys")
    if keys is not None:
        if not isinstance(keys, list) or not keys:
            raise PolicyError(f"{where}.keys must be a non-empty list")
        if len(set(map(repr, keys))) != len(keys):
            raise PolicyError(f"{where}.keys lists a key twice")
        keys = tuple(keys)
    return ColumnPolicy(lower=lower, upper=upper, keys=keys, dates=date_bounds(where, spec.get("bounds")))


def _source(where: str, value: t.Any, base: Path | None) -> tuple[str, ...]:
    """A table's ``source``: a path or glob, or a list of them, made absolute (relative to
    the policy file's folder, or the working directory for a policy given as a dict)."""
    if value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(v, str) and v.strip() for v in items):
        raise PolicyError(f"{where}.source must be a file path or glob, or a list of them")
    out = []
    for item in items:
        if "://" in item or item.startswith(("s3:", "gs:", "gcs:", "az:", "hf:")):
            raise PolicyError(f"{where}.source: {item} is not a local file; dpsql reads local files only")
        path = Path(os.path.expanduser(item))
        out.append(str(path if path.is_absolute() or base is None else base / path))
    return tuple(out)


def _table(name: str, spec: t.Any, base: Path | None = None) -> TablePolicy:
    where = f"tables.{name}"
    if not isinstance(spec, dict):
        raise PolicyError(f"{where} must be a table")
    unknown = set(spec) - {"public", "privacy_unit", *UNIT_BOUNDS, "columns", "source", "unit_name",
                           "join_truncation", "contribution", "link"}
    if unknown:
        raise PolicyError(f"{where}: unknown key '{sorted(unknown)[0]}'")
    parts = name.split(".")
    if len(parts) > 3 or not all(parts):
        raise PolicyError(f"{where}: a table's name is table, schema.table or catalog.schema.table")
    public = spec.get("public", False)
    if not isinstance(public, bool):
        raise PolicyError(f"{where}.public must be true or false")
    unit = spec.get("privacy_unit", "row")
    if not isinstance(unit, str) or not unit:
        raise PolicyError(f"{where}.privacy_unit must be 'row' or a column name")
    link = table_link(where, spec)
    if link is not None:
        unit = link.column  # an id unit (found through the link: dpsql._policy.links)
    for bound in UNIT_BOUNDS:
        value = spec.get(bound, 1)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise PolicyError(f"{where}.{bound} must be an integer >= 1")
    m = spec.get("max_rows_per_unit", 1)
    if unit.lower() != "row" and "max_rows_per_unit" not in spec and not public:
        raise PolicyError(f"{where}: an id privacy unit needs max_rows_per_unit")
    groups, per_group = spec.get("max_groups_per_unit"), spec.get("max_rows_per_group_per_unit")
    for bound in ("max_groups_per_unit", "max_rows_per_group_per_unit"):
        if bound in spec and unit.lower() == "row":
            raise PolicyError(f"{where}.{bound}: table {name}'s privacy unit is a row; "
                              "this bound needs an id privacy unit")
    if per_group is not None and groups is None:
        raise PolicyError(f"{where}.max_rows_per_group_per_unit needs max_groups_per_unit")
    cols = spec.get("columns", {})
    if not isinstance(cols, dict):
        raise PolicyError(f"{where}.columns must be a table")
    columns = {c.lower(): _column(name, c, s) for c, s in cols.items()}
    unit_name = spec.get("unit_name")
    if unit_name is not None and (not isinstance(unit_name, str) or not unit_name.strip()):
        raise PolicyError(f"{where}.unit_name must be a name, such as 'patient'")
    if unit_name is not None and unit.lower() == "row":
        raise PolicyError(f"{where}.unit_name: table {name}'s privacy unit is a row; unit_name names "
                          "the individuals of an id privacy unit")
    truncation, contribution = _bounding(where, spec)
    lowered = name.lower()
    if len(parts) == 2 and parts[0].lower() == "main":
        lowered = parts[1].lower()  # main.t is t
    return TablePolicy(
        name=lowered,
        source=_source(where, spec.get("source"), base),
        public=public,
        privacy_unit=unit.lower(),
        max_rows_per_unit=m,
        max_groups_per_unit=groups,
        max_rows_per_group_per_unit=per_group,
        columns=columns,
        unit_name=unit_name.strip().lower() if unit_name else None,
        join_truncation=truncation,
        contribution=contribution,
        link=link,
    )


def _bounding(where: str, spec: dict) -> tuple[t.Any, str | None]:
    """A table's ``join_truncation`` (parsed) and ``contribution`` (the unit bounding mode)."""
    truncation = spec.get("join_truncation")
    if truncation is not None:
        if not isinstance(truncation, str):
            raise PolicyError(f"{where}.join_truncation must be 'drop_excess(k)' or 'drop_non_unique'")
        try:
            truncation = parse_truncation(truncation, f"{where}.join_truncation")
        except Error as err:
            raise PolicyError(str(err)) from None
    contribution = spec.get("contribution")
    if contribution is not None and contribution not in ("truncate", "clip", "reweight", "auto"):
        raise PolicyError(f"{where}.contribution must be 'truncate', 'clip', 'reweight' or 'auto'")
    return truncation, contribution


def _budget(spec: t.Any) -> tuple[Budget, str | None]:
    if not isinstance(spec, dict):
        raise PolicyError("budget must be a table with epsilon (and delta) or rho")
    unknown = set(spec) - {"epsilon", "delta", "rho", "ledger"}
    if unknown:
        raise PolicyError(f"budget: unknown key '{sorted(unknown)[0]}'")
    eps = _num("budget.epsilon", spec["epsilon"]) if "epsilon" in spec else 0.0
    delta = _num("budget.delta", spec["delta"]) if "delta" in spec else 0.0
    rho = _num("budget.rho", spec["rho"]) if "rho" in spec else 0.0
    if rho and eps:
        raise PolicyError("budget: give epsilon (and delta) or rho, not both")
    if not rho and eps <= 0:
        raise PolicyError("budget.epsilon must be > 0")
    if not 0 <= delta < 1:
        raise PolicyError(f"budget.delta must be in [0, 1), got {delta:g}")
    if rho < 0:
        raise PolicyError("budget.rho must be > 0")
    ledger = spec.get("ledger")
    if ledger is not None and not isinstance(ledger, str):
        raise PolicyError("budget.ledger must be a file path")
    return Budget(total=Cost(epsilon=eps, delta=delta, rho=rho)), ledger


def policy_from_dict(data: dict[str, t.Any], source: str | None = None) -> Policy:
    """Build a :class:`Policy` from the dict shape documented in the module docstring."""
    if not isinstance(data, dict):
        raise PolicyError("a policy must be a table of settings")
    if looks_like_smartnoise(data):
        data = from_smartnoise(data)
    unknown = set(data) - {"neighbouring", "neighboring", "budget", "tables", "group_size", "attach", "server",
                           "defaults", "engine"}
    if unknown:
        raise PolicyError(f"policy: unknown key '{sorted(unknown)[0]}'")
    neighbouring = data.get("neighbouring", data.get("neighboring", "add_remove"))
    if neighbouring not in NEIGHBOURING:
        raise PolicyError(f"neighbouring must be 'add_remove' or 'replace', got {neighbouring!r}")
    if "budget" not in data:
        raise PolicyError("policy has no [budget] section")
    budget, ledger = _budget(data["budget"])
    if ledger and source and not os.path.isabs(ledger):
        ledger = str(Path(source).parent / ledger)
    tables_spec = data.get("tables", {})
    if not isinstance(tables_spec, dict):
        raise PolicyError("tables must be a table of table policies")
    base = Path(os.path.abspath(source)).parent if source else None
    tables: dict[str, TablePolicy] = {}
    for n, s in tables_spec.items():
        tp = _table(n, s, base)
        if tp.name in tables:
            raise PolicyError(f"tables.{n}: names the same table as another entry ({tp.name})")
        if tp.source and tp.catalog:
            raise PolicyError(f"tables.{n}: a table with a source is opened in the connection's own "
                              "database; name it table or schema.table")
        tables[tp.name] = tp
    tables = resolve_links(tables)
    attach = _attach(data.get("attach", {}), base)
    group_size = data.get("group_size", 1)
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise PolicyError("group_size must be an integer >= 1")
    server = data.get("server", {})
    if not isinstance(server, dict):
        raise PolicyError("server must be a table of settings ([server])")
    defaults = parse_defaults(data["defaults"]) if "defaults" in data else Defaults()
    return Policy(tables=tables, budget=budget, neighbouring=neighbouring, ledger=ledger,
                  group_size=group_size, source=source, attach=attach,
                  server=server, defaults=defaults, engine=parse_engine(data.get("engine", {})))


_CATALOG_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: catalog names DuckDB keeps for itself
RESERVED_CATALOGS = ("main", "temp", "system", "memory")


def _attach(spec: t.Any, base: Path | None) -> dict[str, str]:
    """``[attach] name = "file.duckdb"``: databases to attach read-only, by catalog name."""
    if not isinstance(spec, dict):
        raise PolicyError('attach must be a table of name = "database file"')
    out = {}
    for name, path in spec.items():
        if not _CATALOG_NAME.match(name) or name.lower() in RESERVED_CATALOGS:
            raise PolicyError(f"attach.{name}: a catalog name is a plain identifier other than "
                              + ", ".join(RESERVED_CATALOGS))
        if not isinstance(path, str) or not path.strip():
            raise PolicyError(f"attach.{name} must be the path of a DuckDB database file")
        if "://" in path or path.startswith(":"):
            raise PolicyError(f"attach.{name}: {path} is not a local database file")
        p = Path(os.path.expanduser(path))
        out[name.lower()] = str(p if p.is_absolute() or base is None else base / p)
    return out


def load_policy(path: str | os.PathLike[str] | dict[str, t.Any] | Policy) -> Policy:
    """Load a policy from a TOML/YAML file path, TOML text (a string of several lines), a dict, or
    return a :class:`Policy` as is."""
    if isinstance(path, Policy):
        return path
    if isinstance(path, dict):
        return policy_from_dict(path)
    if isinstance(path, str) and "\n" in path:  # no file name holds a newline: the policy's text
        return policy_from_dict(_parsed(path, ".toml", "the policy text"))
    p = Path(path)
    try:
        found = p.is_file()
    except OSError:  # a name too long for the file system
        found = False
    if not found:
        raise PolicyError(f"policy file {str(p)[:200]} does not exist")
    suffix = p.suffix.lower()
    if suffix not in (".toml", ".yaml", ".yml"):
        raise PolicyError(f"policy file {p} must end in .toml, .yaml or .yml")
    return policy_from_dict(_parsed(p.read_text(encoding="utf-8"), suffix, f"policy file {p}") or {}, source=str(p))


def _parsed(text: str, suffix: str, where: str) -> t.Any:
    """The data of a policy's text, TOML or (``suffix`` .yaml/.yml) YAML; one-line errors."""
    if suffix == ".toml":
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            raise PolicyError(f"{where} is not valid TOML: {err}") from None
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise PolicyError(f"{where} is not valid YAML: {' '.join(str(err).split())}") from None
