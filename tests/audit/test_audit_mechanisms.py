"""The statistical privacy audit of every mechanism, and the negative controls it must catch.

Quick mode runs in the default test run; ``pytest -m thorough`` repeats every case with about
twelve times more trials and a different seed (docs/testing.md gives the power of each mode).
"""

from __future__ import annotations

import pytest

from dpsql.mechanisms import REGISTRY

from .cases import CASES, CONTROLS
from .harness import QUICK, THOROUGH, AuditCase, audit


def _params(cases: list[AuditCase]) -> list:
    out = []
    for case in cases:
        marks = []
        if case.mechanism and case.mechanism not in REGISTRY:
            marks.append(pytest.mark.skip(reason=f"mechanism '{case.mechanism}' is not registered"))
        if case.known_issue:
            marks.append(pytest.mark.xfail(strict=True, reason=case.known_issue))
        out.append(pytest.param(case, id=case.name, marks=marks))
    return out


def _check(case: AuditCase, mode: dict, seed: int) -> None:
    trials = (case.thorough_trials if mode is THOROUGH else case.trials) or mode["trials"]
    result = audit(case, trials=trials, pilot=mode["pilot"], events=mode["events"], seed=seed)
    assert len(result.tests) > 0, f"no event was testable\n{result}"
    if case.expect == "violation":
        assert result.violated, f"the audit missed a broken mechanism\n{result}"
    else:
        assert not result.violated, f"privacy violation\n{result}"


@pytest.mark.parametrize("case", _params(CASES))
def test_mechanism_keeps_its_promise(case: AuditCase) -> None:
    _check(case, QUICK, seed=1)


@pytest.mark.parametrize("case", _params(CONTROLS))
def test_negative_control_is_caught(case: AuditCase) -> None:
    _check(case, QUICK, seed=1)


@pytest.mark.thorough
@pytest.mark.parametrize("case", _params(CASES + CONTROLS))
def test_thorough_audit(case: AuditCase) -> None:
    _check(case, THOROUGH, seed=7)


def test_every_registered_mechanism_is_audited() -> None:
    audited = {c.mechanism for c in CASES if c.expect == "pass"}
    missing = sorted(set(REGISTRY) - audited)
    assert not missing, (
        f"mechanism(s) {', '.join(missing)} have no audit case: append one to CASES in "
        "tests/audit/cases.py (a query, neighbouring rows that are a worst case for its "
        "sensitivity, and the policy)"
    )


def test_controls_and_cases_are_well_formed() -> None:
    names = [c.name for c in CASES + CONTROLS]
    assert len(names) == len(set(names)), "audit case names must be unique (they are test ids)"
    assert all(c.expect == "pass" for c in CASES)
    assert all(c.expect == "violation" for c in CONTROLS)
    assert len(CONTROLS) >= 3


def test_truncation_is_recognised_in_the_statistics_sql() -> None:
    """The skip of the truncated cases reads the statistics SQL: ROW_NUMBER over the unit __u."""
    from .cases import truncates

    assert truncates("SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY __u ORDER BY HASH(__u, __t)) AS __n "
                     "FROM __t) WHERE __n <= 2")
    assert truncates("row_number()  over (\n  partition by __k0, __u order by x) <= 5")
    assert not truncates("SELECT ROW_NUMBER() OVER (ORDER BY x) FROM t")
    assert not truncates("SELECT COUNT(*) FROM (SELECT HASH(__t) AS __u FROM t) GROUP BY __u")
