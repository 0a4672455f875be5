"""One benchmark run end to end: scenario → Narrator → Event Parser → sandboxed code → sampler → judge.

This is the paper's framework as the runner calls it. The model is the only awaited part; the sandbox calls (on the
sandbox's own threads, one per worker) and the PI sampler (in its own processes, `sampler_pool`) run elsewhere, so the
event loop keeps other runs' requests in flight and nothing a run waits for queues on the loop's default executor.
Any failure the reference would turn into an execution error because of what the model answered becomes a result
with a named kind; a transport failure (the model never answered) or a fault of edsb's own code
(`internal_error`) makes the run `incomplete` instead, so it is neither scored against the model nor lost.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edsb.data.benchmark import Benchmark
from edsb.errors import EdsbError
from edsb.geometry.scene import Scene, load_scene
from edsb.llm.errors import ReplayError, TransportError
from edsb.llm.protocol import ChatModel, ChatResponse, Message
from edsb.llm.transcripts import TranscriptWriter
from edsb.planning.generation import GenerationSettings, chat_request
from edsb.planning.messages import StagePrompt, UnsupportedVariantError, narrator_request, parser_request
from edsb.planning.narrator import parse_narrator_reply
from edsb.planning.plans import PlanLimits, run_plan_code_noting_repairs
from edsb.planning.prompt_pack import PromptPack, load_prompt_pack
from edsb.planning.sampler import MAX_SAMPLING_TERMS, sampling_terms
from edsb.planning.sampler_pool import SamplerPool, SamplingJob, SamplingOverBudget
from edsb.planning.sampler_rng import secret_generator_for, secret_seed_for
from edsb.planning.scenario import Scenario, build_scenario
from edsb.planning.variants import PlanningMode, SamplerName, get_variant
from edsb.results import ErrorKind, RunError, RunKey, RunResult, RunStatus, internal_error_message
from edsb.sandbox import CodeContext, CodeError, SandboxLimits, SceneSource, fault_text, sandbox_threads
from edsb.sandbox.seeds import code_seed
from edsb.scoring.judge import Judge
from edsb.text import TextLimits, TextRepairs

# How each API says a reply stopped at its token cap: OpenAI-compatible and llama.cpp, Anthropic, Gemini.
CAP_FINISH_REASONS = frozenset({"length", "max_tokens", "MAX_TOKENS"})
SAMPLER_COLLISION = "bbox"  # mesh-free collision and random start (the reference used HSSD meshes)


@dataclass
class RunServices:
    """What every run of one `edsb run` shares: data, prompts, the model, limits, the seed and the PI sampler."""

    benchmark: Benchmark
    model: ChatModel
    generation: GenerationSettings = field(default_factory=GenerationSettings)  # what every request asks for
    seed: int = 0
    # Keys the PI sampler's draws, never the code's: the child knows its own seed but not this ("": the earlier
    # derivation from the seed and the run key alone, which the run's code can recompute).
    sampler_secret: str = ""
    sampler: SamplerName = SamplerName.REFERENCE
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    transcripts: TranscriptWriter | None = None
    pack: PromptPack | None = None
    plan_limits: PlanLimits = field(default_factory=PlanLimits)
    text_limits: TextLimits = field(default_factory=TextLimits)
    sampler_pool: SamplerPool = field(default_factory=SamplerPool)  # started by the first PI run; close() ends it

    def __post_init__(self) -> None:
        if self.pack is None:
            self.pack = load_prompt_pack(self.benchmark)

    def scene(self, name: str) -> Scene:
        return load_scene(self.benchmark, name)

    def rng(self, key: RunKey) -> np.random.Generator:
        """The PI sampler's generator: it depends only on the seed, the run key and the sampler secret, so
        concurrency never changes a result, and the run's code, which never sees the secret, cannot predict it."""
        return secret_generator_for(self.sampler_secret, self._seed_text(key))

    def sampler_seed(self, key: RunKey) -> int:
        """The seed of `rng(key)`, what a sampler process is sent."""
        return secret_seed_for(self.sampler_secret, self._seed_text(key))

    def close(self) -> None:
        """Stop what the runs started in the background (the sampler's processes)."""
        self.sampler_pool.close()

    def code_seed(self, key: RunKey) -> int:
        """The seed of the run's code (`random`, `numpy.random`): from the seed and the run key only, so a run's
        code draws the same numbers at any concurrency and on a rerun. It is sent to the sandbox; the secret is not."""
        return code_seed(self._seed_text(key))

    def _seed_text(self, key: RunKey) -> str:
        return f"{self.seed}/{key.id}"


@dataclass
class RunTrace:
    """What a run accumulates on the way: per-module tokens, latency, the Narrator's event."""

    tokens: dict[str, dict[str, int]] = field(default_factory=dict)
    latency_s: float = 0.0
    model: str | None = None
    event: dict[str, Any] | None = None
    repairs: TextRepairs = field(default_factory=TextRepairs)
    cut: list[str] = field(default_factory=list)  # modules whose reply stopped at the token cap
    cut_notes: list[str] = field(default_factory=list)  # how much of the cap thinking used, where a reply says
    billed_usd: float | None = None  # what the provider billed, where its replies say

    def add(self, module: str, response: ChatResponse) -> None:
        if response.surrogates_replaced:
            self.repairs.surrogates.add(module)
        if response.finish_reason in CAP_FINISH_REASONS:
            self.cut.append(module)
            if (note := response.cap_note()) is not None:
                self.cut_notes.append(f"{module}: {note}")
        entry = self.tokens.setdefault(module, {"prompt": 0, "completion": 0})
        entry["prompt"] += response.prompt_tokens
        entry["completion"] += response.completion_tokens
        for name, count in (
            ("reasoning", response.reasoning_tokens),  # inside the completion count, as billed
            ("cached", response.cached_tokens),  # inside the prompt count, billed at the cache's rates
            ("cache_write", response.cache_write_tokens),
        ):
            if count:  # recorded apart where reported
                entry[name] = entry.get(name, 0) + count
        if response.billed_usd is not None:
            self.billed_usd = (self.billed_usd or 0.0) + response.billed_usd
        self.latency_s += response.latency_s
        self.model = response.model


async def _ask(services: RunServices, key: RunKey, request: StagePrompt, trace: RunTrace) -> str:
    messages = (Message.model_validate(message) for message in request.messages)
    model_request = chat_request(services.generation, messages, json_mode=request.json_mode, repeat=key.repeat)
    if services.transcripts is not None:
        response = await services.transcripts.complete(
            services.model, model_request, run=key.file_stem, module=request.module
        )
    else:
        response = await services.model.complete(model_request)
    trace.add(request.module, response)
    return response.text


async def plan_run(
    services: RunServices, key: RunKey, scenario: Scenario, trace: RunTrace | None = None
) -> dict[str, Any]:
    """The plan the framework produces for one run (before judging); raises RunError kinds or TransportError.
    `trace`, if given, collects tokens, latency and the Narrator's event as the run goes."""
    trace = RunTrace() if trace is None else trace
    variant = scenario.variant
    case = scenario.case
    reason = variant.unsupported_reason(case.tags)
    if reason:
        raise UnsupportedVariantError(reason)
    assert services.pack is not None
    benchmark = services.benchmark
    context = CodeContext.for_benchmark(
        benchmark.root, scenario.scene_name, scenario.latest_plans, benchmark.perturb, services.code_seed(key)
    )
    if samples_positions(scenario):
        services.sampler_pool.start()  # the workers come up while the model answers
    narration = await _ask(services, key, narrator_request(scenario, services.pack), trace)
    if variant.parser is None:  # w/o Event: the Narrator's reply is the plan code
        plan = await _run_code(services, narration, context, variant.planning_mode, trace)
        if not any(name in plan for name in scenario.character_names):
            return {}  # a plan naming no kept character is the reference's way to skip a turn
    else:
        event = parse_narrator_reply(narration, scenario.character_names, trace.repairs)
        if event is None:
            return {}
        trace.event = {"characters": list(event.characters), "activity": event.activity}
        code_reply = await _ask(services, key, parser_request(scenario, services.pack, event), trace)
        plan = await _run_code(services, code_reply, context, variant.planning_mode, trace)
    if samples_positions(scenario):
        plan = await _sample_positions(services, key, scenario, plan, services.sampler)
    return plan


async def _run_code(
    services: RunServices, reply: str, context: CodeContext, mode: PlanningMode, trace: RunTrace
) -> dict[str, Any]:
    """The plan of the reply's code. What the code handed back (the plan's strings, the text of its exception)
    enters edsb here, from the worker: made valid Unicode, noted as `code`."""
    threads = sandbox_threads(services.limits)
    try:
        plan, repaired = await asyncio.get_running_loop().run_in_executor(
            threads, run_plan_code_noting_repairs, reply, context, mode, services.limits, services.plan_limits
        )
    except CodeError as exc:
        if exc.repaired:  # the worker already replaced them
            trace.repairs.surrogates.add("code")
        raise CodeError(exc.kind, trace.repairs.text(exc.message, "code")) from None
    if repaired:
        trace.repairs.surrogates.add("code")
    return trace.repairs.json(plan, "code")


def samples_positions(scenario: Scenario) -> bool:
    """PI cases get sampled positions in every variant but Direct Inference, where the model writes them."""
    return scenario.case.is_position_case and scenario.variant.samples_positions


async def _sample_positions(
    services: RunServices, key: RunKey, scenario: Scenario, plan: dict[str, Any], sampler: SamplerName
) -> dict[str, Any]:
    """The plan with each character's `sampled_position`, drawn in the sampler's processes from a generator of the
    seed and the run key (one generator per run and sampler, characters in plan order). The runner's CPU is bounded
    whatever the model's plan asks for: by its cost terms before any search, by CPU seconds during it."""
    job = _sampling_job(services, key, scenario, plan, sampler)
    try:
        points = await services.sampler_pool.sample(job)
    except SamplingOverBudget:
        limit = services.sampler_pool.cpu_seconds
        raise CodeError(
            ErrorKind.CODE_OUTPUT,
            f"the plan's positions took the sampler over its limit of {limit:g} CPU seconds ({job.terms} cost terms)",
        ) from None
    return {name: {**entry, "sampled_position": list(points[name])} for name, entry in plan.items()}


def _sampling_job(
    services: RunServices, key: RunKey, scenario: Scenario, plan: dict[str, Any], sampler: SamplerName
) -> SamplingJob:
    """The sampling of the plan as a few plain values; a plan over the bound on cost terms is refused here."""
    scene = services.scene(scenario.scene_name)
    relationships = {name: list(entry["relationships"]) for name, entry in plan.items()}
    characters = tuple(scenario.character_names)
    terms = sampling_terms(scene, relationships, characters=characters)
    if terms > MAX_SAMPLING_TERMS:
        raise CodeError(
            ErrorKind.CODE_OUTPUT,
            f"the plan asks the position sampler for {terms} cost terms (one per character placed, one per "
            f"relationship); the limit is {MAX_SAMPLING_TERMS}",
        )
    source = SceneSource.of(services.benchmark.root, scenario.scene_name, services.benchmark.perturb)
    return SamplingJob(source, relationships, characters, services.sampler_seed(key), str(sampler), terms)


def _judge(services: RunServices, scenario: Scenario, plan: dict[str, Any]):
    return Judge(scenario.case, scenario.level, services.scene(scenario.scene_name)).judge(plan)


async def _optimal_would_pass(
    services: RunServices, key: RunKey, scenario: Scenario, plan: dict[str, Any]
) -> bool | None:
    """Whether the same relationships, placed by the optimal sampler (as `--sampler optimal` places them for this
    run), pass the judge: the `sampler_miss` diagnostic of a failed reference-sampled run (None: the optimiser went
    over the sampler's CPU limit, so nobody knows)."""
    try:
        resampled = await _sample_positions(services, key, scenario, plan, SamplerName.OPTIMAL)
    except CodeError:
        return None
    return _judge(services, scenario, resampled).passed


def _sampler_record(services: RunServices, scenario: Scenario) -> dict[str, Any] | None:
    if not samples_positions(scenario):
        return None
    return {"collision": SAMPLER_COLLISION, "method": str(services.sampler)}


class EndpointRefused(EdsbError):
    """The endpoint refuses every request (bad key, unknown model, forbidden, a setting it does not take): no run can
    succeed, so stop."""


def _transport_outcome(exc: TransportError) -> tuple[RunStatus, ErrorKind, str]:
    """(status, kind, message) of a run whose model gave no completion."""
    if exc.setting_refused:  # configuration: every run would be refused alike
        raise EndpointRefused(f"the model endpoint refused a setting: {exc}\nfix: {exc.fix}") from None
    if exc.client_refused:
        raise EndpointRefused(f"the model endpoint refused the request: {exc}") from None
    if exc.request_rejected:  # this prompt refused (too long, blocked): an execution error, as in the reference
        kind = ErrorKind.REQUEST_REJECTED
        return RunStatus.ERROR, kind, f"{kind}: {exc}"
    kind = ErrorKind.transport(exc.kind)
    return RunStatus.INCOMPLETE, kind, f"{kind}: {exc}"


def _cut_note(cap: int | None, trace: RunTrace) -> str:
    """Why a reply stopped at its length limit: the token cap sent, or, with none sent, the server's context window
    (a local server's default window is small: Ollama's is 4,096 tokens below 24 GiB of GPU memory)."""
    modules = ", ".join(trace.cut)
    if cap is None:
        return (
            f" (the {modules} reply stopped at its length limit though no token cap was sent: the server's context "
            "window cut it; for Ollama, raise OLLAMA_CONTEXT_LENGTH)"
        )
    thinking = f"; {', '.join(trace.cut_notes)}" if trace.cut_notes else ""
    return f" (the {modules} reply stopped at the token cap of {cap}: see --max-tokens{thinking})"


def _bounded_fields(services: RunServices, trace: RunTrace, **fields: Any) -> dict[str, Any]:
    """The fields of a result that hold text from the model or server, as the record keeps them: valid Unicode
    (the error message may quote a server; the rest was cleaned where it entered) and, but for the plan, cut to
    `text_limits`."""
    limits, repairs = services.text_limits, trace.repairs
    if fields["error"] is not None:
        fields["error"] = repairs.bounded(repairs.text(fields["error"], "error"), limits.error_chars, "error")
    if fields["reason"] is not None:
        fields["reason"] = repairs.bounded(repairs.text(fields["reason"], "reason"), limits.text_chars, "reason")
    # The plan is kept whole: the plan limits already bound it, and the record must hold the plan the judge saw
    # (`edsb show --run` judges it again), however small `--max-text-chars` is.
    if fields["event"] is not None:
        fields["event"] = repairs.bounded_json(fields["event"], limits.text_chars, "event")
    return fields


def _internal_error(exc: Exception) -> str:
    return internal_error_message(fault_text(exc))


async def execute_run(services: RunServices, key: RunKey) -> RunResult:
    """The result of one run (a line of results.jsonl). Set-up errors (missing data) propagate and stop the
    benchmark, as in the reference; everything after set-up is recorded."""
    case = services.benchmark.case(key.case)
    scenario = build_scenario(services.benchmark, case, key.distraction, key.repeat, get_variant(key.variant))
    trace = RunTrace()
    started = time.perf_counter()
    outcome = await _outcome(services, key, scenario, trace)
    bounded = _bounded_fields(
        services, trace, error=outcome.message, reason=outcome.reason, plan=outcome.plan, event=trace.event
    )
    return RunResult(
        key=key.id,
        variant=key.variant,
        case=key.case,
        distraction=key.distraction,
        repeat=key.repeat,
        scene=case.scene_name,
        tags=list(case.tags),
        status=outcome.status,
        error_kind=outcome.error_kind,
        **bounded,
        prompt_tokens=sum(t["prompt"] for t in trace.tokens.values()),
        completion_tokens=sum(t["completion"] for t in trace.tokens.values()),
        tokens=trace.tokens,
        billed_usd=trace.billed_usd,
        latency_s=round(trace.latency_s, 3),
        wall_s=round(time.perf_counter() - started, 3),
        model=trace.model or services.model.identity,
        sampler=_sampler_record(services, scenario),
        sampler_miss=outcome.sampler_miss,
        sandbox=services.limits.sandbox,
        surrogates_replaced=sorted(trace.repairs.surrogates),
        truncated=sorted(trace.repairs.truncated),
    )


@dataclass
class _Outcome:
    """What a run came to: its status and error, and what it got as far as (a plan, the judge's reason)."""

    status: RunStatus = RunStatus.INCOMPLETE
    error_kind: ErrorKind | None = None
    message: str | None = None
    reason: str | None = None
    plan: dict[str, Any] | None = None
    sampler_miss: bool | None = None


async def _outcome(services: RunServices, key: RunKey, scenario: Scenario, trace: RunTrace) -> _Outcome:
    """Plan and judge the run; every failure after set-up becomes the outcome of its kind (the model's execution
    error, a run the model never answered, or a fault of edsb's own)."""
    outcome = _Outcome()
    try:
        await _plan_and_judge(services, key, scenario, trace, outcome)
    except TransportError as exc:
        outcome.status, outcome.error_kind, outcome.message = _transport_outcome(exc)
    except RunError as exc:
        # An execution error: every RunError is raised where the reference's run fails on what the model answered
        # (its reply, its code, its plan), or on a variant the reference cannot run (`unsupported_variant`).
        outcome.status, outcome.error_kind, outcome.message = RunStatus.ERROR, exc.kind, f"{exc.kind}: {exc}"
        if trace.cut:  # say why, or a cut-off reply reads as the model's own malformed one
            outcome.message += _cut_note(services.generation.max_tokens, trace)
    except ReplayError:
        raise  # the replay cannot answer: a fault of the replay (code, data or options changed), not of this run
    except Exception as exc:
        # A fault of edsb itself (a KeyError, TypeError or failed assert of its own logic, EdsbFault from the
        # sandbox): neither the model's failure nor a verdict. Kept out of the rates, retried by the next rerun.
        outcome.status, outcome.error_kind = RunStatus.INCOMPLETE, ErrorKind.INTERNAL_ERROR
        outcome.message = _internal_error(exc)
    return outcome


async def _plan_and_judge(
    services: RunServices, key: RunKey, scenario: Scenario, trace: RunTrace, outcome: _Outcome
) -> None:
    """1. the plan; 2. the judge's verdict; 3. for a failed run of the reference sampler, whether the optimiser's
    placement would have passed (`sampler_miss`). `outcome` keeps what each step got, should a later one raise."""
    outcome.plan = plan = await plan_run(services, key, scenario, trace)
    verdict = _judge(services, scenario, plan)  # a tenth of a millisecond: cheaper than a thread hand-off
    outcome.status = RunStatus.ERROR if verdict.errored else (RunStatus.PASSED if verdict.passed else RunStatus.FAILED)
    outcome.error_kind, outcome.message, outcome.reason = verdict.error, verdict.describe_error(), verdict.reason
    if samples_positions(scenario) and services.sampler is SamplerName.REFERENCE and not verdict.errored:
        failed = outcome.status is RunStatus.FAILED
        outcome.sampler_miss = failed and await _optimal_would_pass(services, key, scenario, plan)
