"""`edsb plan-power`: how many cases and repeats a paired comparison needs to detect a given difference in success,
planned from a pilot run (docs/statistics.md).

The variance of a mean paired difference over G cases of L levels with R repeats per cell splits into what repeats
average out and what they do not: V(G, R) = (b + w / (L·R)) / G, with b the variance of one case's mean that no
repeat removes (its difficulty for one model and not the other) and w the repeat-to-repeat variance of one outcome.
Both are fitted on the pilot (report.stats.design_variance). A pilot of two runs pairs them and measures the
variance of their difference, correlation included; a pilot of one run can only bound it, as two independent runs
(twice its own variance), the bound `edsb report` states.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict

from edsb.errors import UsageError
from edsb.report.compare.paired import pair_results
from edsb.report.formats import paper_order, plural
from edsb.report.stats import ALPHA, POWER, cluster_codes, design_variance, power_multiplier
from edsb.report.tables import Block
from edsb.results import RunResult
from edsb.results.rundir import RunDirectory

BENCHMARK_CASES = 40  # the benchmark's test cases (docs/data.md): beyond them, only repeats add data
PLAN_REPEATS = (1, 2, 3, 5, 10)  # the repeat counts a plan is given for
MOST_CASES = 1_000_000  # a plan needing more cases than this is reported as out of reach


@dataclass(frozen=True)
class PowerModel:
    """The variance of a mean paired difference at any design: (between + within / (levels·R)) · factor / G."""

    between: float  # per case, not averaged out by repeats
    within: float | None  # per outcome, repeat to repeat (None: the pilot never ran a cell twice)
    levels: float  # case × level cells per case
    factor: float  # 1 for a paired pilot, 2 for one run standing for two independent ones (a bound)

    def variance(self, cases: int, repeats: int) -> float:
        noise = 0.0 if self.within is None else self.within / (self.levels * repeats)
        return self.factor * (self.between + noise) / cases

    def detectable(self, cases: int, repeats: int, alpha: float = ALPHA, power: float = POWER) -> float:
        """The true difference found with probability `power` at two-sided level `alpha` (paired t, G − 1 df)."""
        return power_multiplier(cases, alpha, power) * math.sqrt(self.variance(cases, repeats))

    def cases_needed(self, difference: float, repeats: int, alpha: float = ALPHA, power: float = POWER) -> int | None:
        """The fewest cases (at least 2) that detect `difference`, by bisection (None beyond MOST_CASES)."""
        if self.detectable(MOST_CASES, repeats, alpha, power) > difference:
            return None
        low, high = 1, MOST_CASES  # detectable(high) ≤ difference < detectable(low), taking detectable(1) = ∞
        while high - low > 1:
            middle = (low + high) // 2
            if self.detectable(middle, repeats, alpha, power) <= difference:
                high = middle
            else:
                low = middle
        return high


def fit_power_model(values: Sequence[float], cases: Sequence[int], levels: Sequence[int], paired: bool) -> PowerModel:
    """Fit the model on one pilot's outcomes (or paired differences), one per run: the case-clustered variance of
    their mean split into between-case and repeat-to-repeat parts (report.stats.design_variance)."""
    x = np.asarray(values, dtype=np.float64)
    case_codes, case_count = cluster_codes(list(cases))
    cell_codes, cell_count = cluster_codes(list(zip(cases, levels, strict=True)))
    design = design_variance(x, case_codes, case_count, cell_codes, cell_count)
    within = float(design.within)
    known = math.isfinite(within)
    between = float(design.between) if known else float(design.variance)  # unknown split: all of it stays
    return PowerModel(
        between=between * case_count,
        within=within if known else None,
        levels=cell_count / case_count,
        factor=1.0 if paired else 2.0,
    )


class PlanRow(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    repeats: int
    cases_needed: int | None  # None: out of reach at any number of cases
    detectable_at_benchmark: float  # the difference found at BENCHMARK_CASES cases with this many repeats


class VariantPlan(BaseModel):
    """The plan of one variant: the pilot it came from and, per repeat count, the cases needed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    variant: str
    pilot_cases: int
    pilot_repeats: int
    paired: bool  # False: one pilot run, so the figures are an upper bound
    note: str | None  # why there is no plan, or why repeats could not be projected
    rows: list[PlanRow]
    doubling_cut: float | None  # the fraction by which doubling the cases cuts the detectable difference


class PowerPlan(BaseModel):
    """Everything `edsb plan-power` prints (its JSON is this model)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    difference: float
    alpha: float
    power: float
    benchmark_cases: int
    variants: list[VariantPlan]


def _pilot_values(paths: Sequence[Path]) -> tuple[list[RunResult], list[float], bool]:
    """The pilot's judged runs and one value each: its success, or with two directories the paired difference."""
    runs = [RunDirectory.open(path).results for path in paths]
    if len(runs) == 1:
        judged = [r for r in runs[0] if r.is_judged]
        return judged, [float(r.passed) for r in judged], False
    pairing = pair_results(runs[0], runs[1])
    if not pairing.pairs:
        raise UsageError("the two pilot runs share no judged run key (variant, case, level, repeat): nothing to pair")
    return [a for a, _ in pairing.pairs], [float(b.passed) - float(a.passed) for a, b in pairing.pairs], True


def plan_variant(
    variant: str, results: list[RunResult], values: list[float], paired: bool, difference: float, power: float
) -> VariantPlan:
    """The plan for one variant of the pilot (no rows when its outcomes never vary)."""
    repeats = max(np.unique([(r.case, r.distraction) for r in results], axis=0, return_counts=True)[1])
    cases = len({r.case for r in results})
    pilot = partial(VariantPlan, variant=variant, pilot_cases=cases, pilot_repeats=int(repeats), paired=paired)
    if cases < 2 or np.ptp(values) == 0:
        why = "one case" if cases < 2 else "the pilot's outcomes never vary"
        return pilot(note=f"{why}: nothing to estimate the variance from", rows=[], doubling_cut=None)
    model = fit_power_model(values, [r.case for r in results], [r.distraction for r in results], paired)
    projected = PLAN_REPEATS if model.within is not None else (int(repeats),)
    rows = [
        PlanRow(
            repeats=r,
            cases_needed=model.cases_needed(difference, r, ALPHA, power),
            detectable_at_benchmark=round(model.detectable(BENCHMARK_CASES, r, ALPHA, power), 4),
        )
        for r in projected
    ]
    half = BENCHMARK_CASES // 2
    cut = 1 - model.detectable(BENCHMARK_CASES, projected[-1]) / model.detectable(half, projected[-1])
    note = None if model.within is not None else "the pilot ran each cell once: repeats cannot be projected"
    return pilot(note=note, rows=rows, doubling_cut=round(cut, 4))


def plan_power(paths: Sequence[Path], difference: float, power: float = POWER) -> PowerPlan:
    """Plan every variant of a pilot of one or two run directories for a paired comparison at `difference`."""
    if not 0 < difference <= 1:
        raise UsageError(f"--difference must be in (0, 1], a difference in success rate; got {difference}")
    if not 0.5 <= power < 1:
        raise UsageError(f"--power must be in [0.5, 1), the chance of detecting the difference; got {power}")
    if len(paths) not in (1, 2):
        raise UsageError("plan-power takes one pilot run directory, or two to pair")
    results, values, paired = _pilot_values(paths)
    plans = []
    for variant in paper_order(r.variant for r in results):
        members = [i for i, r in enumerate(results) if r.variant == variant]
        chosen = [results[i] for i in members]
        plans.append(plan_variant(variant, chosen, [values[i] for i in members], paired, difference, power))
    return PowerPlan(difference=difference, alpha=ALPHA, power=power, benchmark_cases=BENCHMARK_CASES, variants=plans)


def plan_blocks(plan: PowerPlan) -> list[Block]:
    """The plan as tables: a block per variant, a row per repeat count."""
    blocks = []
    for v in plan.variants:
        title = (
            f"{v.variant}: cases needed to detect a difference of {plan.difference:g} in success"
            f" ({plan.power:.0%} power, α = {plan.alpha:g})"
        )
        rows = [
            [str(row.repeats), "out of reach" if row.cases_needed is None else str(row.cases_needed),
             f"{row.detectable_at_benchmark:.3f}"]
            for row in v.rows
        ] or [["-", "-", "-"]]  # fmt: skip
        header = ["repeats", "cases needed", f"detectable with {plan.benchmark_cases} cases"]
        blocks.append(Block(title, header, rows, plan_notes(plan, v)))
    return blocks


def plan_notes(plan: PowerPlan, v: VariantPlan) -> list[str]:
    """What a variant's plan rests on and what it means for the benchmark's 40 cases."""
    source = (
        f"from the paired pilot: {plural(v.pilot_cases, 'case')}, up to {plural(v.pilot_repeats, 'repeat')} per cell,"
        " the correlation between the two runs included"
        if v.paired
        else f"from one pilot run ({plural(v.pilot_cases, 'case')}, up to {plural(v.pilot_repeats, 'repeat')} per"
        " cell) standing for two independent runs: an upper bound; pair two pilot runs for the figure with their"
        " correlation"
    )
    notes = [source]
    if v.note:
        notes.append(v.note)
    if v.rows:
        notes.append(_benchmark_note(plan, v))
    return notes


def _benchmark_note(plan: PowerPlan, v: VariantPlan) -> str:
    """The benchmark has BENCHMARK_CASES cases: whether the difference fits in them, and what more data buys."""
    fits = [row.repeats for row in v.rows if row.cases_needed is not None and row.cases_needed <= plan.benchmark_cases]
    reach = (
        f"with {plural(fits[0], 'repeat')} per cell, the benchmark's {plan.benchmark_cases} cases suffice"
        if fits
        else f"more cases than the benchmark's {plan.benchmark_cases} are needed at any number of repeats"
    )
    by_repeats = {row.repeats: row.detectable_at_benchmark for row in v.rows}
    text = f"{reach}; beyond {plan.benchmark_cases} cases only repeats add data"
    if 3 in by_repeats and 10 in by_repeats:
        gain = 1 - by_repeats[10] / by_repeats[3]
        text += f", and they help little after about three (3 to 10 repeats: {gain:.0%} smaller)"
    if v.doubling_cut is not None:
        text += f"; each doubling of the cases cuts the detectable difference by about {v.doubling_cut:.0%}"
    return text
