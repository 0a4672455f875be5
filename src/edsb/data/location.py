"""Where the benchmark data lives: `--data`, then `$EDSB_DATA`, then the per-user data directory."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

ENV_VAR = "EDSB_DATA"
CASES_DIR = Path("benchmark/test_cases")  # a data directory holds the benchmark when it has this folder


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("edsb")) / "edsb-data"


def explicit_data_dir(option: Path | str | None = None) -> bool:
    """Whether the user named the data directory (`--data`, `$EDSB_DATA`): edsb never downloads into such a place."""
    return bool(option) or bool(os.environ.get(ENV_VAR))


def resolve_data_dir(option: Path | str | None = None) -> Path:
    """The data directory a command should use; existence is checked by the loader, which can say what is missing."""
    if option:
        return Path(option).expanduser()
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    return default_data_dir()
