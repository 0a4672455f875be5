"""Fixtures shared by every test package."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from edsb.data.benchmark import Benchmark
from edsb.geometry.scene import load_scene
from edsb.planning.prompt_pack import PromptPack, load_prompt_pack
from edsb.sandbox import ApiScene, CodeContext, SandboxPool
from edsb.sandbox.kernel import PROBE_ENV, host_support
from tests.support.data import DATA, prepare_data
from tests.support.openai_server import OpenAIServer
from tests.support.sandbox_runs import LIMITS


def pytest_sessionstart(session: pytest.Session) -> None:
    """The suite sets itself up: the benchmark data is found where `edsb` would find it, or fetched once."""
    prepare_data()


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    """A fresh scriptable OpenAI-compatible server on 127.0.0.1 (random port), stopped after the test."""
    with OpenAIServer() as server:
        yield server


@pytest.fixture(scope="session")
def benchmark() -> Benchmark:
    """The official benchmark files the suite runs against (a missing data directory fails loudly, never skips)."""
    return Benchmark.open(DATA)


@pytest.fixture(scope="module")
def pool() -> Iterator[SandboxPool]:
    """A sandbox pool with the short limits of the attack and blame tests, one per test file."""
    with SandboxPool(LIMITS) as pool:
        yield pool


@pytest.fixture(scope="module")
def house(benchmark: Benchmark) -> CodeContext:
    """The House scene's code context, as a run hands it to the pool."""
    return CodeContext.for_benchmark(benchmark.root, "House")


@pytest.fixture(scope="module")
def house_scene(benchmark: Benchmark) -> ApiScene:
    """The House scene as the code API holds it (module-wide: a test may not change it, a module gets its own)."""
    return ApiScene(load_scene(benchmark, "House"))


@pytest.fixture(scope="module")
def api_scenes(benchmark: Benchmark) -> dict[str, ApiScene]:
    """The three scenes as the code API holds them, by name (module-wide, like `house_scene`)."""
    return {name: ApiScene(load_scene(benchmark, name)) for name in ("House", "Office", "Restaurant")}


@pytest.fixture(scope="module")
def pack(benchmark: Benchmark) -> PromptPack:
    """The benchmark's prompt pack (its few-shot examples and wording)."""
    return load_prompt_pack(benchmark)


@pytest.fixture
def fresh_probe(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """The kernel probe re-run under the test's environment, and forgotten afterwards."""
    monkeypatch.delenv(PROBE_ENV, raising=False)
    host_support.cache_clear()
    yield monkeypatch
    host_support.cache_clear()
