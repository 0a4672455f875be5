"""Fixtures of the security tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.data import require_data
from tests.support.edsb_cli import child_env


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The environment of an `edsb` child process: the official data and a private response cache."""
    require_data()
    return child_env(tmp_path / "cache")
