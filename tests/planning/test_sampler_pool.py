"""The PI sampler's processes (`planning.sampler_pool`): the same draws as in this process, never on the event loop's
default executor, a CPU bound per plan, fewest cost terms first, and workers that die with their parent."""

from __future__ import annotations

import asyncio
import os
import select
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

from edsb.data.benchmark import Benchmark
from edsb.geometry.scene import load_scene
from edsb.planning.sampler import MAX_SAMPLING_TERMS, sample_positions, sampling_terms
from edsb.planning.sampler_pool import LIGHT_TERMS, SamplerPool, SamplingJob, SamplingOverBudget
from edsb.planning.sampler_rng import secret_seed_for
from edsb.sandbox import SceneSource
from tests.support.data import DATA
from tests.support.edsb_cli import HANG_GUARD_S
from tests.support.processes import Process, cpu_ticks, poll, process, running

SCENE = "House"
# Several characters, one placed by the annealer from a random start, one seated, one by two object anchors.
PLAN = {
    "Ann": ["close to fridge_1", "in front of fridge_1"],
    "Bob": ["sit on chair_2"],
    "Cy": ["look at Ann"],
    "Dee": ["between couch_1 and fridge_1"],
}
GONE_WITHIN_S = 5.0  # a safety net: without the kill, the job runs for its 600 CPU seconds
WORST = {"C": [f"close to chair_{i % 6 + 1}" for i in range(MAX_SAMPLING_TERMS - 1)]}


@pytest.fixture
def sampler_pool() -> Iterator[SamplerPool]:
    pool = SamplerPool(workers=1)
    yield pool
    pool.close()


def job(plan: dict[str, list[str]], sampler: str = "reference", seed: int = 11) -> SamplingJob:
    scene = load_scene(Benchmark.open(DATA), SCENE)
    characters = tuple(plan)
    terms = sampling_terms(scene, plan, characters=characters)
    return SamplingJob(SceneSource.of(DATA, SCENE), plan, characters, seed, sampler, terms)


@pytest.mark.parametrize("sampler", ["reference", "optimal"])
def test_a_worker_draws_what_this_process_draws(sampler_pool: SamplerPool, sampler: str) -> None:
    seed = secret_seed_for("a" * 32, "0/some-run")
    here = sample_positions(
        load_scene(Benchmark.open(DATA), SCENE),
        PLAN,
        characters=tuple(PLAN),
        rng=np.random.default_rng(seed),
        sampler=sampler,
    )
    there = asyncio.run(sampler_pool.sample(job(PLAN, sampler, seed)))
    assert there == here and list(there) == list(PLAN)


class _RefusingExecutor(ThreadPoolExecutor):
    """A default executor that records what is handed to it and refuses it."""

    def __init__(self) -> None:
        super().__init__(max_workers=1)
        self.handed: list[Any] = []

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.handed.append(fn)
        raise RuntimeError("the default executor was used")


def test_sampling_never_uses_the_default_executor(sampler_pool: SamplerPool) -> None:
    refusing = _RefusingExecutor()

    async def sample() -> dict[str, tuple[float, float]]:
        asyncio.get_running_loop().set_default_executor(refusing)
        return await sampler_pool.sample(job(PLAN))

    assert set(asyncio.run(sample())) == set(PLAN)
    assert refusing.handed == []


def test_a_plan_over_its_cpu_seconds_is_stopped() -> None:
    pool = SamplerPool(workers=1, cpu_seconds=0.02)
    # The worst plan within the bound on terms anneals 5,000 proposals of 23 terms: far more than 20 ms of CPU.
    with pytest.raises(SamplingOverBudget):
        asyncio.run(pool.sample(job(WORST)))
    # The worker lives on and serves the next plan within its bound.
    pool.cpu_seconds = 2.0
    assert set(asyncio.run(pool.sample(job(PLAN)))) == set(PLAN)
    pool.close()


def test_waiting_plans_start_fewest_cost_terms_first_and_a_light_one_never_waits_for_heavy_ones() -> None:
    pool = SamplerPool(workers=1)  # one worker for any plan, one more for a light plan
    started: list[str] = []

    def turn(name: str, terms: int) -> asyncio.Future[None]:
        waiting = asyncio.ensure_future(pool._turn(terms))
        waiting.add_done_callback(lambda _: started.append(name))
        return waiting

    async def order() -> None:
        await turn("heavy 1", MAX_SAMPLING_TERMS)  # takes the worker
        heavy = turn("heavy 2", MAX_SAMPLING_TERMS)
        await turn("light 1", LIGHT_TERMS)  # at once, on the worker kept for light plans
        light = turn("light 2", 2)
        pool._release(LIGHT_TERMS)  # light 1 is done: light 2, not heavy 2, takes its worker
        await light
        assert not heavy.done()
        pool._release(MAX_SAMPLING_TERMS)  # heavy 1 is done: heavy 2 takes its worker
        await heavy

    asyncio.run(order())
    assert started == ["heavy 1", "light 1", "light 2", "heavy 2"]
    assert pool._executor is None  # no job was sent: the order is the parent's


_ORPHAN = textwrap.dedent(
    """
    import asyncio, sys
    from edsb.planning.sampler_pool import SamplerPool, SamplingJob
    from edsb.sandbox import SceneSource

    pool = SamplerPool(workers=1)
    job = SamplingJob(SceneSource.of(sys.argv[1], "House"), {"A": ["close to fridge_1"]}, ("A",), 1, "reference", 2)
    asyncio.run(pool.sample(job))
    print(*(process.pid for process in pool._executor._processes.values()), flush=True)
    sys.stdin.read()  # until the test kills this process
    """
)


def test_workers_die_with_the_process_that_started_them() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", _ORPHAN, str(DATA)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        workers = [int(pid) for pid in parent.stdout.readline().split()]
        handles = [os.pidfd_open(pid) for pid in workers]
    finally:
        parent.kill()
        parent.wait()
    assert workers
    for handle in handles:  # a pidfd becomes readable when its process exits
        assert select.select([handle], [], [], 60)[0] == [handle]
        os.close(handle)


def _annealing(pool: SamplerPool) -> set[Process]:
    """The pool's workers that have begun a job: an idle worker, forked ready, has used no CPU time yet."""
    executor = pool._executor
    workers = {process(pid) for pid in (executor._processes if executor is not None else {})}
    return {worker for worker in workers if worker is not None and cpu_ticks(worker[0]) >= 10}


def test_closing_the_pool_kills_a_job_still_running() -> None:
    """A stopped sweep closes its pool: a worker annealing the worst plan must not run on for its CPU seconds (nor
    keep edsb from exiting meanwhile)."""
    pool = SamplerPool(workers=1, cpu_seconds=600.0)
    with ThreadPoolExecutor(2) as threads:
        sampling = threads.submit(asyncio.run, pool.sample(job(WORST)))
        try:
            assert poll(lambda: bool(_annealing(pool)) or sampling.done(), HANG_GUARD_S) is not None, "hung"
            workers = _annealing(pool)
            assert workers and not sampling.done(), sampling  # the control: a job is being annealed
        except BaseException:
            pool.close()  # else the executor's exit would wait on the job's CPU seconds
            raise
        closing = threads.submit(pool.close)
        try:
            assert poll(lambda: not running(workers), GONE_WITHIN_S) is not None, running(workers)
        finally:
            for pid, _ in running(workers):  # only what this test started
                os.kill(pid, signal.SIGKILL)
        closing.result(timeout=HANG_GUARD_S)
        assert sampling.exception(timeout=HANG_GUARD_S) is not None  # no points from a killed job
