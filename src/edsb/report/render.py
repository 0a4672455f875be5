"""`edsb report`: a run's summary, recomputed from results.jsonl, as tables, Markdown or CSV in the paper's layout
(rows = variants, columns = tags, blocks = distraction levels), then its statistics, power, tokens, error kinds,
reasons and per-case counts."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rich.console import Console

from edsb.report.cost import Price, batch_price, estimate_cost, price_for
from edsb.report.formats import ReportFormat, plural
from edsb.report.stats import ALPHA, POWER, REPEATS_PROJECTED
from edsb.report.summary import (
    LEVEL_ROWS,
    MODULES,
    TAG_COLUMNS,
    build_summary,
    label_perturbation,
    paper_rows,
)
from edsb.report.summary_types import RunSummary, VariantSummary
from edsb.report.tables import Block, emit
from edsb.results.rundir import RunDirectory


def open_run(run_dir: Path) -> tuple[RunDirectory, RunSummary]:
    """A run directory and its summary, recomputed from its results (files are only read)."""
    run = RunDirectory.open(run_dir)
    summary = label_perturbation(build_summary(run.results), run.config.perturb)
    if run.notes:
        summary.notes = run.notes
    return run, summary


def load_run(run_dir: Path) -> tuple[dict[str, Any], RunSummary]:
    """(config, summary) of a run directory."""
    run, summary = open_run(run_dir)
    return run.config.model_dump(), summary


def _levels_present(summary: RunSummary) -> list[str]:
    return [
        level
        for level in LEVEL_ROWS
        if any(level in cells for data in summary.variants.values() for cells in data.cells.values())
    ]


def case_rows(summary: RunSummary) -> list[list[str]]:
    rows = []
    for variant, data in summary.variants.items():
        for case, counts in data.by_case.items():
            rows.append([variant, case, str(counts.runs), str(counts.passes), str(counts.errors)])
    return rows


def token_rows(
    summary: RunSummary, config: Mapping[str, Any], prices: tuple[float | None, float | None]
) -> tuple[list[list[str]], Price | None]:
    price = price_for(config.get("model", ""), *prices)
    if price is not None and config.get("batch") and prices == (None, None):  # list prices of a `--batch` run
        price = batch_price(config.get("model", ""), price) or price
    rows = []
    for variant, data in summary.variants.items():
        tokens, total = data.tokens, data.total
        if tokens is None or total is None:
            continue
        row = [variant]
        for module in MODULES:
            counts = tokens.by_module[module]
            row.append(f"{counts.prompt:,} / {counts.completion:,}")
        # the reference's tokens.csv: int() of the rounded mean, so 1234.56 reads 1234
        row.append(f"{int(total.prompt_tokens)} / {int(total.completion_tokens)}")
        estimate = f"${estimate_cost(tokens, price)['total']:.2f}" if price else "-"
        # the provider's own bill, where its replies said it, beside the estimate from list prices
        row.append(estimate if tokens.billed_usd is None else f"{estimate} (billed ${tokens.billed_usd:.2f})")
        rows.append(row)
    return rows, price


def sampler_miss_rows(summary: RunSummary) -> list[list[str]]:
    """Per variant and PI level: failures, execution errors, and how many failures the optimal sampler would have
    passed."""
    return [
        [variant, level, cell.sampler, str(cell.runs), str(cell.failures), str(cell.errors), str(cell.sampler_misses)]
        for variant, data in summary.variants.items()
        for level, cell in data.pi_sampler.items()
    ]


SAMPLER_MISS_TITLE = "PI failures that are sampler misses (the optimal sampler would have passed them)"
SAMPLER_MISS_HEADER = ("variant", "level", "sampler", "runs", "failures", "errors", "sampler misses")


MEAN_TOKENS_NOTE = "mean per run: the paper's, in which an errored run counts 0 tokens"
NO_PRICE_NOTE = (
    "cost: no price known for this model; --price-in and --price-out give one (USD per million prompt and "
    "completion tokens)"
)


def token_notes(summary: RunSummary) -> list[str]:
    """Where the paper's mean (an errored run counts 0 tokens) differs from what the runs used: say why, and give
    the mean over every judged run beside it."""
    notes = []
    for variant, data in summary.variants.items():
        tokens, total = data.tokens, data.total
        if tokens is None or total is None:
            continue
        paper = (int(total.prompt_tokens), int(total.completion_tokens))
        every = (int(tokens.mean_prompt_every_run), int(tokens.mean_completion_every_run))
        if paper != every:
            erred = plural(total.errors, "run")
            notes.append(
                f"{variant}: the mean per run counts an errored run as 0 tokens, as the paper's token table does "
                f"({erred} of {total.runs} erred); over every run it is {every[0]} / {every[1]}"
            )
    return notes


def power_notes(summary: RunSummary) -> list[str]:
    """Why a variant's power figures read `-` (variants with the same reason on one line)."""
    by_note: dict[str, list[str]] = {}
    for variant, data in summary.variants.items():
        if data.power is not None and data.power.note:
            by_note.setdefault(data.power.note, []).append(variant)
    return [POWER_BOUND_NOTE, *(f"-: {', '.join(variants)}: {note}" for note, variants in by_note.items())]


def reason_block(
    summary: RunSummary, title: str, reasons: Callable[[VariantSummary], tuple[dict[str, int], int]]
) -> Block:
    """Reasons counted per variant (what failed plans, execution errors or incomplete runs said), most frequent
    first, with the runs whose reason the summary left out."""
    rows, notes = [], []
    for variant, data in summary.variants.items():
        counts, other = reasons(data)
        rows += [[variant, reason, str(count)] for reason, count in counts.items()]
        if other:
            notes.append(f"{variant}: {plural(other, 'more run')} with other reasons (--format samples lists each)")
    return Block(title, ["variant", "reason", "runs"], rows, notes)


def _incomplete_rows(summary: RunSummary) -> list[list[str]]:
    return [
        [variant, f"incomplete: {kind} (not counted)", str(count)]
        for variant, data in summary.variants.items()
        for kind, count in sorted(data.incomplete_kinds.items())
    ]


def error_rows(summary: RunSummary) -> list[list[str]]:
    rows = [
        [variant, kind, str(count)]
        for variant, data in summary.variants.items()
        for kind, count in sorted(data.error_kinds.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    return rows + _incomplete_rows(summary)


CSV_HEADER = (
    "variant", "tag", "distraction", "runs", "passes", "errors", "success_rate", "execution_rate",
    "success_low", "success_high", "execution_low", "execution_high",
)  # fmt: skip


def tidy_csv(summary: RunSummary) -> str:
    """One header and one row per cell (variant × tag × distraction level, `Total` included): ready for pandas or
    a spreadsheet. Intervals are Wilson 95% (four decimals); rates are rounded as in the paper. A perturbed run's
    rows end with a `perturbation` column (`perturbed (seed 3)`)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    label = summary.perturbation
    extra = [label] if label else []
    writer.writerow([*CSV_HEADER, *(["perturbation"] if label else [])])
    for variant, data in summary.variants.items():
        for tag in TAG_COLUMNS:
            for level, cell in data.cells.get(tag, {}).items():
                writer.writerow(
                    [variant, tag, level, cell.runs, cell.passes, cell.errors, cell.success_rate,
                     cell.execution_rate, *cell.success_interval, *cell.execution_interval, *extra]
                )  # fmt: skip
    return buffer.getvalue()


POWER_TITLE = (
    "Power: an upper bound on the smallest difference in success a paired comparison with another run of this"
    f" design detects ({POWER:.0%} power, α = {ALPHA:g}; docs/statistics.md)"
)
POWER_BOUND_NOTE = (
    "MDD is a bound: it takes the other run's case-level luck as independent of this run's, while two models that"
    " find the same cases hard covary, which shrinks the variance of their difference; `edsb compare` states what"
    " a pair of runs actually detects, and `edsb plan-power` plans cases and repeats from a pilot"
)


def power_header() -> list[str]:
    repeats = " / ".join(str(r) for r in REPEATS_PROJECTED)
    return ["variant", "cases", "case × level cells", "repeats", "design effect", "intra-case correlation", "MDD",
            f"MDD with {repeats} repeats"]  # fmt: skip


def _number(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def power_rows(summary: RunSummary) -> list[list[str]]:
    """Per variant: the design, the clustering observed and the minimum detectable difference (MDD), as run and
    with other repeat counts (`-`: no variation to estimate it from, or no cell with two repeats)."""
    rows = []
    for variant, data in summary.variants.items():
        power = data.power
        if power is None:
            continue
        rows.append(
            [
                variant,
                str(power.cases),
                str(power.cells),
                str(power.repeats),
                _number(power.design_effect, 2),
                _number(power.intra_case_correlation, 2),
                _number(power.minimum_detectable_difference),
                " / ".join(_number(power.by_repeats.get(str(r)), 2) for r in REPEATS_PROJECTED),
            ]
        )
    return rows


def statistics_rows(summary: RunSummary) -> list[list[str]]:
    """Per variant with judged runs: its success with the Wilson interval, clustered SE, pass^k and incomplete runs."""
    rows = []
    for variant, data in summary.variants.items():
        if not data.runs or data.success_rate is None or data.success_interval is None:
            continue
        se, (low, high) = data.success_se_clustered, data.success_interval
        rows.append(
            [
                variant,
                str(data.runs),
                f"{data.success_rate} [{low:.2f}, {high:.2f}]",
                f"{se:.3f}" if se is not None else "-",
                " ".join(f"{k}:{v:.2f}" for k, v in data.pass_hat_k.items() if v is not None) or "-",
                str(data.incomplete),
            ]
        )
    return rows


def _paper_blocks(summary: RunSummary, intervals: bool) -> list[Block]:
    """The paper's tables: one block per distraction level any variant ran, all levels first."""
    blocks = []
    for level in _levels_present(summary):
        title = "Success (execution), all distraction levels" if level == "Total" else f"Distraction level {level}"
        blocks.append(Block(title, ["variant", *TAG_COLUMNS], paper_rows(summary, level, intervals=intervals)))
    return blocks


# The reasons a summary counts, each with the runs whose reason it left out.
REASON_BLOCKS: tuple[tuple[str, Callable[[VariantSummary], tuple[dict[str, int], int]]], ...] = (
    ("Why runs erred (most frequent reasons)", lambda data: (data.error_reasons, data.error_reasons_other_runs)),
    (
        "Why runs are incomplete (not counted; retried on resume)",
        lambda data: (data.incomplete_reasons, data.incomplete_reasons_other_runs),
    ),
    ("Why plans failed (most frequent reasons)", lambda data: (data.failure_reasons, data.failure_reasons_other_runs)),
)


def _detail_blocks(
    summary: RunSummary, config: Mapping[str, Any], prices: tuple[float | None, float | None], show_all: bool
) -> list[Block]:
    """Everything after the paper's tables: statistics, power, tokens and cost, sampler misses, error kinds, the
    reasons runs erred, stayed incomplete or failed, and the per-case counts (long lists limited unless
    `show_all`)."""
    header = ["variant", "runs", "success [95% CI]", "clustered SE", "pass^k", "incomplete"]
    blocks = [
        Block("Statistics", header, statistics_rows(summary)),
        Block(POWER_TITLE, power_header(), power_rows(summary), power_notes(summary)),
    ]
    tokens, price = token_rows(summary, config, prices)
    token_header = ["variant", "narrator", "event parser", "mean per run", "cost"]  # one line at 80 columns
    header_notes = [MEAN_TOKENS_NOTE, f"cost: {price.source}" if price else NO_PRICE_NOTE]
    blocks.append(Block("Tokens (prompt / completion)", token_header, tokens, header_notes + token_notes(summary)))
    blocks.append(Block(SAMPLER_MISS_TITLE, list(SAMPLER_MISS_HEADER), sampler_miss_rows(summary)))
    blocks.append(Block("Execution errors by kind", ["variant", "kind", "runs"], error_rows(summary)))
    blocks += [reason_block(summary, title, reasons).limited(show_all) for title, reasons in REASON_BLOCKS]
    per_case = Block("Per case", ["variant", "case", "runs", "passed", "errors"], case_rows(summary))
    blocks.append(per_case.limited(show_all))
    return blocks


def render_report(
    config: Mapping[str, Any],
    summary: RunSummary,
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
    blocks = _paper_blocks(summary, intervals)
    if brief:
        not_counted = "Not counted: no answer from the model, or an edsb fault (retried on resume)"
        blocks.append(Block(not_counted, ["variant", "kind", "runs"], _incomplete_rows(summary)))
    else:
        blocks += _detail_blocks(summary, config, prices, show_all)
    return emit(blocks, fmt, console, summary.perturbation)
