"""`edsb report` and `edsb compare`: summaries recomputed from results.jsonl, rendered as tables, Markdown, CSV or
JSON in the paper's layout (rows = variants, columns = tags, blocks = distraction levels)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from edsb.report.cost import estimate_cost, price_for
from edsb.report.formats import CompareFormat, ReportFormat
from edsb.report.paired import Board, Difference, PairedComparison, Standing
from edsb.report.stats import ALPHA, POWER, REPEATS_PROJECTED
from edsb.report.summary import LEVEL_ROWS, MODULES, TAG_COLUMNS, build_summary, label_perturbation, paper_rows
from edsb.results import RunKey
from edsb.results.rundir import RunDirectory
from edsb.scoring.metrics import TOTAL


def load_run(run_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(config, summary) of a run directory, the summary recomputed from its results (files are only read)."""
    run = RunDirectory.open(run_dir)
    summary = label_perturbation(build_summary(run.results, run.config.variants), run.config.perturb)
    if run.notes:
        summary["notes"] = run.notes
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
    """Per variant and PI level: failures, and how many of them the optimal sampler would have passed."""
    return [
        [variant, level, cell["sampler"], str(cell["runs"]), str(cell["failures"]), str(cell["sampler_misses"])]
        for variant, data in summary["variants"].items()
        for level, cell in data.get("pi_sampler", {}).items()
    ]


SAMPLER_MISS_TITLE = "PI failures that are sampler misses (the optimal sampler would have passed them)"
SAMPLER_MISS_HEADER = ("variant", "level", "sampler", "runs", "failures", "sampler misses")


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


def _markdown(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


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
) -> str | None:
    """Markdown/CSV/JSON as text; `table` prints to the console and returns None. `brief` keeps the paper's
    blocks only (what `edsb run` shows at the end)."""
    if fmt == ReportFormat.HTML:
        raise ValueError("the HTML report is written by report.html.write_html_report")
    if fmt == ReportFormat.JSON:
        return json.dumps(summary, indent=2)
    levels = _levels_present(summary)
    if fmt == ReportFormat.CSV:
        return tidy_csv(summary)
    blocks: list[tuple[str, Sequence[str], list[list[str]]]] = []
    for level in levels:
        title = "Success (execution), all distraction levels" if level == "Total" else f"Distraction level {level}"
        blocks.append((title, ["variant", *TAG_COLUMNS], paper_rows(summary, level, intervals=intervals)))
    if brief:
        blocks.append(
            (
                "Not counted: no answer from the model, or an edsb fault (retried on resume)",
                ["variant", "kind", "runs"],
                _incomplete_rows(summary),
            )
        )
    stats_rows = []
    for variant, data in summary["variants"].items():
        if brief or not data.get("runs"):
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
    blocks.append(
        ("Statistics", ["variant", "runs", "success [95% CI]", "clustered SE", "pass^k", "incomplete"], stats_rows)
    )
    if brief:
        return _emit(blocks, fmt, console, summary.get("perturbation"))
    blocks.append((POWER_TITLE, power_header(), power_rows(summary)))
    tokens, price = token_rows(summary, config, prices)
    cost_header = f"cost ({price.source})" if price else "cost (no price known: --price-in/--price-out)"
    blocks.append(
        (
            "Tokens (prompt / completion)",
            ["variant", "narrator", "event parser", "mean per run (paper: errored runs count 0)", cost_header],
            tokens,
        )
    )
    blocks.append((SAMPLER_MISS_TITLE, list(SAMPLER_MISS_HEADER), sampler_miss_rows(summary)))
    blocks.append(("Execution errors by kind", ["variant", "kind", "runs"], error_rows(summary)))
    reasons = [
        [variant, reason, str(count)]
        for variant, data in summary["variants"].items()
        for reason, count in data.get("failure_reasons", {}).items()
    ]
    blocks.append(("Why plans failed (most frequent reasons)", ["variant", "reason", "runs"], reasons))
    blocks.append(("Per case", ["variant", "case", "runs", "passed", "errors"], case_rows(summary)))
    return _emit(blocks, fmt, console, summary.get("perturbation"))


def _emit(
    blocks: Sequence[tuple[str, Sequence[str], list[list[str]]]],
    fmt: ReportFormat,
    console: Console | None,
    label: str | None = None,
) -> str | None:
    """`label` (a perturbed run's `perturbed (seed N)`) ends every block's title, so no table is mistaken for the
    benchmark's own numbers."""
    if label:
        blocks = [(f"{title} — {label}", header, rows) for title, header, rows in blocks]
    if fmt == ReportFormat.MARKDOWN:
        return "\n\n".join(f"### {title}\n\n{_markdown(header, rows)}" for title, header, rows in blocks if rows)
    console = console or Console()
    for title, header, rows in blocks:
        if not rows:
            continue
        table = Table(*header, title=title)
        for row in rows:
            table.add_row(*row)
        console.print(table)
    return None


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
    variants = list(dict.fromkeys(e.variant for e in board.standings))
    cells = {(e.run, e.variant): e for e in board.standings if e.tag == TOTAL and e.level == TOTAL}
    rows = [
        [run.name, *(_standing_text(cells[(run.name, v)]) if (run.name, v) in cells else "-" for v in variants)]
        for run in board.runs
    ]
    return ["run", *variants], rows


def difference_block(board: Board, comparison: PairedComparison) -> tuple[str, list[str], list[list[str]]]:
    """The paired differences of one later run to the first: a row per variant, tag (and level) and metric, with
    the discordant pairs (passed, or executed, in one run only)."""
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
    title = (
        f"{other} − {base}: paired differences over {c.pairs} shared runs"
        + (f" (left out: {', '.join(left_out)})" if left_out else "")
        + " (95% interval clustered by case; only X: the pairs where only X passed, or executed)"
    )
    level = ["level"] if board.by_level else []
    header = [
        "variant",
        "tag",
        *level,
        "metric",
        "pairs",
        base,
        other,
        "Δ [95% CI]",
        "p",
        f"only {base}",
        f"only {other}",
    ]
    rows = []
    for row in comparison.rows:
        for d in (row.success, row.execution):
            rows.append(
                [row.variant, row.tag, *([row.level] if board.by_level else []), d.metric, str(d.pairs),
                 f"{d.base_rate:.2f}", f"{d.run_rate:.2f}", _difference_text(d), _p_text(d.p_value),
                 str(d.base_only), str(d.run_only)]
            )  # fmt: skip
    return title, header, rows


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


def render_board(board: Board, fmt: CompareFormat, console: Console | None = None) -> str | None:
    """`edsb compare` as Markdown, CSV or JSON text; `table` prints to the console and returns None (the HTML
    page is written by report.board.write_board)."""
    if fmt == CompareFormat.JSON:
        return json.dumps(board_json(board), indent=2)
    if fmt == CompareFormat.CSV:
        return board_csv(board)
    if fmt == CompareFormat.HTML:
        raise ValueError("the HTML board is written by report.board.write_board")
    header, rows = leaderboard(board)
    blocks: list[tuple[str, Sequence[str], list[list[str]]]] = [
        ("Leaderboard: success (execution) [95% interval of success, clustered by case]", header, rows)
    ]
    blocks += [difference_block(board, comparison) for comparison in board.comparisons]
    blocks.append(
        (
            "Discordant cases: the runs (level, repeat) of each case that passed in one run and failed in the other",
            ["run", "variant", "case", f"passed only in {board.base.name}", "passed only in the run"],
            discordant_rows(board),
        )
    )
    return _emit(blocks, ReportFormat.MARKDOWN if fmt == CompareFormat.MARKDOWN else ReportFormat.TABLE, console)
