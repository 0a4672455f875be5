"""Fixtures of the security tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from edsb.sandbox import CodeContext
from tests.support.data import DATA, require_data
from tests.support.edsb_cli import child_env


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The environment of an `edsb` child process: the official data and a private response cache."""
    require_data()
    return child_env(tmp_path / "cache")


# The sandbox attacks' context and untouched directory, one per test file (the pool is the suite's, tests/conftest.py).
@pytest.fixture(scope="module")
def context() -> CodeContext:
    """The House scene's code context (module-wide: loading it once per test file)."""
    require_data()
    return CodeContext.for_benchmark(DATA, "House")


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory no attack may write into (checked after every attack)."""
    return tmp_path_factory.mktemp("targets")
