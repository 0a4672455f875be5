"""`edsb report` and `edsb compare`: summaries recomputed from results.jsonl, rendered as tables, Markdown, CSV or
JSON in the paper's layout (rows = variants, columns = tags, blocks = distraction levels)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from edsb.report.cost import estimate_cost, price_for
from edsb.report.formats import CompareFormat, ReportFormat
from edsb.report.summary import LEVEL_ROWS, MODULES, TAG_COLUMNS, build_summary, label_perturbation, paper_rows
from edsb.results.rundir import RunDirectory
from edsb.scoring.metrics import cell_text


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
        row.append(
            f"{data['cells']['Total']['Total']['prompt_tokens']:.0f} / "
            f"{data['cells']['Total']['Total']['completion_tokens']:.0f}"
        )
        row.append(f"${estimate_cost(tokens, price)['total']:.2f}" if price else "-")
        rows.append(row)
    return rows, price


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


def coverage_differences(named: Sequence[tuple[str, Mapping[str, Any]]]) -> list[str]:
    """What differs between the runs compared: which cases and distraction levels each one judged. Runs over
    different selections are not comparable cell by cell, so `edsb compare` warns."""
    covered = []
    for _, summary in named:
        cases = {case for data in summary["variants"].values() for case in data.get("by_case", {})}
        levels = {
            level
            for data in summary["variants"].values()
            for level in data.get("cells", {}).get("Total", {})
            if level != "Total"
        }
        covered.append((cases, levels))
    (base_name, _), (base_cases, base_levels) = named[0], covered[0]
    notes = []
    for (name, _), (cases, levels) in zip(named[1:], covered[1:], strict=True):
        if cases != base_cases:
            only = sorted(base_cases ^ cases, key=int)
            notes.append(f"{name} and {base_name} cover different cases (in one only: {', '.join(only)})")
        if levels != base_levels:
            notes.append(
                f"{name} and {base_name} cover different distraction levels ({', '.join(sorted(levels)) or 'none'} "
                f"vs {', '.join(sorted(base_levels)) or 'none'})"
            )
    return notes


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
    tokens, price = token_rows(summary, config, prices)
    cost_header = f"cost ({price.source})" if price else "cost (no price known: --price-in/--price-out)"
    blocks.append(
        (
            "Tokens (prompt / completion)",
            ["variant", "narrator", "event parser", "mean per run (paper: errored runs count 0)", cost_header],
            tokens,
        )
    )
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


def compare_rows(named: Sequence[tuple[str, Mapping[str, Any]]]) -> list[list[str]]:
    """Per variant and tag (all levels): each run's success, the difference to the first, and whether the Wilson
    intervals overlap (a quick, conservative check: overlap does not prove equality)."""
    rows = []
    variants = list(dict.fromkeys(v for _, summary in named for v in summary["variants"]))
    for variant in variants:
        for tag in TAG_COLUMNS:
            cells = [
                summary["variants"].get(variant, {}).get("cells", {}).get(tag, {}).get("Total") for _, summary in named
            ]
            if all(cell is None for cell in cells):
                continue
            row = [variant, tag]
            reference = cells[0]
            for cell in cells:
                row.append("-" if cell is None else cell_text(cell["success_rate"], cell["execution_rate"]))
            for cell in cells[1:]:
                if cell is None or reference is None:
                    row += ["-", "-"]
                    continue
                diff = cell["success_rate"] - reference["success_rate"]
                low_a, high_a = reference["success_interval"]
                low_b, high_b = cell["success_interval"]
                overlap = low_a <= high_b and low_b <= high_a
                row += [f"{diff:+.2f}", "yes" if overlap else "NO"]
            rows.append(row)
    return rows


def compare_header(names: Sequence[str]) -> list[str]:
    header = ["variant", "tag", *names]
    for name in names[1:]:
        header += [f"Δ {name}", "CIs overlap"]
    return header


def render_compare(
    named: Sequence[tuple[str, Mapping[str, Any]]], fmt: CompareFormat, console: Console | None = None
) -> str | None:
    """`edsb compare`: Markdown or CSV as text; `table` prints to the console and returns None."""
    header, rows = compare_header([name for name, _ in named]), compare_rows(named)
    if fmt == CompareFormat.MARKDOWN:
        return _markdown(header, rows)
    if fmt == CompareFormat.CSV:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
        return buffer.getvalue()
    table = Table(*header, title="success (execution), all distraction levels")
    for row in rows:
        table.add_row(*row)
    (console or Console()).print(table)
    return None
