from __future__ import annotations

import pytest

from edsb.scoring.metrics import (
    ScoredRun,
    cell_text,
    overall_cell,
    round2,
    summarize_cell,
    tag_level_cells,
    wilson_interval,
)


def runs(n: int, *, passed: bool = False, errored: bool = False, case_id: int = 0, tags=("OA",), level: int = 0):
    return [ScoredRun(case_id, tuple(tags), level, passed, errored) for _ in range(n)]


def test_rounding_follows_numpy_not_python() -> None:
    # 1/40 = 0.025 is stored slightly above 0.025: Python rounds it to 0.03, numpy (and the reference) to 0.02.
    assert round2(1 / 40) == 0.02
    assert round2(3 / 40) == 0.08
    assert round2(2 / 3) == 0.67


def test_execution_rate_subtracts_the_rounded_error_mean() -> None:
    cell = summarize_cell(runs(38, passed=True) + runs(1) + runs(1, errored=True))
    assert (cell.runs, cell.passes, cell.errors) == (40, 38, 1)
    assert cell.success_rate == 0.95
    assert cell.error_rate == 0.02  # 0.025 rounded the numpy way
    assert cell.execution_rate == 0.98  # not round(1 - 0.025, 2)
    assert cell_text(cell.success_rate, cell.execution_rate) == "0.95 (0.98)"


def test_errors_count_as_failures() -> None:
    cell = summarize_cell(runs(3, passed=True) + runs(1, errored=True))
    assert cell.success_rate == 0.75
    assert cell.execution_rate == 0.75


def test_token_means_are_rounded() -> None:
    records = [ScoredRun(0, ("OA",), 0, True, False, 1000, 7), ScoredRun(0, ("OA",), 0, True, False, 1001, 8)]
    records.append(ScoredRun(0, ("OA",), 0, False, True, 0, 0))  # errored runs record 0 tokens
    cell = summarize_cell(records)
    assert (cell.prompt_tokens, cell.completion_tokens) == (667.0, 5.0)


def test_cells_by_tag_and_level_include_totals() -> None:
    records = (
        runs(2, passed=True, case_id=30, tags=("OA", "RC"), level=1)
        + runs(2, case_id=0, tags=("OA",), level=0)
        + runs(1, errored=True, case_id=60, tags=("PI",), level=0)
    )
    cells = tag_level_cells(records)
    assert list(cells) == ["Total", "OA", "RC", "PI"]
    assert cells["Total"]["Total"].runs == 5
    assert cells["Total"]["Total"].success_rate == 0.4
    assert cells["Total"]["Total"].execution_rate == 0.8
    assert cells["OA"]["Total"].runs == 4 and cells["OA"]["Total"].success_rate == 0.5
    assert cells["OA"]["1"].success_rate == 1.0 and cells["OA"]["0"].success_rate == 0.0
    assert cells["RC"].keys() == {"Total", "1"}
    assert cells["PI"]["0"].execution_rate == 0.0
    assert overall_cell(records) == cells["Total"]["Total"]


def test_wilson_interval_known_values() -> None:
    interval = wilson_interval(8, 10)
    assert interval.low == pytest.approx(0.4902, abs=1e-4)
    assert interval.high == pytest.approx(0.9433, abs=1e-4)
    assert (wilson_interval(0, 10).low, wilson_interval(10, 10).high) == (0.0, 1.0)
    assert wilson_interval(0, 10).high == pytest.approx(0.2775, abs=1e-4)


def test_cell_intervals_cover_the_rates() -> None:
    cell = summarize_cell(runs(45, passed=True) + runs(3) + runs(2, errored=True))
    assert cell.success_interval.low < 0.9 < cell.success_interval.high
    assert cell.execution_interval.low < 0.96 < cell.execution_interval.high


def test_an_empty_cell_is_refused() -> None:
    with pytest.raises(ValueError):
        summarize_cell([])
