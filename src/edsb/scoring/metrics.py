"""Aggregation of run verdicts into the paper's cells (docs/reference.md#aggregation), with Wilson 95% intervals.

Every run counts under the tag `Total` and each of its tags, crossed with the level `Total` and its own level;
separately under its case id. Means are rounded to 2 decimals the way the reference rounds numpy floats
(half-to-even on the scaled binary value: 1/40 gives 0.02); the execution rate subtracts the already rounded error
mean and is rounded as a Python float (the reference reads that mean back from JSON first).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

TOTAL = "Total"
WILSON_Z = 1.959963984540054  # two-sided 95%


@dataclass(frozen=True, slots=True)
class ScoredRun:
    """One judged run, as the aggregation sees it. Errored runs carry 0 tokens, as the reference records them."""

    case_id: int
    tags: tuple[str, ...]
    level: int
    passed: bool
    errored: bool
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Interval:
    low: float
    high: float


@dataclass(frozen=True, slots=True)
class Cell:
    runs: int
    passes: int
    errors: int
    success_rate: float  # mean of `passed`, rounded to 2 decimals
    error_rate: float  # mean of the error flag, rounded to 2 decimals
    execution_rate: float  # round(1 - error_rate, 2)
    prompt_tokens: float  # mean, rounded to 2 decimals
    completion_tokens: float
    success_interval: Interval  # Wilson 95%, unrounded
    execution_interval: Interval


def cell_text(success_rate: float, execution_rate: float) -> str:
    """The paper's cell text, `success (execution)`, e.g. `0.9 (0.98)`."""
    return f"{success_rate} ({execution_rate})"


def round2(value: float) -> float:
    """Round like `round(numpy.float64, 2)`: the reference rounds numpy means, not Python floats."""
    return float(np.round(np.float64(value), 2))


def wilson_interval(successes: int, trials: int, z: float = WILSON_Z) -> Interval:
    """Wilson score interval for a binomial proportion; (0, 1) when there are no trials."""
    if trials <= 0:
        return Interval(0.0, 1.0)
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half_width = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    low = 0.0 if successes <= 0 else max(0.0, centre - half_width)
    high = 1.0 if successes >= trials else min(1.0, centre + half_width)
    return Interval(low, high)


def _mean(values: Sequence[float]) -> float:
    return round2(float(np.mean(np.asarray(values, dtype=np.float64))))


def summarize_cell(records: Sequence[ScoredRun]) -> Cell:
    """One cell over a non-empty group of runs."""
    if not records:
        raise ValueError("a cell needs at least one run")
    runs = len(records)
    passes = sum(record.passed for record in records)
    errors = sum(record.errored for record in records)
    error_rate = _mean([record.errored for record in records])
    return Cell(
        runs=runs,
        passes=passes,
        errors=errors,
        success_rate=_mean([record.passed for record in records]),
        error_rate=error_rate,
        execution_rate=round(1 - error_rate, 2),
        prompt_tokens=_mean([record.prompt_tokens for record in records]),
        completion_tokens=_mean([record.completion_tokens for record in records]),
        success_interval=wilson_interval(passes, runs),
        execution_interval=wilson_interval(runs - errors, runs),
    )


def tag_level_cells(records: Iterable[ScoredRun]) -> dict[str, dict[str, Cell]]:
    """Cells keyed `[tag][level]`, tags `Total` first then in order of appearance, levels as strings: `Total` then
    the levels in ascending order (as the tables print them), whatever order the runs finished in."""
    groups: dict[str, dict[str, list[ScoredRun]]] = {}
    for record in records:
        for tag in (TOTAL, *record.tags):
            for level in (TOTAL, str(record.level)):
                groups.setdefault(tag, {}).setdefault(level, []).append(record)
    return {
        tag: {level: summarize_cell(by_level[level]) for level in sorted(by_level, key=_level_order)}
        for tag, by_level in groups.items()
    }


def _level_order(level: str) -> tuple[bool, int]:
    """`Total` first, then the levels as numbers (so 10 would follow 2)."""
    return (level != TOTAL, int(level) if level != TOTAL else 0)


def overall_cell(records: Iterable[ScoredRun]) -> Cell:
    """The paper's "overall" figure: tag Total, level Total."""
    return summarize_cell(list(records))
