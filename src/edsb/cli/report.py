"""`edsb report`, `edsb compare` and `edsb plan-power`: what a run directory (or several) shows."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from edsb.cli.app import Command, app, err, out
from edsb.cli.options import AllOption, DataOption
from edsb.errors import UsageError
from edsb.report.formats import CompareFormat, ReportFormat, plural
from edsb.settings.declare import one_of

if TYPE_CHECKING:
    from edsb.report.summary_types import RunSummary


ReportFormatOption = Annotated[
    ReportFormat,
    typer.Option(
        "--format",
        metavar="FORMAT",
        help=f"Output format: {one_of(ReportFormat)} (json: the results document with its run card; samples: "
        "one JSON line per run with its texts, code, plan and verdict).",
        show_default=False,
    ),
]
PriceInOption = Annotated[
    float | None, typer.Option(metavar="USD", help="USD per million prompt tokens (cost estimate).")
]


@app.command("report", cls=Command)
def report_command(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR", help="A run directory written by `edsb run`.")],
    fmt: ReportFormatOption = ReportFormat.TABLE,
    intervals: Annotated[bool, typer.Option("--intervals", help="Add Wilson 95% intervals to the cells.")] = False,
    price_in: PriceInOption = None,
    price_out: Annotated[float | None, typer.Option(metavar="USD", help="USD per million completion tokens.")] = None,
    plot: Annotated[
        Path | None, typer.Option(metavar="FILE", help="Also write a figure (PNG) of success by tag and level.")
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "-o", "--output", metavar="FILE", help="Write the report to FILE (needed for html; default: stdout)."
        ),
    ] = None,
    show_all: AllOption = False,
    data: DataOption = None,
) -> None:
    """The paper's tables for one run directory, with intervals, tokens, cost, error kinds and their reasons, and
    per-case counts; `--format html -o report.html` writes one self-contained page with a drill-down per run."""
    from edsb.report.render import open_run, render_report

    # 1. The two formats that are files of their own: the HTML page and the sample log.
    if fmt in (ReportFormat.HTML, ReportFormat.SAMPLES):
        _write_pages(fmt, run_dir, output, data)
        return
    # 2. The summary, and its notes.
    run, summary = open_run(run_dir)
    config = run.config.model_dump()
    for note in summary.notes:
        err.print(f"note: {note}", markup=False, highlight=False)

    def render(console: Console) -> str | None:
        if fmt == ReportFormat.JSON:
            from edsb.report.card import results_document

            return json.dumps(results_document(run_dir, run.config, run.results, summary), indent=2)
        prices = (price_in, price_out)
        return render_report(
            config, summary, fmt, intervals=intervals, prices=prices, console=console, show_all=show_all
        )

    # 3. The report, to the terminal or a file; 4. the figure, if asked for.
    _emit(render, output)
    if plot is not None:
        _write_plot(summary, plot, f"{config.get('model', '')} — {run_dir.name}")


def _write_plot(summary: RunSummary, plot: Path, title: str) -> None:
    """`--plot FILE`: the figure of success by tag and level, its title naming the perturbation, if any."""
    from edsb.report.plots import plot_summary

    label = f" — {summary.perturbation}" if summary.perturbation else ""
    written = plot_summary(summary, plot, title=f"{title}{label}")
    err.print(f"figure written to {written}", markup=False, highlight=False)


def _write_pages(fmt: ReportFormat, run_dir: Path, output: Path | None, data: Path | None) -> None:
    """`--format html` (a file, which -o must name) or `--format samples` (a file, or stdout)."""
    if fmt == ReportFormat.HTML:
        from edsb.data.benchmark import Benchmark
        from edsb.report.html import write_html_report

        if output is None:
            raise UsageError("--format html needs -o FILE.html")
        written = write_html_report(run_dir, output, Benchmark.open(data))
        err.print(f"report written to {written} ({written.stat().st_size / 1e6:.1f} MB)", markup=False)
        return
    from edsb.report.samples import write_samples

    if output is None:
        write_samples(run_dir, sys.stdout)
        return
    output.parent.mkdir(parents=True, exist_ok=True)
    with output.open("w", encoding="utf-8") as handle:
        count = write_samples(run_dir, handle)
    err.print(f"{plural(count, 'sample')} written to {output}", markup=False, highlight=False)


def _emit(
    render: Callable[[Console], str | None], output: Path | None, *, width: int = 160, what: str = "report"
) -> None:
    """Write what `render` returns (a table prints itself to its console and returns None) to stdout or a file;
    a table goes to a file as plain text, without colours, `width` columns wide."""
    if output is None:
        text = render(out)
        if text is not None:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    output.parent.mkdir(parents=True, exist_ok=True)
    with output.open("w", encoding="utf-8") as handle:
        text = render(Console(file=handle, soft_wrap=True, color_system=None, width=width))
        if text is not None:
            handle.write(text if text.endswith("\n") else text + "\n")
    err.print(f"{what} written to {output}", markup=False, highlight=False)


@app.command("compare", cls=Command)
def compare_command(
    run_dirs: Annotated[
        list[Path],
        typer.Argument(metavar="RUN_DIR...", help="Two or more run directories; the first is the baseline."),
    ],
    fmt: Annotated[
        CompareFormat,
        typer.Option("--format", metavar="FORMAT", help=f"Output format: {one_of(CompareFormat)}.", show_default=False),
    ] = CompareFormat.TABLE,
    by_level: Annotated[
        bool, typer.Option("--by-level", help="Also compare each distraction level on its own.")
    ] = False,
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", metavar="FILE", help="Write to this file (needed by --format html)."),
    ] = None,
    show_all: AllOption = False,
) -> None:
    """Paired comparison with the first run: per variant and tag, the difference in success and execution rate
    over the runs sharing a run key, its 95% interval clustered by case, a p-value and the discordant pairs;
    `--format html -o board.html` writes a leaderboard with a forest plot and the cases that flip."""
    from edsb.report.compare.paired import build_board
    from edsb.report.compare.render import render_board

    if len(run_dirs) < 2:
        raise UsageError("compare needs at least two run directories")
    if fmt == CompareFormat.HTML and output is None:
        raise UsageError("--format html needs -o FILE.html")
    board = build_board(run_dirs, by_level=by_level)
    for note in board.notes:
        err.print(f"warning: {note}", markup=False, highlight=False)
    if fmt == CompareFormat.HTML:
        from edsb.report.compare.html import write_board

        assert output is not None
        written = write_board(board, output)
        err.print(f"board written to {written}", markup=False, highlight=False)
        return
    _emit(
        lambda console: render_board(board, fmt, console=console, show_all=show_all),
        output,
        width=200,
        what="comparison",
    )


@app.command("plan-power", cls=Command)
def plan_power_command(
    run_dirs: Annotated[
        list[Path],
        typer.Argument(
            metavar="RUN_DIR...",
            help="A pilot run directory, or two to pair (their correlation is then measured, not bounded).",
        ),
    ],
    difference: Annotated[
        float,
        typer.Option("--difference", metavar="D", help="The difference in success rate to detect, e.g. 0.1."),
    ],
    power: Annotated[float, typer.Option("--power", metavar="P", help="The chance of detecting it.")] = 0.8,
    as_json: Annotated[bool, typer.Option("--json", help="Print the plan as JSON.")] = False,
) -> None:
    """How many cases and repeats a paired comparison needs to detect a difference in success, planned from a
    pilot run; the benchmark has 40 cases, so beyond them only repeats help (docs/statistics.md)."""
    from edsb.report.power import plan_blocks, plan_power
    from edsb.report.tables import emit

    plan = plan_power(run_dirs, difference, power)
    if as_json:
        sys.stdout.write(plan.model_dump_json(indent=2) + "\n")
        return
    emit(plan_blocks(plan), ReportFormat.TABLE, out)
