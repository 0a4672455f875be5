"""The pool's shape and life cycle: as many workers as cores whatever the concurrency, workers forked from one
template, replaced after a limit, a death or `runs_per_worker` runs, and compiled programs shared between runs
without sharing anything a run can change."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from pathlib import Path

import pytest

from edsb.data.benchmark import Benchmark
from edsb.sandbox import CodeContext, CodeError, SandboxError, SandboxLimits, SandboxPool, SceneSource
from edsb.sandbox.pool import default_workers

SET_A = "def parse_event():\n    get_character('A').set_target_action({})\n"


@pytest.fixture(scope="module")
def house(benchmark: Benchmark) -> CodeContext:
    return CodeContext.for_benchmark(benchmark.root, "House")


def children(pid: int | None) -> set[int]:
    assert pid is not None
    return {int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}


def action(pool: SandboxPool, code: str, context: CodeContext) -> object:
    [character] = pool.execute(code, context).characters
    return character.target_action


def test_a_burst_of_calls_runs_on_one_worker_per_core(house: CodeContext) -> None:
    with SandboxPool(SandboxLimits(timeout=5.0)) as pool:
        pool.warm_up()
        assert pool.size == default_workers()
        workers = set(pool.worker_pids())
        assert len(workers) == pool.size and children(pool.template_pid) == workers
        seen: set[int] = set()
        results: list[object] = []

        def call(i: int) -> None:
            results.append(action(pool, SET_A.format(f"'{i}'"), house))
            seen.update(children(pool.template_pid))

        threads = [threading.Thread(target=call, args=(i,)) for i in range(32)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert sorted(map(str, results), key=int) == [str(i) for i in range(32)]
        assert seen == workers  # the same workers served every call: none started, none more than the cores


def test_workers_are_forked_from_the_template_and_replaced_after_a_limit(house: CodeContext) -> None:
    with SandboxPool(SandboxLimits(timeout=1.0, workers=1)) as pool:
        assert action(pool, SET_A.format("'idle'"), house) == "idle"
        template = pool.template_pid
        [first] = pool.worker_pids()
        assert children(template) == {first}
        with pytest.raises(CodeError) as caught:
            pool.execute("def parse_event():\n    while True:\n        pass", house)
        assert caught.value.kind == "code_timeout"
        assert children(template) == set()  # killed and reaped, not left as a zombie
        assert action(pool, SET_A.format("'idle'"), house) == "idle"
        [second] = pool.worker_pids()
        assert second != first and pool.template_pid == template and children(template) == {second}


def test_a_worker_is_replaced_after_runs_per_worker_runs(house: CodeContext) -> None:
    with SandboxPool(SandboxLimits(timeout=5.0, workers=1, runs_per_worker=2)) as pool:
        pids = []
        for _ in range(5):
            assert action(pool, SET_A.format("'idle'"), house) == "idle"
            pids.append(pool.worker_pids())
        assert pids[1] == pids[3] == []  # stopped after its second run
        assert len({pid for idle in pids for pid in idle}) == 3 and all(len(pids[i]) == 1 for i in (0, 2, 4))


def test_a_dead_template_is_restarted(house: CodeContext) -> None:
    with SandboxPool(SandboxLimits(timeout=5.0, workers=1)) as pool:
        pool.warm_up()
        template = pool.template_pid
        assert template is not None
        os.kill(template, signal.SIGKILL)
        pool.close_idle()  # the next call needs a new worker
        assert action(pool, SET_A.format("'idle'"), house) == "idle"
        assert pool.template_pid not in (None, template)


def test_a_repeated_program_shares_no_state_between_runs(house: CodeContext) -> None:
    """The compiled program is reused; its default values, globals and results are made anew by every run."""
    code = (
        "counter = []\n"
        "def parse_event():\n"
        "    def f(x=[]):\n"
        "        x.append(1)\n"
        "        return len(x)\n"
        "    f()\n"
        "    get_character('A').set_target_action(str(f()))\n"
    )
    with SandboxPool(SandboxLimits(timeout=5.0, workers=1)) as pool:
        assert [action(pool, code, house) for _ in range(4)] == ["2"] * 4


def test_a_repeated_failing_program_fails_the_same_way(house: CodeContext) -> None:
    with SandboxPool(SandboxLimits(timeout=5.0, workers=1)) as pool:
        for code, kind in (
            ("def parse_event(:\n    pass", "code_syntax"),
            ("def parse_event():\n    import os", "code_policy"),
            ("def parse_event():\n    get_closest_object('chair_99')", "code_runtime"),
        ):
            failures = []
            for _ in range(3):
                with pytest.raises(CodeError) as caught:
                    pool.execute(code, house)
                failures.append((caught.value.kind, caught.value.message))
            assert failures[0][0] == kind and failures == [failures[0]] * 3


def test_scenes_given_at_start_are_loaded_once_for_every_worker(benchmark: Benchmark) -> None:
    house = CodeContext.for_benchmark(benchmark.root, "House")
    castle = CodeContext.for_benchmark(benchmark.root, "Castle")  # no such scene
    assert isinstance(house.scene, SceneSource) and isinstance(castle.scene, SceneSource)
    with SandboxPool(SandboxLimits(timeout=5.0, workers=2)) as pool:
        pool.warm_up([house.scene, castle.scene])
        key = ("source", house.scene.data_dir, "House", "0")
        assert len(pool._idle) == 2 and all(worker.scenes == {key} for worker in pool._idle)
        assert action(pool, SET_A.format("get_closest_object('table_1', 'chair')"), house) == "chair_1"
        with pytest.raises(SandboxError, match="cannot load the scene"):
            pool.execute("def parse_event():\n    pass", castle)


def test_workers_are_scheduled_as_batch_work(house: CodeContext) -> None:
    """They wait for a free core instead of preempting the runner's event loop (Linux)."""
    if not hasattr(os, "SCHED_BATCH"):
        pytest.skip("no SCHED_BATCH on this system")
    with SandboxPool(SandboxLimits(timeout=5.0, workers=2)) as pool:
        pool.warm_up()
        pids = [*pool.worker_pids(), pool.template_pid]
        assert [os.sched_getscheduler(pid) for pid in pids if pid is not None] == [os.SCHED_BATCH] * 3
        assert os.sched_getscheduler(0) != os.SCHED_BATCH  # the runner itself is left as it was


def test_an_event_loop_calls_through_one_thread_per_worker(house: CodeContext) -> None:
    """A pool's threads (`sandbox_threads` for the default pools) are as many as its workers: none waits for a
    worker, none idles in line for the GIL (asyncio's default pool would start cores + 4 threads)."""

    async def sweep(pool: SandboxPool) -> list[object]:
        loop = asyncio.get_running_loop()
        calls = [loop.run_in_executor(pool.threads, action, pool, SET_A.format(f"'{i}'"), house) for i in range(40)]
        return await asyncio.gather(*calls)

    before = set(threading.enumerate())
    with SandboxPool(SandboxLimits(timeout=5.0, workers=2)) as pool:
        pool.warm_up()
        assert asyncio.run(sweep(pool)) == [str(i) for i in range(40)]
        started = [thread for thread in set(threading.enumerate()) - before if thread.name.startswith("edsb-sandbox")]
        assert len(started) == pool.size == 2


def test_workers_load_the_perturbed_scene_a_context_names(benchmark: Benchmark) -> None:
    """The same scene under two perturbation seeds is two scenes to the pool: each run's code sees its own names,
    and the same question finds the same box under its renamed id."""
    perturbed = Benchmark(benchmark.root, 1)
    mapping = perturbed.object_mapping("House")
    plain = CodeContext.for_benchmark(benchmark.root, "House")
    renamed = CodeContext.for_benchmark(benchmark.root, "House", perturb=1)
    assert isinstance(renamed.scene, SceneSource) and renamed.scene.perturb == 1
    ask = SET_A.format("get_closest_object('{}', 'chair')")
    with SandboxPool(SandboxLimits(timeout=5.0, workers=1)) as pool:
        pool.warm_up([renamed.scene])
        for table in ("table_1", "table_3", "table_4"):
            assert mapping[table] != table
            original = action(pool, ask.format(table), plain)
            assert isinstance(original, str) and mapping[original] != original
            assert action(pool, ask.format(mapping[table]), renamed) == mapping[original]
