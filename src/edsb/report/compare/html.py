"""`edsb compare R1 R2 ... --format html -o board.html`: one self-contained page (no network, no other files).

A leaderboard (runs × variants), a forest plot of every later run's paired difference to the first (inline SVG,
drawn from the numbers the tables show), the paired difference tables, and the cases whose verdicts flip, each
flipped run linking to its drill-down in the run's HTML report when that page sits beside the board
(`<run name>.html` next to it, or `report.html` inside the run directory).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edsb.report.compare.paired import Board, ComparedRun, Difference
from edsb.report.compare.render import difference_block, leaderboard, leaderboard_notes, power_block
from edsb.report.html import load_template, run_anchor
from edsb.results import RunKey
from edsb.scoring.metrics import TOTAL

FOREST_WIDTH = 760
FOREST_LABEL = 240  # pixels left of the plot for the row labels
FOREST_VALUES = 180  # pixels right of the plot for the numbers
FOREST_ROW = 24
FOREST_MARGIN = 34  # above the first row and below the last (axis labels)


@dataclass(frozen=True)
class ForestRow:
    label: str
    run: str
    y: float
    x: float
    x_low: float
    x_high: float
    text: str
    significant: bool


def _forest(board: Board) -> dict[str, Any]:
    """Geometry of the forest plot: one row per later run and variant (success, all tags and levels), on an axis
    symmetric about 0 that holds every interval."""
    entries: list[tuple[str, str, Difference]] = []
    for comparison in board.comparisons:
        for row in comparison.rows:
            if row.tag == TOTAL and row.level == TOTAL:
                entries.append((f"{comparison.run.name} · {row.variant}", comparison.run.name, row.success))
    reach = max([0.05, *(abs(v) for _, _, d in entries for v in (d.difference, d.low or 0.0, d.high or 0.0))])
    # The finest step that needs at most three ticks on each side of 0.
    step = next(s for s in (0.05, 0.1, 0.2, 0.25, 0.5) if math.ceil(reach / s - 1e-9) <= 3)
    extent = step * math.ceil(reach / step - 1e-9)
    plot = FOREST_WIDTH - FOREST_LABEL - FOREST_VALUES

    def x_of(value: float) -> float:
        return round(FOREST_LABEL + (value + extent) / (2 * extent) * plot, 2)

    rows = []
    for index, (label, run, d) in enumerate(entries):
        low = d.difference if d.low is None else d.low
        high = d.difference if d.high is None else d.high
        interval = "" if d.low is None or d.high is None else f" [{d.low:+.2f}, {d.high:+.2f}]"
        rows.append(
            ForestRow(
                label=label,
                run=run,
                y=FOREST_MARGIN + index * FOREST_ROW + FOREST_ROW / 2,
                x=x_of(d.difference),
                x_low=x_of(low),
                x_high=x_of(high),
                text=f"{d.difference:+.2f}{interval}",
                significant=d.p_value is not None and d.p_value < board.alpha,
            )
        )
    ticks = []
    for i in range(-round(extent / step), round(extent / step) + 1):
        ticks.append({"x": x_of(i * step), "label": "0" if i == 0 else f"{i * step:+.2f}"})
    height = 2 * FOREST_MARGIN + len(rows) * FOREST_ROW
    return {
        "width": FOREST_WIDTH,
        "height": height,
        "zero": x_of(0.0),
        "top": FOREST_MARGIN - 6,
        "bottom": height - FOREST_MARGIN + 6,
        "left": FOREST_LABEL,
        "right": FOREST_LABEL + plot,
        "values_x": FOREST_LABEL + plot + 10,
        "ticks": ticks,
        "rows": rows,
    }


def _report_pages(board: Board, page_dir: Path, board_path: Path) -> dict[str, str]:
    """Where each run's HTML report is, as a link relative to the board, for the runs that have one beside it."""
    pages = {}
    for run in board.runs:
        for candidate in (page_dir / f"{run.name}.html", run.path / "report.html"):
            if candidate.is_file() and candidate.resolve() != board_path.resolve():
                pages[run.name] = Path(os.path.relpath(candidate.resolve(), page_dir.resolve())).as_posix()
                break
    return pages


def _flipped(pages: dict[str, str], base: ComparedRun, other: ComparedRun, key: RunKey) -> dict[str, str | None]:
    """A flipped run: its name, and the links to its drill-down in both runs' reports (None without a report)."""
    base_page, other_page = pages.get(base.name), pages.get(other.name)
    return {
        "name": key.run_name,
        "base": f"{base_page}#{run_anchor(key)}" if base_page else None,
        "other": f"{other_page}#{run_anchor(key)}" if other_page else None,
    }


def build_board_page(board: Board, board_path: Path) -> str:
    """The whole HTML document of a comparison written to `board_path` (links are relative to its folder)."""
    page_dir = board_path.parent
    pages = _report_pages(board, page_dir, board_path)
    header, rows = leaderboard(board)
    differences = [block for c in board.comparisons for block in (difference_block(board, c), power_block(board, c))]
    flips = [
        {
            "run": comparison.run.name,
            "variant": entry.variant,
            "case": entry.case,
            "directions": [
                (label, [_flipped(pages, board.base, comparison.run, key) for key in keys])
                for label, keys in (
                    (f"{board.base.name} passed, {comparison.run.name} failed", entry.base_only),
                    (f"{board.base.name} failed, {comparison.run.name} passed", entry.run_only),
                )
                if keys
            ],
        }
        for comparison in board.comparisons
        for entry in comparison.discordant
    ]
    return load_template("board.html.j2").render(
        title=f"edsb compare — {', '.join(run.name for run in board.runs)}",
        base=board.base.name,
        runs=[
            {
                "name": run.name,
                "model": run.model,
                "path": str(run.path),
                "judged": sum(r.is_judged for r in run.results),
                "incomplete": sum(not r.is_judged for r in run.results),
                "report": pages.get(run.name),
            }
            for run in board.runs
        ],
        notes=board.notes,
        leaderboard_header=header,
        leaderboard_rows=rows,
        leaderboard_notes=leaderboard_notes(board),
        forest=_forest(board),
        differences=differences,
        flips=flips,
    )


def write_board(board: Board, output: Path) -> Path:
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(build_board_page(board, output), encoding="utf-8")
    return output
