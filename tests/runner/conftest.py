"""Shared pieces of the runner tests: a private response cache and a scripted loopback model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from edsb.data.benchmark import Benchmark
from tests.support.batch_runs import Verdicts, story_model, synchronous_verdicts
from tests.support.data import DATA
from tests.support.openai_server import OpenAIServer
from tests.support.scripted_planner import ScriptedPlanner
from tests.support.scripted_stories import StoryModel


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


@pytest.fixture
def story(benchmark: Benchmark) -> StoryModel:
    """The scripted model of the batch tests (`tests.support.batch_runs`)."""
    return story_model(benchmark)


@pytest.fixture
def synchronous(story: StoryModel, tmp_path: Path) -> tuple[Verdicts, int]:
    """The batch tests' selection run one request at a time: its verdicts and how many requests it took."""
    return synchronous_verdicts(story, tmp_path / "sync")
