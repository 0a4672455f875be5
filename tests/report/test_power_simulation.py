"""The power figures `edsb compare` and `edsb plan-power` state, checked by simulation (seeded, vectorised).

Pairs of runs share each case's difficulty on the logit scale, as two models on the same benchmark do
(docs/statistics.md gives the model); every figure comes from the library functions the commands use.
"""

from __future__ import annotations

import numpy as np
import pytest
from numpy.polynomial.hermite_e import hermegauss

from edsb.report.power import fit_power_model
from edsb.report.stats import (
    design_variance,
    minimum_detectable_difference,
    paired_inference,
    paired_test,
    power_multiplier,
)

LEVELS, LEVEL_EFFECTS = 3, np.array([0.0, -0.3, -0.6])
SHARED_SD, RUN_SD, LEVEL_SD = 1.0, 1.0, 0.5  # case difficulty both runs share; each run's own; case × level


def simulate_pairs(
    rng: np.random.Generator, pairs: int, cases: int, repeats: int, mu: tuple[float, float]
) -> tuple[np.ndarray, np.ndarray]:
    """`pairs` pairs of runs (pairs × observations, case-major) with logit intercepts `mu`."""
    shared = rng.normal(0.0, SHARED_SD, (pairs, cases))
    runs = []
    for intercept in mu:
        own = rng.normal(0.0, RUN_SD, (pairs, cases))
        level = rng.normal(0.0, LEVEL_SD, (pairs, cases, LEVELS))
        p = 1 / (1 + np.exp(-(intercept + LEVEL_EFFECTS + (shared + own)[..., None] + level)))
        runs.append((rng.random((pairs, cases, LEVELS, repeats)) < p[..., None]).reshape(pairs, -1).astype(float))
    return runs[0], runs[1]


def layout(cases: int, repeats: int) -> tuple[np.ndarray, np.ndarray]:
    """The case and the distraction level of each observation."""
    case = np.repeat(np.arange(cases), LEVELS * repeats)
    level = np.tile(np.repeat(np.arange(LEVELS), repeats), cases)
    return case, level


def rate(mu: float) -> float:
    """The population success rate at logit intercept `mu` (Gauss–Hermite over the random effects)."""
    nodes, weights = hermegauss(60)
    sd = np.sqrt(SHARED_SD**2 + RUN_SD**2 + LEVEL_SD**2)
    return float(np.mean([weights @ (1 / (1 + np.exp(-(mu + b + sd * nodes)))) for b in LEVEL_EFFECTS]) / weights.sum())


def intercept(target: float) -> float:
    low, high = -10.0, 10.0
    for _ in range(60):
        low, high = ((low + high) / 2, high) if rate((low + high) / 2) < target else (low, (low + high) / 2)
    return (low + high) / 2


def test_the_detectable_difference_compare_states_is_found_four_times_in_five() -> None:
    """Table 1's design (30 cases, 3 levels, 5 repeats) at a success rate near 0.45."""
    rng = np.random.default_rng(20261206)
    cases, repeats, pairs = 30, 5, 1000
    case, _ = layout(cases, repeats)
    a, b = simulate_pairs(rng, pairs, cases, repeats, (0.0, 0.0))
    detectable = power_multiplier(cases) * paired_test(a, b, case, cases).standard_error
    # What `edsb compare` prints for one of these pairs is this very figure.
    assert paired_inference(a[0], b[0], list(case)).detectable == pytest.approx(detectable[0])
    stated = float(detectable.mean())
    # `edsb report`'s bound ignores the correlation of the two runs: larger, by about a third here.
    variance = design_variance(a, case, cases, np.repeat(np.arange(cases * LEVELS), repeats), cases * LEVELS)
    bound = float(minimum_detectable_difference(variance.variance, cases).mean())
    # Pairs whose true rates differ by exactly the stated figure.
    a, b = simulate_pairs(rng, pairs, cases, repeats, (0.0, intercept(rate(0.0) + stated)))
    found = float(np.mean(paired_test(a, b, case, cases).p_value < 0.05))
    print(f"compare states {stated:.3f} (report's bound {bound:.3f}); found in {found:.3f} of {pairs} pairs")
    assert 0.12 < stated < bound
    assert 0.74 <= found <= 0.86, found


def test_plan_power_projects_what_a_larger_design_measures() -> None:
    """Pilots of 20 cases run twice per cell, paired, projected to 40 cases × 5 repeats, against the figure
    measured on pairs of that design."""
    rng = np.random.default_rng(20261207)
    case, level = layout(20, 2)
    pilots = np.subtract(*simulate_pairs(rng, 300, 20, 2, (0.0, 0.0))[::-1])
    projected = np.mean([fit_power_model(d, case, level, paired=True).detectable(40, 5) for d in pilots])
    big_case, _ = layout(40, 5)
    a, b = simulate_pairs(rng, 300, 40, 5, (0.0, 0.0))
    measured = float(np.mean(power_multiplier(40) * paired_test(a, b, big_case, 40).standard_error))
    print(f"40 cases × 5 repeats: projected from 20 × 2 pilots {projected:.4f}, measured {measured:.4f}")
    assert projected == pytest.approx(measured, rel=0.05)
    model = fit_power_model(pilots[0], case, level, paired=True)
    # Each doubling of the cases cuts the figure by a little more than 1 − 1/√2 (t's quantiles shrink too);
    # repeats beyond three cut little, as the case-level part does not average out.
    assert 0.29 < 1 - model.detectable(40, 3) / model.detectable(20, 3) < 0.33
    assert 1 - model.detectable(40, 10) / model.detectable(40, 3) < 0.15
