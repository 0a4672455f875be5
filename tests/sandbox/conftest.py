"""Fixtures of the sandbox tests."""

from __future__ import annotations

import pytest

from edsb.data.benchmark import Benchmark
from edsb.sandbox import CodeContext


@pytest.fixture(scope="module")
def house(benchmark: Benchmark) -> CodeContext:
    """The House scene's code context, as a run hands it to the pool."""
    return CodeContext.for_benchmark(benchmark.root, "House")
