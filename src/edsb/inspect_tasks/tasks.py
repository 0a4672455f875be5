"""The benchmark as Inspect AI tasks: `inspect eval edsb/edsb_table1 --model openai/gpt-4o`.

One sample per case × distraction level, one epoch per repeat. The solver is `pipeline.execute_run`, the function
`edsb run` calls for every run, with its model answering through Inspect (`InspectChatModel`): same prompts, same
sandbox, same sampler, same judge. The scorer publishes that run's verdict; an execution error is a score of 0 whose
explanation carries the error kind and message, and a run whose model never answered is a sample error, which
Inspect retries (`--retry-on-error`) instead of counting it.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from inspect_ai import Epochs, Task, task
from inspect_ai._util.error import PrerequisiteError
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ModelOutput, get_model
from inspect_ai.scorer import Metric, SampleScore, Score, Scorer, Target, metric, scorer
from inspect_ai.solver import Generate, Solver, TaskState, solver
from pydantic import ValidationError

from edsb.data.benchmark import Benchmark
from edsb.data.models import TAGS
from edsb.data.perturb import perturbation_label
from edsb.data.selection import Selection, parse_levels, select_cases, selection_text
from edsb.errors import EdsbError, UsageError, closest, hint
from edsb.inspect_tasks.model import InspectChatModel
from edsb.planning.pipeline import RunServices, execute_run
from edsb.planning.prompt_pack import load_prompt_pack
from edsb.planning.sampler_pool import SamplerPool
from edsb.planning.variants import SamplerName, get_preset, get_variant
from edsb.results import RunKey, RunResult, RunStatus
from edsb.runner.config import RunConfig, config_default, run_overrides
from edsb.runner.keys import expand_keys
from edsb.sandbox import check_sandbox
from edsb.sandbox.limits import SandboxChoice, choose_sandbox
from edsb.scoring.metrics import TOTAL
from edsb.settings.declare import declared
from edsb.settings.run import RunSettings, settings_message

SCORE_METADATA = {
    "key",
    "status",
    "error_kind",
    "error",
    "event",
    "tokens",
    "sampler_miss",
    "sandbox",
    "surrogates_replaced",
    "truncated",
}  # of the run, shown in the log
RECORD = "edsb_record"  # the store key of a sample's result record (the line `edsb run` writes to results.jsonl)
# The `-T` parameters of the tasks' own signatures, and those that are `edsb run` options, under the same names (and
# defaults: their declaration's). A misspelt one is suggested from both.
TASK_PARAMETERS = ("variant", "cases", "levels", "epochs")
SETTINGS = tuple(name for setting in declared(RunSettings).values() if (name := setting.task_name))


class ShownByInspect(PrerequisiteError):
    """Inspect's command line prints a `PrerequisiteError` as its message alone; any other exception raised while a
    task is built comes out under Inspect's whole traceback (hundreds of lines for a misspelt `-T` name)."""

    def __init__(self, message: str) -> None:
        Exception.__init__(self, message)
        self.message = message


class TaskUsageError(UsageError, ShownByInspect):
    """A `-T` parameter that cannot be honoured, as one line under `inspect eval`."""


class TaskSetupError(EdsbError, ShownByInspect):
    """Anything else the user can fix while the task is built (data missing, sandbox unavailable), as one line."""


@contextmanager
def one_line_errors() -> Iterator[None]:
    """edsb's user errors raised while a task is built, re-raised as ones Inspect prints without a traceback."""
    try:
        yield
    except ShownByInspect:
        raise
    except UsageError as exc:
        raise TaskUsageError(str(exc)) from None
    except EdsbError as exc:
        raise TaskSetupError(str(exc)) from None


def edsb_dataset(benchmark: Benchmark, variant: str, cases: Selection, levels: Selection) -> MemoryDataset:
    """One sample per (case, level) in `edsb run`'s order; levels above a case's maximum are skipped, as there."""
    ids = select_cases(selection_text(cases), benchmark.cases)
    chosen = parse_levels(selection_text(levels))
    keys = expand_keys([variant], ids, chosen, 1, benchmark.cases)
    samples = []
    for key in keys:
        case = benchmark.case(key.case)
        samples.append(
            Sample(
                id=f"tc{key.case:02d}-d{key.distraction}",
                input=case.user_instruction,
                target=" ; ".join(plan.model_dump_json(exclude_none=True) for plan in case.expected_plans),
                metadata={
                    "case": key.case,
                    "level": key.distraction,
                    "tags": list(case.tags),
                    "scene": case.scene_name,
                    "variant": variant,
                },
            )
        )
    return MemoryDataset(samples, name=f"edsb-{variant}")


def task_config(settings: Mapping[str, Any]) -> RunConfig:
    """The run settings of a task's `-T` parameters, named, validated and defaulted as `edsb run`'s options are
    (`RunConfig`), with the sandbox resolved; a wrong name or value is a one-line error."""
    given = {name: value for name, value in settings.items() if name != "model"}  # Inspect passes its model too
    unknown = sorted(set(given) - set(SETTINGS))
    if unknown:
        suggestion = closest(unknown[0], (*TASK_PARAMETERS, *SETTINGS))
        raise UsageError(f"unknown task parameter {unknown[0]!r}{hint(suggestion)}")
    options = run_overrides(given)
    sampler_named(str(options.get("sampler", config_default("sampler"))))
    options["sandbox"], note = choose_sandbox(str(options.get("sandbox", SandboxChoice.AUTO)))
    if note is not None:
        logging.getLogger(__name__).warning(note)
    try:
        return RunConfig.model_validate(options)
    except ValidationError as exc:
        raise UsageError(f"invalid task parameter {settings_message(exc)}") from None


@solver
def edsb_planner(**settings: Any) -> Solver:
    """Plan and judge one run with edsb's pipeline; the epoch (1-based) is the repeat. The task's settings (`SETTINGS`)
    as plain parameters, so Inspect logs them with the eval. The PI sampler's draws are keyed by `sampler_secret`, a
    new random one per solver unless given, so that model code cannot predict them."""
    config = task_config(settings)
    secret = config.sampler_secret or secrets.token_hex(16)
    limits = config.sandbox_limits
    check_sandbox(limits)
    benchmark = Benchmark.open(config.data, perturb=config.perturb, fetch=True)
    pack = load_prompt_pack(benchmark)
    sampler_pool = SamplerPool()  # one set of sampler processes for every sample of the solver

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        meta = state.metadata
        key = RunKey(meta["variant"], meta["case"], meta["level"], state.epoch - 1)
        model = InspectChatModel(get_model())
        services = RunServices(
            benchmark,
            model,
            generation=config.generation,
            seed=config.seed,
            sampler_secret=secret,
            sampler=config.sampler,
            limits=limits,
            pack=pack,
            sampler_pool=sampler_pool,
        )
        result = await execute_run(services, key)
        if not result.is_judged:  # no completion: Inspect's error handling decides (retry or fail)
            if model.failure is not None:
                raise model.failure
            raise RuntimeError(f"{key.id}: {result.error}")
        state.store.set(RECORD, result.model_dump(mode="json"))
        state.output = ModelOutput.from_content(str(state.model), json.dumps(result.plan))
        state.completed = True
        return state

    return solve


def sampler_named(name: str) -> SamplerName:
    """`-T sampler=...` as the enum, or a UsageError naming the choices."""
    try:
        return SamplerName(name)
    except ValueError:
        choices = ", ".join(s.value for s in SamplerName)
        raise UsageError(f"unknown sampler {name!r} (choose {choices})") from None


@metric
def rate() -> Metric:
    """Means under `Total`, each tag (a run with two tags counts in both) and each level `d0`..`d2`, as edsb
    report's cells group runs (unrounded here; `edsb report` prints the paper's two decimals)."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        groups: dict[str, list[float]] = {}
        for item in scores:
            meta = item.sample_metadata or {}
            for group in (TOTAL, *meta.get("tags", ()), f"d{meta.get('level')}"):
                groups.setdefault(group, []).append(item.score.as_float())
        order = [TOTAL, *TAGS, *sorted(name for name in groups if name.startswith("d"))]
        return {name: sum(groups[name]) / len(groups[name]) for name in order if name in groups}

    return compute


def explanation(result: RunResult) -> str:
    """One line per run: the verdict, why a plan failed, and for an execution error its kind and message."""
    if result.status is RunStatus.PASSED:
        return "passed: every expected character's action and position conditions hold"
    if result.status is RunStatus.FAILED:
        return f"failed: {result.reason or 'the plan does not meet the case conditions'}"
    return f"execution error — {result.error}"


@scorer(metrics={"success": [rate()], "execution": [rate()]})
def edsb_judge() -> Scorer:
    """edsb's verdict of the run (the judge ran inside the pipeline, exactly as for `edsb run`)."""

    async def score(state: TaskState, target: Target) -> Score:
        result = RunResult.model_validate(state.store.get(RECORD))
        return Score(
            value={"success": float(result.passed), "execution": float(not result.errored)},
            answer=json.dumps(result.plan),
            explanation=explanation(result),
            metadata=result.model_dump(mode="json", include=SCORE_METADATA),
        )

    return score


def edsb_task(
    preset: str, variant: str | None, cases: Selection, levels: Selection, epochs: int | None, settings: dict[str, Any]
) -> Task:
    """The task of one of the paper's grids; `settings` are the `-T` parameters of `SETTINGS`."""
    with one_line_errors():
        return grid_task(preset, variant, cases, levels, epochs, settings)


def grid_task(
    preset: str, variant: str | None, cases: Selection, levels: Selection, epochs: int | None, settings: dict[str, Any]
) -> Task:
    """`edsb_task`'s body: the dataset, solver and scorer of the grid."""
    config = task_config(settings)  # a bad setting fails here, before the dataset is built
    chosen = get_preset(preset)
    name = get_variant(variant or chosen.variants[0]).name
    dataset = edsb_dataset(
        Benchmark.open(config.data, perturb=config.perturb, fetch=True),
        name,
        chosen.cases if cases is None else cases,
        chosen.levels if levels is None else levels,
    )
    dumped = config.model_dump(mode="json")
    recorded = {field: dumped[field] for field in run_overrides(dict.fromkeys(SETTINGS))}
    return Task(
        dataset=dataset,
        solver=edsb_planner(**{**settings, "sandbox": config.sandbox}),
        scorer=edsb_judge(),
        epochs=Epochs(epochs or chosen.repeats, "mean"),
        name=f"edsb_{preset}_{name}",
        metadata={
            "preset": preset,
            "variant": name,
            **recorded,
            **({"perturbation": label} if (label := perturbation_label(config.perturb)) else {}),
        },
    )


@task
def edsb_table1(
    variant: str = "ours",
    cases: Selection = None,
    levels: Selection = None,
    epochs: int | None = None,
    **settings: Any,
) -> Task:
    """Table 1: OA, RC and SS cases at levels 0–2, 5 epochs. `variant`: ours, wo-event, object-list, scene-graph.
    `settings`: `edsb run`'s options of the same names, with its defaults: temperature (a number or `default`),
    max_tokens, model_seed, reasoning_effort, thinking_budget, thinking_level, json_mode, seed, sampler (reference or
    optimal, for PI cases picked with `cases`), sandbox (auto, exact or restricted), code_timeout, code_memory,
    perturb (the robustness suite's renaming seed), data and sampler_secret (keys the PI
    sampler's draws, as `edsb run --sampler-secret`; default: a new random one)."""
    return edsb_task("table1", variant, cases, levels, epochs, settings)


@task
def edsb_table2(
    variant: str = "scene-graph",
    cases: Selection = None,
    levels: Selection = None,
    epochs: int | None = None,
    **settings: Any,
) -> Task:
    """Table 2: PI cases at level 0, 5 epochs. `variant`: scene-graph or direct. `settings`: as for table 1."""
    return edsb_task("table2", variant, cases, levels, epochs, settings)
