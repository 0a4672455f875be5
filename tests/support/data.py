"""Where the tests find the official benchmark files: where `edsb` would ($EDSB_DATA, else the per-user data directory,
fetched once per session if it is empty), and private copies of them that a test may damage."""

import json
import os
import shutil
from pathlib import Path

import pytest

from edsb.data.download import ensure_data
from edsb.data.location import ENV_VAR, resolve_data_dir
from edsb.errors import DataError

REPO = Path(__file__).resolve().parents[2]
DATA = resolve_data_dir(None)


def prepare_data() -> None:
    """Download the data on first use as `edsb` does (unless $EDSB_DATA names a copy, as CI's does), then export
    $EDSB_DATA so every in-process command and child reads that same copy and none downloads again."""
    if not os.environ.get(ENV_VAR):
        try:
            ensure_data(None)
        except DataError as exc:
            pytest.exit(f"the benchmark data is missing and could not be fetched: {exc} (or set {ENV_VAR})", 1)
        os.environ[ENV_VAR] = str(DATA)


def require_data() -> Path:
    """DATA, or a test failure that says where it was looked for: a missing data directory never skips a test."""
    if not DATA.is_dir():
        pytest.fail(f"benchmark data not found at {DATA} (set EDSB_DATA)")
    return DATA


def writable_copy(target: Path) -> Path:
    """Copy the official data to `target` with write permission (the originals are read-only); returns `target`."""
    shutil.copytree(DATA, target)
    for path in target.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return target


def unordered(value: object) -> object:
    """A JSON value with every list of names or relations sorted (lists of numbers keep their order): a perturbed
    scene graph lists an object's relations in its own scene order."""
    if isinstance(value, dict):
        return {key: unordered(item) for key, item in value.items()}
    if isinstance(value, list):
        items = [unordered(item) for item in value]
        if all(isinstance(item, (int, float)) for item in items):
            return items
        return sorted(items, key=json.dumps)
    return value
