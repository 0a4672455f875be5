"""Geometry tests on the real benchmark scenes (read-only), found through $EDSB_DATA."""

from __future__ import annotations

import pytest

from edsb.data.benchmark import Benchmark
from edsb.geometry.scene import Scene, load_scene


@pytest.fixture(scope="session", params=["House", "Office", "Restaurant"])
def real_scene(request: pytest.FixtureRequest, benchmark: Benchmark) -> Scene:
    return load_scene(benchmark, request.param)
