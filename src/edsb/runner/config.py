"""The resolved configuration of a run directory (`config.json`): what must match for a resume to be honest."""

from __future__ import annotations

import json
import secrets
import tomllib
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field, ValidationError

from edsb import __version__
from edsb.data.benchmark import Benchmark
from edsb.data.selection import parse_levels, select_cases, selection_text
from edsb.errors import EdsbError, UsageError, closest, hint, validation_message
from edsb.llm.factory import generation_defaults, seed_refused
from edsb.llm.openai_client import DEFAULT_MAX_RESPONSE_BYTES
from edsb.llm.rules import provider_refuses, temperature_not_sent
from edsb.planning.generation import GENERATION_FIELDS, PROVIDER_DEFAULT, GenerationSettings
from edsb.planning.plans import PlanLimits
from edsb.planning.variants import SamplerName, get_preset, get_variant
from edsb.results.migrate import CONFIG_FORMAT, current_config
from edsb.results.rundir import CONFIG_FILE, write_json
from edsb.sandbox.limits import SandboxChoice, SandboxLimits, SandboxName, choose_sandbox
from edsb.text import TextLimits

# The identity of a run: the model and the settings that change what it produces. Where the model is served
# (base_url), how many requests are in flight, caching and retries may change between passes, and the selection
# (variants, cases, levels, repeats) may grow: a directory can be resumed at a moved endpoint and extended.
# The plan limits change verdicts (a plan beyond them is an execution error); the text limits only what is stored.
IDENTITY_FIELDS = (
    "model",
    *GENERATION_FIELDS,
    "seed",
    "sampler_secret",
    "sampler",
    "sandbox",
    "code_timeout",
    "code_memory_mb",
    "perturb",
    "max_plan_characters",
    "max_plan_relationships",
    "max_plan_string_chars",
)
# The selection a directory covers: on a resume, config.json records the union of what every pass asked for.
SELECTION_FIELDS = ("variants", "cases", "distraction", "repeats")


class RunConfig(GenerationSettings):
    """Every option of `edsb run`, resolved: the generation settings (their defaults are `GenerationSettings'`) and
    the rest. Credentials never live here: only the *name* of the key variable (the sampler secret is none: it only
    keeps the PI draws out of model code's reach)."""

    model_config = ConfigDict(extra="forbid", frozen=False)

    model: str = "local"
    base_url: str | None = None
    api_key_env: str | None = None
    variants: list[str] = Field(default_factory=lambda: ["ours"])
    cases: list[int] = Field(default_factory=list)
    distraction: list[int] = Field(default_factory=lambda: [0, 1, 2])
    repeats: int = Field(default=1, ge=1)
    seed: int = 0
    # Keys the PI sampler's draws so that model code cannot predict them (not a credential: see `with_sampler_secret`).
    sampler_secret: str | None = None
    sampler: SamplerName = SamplerName.REFERENCE
    # The sandbox that runs (never `auto`: `resolve_run_config` resolves it); by default what `auto` picks here.
    sandbox: SandboxName = Field(default_factory=lambda: choose_sandbox(SandboxChoice.AUTO)[0])
    concurrency: int = Field(default=4, ge=1)
    timeout: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=6, ge=0)
    # the largest body a model server may send back, MiB
    max_response_mb: int = Field(default=DEFAULT_MAX_RESPONSE_BYTES >> 20, ge=1)
    cache: bool = True
    # Mark the prompt's shared prefix for the provider's prompt cache (Anthropic): the same tokens, a lower bill.
    prompt_cache: bool = True
    code_timeout: float = Field(default=10.0, gt=0)
    code_memory_mb: int = Field(default=1024, ge=64)
    perturb: int = Field(default=0, ge=0)  # the robustness suite's renaming seed; 0 = the benchmark (older dirs)
    max_plan_characters: int = Field(default=PlanLimits().characters, ge=1)
    max_plan_relationships: int = Field(default=PlanLimits().relationships, ge=1)
    max_plan_string_chars: int = Field(default=PlanLimits().string_chars, ge=1)
    max_error_chars: int = Field(default=TextLimits().error_chars, ge=100)
    max_text_chars: int = Field(default=TextLimits().text_chars, ge=100)
    data: str | None = None
    edsb_version: str = __version__

    # `edsb run --batch` (docs/batch.md): how the requests travel, never what they are, so none of these is part of
    # the run's identity: a batch pass and a synchronous pass get the same answers to the same requests, and either
    # resumes the other's directory.
    batch: bool = False  # through the provider's batch API, at its batch price
    batch_detach: bool = False  # submit the pass's batch and exit; the same command collects it
    batch_export: str | None = None  # write the pass's requests in OpenAI's batch format instead of sending them
    batch_import: str | None = None  # the answers to exported requests, in OpenAI's batch output format
    batch_poll_s: float = Field(default=60.0, gt=0)  # seconds between two looks at the batches in flight
    batch_retries: int = Field(default=2, ge=0)  # resends of a request whose batch expired or failed

    @property
    def generation(self) -> GenerationSettings:
        return GenerationSettings.model_validate(self.model_dump(include=set(GENERATION_FIELDS)))

    def identity(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        return {name: data[name] for name in IDENTITY_FIELDS}

    @property
    def plan_limits(self) -> PlanLimits:
        return PlanLimits(self.max_plan_characters, self.max_plan_relationships, self.max_plan_string_chars)

    @property
    def sandbox_limits(self) -> SandboxLimits:
        return SandboxLimits(sandbox=self.sandbox, timeout=self.code_timeout, memory_bytes=self.code_memory_mb << 20)

    @property
    def text_limits(self) -> TextLimits:
        return TextLimits(self.max_error_chars, self.max_text_chars)


# `--batch`'s options that shape one invocation (files to write or read, exit once submitted): kept out of
# config.json, so that a config.json given back as `--config` does not export or detach again.
BATCH_INVOCATION_FIELDS = ("batch_detach", "batch_export", "batch_import")
# Command-line spellings that differ from the field they set, and options that belong to one invocation only.
_ALIASES = {
    "variant": "variants",
    "code_memory": "code_memory_mb",
    "detach": "batch_detach",
    "batch_poll": "batch_poll_s",
}
SESSION_OPTIONS = ("out", "quiet")
_NOT_OPTIONS = ("config",)
# Keys a file may hold besides the fields: a preset, a config.json's format and edsb version.
_FILE_ONLY = ("preset", "format", "edsb_version")
# Flags that turn a field's default off (`--no-cache`: cache false).
_NEGATED = ("no_cache", "no_json_mode", "no_prompt_cache")


def config_default(name: str) -> Any:
    """The default of a `RunConfig` field (what the help shows), written once, in the model."""
    return RunConfig.model_fields[name].get_default(call_default_factory=True)


def run_overrides(options: dict[str, Any]) -> dict[str, Any]:
    """`edsb run`'s options as given (parameter name -> value, None or a false `--no-*` flag: not given), keyed
    by `RunConfig` field for `resolve_run_config`."""
    overrides: dict[str, Any] = {}
    for name, value in options.items():
        if name in _NEGATED:
            name, value = name.removeprefix("no_"), (False if value else None)
        overrides[_ALIASES.get(name, name)] = str(value) if isinstance(value, Path) else value
    return overrides


def _spellings() -> list[str]:
    """Every key a config file accepts, as the field and as the option (`base_url`, `base-url`, `no-cache`)."""
    names = [*RunConfig.model_fields, *SESSION_OPTIONS, *_FILE_ONLY, *_ALIASES, *_NEGATED]
    return sorted({spelling for name in names for spelling in (name, name.replace("_", "-"))})


def _read_options(path: Path) -> dict[str, Any]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{path}: cannot read config file ({exc.strerror})") from None
    try:
        raw = json.loads(text) if str(path).endswith(".json") else tomllib.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path}: invalid config file ({exc})") from None
    if not isinstance(raw, dict):
        raise UsageError(f"{path}: a config file holds a table of options")
    table = raw.get("run", raw)
    if not isinstance(table, dict):
        raise UsageError(f"{path}: [run] must be a table of options")
    options: dict[str, Any] = {}
    for key, value in table.items():
        name = str(key).replace("-", "_")
        secret_like = any(word in name for word in ("key", "secret", "token", "password"))
        if secret_like and name not in RunConfig.model_fields:  # `api_key_env`, `max_tokens` are options
            raise UsageError(
                f"{path}: option {key!r} is not accepted; API keys are read from environment variables "
                "(name the variable with api-key-env)"
            )
        if name in _NOT_OPTIONS:
            raise UsageError(f"{path}: option {key!r} cannot be set from a config file")
        if name in _NEGATED:
            name, value = name.removeprefix("no_"), not value
        name = _ALIASES.get(name, name)
        if name not in RunConfig.model_fields and name not in (*SESSION_OPTIONS, *_FILE_ONLY):
            raise UsageError(f"{path}: unknown key {key!r}{hint(closest(str(key), _spellings()))}")
        if name == "variants" and isinstance(value, str):
            value = [value]
        if name in ("cases", "distraction") and (isinstance(value, bool) or not isinstance(value, str | int | list)):
            raise UsageError(f"{path}: option {key!r} must be a selection string or a list of integers")
        options[name] = value
    for name in ("format", "edsb_version"):  # a previous run's config.json may be given: they are this edsb's
        options.pop(name, None)
    return options


def load_config_file(path: Path) -> dict[str, Any]:
    """The run options of a TOML (or JSON) file, top level or in a `[run]` table, keyed by `RunConfig` field.

    Keys use the command-line spelling (`base-url`, `variant`, `code-memory`, `no-cache`) or the field name
    (`base_url`, `variants`, `code_memory_mb`, `cache`), so a run directory's `config.json` works as a config file.
    """
    return {name: value for name, value in _read_options(path).items() if name not in SESSION_OPTIONS}


def load_session_options(path: Path) -> dict[str, Any]:
    """`out` and `quiet` from a config file: they shape one invocation, not the run, so they stay out of config.json."""
    return {name: value for name, value in _read_options(path).items() if name in SESSION_OPTIONS}


def check_resume(run_dir: Path, config: RunConfig) -> list[str]:
    """Refuse to mix two different runs in one directory; write config.json (the selection grown to cover every
    pass, the latest endpoint and settings). Returns notes for the user: a moved endpoint, a grown selection."""
    path = Path(run_dir) / CONFIG_FILE
    if not path.exists():
        write_config(run_dir, config)
        return []
    try:
        previous = read_config(path)
    except (json.JSONDecodeError, ValidationError) as exc:
        detail = validation_message(exc) if isinstance(exc, ValidationError) else str(exc)
        raise EdsbError(f"{path}: unreadable run configuration ({detail}); use a new --out directory") from None
    old, new = previous.identity(), config.identity()
    for name in IDENTITY_FIELDS:
        if old[name] != new[name]:
            fix = _resume_fix(name, old[name])
            raise UsageError(
                f"{run_dir} holds a different run: {name} was {old[name]!r}, now {new[name]!r} "
                f"({fix} to resume or extend it, or use a new --out directory)"
            )
    notes = []
    if previous.base_url != config.base_url:
        before, after = previous.base_url or "the default", config.base_url or "the default"
        notes.append(f"endpoint changed from {before} to {after}")
    grown = {
        "variants": previous.variants + [v for v in config.variants if v not in previous.variants],
        "cases": sorted(set(previous.cases) | set(config.cases)),
        "distraction": sorted(set(previous.distraction) | set(config.distraction)),
        "repeats": max(previous.repeats, config.repeats),
    }
    added = [name for name in SELECTION_FIELDS if grown[name] != getattr(previous, name)]
    if added:
        notes.append(f"extending the run directory ({', '.join(added)})")
    write_config(run_dir, config.model_copy(update=grown))
    return notes


_OPTION_OF = {"code_memory_mb": "code-memory"}


def _resume_fix(name: str, old: Any) -> str:
    """The options that give a setting the value a directory was run with."""
    if name == "json_mode":
        return "leave out --no-json-mode" if old else "pass --no-json-mode"
    option = _OPTION_OF.get(name, name.replace("_", "-"))
    if name == "temperature" and old is None:
        return f"pass --temperature {PROVIDER_DEFAULT}"
    return f"leave out --{option}" if old is None else f"pass --{option} {old}"


def read_config(path: Path) -> RunConfig:
    """A directory's `config.json`, of any format, read through `migrate`. Raises JSONDecodeError or
    ValidationError for an unreadable file, EdsbError for one of a newer edsb."""
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    if isinstance(raw, dict):
        raw = current_config(raw, str(path))
        raw.pop("format")
    return RunConfig.model_validate(raw)


def with_sampler_secret(run_dir: Path, config: RunConfig) -> RunConfig:
    """The config with its sampler secret: as given (`--sampler-secret`), else the directory's (a resume or an
    extension draws as the first pass did), else a replayed directory's (`--model replay:DIR` draws as DIR did), else
    a new random one. It lives in config.json, which model code never reads, and nowhere the sandbox can see;
    carrying it to a fresh directory (with the same seed) gives the same draws there."""
    if config.sampler_secret is not None:
        return config
    sources = [Path(run_dir) / CONFIG_FILE]
    if config.model.startswith("replay:"):
        sources.append(Path(config.model.partition(":")[2]).expanduser() / CONFIG_FILE)
    for path in sources:
        if path.exists():
            try:
                secret = read_config(path).sampler_secret
            except (json.JSONDecodeError, ValidationError):
                return config  # `check_resume` says what is wrong with the run directory's file
            return config.model_copy(update={"sampler_secret": secret})
    return config.model_copy(update={"sampler_secret": secrets.token_hex(16)})


def write_config(run_dir: Path, config: RunConfig) -> None:
    """config.json: its format first, then every setting (but `BATCH_INVOCATION_FIELDS`)."""
    settings = config.model_dump(exclude=set(BATCH_INVOCATION_FIELDS))
    write_json(Path(run_dir) / CONFIG_FILE, {"format": CONFIG_FORMAT, **settings})


def resolve_run_config(
    options: dict[str, Any],
    config_file: Path | None = None,
    *,
    fetch: bool = False,
    offline: bool = False,
    notes: list[str] | None = None,
) -> RunConfig:
    """The configuration of one `edsb run`: defaults < preset < config file < explicit options (None = not given).

    `options` uses `RunConfig` field names plus `preset`; cases and levels may be selection strings or lists.
    `fetch` / `offline`: as `Benchmark.open` (the data is downloaded on first use unless offline). The sandbox
    choice (`auto` by default) is resolved here; `notes` receives the line that says why `auto` fell back.
    """
    merged: dict[str, Any] = {}
    file_options = load_config_file(config_file) if config_file else {}
    file_preset = file_options.pop("preset", None)
    preset = options.get("preset") or file_preset
    if preset:
        chosen = get_preset(preset)
        merged.update(
            cases=chosen.cases, variants=list(chosen.variants), distraction=list(chosen.levels), repeats=chosen.repeats
        )
    merged.update(file_options)
    merged.update({k: v for k, v in options.items() if v is not None and k != "preset"})
    merged["sandbox"], note = choose_sandbox(str(merged.get("sandbox") or SandboxChoice.AUTO))
    if note is not None and notes is not None:
        notes.append(note)
    benchmark = Benchmark.open(merged.get("data"), fetch=fetch, offline=offline)
    merged["cases"] = select_cases(selection_text(merged.get("cases")), benchmark.cases)
    merged["distraction"] = parse_levels(selection_text(merged.get("distraction")), config_default("distraction"))
    variants = merged.get("variants") or config_default("variants")
    merged["variants"] = [get_variant(v).name for v in variants]
    model = merged.get("model") or config_default("model")
    merged.update(resolve_generation(model, merged, notes).model_dump())
    merged["data"] = str(benchmark.resolved_root)
    try:
        return RunConfig.model_validate(merged)
    except ValidationError as exc:
        raise UsageError(f"invalid run option {validation_message(exc)}") from None


def resolve_generation(model: str, given: Mapping[str, Any], notes: list[str] | None = None) -> GenerationSettings:
    """The generation settings `model` gets: those `given` (a key present, even as None, is given; None for the cap
    or seed means the model's own), else the model's defaults. What the provider is known to refuse is a one-line
    error here, before any request; `notes` receives why a default is not sent."""
    settings = {**_replayed(model), **{name: given[name] for name in GENERATION_FIELDS if name in given}}
    cap, seed = generation_defaults(model)
    if settings.get("max_tokens") is None:
        settings["max_tokens"] = cap
    if settings.get("model_seed") is None:
        settings["model_seed"] = seed
    elif refused := seed_refused(model):
        raise UsageError(f"--model-seed: {refused}")
    if "temperature" not in settings and (why := temperature_not_sent(model, settings)) is not None:
        settings["temperature"] = None
        if notes is not None:
            notes.append(f"no temperature sent: {why}")
    try:
        resolved = GenerationSettings.model_validate(settings)
    except ValidationError as exc:
        raise UsageError(f"invalid run option {validation_message(exc)}") from None
    refused = provider_refuses(model, resolved)
    if refused is not None:
        raise UsageError(f"{model}: {refused}")
    return resolved


def _replayed(model: str) -> dict[str, Any]:
    """A replay's generation settings: those its recorded run sent (its config.json), so that its requests hash as
    recorded; nothing for another model, or a directory without a readable config."""
    kind, _, target = model.partition(":")
    try:
        recorded = read_config(Path(target).expanduser() / CONFIG_FILE) if kind == "replay" and target else None
    except (OSError, ValueError):  # ValidationError and JSONDecodeError are ValueErrors
        return {}
    return recorded.generation.model_dump() if recorded is not None else {}


def default_out_dir(model: str, now: datetime | None = None, suffix: str | None = None) -> Path:
    """`runs/<model>-<yymmdd-HHMMSS>-<6 hex>`: a new directory per invocation, named so a listing sorts by model and
    time. The random suffix keeps the name unguessable: code that knows the model and the hour still cannot find the
    directory's answers and transcripts."""
    slug = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in model)
    tail = secrets.token_hex(3) if suffix is None else suffix
    return Path("runs") / f"{slug}-{(now or datetime.now()):%y%m%d-%H%M%S}-{tail}"
