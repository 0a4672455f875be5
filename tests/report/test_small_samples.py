"""Intervals that never contradict their own test: `edsb compare` over few cases, or cases that do not vary.

Property-style: thousands of small synthetic comparisons (seeded), each checked against the rules
docs/statistics.md states: the interval excludes 0 exactly when p < alpha, it holds the estimate, it lies in
[−1, 1], and it has zero width only when every pair differs by the same amount.
"""

from __future__ import annotations

import numpy as np
import pytest

from edsb.report.stats import (
    CLUSTERED,
    MIN_CLUSTERS,
    SIGN_FLIP_CASES,
    SIGN_FLIP_RUNS,
    WILSON,
    paired_inference,
    rate_inference,
)
from edsb.scoring.metrics import wilson_interval


def _comparison(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Two runs of a small random design: 1–14 cases of 1–4 pairs, pass rates drawn per run and per case (some
    runs pass or fail everything, some copy the other run), so degenerate designs come up often."""
    cases = int(rng.integers(1, 15))
    sizes = rng.integers(1, 5, cases)
    clusters = list(np.repeat(np.arange(cases), sizes))
    n = len(clusters)
    rates = rng.choice([0.0, 1.0, 0.5, rng.random()], size=2)
    case_shift = rng.normal(0, 1.5, cases)[np.asarray(clusters)] * rng.integers(0, 2)
    base = (rng.random(n) < 1 / (1 + np.exp(-(rates[0] * 4 - 2 + case_shift)))).astype(float)
    other = (rng.random(n) < 1 / (1 + np.exp(-(rates[1] * 4 - 2 + case_shift)))).astype(float)
    if rng.random() < 0.15:
        other = base.copy()
    if rng.random() < 0.1:
        base, other = np.zeros(n), np.ones(n)
    return base, other, clusters


@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.2])
def test_the_interval_excludes_zero_exactly_when_the_test_rejects(alpha: float) -> None:
    rng = np.random.default_rng(2026_12_06)
    methods: set[str] = set()
    for _ in range(1500):
        base, other, clusters = _comparison(rng)
        d = paired_inference(base, other, clusters, alpha)
        methods.add(d.method)
        assert d.p_value is not None and 0.0 < d.p_value <= 1.0
        assert d.excludes_zero == (d.p_value < alpha), (d, base, other, clusters)
        assert -1.0 <= d.low <= d.estimate <= d.high <= 1.0, d
        if d.low == d.high:  # only when every pair says the same, and enough cases say it
            assert np.unique(other - base).size == 1 and d.method == SIGN_FLIP_CASES, d
        if d.method == CLUSTERED:
            assert len(set(clusters)) >= MIN_CLUSTERS and d.reason is None
        else:
            assert d.reason is not None
    assert methods == {CLUSTERED, SIGN_FLIP_CASES, SIGN_FLIP_RUNS}  # every branch was exercised


def test_a_rate_interval_is_never_zero_width_and_falls_back_to_wilson() -> None:
    rng = np.random.default_rng(7)
    for _ in range(500):
        base, _, clusters = _comparison(rng)
        rate = rate_inference(base, clusters)
        assert 0.0 <= rate.low <= rate.estimate <= rate.high <= 1.0 and rate.low < rate.high, rate
        wilson = wilson_interval(int(base.sum()), len(base))
        if rate.method != CLUSTERED:  # Wilson's interval, or the wider of the two: never narrower than Wilson's
            assert rate.low <= wilson.low + 1e-12 and rate.high >= wilson.high - 1e-12


def test_a_four_run_smoke_gets_wilson_and_an_interval_that_agrees_with_its_p() -> None:
    """Two cases of two runs: the base failed all four, the other passed all four."""
    clusters = [0, 0, 1, 1]
    rate = rate_inference(np.zeros(4), clusters)
    assert rate.method == WILSON and (rate.low, round(rate.high, 2)) == (0.0, 0.49)  # what `edsb report` says
    d = paired_inference(np.zeros(4), np.ones(4), clusters)
    assert d.p_value == 0.5 and (d.low, d.high) == (-1.0, 1.0)  # two cases cannot exclude anything
    assert d.reason == "every case has the same mean difference: no variance between cases"
    assert d.detectable is None  # no difference at all can reach p < 0.05 with two cases


def test_the_exact_interval_by_hand() -> None:
    """Seven cases, one pair each: six pairs +1, one 0. Of the 127 nonempty sets of cases, only the set holding
    the 0 alone has mean ≤ 0: p = 2 · (1 + 1) / 128 = 1/32. The lower bound is the 3rd smallest set mean
    (⌈0.025 · 128⌉ − 1 = 3 sets must lie at or below it): after the 0 come the six sets of the 0 and one +1,
    mean 1/2."""
    base = np.zeros(7)
    other = np.array([1, 1, 1, 1, 1, 1, 0], dtype=float)
    d = paired_inference(base, other, list(range(7)))
    assert d.method == SIGN_FLIP_CASES and d.p_value == pytest.approx(1 / 32)
    assert (d.low, d.high) == (0.5, 1.0) and d.excludes_zero


def test_cases_with_equal_means_but_varying_pairs_flip_runs() -> None:
    """Eight cases, each with one pair +1 and one pair 0: every case's mean is 1/2 and the clustered variance is
    0, but the pairs vary, so the runs are flipped one by one (sign test over the 8 discordant pairs)."""
    clusters = list(np.repeat(np.arange(8), 2))
    d = paired_inference(np.zeros(16), np.tile([1.0, 0.0], 8), clusters)
    assert d.method == SIGN_FLIP_RUNS and d.p_value == pytest.approx(2 * 0.5**8)
    assert 0.0 < d.low < 0.5 < d.high < 1.0
    # Table 1's size, every case +1 five times, −1 five times and 0 five times: 600 runs flipped, symmetric.
    pattern = np.array([1.0] * 5 + [-1.0] * 5 + [0.0] * 5)
    base, other = np.tile(pattern < 0, 40).astype(float), np.tile(pattern > 0, 40).astype(float)
    wide = paired_inference(base, other, list(np.repeat(np.arange(40), 15)))
    assert wide.method == SIGN_FLIP_RUNS and wide.p_value == 1.0 and wide.detectable is None
    assert wide.low == pytest.approx(-wide.high) and 0.0 < wide.high < 0.1
