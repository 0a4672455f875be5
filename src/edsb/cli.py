"""The `edsb` command line: a thin typer layer over the packages."""

from __future__ import annotations

import copy
import gc
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, get_args

import typer
from rich.console import Console
from rich.table import Table
from typer.core import TyperCommand, TyperGroup

from edsb import __version__
from edsb.data.download import ARCHIVE_NAME, ARCHIVE_URL, OFFLINE_ENV, URL_ENV
from edsb.data.models import TAGS, SceneName, TagName
from edsb.errors import EdsbError, UsageError, hint
from edsb.llm.factory import CHECK_TIMEOUT_S, seedless
from edsb.planning.generation import PROVIDER_DEFAULT, ReasoningEffort, ThinkingLevel
from edsb.planning.variants import PresetName, SamplerName, VariantName
from edsb.report.formats import CompareFormat, ReportFormat, plural
from edsb.results.rundir import NO_SPACE, disk_full
from edsb.runner.config import config_default, run_overrides
from edsb.sandbox.limits import SandboxChoice

if TYPE_CHECKING:
    from edsb.report.summary_types import RunSummary


class _FlagsWithoutPlaceholders:
    """Help with one kind of placeholder: every option names its value in capitals (`--out DIR`, `--cases CASES`),
    an argument is shown by its name alone (`RUN_DIR`), and a flag (`--quiet`, `--help`) shows none. Typer would add
    `<bool>` to flags, as if they took a value, and a second `<path>` beside an argument's name. In a command whose
    options sit in named panels, `--help` joins the last one rather than open an `Options` panel of its own."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        params = self.get_params(ctx)  # type: ignore[attr-defined]
        for param in params:
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""
            elif param.param_type_name == "argument" and param.metavar is not None:
                param.display_type_rich = lambda ctx: None
        panels = list(dict.fromkeys(p for param in params if (p := getattr(param, "rich_help_panel", None))))
        help_option = self.get_help_option(ctx)  # type: ignore[attr-defined]
        if panels and help_option is not None:  # `--help` closes the last panel, not an `Options` panel of its own
            help_option.rich_help_panel = panels[-1]
        super().format_help(ctx, formatter)  # type: ignore[misc]


# Names another tool gives an option of edsb's: Inspect's tasks call the distraction levels `levels`.
_OPTION_SYNONYMS = {"--levels": "--distraction", "--level": "--distraction"}


class _Command(_FlagsWithoutPlaceholders, TyperCommand):
    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        """An unknown option that is another tool's name for one of this command's points to it; other typos keep
        click's own suggestions."""
        try:
            return super().parse_args(ctx, args)
        except typer.TyperException as exc:  # typer's own click: its NoSuchOption is not importable by a public name
            ours = _OPTION_SYNONYMS.get(getattr(exc, "option_name", ""))
            if type(exc).__name__ == "NoSuchOption" and ours and any(ours in param.opts for param in self.params):
                exc.message, exc.possibilities = f"{exc.message}{hint(ours)}", None  # type: ignore[attr-defined]
            raise


class _Group(_FlagsWithoutPlaceholders, TyperGroup):
    pass


def _one_of(choices: Iterable[Enum | str]) -> str:
    """Choices as words a help text can wrap between (`table, markdown or html`), never mid-word."""
    names = [str(c.value if isinstance(c, Enum) else c) for c in choices]
    return ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]


MODEL_HELP = (
    "`local` (embedded), `local:<file.gguf>`, `PROVIDER:<model>`, `replay:<run dir>`, `oracle` or `oracle-wrong`."
)
BASE_URL_HELP = "The provider's endpoint (default its own host; for openai, $OPENAI_BASE_URL if set)."
API_KEY_ENV_HELP = "Environment variable holding the API key (default the provider's, e.g. OPENAI_API_KEY)."

# The panels of `edsb run --help`, where a reader looks for an option; `check-model` shares the first and third.
MODEL_PANEL, SELECTION_PANEL, GENERATION_PANEL = "Model", "Selection", "Generation"
SAMPLER_PANEL, LIMITS_PANEL, OUTPUT_PANEL = "Sampler and sandbox", "Limits", "Output"


def _in_panel(option: Any, panel: str) -> Any:
    """The `typer.Option` of a shared `Annotated` option (`DataOption`), in a help panel of one command."""
    placed = copy.copy(get_args(option)[1])
    placed.rich_help_panel = panel
    return placed


app = typer.Typer(
    cls=_Group,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="Event-Driven Storytelling Benchmark harness: run, score and report LLM planners.",
)
data_app = typer.Typer(cls=_Group, no_args_is_help=True, help="Download and check the official benchmark files.")
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
        "--data",
        metavar="DIR",
        help="Benchmark data directory (default: $EDSB_DATA, then the per-user data dir).",
        show_default=False,
    ),
]
PerturbOption = Annotated[
    int,
    typer.Option(
        min=0, metavar="SEED", help="The robustness suite's renamed benchmark of this seed (0: the benchmark itself)."
    ),
]
OfflineOption = Annotated[
    bool,
    typer.Option(
        "--offline",
        help=f"Never download the data, which without --data or $EDSB_DATA is fetched on first use (also "
        f"${OFFLINE_ENV}=1).",
    ),
]


@data_app.command(
    "fetch",
    cls=_Command,
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


@data_app.command("check", cls=_Command)
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


@data_app.command("path", cls=_Command)
def data_path(data: DataOption = None) -> None:
    """Print the data directory edsb would use."""
    from edsb.data.location import resolve_data_dir

    out.print(str(resolve_data_dir(data)), markup=False)


@app.command("cases", cls=_Command)
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
            help=f"Only cases with this tag ({_one_of(TagName)}); repeated, any of them "
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


SAMPLER_HELP = "PI position sampler: `reference`, the paper's simulated annealing, or `optimal`, a ceiling"


@app.command("score", cls=_Command)
def score_command(
    plans: Annotated[str, typer.Argument(metavar="PLANS", help="JSONL file of plans (`-` for stdin), one per line.")],
    sampler: Annotated[SamplerName, typer.Option(metavar="SAMPLER", help=SAMPLER_HELP + ".")] = SamplerName.REFERENCE,
    seed: Annotated[
        int, typer.Option(metavar="N", help="Seed of the position sampler; line n is drawn from (seed, n).")
    ] = 0,
    data: DataOption = None,
    perturb: PerturbOption = 0,
    offline: OfflineOption = False,
) -> None:
    """Score plans made by any planner with the official evaluator's semantics (bring your own planner).

    Input lines: {"case": 0, "distraction": 1, "plan": {character: {"target_action": [...], "relationships": [...],
    "sampled_position": \\[x, y] or null}}}. A PI entry with relationships and no point is sampled as the pipeline
    samples it. Output: one verdict line per input line on stdout, summary on stderr.
    """
    from edsb.data.benchmark import Benchmark
    from edsb.planning.sampler import line_sampler
    from edsb.scoring.score_file import score_lines, summarize_scores

    benchmark = Benchmark.open(data, perturb=perturb, fetch=True, offline=offline)
    if plans == "-":
        source = sys.stdin
    else:
        try:
            source = open(plans, encoding="utf-8")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise UsageError(f"{plans}: cannot read ({exc.strerror})") from None
    outputs = []
    try:
        lines = (line.rstrip("\n") for line in source)
        for output in score_lines(lines, benchmark, line_sampler(sampler, seed)):
            outputs.append(output)
            sys.stdout.write(json.dumps(output) + "\n")
    finally:
        if source is not sys.stdin:
            source.close()
    if not outputs:  # nothing to score is a mistake (a wrong file, an empty pipe), not a perfect result
        raise UsageError(f"{'stdin' if plans == '-' else plans}: no plans to score (the input is empty)")
    err.print(summarize_scores(outputs).text(), markup=False, highlight=False)


def _default(name: str) -> str:
    """`RunConfig`'s default of a field as a help text shows it: `0.1`, `0-2`, `none`."""
    value = config_default(name)
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list):
        run = (
            len(value) > 2 and all(isinstance(v, int) for v in value) and value == list(range(value[0], value[-1] + 1))
        )
        return f"{value[0]}-{value[-1]}" if run else ",".join(str(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _temperature(text: str) -> str | float:
    """`--temperature`: a number from 0 to 2, or `default` (send none)."""
    if text.strip().lower() == PROVIDER_DEFAULT:
        return PROVIDER_DEFAULT
    try:
        value = float(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is neither a number nor `{PROVIDER_DEFAULT}`") from None
    if not 0.0 <= value <= 2.0:
        raise typer.BadParameter(f"{text} is not in the range 0 to 2")
    return value


# The generation options, shared by `run` and `check-model` (which sends the very request a run sends).
TemperatureOption = Annotated[
    Any,
    typer.Option(
        parser=_temperature,
        metavar="T",
        help=f"Sampling temperature, or `{PROVIDER_DEFAULT}` to send none: the provider's own applies "
        f"(default {_default('temperature')}, the paper's).",
        show_default=False,
        rich_help_panel=GENERATION_PANEL,
    ),
]
MaxTokensOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        metavar="N",
        help="Token cap of each reply; a thinking budget comes on top (default as the paper's client: docs/models.md).",
        rich_help_panel=GENERATION_PANEL,
    ),
]
ModelSeedOption = Annotated[
    int | None,
    typer.Option(
        min=0,
        metavar="N",
        help=f"Sampling seed, N + r on repeat r (default {_default('model_seed')}, the embedded "
        f"model 0; not for {seedless()}).",
        rich_help_panel=GENERATION_PANEL,
    ),
]
ReasoningEffortOption = Annotated[
    ReasoningEffort | None,
    typer.Option(
        metavar="LEVEL",
        help=f"Reasoning effort: {_one_of(ReasoningEffort)} (default {_default('reasoning_effort')}: the "
        "provider's own).",
        rich_help_panel=GENERATION_PANEL,
    ),
]
ThinkingBudgetOption = Annotated[
    int | None,
    typer.Option(
        min=0,
        metavar="N",
        help="Thinking tokens (Anthropic, Gemini 2.5), on top of the answer's cap "
        f"(default {_default('thinking_budget')}).",
        rich_help_panel=GENERATION_PANEL,
    ),
]
ThinkingLevelOption = Annotated[
    ThinkingLevel | None,
    typer.Option(
        metavar="LEVEL",
        help=f"Gemini 3's `thinkingLevel`: {_one_of(ThinkingLevel)} (default {_default('thinking_level')}).",
        rich_help_panel=GENERATION_PANEL,
    ),
]
NoJsonModeOption = Annotated[
    bool,
    typer.Option(
        "--no-json-mode",
        help="Send no `response_format` (for servers without JSON mode); the prompt still asks for JSON.",
        rich_help_panel=GENERATION_PANEL,
    ),
]
NoPromptCacheOption = Annotated[
    bool,
    typer.Option(
        "--no-prompt-cache",
        help="No prompt-cache markers on Anthropic's shared prefix (they change the bill, not the prompt).",
        rich_help_panel=GENERATION_PANEL,
    ),
]


@app.command("check-model", cls=_Command)
def check_model_command(
    model: Annotated[
        str,
        typer.Option(
            "--model",
            metavar="MODEL",
            help=f"{MODEL_HELP} Default: {_default('model')}.",
            show_default=False,
            rich_help_panel=MODEL_PANEL,
        ),
    ] = config_default("model"),
    base_url: Annotated[
        str | None, typer.Option(metavar="URL", help=BASE_URL_HELP, rich_help_panel=MODEL_PANEL)
    ] = None,
    api_key_env: Annotated[
        str | None, typer.Option(metavar="NAME", help=API_KEY_ENV_HELP, rich_help_panel=MODEL_PANEL)
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(
            metavar="SECONDS",
            help=f"Seconds to wait for the answer (default {CHECK_TIMEOUT_S:g}).",
            show_default=False,
            rich_help_panel=MODEL_PANEL,
        ),
    ] = CHECK_TIMEOUT_S,
    temperature: TemperatureOption = None,
    max_tokens: MaxTokensOption = None,
    model_seed: ModelSeedOption = None,
    reasoning_effort: ReasoningEffortOption = None,
    thinking_budget: ThinkingBudgetOption = None,
    thinking_level: ThinkingLevelOption = None,
    no_json_mode: NoJsonModeOption = False,
    no_prompt_cache: NoPromptCacheOption = False,
) -> None:
    """Send one tiny request with every generation setting a run would send, and print one JSON line: does this
    model answer, and accept those settings? Run it, with the options of the run, before a long sweep."""
    given = run_overrides(dict(locals()))
    from edsb.llm import check_model, parse_model_spec
    from edsb.llm.factory import CHECK_REQUEST
    from edsb.runner.config import resolve_generation

    parse_model_spec(model)  # a malformed --model is a usage error, not a model that fails to answer
    if not timeout > 0:
        raise UsageError(f"--timeout must be a positive number of seconds, got {timeout:g}")
    generation = resolve_generation(model, {k: v for k, v in given.items() if v is not None})
    request = generation.request(CHECK_REQUEST.messages, json_mode=True)
    result = check_model(
        model,
        base_url=base_url,
        api_key_env=api_key_env,
        timeout=timeout,
        request=request,
        prompt_cache=not no_prompt_cache,
    )
    sys.stdout.write(json.dumps(result) + "\n")
    if not result.get("ok"):
        fix = f"\nfix: {result['fix']}" if result.get("fix") else ""
        _print_error(f"{result.get('error')}{fix}")
        raise typer.Exit(1)


# `edsb run` options that shape one invocation only, not the run (kept out of the overrides).
_SESSION_PARAMETERS = ("config", "out", "quiet", "offline")


@app.command("run", cls=_Command)
def run_command(
    model: Annotated[
        str | None,
        typer.Option(
            metavar="MODEL",
            help=f"{MODEL_HELP} Default: {_default('model')}.",
            rich_help_panel=MODEL_PANEL,
        ),
    ] = None,
    base_url: Annotated[
        str | None, typer.Option(metavar="URL", help=BASE_URL_HELP, rich_help_panel=MODEL_PANEL)
    ] = None,
    api_key_env: Annotated[
        str | None, typer.Option(metavar="NAME", help=API_KEY_ENV_HELP, rich_help_panel=MODEL_PANEL)
    ] = None,
    variant: Annotated[
        list[VariantName] | None,
        typer.Option(
            "--variant",
            metavar="VARIANT",
            help=f"Variant to run: {_one_of(VariantName)} (repeatable; default {_default('variants')}).",
            rich_help_panel=SELECTION_PANEL,
        ),
    ] = None,
    preset: Annotated[
        PresetName | None,
        typer.Option(
            metavar="PRESET",
            help=f"The paper's experiment grids: {_one_of(PresetName)} (Tables 1, 2).",
            rich_help_panel=SELECTION_PANEL,
        ),
    ] = None,
    cases: Annotated[
        str | None,
        typer.Option(
            metavar="CASES",
            help="Case selection: ids, ranges, tags (`0-4,60`, `OA,RC`; default all).",
            rich_help_panel=SELECTION_PANEL,
        ),
    ] = None,
    distraction: Annotated[
        str | None,
        typer.Option(
            metavar="LEVELS",
            help=f"Distraction levels, e.g. `0-2` or `0,2` (default {_default('distraction')}).",
            rich_help_panel=SELECTION_PANEL,
        ),
    ] = None,
    repeats: Annotated[
        int | None,
        typer.Option(
            min=1,
            metavar="N",
            help=f"Repeats per case and level (default {_default('repeats')}).",
            rich_help_panel=SELECTION_PANEL,
        ),
    ] = None,
    temperature: TemperatureOption = None,
    max_tokens: MaxTokensOption = None,
    model_seed: ModelSeedOption = None,
    reasoning_effort: ReasoningEffortOption = None,
    thinking_budget: ThinkingBudgetOption = None,
    thinking_level: ThinkingLevelOption = None,
    no_json_mode: NoJsonModeOption = False,
    seed: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            help=f"Seed of each run's code and, with the sampler secret, of the position sampler "
            f"(default {_default('seed')}).",
            rich_help_panel=SAMPLER_PANEL,
        ),
    ] = None,
    sampler_secret: Annotated[
        str | None,
        typer.Option(
            metavar="TEXT",
            help="Key of the position sampler's draws, hidden from model code (default: the directory's, else a new "
            "random one; docs/running.md).",
            rich_help_panel=SAMPLER_PANEL,
        ),
    ] = None,
    sampler: Annotated[
        SamplerName | None,
        typer.Option(
            metavar="SAMPLER", help=SAMPLER_HELP + f" (default {_default('sampler')}).", rich_help_panel=SAMPLER_PANEL
        ),
    ] = None,
    sandbox: Annotated[
        SandboxChoice | None,
        typer.Option(
            metavar="SANDBOX",
            help=f"Where model code runs: `exact`, `restricted` or `{SandboxChoice.AUTO}`, the default: exact where "
            "the host allows (docs/running.md).",
            rich_help_panel=SAMPLER_PANEL,
        ),
    ] = None,
    perturb: Annotated[
        int | None,
        typer.Option(
            min=0,
            metavar="SEED",
            help="Robustness suite: characters and objects renamed from this seed "
            f"(default {_default('perturb')}: as published; docs/perturbation.md).",
            rich_help_panel=SELECTION_PANEL,
        ),
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option(
            min=1,
            metavar="N",
            help=f"Runs in flight at once (default {_default('concurrency')}).",
            rich_help_panel=MODEL_PANEL,
        ),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            metavar="SECONDS",
            help=f"Seconds per model request (default {_default('timeout')}).",
            rich_help_panel=MODEL_PANEL,
        ),
    ] = None,
    max_retries: Annotated[
        int | None,
        typer.Option(
            min=0,
            metavar="N",
            help=f"Retries per request on 429/5xx/timeouts/connection errors (default {_default('max_retries')}).",
            rich_help_panel=MODEL_PANEL,
        ),
    ] = None,
    code_timeout: Annotated[
        float | None,
        typer.Option(
            metavar="SECONDS",
            help=f"Seconds model code may run (default {_default('code_timeout')}).",
            rich_help_panel=LIMITS_PANEL,
        ),
    ] = None,
    code_memory: Annotated[
        int | None,
        typer.Option(
            metavar="MIB",
            help=f"MiB of memory model code may use (default {_default('code_memory_mb')}).",
            rich_help_panel=LIMITS_PANEL,
        ),
    ] = None,
    max_plan_characters: Annotated[
        int | None,
        typer.Option(
            min=1,
            metavar="N",
            help=f"Characters a plan may set (default {_default('max_plan_characters')}; more is code_output).",
            rich_help_panel=LIMITS_PANEL,
        ),
    ] = None,
    max_plan_relationships: Annotated[
        int | None,
        typer.Option(
            min=1,
            metavar="N",
            help=f"Relationships per character in a plan (default {_default('max_plan_relationships')}).",
            rich_help_panel=LIMITS_PANEL,
        ),
    ] = None,
    max_plan_string_chars: Annotated[
        int | None,
        typer.Option(
            min=1,
            metavar="N",
            help=f"Characters of any string in a plan (default {_default('max_plan_string_chars')}).",
            rich_help_panel=LIMITS_PANEL,
        ),
    ] = None,
    max_error_chars: Annotated[
        int | None,
        typer.Option(
            min=100,
            metavar="N",
            help=f"Characters of an error message kept in a result (default {_default('max_error_chars')}).",
            rich_help_panel=LIMITS_PANEL,
        ),
    ] = None,
    max_text_chars: Annotated[
        int | None,
        typer.Option(
            min=100,
            metavar="N",
            help=f"Characters of each reply string kept in a result (default {_default('max_text_chars')}).",
            rich_help_panel=LIMITS_PANEL,
        ),
    ] = None,
    max_response_mb: Annotated[
        int | None,
        typer.Option(
            min=1,
            metavar="MIB",
            help=f"MiB a model server's reply may hold; larger ones fail (default {_default('max_response_mb')}).",
            rich_help_panel=LIMITS_PANEL,
        ),
    ] = None,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Bypass the response cache.", rich_help_panel=MODEL_PANEL)
    ] = False,
    no_prompt_cache: NoPromptCacheOption = False,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            metavar="FILE",
            help="TOML file with any of these options (docs/running.md).",
            rich_help_panel=OUTPUT_PANEL,
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR", help="Run directory (rerun with the same one to resume).", rich_help_panel=OUTPUT_PANEL
        ),
    ] = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", help="No progress bar (CI logs).", rich_help_panel=OUTPUT_PANEL)
    ] = False,
    data: Annotated[Path | None, _in_panel(DataOption, SELECTION_PANEL)] = None,
    offline: Annotated[bool, _in_panel(OfflineOption, SELECTION_PANEL)] = False,
    # `--batch` and its options (docs/batch.md): how the requests travel, not part of the run's identity.
    batch: Annotated[
        bool,
        typer.Option(
            "--batch",
            help="Send the requests through the provider's batch API, at half price (OpenAI, Azure, Anthropic, "
            "Gemini; docs/batch.md).",
            rich_help_panel=MODEL_PANEL,
        ),
    ] = False,
    detach: Annotated[
        bool,
        typer.Option(
            "--detach",
            help="With --batch: submit the pass's batch and exit; the same command collects it.",
            rich_help_panel=MODEL_PANEL,
        ),
    ] = False,
    batch_export: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="With --batch: write the pass's requests as OpenAI batch JSONL (vLLM's run-batch takes it); "
            "nothing is sent.",
            rich_help_panel=MODEL_PANEL,
        ),
    ] = None,
    batch_import: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="The answers to --batch-export's requests, as OpenAI batch output JSONL (vLLM's run-batch writes "
            "it); stored, then the next pass runs.",
            rich_help_panel=MODEL_PANEL,
        ),
    ] = None,
    batch_poll: Annotated[
        float | None,
        typer.Option(
            metavar="SECONDS",
            help=f"With --batch: seconds between looks at the batches (default {_default('batch_poll_s')}).",
            rich_help_panel=MODEL_PANEL,
        ),
    ] = None,
) -> None:
    """Evaluate a model on the benchmark through the paper's framework; resumable, writes results and a summary."""
    given = dict(locals())
    for flag in ("batch", "detach"):  # an unset flag leaves a config file's value alone
        given[flag] = given[flag] or None
    from edsb.report.summary import write_summary
    from edsb.runner.config import default_out_dir, load_session_options, resolve_run_config
    from edsb.runner.run import run_benchmark

    # 1. The run's configuration: defaults < preset < config file < the options given here.
    options = run_overrides({k: v for k, v in given.items() if k not in _SESSION_PARAMETERS})
    notes: list[str] = []
    resolved = resolve_run_config(options, config, fetch=True, offline=offline, notes=notes)
    for note in notes:
        err.print(f"note: {note}", markup=False, highlight=False)
    # 2. This invocation's own options: where to write, how loudly.
    session = load_session_options(config) if config else {}
    out = out or (Path(session["out"]) if session.get("out") else None) or default_out_dir(resolved.model)
    # 3. The sweep, then its summary.
    quiet = quiet or bool(session.get("quiet"))
    if resolved.batch_detach and not resolved.batch:
        raise UsageError("--detach submits a batch and exits: it needs --batch")
    if resolved.batch or resolved.batch_export or resolved.batch_import:
        from edsb.report.cost import batch_cost
        from edsb.runner.batch import run_batched

        batched = run_batched(resolved, out, quiet=quiet, console=err, cost=batch_cost(resolved.model))
        if batched is None:  # detached, or exported: nothing to summarise yet
            return
        outcome = batched
    else:
        outcome = run_benchmark(resolved, out, quiet=quiet, console=err)
    summary = write_summary(out, outcome.results, runs_planned=outcome.runs_planned)
    if outcome.interrupted:  # 130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP
        raise typer.Exit(outcome.exit_status)
    # 4. The brief table and the closing lines; a sweep with holes exits non-zero.
    _close_run(summary, outcome, out)


def _close_run(summary: RunSummary, outcome: Any, out: Path) -> None:
    """The brief table, why runs failed (if they all did), the counts, and an error for incomplete runs."""
    from edsb.report.render import render_report

    render_report({}, summary, ReportFormat.TABLE, console=Console(soft_wrap=True), brief=True)
    hint = _why_runs_failed(summary, out)
    if hint:
        err.print(hint, markup=False, highlight=False)
    stats = outcome.stats
    err.print(
        f"{plural(len(outcome.keys), 'run')} planned, {outcome.skipped} already done, {stats.done} executed "
        f"({stats.incomplete} incomplete: rerun the same command to retry them); results in {out}",
        markup=False,
        highlight=False,
    )
    if stats.incomplete:  # a sweep with holes must not look like a finished one to a script or CI
        are = "is" if stats.incomplete == 1 else "are"
        why = "no answer from the model, or an edsb fault"
        raise EdsbError(f"{plural(stats.incomplete, 'run')} {are} incomplete ({why}); see {out}")


def _why_runs_failed(summary: RunSummary, out: Path) -> str | None:
    """One line under the table of a sweep with execution errors (their most frequent kinds) or without a single
    pass, since the brief table shows rates, not reasons; `edsb report` has the reasons."""
    kinds: Counter[str] = Counter()
    for data in summary.variants.values():
        kinds.update(data.error_kinds)
    if kinds:
        top = ", ".join(f"{kind} {count}" for kind, count in kinds.most_common(3))
        more = f" and {len(kinds) - 3} more kinds" if len(kinds) > 3 else ""
        return f"execution errors by kind: {top}{more}; `edsb report {out}` shows their reasons"
    rates = [data.success_rate for data in summary.variants.values()]
    if rates and all(rate == 0 for rate in rates):
        return f"no run passed; `edsb report {out}` lists why the plans failed"
    return None


AllOption = Annotated[
    bool,
    typer.Option("--all", help="Show every row of long lists (per case, reasons, cases that flip); default: 20."),
]


@app.command("report", cls=_Command)
def report_command(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR", help="A run directory written by `edsb run`.")],
    fmt: Annotated[
        ReportFormat,
        typer.Option(
            "--format",
            metavar="FORMAT",
            help=f"Output format: {_one_of(ReportFormat)} (json: the results document with its run card; samples: "
            "one JSON line per run with its texts, code, plan and verdict).",
            show_default=False,
        ),
    ] = ReportFormat.TABLE,
    intervals: Annotated[bool, typer.Option("--intervals", help="Add Wilson 95% intervals to the cells.")] = False,
    price_in: Annotated[
        float | None, typer.Option(metavar="USD", help="USD per million prompt tokens (cost estimate).")
    ] = None,
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
        from edsb.report.plots import plot_summary

        label = f" — {summary.perturbation}" if summary.perturbation else ""
        written = plot_summary(summary, plot, title=f"{config.get('model', '')} — {run_dir.name}{label}")
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


def _emit(render: Callable[[Console], str | None], output: Path | None) -> None:
    """Write what `render` returns (a table prints itself to its console and returns None) to stdout or a file;
    a table goes to a file as plain text, without colours."""
    if output is None:
        text = render(out)
        if text is not None:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    output.parent.mkdir(parents=True, exist_ok=True)
    with output.open("w", encoding="utf-8") as handle:
        text = render(Console(file=handle, soft_wrap=True, color_system=None, width=160))
        if text is not None:
            handle.write(text if text.endswith("\n") else text + "\n")
    err.print(f"report written to {output}", markup=False, highlight=False)


@app.command("show", cls=_Command)
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


@app.command("scenes", cls=_Command)
def scenes_command(
    output: Annotated[Path, typer.Option("-o", "--output", metavar="DIR", help="Directory for one PNG per scene.")],
    scene: Annotated[
        list[SceneName] | None,
        typer.Option(
            "--scene", metavar="SCENE", help=f"Scene to draw: {_one_of(SceneName)} (repeatable; default all)."
        ),
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


@app.command("compare", cls=_Command)
def compare_command(
    run_dirs: Annotated[
        list[Path],
        typer.Argument(metavar="RUN_DIR...", help="Two or more run directories; the first is the baseline."),
    ],
    fmt: Annotated[
        CompareFormat,
        typer.Option(
            "--format", metavar="FORMAT", help=f"Output format: {_one_of(CompareFormat)}.", show_default=False
        ),
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
    if output is None:
        text = render_board(board, fmt, console=out, show_all=show_all)
        if text is not None:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    with output.open("w", encoding="utf-8") as handle:  # the tables as plain text for `table`
        text = render_board(board, fmt, console=Console(file=handle, width=200, soft_wrap=True), show_all=show_all)
        if text is not None:
            handle.write(text if text.endswith("\n") else text + "\n")
    err.print(f"comparison written to {output}", markup=False, highlight=False)


@app.command("plan-power", cls=_Command)
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


sandbox_app = typer.Typer(cls=_Group, no_args_is_help=True, help="Which sandbox runs model code here, and a self-test.")
app.add_typer(sandbox_app, name="sandbox")


@sandbox_app.command("check", cls=_Command)
def sandbox_check(
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Say which sandbox this host gets and why, then run ten attacks in contained children: exit 0 when every one
    is refused (and honest code still runs), 1 otherwise."""
    import textwrap
    from dataclasses import asdict

    from edsb.sandbox.kernel import host_support, prepare
    from edsb.sandbox.selfcheck import self_check

    support = host_support()
    prepare()
    results = self_check()
    passed = all(result.passed for result in results)
    if as_json:
        report = {
            "host": asdict(support),
            "self_test": [{"name": r.name, "passed": r.passed, **asdict(r.outcome)} for r in results],
            "passed": passed,
        }
        out.print_json(json.dumps(report))
    else:
        lines = [*support.describe(), "self-test, in forked children under every layer this host has:"]
        lines += [
            f"  {'ok  ' if r.passed else 'FAIL'} {r.name}: {r.outcome.status}, {r.outcome.detail}" for r in results
        ]
        verdict = "every attack refused" if passed else "NOT every attack was refused: do not run untrusted code here"
        lines.append(f"result: {verdict}")
        for line in lines:
            indent = "       " if line.startswith("  ") else "  "
            sys.stdout.write(textwrap.fill(line, 80, subsequent_indent=indent, break_long_words=True) + "\n")
    raise typer.Exit(0 if passed else 1)


def _print_error(message: str) -> None:
    """One `edsb: error:` line, never cut: a server's whole message and the fix (on a line of its own in the
    message) flattened into it, for the terminal to wrap and for grep to find."""
    err.print(f"edsb: error: {' '.join(message.split())}", markup=False, highlight=False, soft_wrap=True)


def _fail(message: str, exit_code: int) -> None:
    _print_error(message)
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
        if exc.errno in NO_SPACE:
            detail = str(disk_full(exc.filename or "a file"))
        _fail(detail, 1)
    except KeyboardInterrupt:
        err.print("edsb: interrupted")
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)
