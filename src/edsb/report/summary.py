"""From the results of a run directory to `summary.json` and the paper-style tables."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from edsb.data.perturb import perturbation_label
from edsb.report.card import results_document, write_results_document
from edsb.report.formats import paper_order
from edsb.report.stats import (
    ALPHA,
    POWER,
    REPEATS_PROJECTED,
    cluster_codes,
    clustered_standard_error,
    design_variance,
    minimum_detectable_difference,
    pass_hat_k,
)
from edsb.report.summary_types import (
    CaseCounts,
    CellResult,
    ModuleTokens,
    Power,
    RunSummary,
    SamplerCell,
    SummaryConfig,
    Tokens,
    VariantSummary,
)
from edsb.results import RunResult, RunStatus
from edsb.results.rundir import SUMMARY_FILE, read_reported_config, write_json
from edsb.scoring.metrics import TOTAL, Cell, ScoredRun, cell_text, overall_cell, tag_level_cells

TAG_COLUMNS = (TOTAL, "OA", "RC", "SS", "PI")
LEVEL_ROWS = (TOTAL, "0", "1", "2")
MODULES = ("narrator", "event_parser")
FAILURE_REASONS_SHOWN = 10  # reasons kept per variant (failed plans, execution errors), most frequent first
REASON_CHARS = 300  # a reason longer than this is cut, saying how much was left out


def reason_text(text: str) -> str:
    """A reason as one bounded line, for grouping and counting: whitespace collapsed, and cut after
    `REASON_CHARS` characters with the number left out (the full text stays in results.jsonl)."""
    line = " ".join(text.split())
    if len(line) <= REASON_CHARS:
        return line
    return f"{line[:REASON_CHARS]} [+{len(line) - REASON_CHARS} characters]"


def top_reasons(reasons: Iterable[str]) -> tuple[dict[str, int], int]:
    """The most frequent reasons (at most `FAILURE_REASONS_SHOWN`) with their run counts, and the number of runs
    whose reason is not among them."""
    counts = Counter(reason_text(reason) for reason in reasons)
    shown = dict(counts.most_common(FAILURE_REASONS_SHOWN))
    return shown, sum(counts.values()) - sum(shown.values())


def to_scored_run(result: RunResult) -> ScoredRun:
    # The reference stores 0 tokens for errored runs; its token table is reproduced with that convention.
    return ScoredRun(
        case_id=result.case,
        tags=tuple(result.tags),
        level=result.distraction,
        passed=result.passed,
        errored=result.errored,
        prompt_tokens=0 if result.errored else result.prompt_tokens,
        completion_tokens=0 if result.errored else result.completion_tokens,
    )


def cell_json(cell: Cell) -> CellResult:
    """A cell as the summary keeps it: intervals rounded to four decimals."""
    data = asdict(cell)
    data["success_interval"] = (round(cell.success_interval.low, 4), round(cell.success_interval.high, 4))
    data["execution_interval"] = (round(cell.execution_interval.low, 4), round(cell.execution_interval.high, 4))
    return CellResult(**data)


def pi_sampler_cells(counted: list[RunResult]) -> dict[str, SamplerCell]:
    """Per distraction level (and `Total`) of the judged PI runs: the sampler(s) that placed their positions
    (`-` when none got that far), runs, failures, execution errors (a run that erred is no failure, and the row
    says so), and the failures that are sampler misses (the optimal sampler would have passed them). Empty when
    no PI run sampled a position."""
    pi = [r for r in counted if "PI" in r.tags]
    if not any(r.sampler_method is not None for r in pi):
        return {}
    cells: dict[str, SamplerCell] = {}
    for level in [TOTAL, *sorted({str(r.distraction) for r in pi}, key=int)]:
        runs = [r for r in pi if level == TOTAL or str(r.distraction) == level]
        methods = sorted({str(r.sampler_method) for r in runs if r.sampler_method is not None})
        cells[level] = SamplerCell(
            sampler="/".join(methods) or "-",
            runs=len(runs),
            failures=sum(r.status is RunStatus.FAILED for r in runs),
            errors=sum(r.errored for r in runs),
            sampler_misses=sum(bool(r.sampler_miss) for r in runs),
        )
    return cells


def _rounded(value: float) -> float | None:
    return None if not np.isfinite(value) else round(float(value), 4)


def power_summary(records: list[ScoredRun]) -> dict[str, Any]:
    """The power of a paired comparison of success against another run of this design (docs/statistics.md): the
    minimum detectable difference at 80% power and α = 0.05, with the clustering this run observed, as designed and
    with 1, 3, 5 or 10 repeats per case and level (projected only when some cell has two repeats). None where the
    run shows no variation to estimate it from."""
    values = np.array([float(r.passed) for r in records])
    case_codes, cases = cluster_codes([r.case_id for r in records])
    cell_codes, cells = cluster_codes([(r.case_id, r.level) for r in records])
    design = design_variance(values, case_codes, cases, cell_codes, cells)
    n, rate = len(values), float(values.mean())
    variance = float(design.variance)
    observed = np.isfinite(variance) and variance > 0
    binomial = rate * (1 - rate) / n
    design_effect = variance / binomial if observed and binomial > 0 else float("nan")
    size = n / cases
    icc = (design_effect - 1) / (size - 1) if size > 1 else float("nan")

    def mdd(v: float) -> float | None:
        return _rounded(float(minimum_detectable_difference(v, cases))) if observed else None

    return {
        "alpha": ALPHA,
        "power": POWER,
        "note": _power_note(values, cases, observed, int(np.bincount(cell_codes).max())),
        "cases": cases,
        "cells": cells,
        "repeats": int(np.bincount(cell_codes).max()),
        "runs": n,
        "design_effect": _rounded(design_effect),
        "intra_case_correlation": _rounded(icc),
        "minimum_detectable_difference": mdd(variance),
        "by_repeats": {str(r): mdd(float(design.at_repeats(r))) for r in REPEATS_PROJECTED},
    }


def _power_note(values: np.ndarray, cases: int, observed: bool, repeats: int) -> str | None:
    """Why the power figures are missing (None when none is): the reader of a row of `-` learns what to change."""
    if not observed:
        if cases < 2:
            return "one case only: the clustered variance needs runs of two or more cases"
        if values.min() == values.max():
            every = "passed" if values[0] else "failed"
            return f"every run {every}: no variation in success to estimate the variance from"
        return "success does not vary between cases: no between-case variance to estimate from"
    if repeats < 2:
        return "the projections need a case × level cell run at least twice (--repeats 2 or more)"
    return None


def _incomplete(records: list[RunResult]) -> dict[str, Any]:
    """What the runs without a verdict said: their kinds, and their most frequent reasons when there are any."""
    waiting = [r for r in records if not r.is_judged]
    fields: dict[str, Any] = {"incomplete_kinds": dict(Counter(str(r.error_kind or "unknown") for r in waiting))}
    reasons, other = top_reasons(r.error or str(r.error_kind or "unknown") for r in waiting)
    if reasons:
        fields.update(incomplete_reasons=reasons, incomplete_reasons_other_runs=other)
    return fields


def _rates(metric_records: list[ScoredRun]) -> dict[str, Any]:
    """The overall rates with their Wilson intervals, case-clustered standard errors, every cell and pass^k."""
    overall = cell_json(overall_cell(metric_records))
    cells = tag_level_cells(metric_records)
    clusters = [r.case_id for r in metric_records]
    by_task: dict[tuple[int, int], list[bool]] = defaultdict(list)
    for r in metric_records:
        by_task[(r.case_id, r.level)].append(r.passed)
    max_repeats = max(len(v) for v in by_task.values())
    passes = [(sum(v), len(v)) for v in by_task.values()]
    return {
        "success_rate": overall.success_rate,
        "execution_rate": overall.execution_rate,
        "success_interval": overall.success_interval,
        "execution_interval": overall.execution_interval,
        "success_se_clustered": clustered_standard_error([float(r.passed) for r in metric_records], clusters),
        "execution_se_clustered": clustered_standard_error([float(not r.errored) for r in metric_records], clusters),
        "by_tag": {tag: cell_json(levels[TOTAL]) for tag, levels in cells.items() if tag != TOTAL},
        "by_distraction": {level: cell_json(cell) for level, cell in cells[TOTAL].items() if level != TOTAL},
        "cells": {tag: {level: cell_json(cell) for level, cell in levels.items()} for tag, levels in cells.items()},
        "pass_hat_k": {str(k): pass_hat_k(passes, k) for k in range(1, max_repeats + 1)},
    }


def _by_case(metric_records: list[ScoredRun]) -> dict[str, CaseCounts]:
    by_case: dict[str, CaseCounts] = {}
    for r in sorted(metric_records, key=lambda m: m.case_id):
        entry = by_case.setdefault(str(r.case_id), CaseCounts(runs=0, passes=0, errors=0))
        entry.runs += 1
        entry.passes += r.passed
        entry.errors += r.errored
    return by_case


def _reasons(counted: list[RunResult]) -> dict[str, Any]:
    """Execution errors by kind and what they said (`<kind>: <message>`), and the judge's explanation of each
    failed plan (character and condition): most frequent first, with the runs left out."""
    errored = [r for r in counted if r.errored]
    error_reasons, errors_other = top_reasons(r.error or str(r.error_kind or "error") for r in errored)
    failure_reasons, failures_other = top_reasons(
        r.reason for r in counted if r.status is RunStatus.FAILED and r.reason
    )
    return {
        "error_kinds": dict(Counter(str(r.error_kind or "error") for r in errored)),
        "error_reasons": error_reasons,
        "error_reasons_other_runs": errors_other,
        "failure_reasons": failure_reasons,
        "failure_reasons_other_runs": failures_other,
    }


def _tokens(records: list[RunResult], counted: list[RunResult]) -> Tokens:
    """Every token used, by module. The paper's per-run means (the Total cell) count an errored run as 0 tokens;
    the means here count what every judged run used, errored ones included."""
    by_module = {
        module: ModuleTokens(
            prompt=sum(r.tokens.get(module, {}).get("prompt", 0) for r in records),
            completion=sum(r.tokens.get(module, {}).get("completion", 0) for r in records),
            cached=sum(r.tokens.get(module, {}).get("cached", 0) for r in records),
            cache_write=sum(r.tokens.get(module, {}).get("cache_write", 0) for r in records),
        )
        for module in MODULES
    }
    billed = [r.billed_usd for r in records if r.billed_usd is not None]
    return Tokens(
        total_prompt=sum(r.prompt_tokens for r in records),
        total_completion=sum(r.completion_tokens for r in records),
        by_module=by_module,
        mean_prompt_every_run=round(sum(r.prompt_tokens for r in counted) / len(counted), 2),
        mean_completion_every_run=round(sum(r.completion_tokens for r in counted) / len(counted), 2),
        billed_usd=round(sum(billed), 6) if billed else None,
    )


def variant_summary(records: list[RunResult]) -> VariantSummary:
    """Everything reported for one variant. Rates exclude incomplete runs, which are counted separately."""
    counted = [r for r in records if r.is_judged]
    incomplete = _incomplete(records)
    if not counted:
        return VariantSummary(runs=0, incomplete=len(records), **incomplete)
    metric_records = [to_scored_run(r) for r in counted]
    return VariantSummary(
        runs=len(counted),
        incomplete=len(records) - len(counted),
        **incomplete,
        **_rates(metric_records),
        by_case=_by_case(metric_records),
        power=Power(**power_summary(metric_records)),
        **_reasons(counted),
        pi_sampler=pi_sampler_cells(counted),  # PI failures the reference annealer caused (success stays its)
        tokens=_tokens(records, counted),
    )


def build_summary(results: Iterable[RunResult]) -> RunSummary:
    """Every variant's summary, variants in the paper's order whatever order they were asked for in."""
    grouped: dict[str, list[RunResult]] = defaultdict(list)
    for result in results:
        grouped[result.variant].append(result)
    return RunSummary(variants={variant: variant_summary(grouped[variant]) for variant in paper_order(grouped)})


def label_perturbation(summary: RunSummary, perturb: int) -> RunSummary:
    """Mark the summary of a perturbed run (`"perturbation": "perturbed (seed 3)"`); every format shows it."""
    label = perturbation_label(perturb)
    if label:
        summary.perturbation = label
    return summary


def write_summary(run_dir: Path, results: list[RunResult], *, runs_planned: int) -> RunSummary:
    """Compute the summary of everything a run directory holds and write it to `summary.json`, and the results
    document with its run card to `results.json` (the model and seeds come from the directory's config.json)."""
    config = read_reported_config(run_dir)
    summary = label_perturbation(build_summary(results), config.perturb)
    document = results_document(run_dir, config, results, summary, planned=runs_planned)
    summary.config = SummaryConfig(
        model=config.model, runs_planned=runs_planned, **({"perturb": config.perturb} if config.perturb else {})
    )
    write_json(Path(run_dir) / SUMMARY_FILE, summary.to_json())
    write_results_document(run_dir, document)
    return summary


def paper_rows(summary: RunSummary, level: str = TOTAL, intervals: bool = False) -> list[list[str]]:
    """Rows `variant, Total, OA, RC, SS, PI` of one level block, cells `success (execution)` or `-`."""
    rows = []
    for variant, data in summary.variants.items():
        row = [variant]
        for tag in TAG_COLUMNS:
            cell = data.cells.get(tag, {}).get(level)
            if cell is None:
                row.append("-")
                continue
            text = cell_text(cell.success_rate, cell.execution_rate)
            if intervals:
                low, high = cell.success_interval
                text += f" [{low:.2f}, {high:.2f}]"
            row.append(text)
        rows.append(row)
    return rows
