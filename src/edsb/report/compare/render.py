"""`edsb compare` as text: the leaderboard, the paired differences and the cases that flip, as terminal tables or
Markdown (blocks of `report.tables`), one tidy CSV, or the whole comparison as JSON."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict
from typing import Any

from rich.console import Console

from edsb.report.compare.paired import Board, Difference, PairedComparison, Standing
from edsb.report.formats import CompareFormat, ReportFormat, paper_order, plural
from edsb.report.stats import CLUSTERED, MIN_CLUSTERS, POWER
from edsb.report.tables import Block, emit
from edsb.results import RunKey
from edsb.scoring.metrics import TOTAL

EXACT_MARK = "*"  # an interval that is not the case-clustered one (report.stats says which, the notes why)


def _p_text(p: float | None) -> str:
    return "-" if p is None else "<0.001" if p < 0.001 else f"{p:.3f}"


def _mark(method: str) -> str:
    return "" if method == CLUSTERED else EXACT_MARK


def _difference_text(d: Difference) -> str:
    text = f"{d.difference:+.2f}"
    return text if d.low is None or d.high is None else f"{text} [{d.low:+.2f}, {d.high:+.2f}]{_mark(d.method)}"


def _standing_text(entry: Standing) -> str:
    interval = entry.success_interval
    if interval is None:
        return entry.cell
    return f"{entry.cell} [{interval[0]:.2f}, {interval[1]:.2f}]{_mark(entry.success_interval_method)}"


def finding(d: Difference, alpha: float) -> str:
    """What a row found, in words: a significant difference, the point where every pair agrees, or what the
    comparison could have detected (never a bare "no difference": a test that finds nothing has not shown
    that there is nothing)."""
    if d.p_value is None:
        return "-"
    if d.low == d.high:  # zero-width: every pair differs by the same amount, and enough cases say so
        return "the runs agree on every pair" if d.difference == 0 else f"every pair differs by {d.difference:+.2f}"
    if d.p_value < alpha:
        return "run higher" if d.difference > 0 else "base higher"
    if d.detectable is not None:
        return f"no difference larger than {d.detectable:.2f} detected"
    if 2.0 ** (1 - d.cases) >= alpha:
        return f"nothing detectable: {plural(d.cases, 'case')} cannot reach p < {alpha:g}"
    return "nothing detected; power unknown: no variance between cases"


def leaderboard(board: Board) -> tuple[list[str], list[list[str]]]:
    """Runs × variants: each run's success (execution) over all its judged runs, with the case-clustered 95%
    interval of its success rate."""
    variants = paper_order(e.variant for e in board.standings)
    cells = {(e.run, e.variant): e for e in board.standings if e.tag == TOTAL and e.level == TOTAL}
    rows = [
        [run.name, *(_standing_text(cells[(run.name, v)]) if (run.name, v) in cells else "-" for v in variants)]
        for run in board.runs
    ]
    return ["run", *variants], rows


def leaderboard_notes(board: Board) -> list[str]:
    """Why some leaderboard intervals are not the clustered ones (none when all are)."""
    entries = [e for e in board.standings if e.tag == TOTAL and e.level == TOTAL]
    if all(e.success_interval_method == CLUSTERED for e in entries):
        return []
    return [
        f"{EXACT_MARK}: the clustered interval is degenerate (one case, fewer than {MIN_CLUSTERS} cases, or no"
        " variance between cases): Wilson's interval over the runs, or over few cases the wider of the two"
        " (docs/statistics.md)"
    ]


def difference_notes(board: Board, comparison: PairedComparison) -> list[str]:
    """The reading of the paired table: the columns, and why a row's interval is an exact one."""
    base, other = board.base.name, comparison.run.name
    notes = [
        f"base: {base}; run: {other}. Δ: run − base, with its 95% interval clustered by case; only base, only run:"
        " the pairs where only that side passed (or executed)",
    ]
    reasons = list(dict.fromkeys(d.reason for row in comparison.rows for d in (row.success, row.execution) if d.reason))
    if reasons:
        notes.append(
            f"{EXACT_MARK}: the exact sign-flip test and its interval, not the clustered one ({'; '.join(reasons)})"
        )
    return notes


def difference_block(board: Board, comparison: PairedComparison) -> Block:
    """The paired differences of one later run to the first: a row per variant, tag (and level) and metric, with
    the discordant pairs (passed, or executed, in one run only). The columns say `base` and `run`, the title which
    directories they are, so the table keeps its width whatever the directories are called."""
    base, other, c = board.base.name, comparison.run.name, comparison.coverage
    left_out = [
        f"{count} {what}"
        for count, what in (
            (c.only_base, f"judged only in {base}"),
            (c.only_run, f"judged only in {other}"),
            (c.incomplete_base, f"incomplete in {base}"),
            (c.incomplete_run, f"incomplete in {other}"),
        )
        if count
    ]
    title = f"{other} − {base}: paired differences over {plural(c.pairs, 'shared run')}" + (
        f" (left out: {', '.join(left_out)})" if left_out else ""
    )
    level = ["level"] if board.by_level else []
    header = ["variant", "tag", *level, "metric", "pairs", "base → run", "Δ [95% CI]", "p", "only base / run"]
    rows = []
    for row in comparison.rows:
        for d in (row.success, row.execution):
            rows.append(
                [row.variant, row.tag, *([row.level] if board.by_level else []), d.metric, str(d.pairs),
                 f"{d.base_rate:.2f} → {d.run_rate:.2f}", _difference_text(d), _p_text(d.p_value),
                 f"{d.base_only} / {d.run_only}"]
            )  # fmt: skip
    return Block(title, header, rows, difference_notes(board, comparison))


def power_block(board: Board, comparison: PairedComparison) -> Block:
    """What each row of a paired table found, and the true difference it would have found with 80% power: a
    table of its own, so the differences keep their width at 80 columns."""
    title = (
        f"{comparison.run.name} − {board.base.name}: what the comparison found, and the difference it detects with"
        f" {POWER:.0%} power at α = {board.alpha:g}"
    )
    level = ["level"] if board.by_level else []
    rows = [
        [row.variant, row.tag, *([row.level] if board.by_level else []), d.metric,
         "-" if d.detectable is None else f"{d.detectable:.2f}", finding(d, board.alpha)]
        for row in comparison.rows
        for d in (row.success, row.execution)
    ]  # fmt: skip
    notes = [
        "detectable: from the observed variance of the paired differences, clustered by case, so it counts the"
        " correlation between the two runs (docs/statistics.md); `-`: too few cases, or no variance to estimate it"
        " from"
    ]
    return Block(title, ["variant", "tag", *level, "metric", "detectable", "finding"], rows, notes)


def discordant_rows(board: Board) -> list[list[str]]:
    """Every case whose verdicts flip: the run compared, the case, and its runs (level, repeat) that passed only in
    the first run, and only in the other."""
    rows = []
    for comparison in board.comparisons:
        for entry in comparison.discordant:
            rows.append(
                [
                    comparison.run.name,
                    entry.variant,
                    str(entry.case),
                    " ".join(_level_repeat(k) for k in entry.base_only) or "-",
                    " ".join(_level_repeat(k) for k in entry.run_only) or "-",
                ]
            )
    return rows


def _level_repeat(key: RunKey) -> str:
    return f"d{key.distraction}-r{key.repeat}"


def _difference_json(d: Difference, alpha: float) -> dict[str, Any]:
    data = asdict(d)
    del data["metric"], data["pairs"], data["cases"]
    data["interval"] = None if d.low is None or d.high is None else [d.low, d.high]
    del data["low"], data["high"]
    data["detectable_difference"] = data.pop("detectable")
    data["finding"] = finding(d, alpha)
    return data


def board_json(board: Board) -> dict[str, Any]:
    """The whole comparison as plain data (`edsb compare --format json`)."""
    return {
        "base": board.base.name,
        "alpha": board.alpha,
        "power": POWER,
        "method": "paired on the run key; CR1 standard error clustered by case; t with cases − 1 degrees of freedom",
        "small_samples": f"below {MIN_CLUSTERS} cases, or without variance between cases: the exact sign-flip test"
        " and its interval for a difference, Wilson's interval for a rate (each row's `method` and `reason`)",
        "runs": [
            {
                "name": run.name,
                "path": str(run.path),
                "model": run.model,
                "judged": sum(r.is_judged for r in run.results),
                "incomplete": sum(not r.is_judged for r in run.results),
            }
            for run in board.runs
        ],
        "leaderboard": [asdict(e) for e in board.standings],
        "comparisons": [
            {
                "run": comparison.run.name,
                "coverage": asdict(comparison.coverage),
                "rows": [
                    {
                        "variant": row.variant,
                        "tag": row.tag,
                        "distraction": row.level,
                        "pairs": row.success.pairs,
                        "cases": row.success.cases,
                        "success": _difference_json(row.success, board.alpha),
                        "execution": _difference_json(row.execution, board.alpha),
                    }
                    for row in comparison.rows
                ],
                "discordant_cases": [
                    {
                        "variant": entry.variant,
                        "case": entry.case,
                        "base_only": [k.id for k in entry.base_only],
                        "run_only": [k.id for k in entry.run_only],
                    }
                    for entry in comparison.discordant
                ],
            }
            for comparison in board.comparisons
        ],
        "notes": board.notes,
    }


BOARD_CSV_HEADER = (
    "run", "variant", "tag", "distraction", "metric", "runs", "rate", "low", "high", "base", "pairs", "cases",
    "base_rate", "run_rate", "difference", "difference_low", "difference_high", "p_value", "base_only", "run_only",
    "interval_method", "difference_method", "detectable_difference",
)  # fmt: skip


def _csv_number(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}" if isinstance(value, float) else str(value)


def board_csv(board: Board) -> str:
    """One tidy table: a row per run, variant, tag, level and metric with the run's own rate and interval and,
    for every run but the first, its paired difference to the first (blank for the first run)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(BOARD_CSV_HEADER)
    paired = {(c.run.name, row.variant, row.tag, row.level): row for c in board.comparisons for row in c.rows}
    for e in board.standings:
        row = paired.get((e.run, e.variant, e.tag, e.level))
        for metric, rate, interval, method in (
            ("success", e.success_rate, e.success_interval, e.success_interval_method),
            ("execution", e.execution_rate, e.execution_interval, e.execution_interval_method),
        ):
            low, high = interval if interval is not None else (None, None)
            line = [e.run, e.variant, e.tag, e.level, metric, e.runs, *map(_csv_number, (rate, low, high))]
            if row is None:
                line += [""] * (len(BOARD_CSV_HEADER) - len(line) - 3) + [method, "", ""]
            else:
                d = row.success if metric == "success" else row.execution
                line += [board.base.name, d.pairs, d.cases]
                line += map(_csv_number, (d.base_rate, d.run_rate, d.difference, d.low, d.high, d.p_value))
                line += [d.base_only, d.run_only, method, d.method, _csv_number(d.detectable)]
            writer.writerow(line)
    return buffer.getvalue()


def render_board(
    board: Board, fmt: CompareFormat, console: Console | None = None, *, show_all: bool = False
) -> str | None:
    """`edsb compare` as Markdown, CSV or JSON text; `table` prints to the console and returns None (the HTML
    page is written by report.compare.html.write_board). `show_all` lifts the limit on the list of cases that flip."""
    if fmt == CompareFormat.JSON:
        return json.dumps(board_json(board), indent=2)
    if fmt == CompareFormat.CSV:
        return board_csv(board)
    if fmt == CompareFormat.HTML:
        raise ValueError("the HTML board is written by report.compare.html.write_board")
    header, rows = leaderboard(board)
    blocks = [
        Block(
            "Leaderboard: success (execution) [95% interval of success, clustered by case]",
            header,
            rows,
            leaderboard_notes(board),
        )
    ]
    for comparison in board.comparisons:
        blocks += [difference_block(board, comparison), power_block(board, comparison)]
    discordant = Block(
        "Cases that flip: the runs (level, repeat) of each case that passed in the base and failed in the run, or "
        "the reverse",
        ["run", "variant", "case", "passed only in the base", "passed only in the run"],
        discordant_rows(board),
        [f"base: {board.base.name}"],
    )
    blocks.append(discordant.limited(show_all))
    return emit(blocks, ReportFormat.MARKDOWN if fmt == CompareFormat.MARKDOWN else ReportFormat.TABLE, console)
