"""Tests of dpsql._privacy.noise.

Calibrations are checked against OpenDP's own privacy maps and against scipy;
samplers by goodness-of-fit tests with modest sample sizes (p-value floor 1e-4).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import opendp.prelude as dp
import pytest
from scipy import integrate, optimize, special, stats

from dpsql._privacy import noise
from dpsql._privacy.noise import NoiseSource, SecureNoise, SeededNoise

dp.enable_features("contrib")

P_MIN = 1e-4


def p_min(src: NoiseSource) -> float:
    """The smallest p-value a law check accepts. A seeded source gives the same draws on every
    run, so its checks are deterministic at P_MIN; the secure source cannot be seeded, and its
    checks (about twenty in this file) use 1e-6, so that a correct sampler fails one of them by
    chance about once in 50,000 runs while a wrong law still fails at these sample sizes."""
    return P_MIN if not src.secure else 1e-6
SENSITIVITIES = [1e-6, 0.37, 1.0, 3.0, 100.0, 12345.6, 1024.0 * (1.0 - 2.0**-40)]
EPSILONS = [0.01, 0.1, 0.5, 1.0, 2.5, 10.0]


class ExactSeeded(SeededNoise):
    """Seeded bits through NoiseSource's own exact discrete Laplace (CKS20 Algorithm 2)."""

    laplace_int = NoiseSource.laplace_int


def secure() -> NoiseSource:
    return SecureNoise()


def seeded() -> NoiseSource:
    return SeededNoise(2024)


def exact() -> NoiseSource:
    return ExactSeeded(3)


SOURCES = [pytest.param(secure, id="secure"), pytest.param(seeded, id="seeded")]


def float_space() -> tuple:
    return dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float)


def int_space() -> tuple:
    return dp.atom_domain(T="i64"), dp.absolute_distance(T="i64")


def on_grid(x: float, k: int) -> bool:
    return math.ldexp(x, -k) == round(math.ldexp(x, -k))


# -- grid --------------------------------------------------------------------------------


def test_grid_exponent_is_floor_log2_minus_30() -> None:
    assert noise.grid_exponent(1.0) == -30
    assert noise.grid_exponent(1.9999) == -30
    assert noise.grid_exponent(2.0) == -29
    assert noise.grid_exponent(0.75) == -31
    assert noise.grid_exponent(100.0) == 6 - 30
    assert noise.grid_exponent(1e-320) == -1074
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError):
            noise.grid_exponent(bad)


def test_grid_points_and_snap() -> None:
    assert noise.grid_points(0.0, 1.0, -2) == 4  # 0, 0.25, 0.5, 0.75
    assert noise.grid_points(0.1, 0.2, -2) == 0
    assert noise.grid_points(-1.0, 1.0, 0) == 2
    assert noise.snap(38.58, -3) == 38.625
    assert noise.snap(-38.58, 0) == -39.0
    assert on_grid(noise.snap(38.58, -33), -33)


# -- calibration against OpenDP's privacy maps ---------------------------------------------


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_laplace_scale_matches_opendp_map(epsilon: float) -> None:
    for delta_1 in SENSITIVITIES:
        b = noise.laplace_scale(delta_1, epsilon)
        m = dp.m.make_laplace(*float_space(), scale=b, k=noise.grid_exponent(b))
        loss = m.map(delta_1)
        assert loss <= epsilon * (1 + 1e-12), (delta_1, b, loss)
        assert loss >= epsilon * (1 - 1e-9), "scale is needlessly large"


def test_laplace_scale_when_slack_crosses_a_power_of_two() -> None:
    sensitivity = 1024.0 * (1.0 - 2.0**-40)  # Δ/ε sits just below 2^10
    b = noise.laplace_scale(sensitivity, 1.0)
    assert noise.grid_exponent(b) == noise.grid_exponent(sensitivity) + 1  # the case occurs
    naive = sensitivity + 2.0 ** noise.grid_exponent(sensitivity)
    naive_m = dp.m.make_laplace(*float_space(), scale=naive, k=noise.grid_exponent(naive))
    assert naive_m.map(sensitivity) > 1.0  # the slack of the wrong grid would not do
    m = dp.m.make_laplace(*float_space(), scale=b, k=noise.grid_exponent(b))
    assert m.map(sensitivity) <= 1.0 + 1e-12


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_integer_laplace_scale_matches_opendp_map(epsilon: float) -> None:
    for delta_1 in (1, 2, 7, 1000):
        b = noise.laplace_scale(delta_1, epsilon, integer=True)
        loss = dp.m.make_laplace(*int_space(), scale=b).map(delta_1)
        assert epsilon * (1 - 1e-9) <= loss <= epsilon * (1 + 1e-12)


@pytest.mark.parametrize("rho", [0.001, 0.05, 0.5, 2.0, 20.0])
def test_gaussian_sigma_zcdp_matches_opendp_map(rho: float) -> None:
    for delta_2 in SENSITIVITIES:
        sigma = noise.gaussian_sigma_zcdp(delta_2, rho)
        m = dp.m.make_gaussian(*float_space(), scale=sigma, k=noise.grid_exponent(sigma))
        assert rho * (1 - 1e-9) <= m.map(delta_2) <= rho * (1 + 1e-12)
    for delta_2 in (1, 3, 50):
        sigma = noise.gaussian_sigma_zcdp(delta_2, rho, integer=True)
        loss = dp.m.make_gaussian(*int_space(), scale=sigma).map(delta_2)
        assert rho * (1 - 1e-9) <= loss <= rho * (1 + 1e-12)


# -- analytic Gaussian ----------------------------------------------------------------------


def scipy_delta(sigma: float, sensitivity: float, epsilon: float) -> float:
    """Balle & Wang's δ(ε) for the continuous Gaussian, straight from scipy.stats.norm."""
    a, b = sensitivity / (2 * sigma), epsilon * sigma / sensitivity
    return math.exp(stats.norm.logsf(b - a)) - math.exp(epsilon + stats.norm.logsf(b + a))


def erfcx_delta(sigma: float, sensitivity: float, epsilon: float) -> float:
    """δ = φ(b - a)·a·∫_{-1}^{1} (1 - x·R(x)) dt, x = b + a·t, R from scipy's erfcx."""
    a, b = sensitivity / (2 * sigma), epsilon * sigma / sensitivity

    def integrand(t: float) -> float:
        x = b + a * t
        return 1.0 - x * math.sqrt(math.pi / 2) * special.erfcx(x / math.sqrt(2))

    value, _ = integrate.quad(integrand, -1.0, 1.0, epsabs=0, epsrel=1e-13)
    return stats.norm.pdf(b - a) * a * value


def effective_sensitivity(sensitivity: float, sigma: float) -> float:
    return sensitivity + 3 * 2.0 ** noise.grid_exponent(sigma)


@pytest.mark.parametrize("epsilon", [0.05, 0.3, 1.0, 3.0, 10.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-10, 1e-100, 1e-300])
def test_analytic_gaussian_solves_the_delta_equation(epsilon: float, delta: float) -> None:
    for sensitivity in (1.0, 37.5):
        sigma = noise.gaussian_sigma_approx(sensitivity, epsilon, delta)
        d_eff = effective_sensitivity(sensitivity, sigma)
        exact = erfcx_delta(sigma, d_eff, epsilon)
        assert exact == pytest.approx(delta, rel=1e-9, abs=0)
        assert exact <= delta * (1 + 1e-11)
        assert erfcx_delta(sigma * (1 - 1e-7), d_eff, epsilon) > delta  # the smallest σ
        if delta >= 1e-10:  # below, scipy's difference of two tails loses digits itself
            assert scipy_delta(sigma, d_eff, epsilon) == pytest.approx(delta, rel=1e-9, abs=0)
    unit = sigma / d_eff
    reference = optimize.brentq(lambda s: math.log(erfcx_delta(s, 1.0, epsilon) / delta),
                                unit * 0.99, unit * 1.01, xtol=1e-300, rtol=1e-14)
    assert unit == pytest.approx(reference, rel=1e-9, abs=0)


@pytest.mark.parametrize("epsilon", [0.1, 0.5, 0.9])
@pytest.mark.parametrize("delta", [1e-5, 1e-9])
def test_analytic_gaussian_beats_the_classical_bound(epsilon: float, delta: float) -> None:
    sigma = noise.gaussian_sigma_approx(1.0, epsilon, delta)
    classical = effective_sensitivity(1.0, sigma) * math.sqrt(2 * math.log(1.25 / delta)) / epsilon
    assert sigma < classical
    assert noise.gaussian_sigma_approx(1.0, epsilon * 1.1, delta) < sigma


@pytest.mark.parametrize("epsilon,sigma", [(1e-8, 3e8), (1e-6, 4e6), (1e-3, 2000.0), (0.02, 300.0),
                                           (2.0, 7.0)])
def test_gaussian_delta_has_no_cancellation(epsilon: float, sigma: float) -> None:
    expected = erfcx_delta(sigma, 1.0, epsilon)
    assert expected > 0
    assert noise.gaussian_delta(sigma, 1.0, epsilon) == pytest.approx(expected, rel=1e-9, abs=0)


def discrete_gaussian_delta(sigma: float, shift: int, epsilon: float) -> float:
    """Exact δ(ε) of the discrete Gaussian N_Z(0, σ²) for an integer shift, by summation."""
    half = int(40 * sigma) + shift + 2
    y = np.arange(-half, half + 1, dtype=float)
    log_norm = np.logaddexp.reduce(-(y**2) / (2 * sigma**2))
    p = np.exp(-(y**2) / (2 * sigma**2) - log_norm)
    q = np.exp(-((y - shift) ** 2) / (2 * sigma**2) - log_norm)
    return float(np.maximum(p - math.exp(epsilon) * q, 0.0).sum())


def test_grid_slack_covers_the_discrete_gaussian() -> None:
    """The lemma in docs/noise.md: δ of N_Z(0, σ²) at shift D <= continuous δ at D + 2."""
    worse_than_continuous = 0
    for sigma in (2.0, 5.0, 20.5, 80.0):
        for shift in (1, 2, 5):
            for epsilon in (0.1, 0.5, 1.0, 3.0):
                exact = discrete_gaussian_delta(sigma, shift, epsilon)
                if exact < 1e-250:
                    continue
                assert exact <= noise.gaussian_delta(sigma, shift + 2, epsilon)
                worse_than_continuous += exact > noise.gaussian_delta(sigma, shift, epsilon)
    assert worse_than_continuous > 0  # without the slack the continuous formula would be wrong


def test_confidence_interval_half_widths() -> None:
    for c in (0.5, 0.9, 0.95, 0.99):
        assert noise.laplace_ci(2.0, c) == pytest.approx(stats.laplace(scale=2.0).ppf((1 + c) / 2))
        assert noise.gaussian_ci(3.0, c) == pytest.approx(stats.norm(scale=3.0).ppf((1 + c) / 2))
    assert noise.laplace_ci(1.0) == pytest.approx(math.log(20))
    for bad in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError):
            noise.gaussian_ci(1.0, bad)


@pytest.mark.parametrize("call", [
    lambda: noise.laplace_scale(0.0, 1.0), lambda: noise.laplace_scale(1.0, 0.0),
    lambda: noise.laplace_scale(1.0, math.nan), lambda: noise.gaussian_sigma_zcdp(1.0, -1.0),
    lambda: noise.gaussian_sigma_approx(1.0, 1.0, 0.0),
    lambda: noise.gaussian_sigma_approx(1.0, 1.0, 1.0),
    lambda: SecureNoise().laplace(math.inf, 1.0), lambda: SecureNoise().laplace(1.0, 0.0),
    lambda: SecureNoise().gaussian(math.nan, 1.0), lambda: SeededNoise(1).laplace(1.0, -2.0),
])
def test_invalid_arguments_are_refused(call) -> None:
    with pytest.raises(ValueError):
        call()


# -- the secure source ---------------------------------------------------------------------


def test_default_noise_is_one_secure_instance() -> None:
    assert noise.default_noise() is noise.default_noise()
    assert isinstance(noise.default_noise(), SecureNoise) and noise.default_noise().secure
    assert SeededNoise(0).secure is False and NoiseSource.secure is False


def test_secure_laplace_and_gaussian_have_the_right_law() -> None:
    src = SecureNoise()
    lap = np.array([src.laplace(10.0, 3.0) for _ in range(4000)]) - 10.0
    assert stats.kstest(lap, stats.laplace(scale=3.0).cdf).pvalue > p_min(src)
    gau = np.array([src.gaussian(-5.0, 2.0) for _ in range(4000)]) + 5.0
    assert stats.kstest(gau, stats.norm(scale=2.0).cdf).pvalue > p_min(src)


def test_secure_float_releases_lie_on_the_scale_grid() -> None:
    src = SecureNoise()
    for scale in (1.0, 0.013, 250.0):
        k = noise.grid_exponent(scale)
        for value in (38.58, 38.58 + 1e-13):
            assert all(on_grid(src.laplace(value, scale), k) for _ in range(50))
            assert all(on_grid(src.gaussian(value, scale), k) for _ in range(50))
    assert all(on_grid(src.laplace(38.58, 0.001, k=-20), -20) for _ in range(50))
    assert not on_grid(38.58 + 1e-13, noise.grid_exponent(1.0))  # the input itself is not


def discrete_pmf(kind: str, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Support and probabilities of the discrete Laplace or Gaussian (tails below 1e-20 cut)."""
    support = np.arange(-int(60 * scale) - 60, int(60 * scale) + 61)
    log_w = -np.abs(support) / scale if kind == "laplace" else -(support**2) / (2 * scale**2)
    return support, np.exp(log_w - np.logaddexp.reduce(log_w))


LAWS = [("laplace", 2.5), ("laplace", 4.0), ("gaussian", 2.5), ("gaussian", 0.8)]
INTEGER_CASES = [
    pytest.param(make, kind, scale, id=f"{make.__name__}-{kind}-{scale}")
    for make, laws in ((secure, LAWS), (seeded, LAWS), (exact, LAWS[:2]))
    for kind, scale in laws
]


@pytest.mark.parametrize("make,kind,scale", INTEGER_CASES)
def test_integer_noise_has_the_discrete_law(make, kind: str, scale: float) -> None:
    src = make()
    draw = src.laplace_int if kind == "laplace" else src.gaussian_int
    values = [draw(7, scale) for _ in range(4000 if src.secure else 2500)]
    assert all(type(v) is int for v in values)
    noise_ = np.array(values) - 7
    support, pmf = discrete_pmf(kind, scale)
    cut = max(int(2 * scale), 2)
    inner = np.abs(support) <= cut
    observed = [(noise_ == s).sum() for s in support[inner]] + [(np.abs(noise_) > cut).sum()]
    expected = np.append(pmf[inner], pmf[~inner].sum()) * len(values)
    assert stats.chisquare(observed, expected).pvalue > p_min(src)
    variance = float((pmf * support**2).sum())
    assert np.var(noise_) == pytest.approx(variance, rel=0.15)
    if kind == "laplace":
        q = math.exp(-1 / scale)
        assert variance == pytest.approx(2 * q / (1 - q) ** 2, rel=1e-9)


def test_secure_integer_noise_handles_64_bit_values() -> None:
    src = SecureNoise()
    assert abs(src.laplace_int(2**40, 2.0) - 2**40) < 200
    assert abs(src.gaussian_int(-(2**40), 2.0) + 2**40) < 200


# -- the seeded source -----------------------------------------------------------------------


def draws(src: SeededNoise) -> list:
    return [src.laplace(1.0, 2.0), src.gaussian(1.0, 2.0), src.laplace_int(3, 1.5),
            src.gaussian_int(3, 1.5), src.uniform(0.0, 1.0), src.cauchy_like(4.0),
            src.choice_weighted([0.0, 0.5, 1.0]), src.bernoulli_exp(0.4),
            *src.laplace_array(1.0, 3), *src.gaussian_array(1.0, 3)]


def test_seeded_noise_is_reproducible_and_seed_dependent() -> None:
    assert draws(SeededNoise(11)) == draws(SeededNoise(11))
    assert draws(SeededNoise(11)) != draws(SeededNoise(12))


def test_seeded_noise_has_the_right_scale() -> None:
    src = SeededNoise(5)
    assert np.std(src.laplace_array(100.0, 20000)) == pytest.approx(100 * math.sqrt(2), rel=0.03)
    assert np.std(src.gaussian_array(7.0, 20000)) == pytest.approx(7.0, rel=0.03)
    lap = np.array([src.laplace(0.0, 3.0) for _ in range(3000)])
    assert stats.kstest(lap, stats.laplace(scale=3.0).cdf).pvalue > p_min(src)
    gau = np.array([src.gaussian(0.0, 3.0) for _ in range(3000)])
    assert stats.kstest(gau, stats.norm(scale=3.0).cdf).pvalue > p_min(src)


# -- auxiliary draws ---------------------------------------------------------------------------


def cauchy_like_cdf(gamma: float) -> Callable[[np.ndarray], np.ndarray]:
    """CDF of the density ∝ 1/(1 + |z|^γ) by quadrature; normaliser (2π/γ)/sin(π/γ)."""
    total = 2 * (math.pi / gamma) / math.sin(math.pi / gamma)

    def density(t: float) -> float:
        return 1 / (1 + t**gamma)

    def cdf(z: float) -> float:
        if abs(z) < 1:
            part = integrate.quad(density, 0, abs(z))[0]
        else:  # tail with t = 1/u: ∫_0^{1/|z|} u^(γ-2)/(1 + u^γ) du (algebraic weight at 0)
            tail = integrate.quad(density, 0, 1 / abs(z), weight="alg", wvar=(gamma - 2, 0))[0]
            part = total / 2 - tail
        return 0.5 + math.copysign(part / total, z)

    return np.vectorize(cdf)


def test_cauchy_like_rejection_constants_bound_the_ratios() -> None:
    z = np.linspace(0, 3, 300001)
    ratio = (1 + z**2) / (1 + z**4)
    assert ratio.max() == pytest.approx(noise._CAUCHY4_BOUND, rel=1e-9)
    assert ratio.max() <= noise._CAUCHY4_BOUND
    z = np.linspace(0, 50, 500001)
    for gamma in (2.5, 3.0, 6.0, 10.0):  # γ > 2 other than 4: M = 2
        assert ((1 + z**2) / (1 + z**gamma)).max() <= 2
    for gamma in (1.1, 1.5, 1.9):  # 1 < γ < 2: M = 2^(γ-1)
        assert ((1 + z) ** gamma / (1 + z**gamma)).max() <= 2 ** (gamma - 1) * (1 + 1e-12)


@pytest.mark.parametrize("make", SOURCES)
@pytest.mark.parametrize("gamma", [2.0, 4.0, 3.0, 1.5])
def test_cauchy_like_matches_its_density(make, gamma: float) -> None:
    src = make()
    z = np.array([src.cauchy_like(gamma) for _ in range(20000 if src.secure else 8000)])
    assert all(on_grid(v, -40) for v in z[:200])
    cdf = stats.cauchy.cdf if gamma == 2.0 else cauchy_like_cdf(gamma)
    assert stats.kstest(z[:3000], cdf).pvalue > p_min(src)
    edges = np.concatenate([[-np.inf], np.linspace(-4, 4, 33), [np.inf]])  # a finer look
    expected = np.diff(np.clip(cdf(edges), 0, 1)) * len(z)
    assert stats.chisquare(np.histogram(z, edges)[0], expected).pvalue > p_min(src)
    if gamma != 2.0:  # the two quadratures meet at |z| = 1 only if the normaliser is right
        assert cdf(1.0 - 1e-12) == pytest.approx(cdf(1.0), abs=1e-9)


@pytest.mark.parametrize("make", SOURCES)
def test_choice_weighted_follows_softmax(make) -> None:
    src = make()
    weights = np.array([1.0, 2.0, 3.0, 0.0, 4.0])
    with np.errstate(divide="ignore"):
        log_w = 1000.0 + np.log(weights)  # a large offset: log-sum-exp must cope
    picks = np.bincount([src.choice_weighted(log_w.tolist()) for _ in range(5000)], minlength=5)
    assert picks[3] == 0
    keep = weights > 0
    expected = weights[keep] / weights.sum() * picks.sum()
    assert stats.chisquare(picks[keep], expected).pvalue > p_min(src)
    for bad in ([math.nan, 0.0], [math.inf, 0.0], [-math.inf, -math.inf], []):
        with pytest.raises(ValueError):
            src.choice_weighted(bad)


@pytest.mark.parametrize("make", SOURCES)
def test_bernoulli_exp_is_exact(make) -> None:
    src = make()
    assert all(src.bernoulli_exp(0.0) for _ in range(200))
    assert not any(src.bernoulli_exp(60.0) for _ in range(500))
    for x in (0.3, 1.0, 2.7):
        hits = sum(src.bernoulli_exp(x) for _ in range(5000))
        assert stats.binomtest(hits, 5000, math.exp(-x)).pvalue > p_min(src)
    with pytest.raises(ValueError):
        src.bernoulli_exp(-0.1)


@pytest.mark.parametrize("make", SOURCES)
def test_uniform_is_uniform_on_the_grid(make) -> None:
    src = make()
    low, high = 2.5, 7.25
    k = noise.grid_exponent(high - low)
    u = np.array([src.uniform(low, high) for _ in range(4000)])
    assert ((u >= low) & (u < high)).all() and all(on_grid(v, k) for v in u)
    assert stats.kstest(u, stats.uniform(loc=low, scale=high - low).cdf).pvalue > p_min(src)
    g = 2.0**-20  # a public grid with three points in the interval
    lo = 0.1
    picks = [src.uniform(lo, lo + 3 * g, k=-20) for _ in range(3000)]
    points = sorted(set(picks))
    assert len(points) == noise.grid_points(lo, lo + 3 * g, -20) == 3
    assert all(on_grid(p, -20) and lo <= p < lo + 3 * g for p in points)
    assert stats.chisquare([picks.count(p) for p in points]).pvalue > p_min(src)
    with pytest.raises(ValueError):
        src.uniform(1.0, 1.0)
    with pytest.raises(ValueError):
        src.uniform(0.1, 0.2, k=-2)


def test_secure_add_many_has_the_scalar_law_and_grid() -> None:
    """The batched (vector) OpenDP path: same law as one call per value, same grid."""
    import numpy as np
    from scipy import stats

    from dpsql._privacy.noise import SecureNoise, grid_exponent

    src = SecureNoise()
    scale = 3.0
    values = [10.0 + i * 1e-9 for i in range(4000)]
    out = np.array(src.add_many("laplace", values, scale)) - np.array(values)
    assert stats.kstest(out, stats.laplace(scale=scale).cdf).pvalue > 1e-4
    step = 2.0 ** grid_exponent(scale)
    released = src.add_many("laplace", values, scale)
    assert all(float(r / step).is_integer() for r in released)
    ints = np.array(src.add_many("laplace_int", [5] * 4000, 2.0)) - 5
    assert ints.dtype.kind == "i"
    # discrete Laplace with P ∝ exp(-|y|/2): variance 2q/(1-q)^2, q = e^(-1/2)
    q = np.exp(-0.5)
    assert abs(ints.var() / (2 * q / (1 - q) ** 2) - 1) < 0.15
    gauss = np.array(src.add_many("gaussian", values, 2.0)) - np.array(values)
    assert stats.kstest(gauss, stats.norm(scale=2.0).cdf).pvalue > 1e-4
