"""Statistics beyond the paper's point estimates: case-clustered standard errors and pass^k over repeats."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from math import comb


def clustered_standard_error(values: Sequence[float], clusters: Sequence[Hashable]) -> float | None:
    """Standard error of a mean when observations within a cluster (a case) are correlated.

    Cluster-robust (CR1) variance: C/(C-1) * sum over clusters of (sum of residuals)^2 / n^2. With one cluster the
    quantity is undefined and None is returned.
    """
    n = len(values)
    if n == 0 or n != len(clusters):
        return None
    mean = sum(values) / n
    sums: dict[Hashable, float] = {}
    for value, cluster in zip(values, clusters, strict=True):
        sums[cluster] = sums.get(cluster, 0.0) + (value - mean)
    count = len(sums)
    if count < 2:
        return None
    variance = count / (count - 1) * sum(total * total for total in sums.values()) / (n * n)
    return math.sqrt(variance)


def pass_hat_k(trials: Sequence[tuple[int, int]], k: int) -> float | None:
    """pass^k of tau-bench: the chance that k draws without replacement from a task's trials all pass, averaged
    over tasks. `trials` holds (passes, attempts) per task; tasks with fewer than k attempts are left out."""
    eligible = [(passes, attempts) for passes, attempts in trials if attempts >= k]
    if not eligible or k < 1:
        return None
    return sum(comb(passes, k) / comb(attempts, k) for passes, attempts in eligible) / len(eligible)
