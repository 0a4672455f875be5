"""The `edsb` command line: a thin typer layer over the packages."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from edsb.data.benchmark import Benchmark
from edsb.data.check import check_data
from edsb.data.download import DEFAULT_URL, fetch_data
from edsb.data.location import resolve_data_dir
from edsb.data.models import TAGS
from edsb.data.selection import select_cases
from edsb.errors import EdsbError, UsageError

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="Event-Driven Storytelling Benchmark harness: run, score and report LLM planners.",
)
data_app = typer.Typer(no_args_is_help=True, help="Download and check the official benchmark files.")
app.add_typer(data_app, name="data")

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

DataOption = Annotated[
    Path | None,
    typer.Option(
        "--data", help="Benchmark data directory (default: $EDSB_DATA, then the per-user data dir).", show_default=False
    ),
]


@data_app.command("fetch")
def data_fetch(
    dest: Annotated[Path | None, typer.Option(help="Where to install the files (default: the data directory).")] = None,
    url: Annotated[str, typer.Option(help="Archive of the reference repository at the pinned commit.")] = DEFAULT_URL,
    force: Annotated[bool, typer.Option(help="Download again even if a verified copy exists.")] = False,
) -> None:
    """Download the benchmark files at the pinned commit and verify every sha256."""
    target = dest or resolve_data_dir(None)
    installed = fetch_data(target, url, force=force)
    err.print(f"benchmark data verified at {installed}")
    err.print(f"use it with --data {installed} or export EDSB_DATA={installed}" if dest else "")


@data_app.command("check")
def data_check(
    data: DataOption = None,
    allow_modified: Annotated[bool, typer.Option(help="Accept files that differ from the pinned checksums.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Validate every benchmark file and print the counts."""
    report = check_data(Benchmark.open(data))
    problems = report.problems + ([] if allow_modified else report.modified)
    if as_json:
        out.print_json(
            json.dumps(
                {
                    "root": str(report.root),
                    "cases": report.cases,
                    "cases_by_tag": report.cases_by_tag,
                    "objects": report.objects,
                    "descriptions": report.descriptions,
                    "problems": problems,
                    "modified": report.modified,
                }
            )
        )
    else:
        out.print(f"data: {report.root}")
        out.print(f"cases: {report.cases} (" + ", ".join(f"{t} {report.cases_by_tag.get(t, 0)}" for t in TAGS) + ")")
        out.print(
            f"scenes: {len(report.objects)} (" + ", ".join(f"{s} {n} objects" for s, n in report.objects.items()) + ")"
        )
        for line in report.modified if allow_modified else []:
            err.print(f"warning: {line}", markup=False)
    for line in problems:
        err.print(f"edsb: error: {line}", markup=False, highlight=False)
    if problems:
        raise typer.Exit(1)


@data_app.command("path")
def data_path(data: DataOption = None) -> None:
    """Print the data directory edsb would use."""
    out.print(str(resolve_data_dir(data)), markup=False)


@app.command("cases")
def cases_command(
    data: DataOption = None,
    cases: Annotated[
        str | None, typer.Option("--cases", help="Selection: ids, ranges, tags (`0-4,60`, `OA,RC`).")
    ] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="Only cases with this tag (repeatable).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """List the test cases: id, scene, tags, max distraction level, instruction."""
    benchmark = Benchmark.open(data)
    ids = select_cases(cases, benchmark.cases)
    wanted = {t.upper() for t in tag or []}
    unknown = wanted - set(TAGS)
    if unknown:
        raise UsageError(f"unknown tag {sorted(unknown)[0]!r} (tags: {', '.join(TAGS)})")
    rows = [benchmark.cases[i] for i in ids if not wanted or wanted & set(benchmark.cases[i].tags)]
    if as_json:
        for case in rows:
            sys.stdout.write(
                json.dumps(
                    {
                        "id": case.id,
                        "scene": case.scene_name,
                        "tags": case.tags,
                        "max_distraction": case.max_distraction,
                        "characters": [p.character for p in case.expected_plans],
                        "allow_null_plan": case.allow_null_plan,
                        "instruction": case.user_instruction,
                    }
                )
                + "\n"
            )
        return
    table = Table("id", "scene", "tags", "max lvl", "instruction", title=f"{len(rows)} cases")
    for case in rows:
        table.add_row(
            str(case.id),
            case.scene_name,
            " ".join(case.tags),
            str(case.max_distraction),
            " ".join(case.user_instruction.split()),
        )
    out.print(table)


@app.command("score")
def score_command(
    plans: Annotated[str, typer.Argument(help="JSONL file of plans (`-` for stdin), one per line.")],
    data: DataOption = None,
) -> None:
    """Score plans made by any planner with the official evaluator's semantics (bring your own planner).

    Input lines: {"case": 0, "distraction": 1, "plan": {character: {"target_action": [...], "relationships": [...],
    "sampled_position": [x, y] or null}}}. Output: one verdict line per input line on stdout, summary on stderr.
    """
    from edsb.scoring.score_file import score_lines, summarize_scores

    benchmark = Benchmark.open(data)
    if plans == "-":
        source = sys.stdin
    else:
        try:
            source = open(plans, encoding="utf-8")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise UsageError(f"{plans}: cannot read ({exc.strerror})") from None
    outputs = []
    try:
        for output in score_lines((line.rstrip("\n") for line in source), benchmark):
            outputs.append(output)
            sys.stdout.write(json.dumps(output) + "\n")
    finally:
        if source is not sys.stdin:
            source.close()
    err.print(summarize_scores(outputs).text(), markup=False, highlight=False)


@app.command("check-model")
def check_model_command(
    model: Annotated[str, typer.Option("--model", help="`local`, `openai:<model>` or `replay:<run dir>`.")] = "local",
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible endpoint (default $OPENAI_BASE_URL).")] = None,
    api_key_env: Annotated[
        str | None, typer.Option(help="Name of the environment variable holding the API key (default OPENAI_API_KEY).")
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the answer.")] = 60.0,
) -> None:
    """Send one tiny request and print one JSON line: does this model answer? Run it before a long sweep."""
    from edsb.llm import check_model

    result = check_model(model, base_url=base_url, api_key_env=api_key_env, timeout=timeout)
    sys.stdout.write(json.dumps(result) + "\n")
    if not result.get("ok"):
        raise typer.Exit(1)


def main(argv: list[str] | None = None) -> None:
    """Entry point: user errors become one line on stderr and an exit code, never a traceback."""
    try:
        app(args=argv)
    except EdsbError as exc:
        err.print(f"edsb: error: {exc}", markup=False, highlight=False)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err.print("edsb: interrupted")
        sys.exit(130)
