"""Scoring tests run on the real benchmark data (read-only), found through $EDSB_DATA."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from edsb.data.benchmark import Benchmark
from edsb.geometry.scene import load_scene
from edsb.scoring.judge import Judge


@pytest.fixture(scope="session")
def judge_for(benchmark: Benchmark) -> Callable[..., Judge]:
    """`judge_for(case_id, level=0)`: a judge of an official case, optionally with fields of the case replaced."""

    def make(case_id: int, level: int = 0, **case_updates: object) -> Judge:
        case = benchmark.case(case_id)
        if case_updates:
            case = case.model_copy(update=case_updates)
        return Judge(case, level, load_scene(benchmark, case.scene_name))

    return make
