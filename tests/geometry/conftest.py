"""Geometry tests on the real benchmark scenes (read-only), found through $EDSB_DATA."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from edsb.data.benchmark import Benchmark
from edsb.geometry.scene import Scene, load_scene

DATA = Path(os.environ.get("EDSB_DATA", Path(__file__).resolve().parents[3] / "shared" / "edsb-data"))


@pytest.fixture(scope="session")
def benchmark() -> Benchmark:
    return Benchmark.open(DATA)


@pytest.fixture(scope="session", params=["House", "Office", "Restaurant"])
def real_scene(request: pytest.FixtureRequest, benchmark: Benchmark) -> Scene:
    return load_scene(benchmark, request.param)
