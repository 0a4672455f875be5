"""`edsb compare`: runs paired on their run key, and the differences a user can trust.

Two runs of the benchmark answer the same cases at the same levels and repeats, so they are compared pair by pair:
the runs that share a run key (variant, case, distraction level, repeat) — never a name inside a run, so a run whose
characters were renamed pairs with the original — give one paired difference each, and the standard error of their
mean is clustered by case (docs/statistics.md). Incomplete runs and keys only one side judged are left out and
counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from edsb.data.perturb import perturbation_label
from edsb.errors import UsageError
from edsb.report.card import settings_note
from edsb.report.formats import paper_order, plural, variant_rank
from edsb.report.stats import ALPHA, paired_inference, rate_inference
from edsb.report.summary import TAG_COLUMNS, to_scored_run
from edsb.results import RunKey, RunResult
from edsb.results.rundir import ReportedConfig, RunDirectory
from edsb.scoring.metrics import TOTAL, cell_text, summarize_cell

METRICS = ("success", "execution")


def _outcome(result: RunResult, metric: str) -> bool:
    """Success: the plan passed. Execution: the run produced a plan without an execution error."""
    return result.passed if metric == "success" else not result.errored


@dataclass(frozen=True)
class Coverage:
    """How the two runs' keys met: pairs made, judged runs left without a judged partner, incomplete runs."""

    pairs: int
    only_base: int  # judged in the base run, absent or incomplete in the other
    only_run: int
    incomplete_base: int
    incomplete_run: int

    @property
    def complete(self) -> bool:
        return not (self.only_base or self.only_run)


@dataclass(frozen=True)
class Pairing:
    """The judged runs two directories share, matched on their run key, in key order (base first in each pair)."""

    pairs: list[tuple[RunResult, RunResult]]
    coverage: Coverage


def pair_results(base: Iterable[RunResult], other: Iterable[RunResult]) -> Pairing:
    """Match two runs strictly on the run key (variant, case, level, repeat). Incomplete runs never pair: they are
    counted in `coverage`, as are judged runs whose key the other side did not judge."""
    base_all = {r.run_key: r for r in base}
    other_all = {r.run_key: r for r in other}
    base_judged = {k: r for k, r in base_all.items() if r.is_judged}
    other_judged = {k: r for k, r in other_all.items() if r.is_judged}
    shared = sorted(base_judged.keys() & other_judged.keys())
    coverage = Coverage(
        pairs=len(shared),
        only_base=len(base_judged.keys() - other_judged.keys()),
        only_run=len(other_judged.keys() - base_judged.keys()),
        incomplete_base=len(base_all) - len(base_judged),
        incomplete_run=len(other_all) - len(other_judged),
    )
    return Pairing([(base_judged[k], other_judged[k]) for k in shared], coverage)


@dataclass(frozen=True)
class Difference:
    """One metric's paired difference `other − base` over a group of pairs. Rates are unrounded. `method` says
    how the interval and p-value were made (report.stats: CR1 with t, or an exact sign-flip test when the
    clustered estimate is degenerate, `reason` says why); `detectable` is the difference this comparison finds
    with 80% power (None: no variance to estimate it from, or too few cases to find any)."""

    metric: str
    pairs: int
    cases: int
    base_rate: float
    run_rate: float
    difference: float
    standard_error: float | None
    low: float | None
    high: float | None
    p_value: float | None
    base_only: int  # discordant pairs: the base run passed (executed), the other did not
    run_only: int  # and the reverse
    method: str = "clustered"
    reason: str | None = None
    detectable: float | None = None


def paired_difference(pairs: Sequence[tuple[RunResult, RunResult]], metric: str, alpha: float = ALPHA) -> Difference:
    """The paired difference of one metric over `pairs`, its standard error clustered by case."""
    base = np.array([_outcome(a, metric) for a, _ in pairs], dtype=np.float64)
    other = np.array([_outcome(b, metric) for _, b in pairs], dtype=np.float64)
    cases = [a.case for a, _ in pairs]
    test = paired_inference(base, other, cases, alpha)
    return Difference(
        metric=metric,
        pairs=len(pairs),
        cases=len(set(cases)),
        base_rate=float(base.mean()),
        run_rate=float(other.mean()),
        difference=test.estimate,
        standard_error=test.standard_error,
        low=test.low,
        high=test.high,
        p_value=test.p_value,
        base_only=int(((base == 1) & (other == 0)).sum()),
        run_only=int(((base == 0) & (other == 1)).sum()),
        method=test.method,
        reason=test.reason,
        detectable=test.detectable,
    )


@dataclass(frozen=True)
class DifferenceRow:
    """The paired differences of one group: a variant, a tag (`Total` or a tag of the case) and a level."""

    variant: str
    tag: str
    level: str
    success: Difference
    execution: Difference


def _groups(results: Iterable[RunResult], by_level: bool) -> dict[tuple[str, str, str], list[int]]:
    """Indices of `results` by (variant, tag, level), in report order: variants in the paper's order, tags as the
    paper's columns, `Total` before the levels."""
    groups: dict[tuple[str, str, str], list[int]] = {}
    indexed = list(enumerate(results))
    variants = paper_order(r.variant for _, r in indexed)
    levels = [TOTAL, *(str(v) for v in sorted({r.distraction for _, r in indexed}))] if by_level else [TOTAL]
    for variant in variants:
        for tag in TAG_COLUMNS:
            for level in levels:
                members = [
                    i
                    for i, r in indexed
                    if r.variant == variant
                    and (tag == TOTAL or tag in r.tags)
                    and (level == TOTAL or str(r.distraction) == level)
                ]
                if members:
                    groups[(variant, tag, level)] = members
    return groups


def difference_rows(pairing: Pairing, by_level: bool = False, alpha: float = ALPHA) -> list[DifferenceRow]:
    """Per variant, tag and (with `by_level`) distraction level: the paired success and execution differences.
    A pair's tags are the base run's."""
    rows = []
    for (variant, tag, level), members in _groups([a for a, _ in pairing.pairs], by_level).items():
        pairs = [pairing.pairs[i] for i in members]
        success, execution = (paired_difference(pairs, metric, alpha) for metric in METRICS)
        rows.append(DifferenceRow(variant, tag, level, success, execution))
    return rows


@dataclass(frozen=True)
class DiscordantCase:
    """A case whose verdicts flip between the two runs: the keys where only the base run passed, and the reverse."""

    variant: str
    case: int
    base_only: list[RunKey]
    run_only: list[RunKey]


def discordant_cases(pairing: Pairing) -> list[DiscordantCase]:
    """Every (variant, case) with at least one pair whose success differs: variants in the paper's order, then
    cases ascending."""
    found: dict[tuple[str, int], DiscordantCase] = {}
    for a, b in pairing.pairs:
        if a.passed == b.passed:
            continue
        entry = found.setdefault((a.variant, a.case), DiscordantCase(a.variant, a.case, [], []))
        (entry.base_only if a.passed else entry.run_only).append(a.run_key)
    return sorted(found.values(), key=lambda entry: (variant_rank(entry.variant), entry.case))


@dataclass(frozen=True)
class Standing:
    """One run's own rates over one group (all its judged runs, paired or not) with case-clustered intervals."""

    run: str
    variant: str
    tag: str
    level: str
    runs: int
    cell: str  # the paper's cell text, `success (execution)`
    success_rate: float  # unrounded
    success_interval: tuple[float, float] | None
    execution_rate: float
    execution_interval: tuple[float, float] | None
    success_interval_method: str = "clustered"  # report.stats: `clustered`, `wilson`, or the wider of the two
    execution_interval_method: str = "clustered"


def standings(name: str, results: Iterable[RunResult], by_level: bool = False, alpha: float = ALPHA) -> list[Standing]:
    """A run's leaderboard entries: per variant, tag and level, its rates over its judged runs."""
    judged = [r for r in results if r.is_judged]
    entries = []
    for (variant, tag, level), members in _groups(judged, by_level).items():
        group = [judged[i] for i in members]
        cases = [r.case for r in group]
        rates = {m: rate_inference([float(_outcome(r, m)) for r in group], cases, alpha) for m in METRICS}
        paper = summarize_cell([to_scored_run(r) for r in group])
        text = cell_text(paper.success_rate, paper.execution_rate)
        success, execution = rates["success"], rates["execution"]
        entries.append(
            Standing(name, variant, tag, level, len(group), text, success.estimate, (success.low, success.high),
                     execution.estimate, (execution.low, execution.high), success.method, execution.method)
        )  # fmt: skip
    return entries


@dataclass(frozen=True)
class ComparedRun:
    """A run directory in a comparison: its display name, where it lives and what it holds."""

    name: str
    path: Path
    model: str
    results: list[RunResult]


@dataclass(frozen=True)
class PairedComparison:
    """One later run against the first: coverage, the difference rows and the cases that flip."""

    run: ComparedRun
    coverage: Coverage
    rows: list[DifferenceRow]
    discordant: list[DiscordantCase]


@dataclass(frozen=True)
class Board:
    """Everything `edsb compare` shows: the runs, their standings and each later run paired with the first."""

    runs: list[ComparedRun]
    standings: list[Standing]
    comparisons: list[PairedComparison]
    by_level: bool
    alpha: float = ALPHA
    notes: list[str] = field(default_factory=list)

    @property
    def base(self) -> ComparedRun:
        return self.runs[0]


def run_names(paths: Sequence[Path]) -> list[str]:
    """Short, distinct names for the compared directories: the directory name, else the path as given, else the
    path with its position (`a a` compares a run with itself)."""
    names = [path.name or str(path) for path in paths]
    if len(set(names)) != len(names):
        names = [str(path) for path in paths]
    if len(set(names)) != len(names):
        names = [f"{name} #{i + 1}" for i, name in enumerate(names)]
    return names


def coverage_note(comparison: PairedComparison, base: str) -> str | None:
    """The warning for runs that do not cover the same keys (None when every judged key found its partner)."""
    c, name = comparison.coverage, comparison.run.name
    parts = []
    if not c.complete:
        parts.append(
            f"{name} vs {base}: {plural(c.pairs, 'run')} paired; left out: {plural(c.only_base, 'judged run')} of"
            f" {base} without a judged partner in {name}, {c.only_run} of {name} without one in {base}"
        )
    if c.incomplete_base or c.incomplete_run:
        parts.append(
            f"{name} vs {base}: incomplete runs never pair: {c.incomplete_base} in {base}, {c.incomplete_run} in {name}"
        )
    return "; ".join(parts) or None


def build_board(paths: Sequence[Path], by_level: bool = False, alpha: float = ALPHA) -> Board:
    """Open the directories and pair every later one with the first. Comparing runs that share no judged key
    at all is a usage error."""
    if len(paths) < 2:
        raise UsageError("compare needs at least two run directories")
    runs = []
    samplers: list[str] = []
    sandboxes: list[str] = []
    notes: list[str] = []
    configs: list[ReportedConfig] = []
    for name, path in zip(run_names(paths), paths, strict=True):
        directory = RunDirectory.open(path)
        notes += directory.notes
        # Runs pair by key, which no renaming touches: a perturbed run pairs with the original cell by cell.
        if label := perturbation_label(directory.config.perturb):
            name = f"{name} ({label})"
        runs.append(ComparedRun(name, Path(path), directory.config.model, directory.results))
        samplers.append(directory.config.sampler)
        sandboxes.append(directory.config.sandbox)
        configs.append(directory.config)
    if len(set(samplers)) > 1 and any("PI" in r.tags for run in runs for r in run.results):
        named = ", ".join(f"{run.name}: {sampler}" for run, sampler in zip(runs, samplers, strict=True))
        notes.append(f"the runs' PI positions come from different samplers ({named}): PI differences are partly theirs")
    if len(set(sandboxes)) > 1:
        named = ", ".join(f"{run.name}: {sandbox}" for run, sandbox in zip(runs, sandboxes, strict=True))
        notes.append(
            f"the runs' code ran in different sandboxes ({named}): the restricted one refuses some code that the "
            "exact one runs, so execution differences are partly theirs"
        )
    if (note := settings_note([run.name for run in runs], configs)) is not None:
        notes.append(note)
    base = runs[0]
    comparisons = []
    for run in runs[1:]:
        pairing = pair_results(base.results, run.results)
        if not pairing.pairs:
            raise UsageError(
                f"{run.name} and {base.name} share no judged run key (variant, case, level, repeat): nothing to pair"
            )
        rows = difference_rows(pairing, by_level, alpha)
        comparisons.append(PairedComparison(run, pairing.coverage, rows, discordant_cases(pairing)))
        if (note := coverage_note(comparisons[-1], base.name)) is not None:
            notes.append(note)
    entries = [entry for run in runs for entry in standings(run.name, run.results, by_level, alpha)]
    return Board(runs, entries, comparisons, by_level, alpha, notes)
