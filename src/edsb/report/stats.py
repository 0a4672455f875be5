"""Statistics beyond the paper's point estimates: case-clustered standard errors, paired differences between two
runs, the power of such a comparison, and pass^k over repeats.

Observations of one case (its distraction levels and repeats) are correlated, so every variance here is the
cluster-robust CR1 variance with the case as the cluster, and every interval and test uses Student's t with
G − 1 degrees of freedom (G cases). The formulas, and why, are in docs/statistics.md (after Miller 2024, "Adding
Error Bars to Evals", arXiv 2411.00640). The array functions work on the last axis, so a simulation can pass
thousands of runs at once.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from math import comb

import numpy as np
from numpy.typing import ArrayLike, NDArray

ALPHA = 0.05  # two-sided level of every interval and test
POWER = 0.8  # the power at which the minimum detectable difference is stated
REPEATS_PROJECTED = (1, 3, 5, 10)  # the repeat counts `edsb report` projects its power to

Floats = NDArray[np.float64]


def student_t_two_sided_p(t: ArrayLike, df: int) -> Floats:
    """P(|T| ≥ |t|) for Student's t with an integer number of degrees of freedom.

    Exact finite series for integer df (Abramowitz & Stegun 26.7.3–26.7.4); edsb's only runtime numeric
    dependency, numpy, has no t distribution, and df = G − 1 is always an integer here.
    """
    if df < 1:
        raise ValueError("Student's t needs at least one degree of freedom")
    theta = np.arctan(np.abs(np.asarray(t, dtype=np.float64)) / math.sqrt(df))
    return 1.0 - _t_central_mass(theta, df)


def _t_central_mass(theta: Floats, df: int) -> Floats:
    """P(|T| ≤ √df·tan θ): the A&S series in θ, for θ in [0, π/2]."""
    cos2 = np.cos(theta) ** 2
    if df % 2 == 1:
        if df == 1:
            return 2.0 * theta / math.pi
        term = np.cos(theta)
        total = term.copy()
        for k in range(1, (df - 1) // 2):
            term = term * cos2 * (2 * k) / (2 * k + 1)
            total += term
        return np.clip(2.0 / math.pi * (theta + np.sin(theta) * total), 0.0, 1.0)
    term = np.ones_like(theta)
    total = term.copy()
    for k in range(1, df // 2):
        term = term * cos2 * (2 * k - 1) / (2 * k)
        total += term
    return np.clip(np.sin(theta) * total, 0.0, 1.0)


def student_t_quantile(q: float, df: int) -> float:
    """The q-quantile of Student's t with integer df, by bisection on the series above (to double precision)."""
    if not 0.0 < q < 1.0:
        raise ValueError("a quantile needs 0 < q < 1")
    if q == 0.5:
        return 0.0
    target = abs(2.0 * q - 1.0)  # the central mass between −t and t
    low, high = 0.0, math.pi / 2
    for _ in range(80):
        middle = (low + high) / 2
        if _t_central_mass(np.array([middle]), df)[0] < target:
            low = middle
        else:
            high = middle
    t = math.sqrt(df) * math.tan((low + high) / 2)
    return t if q > 0.5 else -t


def cluster_codes(clusters: Sequence[Hashable]) -> tuple[NDArray[np.intp], int]:
    """Clusters as integer codes 0..G−1 (in order of first appearance) and G."""
    index: dict[Hashable, int] = {}
    codes = np.fromiter((index.setdefault(c, len(index)) for c in clusters), dtype=np.intp, count=len(clusters))
    return codes, len(index)


def _cluster_sums(values: Floats, codes: NDArray[np.intp], count: int) -> Floats:
    """Sum of `values` over each cluster, on the last axis: (..., n) -> (..., G)."""
    membership = np.zeros((values.shape[-1], count))
    membership[np.arange(values.shape[-1]), codes] = 1.0
    return values @ membership


def cr1_variance_of_mean(values: ArrayLike, codes: NDArray[np.intp], count: int) -> Floats:
    """CR1 cluster-robust variance of the mean of `values` (last axis): G/(G−1) · Σ_g (Σ_{i∈g} (x_i − x̄))² / n².

    NaN with fewer than two clusters, where it is undefined.
    """
    x = np.asarray(values, dtype=np.float64)
    n = x.shape[-1]
    if count < 2 or n == 0:
        return np.full(x.shape[:-1], np.nan)
    residuals = x - x.mean(axis=-1, keepdims=True)
    sums = _cluster_sums(residuals, codes, count)
    return count / (count - 1) * (sums**2).sum(axis=-1) / (n * n)


def clustered_standard_error(values: Sequence[float], clusters: Sequence[Hashable]) -> float | None:
    """Standard error of a mean when observations within a cluster (a case) are correlated: the square root of
    the CR1 variance; None with fewer than two clusters."""
    if not values or len(values) != len(clusters):
        return None
    codes, count = cluster_codes(clusters)
    variance = float(cr1_variance_of_mean(np.asarray(values, dtype=np.float64), codes, count))
    return None if math.isnan(variance) else math.sqrt(variance)


@dataclass(frozen=True)
class PairedTest:
    """The paired difference `other − base` over matched observations, arrays over the leading axes. NaN where
    undefined (fewer than two clusters)."""

    difference: Floats
    standard_error: Floats
    low: Floats
    high: Floats
    p_value: Floats
    clusters: int


def paired_test(
    base: ArrayLike, other: ArrayLike, codes: NDArray[np.intp], count: int, alpha: float = ALPHA
) -> PairedTest:
    """The mean paired difference with its CR1 standard error, a (1 − alpha) interval and a two-sided p-value
    from t with G − 1 degrees of freedom (the interval is clipped to [−1, 1], the range of a difference of rates).

    When every case's mean difference is the same, the CR1 variance is 0 and t is undefined: the interval is
    the point, and the p-value is the exact two-sided sign test over the G cases (1 when the difference is 0,
    else 2^(1−G)), the smallest a comparison of G cases can honestly claim.
    """
    d = np.asarray(other, dtype=np.float64) - np.asarray(base, dtype=np.float64)
    difference = d.mean(axis=-1)
    variance = cr1_variance_of_mean(d, codes, count)
    se = np.sqrt(variance)
    if count < 2:
        nan = np.full(difference.shape, np.nan)
        return PairedTest(difference, nan, nan, nan, nan, count)
    df = count - 1
    critical = student_t_quantile(1 - alpha / 2, df)
    low = np.clip(difference - critical * se, -1.0, 1.0)
    high = np.clip(difference + critical * se, -1.0, 1.0)
    degenerate = se <= 1e-12 * np.maximum(1.0, np.abs(difference))
    statistic = np.where(degenerate, 0.0, difference / np.where(degenerate, 1.0, se))
    p_value = student_t_two_sided_p(statistic, df)
    sign_test = np.where(difference == 0.0, 1.0, min(1.0, 2.0 ** (1 - count)))
    p_value = np.where(degenerate, sign_test, p_value)
    low = np.where(degenerate, difference, low)
    high = np.where(degenerate, difference, high)
    return PairedTest(difference, se, low, high, p_value, count)


def mean_interval(
    values: ArrayLike, codes: NDArray[np.intp], count: int, alpha: float = ALPHA
) -> tuple[float, float | None, float | None]:
    """A rate with its case-clustered (1 − alpha) interval (CR1, t with G − 1 df, clipped to [0, 1]): the paired
    test of the values against zero. (mean, None, None) with fewer than two clusters."""
    x = np.asarray(values, dtype=np.float64)
    test = paired_test(np.zeros_like(x), x, codes, count, alpha)
    mean = float(test.difference)
    if count < 2:
        return mean, None, None
    return mean, max(0.0, float(test.low)), min(1.0, float(test.high))


@dataclass(frozen=True)
class DesignVariance:
    """The variance of one run's success rate, split into what more repeats shrink and what they do not.

    `variance` is the CR1 variance of the mean as the run was designed (G cases, C case × level cells, n
    observations); `within` the pooled repeat-to-repeat variance of one outcome inside a cell (NaN when no
    cell has two repeats). A cell's repeats only average out `within`, so with R repeats per cell the variance
    is between + within / (C·R), between = max(variance − within / n, 0).
    """

    variance: Floats
    within: Floats
    clusters: int
    cells: int
    observations: int

    @property
    def between(self) -> Floats:
        return np.maximum(self.variance - self.within / self.observations, 0.0)

    def at_repeats(self, repeats: int) -> Floats:
        """The variance of the mean with `repeats` repeats in every cell (NaN when `within` is unknown)."""
        return self.between + self.within / (self.cells * repeats)


def design_variance(
    values: ArrayLike, case_codes: NDArray[np.intp], cases: int, cell_codes: NDArray[np.intp], cells: int
) -> DesignVariance:
    """Split the CR1 variance of the mean of `values` (last axis) into its between-cell and within-cell parts:
    the pooled within-cell variance is Σ_c Σ_r (x − x̄_c)² / Σ_c (R_c − 1) over cells with R_c ≥ 2."""
    x = np.asarray(values, dtype=np.float64)
    n = x.shape[-1]
    variance = cr1_variance_of_mean(x, case_codes, cases)
    sizes = np.bincount(cell_codes, minlength=cells).astype(np.float64)
    freedom = float((sizes - 1).clip(min=0).sum())
    if freedom > 0:
        means = _cluster_sums(x, cell_codes, cells) / sizes
        squares = ((x - means[..., cell_codes]) ** 2).sum(axis=-1)
        within = squares / freedom
    else:
        within = np.full(x.shape[:-1], np.nan)
    return DesignVariance(variance, within, cases, cells, n)


def minimum_detectable_difference(
    variance_of_one_run: ArrayLike, clusters: int, alpha: float = ALPHA, power: float = POWER
) -> Floats:
    """The smallest true difference in rate that the paired test above finds with probability `power` at level
    `alpha`, against another run of the same design whose case-level deviations are independent of this one's:
    (t_{1−α/2, G−1} + t_{power, G−1}) · √(2 · variance). Shared case difficulty lowers the variance of a paired
    difference, so this is an upper bound for runs that find the same cases hard."""
    if clusters < 2:
        return np.full(np.shape(variance_of_one_run), np.nan)
    df = clusters - 1
    multiplier = student_t_quantile(1 - alpha / 2, df) + student_t_quantile(power, df)
    return multiplier * np.sqrt(2.0 * np.asarray(variance_of_one_run, dtype=np.float64))


def pass_hat_k(trials: Sequence[tuple[int, int]], k: int) -> float | None:
    """pass^k of tau-bench: the chance that k draws without replacement from a task's trials all pass, averaged
    over tasks. `trials` holds (passes, attempts) per task; tasks with fewer than k attempts are left out."""
    eligible = [(passes, attempts) for passes, attempts in trials if attempts >= k]
    if not eligible or k < 1:
        return None
    return sum(comb(passes, k) / comb(attempts, k) for passes, attempts in eligible) / len(eligible)
