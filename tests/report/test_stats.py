"""Statistics against values computed by hand."""

import math

import pytest

from edsb.report.stats import clustered_standard_error, pass_hat_k
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
