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
from collections.abc import Iterable

from inspect_ai import Epochs, Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ModelOutput, get_model
from inspect_ai.scorer import Metric, SampleScore, Score, Scorer, Target, metric, scorer
from inspect_ai.solver import Generate, Solver, TaskState, solver

from edsb.data.benchmark import Benchmark
from edsb.data.models import TAGS
from edsb.data.perturb import perturbation_label
from edsb.data.selection import parse_levels, select_cases
from edsb.errors import UsageError
from edsb.inspect_tasks.model import InspectChatModel
from edsb.planning.pipeline import RunServices, execute_run
from edsb.planning.prompt_pack import load_prompt_pack
from edsb.planning.variants import SamplerName, choose_sandbox, get_preset, get_variant
from edsb.results import RunKey, RunResult, RunStatus
from edsb.runner.keys import expand_keys
from edsb.sandbox import SandboxLimits, check_sandbox
from edsb.scoring.metrics import TOTAL

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
Selection = str | int | Iterable[int] | None


def _selection_text(value: Selection) -> str | None:
    """`-T cases=13` arrives as an int and `-T cases=[13,60]` as a list; the selection syntax wants text."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    return ",".join(str(item) for item in value)


def edsb_dataset(benchmark: Benchmark, variant: str, cases: Selection, levels: Selection) -> MemoryDataset:
    """One sample per (case, level) in `edsb run`'s order; levels above a case's maximum are skipped, as there."""
    ids = select_cases(_selection_text(cases), benchmark.cases)
    chosen = parse_levels(_selection_text(levels))
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


@solver
def edsb_planner(
    data: str | None = None,
    temperature: float = 0.1,
    seed: int = 0,
    code_timeout: float = 10.0,
    code_memory: int = 1024,
    sampler: str = "reference",
    perturb: int = 0,
    sandbox: str = "auto",
    sampler_secret: str | None = None,
) -> Solver:
    """Plan and judge one run with edsb's pipeline; the epoch (1-based) is the repeat. Plain parameters, so
    Inspect logs them with the eval; `sandbox` is the one the task resolved (`edsb_task`). The PI sampler's draws
    are keyed by `sampler_secret`, a new random one per solver unless given (so model code cannot predict them)."""
    secret = sampler_secret if sampler_secret is not None else secrets.token_hex(16)
    chosen_sampler = sampler_named(sampler)
    chosen_sandbox, _ = choose_sandbox(sandbox)
    limits = SandboxLimits(sandbox=chosen_sandbox, timeout=code_timeout, memory_bytes=code_memory << 20)
    check_sandbox(limits)
    benchmark = Benchmark.open(data, perturb=perturb, fetch=True)
    pack = load_prompt_pack(benchmark)

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        meta = state.metadata
        key = RunKey(meta["variant"], meta["case"], meta["level"], state.epoch - 1)
        model = InspectChatModel(get_model())
        services = RunServices(
            benchmark,
            model,
            temperature=temperature,
            seed=seed,
            sampler_secret=secret,
            sampler=chosen_sampler,
            limits=limits,
            pack=pack,
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
    preset: str,
    variant: str | None,
    cases: Selection,
    levels: Selection,
    epochs: int | None,
    temperature: float,
    seed: int,
    code_timeout: float,
    code_memory: int,
    data: str | None,
    sampler: str = "reference",
    perturb: int = 0,
    sandbox: str = "auto",
    sampler_secret: str | None = None,
) -> Task:
    sampler_named(sampler)  # a bad choice fails here, before the dataset is built
    sandbox, note = choose_sandbox(sandbox)
    if note is not None:
        logging.getLogger(__name__).warning(note)
    chosen = get_preset(preset)
    name = get_variant(variant or chosen.variants[0]).name
    dataset = edsb_dataset(
        Benchmark.open(data, perturb=perturb, fetch=True),
        name,
        chosen.cases if cases is None else cases,
        chosen.levels if levels is None else levels,
    )
    return Task(
        dataset=dataset,
        solver=edsb_planner(
            data, temperature, seed, code_timeout, code_memory, sampler, perturb, sandbox, sampler_secret
        ),
        scorer=edsb_judge(),
        epochs=Epochs(epochs or chosen.repeats, "mean"),
        name=f"edsb_{preset}_{name}",
        metadata={
            "preset": preset,
            "variant": name,
            "temperature": temperature,
            "seed": seed,
            "sampler": sampler,
            "sandbox": sandbox,
            "perturb": perturb,
            **({"perturbation": label} if (label := perturbation_label(perturb)) else {}),
        },
    )


@task
def edsb_table1(
    variant: str = "ours",
    cases: Selection = None,
    levels: Selection = None,
    epochs: int | None = None,
    temperature: float = 0.1,
    seed: int = 0,
    code_timeout: float = 10.0,
    code_memory: int = 1024,
    data: str | None = None,
    sampler: str = "reference",
    perturb: int = 0,
    sandbox: str = "auto",
    sampler_secret: str | None = None,
) -> Task:
    """Table 1: OA, RC and SS cases at levels 0–2, 5 epochs. `variant`: ours, wo-event, object-list, scene-graph.
    `sampler`: reference or optimal, for PI cases picked with `cases`. `perturb`: the robustness suite's renaming seed
    (0 = the benchmark as published). `sandbox`: auto (the default), exact or restricted, as `edsb run --sandbox`.
    `sampler_secret`: keys the PI sampler's draws, as `edsb run --sampler-secret` (default: a new random one)."""
    return edsb_task(
        "table1",
        variant,
        cases,
        levels,
        epochs,
        temperature,
        seed,
        code_timeout,
        code_memory,
        data,
        sampler,
        perturb,
        sandbox,
        sampler_secret,
    )


@task
def edsb_table2(
    variant: str = "scene-graph",
    cases: Selection = None,
    levels: Selection = None,
    epochs: int | None = None,
    temperature: float = 0.1,
    seed: int = 0,
    code_timeout: float = 10.0,
    code_memory: int = 1024,
    data: str | None = None,
    sampler: str = "reference",
    perturb: int = 0,
    sandbox: str = "auto",
    sampler_secret: str | None = None,
) -> Task:
    """Table 2: PI cases at level 0, 5 epochs. `variant`: scene-graph or direct. `sampler`: reference (the paper's
    annealer) or optimal. `perturb`, `sandbox` and `sampler_secret`: as for table 1."""
    return edsb_task(
        "table2",
        variant,
        cases,
        levels,
        epochs,
        temperature,
        seed,
        code_timeout,
        code_memory,
        data,
        sampler,
        perturb,
        sandbox,
        sampler_secret,
    )
