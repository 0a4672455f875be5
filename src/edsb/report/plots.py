"""Figures for a run: success by tag and by distraction level, one bar per variant, Wilson 95% error bars."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from edsb.errors import UsageError
from edsb.report.summary import LEVEL_ROWS, TAG_COLUMNS
from edsb.report.summary_types import CellResult, RunSummary
from edsb.scoring.metrics import TOTAL

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _cell(summary: RunSummary, variant: str, group: str, by_level: bool) -> CellResult | None:
    cells = summary.variants[variant].cells
    return cells.get(TOTAL, {}).get(group) if by_level else cells.get(group, {}).get(TOTAL)


def _series(
    summary: RunSummary, variant: str, groups: Sequence[str], by_level: bool
) -> tuple[list[float], list[list[float]]]:
    values, low, high = [], [], []
    for group in groups:
        cell = _cell(summary, variant, group, by_level)
        if cell is None:
            values.append(float("nan"))
            low.append(0.0)
            high.append(0.0)
            continue
        rate = cell.success_rate
        values.append(rate)
        low.append(max(0.0, rate - cell.success_interval[0]))
        high.append(max(0.0, cell.success_interval[1] - rate))
    return values, [low, high]


def summary_figure(summary: RunSummary, title: str = "") -> Figure:
    """Two panels, by tag and by level, one bar per variant, each labelled with its rate; the rate axis runs from
    0 to 1.0 exactly (the legend sits above the panels, not in the room a longer axis would leave). A tag or level
    no variant ran is left off its axis, and a variant without runs where others have some says `no runs` where its
    bar would be: an empty place never reads as 0 %."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("plots need matplotlib: pip install 'edsb[plots]'") from None
    variants = [v for v, data in summary.variants.items() if data.cells]
    if not variants:
        raise UsageError("nothing to plot: the run has no judged runs yet")
    figure, axes = plt.subplots(1, 2, figsize=(12, 4.6), sharey=True)
    panels = ((axes[0], TAG_COLUMNS, False, "by tag (all levels)"), (axes[1], LEVEL_ROWS, True, "by distraction level"))
    width = 0.8 / len(variants)
    for axis, every_group, by_level, label in panels:
        groups = [g for g in every_group if any(_cell(summary, v, g, by_level) for v in variants)]
        for index, variant in enumerate(variants):
            values, errors = _series(summary, variant, groups, by_level)
            positions = [g + (index - (len(variants) - 1) / 2) * width for g in range(len(groups))]
            bars = axis.bar(positions, values, width, yerr=errors, capsize=3, label=variant)
            rates = [f"{value:.2f}" if value == value else "" for value in values]  # NaN: no bar, no label
            axis.bar_label(bars, rates, padding=2, fontsize="x-small", rotation=90 if len(variants) > 3 else 0)
            for position, value in zip(positions, values, strict=True):
                if value != value:
                    axis.text(position, 0.02, "no runs", rotation=90, ha="center", va="bottom", fontsize="x-small")
        axis.set_xticks(range(len(groups)), groups)
        axis.set_ylim(0, 1.0)
        axis.set_yticks([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
        axis.set_title(label)
        axis.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("success rate (95% Wilson interval)")
    handles, labels = axes[0].get_legend_handles_labels()
    top = 0.93 if title else 0.99
    figure.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, top), ncol=len(variants), fontsize="small")
    if title:
        figure.suptitle(title, y=0.99, va="top")
    figure.tight_layout(rect=(0, 0, 1, top - 0.05))
    return figure


def plot_summary(summary: RunSummary, path: Path, title: str = "", dpi: int = 120) -> Path:
    """Write the figure of `summary_figure` as a PNG (or any format matplotlib infers from the suffix)."""
    import matplotlib.pyplot as plt

    figure = summary_figure(summary, title)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=dpi)
    plt.close(figure)
    return path
