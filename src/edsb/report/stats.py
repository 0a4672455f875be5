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
from functools import cache
from math import comb
from statistics import NormalDist

import numpy as np
from numpy.typing import ArrayLike, NDArray

from edsb.scoring.metrics import wilson_interval

ALPHA = 0.05  # two-sided level of every interval and test
POWER = 0.8  # the power at which the minimum detectable difference is stated
REPEATS_PROJECTED = (1, 3, 5, 10)  # the repeat counts `edsb report` projects its power to
MIN_CLUSTERS = 10  # with fewer cases, `edsb compare` uses exact small-sample intervals (docs/statistics.md)

LARGE_DF = 200  # beyond this, t's quantiles come from an expansion around the normal's

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


@cache
def student_t_quantile(q: float, df: int) -> float:
    """The q-quantile of Student's t with integer df, by bisection on the series above (to double precision;
    cached: a comparison asks for the same few quantiles in every row)."""
    if not 0.0 < q < 1.0:
        raise ValueError("a quantile needs 0 < q < 1")
    if q == 0.5:
        return 0.0
    if df > LARGE_DF:  # the series costs O(df): Cornish–Fisher around the normal quantile, within 2e-6
        z = NormalDist().inv_cdf(q)
        return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
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

    When every case's mean difference is the same, the CR1 variance is 0 and t is undefined: the p-value is the
    exact two-sided sign test over the G cases (1 when the difference is 0, else 2^(1−G)), the smallest a
    comparison of G cases can honestly claim, and the interval the exact sign-flip one (`sign_flip`): the point,
    or [−1, 1] when 2^(1−G) ≥ alpha. `paired_inference` is what `edsb compare` prints.
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
    # The exact sign-flip interval of such data: the point, unless too few cases to reject anything ([−1, 1]).
    reach = 2.0 ** (1 - count) < alpha
    low = np.where(degenerate, difference if reach else -1.0, low)
    high = np.where(degenerate, difference if reach else 1.0, high)
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
    return power_multiplier(clusters, alpha, power) * np.sqrt(2.0 * np.asarray(variance_of_one_run, dtype=np.float64))


def power_multiplier(clusters: int, alpha: float = ALPHA, power: float = POWER) -> float:
    """t_{1−α/2, G−1} + t_{power, G−1}: a true difference this many standard errors from 0 is found by the
    two-sided t test at level `alpha` with probability `power` (G ≥ 2 cases)."""
    df = clusters - 1
    return student_t_quantile(1 - alpha / 2, df) + student_t_quantile(power, df)


def pass_hat_k(trials: Sequence[tuple[int, int]], k: int) -> float | None:
    """pass^k of tau-bench: the chance that k draws without replacement from a task's trials all pass, averaged
    over tasks. `trials` holds (passes, attempts) per task; tasks with fewer than k attempts are left out."""
    eligible = [(passes, attempts) for passes, attempts in trials if attempts >= k]
    if not eligible or k < 1:
        return None
    return sum(comb(passes, k) / comb(attempts, k) for passes, attempts in eligible) / len(eligible)


CLUSTERED = "clustered"  # CR1 standard error, t with G − 1 degrees of freedom
SIGN_FLIP_CASES = "sign-flip over cases"  # exact: every case's differences flipped together
SIGN_FLIP_RUNS = "sign-flip over runs"  # exact, each paired run on its own: the cases do not differ at all
WILSON = "wilson"  # a rate's Wilson score interval over its runs
CLUSTERED_OR_WILSON = "clustered or wilson, the wider"  # a rate over few cases: the hull of both intervals


@dataclass(frozen=True)
class Inference:
    """What `edsb compare` prints for one paired difference (or one rate): the estimate, its (1 − alpha)
    interval, the two-sided p-value (None for a rate), how they were made (`method`, one of the names above)
    and, when not by CR1, why (`reason`). `detectable` is the true difference the comparison finds with the
    stated power, from the observed variance (None: no variance to estimate it from, or too few cases for any
    difference to reach p < alpha)."""

    estimate: float
    standard_error: float | None
    low: float
    high: float
    p_value: float | None
    method: str
    reason: str | None
    detectable: float | None = None

    @property
    def excludes_zero(self) -> bool:
        return not self.low <= 0.0 <= self.high


def _flat(sums: Floats, sizes: Floats) -> bool:
    """Every cluster has the same mean (sums are integer counts, so the comparison is exact)."""
    return bool(np.all(sums * sizes[0] == sums[0] * sizes))


def _inverted_sign_flip(thresholds: Floats, chances: Floats, unit: float, alpha: float) -> tuple[float, float, float]:
    """Invert the exact sign-flip test of `H0: the mean difference is δ`: (low, high, p-value at δ = 0).

    Flipping a set S of units (cases, or runs) gives a sum of d − δ at least the observed one exactly when the mean
    of d over S is ≤ δ (at most, when ≥ δ). So with `thresholds` the means of the nonempty sets, `chances` the share
    of the sign patterns behind each and `unit` that of the empty set, the one-sided p-values at δ are unit + the
    chance of a mean ≤ δ (≥ δ), the two-sided one twice the smaller. The interval is every δ the test keeps; both
    read the same sums, so it excludes 0 exactly when p < alpha."""
    order = np.argsort(thresholds, kind="stable")
    values, starts = np.unique(thresholds[order], return_index=True)
    mass = np.add.reduceat(chances[order], starts)
    below = np.cumsum(mass)  # chance of a set mean ≤ values[i]
    above = np.cumsum(mass[::-1])[::-1]  # ≥ values[i]
    everything = 2 * unit >= alpha  # too few units for any sign pattern to be rare enough: every δ is kept
    low = -1.0 if everything else float(values[np.argmax(2 * (unit + below) >= alpha)])
    high = 1.0 if everything else float(values[len(values) - 1 - np.argmax((2 * (unit + above) >= alpha)[::-1])])
    at_most = float(below[values <= 0.0][-1]) if values[0] <= 0.0 else 0.0
    at_least = float(above[values >= 0.0][0]) if values[-1] >= 0.0 else 0.0
    p = min(1.0, float(2 * (unit + at_most)), float(2 * (unit + at_least)))
    return low, high, p


def _case_subset_means(sums: Floats, sizes: Floats) -> Floats:
    """The mean difference over every nonempty set of cases (2^G − 1 of them; G < MIN_CLUSTERS here)."""
    count = len(sums)
    members = ((np.arange(1, 2**count)[:, None] >> np.arange(count)) & 1).astype(np.float64)
    return (members @ sums) / (members @ sizes)


def _run_subset_means(d: Floats) -> tuple[Floats, Floats, float]:
    """The means over every nonempty set of paired runs, grouped: d is −1, 0 or +1, so a set of a, b and c runs of
    each has mean (c − a) / (a + b + c) and a share Bin(n−, ½)(a) · Bin(n0, ½)(b) · Bin(n+, ½)(c) of the sign
    patterns; the shares are gathered on the grid (c − a, a + b + c). Returns the means, their shares and the
    empty set's."""
    minus, zero, plus = (int((d == v).sum()) for v in (-1.0, 0.0, 1.0))
    share_minus, share_zero, share_plus = (
        np.array([comb(n, k) / 2**n for k in range(n + 1)]) for n in (minus, zero, plus)
    )
    signed = np.zeros((minus + plus + 1, minus + plus + 1))  # (c − a + n−, a + c)
    a, c = np.arange(minus + 1)[:, None], np.arange(plus + 1)[None, :]
    np.add.at(signed, (c - a + minus, a + c), np.outer(share_minus, share_plus))
    grid = np.zeros((minus + plus + 1, minus + zero + plus + 1))  # (c − a + n−, a + b + c)
    for b, share in enumerate(share_zero):
        grid[:, b : b + minus + plus + 1] += share * signed
    difference = np.arange(-minus, plus + 1)[:, None]
    size = np.arange(1, grid.shape[1])[None, :]
    means, chances = np.broadcast_to(difference / size, grid[:, 1:].shape).ravel(), grid[:, 1:].ravel()
    possible = chances > 0
    return means[possible], chances[possible], float(grid[minus, 0])


def paired_inference(
    base: ArrayLike, other: ArrayLike, clusters: Sequence[Hashable], alpha: float = ALPHA, power: float = POWER
) -> Inference:
    """The paired difference `other − base` of 0/1 outcomes as `edsb compare` prints it (docs/statistics.md).

    1. With MIN_CLUSTERS cases or more whose mean differences vary: CR1 and t with G − 1 df (`paired_test`).
    2. Otherwise the exact sign-flip test over cases, inverted into an interval, never zero-width unless every
       pair differs by the same amount; when the cases' mean differences are all equal but the pairs vary, the
       runs are flipped one by one instead (the cases show no clustering to respect).
    """
    x, y = np.asarray(base, dtype=np.float64), np.asarray(other, dtype=np.float64)
    d = y - x
    codes, count = cluster_codes(clusters)
    sums = np.bincount(codes, weights=d, minlength=count).astype(np.float64)
    sizes = np.bincount(codes, minlength=count).astype(np.float64)
    flat = _flat(sums, sizes)
    if count >= MIN_CLUSTERS and not flat:
        test = paired_test(x, y, codes, count, alpha)
        se = float(test.standard_error)
        detectable = power_multiplier(count, alpha, power) * se
        return Inference(float(test.difference), se, float(test.low), float(test.high), float(test.p_value),
                         CLUSTERED, None, detectable)  # fmt: skip
    return _sign_flip_inference(d, codes, sums, sizes, alpha, power)


def _sign_flip_inference(
    d: Floats, codes: NDArray[np.intp], sums: Floats, sizes: Floats, alpha: float, power: float
) -> Inference:
    """Step 2 of `paired_inference`: which units are flipped, and why CR1 was not used."""
    count, mean, flat = len(sums), float(d.mean()), _flat(sums, sizes)
    reachable = 2.0 ** (1 - count) < alpha  # can any difference reach p < alpha over these cases?
    method = SIGN_FLIP_CASES
    if flat and reachable and np.unique(d).size > 1:
        low, high, p = _inverted_sign_flip(*_run_subset_means(d), alpha)
        method = SIGN_FLIP_RUNS
    elif flat:  # every subset of cases has the same mean
        low, high, p = _inverted_sign_flip(np.array([mean]), np.array([1 - 0.5**count]), 0.5**count, alpha)
    else:
        means = _case_subset_means(sums, sizes)
        low, high, p = _inverted_sign_flip(means, np.full(means.size, 0.5**count), 0.5**count, alpha)
    if count == 1:
        reason = "one case"
    elif flat:
        reason = "every case has the same mean difference: no variance between cases"
    else:
        reason = f"fewer than {MIN_CLUSTERS} cases"
    se = None if count < 2 else 0.0 if flat else math.sqrt(float(cr1_variance_of_mean(d, codes, count)))
    detectable = power_multiplier(count, alpha, power) * se if se and reachable else None
    return Inference(mean, se, low, high, p, method, reason, detectable)


def rate_inference(values: ArrayLike, clusters: Sequence[Hashable], alpha: float = ALPHA) -> Inference:
    """A rate of 0/1 outcomes with the interval `edsb compare`'s leaderboard prints: case-clustered (CR1, t)
    with MIN_CLUSTERS cases or more; Wilson's over the runs when the clustered one is degenerate (one case, or
    no variance between cases); the wider of the two over fewer cases."""
    x = np.asarray(values, dtype=np.float64)
    codes, count = cluster_codes(clusters)
    wilson = wilson_interval(int(x.sum()), len(x), z=NormalDist().inv_cdf(1 - alpha / 2))
    sums = np.bincount(codes, weights=x, minlength=count).astype(np.float64)
    sizes = np.bincount(codes, minlength=count).astype(np.float64)
    if count < 2 or _flat(sums, sizes):
        reason = "one case" if count < 2 else "every case has the same rate: no variance between cases"
        return Inference(float(x.mean()), None, wilson.low, wilson.high, None, WILSON, reason)
    mean, low, high = mean_interval(x, codes, count, alpha)
    assert low is not None and high is not None  # two cases or more
    se = math.sqrt(float(cr1_variance_of_mean(x, codes, count)))
    if count >= MIN_CLUSTERS:
        return Inference(mean, se, low, high, None, CLUSTERED, None)
    hull = (min(low, wilson.low), max(high, wilson.high))
    return Inference(mean, se, *hull, None, CLUSTERED_OR_WILSON, f"fewer than {MIN_CLUSTERS} cases")
