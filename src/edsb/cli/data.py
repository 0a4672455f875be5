"""`edsb data fetch|check|path`, and the commands that show the benchmark: `cases`, `show`, `scenes`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from edsb.cli.app import Command, CommandGroup, app, err, out
from edsb.cli.options import DataOption, OfflineOption, PerturbOption
from edsb.data.download import ARCHIVE_NAME, ARCHIVE_URL, URL_ENV
from edsb.data.models import TAGS, SceneName, TagName
from edsb.report.formats import plural
from edsb.settings.declare import one_of
from edsb.settings.vocab import VariantName

data_app = typer.Typer(cls=CommandGroup, no_args_is_help=True, help="Download and check the official benchmark files.")
app.add_typer(data_app, name="data")


@data_app.command(
    "fetch",
    cls=Command,
    epilog=f"Without network access, download {ARCHIVE_URL} (saved as {ARCHIVE_NAME}) elsewhere, then pass it "
    "with --archive.",
)
def data_fetch(
    dest: Annotated[
        Path | None, typer.Option(metavar="DIR", help="Where to install the files (default: the data directory).")
    ] = None,
    url: Annotated[
        str | None,
        typer.Option(
            metavar="URL",
            help=f"Archive of the reference repository at the pinned commit (default: ${URL_ENV}, then its GitHub "
            "archive, below).",
            show_default=False,
        ),
    ] = None,
    archive: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="A local copy of that archive (.tar.gz or .zip), for machines without network access.",
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Download again even if a verified copy exists.")] = False,
) -> None:
    """Download the benchmark files at the pinned commit (or read --archive) and verify every sha256."""
    from edsb.data.download import fetch_data
    from edsb.data.location import resolve_data_dir

    target = dest or resolve_data_dir(None)
    installed = fetch_data(target, url, archive=archive, force=force, progress=True)
    err.print(f"benchmark data verified at {installed}")
    err.print(f"use it with --data {installed} or export EDSB_DATA={installed}" if dest else "")


@data_app.command("check", cls=Command)
def data_check(
    data: DataOption = None,
    allow_modified: Annotated[
        bool, typer.Option("--allow-modified", help="Accept files that differ from the pinned checksums.")
    ] = False,
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


@data_app.command("path", cls=Command)
def data_path(data: DataOption = None) -> None:
    """Print the data directory edsb would use."""
    from edsb.data.location import resolve_data_dir

    out.print(str(resolve_data_dir(data)), markup=False)


@app.command("cases", cls=Command)
def cases_command(
    data: DataOption = None,
    offline: OfflineOption = False,
    cases: Annotated[
        str | None,
        typer.Option("--cases", metavar="CASES", help="Selection: ids, ranges, tags (`0-4,60`, `OA,RC`)."),
    ] = None,
    tag: Annotated[
        list[TagName] | None,
        typer.Option(
            "--tag",
            metavar="TAG",
            help=f"Only cases with this tag ({one_of(TagName)}); repeated, any of them "
            "(`--tag OA --tag SS`: OA or SS).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
    perturb: PerturbOption = 0,
) -> None:
    """List the test cases: id, scene, tags, max distraction level, instruction."""
    from edsb.data.benchmark import Benchmark
    from edsb.data.selection import select_cases

    benchmark = Benchmark.open(data, perturb=perturb, fetch=True, offline=offline)
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
    table = Table("id", "scene", "tags", "max lvl", "instruction", title=plural(len(rows), "case"))
    for case in rows:
        table.add_row(
            str(case.id),
            case.scene_name,
            " ".join(case.tags),
            str(case.max_distraction),
            " ".join(case.user_instruction.split()),
        )
    out.print(table)


@app.command("show", cls=Command)
def show_command(
    case_id: Annotated[int, typer.Argument(metavar="CASE", help="Test case id.")],
    output: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--output",
            metavar="FILE",
            help="Picture to write: .png, .svg or .pdf (default: case<CASE>-d<LEVEL>.png here, with --run "
            "case<CASE>-d<LEVEL>-r<N>-<VARIANT>.png).",
            show_default=False,
        ),
    ] = None,
    distraction: Annotated[int, typer.Option("--distraction", min=0, metavar="LEVEL", help="Distraction level.")] = 0,
    run: Annotated[
        Path | None, typer.Option("--run", metavar="RUN_DIR", help="Run directory whose plan to draw.")
    ] = None,
    repeat: Annotated[int, typer.Option(min=0, metavar="N", help="Repeat of the run to draw (with --run).")] = 0,
    variant: Annotated[
        VariantName | None,
        typer.Option(metavar="VARIANT", help="Variant of the run (with --run; default: the run's first)."),
    ] = None,
    data: DataOption = None,
    offline: OfflineOption = False,
) -> None:
    """A top-down floor plan of a case: objects, characters, the expected region and (with --run) the plan."""
    from edsb.data.benchmark import Benchmark
    from edsb.data.selection import require_case
    from edsb.geometry.scene import load_scene
    from edsb.report.topdown import case_figure, result_figure, save_figure
    from edsb.results.rundir import RunDirectory

    run_dir = RunDirectory.open(run) if run is not None else None
    # A perturbed run's plan names the renamed objects: draw it on its own version of the benchmark.
    perturb = run_dir.config.perturb if run_dir else 0
    benchmark = Benchmark.open(data, perturb=perturb, fetch=True, offline=offline)
    case = benchmark.cases[require_case(case_id, benchmark.cases)]
    level = min(distraction, case.max_distraction)
    scene = load_scene(benchmark, case.scene_name)
    if run_dir is None:
        figure = case_figure(case, level, scene)
        name = f"case{case_id}-d{level}.png"
    else:
        result = run_dir.find(case_id, distraction, repeat, variant)
        figure = result_figure(case, level, scene, result)
        name = f"case{case_id}-d{level}-r{repeat}-{result.variant}.png"
    written = save_figure(figure, output or Path(name))
    err.print(f"picture written to {written}", markup=False, highlight=False)


@app.command("scenes", cls=Command)
def scenes_command(
    output: Annotated[Path, typer.Option("-o", "--output", metavar="DIR", help="Directory for one PNG per scene.")],
    scene: Annotated[
        list[SceneName] | None,
        typer.Option("--scene", metavar="SCENE", help=f"Scene to draw: {one_of(SceneName)} (repeatable; default all)."),
    ] = None,
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
