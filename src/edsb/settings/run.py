"""The settings of a run, one typed tree: each field declared once (`setting`) with its type, default, bound, help,
panel, option and config-file keys. Groups: model, selection, generation (a field of its own, `generation`),
sampler and sandbox, limits, and what shapes one invocation only (`invocation`: output, preset, offline).

config.json stays flat, as every earlier edsb wrote it: the generation settings are written beside the others and
read back into `generation`; the invocation's options are never written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from edsb import __version__
from edsb.errors import validation_message
from edsb.settings.declare import CHECK_MODEL, RUN, Group, declared, setting
from edsb.settings.limits import (
    CHECK_TIMEOUT_S,
    CODE_MEMORY_MB,
    CODE_TIMEOUT_S,
    ERROR_CHARS,
    PLAN_CHARACTERS,
    PLAN_RELATIONSHIPS,
    PLAN_STRING_CHARS,
    RESPONSE_MB,
    TEXT_CHARS,
)
from edsb.settings.vocab import (
    PAPER_TEMPERATURE,
    PROVIDER_DEFAULT,
    PresetName,
    ReasoningEffort,
    SamplerName,
    SandboxChoice,
    ThinkingLevel,
    VariantName,
)

BOTH = (RUN, CHECK_MODEL)
MODEL_HELP = (
    "`local` (embedded), `local:<file.gguf>`, `PROVIDER:<model>`, `replay:<run dir>`, `oracle` or `oracle-wrong`."
)
SAMPLER_HELP = "PI position sampler: `reference`, the paper's simulated annealing, or `optimal`, a ceiling"
DATA_HELP = "Benchmark data directory (default: $EDSB_DATA, then the per-user data dir)."


class GenerationSettings(BaseModel):
    """What a run asks of the model with every request. None: not sent, the provider's default applies."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    temperature: float | None = setting(
        PAPER_TEMPERATURE,
        ge=0.0,
        le=2.0,
        group=Group.GENERATION,
        metavar="T",
        commands=BOTH,
        task=True,
        help=f"Sampling temperature, or `{PROVIDER_DEFAULT}` to send none: the provider's own applies "
        "(default {default}, the paper's).",
        identity=True,
    )
    # The reply's token cap (the answer's room; a thinking budget comes on top) and the sampling seed, base of the
    # repeats' (repeat r sends model_seed + r). `resolve_run_config` fills in the model's own defaults.
    max_tokens: int | None = setting(
        None,
        ge=1,
        group=Group.GENERATION,
        metavar="N",
        commands=BOTH,
        task=True,
        help="Token cap of each reply; a thinking budget comes on top (default as the paper's client: docs/models.md).",
        identity=True,
    )
    model_seed: int | None = setting(
        None,
        ge=0,
        group=Group.GENERATION,
        metavar="N",
        commands=BOTH,
        task=True,
        help="Sampling seed sent to the model, N + r on repeat r (default {default}, the embedded model 0; not "
        "where the API has none).",
        identity=True,
    )
    reasoning_effort: ReasoningEffort | None = setting(
        None,
        group=Group.GENERATION,
        metavar="LEVEL",
        commands=BOTH,
        task=True,
        help="Reasoning effort: {choices} (default {default}: the provider's own).",
        identity=True,
    )
    thinking_budget: int | None = setting(
        None,
        ge=0,
        group=Group.GENERATION,
        metavar="N",
        commands=BOTH,
        task=True,
        help="Thinking tokens (Anthropic, Gemini 2.5), on top of the answer's cap (default {default}).",
        identity=True,
    )
    thinking_level: ThinkingLevel | None = setting(
        None,
        group=Group.GENERATION,
        metavar="LEVEL",
        commands=BOTH,
        task=True,
        help="Gemini 3's `thinkingLevel`: {choices} (default {default}).",
        identity=True,
    )
    # JSON mode on the stages that ask for it (the Narrator), as the reference does
    json_mode: bool = setting(
        True,
        group=Group.GENERATION,
        option="--no-json-mode",
        commands=BOTH,
        task=True,
        help="Send no `response_format` (for servers without JSON mode); the prompt still asks for JSON.",
        identity=True,
    )

    @field_validator("temperature", mode="before")
    @classmethod
    def _provider_default(cls, value: object) -> object:
        """`--temperature default` (and `temperature = "default"` in a file): send none."""
        return None if isinstance(value, str) and value.strip().lower() == PROVIDER_DEFAULT else value

    @property
    def reasoning_sent(self) -> bool:
        return any(v is not None for v in (self.reasoning_effort, self.thinking_budget, self.thinking_level))


class Invocation(BaseModel):
    """What shapes one invocation of `edsb run`, not the run: never written to config.json."""

    model_config = ConfigDict(extra="forbid")

    preset: PresetName | None = setting(
        None, group=Group.SELECTION, metavar="PRESET", help="The paper's experiment grids: {choices} (Tables 1, 2)."
    )
    offline: bool = setting(
        False,
        group=Group.SELECTION,
        option="--offline",
        help="Never download the data, which without --data or $EDSB_DATA is fetched on first use (also "
        "$EDSB_OFFLINE=1).",
    )
    detach: bool = setting(
        False,
        group=Group.MODEL,
        option="--detach",
        help="With --batch: submit the pass's batch and exit; the same command collects it.",
    )
    batch_export: Path | None = setting(
        None,
        group=Group.MODEL,
        metavar="FILE",
        help="With --batch: write the pass's requests as OpenAI batch JSONL (vLLM's run-batch takes it); nothing "
        "is sent.",
    )
    batch_import: Path | None = setting(
        None,
        group=Group.MODEL,
        metavar="FILE",
        help="Store the answers to --batch-export's requests (OpenAI batch output JSONL, as vLLM's run-batch "
        "writes it).",
    )
    config: Path | None = setting(
        None,
        group=Group.OUTPUT,
        metavar="FILE",
        in_file=False,
        help="TOML file with any of these options (docs/running.md).",
    )
    out: Path | None = setting(
        None, group=Group.OUTPUT, metavar="DIR", help="Run directory (rerun with the same one to resume)."
    )
    quiet: bool = setting(False, group=Group.OUTPUT, option="--quiet", help="No progress bar (CI logs).")


class RunSettings(BaseModel):
    """Every setting of `edsb run`. Credentials never live here: only the *name* of the key variable (the sampler
    secret is none: it only keeps the PI draws out of model code's reach)."""

    model_config = ConfigDict(extra="forbid")

    generation: GenerationSettings = Field(default_factory=GenerationSettings)
    # Model: what answers, where, and how requests are sent.
    model: str = setting(
        "local",
        group=Group.MODEL,
        metavar="MODEL",
        commands=BOTH,
        help=MODEL_HELP + " Default: {default}.",
        identity=True,
    )
    base_url: str | None = setting(
        None,
        group=Group.MODEL,
        metavar="URL",
        commands=BOTH,
        help="The provider's endpoint (default its own host; for openai, $OPENAI_BASE_URL if set).",
    )
    api_key_env: str | None = setting(
        None,
        group=Group.MODEL,
        metavar="NAME",
        commands=BOTH,
        help="Environment variable holding the API key (default the provider's, e.g. OPENAI_API_KEY).",
    )
    # Selection: which runs.
    variants: list[VariantName] = setting(
        default_factory=lambda: [VariantName.OURS],
        group=Group.SELECTION,
        option="--variant",
        metavar="VARIANT",
        help="Variant to run: {choices} (repeatable; default {default}).",
    )
    cases: list[int] = setting(
        default_factory=list,
        group=Group.SELECTION,
        metavar="CASES",
        help="Case selection: ids, ranges, tags (`0-4,60`, `OA,RC`; default all).",
    )
    distraction: list[int] = setting(
        default_factory=lambda: [0, 1, 2],
        group=Group.SELECTION,
        metavar="LEVELS",
        help="Distraction levels, e.g. `0-2` or `0,2` (default {default}).",
    )
    repeats: int = setting(
        1, ge=1, group=Group.SELECTION, metavar="N", help="Repeats per case and level (default {default})."
    )
    seed: int = setting(
        0,
        group=Group.SAMPLER,
        metavar="N",
        task=True,
        help="Seed of each run's code and, with the sampler secret, of the position sampler (default {default}).",
        identity=True,
    )
    # Keys the PI sampler's draws so that model code cannot predict them (not a credential: see `with_sampler_secret`).
    sampler_secret: str | None = setting(
        None,
        group=Group.SAMPLER,
        metavar="TEXT",
        task=True,
        help="Key of the position sampler's draws, hidden from model code (default: the directory's, else a new "
        "random one; docs/running.md).",
        identity=True,
    )
    sampler: SamplerName = setting(
        SamplerName.REFERENCE,
        group=Group.SAMPLER,
        metavar="SAMPLER",
        task=True,
        help=SAMPLER_HELP + " (default {default}).",
        identity=True,
    )
    # `auto` until a run resolves it to the sandbox this host gives (`runner.config.RunConfig`).
    sandbox: SandboxChoice = setting(
        SandboxChoice.AUTO,
        group=Group.SAMPLER,
        metavar="SANDBOX",
        task=True,
        help="Where model code runs: `exact`, `restricted` or `{default}`, the default: exact where the host allows "
        "(docs/running.md).",
        identity=True,
    )
    concurrency: int = setting(
        4, ge=1, group=Group.MODEL, metavar="N", help="Runs in flight at once (default {default})."
    )
    timeout: float = setting(
        120.0, gt=0, group=Group.MODEL, metavar="SECONDS", help="Seconds per model request (default {default})."
    )
    max_retries: int = setting(
        6,
        ge=0,
        group=Group.MODEL,
        metavar="N",
        help="Retries per request on 429/5xx/timeouts/connection errors (default {default}).",
    )
    max_response_mb: int = setting(
        RESPONSE_MB,
        ge=1,
        group=Group.LIMITS,
        metavar="MIB",
        help="MiB a model server's reply may hold; larger ones fail (default {default}).",
    )
    cache: bool = setting(True, group=Group.MODEL, option="--no-cache", help="Bypass the response cache.")
    # Mark the prompt's shared prefix for the provider's prompt cache (Anthropic): the same tokens, a lower bill.
    prompt_cache: bool = setting(
        True,
        group=Group.GENERATION,
        option="--no-prompt-cache",
        commands=BOTH,
        help="No prompt-cache markers on Anthropic's shared prefix (they change the bill, not the prompt).",
    )
    # `--batch` (docs/batch.md): how the requests travel, never what they are, so none is part of the run's
    # identity: a batch pass and a synchronous pass get the same answers, and either resumes the other's directory.
    batch: bool = setting(
        False,
        group=Group.MODEL,
        option="--batch",
        help="Send the requests through the provider's batch API, at half price (OpenAI, Azure, Anthropic, "
        "Gemini; docs/batch.md).",
    )
    batch_poll_s: float = setting(
        60.0,
        gt=0,
        group=Group.MODEL,
        option="--batch-poll",
        metavar="SECONDS",
        keys=("batch_poll",),
        help="With --batch: seconds between looks at the batches (default {default}).",
    )
    batch_retries: int = setting(
        2,
        ge=0,
        group=Group.MODEL,
        metavar="N",
        help="With --batch: resends of a request whose batch expired or failed (default {default}).",
    )
    # Limits: of model code, of a plan, of what a result keeps.
    code_timeout: float = setting(
        CODE_TIMEOUT_S,
        gt=0,
        group=Group.LIMITS,
        metavar="SECONDS",
        task=True,
        help="Seconds model code may run (default {default}).",
        identity=True,
    )
    code_memory_mb: int = setting(
        CODE_MEMORY_MB,
        ge=64,
        group=Group.LIMITS,
        option="--code-memory",
        metavar="MIB",
        task=True,
        help="MiB of memory model code may use (default {default}).",
        identity=True,
    )
    perturb: int = setting(  # the robustness suite's renaming seed; 0 = the benchmark (older dirs)
        0,
        ge=0,
        group=Group.SELECTION,
        metavar="SEED",
        task=True,
        help="Robustness suite: characters and objects renamed from this seed (default {default}: as published; "
        "docs/perturbation.md).",
        identity=True,
    )
    max_plan_characters: int = setting(
        PLAN_CHARACTERS,
        ge=1,
        group=Group.LIMITS,
        metavar="N",
        help="Characters a plan may set (default {default}; more is code_output).",
        identity=True,
    )
    max_plan_relationships: int = setting(
        PLAN_RELATIONSHIPS,
        ge=1,
        group=Group.LIMITS,
        metavar="N",
        help="Relationships per character in a plan (default {default}).",
        identity=True,
    )
    max_plan_string_chars: int = setting(
        PLAN_STRING_CHARS,
        ge=1,
        group=Group.LIMITS,
        metavar="N",
        help="Characters of any string in a plan (default {default}).",
        identity=True,
    )
    max_error_chars: int = setting(
        ERROR_CHARS,
        ge=100,
        group=Group.LIMITS,
        metavar="N",
        help="Characters of an error message kept in a result (default {default}).",
    )
    max_text_chars: int = setting(
        TEXT_CHARS,
        ge=100,
        group=Group.LIMITS,
        metavar="N",
        help="Characters of each reply string kept in a result (default {default}).",
    )
    data: str | None = setting(None, group=Group.SELECTION, metavar="DIR", task=True, help=DATA_HELP)
    edsb_version: str = __version__
    invocation: Invocation = Field(default_factory=Invocation, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _nest(cls, data: Any) -> Any:
        """Flat keys (config.json, a config file, the options) into the groups that hold them."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for name, group in (("generation", GenerationSettings), ("invocation", Invocation)):
            inner = {key: data.pop(key) for key in list(data) if key in group.model_fields}
            if inner:
                given = data.get(name)
                base = given.model_dump() if isinstance(given, BaseModel) else dict(given or {})
                data[name] = {**base, **inner}
        return data

    @model_serializer(mode="wrap")
    def _flat(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """config.json's shape: the generation settings first, beside the rest."""
        data = handler(self)
        return {**data.pop("generation", {}), **data}


class CheckModelSettings(BaseModel):
    """`edsb check-model`'s own setting; the rest of its options are the run's (`commands` of their declaration)."""

    timeout: float = setting(
        CHECK_TIMEOUT_S,
        gt=0,
        group=Group.MODEL,
        metavar="SECONDS",
        commands=(CHECK_MODEL,),
        in_file=False,
        help="Seconds to wait for the answer (default {default}).",
    )


GENERATION_FIELDS = tuple(GenerationSettings.model_fields)


def settings_message(exc: ValidationError) -> str:
    """A settings error as `name: message`, under the setting's own name (the group a field sits in, `generation`,
    is not part of the name a user writes)."""
    message = validation_message(exc)
    for group in ("generation.", "invocation."):
        message = message.removeprefix(group)
    name, colon, why = message.partition(":")
    found = declared(RunSettings).get(name)
    if found is None:
        return message
    return f"{name} ({found.option}){colon}{why}"  # the key a file writes, and the flag a command line gives
