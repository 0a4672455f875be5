"""The `edsb` command line: a thin typer layer over the packages."""

from __future__ import annotations

import gc
import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from edsb import __version__
from edsb.data.download import OFFLINE_ENV, URL_ENV
from edsb.data.models import TAGS, SceneName, TagName
from edsb.errors import EdsbError, UsageError
from edsb.planning.variants import PresetName, VariantName
from edsb.report.formats import CompareFormat, ReportFormat

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="Event-Driven Storytelling Benchmark harness: run, score and report LLM planners.",
)
data_app = typer.Typer(no_args_is_help=True, help="Download and check the official benchmark files.")
app.add_typer(data_app, name="data")


def _print_version(value: bool) -> None:
    if value:
        sys.stdout.write(f"edsb {__version__}\n")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Event-Driven Storytelling Benchmark harness: run, score and report LLM planners."""


out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

DataOption = Annotated[
    Path | None,
    typer.Option(
        "--data", help="Benchmark data directory (default: $EDSB_DATA, then the per-user data dir).", show_default=False
    ),
]
OfflineOption = Annotated[
    bool,
    typer.Option(
        "--offline",
        help=f"Never download: without --data or $EDSB_DATA, the per-user data dir is otherwise fetched on first use "
        f"(also ${OFFLINE_ENV}=1).",
    ),
]


@data_app.command("fetch")
def data_fetch(
    dest: Annotated[Path | None, typer.Option(help="Where to install the files (default: the data directory).")] = None,
    url: Annotated[
        str | None,
        typer.Option(
            help=f"Archive of the reference repository at the pinned commit (default: ${URL_ENV}, then GitHub).",
            show_default=False,
        ),
    ] = None,
    archive: Annotated[
        Path | None,
        typer.Option(help="A local copy of that archive (.tar.gz or .zip), for machines without network access."),
    ] = None,
    force: Annotated[bool, typer.Option(help="Download again even if a verified copy exists.")] = False,
) -> None:
    """Download the benchmark files at the pinned commit (or read --archive) and verify every sha256."""
    from edsb.data.download import fetch_data
    from edsb.data.location import resolve_data_dir

    target = dest or resolve_data_dir(None)
    installed = fetch_data(target, url, archive=archive, force=force, progress=True)
    err.print(f"benchmark data verified at {installed}")
    err.print(f"use it with --data {installed} or export EDSB_DATA={installed}" if dest else "")


@data_app.command("check")
def data_check(
    data: DataOption = None,
    allow_modified: Annotated[bool, typer.Option(help="Accept files that differ from the pinned checksums.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Validate every benchmark file and print the counts."""
    from edsb.data.benchmark import Benchmark
    from edsb.data.check import check_data

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
    from edsb.data.location import resolve_data_dir

    out.print(str(resolve_data_dir(data)), markup=False)


@app.command("cases")
def cases_command(
    data: DataOption = None,
    offline: OfflineOption = False,
    cases: Annotated[
        str | None, typer.Option("--cases", help="Selection: ids, ranges, tags (`0-4,60`, `OA,RC`).")
    ] = None,
    tag: Annotated[
        list[TagName] | None,
        typer.Option(
            "--tag",
            help="Only cases with this tag; repeated, any of them (`--tag OA --tag SS`: OA or SS).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """List the test cases: id, scene, tags, max distraction level, instruction."""
    from edsb.data.benchmark import Benchmark
    from edsb.data.selection import select_cases

    benchmark = Benchmark.open(data, fetch=True, offline=offline)
    ids = select_cases(cases, benchmark.cases)
    wanted = {str(t) for t in tag or []}
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
    offline: OfflineOption = False,
) -> None:
    """Score plans made by any planner with the official evaluator's semantics (bring your own planner).

    Input lines: {"case": 0, "distraction": 1, "plan": {character: {"target_action": [...], "relationships": [...],
    "sampled_position": \\[x, y] or null}}}. Output: one verdict line per input line on stdout, summary on stderr.
    """
    from edsb.data.benchmark import Benchmark
    from edsb.scoring.score_file import score_lines, summarize_scores

    benchmark = Benchmark.open(data, fetch=True, offline=offline)
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
    model: Annotated[
        str, typer.Option("--model", help="`local`, `openai:<model>`, `replay:<run dir>` or `oracle`.")
    ] = "local",
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible endpoint (default $OPENAI_BASE_URL).")] = None,
    api_key_env: Annotated[
        str | None, typer.Option(help="Name of the environment variable holding the API key (default OPENAI_API_KEY).")
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the answer.")] = 60.0,
) -> None:
    """Send one tiny request and print one JSON line: does this model answer? Run it before a long sweep."""
    from edsb.llm import check_model, parse_model_spec

    parse_model_spec(model)  # a malformed --model is a usage error, not a model that fails to answer
    if not timeout > 0:
        raise UsageError(f"--timeout must be a positive number of seconds, got {timeout:g}")
    result = check_model(model, base_url=base_url, api_key_env=api_key_env, timeout=timeout)
    sys.stdout.write(json.dumps(result) + "\n")
    if not result.get("ok"):
        err.print(f"edsb: error: {result.get('error')}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(1)


@app.command("run")
def run_command(
    model: Annotated[
        str | None, typer.Option(help="`local` (default), `openai:<model>`, `replay:<run dir>` or `oracle`.")
    ] = None,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible endpoint (default $OPENAI_BASE_URL).")] = None,
    api_key_env: Annotated[str | None, typer.Option(help="Environment variable holding the API key.")] = None,
    variant: Annotated[
        list[VariantName] | None, typer.Option("--variant", help="Variant to run (repeatable; default ours).")
    ] = None,
    preset: Annotated[PresetName | None, typer.Option(help="The paper's experiment grids (Tables 1 and 2).")] = None,
    cases: Annotated[str | None, typer.Option(help="Case selection: ids, ranges, tags (`0-4,60`, `OA,RC`).")] = None,
    distraction: Annotated[str | None, typer.Option(help="Distraction levels, e.g. `0-2` or `0,2`.")] = None,
    repeats: Annotated[int | None, typer.Option(min=1, help="Repeats per case and level (default 1).")] = None,
    temperature: Annotated[float | None, typer.Option(min=0.0, help="Sampling temperature (default 0.1).")] = None,
    seed: Annotated[int | None, typer.Option(help="Seed of the position sampler (default 0).")] = None,
    concurrency: Annotated[int | None, typer.Option(min=1, help="Runs in flight at once (default 4).")] = None,
    timeout: Annotated[float | None, typer.Option(help="Seconds per model request (default 120).")] = None,
    max_retries: Annotated[
        int | None, typer.Option(min=0, help="Retries per request on 429/5xx/timeouts/connection errors (default 6).")
    ] = None,
    code_timeout: Annotated[float | None, typer.Option(help="Seconds model code may run (default 10).")] = None,
    code_memory: Annotated[int | None, typer.Option(help="MiB of memory model code may use (default 1024).")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Bypass the response cache.")] = False,
    config: Annotated[Path | None, typer.Option("--config", help="TOML file with any of these options.")] = None,
    out: Annotated[Path | None, typer.Option(help="Run directory (rerun with the same one to resume).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar (CI logs).")] = False,
    data: DataOption = None,
    offline: OfflineOption = False,
) -> None:
    """Evaluate a model on the benchmark through the paper's framework; resumable, writes results and a summary."""
    from edsb.report.render import render_report
    from edsb.report.summary import write_summary
    from edsb.runner.config import default_out_dir, load_session_options, resolve_run_config
    from edsb.runner.run import run_benchmark

    options = {
        "model": model,
        "base_url": base_url,
        "api_key_env": api_key_env,
        "variants": variant,
        "preset": preset,
        "cases": cases,
        "distraction": distraction,
        "repeats": repeats,
        "temperature": temperature,
        "seed": seed,
        "concurrency": concurrency,
        "timeout": timeout,
        "max_retries": max_retries,
        "code_timeout": code_timeout,
        "code_memory_mb": code_memory,
        "cache": False if no_cache else None,
        "data": str(data) if data else None,
    }
    resolved = resolve_run_config(options, config, fetch=True, offline=offline)
    session = load_session_options(config) if config else {}
    out = out or (Path(session["out"]) if session.get("out") else None) or default_out_dir(resolved.model)
    quiet = quiet or bool(session.get("quiet"))
    outcome = run_benchmark(resolved, out, quiet=quiet, console=err)
    summary = write_summary(
        out, outcome.results, resolved.variants, model=resolved.model, runs_planned=outcome.runs_planned
    )
    if outcome.interrupted:
        raise KeyboardInterrupt
    render_report({}, summary, ReportFormat.TABLE, console=Console(soft_wrap=True), brief=True)
    stats = outcome.stats
    err.print(
        f"{len(outcome.keys)} runs planned, {outcome.skipped} already done, {stats.done} executed "
        f"({stats.incomplete} incomplete: rerun the same command to retry them); results in {out}",
        markup=False,
        highlight=False,
    )
    if stats.incomplete:  # a sweep with holes must not look like a finished one to a script or CI
        raise EdsbError(
            f"{stats.incomplete} runs are incomplete (no answer from the model, or an edsb fault); see {out}"
        )


@app.command("report")
def report_command(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by `edsb run`.")],
    fmt: Annotated[ReportFormat, typer.Option("--format", help="Output format.")] = ReportFormat.TABLE,
    intervals: Annotated[bool, typer.Option("--intervals", help="Add Wilson 95% intervals to the cells.")] = False,
    price_in: Annotated[float | None, typer.Option(help="USD per million prompt tokens (cost estimate).")] = None,
    price_out: Annotated[float | None, typer.Option(help="USD per million completion tokens.")] = None,
    plot: Annotated[Path | None, typer.Option(help="Also write a figure (PNG) of success by tag and level.")] = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="File for --format html.")] = None,
    data: DataOption = None,
) -> None:
    """The paper's tables for one run directory, with intervals, tokens, cost, error kinds and per-case counts;
    `--format html -o report.html` writes one self-contained page with a drill-down per run."""
    from edsb.data.benchmark import Benchmark
    from edsb.report.render import load_run, render_report

    if fmt == ReportFormat.HTML:
        from edsb.report.html import write_html_report

        if output is None:
            raise UsageError("--format html needs -o FILE.html")
        written = write_html_report(run_dir, output, Benchmark.open(data))
        err.print(f"report written to {written} ({written.stat().st_size / 1e6:.1f} MB)", markup=False)
        return
    config, summary = load_run(run_dir)
    for note in summary.get("notes", []):
        err.print(f"note: {note}", markup=False, highlight=False)
    text = render_report(config, summary, fmt, intervals=intervals, prices=(price_in, price_out), console=out)
    if text is not None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    if plot is not None:
        from edsb.report.plots import plot_summary

        written = plot_summary(summary, plot, title=f"{config.get('model', '')} — {run_dir.name}")
        err.print(f"figure written to {written}", markup=False, highlight=False)


@app.command("show")
def show_command(
    case_id: Annotated[int, typer.Argument(metavar="CASE", help="Test case id.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Picture to write: .png, .svg or .pdf.")],
    distraction: Annotated[int, typer.Option("--distraction", min=0, help="Distraction level.")] = 0,
    run: Annotated[Path | None, typer.Option("--run", help="Run directory whose plan to draw.")] = None,
    repeat: Annotated[int, typer.Option(min=0, help="Repeat of the run to draw (with --run).")] = 0,
    variant: Annotated[
        VariantName | None, typer.Option(help="Variant of the run (with --run; default: the run's first).")
    ] = None,
    data: DataOption = None,
    offline: OfflineOption = False,
) -> None:
    """A top-down floor plan of a case: objects, characters, the expected region and (with --run) the plan."""
    from edsb.data.benchmark import Benchmark
    from edsb.geometry.scene import load_scene
    from edsb.report.topdown import case_figure, result_figure, save_figure

    benchmark = Benchmark.open(data, fetch=True, offline=offline)
    if case_id not in benchmark.cases:
        raise UsageError(f"unknown case id {case_id}")
    case = benchmark.cases[case_id]
    level = min(distraction, case.max_distraction)
    scene = load_scene(benchmark, case.scene_name)
    if run is None:
        figure = case_figure(case, level, scene)
    else:
        from edsb.results.rundir import RunDirectory

        result = RunDirectory.open(run).find(case_id, distraction, repeat, variant)
        figure = result_figure(case, level, scene, result)
    written = save_figure(figure, output)
    err.print(f"picture written to {written}", markup=False, highlight=False)


@app.command("scenes")
def scenes_command(
    output: Annotated[Path, typer.Option("-o", "--output", help="Directory for one PNG per scene.")],
    scene: Annotated[list[SceneName] | None, typer.Option("--scene", help="Scene to draw (repeatable).")] = None,
    data: DataOption = None,
    offline: OfflineOption = False,
) -> None:
    """Each scene from above with its regions (DBSCAN clusters of the scene graph) coloured."""
    from edsb.data.benchmark import Benchmark
    from edsb.geometry.scene import load_scene
    from edsb.report.topdown import regions_figure, save_figure

    names = [str(name) for name in scene or SceneName]
    benchmark = Benchmark.open(data, fetch=True, offline=offline)
    for name in names:
        written = save_figure(regions_figure(load_scene(benchmark, name)), output / f"{name}.png")
        err.print(f"{name}: {written}", markup=False, highlight=False)


@app.command("compare")
def compare_command(
    run_dirs: Annotated[list[Path], typer.Argument(help="Two or more run directories; the first is the baseline.")],
    fmt: Annotated[CompareFormat, typer.Option("--format", help="Output format.")] = CompareFormat.TABLE,
) -> None:
    """Side by side per variant and tag: success (execution), difference to the first run, interval overlap."""
    from edsb.report.render import coverage_differences, load_run, render_compare

    if len(run_dirs) < 2:
        raise UsageError("compare needs at least two run directories")
    names = [path.name or str(path) for path in run_dirs]
    if len(set(names)) != len(names):
        names = [str(path) for path in run_dirs]
    summaries = [(name, load_run(path)[1]) for name, path in zip(names, run_dirs, strict=True)]
    for note in coverage_differences(summaries):
        err.print(f"warning: {note}", markup=False, highlight=False)
    text = render_compare(summaries, fmt, console=out)
    if text is not None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")


def _fail(message: str, exit_code: int) -> None:
    err.print(f"edsb: error: {' '.join(message.split())}", markup=False, highlight=False, soft_wrap=True)
    sys.exit(exit_code)


def entry() -> None:
    """The `edsb` command (console script and `python -m edsb`): `main`, then no collector pass at exit. Python's
    finalisation walks every object once more (a tenth of a second or more after a large sweep); the files edsb
    wrote are closed by then, so nothing is left for it to finalise."""
    try:
        main()
    finally:
        gc.freeze()


def main(argv: list[str] | None = None) -> None:
    """Entry point: user errors become one line on stderr and an exit code (2 for usage errors), never a traceback."""
    try:
        code = app(args=argv, standalone_mode=False)
    except EdsbError as exc:
        _fail(str(exc), exc.exit_code)
    except typer.TyperException as exc:  # the command line itself: unknown option or command, value out of range
        if type(exc).__name__ == "NoArgsIsHelpError":  # the help was printed; nothing else to say
            sys.exit(exc.exit_code)
        context = getattr(exc, "ctx", None)
        hint = f" (see `{context.command_path} --help`)" if context is not None else ""
        message = exc.format_message().replace("Value error, ", "")  # typer's wording for a value outside the choices
        _fail(f"{message}{hint}", exc.exit_code)
    except OSError as exc:  # the file system refused something the command needed
        detail = f"{exc.filename}: {exc.strerror}" if exc.filename and exc.strerror else str(exc)
        _fail(detail, 1)
    except KeyboardInterrupt:
        err.print("edsb: interrupted")
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)
