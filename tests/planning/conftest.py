"""Fixtures shared by the planning tests."""

from __future__ import annotations

import pytest

from edsb.data.benchmark import Benchmark
from edsb.geometry.scene import Scene, load_scene


@pytest.fixture(scope="module")
def scenes(benchmark: Benchmark) -> dict[str, Scene]:
    """The three scenes of the benchmark, loaded once per test file."""
    return {name: load_scene(benchmark, name) for name in ("House", "Office", "Restaurant")}
