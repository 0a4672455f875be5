"""Where the tests find the official benchmark files ($EDSB_DATA, else ../shared/edsb-data beside this checkout, where
CI puts them), and private copies of them that a test may damage."""

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("EDSB_DATA", REPO.parent / "shared" / "edsb-data"))


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
