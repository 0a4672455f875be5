"""Rendering summaries as the paper's tables (rich for the terminal; Markdown and CSV for files)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from edsb.report.summary import LEVEL_ROWS, TAG_COLUMNS, paper_rows


def paper_table(summary: Mapping[str, Any], level: str, *, intervals: bool = False) -> Table:
    title = "all levels" if level == "Total" else f"distraction level {level}"
    table = Table("variant", *TAG_COLUMNS, title=f"success (execution), {title}")
    for row in paper_rows(summary, level, intervals=intervals):
        table.add_row(*row)
    return table


def print_paper_table(
    summary: Mapping[str, Any], out: Path | None = None, *, console: Console | None = None, intervals: bool = False
) -> None:
    console = console or Console()
    for level in LEVEL_ROWS:
        if any(level in cells for data in summary["variants"].values() for cells in data.get("cells", {}).values()):
            console.print(paper_table(summary, level, intervals=intervals))
    for variant, data in summary["variants"].items():
        if data.get("incomplete"):
            console.print(f"{variant}: {data['incomplete']} incomplete runs (no answer from the model) not counted")
