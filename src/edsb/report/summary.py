"""From the records of a run directory to `summary.json` and the paper-style tables."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from typing import Any

from edsb.report.stats import clustered_standard_error, pass_hat_k
from edsb.scoring.metrics import TOTAL, Cell, RunRecord, overall_cell, tag_level_cells

TAG_COLUMNS = (TOTAL, "OA", "RC", "SS", "PI")
LEVEL_ROWS = (TOTAL, "0", "1", "2")
MODULES = ("narrator", "event_parser")
FAILURE_REASONS_SHOWN = 10


def judged(records: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Records that count towards the rates: everything but runs whose model never answered."""
    return [r for r in records if r.get("status") != "incomplete"]


def to_metric_record(record: Mapping[str, Any]) -> RunRecord:
    errored = record.get("status") == "error"
    # The reference stores 0 tokens for errored runs; its token table is reproduced with that convention.
    return RunRecord(
        case_id=int(record["case"]),
        tags=tuple(record.get("tags") or ()),
        level=int(record["distraction"]),
        passed=bool(record.get("passed")),
        errored=errored,
        prompt_tokens=0 if errored else int(record.get("prompt_tokens") or 0),
        completion_tokens=0 if errored else int(record.get("completion_tokens") or 0),
    )


def cell_json(cell: Cell) -> dict[str, Any]:
    data = asdict(cell)
    data["success_interval"] = [round(cell.success_interval.low, 4), round(cell.success_interval.high, 4)]
    data["execution_interval"] = [round(cell.execution_interval.low, 4), round(cell.execution_interval.high, 4)]
    return data


def variant_summary(records: list[Mapping[str, Any]]) -> dict[str, Any]:
    """Everything reported for one variant. Rates exclude incomplete runs, which are counted separately."""
    counted = judged(records)
    summary: dict[str, Any] = {
        "runs": len(counted),
        "incomplete": len(records) - len(counted),
        "incomplete_kinds": dict(
            Counter(r.get("error_kind") or "unknown" for r in records if r.get("status") == "incomplete")
        ),
    }
    if not counted:
        return summary
    metric_records = [to_metric_record(r) for r in counted]
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
            "prompt": sum(int(((r.get("tokens") or {}).get(module) or {}).get("prompt", 0)) for r in records),
            "completion": sum(int(((r.get("tokens") or {}).get(module) or {}).get("completion", 0)) for r in records),
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
            "error_kinds": dict(Counter(r.get("error_kind") or "error" for r in counted if r.get("status") == "error")),
            # The judge's explanation of each failed plan (character and condition), most frequent first.
            "failure_reasons": dict(
                Counter(r["reason"] for r in counted if r.get("status") == "failed" and r.get("reason")).most_common(
                    FAILURE_REASONS_SHOWN
                )
            ),
            "tokens": {
                "total_prompt": sum(int(r.get("prompt_tokens") or 0) for r in records),
                "total_completion": sum(int(r.get("completion_tokens") or 0) for r in records),
                "by_module": tokens,
            },
        }
    )
    return summary


def build_summary(records: Iterable[Mapping[str, Any]], variant_order: Iterable[str] = ()) -> dict[str, Any]:
    grouped: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for record in records:
        grouped[record["variant"]].append(record)
    order = [v for v in variant_order if v in grouped] + sorted(set(grouped) - set(variant_order))
    return {"variants": {variant: variant_summary(grouped[variant]) for variant in order}}


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
            text = f"{cell['success_rate']} ({cell['execution_rate']})"
            if intervals:
                low, high = cell["success_interval"]
                text += f" [{low:.2f}, {high:.2f}]"
            row.append(text)
        rows.append(row)
    return rows
