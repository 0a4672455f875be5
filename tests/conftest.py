"""Fixtures shared by every test package."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from edsb.data.benchmark import Benchmark
from tests.support.data import DATA, prepare_data
from tests.support.openai_server import OpenAIServer


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
