"""The paired comparison's interval and power, checked by simulation (seeded, vectorised, a second or two).

Runs are drawn with case-level random effects on the logit scale, 40 cases × 3 levels × 5 repeats:

    logit P(pass) = μ_run + β_level + u_case (shared by both runs: the case's difficulty)
                    + v_run,case (this run's own luck on the case) + w_run,case,level

so the outcomes of one case are correlated across its levels and repeats, and the two runs of a pair are
correlated through u. Every statistic comes from the library functions `edsb compare` and `edsb report` use; only
the naive interval they are set against (two independent binomial samples, Wald, z = 1.96) is written here.
"""

from __future__ import annotations

import numpy as np
import pytest
from numpy.polynomial.hermite_e import hermegauss

from edsb.report.stats import (
    design_variance,
    minimum_detectable_difference,
    paired_test,
)
from edsb.report.summary import power_summary
from edsb.scoring.metrics import ScoredRun

CASES, LEVELS, REPEATS = 40, 3, 5
LEVEL_EFFECTS = np.array([0.0, -0.3, -0.6])  # distraction makes a case harder
SHARED_SD, RUN_SD, LEVEL_SD = 1.0, 1.0, 0.5
PAIRS = 2000


def design(repeats: int = REPEATS) -> tuple[np.ndarray, np.ndarray]:
    """Case and (case, level) cell codes of the observations, in case-major order."""
    case = np.repeat(np.arange(CASES), LEVELS * repeats)
    cell = np.repeat(np.arange(CASES * LEVELS), repeats)
    return case, cell


def simulate_run(
    rng: np.random.Generator, runs: int, mu: float, shared: np.ndarray | None, repeats: int = REPEATS
) -> np.ndarray:
    """`runs` runs of the design as 0/1 arrays (runs × observations); `shared` is the case effect u (runs × cases)
    a paired run has in common with this one, or None for a run with a case effect of its own."""
    u = rng.normal(0.0, SHARED_SD, (runs, CASES)) if shared is None else shared
    v = rng.normal(0.0, RUN_SD, (runs, CASES))
    w = rng.normal(0.0, LEVEL_SD, (runs, CASES, LEVELS))
    logit = mu + LEVEL_EFFECTS[None, None, :] + (u + v)[:, :, None] + w
    p = 1.0 / (1.0 + np.exp(-logit))
    return (rng.random((runs, CASES, LEVELS, repeats)) < p[..., None]).reshape(runs, -1).astype(np.float64)


def population_rate(mu: float) -> float:
    """The success rate of a run with logit intercept `mu`, averaged over the case and level effects (the estimand:
    a new draw of cases), by Gauss–Hermite quadrature."""
    nodes, weights = hermegauss(60)
    weights = weights / weights.sum()
    sd = np.sqrt(SHARED_SD**2 + RUN_SD**2 + LEVEL_SD**2)
    return float(np.mean([weights @ (1.0 / (1.0 + np.exp(-(mu + b + sd * nodes)))) for b in LEVEL_EFFECTS]))


def intercept_for(rate: float) -> float:
    low, high = -10.0, 10.0
    for _ in range(80):
        middle = (low + high) / 2
        low, high = (middle, high) if population_rate(middle) < rate else (low, middle)
    return (low + high) / 2


def test_the_clustered_paired_interval_covers_a_null_difference_and_the_naive_one_does_not() -> None:
    rng = np.random.default_rng(20241100)
    case, _ = design()
    shared = rng.normal(0.0, SHARED_SD, (PAIRS, CASES))
    a = simulate_run(rng, PAIRS, 0.3, shared)
    b = simulate_run(rng, PAIRS, 0.3, shared)  # same intercept: a true difference of 0
    test = paired_test(a, b, case, CASES)
    clustered = float(np.mean((test.low <= 0) & (test.high >= 0)))
    n = a.shape[1]
    rate_a, rate_b = a.mean(axis=1), b.mean(axis=1)
    naive_se = np.sqrt(rate_a * (1 - rate_a) / n + rate_b * (1 - rate_b) / n)
    naive = float(np.mean(np.abs(rate_b - rate_a) <= 1.959964 * naive_se))
    print(f"coverage of 0 over {PAIRS} null pairs: clustered paired {clustered:.3f}, naive unpaired {naive:.3f}")
    assert 0.93 <= clustered <= 0.97, clustered
    # The naive interval ignores that a case's 15 runs move together, which outweighs what it loses by ignoring
    # the pairing: far too narrow.
    assert naive <= clustered - 0.10, (naive, clustered)
    # The two runs share the case difficulty, so pairing pays: the paired standard error is smaller than the
    # unpaired clustered one would be (each run's own clustered variance, added).
    unpaired = np.sqrt(
        paired_test(np.zeros_like(a), a, case, CASES).standard_error ** 2
        + paired_test(np.zeros_like(b), b, case, CASES).standard_error ** 2
    )
    assert np.median(test.standard_error / unpaired) < 0.9


def _reported_mdd(rng: np.random.Generator, mu: float, repeats: int, runs: int) -> tuple[np.ndarray, np.ndarray]:
    """The minimum detectable difference `edsb report` states for simulated runs (own design, and projected to
    REPEATS repeats), and the runs."""
    case, cell = design(repeats)
    runs_drawn = simulate_run(rng, runs, mu, None, repeats)
    variance = design_variance(runs_drawn, case, CASES, cell, CASES * LEVELS)
    own = minimum_detectable_difference(variance.variance, CASES)
    projected = minimum_detectable_difference(variance.at_repeats(REPEATS), CASES)
    return np.stack([own, projected]), runs_drawn


def test_a_true_difference_equal_to_the_reported_mdd_is_found_four_times_in_five() -> None:
    rng = np.random.default_rng(20241101)
    mu_a = 0.0
    (own, _), runs = _reported_mdd(rng, mu_a, REPEATS, PAIRS)
    mdd = float(own.mean())
    # What `edsb report` prints for one of these runs is this very computation, through the records.
    case, _ = design()
    records = [
        ScoredRun(case_id=int(c), tags=("OA",), level=(i // REPEATS) % LEVELS, passed=bool(x), errored=False)
        for i, (c, x) in enumerate(zip(case, runs[0], strict=True))
    ]
    assert power_summary(records)["minimum_detectable_difference"] == pytest.approx(own[0], abs=1e-4)
    # Pairs of runs of this design whose success rates differ by exactly that much (the other run's case effects
    # are its own, as the figure assumes).
    mu_b = intercept_for(population_rate(mu_a) + mdd)
    a = simulate_run(rng, PAIRS, mu_a, None)
    b = simulate_run(rng, PAIRS, mu_b, None)
    test = paired_test(a, b, case, CASES)
    rejected = float(np.mean(test.p_value < 0.05))
    print(f"MDD {mdd:.3f} (runs at {population_rate(mu_a):.3f}): rejected in {rejected:.3f} of {PAIRS} pairs")
    assert abs(float(test.difference.mean()) - mdd) < 0.01
    assert 0.75 <= rejected <= 0.85, rejected


def test_the_mdd_projected_from_two_repeats_matches_the_one_measured_with_five() -> None:
    rng = np.random.default_rng(20241102)
    (_, projected), _ = _reported_mdd(rng, 0.0, 2, 1000)
    (measured, _), _ = _reported_mdd(rng, 0.0, REPEATS, 1000)
    print(f"MDD at {REPEATS} repeats: projected from 2 {projected.mean():.4f}, measured {measured.mean():.4f}")
    assert projected.mean() == pytest.approx(measured.mean(), rel=0.03)
    # More repeats help less and less: the case-level part of the variance does not average out.
    (own_two, _), _ = _reported_mdd(rng, 0.0, 2, 200)
    assert own_two.mean() > measured.mean()


def test_the_simulation_is_deterministic() -> None:
    first = simulate_run(np.random.default_rng(7), 3, 0.0, None)
    second = simulate_run(np.random.default_rng(7), 3, 0.0, None)
    assert np.array_equal(first, second)
