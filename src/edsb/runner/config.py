"""The resolved configuration of a run directory (`config.json`): what must match for a resume to be honest."""

from __future__ import annotations

import json
import secrets
import tomllib
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from pydantic import ValidationError, model_validator

from edsb.data.benchmark import Benchmark
from edsb.data.selection import parse_levels, select_cases, selection_text
from edsb.errors import EdsbError, UsageError, closest, hint
from edsb.llm.factory import generation_defaults, seed_refused
from edsb.llm.rules import provider_refuses, temperature_not_sent
from edsb.planning.generation import GENERATION_FIELDS, PROVIDER_DEFAULT, GenerationSettings
from edsb.planning.plans import PlanLimits
from edsb.planning.variants import get_preset, get_variant
from edsb.results.migrate import CONFIG_FORMAT, current_config
from edsb.results.rundir import CONFIG_FILE, write_json
from edsb.sandbox.limits import SandboxChoice, SandboxLimits, SandboxName, choose_sandbox
from edsb.settings.declare import declared, spellings
from edsb.settings.run import Invocation, RunSettings, settings_message
from edsb.text import TextLimits

# The identity of a run: the model and the settings that change what it produces, each declared with
# `identity=True`. Where the model is served (base_url), how many requests are in flight, caching and retries may
# change between passes, and the selection (variants, cases, levels, repeats) may grow: a directory can be resumed
# at a moved endpoint and extended. The plan limits change verdicts (a plan beyond them is an execution error); the
# text limits only what is stored.
# The model comes first: a resume that changed it is named for it, not for the defaults that came with it.
IDENTITY_FIELDS = (
    "model",
    *(name for name, setting in declared(RunSettings).items() if setting.identity and name != "model"),
)
# The selection a directory covers: on a resume, config.json records the union of what every pass asked for.
SELECTION_FIELDS = ("variants", "cases", "distraction", "repeats")


class RunConfig(RunSettings):
    """Every option of `edsb run`, resolved (the declaration, defaults and bounds are `RunSettings'`), with what a
    run derives from them: its identity and the limits it hands the sandbox, the plan reader and the result."""

    @model_validator(mode="after")
    def _resolve_sandbox(self) -> RunConfig:
        """The sandbox that runs, never `auto`: by default what `auto` picks on this host."""
        if self.sandbox == SandboxChoice.AUTO:
            self.sandbox = SandboxChoice(choose_sandbox(SandboxChoice.AUTO)[0])
        return self

    def identity(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        return {name: data[name] for name in IDENTITY_FIELDS}

    @property
    def plan_limits(self) -> PlanLimits:
        return PlanLimits(self.max_plan_characters, self.max_plan_relationships, self.max_plan_string_chars)

    @property
    def sandbox_limits(self) -> SandboxLimits:
        name = cast(SandboxName, str(self.sandbox))
        return SandboxLimits(sandbox=name, timeout=self.code_timeout, memory_bytes=self.code_memory_mb << 20)

    @property
    def text_limits(self) -> TextLimits:
        return TextLimits(self.max_error_chars, self.max_text_chars)


# Every key a config file or an option name may use, read from the declaration; the options that shape one
# invocation only (kept out of config.json) and the keys a file may hold besides: a config.json's format and version.
KEYS = spellings(RunSettings)
SESSION_OPTIONS = tuple(name for name in Invocation.model_fields if name not in ("preset", "config"))
_FILE_ONLY = ("format", "edsb_version")


def config_default(name: str) -> Any:
    """The default of a declared setting (what the help shows), written once, in its declaration."""
    return declared(RunSettings)[name].default


def field_key(name: str, value: Any) -> tuple[str, Any]:
    """An option or config-file key and its value as the field it sets (`no_cache`, True -> `cache`, False)."""
    found = KEYS.get(name.replace("-", "_"))
    if found is None:
        return name, value
    setting_, opposite = found
    return setting_.name, (not value if opposite else value)


def run_overrides(options: dict[str, Any]) -> dict[str, Any]:
    """Options as given (parameter name -> value, None or a false `--no-*` flag: not given), keyed by field for
    `resolve_run_config`."""
    overrides: dict[str, Any] = {}
    for name, value in options.items():
        found = KEYS.get(name)
        if found is not None and found[1] and not value:  # a `--no-*` flag left out: not given
            overrides[found[0].name] = None
            continue
        field, value = field_key(name, value)
        overrides[field] = str(value) if isinstance(value, Path) else value
    return overrides


def _spellings() -> list[str]:
    """Every key a config file accepts, as the field and as the option (`base_url`, `base-url`, `no-cache`)."""
    return sorted({*(key for key, (s, _) in KEYS.items() if s.in_file), *_FILE_ONLY})


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
        name, value = _file_option(path, str(key), value)
        options[name] = value
    for name in ("format", "edsb_version"):  # a previous run's config.json may be given: they are this edsb's
        options.pop(name, None)
    return options


def _file_option(path: Path, key: str, value: Any) -> tuple[str, Any]:
    """One key of a config file as the field it sets, or a one-line error: a secret, an unknown key, a wrong type."""
    found = KEYS.get(key.replace("-", "_"))
    if found is None and any(word in key.lower() for word in ("key", "secret", "token", "password")):
        raise UsageError(
            f"{path}: option {key!r} is not accepted; API keys are read from environment variables "
            "(name the variable with api-key-env)"
        )
    if found is not None and not found[0].in_file:
        raise UsageError(f"{path}: option {key!r} cannot be set from a config file")
    if found is None and key.replace("-", "_") not in _FILE_ONLY:
        raise UsageError(f"{path}: unknown key {key!r}{hint(closest(key, _spellings()))}")
    name, value = field_key(key, value)
    if name == "variants" and isinstance(value, str):
        value = [value]
    if name in ("cases", "distraction") and (isinstance(value, bool) or not isinstance(value, str | int | list)):
        raise UsageError(f"{path}: option {key!r} must be a selection string or a list of integers")
    return name.replace("-", "_"), value


def load_config_file(path: Path) -> dict[str, Any]:
    """The run options of a TOML (or JSON) file, top level or in a `[run]` table, keyed by `RunConfig` field.

    Keys use the command-line spelling (`base-url`, `variant`, `code-memory`, `no-cache`) or the field name
    (`base_url`, `variants`, `code_memory_mb`, `cache`), so a run directory's `config.json` works as a config file.
    """
    return {name: value for name, value in _read_options(path).items() if name not in SESSION_OPTIONS}


def load_session_options(path: Path) -> dict[str, Any]:
    """`out`, `quiet` and `offline` from a config file: they shape one invocation, not the run, so they stay out of
    config.json."""
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
        detail = settings_message(exc) if isinstance(exc, ValidationError) else str(exc)
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


def _resume_fix(name: str, old: Any) -> str:
    """The options that give a setting the value a directory was run with."""
    option = declared(RunSettings)[name].option
    if declared(RunSettings)[name].negated:
        return f"leave out {option}" if old else f"pass {option}"
    if name == "temperature" and old is None:
        return f"pass {option} {PROVIDER_DEFAULT}"
    return f"leave out {option}" if old is None else f"pass {option} {old}"


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
    """config.json: its format first, then every setting (not the invocation's own: `Invocation`)."""
    write_json(Path(run_dir) / CONFIG_FILE, {"format": CONFIG_FORMAT, **config.model_dump()})


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
        raise UsageError(f"invalid run option {settings_message(exc)}") from None


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
        raise UsageError(f"invalid run option {settings_message(exc)}") from None
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
