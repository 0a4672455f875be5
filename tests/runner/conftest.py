"""Shared pieces of the runner tests: a private response cache and a scripted loopback model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from edsb.data.benchmark import Benchmark
from tests.support.data import DATA
from tests.support.openai_server import OpenAIServer
from tests.support.scripted_planner import ScriptedPlanner


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own response cache, so the user's cache is never read or written."""
    directory = tmp_path / "cache"
    monkeypatch.setenv("EDSB_CACHE_DIR", str(directory))
    monkeypatch.setenv("EDSB_DATA", str(DATA))
    return directory


@pytest.fixture
def scripted_server(benchmark: Benchmark) -> Iterator[OpenAIServer]:
    """A loopback server whose answers depend on the request body only (see `ScriptedPlanner`)."""
    with OpenAIServer(ScriptedPlanner(benchmark)) as server:
        yield server
