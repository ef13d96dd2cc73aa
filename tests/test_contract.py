"""The mechanism contract: what a mechanism declares, what the planner does with it, and that a
new mechanism fits in one file.

A mechanism declares its name, statistics, options, use of δ and support of ρ
(:mod:`dpsql.mechanisms.base`); the planner checks each aggregate once, refuses options no
chosen mechanism uses, and checks that the budget split adds up before anything runs; the
engine releases through ``Prepared.release_many`` only; the registry is the one list of names.
"""

from __future__ import annotations

import dataclasses
import math
import re
import subprocess
import sys
import typing as t
from pathlib import Path

import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from pygments.token import Name
from sqlglot import exp

import dpsql
from dpsql._accounting.budget import Cost
from dpsql._plan import plan as plan_module
from dpsql._privacy import noise as noise_module
from dpsql._privacy.noise import SeededNoise
from dpsql._release.release import release
from dpsql._sql.dialect import DP_FUNCTIONS
from dpsql._sql.keywords import OPTION_KEYS
from dpsql._sql.statistics import Statistic
from dpsql.errors import InternalError, OptionError, PrivacyError
from dpsql.interfaces.demo import load_adult
from dpsql.interfaces.repl.completer import DPSQLCompleter
from dpsql.interfaces.repl.lexer import DPSQLLexer
from dpsql.mechanisms import (
    AUTO,
    COMMON_OPTIONS,
    REGISTRY,
    Context,
    Mechanism,
    Prepared,
    ReportEntry,
    choices,
    register,
    unregister,
)
from tests.audit.cases import policy, rows
from tests.audit.harness import audit, query_pair
from tests.conftest import demo_policy

ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------------------------------------
# a toy mechanism, defined here and nowhere else


class _ToyPrepared(Prepared):
    """DP_COUNT + Laplace noise of scale ``factor``·Δ/ε on the integers, Δ = m (add_remove)."""

    clips = False

    def __init__(self, agg: t.Any, ctx: Context, cost: Cost, name: str, factor: float) -> None:
        super().__init__(agg, ctx, cost)
        self.mechanism = name
        self.sensitivity = float(ctx.max_rows)
        self.scale = factor * noise_module.laplace_scale(self.sensitivity, cost.epsilon, integer=True)

    def stats(self, v: exp.Expression | None) -> dict[str, exp.Expression]:
        return {"n": exp.Count(this=exp.Star() if v is None else v.copy())}

    def release(self, stats: t.Mapping[str, t.Any], noise: t.Any) -> tuple[t.Any, ReportEntry]:
        n = int(stats.get("n") or 0)
        value = noise.laplace_int(n, self.scale)
        return value, ReportEntry(column=self.label, mechanism=self.mechanism, epsilon=self.cost.epsilon,
                                  sensitivity=self.sensitivity, scale=self.scale, distribution="discrete Laplace")

    def explain(self) -> dict[str, str]:
        return {"noise": f"discrete Laplace(b={self.scale:g})"}


class ToyLaplace(Mechanism):
    """A correct toy: counts under add_remove, Laplace noise calibrated to Δ/ε."""

    name = "toy_laplace"
    statistics = frozenset({Statistic.COUNT})
    factor = 1.0

    def check(self, agg: t.Any, ctx: Context) -> None:
        super().check(agg, ctx)
        if ctx.neighbouring != "add_remove":
            raise PrivacyError(f"mechanism '{self.name}' supports add_remove only")

    def prepare(self, agg: t.Any, ctx: Context, cost: Cost) -> Prepared:
        return _ToyPrepared(agg, ctx, cost, self.name, self.factor)


class ToyLaplaceThird(ToyLaplace):
    """A broken toy: a third of the noise it needs (true ε is three times the claim)."""

    name = "toy_laplace_third"
    factor = 1.0 / 3.0


@pytest.fixture
def registered() -> t.Iterator[t.Callable[[type[Mechanism]], type[Mechanism]]]:
    """``registered(cls)`` registers ``cls`` for the test only."""
    names: list[str] = []

    def add(cls: type[Mechanism]) -> type[Mechanism]:
        register(cls)
        names.append(cls.name)
        return cls

    yield add
    for name in names:
        if name in REGISTRY:
            unregister(name)


@pytest.fixture
def con() -> t.Iterator[dpsql.Connection]:
    c = dpsql.connect(":memory:", demo_policy(epsilon=1e9, delta=0.5), setup=load_adult, noise=SeededNoise(3))
    yield c
    c.close()


def _refused(con: dpsql.Connection, sql: str, error: type[Exception], message: str) -> str:
    """The query is refused with ``error`` whose message contains ``message``, charging nothing."""
    before = con.budget.spent
    with pytest.raises(error) as info:
        con.sql(sql)
    text = str(info.value)
    assert message in text and "\n" not in text, text
    assert con.budget.spent == before
    return text


# ---------------------------------------------------------------------------------------------
# a new mechanism in one file


def test_a_new_mechanism_is_added_in_one_file(con: dpsql.Connection, registered: t.Any) -> None:
    registered(ToyLaplace)
    query = "SELECT DP_COUNT(*) FROM adult WITH (mechanism = 'toy_laplace', epsilon = 1)"
    res = con.sql(query)
    (value,), = res.fetchall()
    assert abs(value - 32561) < 40  # Laplace(1): within 40 with overwhelming probability
    assert res.report[0].mechanism == "toy_laplace" and res.report[0].scale == pytest.approx(1.0)
    assert con.budget.spent.epsilon == pytest.approx(1.0)
    assert "DP_COUNT(*): mechanism toy_laplace, spends" in con.explain(query)
    # grouped: one release per public key, through release_many's default
    grouped = con.sql("SELECT sex, DP_COUNT(*) FROM adult GROUP BY sex "
                      "WITH (mechanism = 'toy_laplace', epsilon = 1)").fetchall()
    assert sorted(k for k, _ in grouped) == ["Female", "Male"]
    # its own query-only refusal runs, and so does the default statistic check
    _refused(con, "SELECT DP_SUM(age) FROM adult WITH (mechanism = 'toy_laplace', epsilon = 1)",
             PrivacyError, "mechanism 'toy_laplace' cannot answer DP_SUM(age) (it supports count)")
    # the shell offers it
    completer = DPSQLCompleter(con)
    text = "SELECT DP_COUNT(*) FROM adult WITH (mechanism = toy"
    offered = [c.text for c in completer.get_completions(Document(text), CompleteEvent(completion_requested=True))]
    assert offered == ["'toy_laplace'"]


def test_a_removed_mechanism_is_gone(con: dpsql.Connection, registered: t.Any) -> None:
    registered(ToyLaplace)
    unregister("toy_laplace")
    _refused(con, "SELECT DP_COUNT(*) FROM adult WITH (mechanism = 'toy_laplace', epsilon = 1)",
             OptionError, "option 'mechanism' must be one of")


AUDIT = {"trials": 3_000, "pilot": 1_000, "events": 6}


def _toy_pair(name: str) -> t.Any:
    sql = f"SELECT DP_COUNT(*) FROM t WITH (mechanism = '{name}', epsilon = 1)"
    return query_pair(sql, rows(1, 2, 3, 4, 5), rows(1, 2, 3, 4, 5, 6), policy())


def test_the_toy_mechanism_passes_the_audit(registered: t.Any) -> None:
    registered(ToyLaplace)
    result = audit(_toy_pair("toy_laplace"), seed=5, **AUDIT)
    assert result.tests and not result.violated, str(result)
    assert result.epsilon == pytest.approx(1.0)


def test_an_under_noised_toy_is_caught_by_the_audit(registered: t.Any) -> None:
    registered(ToyLaplaceThird)
    result = audit(_toy_pair("toy_laplace_third"), seed=5, **AUDIT)
    assert result.violated, str(result)


def test_register_refuses_a_malformed_or_duplicate_mechanism(registered: t.Any) -> None:
    bad: list[dict[str, t.Any]] = [
        {"name": "laplace"},  # taken
        {"name": AUTO},
        {"name": "Toy Laplace"},
        {"name": "toy_empty", "statistics": frozenset()},
        {"name": "toy_strings", "statistics": frozenset({"count"})},
        {"name": "toy_epsilon", "options": frozenset({"epsilon"})},  # common to every query
        {"name": "toy_unknown", "options": frozenset({"chunk"})},
    ]
    for attrs in bad:
        cls = type("Bad", (ToyLaplace,), attrs)
        with pytest.raises(ValueError):
            register(cls)
        assert REGISTRY.get(attrs["name"]) is None or attrs["name"] == "laplace"
    assert type(REGISTRY["laplace"]).__name__ == "Laplace"


# ---------------------------------------------------------------------------------------------
# statistics


def test_every_dp_aggregate_names_a_statistic_with_a_default_mechanism() -> None:
    assert Statistic.MEDIAN.default_mechanism == "exponential"
    assert Statistic.COUNT.default_mechanism == "laplace" and Statistic.AGG.default_mechanism == "saa"
    assert {cls.statistic for cls in DP_FUNCTIONS.values()} == set(Statistic)
    for stat in Statistic:
        assert isinstance(stat, str) and stat == stat.value
        default = REGISTRY[stat.default_mechanism]
        assert stat in default.statistics, stat
        if stat.zcdp_mechanism is not None:
            zcdp = REGISTRY[stat.zcdp_mechanism]
            assert stat in zcdp.statistics and zcdp.supports_rho, stat
    assert not hasattr(plan_module, "DEFAULT_MECHANISM")


@pytest.mark.parametrize(("sql", "mechanisms"), [
    ("SELECT DP_COUNT(*), DP_MEAN(age), DP_MEDIAN(age), DP_MIN(age) FROM adult WITH (epsilon = 1)",
     ["laplace", "laplace", "exponential", "exponential"]),
    ("SELECT DP_AGG(avg(age), 0, 100) FROM adult WITH (epsilon = 1)", ["saa"]),
    ("SELECT DP_SUM(age), DP_VAR(age) FROM adult WITH (rho = 0.5, delta = 1e-6)", ["gaussian", "gaussian"]),
    ("SELECT DP_COUNT(*) FROM adult WITH (mechanism = 'auto', epsilon = 1)", ["laplace"]),
])
def test_defaults_come_from_the_statistic(con: dpsql.Connection, sql: str, mechanisms: list[str]) -> None:
    p = con.prepare(sql).plan
    assert p is not None and p.mechanisms == mechanisms


# ---------------------------------------------------------------------------------------------
# declarations and the registry


def test_every_mechanism_declares_the_contract() -> None:
    mechanism_options = set(OPTION_KEYS) - COMMON_OPTIONS
    for name, mech in REGISTRY.items():
        assert mech.name == name
        assert mech.statistics and all(isinstance(s, Statistic) for s in mech.statistics)
        assert set(mech.options) <= mechanism_options, name
        assert isinstance(mech.uses_delta, bool) and isinstance(mech.supports_rho, bool)
    # every option is common or read by some mechanism: none is accepted and then ignored by all
    used = {key for mech in REGISTRY.values() for key in mech.options}
    assert used == mechanism_options
    assert COMMON_OPTIONS <= set(OPTION_KEYS)


def _table_names(text: str, header: str) -> list[str]:
    section = text.split(header, 1)[1].split("\n\n", 1)[0]
    return [re.match(r"\| `([a-z_]+)`", line).group(1)  # type: ignore[union-attr]
            for line in section.splitlines()[2:] if line.startswith("| `")]


def test_readme_mechanism_table_is_the_registry() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert sorted(_table_names(readme, "| mechanism | for | guarantee | notes |")) == sorted(REGISTRY)
    # the options table and the grammar list the values of `mechanism`: the registry and 'auto'
    row = re.search(r"^\| `mechanism` \| (.*) \|$", readme, re.MULTILINE)
    assert row and sorted(re.findall(r"`([a-z_]+)`", row.group(1))) == sorted(choices())
    grammar = (ROOT / "grammar" / "dpsql.ebnf").read_text(encoding="utf-8")
    listed = re.search(r"mechanism is one of ([a-z_, ]+);", grammar)
    assert listed and sorted(w.strip() for w in listed.group(1).split(",")) == sorted(choices())


def test_the_shell_reads_mechanism_names_from_the_registry_when_needed(con: dpsql.Connection) -> None:
    completer = DPSQLCompleter(con)
    text = "SELECT DP_MEAN(age) FROM adult WITH (mechanism = "
    offered = [c.text for c in completer.get_completions(Document(text), CompleteEvent(completion_requested=True))]
    assert offered == [f"'{name}'" for name in choices()]
    tokens = list(DPSQLLexer().get_tokens("SELECT DP_COUNT(*) FROM t WITH (mechanism = smooth, noise = cauchy)"))
    kinds = {text: tok for tok, text in tokens}
    assert kinds["smooth"] is Name.Constant and kinds["cauchy"] is Name.Constant
    assert kinds["mechanism"] is Name.Attribute and kinds["noise"] is Name.Attribute
    # the shell starts without importing the mechanisms (nor sqlglot)
    code = ("import sys, dpsql.interfaces.repl.shell, dpsql.interfaces.cli; "
            "print(sorted(m for m in sys.modules if m.startswith(('dpsql.mechanisms', 'sqlglot'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_mechanism_names_are_checked_against_the_registry(con: dpsql.Connection) -> None:
    text = _refused(con, "SELECT DP_COUNT(*) FROM adult WITH (mechanism = 'lapalce', epsilon = 1)",
                    OptionError, "option 'mechanism' must be one of")
    assert text == f"option 'mechanism' must be one of {', '.join(choices())}; got 'lapalce'; did you mean laplace?"
    assert choices()[-1] == "auto" and set(choices()[:-1]) == set(REGISTRY)
    _refused(con, "SELECT DP_COUNT(*) FROM adult WITH (mechanism = 'two words', epsilon = 1)",
             OptionError, "option 'mechanism' must be a name")
    assert con.sql("SELECT DP_COUNT(*) FROM adult WITH (mechanism = auto, epsilon = 1)").fetchall()


def test_rho_needs_a_mechanism_that_spends_it(con: dpsql.Connection) -> None:
    for name in ("laplace", "auto", "ptr"):
        _refused(con, f"SELECT DP_COUNT(*) FROM adult WITH (mechanism = '{name}', rho = 0.1, delta = 1e-6)",
                 OptionError, "option 'rho' (zCDP) needs mechanism='gaussian'")
    _refused(con, "SELECT DP_MEDIAN(age) FROM adult WITH (rho = 0.1, delta = 1e-6)",
             OptionError, "option 'rho' (zCDP) is not supported by mechanism 'exponential'")


# ---------------------------------------------------------------------------------------------
# options a mechanism does not use


@pytest.mark.parametrize(("sql", "message"), [
    ("SELECT DP_COUNT(*) FROM adult WITH (epsilon = 1, chunks = 10)",
     "option 'chunks' is not used by mechanism 'laplace' (it is used by: saa)"),
    ("SELECT DP_MEAN(age) FROM adult WITH (epsilon = 1, bound = 1)",
     "option 'bound' is not used by mechanism 'laplace' (it is used by: ptr)"),
    ("SELECT DP_MEDIAN(age) FROM adult WITH (epsilon = 1, aggregator = 'winsorized')",
     "option 'aggregator' is not used by mechanism 'exponential' (it is used by: saa)"),
    ("SELECT DP_MEDIAN(age) FROM adult WITH (mechanism = 'ptr', bound = 1, epsilon = 1, delta = 1e-6, "
     "noise = 'cauchy')", "option 'noise' is not used by mechanism 'ptr' (it is used by: smooth)"),
    ("SELECT DP_MEDIAN(age) FROM adult WITH (mechanism = 'smooth', epsilon = 1, chunks = 10)",
     "option 'chunks' is not used by mechanism 'smooth' (it is used by: saa)"),
    ("SELECT DP_COUNT(*), DP_MEDIAN(age) FROM adult WITH (epsilon = 1, chunks = 10)",
     "option 'chunks' is not used by mechanism 'laplace' or 'exponential' (it is used by: saa)"),
    ("SELECT DP_COUNT(*), DP_SUM(age) FROM adult WITH (epsilon = 1, delta = 1e-6, mechanism = 'gaussian', "
     "noise = 'laplace')", "option 'noise' is not used by mechanism 'gaussian' (it is used by: smooth)"),
])
def test_an_option_no_chosen_mechanism_uses_is_refused(con: dpsql.Connection, sql: str, message: str) -> None:
    assert _refused(con, sql, OptionError, message) == message
    with pytest.raises(OptionError, match=re.escape(message)):
        con.explain(sql)  # refused when planned, before anything runs


@pytest.mark.parametrize("sql", [
    # each option is fine when at least one chosen mechanism reads it
    "SELECT DP_COUNT(*), DP_AGG(avg(age), 0, 100) FROM adult WITH (epsilon = 1, chunks = 10)",
    "SELECT DP_MEDIAN(age), DP_AGG(avg(age), 0, 100) FROM adult WITH (epsilon = 1, aggregator = 'winsorized')",
    "SELECT DP_MEAN(age) FROM adult WITH (mechanism = 'saa', chunks = 10, aggregator = 'mean', epsilon = 1)",
    "SELECT DP_MEDIAN(age) FROM adult WITH (mechanism = 'ptr', bound = 1, epsilon = 1, delta = 1e-6)",
    "SELECT DP_MEDIAN(age) FROM adult WITH (mechanism = 'smooth', noise = 'laplace', epsilon = 1, delta = 1e-6)",
    # common options go with any mechanism
    "SELECT sex, DP_COUNT(*) FROM adult GROUP BY sex WITH (epsilon = 1, delta = 1e-6, confidence = 0.9, "
    "keys = ['Female', 'Male'], mechanism = 'laplace')",
])
def test_an_option_some_chosen_mechanism_uses_is_accepted(con: dpsql.Connection, sql: str) -> None:
    assert con.sql(sql).fetchall()


def test_the_used_by_list_follows_the_declarations(con: dpsql.Connection, registered: t.Any) -> None:
    toy = type("ToyChunks", (ToyLaplace,), {"name": "toy_chunks", "options": frozenset({"chunks"})})
    registered(toy)
    _refused(con, "SELECT DP_MEAN(age) FROM adult WITH (epsilon = 1, chunks = 10)", OptionError,
             "option 'chunks' is not used by mechanism 'laplace' (it is used by: saa, toy_chunks)")
    assert con.sql("SELECT DP_COUNT(*) FROM adult WITH (mechanism = 'toy_chunks', chunks = 10, epsilon = 1)")


# ---------------------------------------------------------------------------------------------
# check once, release_many always, and a split that adds up


def test_check_runs_once_per_aggregate_and_prepare_does_not_repeat_it(
    con: dpsql.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, str]] = []
    for mech in REGISTRY.values():
        original = type(mech).check

        def spy(self: Mechanism, agg: t.Any, ctx: Context, _original: t.Any = original) -> None:
            calls.append((self.name, agg.label))
            _original(self, agg, ctx)

        monkeypatch.setattr(mech, "check", spy.__get__(mech))
    sql = ("SELECT DP_COUNT(*), DP_MEAN(age), DP_MEDIAN(age), DP_AGG(avg(age), 0, 100), DP_SUM(age) "
           "FROM adult WITH (epsilon = 1)")
    con.sql(sql).fetchall()
    assert sorted(calls) == sorted([("laplace", "DP_COUNT(*)"), ("laplace", "DP_MEAN(age)"),
                                    ("exponential", "DP_MEDIAN(age)"), ("saa", "DP_AGG(AVG(age), 0, 100)"),
                                    ("laplace", "DP_SUM(age)")])


def test_the_engine_releases_through_release_many(con: dpsql.Connection, registered: t.Any,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    registered(ToyLaplace)
    seen: list[int] = []
    default = Prepared.release_many

    def counting(self: Prepared, groups: t.Sequence[t.Any], noise: t.Any) -> t.Any:
        seen.append(len(groups))
        return default(self, groups, noise)

    monkeypatch.setattr(_ToyPrepared, "release_many", counting)
    con.sql("SELECT sex, DP_COUNT(*) FROM adult GROUP BY sex WITH (mechanism = 'toy_laplace', epsilon = 1)")
    assert seen == [2]  # one call for both groups
    # the default is release() group by group, in order
    p = con.prepare("SELECT DP_COUNT(*) FROM adult WITH (mechanism = 'toy_laplace', epsilon = 1)").plan
    assert p is not None
    prep = p.prepared[0]
    a, b = SeededNoise(1), SeededNoise(1)
    groups = [{"n": 10}, {"n": 20}, {"n": 30}]
    assert Prepared.release_many(prep, groups, a) == [prep.release(g, b) for g in groups]
    assert "getattr" not in release.__code__.co_names  # no probing for the method


def test_prepared_declares_its_cost() -> None:
    assert "cost" in Prepared.__annotations__ and "release_many" in vars(Prepared)


class _Overspend(ToyLaplace):
    name = "toy_overspend"

    def prepare(self, agg: t.Any, ctx: Context, cost: Cost) -> Prepared:
        prep = super().prepare(agg, ctx, cost)
        prep.cost = Cost(epsilon=2 * cost.epsilon)
        return prep


class _HiddenDelta(ToyLaplace):
    name = "toy_hidden_delta"  # spends δ without declaring uses_delta

    def prepare(self, agg: t.Any, ctx: Context, cost: Cost) -> Prepared:
        prep = super().prepare(agg, ctx, cost)
        prep.cost = Cost(epsilon=cost.epsilon, delta=1e-9)
        return prep


@pytest.mark.parametrize(("cls", "message"), [
    (_Overspend, "DP_COUNT(*) spends more epsilon than its share of the budget"),
    (_HiddenDelta, "DP_COUNT(*) spends more delta than its share of the budget"),
])
def test_a_part_that_spends_more_than_its_share_is_a_bug(con: dpsql.Connection, registered: t.Any,
                                                          cls: type[Mechanism], message: str) -> None:
    registered(cls)
    _refused(con, f"SELECT DP_COUNT(*) FROM adult WITH (mechanism = '{cls.name}', epsilon = 1, delta = 1e-6)",
             InternalError, message)


def test_a_split_that_does_not_add_up_is_a_bug(con: dpsql.Connection, monkeypatch: pytest.MonkeyPatch) -> None:
    sql = "SELECT DP_COUNT(*), DP_SUM(age) FROM adult WITH (epsilon = 1)"
    assert con.sql(sql).fetchall()
    real = plan_module._Part

    def lossy(label: str, share: Cost, cost: Cost, uses_delta: bool) -> t.Any:
        return real(label, Cost(share.epsilon * 0.99, share.delta, share.rho), cost, uses_delta)  # loses 1%

    monkeypatch.setattr(plan_module, "_Part", lossy)
    # another spelling of the statement, so that it is planned again (a connection keeps plans)
    _refused(con, sql.replace("epsilon = 1", "epsilon = 1.0"), InternalError,
             "the shares of epsilon do not add up to the budget of the query")


def test_a_part_may_spend_less_than_its_share() -> None:
    """Under replace, an unfiltered, ungrouped COUNT(*) is public: it spends nothing."""
    pol = demo_policy(epsilon=10, delta=1e-5)
    pol["neighbouring"] = "replace"
    c = dpsql.connect(":memory:", pol, setup=load_adult, noise=SeededNoise(0))
    try:
        assert c.sql("SELECT DP_COUNT(*) FROM adult WITH (epsilon = 1)").fetchall() == [(32561,)]
        assert c.budget.spent == Cost()
    finally:
        c.close()


@pytest.mark.parametrize(("sql", "charged"), [
    ("SELECT DP_COUNT(*), DP_MEAN(age), DP_MEDIAN(age) FROM adult WITH (epsilon = 1)", Cost(1.0)),
    ("SELECT DP_SUM(age) FROM adult WITH (mechanism = 'gaussian', epsilon = 1, delta = 1e-6)", Cost(1.0, 1e-6)),
    # laplace uses no δ: the query is charged δ = 0
    ("SELECT DP_COUNT(*) FROM adult WITH (epsilon = 1, delta = 1e-6)", Cost(1.0)),
    # key selection and a Gaussian share δ
    ("SELECT education, DP_SUM(age) FROM adult GROUP BY education WITH (mechanism = 'gaussian', "
     "epsilon = 1, delta = 1e-6)", Cost(1.0, 1e-6)),
    # smooth (Laplace noise) spends the δ of its share
    ("SELECT DP_MEDIAN(age) FROM adult WITH (mechanism = 'smooth', epsilon = 1, delta = 1e-6)",
     Cost(1.0, 1e-6)),
])
def test_the_plan_charges_what_its_parts_spend(con: dpsql.Connection, sql: str, charged: Cost) -> None:
    p = con.prepare(sql).plan
    assert p is not None
    assert math.isclose(p.cost.epsilon, charged.epsilon, rel_tol=1e-12)
    assert math.isclose(p.cost.delta, charged.delta, rel_tol=1e-12, abs_tol=0.0)
    assert p.cost.rho == 0.0


def test_the_options_parser_takes_any_mechanism_name() -> None:
    """The sql layer cannot know the mechanisms: it checks that the value is a name, no more."""
    from dpsql._sql.options import parse_options

    opts = parse_options([("mechanism", exp.Literal.string("Toy_Laplace"))])
    assert opts.mechanism == "toy_laplace" and dataclasses.asdict(opts)["given"] == frozenset({"mechanism"})
    with pytest.raises(OptionError, match="option 'mechanism' must be a name"):
        parse_options([("mechanism", exp.Literal.number("5"))])
