"""From the results of a run directory to `summary.json` and the paper-style tables."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from edsb.data.perturb import perturbation_label
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
from edsb.results import RunResult, RunStatus
from edsb.results.rundir import SUMMARY_FILE, write_json
from edsb.scoring.metrics import TOTAL, Cell, ScoredRun, cell_text, overall_cell, tag_level_cells

TAG_COLUMNS = (TOTAL, "OA", "RC", "SS", "PI")
LEVEL_ROWS = (TOTAL, "0", "1", "2")
MODULES = ("narrator", "event_parser")
FAILURE_REASONS_SHOWN = 10


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


def cell_json(cell: Cell) -> dict[str, Any]:
    data = asdict(cell)
    data["success_interval"] = [round(cell.success_interval.low, 4), round(cell.success_interval.high, 4)]
    data["execution_interval"] = [round(cell.execution_interval.low, 4), round(cell.execution_interval.high, 4)]
    return data


def pi_sampler_cells(counted: list[RunResult]) -> dict[str, dict[str, Any]]:
    """Per distraction level (and `Total`) of the PI runs whose positions were sampled: the sampler(s), runs,
    failures, and the failures that are sampler misses (the optimal sampler would have passed them)."""
    sampled = [r for r in counted if "PI" in r.tags and r.sampler_method is not None]
    cells: dict[str, dict[str, Any]] = {}
    for level in [TOTAL, *sorted({str(r.distraction) for r in sampled}, key=int)]:
        runs = [r for r in sampled if level == TOTAL or str(r.distraction) == level]
        cells[level] = {
            "sampler": "/".join(sorted({str(r.sampler_method) for r in runs})),
            "runs": len(runs),
            "failures": sum(r.status is RunStatus.FAILED for r in runs),
            "sampler_misses": sum(bool(r.sampler_miss) for r in runs),
        }
    return cells if sampled else {}


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
        "cases": cases,
        "cells": cells,
        "repeats": int(np.bincount(cell_codes).max()),
        "runs": n,
        "design_effect": _rounded(design_effect),
        "intra_case_correlation": _rounded(icc),
        "minimum_detectable_difference": mdd(variance),
        "by_repeats": {str(r): mdd(float(design.at_repeats(r))) for r in REPEATS_PROJECTED},
    }


def variant_summary(records: list[RunResult]) -> dict[str, Any]:
    """Everything reported for one variant. Rates exclude incomplete runs, which are counted separately."""
    counted = [r for r in records if r.is_judged]
    summary: dict[str, Any] = {
        "runs": len(counted),
        "incomplete": len(records) - len(counted),
        "incomplete_kinds": dict(Counter(str(r.error_kind or "unknown") for r in records if not r.is_judged)),
    }
    if not counted:
        return summary
    metric_records = [to_scored_run(r) for r in counted]
    overall = overall_cell(metric_records)
    overall_json = cell_json(overall)
    cells = tag_level_cells(metric_records)
    clusters = [r.case_id for r in metric_records]
    by_task: dict[tuple[int, int], list[bool]] = defaultdict(list)
    for r in metric_records:
        by_task[(r.case_id, r.level)].append(r.passed)
    max_repeats = max(len(v) for v in by_task.values())
    by_case: dict[str, dict[str, int]] = {}
    for r in sorted(metric_records, key=lambda m: m.case_id):
        entry = by_case.setdefault(str(r.case_id), {"runs": 0, "passes": 0, "errors": 0})
        entry["runs"] += 1
        entry["passes"] += r.passed
        entry["errors"] += r.errored
    tokens = {
        module: {
            "prompt": sum(r.tokens.get(module, {}).get("prompt", 0) for r in records),
            "completion": sum(r.tokens.get(module, {}).get("completion", 0) for r in records),
        }
        for module in MODULES
    }
    summary.update(
        {
            "success_rate": overall.success_rate,
            "execution_rate": overall.execution_rate,
            "success_interval": overall_json["success_interval"],
            "execution_interval": overall_json["execution_interval"],
            "success_se_clustered": clustered_standard_error([float(r.passed) for r in metric_records], clusters),
            "execution_se_clustered": clustered_standard_error(
                [float(not r.errored) for r in metric_records], clusters
            ),
            "by_tag": {tag: cell_json(levels[TOTAL]) for tag, levels in cells.items() if tag != TOTAL},
            "by_distraction": {level: cell_json(cell) for level, cell in cells[TOTAL].items() if level != TOTAL},
            "cells": {tag: {level: cell_json(cell) for level, cell in levels.items()} for tag, levels in cells.items()},
            "by_case": by_case,
            "pass_hat_k": {
                str(k): pass_hat_k([(sum(v), len(v)) for v in by_task.values()], k) for k in range(1, max_repeats + 1)
            },
            "power": power_summary(metric_records),
            "error_kinds": dict(Counter(str(r.error_kind or "error") for r in counted if r.errored)),
            # The judge's explanation of each failed plan (character and condition), most frequent first.
            "failure_reasons": dict(
                Counter(r.reason for r in counted if r.status is RunStatus.FAILED and r.reason).most_common(
                    FAILURE_REASONS_SHOWN
                )
            ),
            # PI failures the reference annealer caused (the success rate stays the annealer's)
            "pi_sampler": pi_sampler_cells(counted),
            "tokens": {
                "total_prompt": sum(r.prompt_tokens for r in records),
                "total_completion": sum(r.completion_tokens for r in records),
                "by_module": tokens,
            },
        }
    )
    return summary


def build_summary(results: Iterable[RunResult], variant_order: Iterable[str] = ()) -> dict[str, Any]:
    grouped: dict[str, list[RunResult]] = defaultdict(list)
    for result in results:
        grouped[result.variant].append(result)
    order = list(variant_order)
    order = [v for v in order if v in grouped] + sorted(set(grouped) - set(order))
    return {"variants": {variant: variant_summary(grouped[variant]) for variant in order}}


def label_perturbation(summary: dict[str, Any], perturb: int) -> dict[str, Any]:
    """Mark the summary of a perturbed run (`"perturbation": "perturbed (seed 3)"`); every format shows it."""
    label = perturbation_label(perturb)
    if label:
        summary["perturbation"] = label
    return summary


def write_summary(
    run_dir: Path,
    results: Iterable[RunResult],
    variant_order: Iterable[str],
    *,
    model: str,
    runs_planned: int,
    perturb: int = 0,
) -> dict[str, Any]:
    """Compute the summary of everything a run directory holds and write it to `summary.json`."""
    summary = label_perturbation(build_summary(results, variant_order), perturb)
    summary["config"] = {"model": model, "runs_planned": runs_planned, **({"perturb": perturb} if perturb else {})}
    write_json(Path(run_dir) / SUMMARY_FILE, summary)
    return summary


def paper_rows(summary: Mapping[str, Any], level: str = TOTAL, intervals: bool = False) -> list[list[str]]:
    """Rows `variant, Total, OA, RC, SS, PI` of one level block, cells `success (execution)` or `-`."""
    rows = []
    for variant, data in summary["variants"].items():
        cells = data.get("cells", {})
        row = [variant]
        for tag in TAG_COLUMNS:
            cell = cells.get(tag, {}).get(level)
            if cell is None:
                row.append("-")
                continue
            text = cell_text(cell["success_rate"], cell["execution_rate"])
            if intervals:
                low, high = cell["success_interval"]
                text += f" [{low:.2f}, {high:.2f}]"
            row.append(text)
        rows.append(row)
    return rows
