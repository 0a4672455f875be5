"""`edsb report` and `edsb compare`: summaries recomputed from results.jsonl, rendered as tables, Markdown, CSV or
JSON in the paper's layout (rows = variants, columns = tags, blocks = distraction levels)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.table import Column, Table
from rich.text import Text

from edsb.report.cost import estimate_cost, price_for
from edsb.report.formats import CompareFormat, ReportFormat, paper_order, plural
from edsb.report.paired import Board, Difference, PairedComparison, Standing
from edsb.report.stats import ALPHA, POWER, REPEATS_PROJECTED
from edsb.report.summary import (
    LEVEL_ROWS,
    MODULES,
    TAG_COLUMNS,
    build_summary,
    label_perturbation,
    paper_rows,
)
from edsb.results import RunKey
from edsb.results.rundir import RunDirectory
from edsb.scoring.metrics import TOTAL


def open_run(run_dir: Path) -> tuple[RunDirectory, dict[str, Any]]:
    """A run directory and its summary, recomputed from its results (files are only read)."""
    run = RunDirectory.open(run_dir)
    summary = label_perturbation(build_summary(run.results), run.config.perturb)
    if run.notes:
        summary["notes"] = run.notes
    return run, summary


def load_run(run_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(config, summary) of a run directory."""
    run, summary = open_run(run_dir)
    return run.config.model_dump(), summary


def _levels_present(summary: Mapping[str, Any]) -> list[str]:
    return [
        level
        for level in LEVEL_ROWS
        if any(level in cells for data in summary["variants"].values() for cells in data.get("cells", {}).values())
    ]


def case_rows(summary: Mapping[str, Any]) -> list[list[str]]:
    rows = []
    for variant, data in summary["variants"].items():
        for case, counts in data.get("by_case", {}).items():
            rows.append([variant, case, str(counts["runs"]), str(counts["passes"]), str(counts["errors"])])
    return rows


def token_rows(summary: Mapping[str, Any], config: Mapping[str, Any], prices: tuple[float | None, float | None]):
    price = price_for(config.get("model", ""), *prices)
    rows = []
    for variant, data in summary["variants"].items():
        tokens = data.get("tokens")
        if not tokens:
            continue
        by_module = tokens["by_module"]
        row = [variant]
        for module in MODULES:
            row.append(f"{by_module[module]['prompt']:,} / {by_module[module]['completion']:,}")
        total = data["cells"]["Total"]["Total"]
        # the reference's tokens.csv: int() of the rounded mean, so 1234.56 reads 1234
        row.append(f"{int(total['prompt_tokens'])} / {int(total['completion_tokens'])}")
        row.append(f"${estimate_cost(tokens, price)['total']:.2f}" if price else "-")
        rows.append(row)
    return rows, price


def sampler_miss_rows(summary: Mapping[str, Any]) -> list[list[str]]:
    """Per variant and PI level: failures, execution errors, and how many failures the optimal sampler would have
    passed."""
    return [
        [variant, level, cell["sampler"], str(cell["runs"]), str(cell["failures"]), str(cell.get("errors", 0)),
         str(cell["sampler_misses"])]
        for variant, data in summary["variants"].items()
        for level, cell in data.get("pi_sampler", {}).items()
    ]  # fmt: skip


SAMPLER_MISS_TITLE = "PI failures that are sampler misses (the optimal sampler would have passed them)"
SAMPLER_MISS_HEADER = ("variant", "level", "sampler", "runs", "failures", "errors", "sampler misses")


def token_notes(summary: Mapping[str, Any]) -> list[str]:
    """Where the paper's mean (an errored run counts 0 tokens) differs from what the runs used: say why, and give
    the mean over every judged run beside it."""
    notes = []
    for variant, data in summary["variants"].items():
        tokens, total = data.get("tokens"), data.get("cells", {}).get("Total", {}).get("Total")
        if not tokens or total is None or "mean_prompt_every_run" not in tokens:
            continue
        paper = (int(total["prompt_tokens"]), int(total["completion_tokens"]))
        every = (int(tokens["mean_prompt_every_run"]), int(tokens["mean_completion_every_run"]))
        if paper != every:
            erred = plural(total["errors"], "run")
            notes.append(
                f"{variant}: the mean per run counts an errored run as 0 tokens, as the paper's token table does "
                f"({erred} of {total['runs']} erred); over every run it is {every[0]} / {every[1]}"
            )
    return notes


def power_notes(summary: Mapping[str, Any]) -> list[str]:
    """Why a variant's power figures read `-` (variants with the same reason on one line)."""
    by_note: dict[str, list[str]] = {}
    for variant, data in summary["variants"].items():
        if note := data.get("power", {}).get("note"):
            by_note.setdefault(note, []).append(variant)
    return [f"-: {', '.join(variants)}: {note}" for note, variants in by_note.items()]


def reason_block(summary: Mapping[str, Any], title: str, field: str) -> Block:
    """Reasons counted per variant (`failure_reasons`, `error_reasons`, `incomplete_reasons`), most frequent first,
    with the runs whose reason the summary left out."""
    rows, notes = [], []
    for variant, data in summary["variants"].items():
        rows += [[variant, reason, str(count)] for reason, count in data.get(field, {}).items()]
        if other := data.get(f"{field}_other_runs"):
            notes.append(f"{variant}: {plural(other, 'more run')} with other reasons (--format samples lists each)")
    return Block(title, ["variant", "reason", "runs"], rows, notes)


def _incomplete_rows(summary: Mapping[str, Any]) -> list[list[str]]:
    return [
        [variant, f"incomplete: {kind} (not counted)", str(count)]
        for variant, data in summary["variants"].items()
        for kind, count in sorted(data.get("incomplete_kinds", {}).items())
    ]


def error_rows(summary: Mapping[str, Any]) -> list[list[str]]:
    rows = [
        [variant, kind, str(count)]
        for variant, data in summary["variants"].items()
        for kind, count in sorted(data.get("error_kinds", {}).items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    return rows + _incomplete_rows(summary)


ROWS_SHOWN = 20  # rows of a long list (per case, cases that flip) shown unless `--all`


@dataclass(frozen=True)
class Block:
    """One table of a report: a title, a header, the rows, notes printed under it, and how many rows a limit
    left out (the output says so, and how to see them)."""

    title: str
    header: Sequence[str]
    rows: list[list[str]]
    notes: Sequence[str] = ()
    hidden: int = 0

    def limited(self, show_all: bool, shown: int = ROWS_SHOWN) -> Block:
        """The first `shown` rows unless `show_all`; the rest counted in `hidden`."""
        if show_all or len(self.rows) <= shown:
            return self
        return replace(self, rows=self.rows[:shown], hidden=len(self.rows) - shown)

    @property
    def footer(self) -> list[str]:
        more = [f"{plural(self.hidden, 'more row')} not shown: --all shows every one"] if self.hidden else []
        return [*self.notes, *more]


def _markdown(block: Block) -> str:
    lines = ["| " + " | ".join(block.header) + " |", "|" + "---|" * len(block.header)]
    lines += ["| " + " | ".join(row) + " |" for row in block.rows]
    return "\n\n".join(["\n".join(lines), *block.footer])  # each note a paragraph of its own


CSV_HEADER = (
    "variant", "tag", "distraction", "runs", "passes", "errors", "success_rate", "execution_rate",
    "success_low", "success_high", "execution_low", "execution_high",
)  # fmt: skip


def tidy_csv(summary: Mapping[str, Any]) -> str:
    """One header and one row per cell (variant × tag × distraction level, `Total` included): ready for pandas or
    a spreadsheet. Intervals are Wilson 95% (four decimals); rates are rounded as in the paper. A perturbed run's
    rows end with a `perturbation` column (`perturbed (seed 3)`)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    label = summary.get("perturbation")
    extra = [label] if label else []
    writer.writerow([*CSV_HEADER, *(["perturbation"] if label else [])])
    for variant, data in summary["variants"].items():
        for tag in TAG_COLUMNS:
            for level, cell in data.get("cells", {}).get(tag, {}).items():
                writer.writerow(
                    [variant, tag, level, cell["runs"], cell["passes"], cell["errors"], cell["success_rate"],
                     cell["execution_rate"], *cell["success_interval"], *cell["execution_interval"], *extra]
                )  # fmt: skip
    return buffer.getvalue()


POWER_TITLE = (
    "Power: the smallest difference in success a paired comparison with another run of this design detects"
    f" ({POWER:.0%} power, α = {ALPHA:g}; docs/statistics.md)"
)


def power_header() -> list[str]:
    repeats = " / ".join(str(r) for r in REPEATS_PROJECTED)
    return ["variant", "cases", "case × level cells", "repeats", "design effect", "intra-case correlation", "MDD",
            f"MDD with {repeats} repeats"]  # fmt: skip


def _number(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def power_rows(summary: Mapping[str, Any]) -> list[list[str]]:
    """Per variant: the design, the clustering observed and the minimum detectable difference (MDD), as run and
    with other repeat counts (`-`: no variation to estimate it from, or no cell with two repeats)."""
    rows = []
    for variant, data in summary["variants"].items():
        power = data.get("power")
        if not power:
            continue
        rows.append(
            [
                variant,
                str(power["cases"]),
                str(power["cells"]),
                str(power["repeats"]),
                _number(power["design_effect"], 2),
                _number(power["intra_case_correlation"], 2),
                _number(power["minimum_detectable_difference"]),
                " / ".join(_number(power["by_repeats"].get(str(r)), 2) for r in REPEATS_PROJECTED),
            ]
        )
    return rows


def render_report(
    config: Mapping[str, Any],
    summary: Mapping[str, Any],
    fmt: ReportFormat = ReportFormat.TABLE,
    *,
    intervals: bool = False,
    prices: tuple[float | None, float | None] = (None, None),
    console: Console | None = None,
    brief: bool = False,
    show_all: bool = False,
) -> str | None:
    """Markdown/CSV as text; `table` prints to the console and returns None. `brief` keeps the paper's blocks only
    (what `edsb run` shows at the end); `show_all` lifts the limit on long lists. The JSON results document and the
    sample log are written by `report.card` and `report.samples`."""
    if fmt in (ReportFormat.HTML, ReportFormat.JSON, ReportFormat.SAMPLES):
        raise ValueError(f"the {fmt} report is not a table: see report.card, report.samples and report.html")
    if fmt == ReportFormat.CSV:
        return tidy_csv(summary)
    blocks: list[Block] = []
    for level in _levels_present(summary):
        title = "Success (execution), all distraction levels" if level == "Total" else f"Distraction level {level}"
        blocks.append(Block(title, ["variant", *TAG_COLUMNS], paper_rows(summary, level, intervals=intervals)))
    if brief:
        not_counted = "Not counted: no answer from the model, or an edsb fault (retried on resume)"
        blocks.append(Block(not_counted, ["variant", "kind", "runs"], _incomplete_rows(summary)))
        return _emit(blocks, fmt, console, summary.get("perturbation"))
    stats_rows = []
    for variant, data in summary["variants"].items():
        if not data.get("runs"):
            continue
        se = data.get("success_se_clustered")
        pass_k = data.get("pass_hat_k", {})
        stats_rows.append(
            [
                variant,
                str(data["runs"]),
                f"{data['success_rate']} [{data['success_interval'][0]:.2f}, {data['success_interval'][1]:.2f}]",
                f"{se:.3f}" if se is not None else "-",
                " ".join(f"{k}:{v:.2f}" for k, v in pass_k.items() if v is not None) or "-",
                str(data.get("incomplete", 0)),
            ]
        )
    header = ["variant", "runs", "success [95% CI]", "clustered SE", "pass^k", "incomplete"]
    blocks.append(Block("Statistics", header, stats_rows))
    blocks.append(Block(POWER_TITLE, power_header(), power_rows(summary), power_notes(summary)))
    tokens, price = token_rows(summary, config, prices)
    cost_header = f"cost ({price.source})" if price else "cost (no price known: --price-in, --price-out)"
    token_header = ["variant", "narrator", "event parser", "mean per run (paper: errored runs count 0)", cost_header]
    blocks.append(Block("Tokens (prompt / completion)", token_header, tokens, token_notes(summary)))
    blocks.append(Block(SAMPLER_MISS_TITLE, list(SAMPLER_MISS_HEADER), sampler_miss_rows(summary)))
    blocks.append(Block("Execution errors by kind", ["variant", "kind", "runs"], error_rows(summary)))
    for title, field in (
        ("Why runs erred (most frequent reasons)", "error_reasons"),
        ("Why runs are incomplete (not counted; retried on resume)", "incomplete_reasons"),
        ("Why plans failed (most frequent reasons)", "failure_reasons"),
    ):
        blocks.append(reason_block(summary, title, field).limited(show_all))
    per_case = Block("Per case", ["variant", "case", "runs", "passed", "errors"], case_rows(summary))
    blocks.append(per_case.limited(show_all))
    return _emit(blocks, fmt, console, summary.get("perturbation"))


def _emit(blocks: Sequence[Block], fmt: ReportFormat, console: Console | None, label: str | None = None) -> str | None:
    """Markdown as text, or the tables printed to the console. `label` (a perturbed run's `perturbed (seed N)`) ends
    every block's title, so no table is mistaken for the benchmark's own numbers."""
    if label:
        blocks = [replace(block, title=f"{block.title} — {label}") for block in blocks]
    if fmt == ReportFormat.MARKDOWN:
        return "\n\n".join(f"### {block.title}\n\n{_markdown(block)}" for block in blocks if block.rows)
    console = console or Console()
    for block in blocks:
        if block.rows:
            print_block(console, block)
    return None


def column_widths(header: Sequence[str], rows: Sequence[Sequence[str]], available: int) -> list[int] | None:
    """Content widths that fit `available` cells in all, no column narrower than its longest word (so nothing is
    cut or broken mid-word), the room left going to the columns that need least of it to show their cells on one
    line; None when even the longest words do not fit side by side. (rich's own shrinking squeezes the widest
    columns first, below their longest word.)"""
    columns = list(zip(header, *rows, strict=True))
    shortest = [max(cell_len(word) for text in column for word in text.split() or [""]) for column in columns]
    # What a column needs to show every cell on one line (a header may wrap: it is one line of many).
    longest = [
        max(least, *(cell_len(text) for text in column[1:])) for least, column in zip(shortest, columns, strict=True)
    ]
    room = available - sum(shortest)
    if room < 0:
        return None
    widths = list(shortest)
    # The columns that need least room get all of it first (each one fewer wrapped cell), then the rest is shared.
    for index in sorted(range(len(widths)), key=lambda i: longest[i] - shortest[i]):
        extra = min(longest[index] - widths[index], room)
        widths[index] += extra
        room -= extra
    return widths


def print_block(console: Console, block: Block) -> None:
    """A block at the console's width, never cut: the title and notes wrap at spaces; the table wraps its cells
    at spaces, and one too wide even so (its longest words side by side exceed the width) is printed stacked, a
    `header  value` line per cell, each row a group of its own."""
    console.print(Text(block.title, style="bold"), soft_wrap=False)
    # A table's frame: a rule between and around the columns, and a space either side of every cell.
    widths = column_widths(block.header, block.rows, console.width - 3 * len(block.header) - 1)
    if widths is not None:
        columns = (Column(name, width=width, overflow="fold") for name, width in zip(block.header, widths, strict=True))
        table = Table(*columns)
        for row in block.rows:
            table.add_row(*row)
        console.print(table, soft_wrap=False)
    else:
        label = min(max(cell_len(name) for name in block.header), console.width // 3)
        for number, row in enumerate(block.rows):
            stacked = Table.grid(
                Column(style="bold", width=label, overflow="fold"), Column(overflow="fold"), padding=(0, 2)
            )
            for name, value in zip(block.header, row, strict=True):
                stacked.add_row(name, value)
            if number:
                console.print()
            console.print(stacked, soft_wrap=False)
    for line in block.footer:
        console.print(Text(line, style="dim"), soft_wrap=False)


def _p_text(p: float | None) -> str:
    return "-" if p is None else "<0.001" if p < 0.001 else f"{p:.3f}"


def _difference_text(d: Difference) -> str:
    text = f"{d.difference:+.2f}"
    return text if d.low is None or d.high is None else f"{text} [{d.low:+.2f}, {d.high:+.2f}]"


def _standing_text(entry: Standing) -> str:
    interval = entry.success_interval
    return entry.cell if interval is None else f"{entry.cell} [{interval[0]:.2f}, {interval[1]:.2f}]"


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
    notes = [
        f"base: {base}; run: {other}. Δ: run − base, with its 95% interval clustered by case; only base, only run:"
        " the pairs where only that side passed (or executed)"
    ]
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
    return Block(title, header, rows, notes)


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


def _difference_json(d: Difference) -> dict[str, Any]:
    data = asdict(d)
    del data["metric"], data["pairs"], data["cases"]
    data["interval"] = None if d.low is None or d.high is None else [d.low, d.high]
    del data["low"], data["high"]
    return data


def board_json(board: Board) -> dict[str, Any]:
    """The whole comparison as plain data (`edsb compare --format json`)."""
    return {
        "base": board.base.name,
        "alpha": board.alpha,
        "method": "paired on the run key; CR1 standard error clustered by case; t with cases − 1 degrees of freedom",
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
                        "success": _difference_json(row.success),
                        "execution": _difference_json(row.execution),
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
        for metric, rate, interval in (
            ("success", e.success_rate, e.success_interval),
            ("execution", e.execution_rate, e.execution_interval),
        ):
            low, high = interval if interval is not None else (None, None)
            line = [e.run, e.variant, e.tag, e.level, metric, e.runs, *map(_csv_number, (rate, low, high))]
            if row is None:
                line += [""] * (len(BOARD_CSV_HEADER) - len(line))
            else:
                d = row.success if metric == "success" else row.execution
                line += [board.base.name, d.pairs, d.cases]
                line += map(_csv_number, (d.base_rate, d.run_rate, d.difference, d.low, d.high, d.p_value))
                line += [d.base_only, d.run_only]
            writer.writerow(line)
    return buffer.getvalue()


def render_board(
    board: Board, fmt: CompareFormat, console: Console | None = None, *, show_all: bool = False
) -> str | None:
    """`edsb compare` as Markdown, CSV or JSON text; `table` prints to the console and returns None (the HTML
    page is written by report.board.write_board). `show_all` lifts the limit on the list of cases that flip."""
    if fmt == CompareFormat.JSON:
        return json.dumps(board_json(board), indent=2)
    if fmt == CompareFormat.CSV:
        return board_csv(board)
    if fmt == CompareFormat.HTML:
        raise ValueError("the HTML board is written by report.board.write_board")
    header, rows = leaderboard(board)
    blocks = [Block("Leaderboard: success (execution) [95% interval of success, clustered by case]", header, rows)]
    blocks += [difference_block(board, comparison) for comparison in board.comparisons]
    discordant = Block(
        "Cases that flip: the runs (level, repeat) of each case that passed in the base and failed in the run, or "
        "the reverse",
        ["run", "variant", "case", "passed only in the base", "passed only in the run"],
        discordant_rows(board),
        [f"base: {board.base.name}"],
    )
    blocks.append(discordant.limited(show_all))
    return _emit(blocks, ReportFormat.MARKDOWN if fmt == CompareFormat.MARKDOWN else ReportFormat.TABLE, console)
