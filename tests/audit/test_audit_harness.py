"""The audit's own machinery: its noise has the right laws, its bounds are right, and it has the
power docs/testing.md claims on mechanisms whose true ε is known exactly."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpsql._privacy.noise import SeededNoise

from .harness import (
    QUICK,
    Event,
    FastNoise,
    Pair,
    ScaledNoise,
    audit,
    candidate_events,
    cp_lower,
    cp_upper,
    detectable_epsilon,
)

P_MIN = 1e-4


def _pmf_test(draws: np.ndarray, pmf) -> float:  # type: ignore[no-untyped-def]
    """Chi-square p-value of integer draws against ``pmf`` (tails pooled below 5 expected)."""
    lo, hi = int(draws.min()), int(draws.max())
    values = np.arange(lo, hi + 1)
    expected = np.array([pmf(v) for v in values]) * len(draws)
    observed = np.array([(draws == v).sum() for v in values])
    keep = expected >= 5
    obs = np.append(observed[keep], observed[~keep].sum() + 0.0)
    exp_ = np.append(expected[keep], len(draws) - expected[keep].sum())
    if exp_[-1] < 5:
        obs[-2] += obs[-1]
        exp_[-2] += exp_[-1]
        obs, exp_ = obs[:-1], exp_[:-1]
    return float(stats.chisquare(obs, exp_ * obs.sum() / exp_.sum()).pvalue)


@pytest.mark.parametrize("scale", [0.7, 1.0, 2.5, 40.0])
def test_fast_discrete_laplace_has_the_exact_law(scale: float) -> None:
    noise = FastNoise(11)
    draws = np.array([noise.laplace_int(0, scale) for _ in range(40_000)])
    q = math.exp(-1 / scale)
    assert _pmf_test(draws, lambda y: (1 - q) / (1 + q) * q ** abs(y)) > P_MIN


@pytest.mark.parametrize("sigma", [0.8, 2.0, 7.5])
def test_fast_discrete_gaussian_has_the_exact_law(sigma: float) -> None:
    noise = FastNoise(12)
    draws = np.array([noise.gaussian_int(0, sigma) for _ in range(40_000)])
    support = np.arange(-int(40 * sigma) - 5, int(40 * sigma) + 6)
    norm = np.exp(-(support**2) / (2 * sigma**2)).sum()
    assert _pmf_test(draws, lambda y: math.exp(-y * y / (2 * sigma**2)) / norm) > P_MIN


def test_fast_continuous_noise_has_the_right_law_and_matches_seeded() -> None:
    noise = FastNoise(13)
    lap = np.array([noise.laplace(5.0, 2.0) for _ in range(20_000)])
    gau = np.array([noise.gaussian(-1.0, 3.0) for _ in range(20_000)])
    assert stats.kstest(lap, stats.laplace(loc=5.0, scale=2.0).cdf).pvalue > P_MIN
    assert stats.kstest(gau, stats.norm(loc=-1.0, scale=3.0).cdf).pvalue > P_MIN
    seeded = SeededNoise(13)  # the exact samplers the fast ones stand in for
    ref = np.array([seeded.laplace_int(0, 2.0) for _ in range(3_000)])
    fast = np.array([noise.laplace_int(0, 2.0) for _ in range(3_000)])
    assert stats.mannwhitneyu(ref, fast).pvalue > P_MIN
    assert isinstance(noise, SeededNoise) and not noise.secure


def test_scaled_noise_divides_every_scale() -> None:
    noise = ScaledNoise(FastNoise(14), 4.0)
    lap = np.array([noise.laplace(0.0, 8.0) for _ in range(20_000)])
    ints = np.array([noise.laplace_int(0, 8.0) for _ in range(20_000)])
    assert np.mean(np.abs(lap)) == pytest.approx(2.0, rel=0.05)
    q = math.exp(-1 / 2.0)
    assert _pmf_test(ints, lambda y: (1 - q) / (1 + q) * q ** abs(y)) > P_MIN
    assert 0.0 <= noise.uniform(0.0, 1.0) < 1.0  # other draws pass through


def test_clopper_pearson_bounds_match_the_textbook_interval() -> None:
    # Two-sided 95% Clopper–Pearson interval for 50/100 is [0.3983, 0.6017].
    assert cp_lower(50, 100, 0.025) == pytest.approx(0.39832, abs=1e-4)
    assert cp_upper(50, 100, 0.025) == pytest.approx(0.60168, abs=1e-4)
    assert cp_lower(0, 100, 0.01) == 0.0 and cp_upper(100, 100, 0.01) == 1.0
    # 0 successes: the upper bound is 1 − a^(1/n)
    assert cp_upper(0, 1000, 0.001) == pytest.approx(1 - 0.001 ** (1 / 1000), rel=1e-9)


def test_events_cover_bottom_and_vectors() -> None:
    px = np.array([[np.nan], [1.0], [2.0]])
    events = candidate_events(px, px)
    assert Event("none") in events and Event("some") in events
    assert Event("none").mask(px).tolist() == [True, False, False]
    pv = np.array([[0.0, 1.0], [1.0, 0.0]])
    quads = [e for e in candidate_events(pv, pv) if e.kind == "quad"]
    assert quads and any(e.mask(pv).tolist() == [True, False] for e in quads)


def _laplace_pair(true_epsilon: float, claimed: float, shift: float = 1.0) -> Pair:
    """Laplace noise of scale shift/true_epsilon on 0 vs shift: exactly true_epsilon-DP."""
    scale = shift / true_epsilon
    return Pair(lambda n: n.laplace(0.0, scale), lambda n: n.laplace(shift, scale), claimed, 0.0,
                f"Laplace, true ε = {true_epsilon}")


def test_an_exact_mechanism_at_its_claimed_epsilon_passes() -> None:
    for seed in range(3):
        result = audit(_laplace_pair(1.0, 1.0), seed=seed)
        assert not result.violated, str(result)


def test_the_audit_has_the_power_the_docs_claim() -> None:
    """A mechanism whose true ε exceeds the claim by the detectable gap (at p = 0.2) is caught."""
    n = QUICK["trials"]
    gap = detectable_epsilon(n, 0.2, 1.0) - 1.0
    assert 0.05 < gap < 0.2
    caught = sum(audit(_laplace_pair(1.0 + 1.5 * gap, 1.0), seed=s).violated for s in range(3))
    assert caught >= 2


def test_bottom_outputs_are_audited() -> None:
    """A mechanism that answers ⊥ on one input only (as a careless PTR would) is caught."""
    pair = Pair(lambda n: None if n.laplace(0.0, 1.0) < 2.0 else 1.0, lambda n: 1.0, 1.0, 0.0, "⊥ on x only")
    result = audit(pair)
    assert result.violated and any(t.event.kind in ("none", "some") for t in result.tests if t.violated)


def test_the_numbers_in_docs_testing_md_are_the_harness_numbers() -> None:
    """docs/testing.md quotes trial counts and detectable gaps: they must match the code."""
    import re
    from pathlib import Path

    from .harness import THOROUGH

    text = (Path(__file__).resolve().parents[2] / "docs" / "testing.md").read_text(encoding="utf-8")
    for name, mode in (("quick", QUICK), ("thorough", THOROUGH)):
        row = re.search(rf"^\| {name}[^|]*\| ([\d,]+) \| ([\d,]+) \| (\d+) \|", text, re.MULTILINE)
        assert row, name
        assert [int(g.replace(",", "")) for g in row.groups()] == [mode["trials"], mode["pilot"], mode["events"]]
        gaps = re.search(rf"^\| {name}: smallest detectable ε′ − ε \|(.*)\|$", text, re.MULTILINE)
        assert gaps, name
        quoted = [float(g) for g in gaps.group(1).split("|")]
        computed = [detectable_epsilon(mode["trials"], p, 1.0, tests=mode["events"]) - 1.0
                    for p in (0.01, 0.05, 0.1, 0.2, 0.3)]
        assert quoted == [round(c, 2) for c in computed]
