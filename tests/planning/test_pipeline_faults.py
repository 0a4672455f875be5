"""One run through the real pipeline (`execute_run`: loopback model, Narrator parsing, real sandbox worker, judge): the
model's mistakes are execution errors with their kind, a fault of edsb's own code makes the run `incomplete` with
kind `internal_error` and never counts against the model.

Bugs are simulated honestly: in the worker, edsb's real code API runs on a scene whose graph lost an object's edges
(sent to the worker by the real pipeline); in this process, an edsb function the pipeline calls is replaced by one
that fails the way a bug would.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from edsb.data.benchmark import Benchmark
from edsb.geometry.scene import load_scene
from edsb.llm import build_model
from edsb.planning.pipeline import RunServices, execute_run
from edsb.results import RunKey, RunResult
from edsb.sandbox import ApiScene, CodeContext, SandboxLimits
from edsb.scoring.judge import Judge
from tests.support.openai_server import OpenAIServer
from tests.support.scripted_programs import BENIGN_BODY, CASE, VARIANT, ProgramScript, program

KEY = RunKey(VARIANT, CASE, 0, 0)
LIMITS = SandboxLimits(timeout=5.0, workers=1)


@pytest.fixture
def run(benchmark: Benchmark) -> Iterator[Any]:
    """`run(body)`: the record of one run whose Event Parser answers with a program of this body."""
    servers: list[OpenAIServer] = []

    def run_once(body: str) -> RunResult:
        server = OpenAIServer(ProgramScript([program("under-test", body)])).start()
        servers.append(server)
        model = build_model("openai:scripted", base_url=server.base_url, cache=False, max_retries=0)
        services = RunServices(benchmark=benchmark, model=model, limits=LIMITS)

        async def execute() -> RunResult:
            try:
                return await execute_run(services, KEY)
            finally:
                await model.aclose()

        return asyncio.run(execute())

    yield run_once
    for server in servers:
        server.stop()


@pytest.fixture
def graph_without_chair_2(benchmark: Benchmark, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pipeline sends the worker the case's scene with the edges of `chair_2` missing (inconsistent data that
    edsb's own lookups trip over, as a bug would)."""
    scene = ApiScene(load_scene(benchmark, benchmark.case(CASE).scene_name))
    scene.edges = {name: edges for name, edges in scene.edges.items() if name != "chair_2"}

    def broken_context(
        data_dir: object, scene_name: str, latest_plans: Any = None, perturb: int = 0, seed: int = 0
    ) -> CodeContext:
        return CodeContext.create(scene, latest_plans, seed)

    monkeypatch.setattr(CodeContext, "for_benchmark", staticmethod(broken_context))


def test_the_scripted_plan_passes(run) -> None:
    record = run(BENIGN_BODY)
    assert record.status == "passed", record.error


def test_an_exception_of_the_models_code_is_an_execution_error(run) -> None:
    record = run("get_character('David').set_target_action(get_closest_object('chair_99'))")
    assert (record.status, record.error_kind) == ("error", "code_runtime")
    assert record.error == "code_runtime: KeyError: 'chair_99'"


def test_a_wrong_call_of_the_api_is_an_execution_error(run) -> None:
    record = run("get_character('David').set_position(get_area_to_sit_on())")
    assert (record.status, record.error_kind) == ("error", "code_runtime")
    assert record.error.startswith("code_runtime: TypeError: CodeApi.get_area_to_sit_on() missing 1 required")


@pytest.mark.usefixtures("graph_without_chair_2")
def test_a_fault_of_edsbs_code_api_makes_the_run_incomplete(run) -> None:
    record = run(BENIGN_BODY)  # calls get_objects_close_to('chair_2'): edsb's lookup of its edges fails
    assert (record.status, record.error_kind, record.passed) == ("incomplete", "internal_error", False)
    assert record.error.startswith("internal_error: KeyError: 'chair_2' (raised at edsb/sandbox/code_api.py:")
    assert record.error.endswith("please report it.")
    # On the same broken scene, the model's own mistake is still its own.
    record = run("get_character('David').set_target_action(get_closest_object('chair_99'))")
    assert (record.status, record.error_kind) == ("error", "code_runtime")


def test_a_fault_of_edsbs_code_in_the_parent_makes_the_run_incomplete(run, monkeypatch: pytest.MonkeyPatch) -> None:
    def judge_with_a_bug(self: Judge, plan: dict[str, Any]) -> Any:
        return {}[next(iter(plan))]  # a lookup in edsb's own (here empty) table

    monkeypatch.setattr(Judge, "judge", judge_with_a_bug)
    record = run(BENIGN_BODY)
    assert (record.status, record.error_kind) == ("incomplete", "internal_error")
    assert record.error.startswith("internal_error: KeyError: 'David' (raised at edsb/planning/pipeline.py:")
