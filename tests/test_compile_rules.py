"""The compile rules' fixtures (sqlglot's tests/fixtures/optimizer/<rule>.sql are the model):
each rule of :mod:`dpsql._compile` has ``fixtures/compile/<rule>.sql``, blocks of

    # title: what the case shows
    <the rule applied to a piece of plan, a Python expression>
    <the SQL it must write>;

The expression is evaluated with the names of :data:`NAMESPACE`; it is printed in Spark's
dialect when it uses the Spark compiler (``spark``), else in DuckDB's.

Regenerate after an intended change with:  python tests/test_compile_rules.py  (then review the diff)
"""

from __future__ import annotations

import sys
import typing as t
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

from dpsql._compile.clip import clip, fixed_point
from dpsql._compile.compiler import Compiler
from dpsql._compile.domain import typed_keys, values
from dpsql._compile.histogram import counted, histogram
from dpsql._compile.inline import inlined
from dpsql._compile.keyjoin import key_join
from dpsql._compile.nodes import PRINTED, col, table
from dpsql._compile.operands import operands_once
from dpsql._compile.perunit import Aggregate
from dpsql._compile.plan import Clipped, Column, Fixed, PreAggregation, Relation, Source, Stat, Subquery, Truncation
from dpsql._compile.preaggregate import dropped, preaggregate, report
from dpsql._compile.reweight import reweight
from dpsql._compile.source import source
from dpsql._compile.spark import SparkCompiler
from dpsql._compile.target import DUCKDB, SPARK, SparkSQL
from dpsql._compile.truncate import truncate
from dpsql._sql.build import Values
from dpsql.mechanisms.fixed import FixedPoint

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "compile"
RULES = ["source", "operands", "clip", "truncate", "preaggregate", "reweight", "histogram", "keyjoin", "inline", "domain"]


class Domain(t.NamedTuple):
    types: tuple[str, ...]
    rows: tuple[tuple[t.Any, ...], ...]
    texts: tuple[tuple[str | None, ...], ...] = ()


def parse(sql: str) -> exp.Expression:
    return sqlglot.parse_one(sql, read="duckdb")


_PEOPLE = exp.Table(this=exp.to_identifier("people", quoted=True), db=exp.to_identifier("main", quoted=True),
                    catalog=exp.to_identifier("memory", quoted=True))
_JOIN = 'JOIN "memory"."main"."codes" AS __j1 ON TRY_CAST(__t."code" AS BIGINT) = __j1."code"'

NAMESPACE: dict[str, t.Any] = {
    "exp": exp, "parse": parse, "col": col, "table": table, "clip": clip, "fixed_point": fixed_point,
    "FixedPoint": FixedPoint, "truncate": truncate, "Truncation": Truncation, "source": source,
    "Source": Source, "Column": Column, "Clipped": Clipped, "Fixed": Fixed, "Relation": Relation, "histogram": histogram,
    "counted": counted, "Values": Values, "key_join": key_join, "Subquery": Subquery, "inlined": inlined,
    "Stat": Stat, "typed_keys": typed_keys, "values": values, "Domain": Domain,
    "preaggregate": preaggregate, "PreAggregation": PreAggregation, "Aggregate": Aggregate, "dropped": dropped,
    "report": report, "reweight": reweight, "operands_once": operands_once,
    "duck": Compiler(DUCKDB), "spark": SparkCompiler(SPARK),
    "relation": Relation(_PEOPLE, (), '"memory"."main"."people" AS __t'),
    "joined": Relation(_PEOPLE, tuple(parse("SELECT 1 FROM __t " + _JOIN).args["joins"]),
                       '"memory"."main"."people" AS __t ' + _JOIN),
}


def _rows() -> exp.Select:
    return t.cast(exp.Select, parse("SELECT __k0, __k1, __v0, __u, __h FROM __in"))


def written(code: str) -> str:
    """The SQL of one fixture's expression (a list: joined by commas; None: ``NONE``)."""
    out = eval(code, {**NAMESPACE, "rows": _rows()})  # noqa: S307 - the fixtures are ours
    dialect = SparkSQL if "spark" in code else PRINTED  # DuckDB's, printing a shared operand once
    if out is None:
        return "NONE"
    if isinstance(out, list):
        return ", ".join(e.sql(dialect=dialect) for e in out)
    return out.sql(dialect=dialect)


def load(rule: str) -> list[tuple[str, str, str]]:
    """(title, expression, SQL) of every block of the rule's fixture file."""
    out = []
    for block in (FIXTURES / f"{rule}.sql").read_text(encoding="utf-8").split("\n\n"):
        lines = [line for line in block.strip().splitlines() if line]
        if not lines:
            continue
        assert lines[0].startswith("# title:"), block
        out.append((lines[0].split(":", 1)[1].strip(), lines[1], "\n".join(lines[2:]).rstrip(";")))
    return out


CASES = [(rule, *case) for rule in RULES if (FIXTURES / f"{rule}.sql").exists() for case in load(rule)]


@pytest.mark.parametrize("rule,title,code,sql", CASES, ids=[f"{c[0]}: {c[1]}" for c in CASES])
def test_rule_writes_its_fixture(rule: str, title: str, code: str, sql: str) -> None:
    assert written(code) == sql


def test_every_rule_has_fixtures() -> None:
    assert all(any(c[0] == rule for c in CASES) for rule in RULES)


def regenerate(rule: str) -> None:
    """Write ``<rule>.sql`` from its blocks (or, the first time, from ``<rule>.in``: title and
    expression pairs)."""
    path = FIXTURES / f"{rule}.sql"
    if path.exists():
        pairs = [(title, code) for title, code, _ in load(rule)]
    else:
        lines = (FIXTURES / f"{rule}.in").read_text(encoding="utf-8").splitlines()
        pairs = [(lines[j].split(":", 1)[1].strip(), lines[j + 1]) for j in range(0, len(lines), 2)]
    path.write_text("\n\n".join(f"# title: {title}\n{code}\n{written(code)};" for title, code in pairs) + "\n",
                    encoding="utf-8")
    print(f"wrote {path}")


if __name__ == "__main__":
    for name in sys.argv[1:] or RULES:
        regenerate(name)
