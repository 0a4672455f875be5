"""The resolved configuration of a run directory (`config.json`): what must match for a resume to be honest."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from edsb import __version__
from edsb.data.benchmark import validation_message
from edsb.errors import EdsbError, UsageError

CONFIG_FILE = "config.json"

# Settings that change what a run produces. Everything else (concurrency, cache, output verbosity, retries) may
# differ between the first pass and a resume.
IDENTITY_FIELDS = (
    "model",
    "base_url",
    "variants",
    "cases",
    "distraction",
    "repeats",
    "temperature",
    "seed",
    "code_timeout",
    "code_memory_mb",
)


class RunConfig(BaseModel):
    """Every option of `edsb run`, resolved. Secrets never live here: only the *name* of the key variable."""

    model_config = ConfigDict(extra="forbid")

    model: str = "local"
    base_url: str | None = None
    api_key_env: str | None = None
    variants: list[str] = Field(default_factory=lambda: ["ours"])
    cases: list[int] = Field(default_factory=list)
    distraction: list[int] = Field(default_factory=lambda: [0, 1, 2])
    repeats: int = Field(default=1, ge=1)
    temperature: float = Field(default=0.1, ge=0.0, le=2.0)
    seed: int = 0
    concurrency: int = Field(default=4, ge=1)
    timeout: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=6, ge=0)
    cache: bool = True
    code_timeout: float = Field(default=10.0, gt=0)
    code_memory_mb: int = Field(default=1024, ge=64)
    data: str | None = None
    edsb_version: str = __version__

    def identity(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in IDENTITY_FIELDS}


def load_config_file(path: Path) -> dict[str, Any]:
    """Options from a TOML (or JSON) file, with CLI spelling (`base-url` or `base_url`)."""
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
    raw = raw.get("run", raw)
    return {str(key).replace("-", "_"): value for key, value in raw.items()}


def check_resume(run_dir: Path, config: RunConfig) -> None:
    """Refuse to mix two different runs in one directory; write config.json the first time."""
    path = Path(run_dir) / CONFIG_FILE
    if not path.exists():
        write_config(run_dir, config)
        return
    try:
        previous = RunConfig.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (json.JSONDecodeError, ValidationError) as exc:
        detail = validation_message(exc) if isinstance(exc, ValidationError) else str(exc)
        raise EdsbError(f"{path}: unreadable run configuration ({detail}); use a new --out directory") from None
    old, new = previous.identity(), config.identity()
    for name in IDENTITY_FIELDS:
        if old[name] != new[name]:
            raise UsageError(
                f"{run_dir} holds a different run: {name} was {old[name]!r}, now {new[name]!r} "
                "(use a new --out directory, or the same options to resume)"
            )


def write_config(run_dir: Path, config: RunConfig) -> None:
    path = Path(run_dir) / CONFIG_FILE
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(config.model_dump(), indent=2) + "\n", encoding="utf-8")
    temporary.replace(path)
