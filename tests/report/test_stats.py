"""Statistics against values computed by hand."""

import math

import numpy as np
import pytest

from edsb.report.stats import (
    clustered_standard_error,
    design_variance,
    minimum_detectable_difference,
    paired_test,
    pass_hat_k,
    student_t_quantile,
    student_t_two_sided_p,
)
from edsb.scoring.metrics import wilson_interval


def test_wilson_interval_matches_hand_computation() -> None:
    # 8 of 10, z = 1.96: centre (0.8 + z²/20) / (1 + z²/10), half-width z·sqrt(0.016 + z²/400) / (1 + z²/10).
    z2 = 1.959963984540054**2
    centre = (0.8 + z2 / 20) / (1 + z2 / 10)
    half = 1.959963984540054 * math.sqrt(0.8 * 0.2 / 10 + z2 / 400) / (1 + z2 / 10)
    interval = wilson_interval(8, 10)
    assert interval.low == pytest.approx(centre - half, abs=1e-12)
    assert interval.high == pytest.approx(centre + half, abs=1e-12)
    assert (round(interval.low, 3), round(interval.high, 3)) == (0.49, 0.943)


def test_wilson_interval_edges() -> None:
    assert wilson_interval(0, 10).low == 0.0
    assert wilson_interval(10, 10).high == 1.0
    assert wilson_interval(0, 0) == wilson_interval(0, 0).__class__(0.0, 1.0)


def test_clustered_standard_error_by_hand() -> None:
    # Clusters a = [1, 1], b = [0, 0]: mean 0.5, residual sums +1 and -1, C = 2:
    # variance = 2/1 * (1 + 1) / 4² = 0.25.
    assert clustered_standard_error([1, 1, 0, 0], ["a", "a", "b", "b"]) == pytest.approx(0.5)
    # Each cluster balanced around the mean: no between-cluster variation.
    assert clustered_standard_error([1, 0, 1, 0], ["a", "a", "b", "b"]) == pytest.approx(0.0)
    # Singleton clusters reduce to the plain (n/(n-1)-corrected) standard error of the mean.
    values = [1, 0, 1, 1, 0]
    mean = sum(values) / 5
    plain = math.sqrt(5 / 4 * sum((v - mean) ** 2 for v in values) / 25)
    assert clustered_standard_error(values, range(5)) == pytest.approx(plain)
    assert clustered_standard_error([1, 0], ["a", "a"]) is None


def test_clustering_widens_correlated_errors() -> None:
    correlated = clustered_standard_error([1] * 5 + [0] * 5, ["a"] * 5 + ["b"] * 5)
    independent = clustered_standard_error([1] * 5 + [0] * 5, range(10))
    assert correlated > independent


def test_pass_hat_k_by_hand() -> None:
    tasks = [(3, 5), (5, 5)]
    assert pass_hat_k(tasks, 1) == pytest.approx((0.6 + 1.0) / 2)
    assert pass_hat_k(tasks, 2) == pytest.approx((3 / 10 + 1.0) / 2)
    assert pass_hat_k(tasks, 3) == pytest.approx((1 / 10 + 1.0) / 2)
    assert pass_hat_k(tasks, 5) == pytest.approx(0.5)
    assert pass_hat_k(tasks, 6) is None
    assert pass_hat_k([(2, 3), (1, 1)], 2) == pytest.approx(1 / 3)  # the single-attempt task is left out


def test_student_t_against_tables() -> None:
    # Two-sided 95% critical values of Student's t (any statistics table) and the normal limit.
    for df, critical in [(1, 12.7062047), (2, 4.3026527), (5, 2.5705818), (10, 2.2281389), (39, 2.0226909)]:
        assert student_t_quantile(0.975, df) == pytest.approx(critical, abs=1e-6)
        assert student_t_two_sided_p(critical, df) == pytest.approx(0.05, abs=1e-7)
    assert student_t_quantile(0.8, 39) == pytest.approx(0.8509350, abs=1e-6)
    assert student_t_quantile(0.025, 10) == pytest.approx(-2.2281389, abs=1e-6)
    assert student_t_quantile(0.975, 5000) == pytest.approx(1.959964, abs=1e-3)
    assert student_t_two_sided_p(0.0, 7) == pytest.approx(1.0)
    # df = 2 in closed form: P(|T| ≥ t) = 1 − t / √(2 + t²).
    assert student_t_two_sided_p(1.5, 2) == pytest.approx(1 - 1.5 / math.sqrt(2 + 1.5**2), abs=1e-15)


def test_student_t_against_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    t = np.array([0.0, 0.1, 0.7, 1.3, 2.0, 3.5, 8.0])
    for df in (1, 2, 3, 4, 7, 12, 29, 39, 40, 120):
        assert np.allclose(student_t_two_sided_p(t, df), 2 * stats.t.sf(t, df), rtol=1e-9, atol=1e-15)
        for q in (0.6, 0.8, 0.9, 0.975, 0.995):
            assert student_t_quantile(q, df) == pytest.approx(stats.t.ppf(q, df), rel=1e-10)


def test_paired_test_by_hand() -> None:
    # Three cases of two pairs each. Differences b − a: case 0: +1, 0; case 1: 0, 0; case 2: −1, +1.
    base = np.array([0, 1, 1, 0, 1, 0], dtype=float)
    other = np.array([1, 1, 1, 0, 0, 1], dtype=float)
    codes = np.array([0, 0, 1, 1, 2, 2])
    test = paired_test(base, other, codes, 3)
    mean = 1 / 6
    sums = [1 - 2 * mean, -2 * mean, -2 * mean]  # residual sum per case
    se = math.sqrt(3 / 2 * sum(s * s for s in sums) / 36)
    critical = 4.3026527  # t, 2 df
    assert float(test.difference) == pytest.approx(mean)
    assert float(test.standard_error) == pytest.approx(se)
    assert (float(test.low), float(test.high)) == pytest.approx((mean - critical * se, mean + critical * se), abs=1e-6)
    assert float(test.p_value) == pytest.approx(1 - (mean / se) / math.sqrt(2 + (mean / se) ** 2))
    # Batched: the same pair twice along a leading axis gives the same answer twice.
    batched = paired_test(np.stack([base, base]), np.stack([other, other]), codes, 3)
    assert np.allclose(batched.p_value, float(test.p_value))


def test_paired_test_of_identical_and_of_opposite_runs() -> None:
    codes = np.repeat(np.arange(4), 3)
    runs = np.array([1, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1], dtype=float)
    same = paired_test(runs, runs, codes, 4)
    # Four cases are too few for the exact sign-flip test to reject anything (2 · 2⁻⁴ > 0.05): every difference.
    assert (float(same.difference), float(same.low), float(same.high), float(same.p_value)) == (0.0, -1.0, 1.0, 1.0)
    # Every case moves the same way by the same amount: no variance to estimate, so the p-value is the exact sign
    # test over the 4 cases, 2 · 2⁻⁴, and the interval, still, every difference.
    flipped = paired_test(np.ones(12), np.zeros(12), codes, 4)
    assert (float(flipped.difference), float(flipped.low), float(flipped.high)) == (-1.0, -1.0, 1.0)
    assert float(flipped.p_value) == pytest.approx(2 * 0.5**4)
    # Six cases can: 2 · 2⁻⁶ < 0.05, and the interval is the point.
    six = paired_test(np.ones(18), np.zeros(18), np.repeat(np.arange(6), 3), 6)
    assert (float(six.low), float(six.high), float(six.p_value)) == (-1.0, -1.0, pytest.approx(2 * 0.5**6))
    one_case = paired_test(np.ones(3), np.zeros(3), np.zeros(3, dtype=np.intp), 1)
    assert float(one_case.difference) == -1.0 and np.isnan(one_case.p_value) and np.isnan(one_case.low)


def test_design_variance_splits_within_and_between() -> None:
    # Two cases, one level, two repeats each: case 0 = [1, 1], case 1 = [1, 0].
    values = np.array([1, 1, 1, 0], dtype=float)
    codes = np.array([0, 0, 1, 1])
    design = design_variance(values, codes, 2, codes, 2)
    # CR1: mean 3/4, residual sums +1/2, −1/2: 2 · (1/4 + 1/4) / 16.
    assert float(design.variance) == pytest.approx(2 * 0.5 / 16)
    # Pooled within-cell variance: squares 0 + (1/4 + 1/4) over (1 + 1) degrees of freedom.
    assert float(design.within) == pytest.approx(0.25)
    assert float(design.between) == pytest.approx(2 * 0.5 / 16 - 0.25 / 4)
    assert float(design.at_repeats(2)) == pytest.approx(float(design.variance))
    assert float(design.at_repeats(10)) == pytest.approx(float(design.between) + 0.25 / 20)
    # One repeat per cell: nothing to estimate the within part from.
    single = design_variance(values, np.array([0, 0, 1, 1]), 2, np.arange(4), 4)
    assert np.isnan(single.within) and np.isnan(single.at_repeats(5))


def test_minimum_detectable_difference_formula() -> None:
    # (t_{.975, 39} + t_{.80, 39}) · √(2 · v)
    assert float(minimum_detectable_difference(0.001, 40)) == pytest.approx(
        (2.0226909 + 0.8509350) * math.sqrt(0.002), rel=1e-6
    )
    assert np.isnan(minimum_detectable_difference(0.001, 1))
