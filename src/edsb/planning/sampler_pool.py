"""The PI sampler's own processes: where a run's positions are drawn, off the event loop and off its default executor.

The annealer is pure Python and holds the GIL for as long as it searches (up to seconds for the worst plan the
bound on cost terms lets through). Run in a thread, it starved the event loop, and on asyncio's default executor
it queued the resolver's DNS lookups behind it, so the requests of other runs timed out while the server had long
answered. Here each sampling is a job for a small pool of processes (one per usable core), created with the first
job and shut down with the run:

- a job is a few picklable values (the scene by source, the relationships, the characters, the generator's seed):
  the worker loads and caches the scene itself, and draws exactly what the same call in the parent would;
- workers run as batch work at the lowest priority, so a busy worker waits for a core rather than preempting the
  event loop, and die with edsb (a thread of each waits for edsb's exit on a pidfd);
- a job's CPU time is bounded (`MAX_SAMPLING_CPU_S`, counted by the kernel's profiling timer in the worker): a plan
  over it is the model's, refused as an over-large plan is;
- jobs wait their turn in the parent, fewest cost terms first, and one worker more than the cores is kept for light
  plans (an expected PI plan's two or three terms), so an honest plan is never queued behind a row of heavy ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import multiprocessing
import os
import select
import signal
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from types import FrameType

import numpy as np

from edsb.data.benchmark import Benchmark
from edsb.geometry.scene import load_scene
from edsb.planning.sampler import sample_positions, warm_scene
from edsb.sandbox.limits import SceneSource

#: CPU seconds that sampling one plan may take in its worker (every character, both samplers). The expected plans of
#: the PI cases take 9-45 ms per character on average and 214 ms at worst (40 draws each, 2-core host at load 6), the
#: oracle's PI plans 0.14 s at worst (about 455 samplings), and the reference's own annealer was reported to take up
#: to 2 s for one character: a plan of several characters that the reference would sample stays below this. The
#: worst plan the bound on cost terms lets through took 3.7-7.2 s and now stops here (benchmarks/bench_sampler_bound.py
#: measures both).
MAX_SAMPLING_CPU_S = 2.0
#: Cost terms of a light plan, which may use the worker kept apart from the heavy ones: a character placed by one or
#: two relationships, as every expected PI plan is.
LIGHT_TERMS = 3
_LOWEST_PRIORITY = 19


class SamplingOverBudget(Exception):
    """A job that used up its CPU seconds (raised in the worker by its profiling timer, and pickled back)."""


@dataclass(frozen=True)
class SamplingJob:
    """One plan's sampling as a worker runs it: everything is a string, a number or a list of strings."""

    scene: SceneSource
    relationships: Mapping[str, Sequence[str]]  # character -> relationship strings, in plan order
    characters: tuple[str, ...]  # the names a relationship may use as anchors
    seed: int  # of the run's generator (`np.random.default_rng(seed)`), derived in the parent
    sampler: str
    terms: int  # cost terms (`sampling_terms`): the job's place in the queue


def run_job(job: SamplingJob, cpu_seconds: float) -> dict[str, tuple[float, float]]:
    """In a worker: each character's point, as `sample_positions` draws it with the job's generator, within
    `cpu_seconds`; the scene's own preparation is not counted against them."""
    source = job.scene
    scene = load_scene(Benchmark.open(source.data_dir, perturb=source.perturb), source.scene_name)
    warm_scene(scene, job.sampler)
    with _cpu_budget(cpu_seconds):
        rng = np.random.default_rng(job.seed)
        return sample_positions(scene, job.relationships, characters=job.characters, rng=rng, sampler=job.sampler)


@contextlib.contextmanager
def _cpu_budget(seconds: float) -> Iterator[None]:
    """Raise SamplingOverBudget in this (the worker's main) thread once the process has used `seconds` of CPU."""

    def over(signum: int, frame: FrameType | None) -> None:
        raise SamplingOverBudget(seconds)

    previous = signal.signal(signal.SIGPROF, over)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def _start_worker(parent: int) -> None:
    """A worker's first steps: die with edsb (`parent`), and yield every core to the runner."""
    _die_with(parent)
    if hasattr(os, "sched_setscheduler") and hasattr(os, "SCHED_BATCH"):
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, _LOWEST_PRIORITY)


def _die_with(parent: int) -> None:
    """Exit as soon as `parent` does, however it ends. The worker's own parent is the forkserver, which lives as long
    as any worker holds its pipe, so `PR_SET_PDEATHSIG` alone would never fire: a thread waits on edsb's pidfd."""
    if not hasattr(os, "pidfd_open"):  # not Linux: the pool's shutdown alone ends the workers
        return
    try:
        handle = os.pidfd_open(parent)
    except OSError:  # already gone
        os._exit(1)

    def watch() -> None:
        select.select([handle], [], [])
        os._exit(1)

    threading.Thread(target=watch, name="edsb-sampler-watch", daemon=True).start()


# A second Ctrl-C leaves at once (`os._exit`) without closing the pool's queues. multiprocessing's resource tracker,
# a process of its own, still unlinks their semaphores once edsb is gone, but first warns about them, on the
# terminal, under the shell's prompt. It takes its warning filters from this process's when the pool starts it.
_QUIET_TRACKER = "ignore:resource_tracker:UserWarning"


def _context() -> multiprocessing.context.BaseContext:
    """forkserver where there is one (the workers fork from a small server that has imported this module once), else
    spawn; never a fork of edsb itself, which holds threads, sockets and the event loop."""
    if _QUIET_TRACKER not in sys.warnoptions:
        sys.warnoptions.append(_QUIET_TRACKER)
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([__name__])
        return context
    return multiprocessing.get_context("spawn")


class SamplerPool:
    """The processes one `edsb run` samples in: created with the first job, closed with the run. `workers` jobs run
    at once, and one more whose plan is light (`LIGHT_TERMS`), so an honest plan never waits for a row of heavy
    ones to finish."""

    def __init__(self, workers: int | None = None, cpu_seconds: float | None = None) -> None:
        from edsb.sandbox.pool import default_workers

        self.workers = workers or default_workers()
        self.cpu_seconds = MAX_SAMPLING_CPU_S if cpu_seconds is None else cpu_seconds  # per job
        self._executor: ProcessPoolExecutor | None = None
        self._launcher: ThreadPoolExecutor | None = None
        self._running = 0
        self._heavy = 0  # of the jobs running, those over LIGHT_TERMS
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def start(self) -> None:
        """Start the workers in the background if they are not up yet (a run that will sample calls this before its
        first request, so that its sampling does not wait for them)."""
        if self._launcher is None:
            self._hand_over(None)

    async def sample(self, job: SamplingJob) -> dict[str, tuple[float, float]]:
        """The job's points, computed in a worker once its turn comes; SamplingOverBudget past its CPU seconds."""
        await self._turn(job.terms)
        try:
            submitted = await asyncio.wrap_future(self._hand_over(job))
            assert submitted is not None
            return await asyncio.wrap_future(submitted)
        finally:
            self._release(job.terms)

    def _hand_over(self, job: SamplingJob | None) -> Future[Future[dict[str, tuple[float, float]]] | None]:
        """Submit on a thread of the pool's own: starting the forkserver and a worker blocks until they are up,
        which must not stop the event loop (None: start the workers only)."""
        if self._launcher is None:
            self._launcher = ThreadPoolExecutor(1, thread_name_prefix="edsb-sampler-launch")
        return self._launcher.submit(self._submit, job)

    def close(self) -> None:
        """Kill the workers, a job still running included: nothing waits for its points any more (the run is over, or
        was stopped), and waiting for it kept a stopped sweep's processes, and edsb, alive for up to its CPU
        seconds, far longer on the clock at the lowest priority. A later job starts a new pool."""
        launcher, self._launcher = self._launcher, None
        if launcher is not None:
            launcher.shutdown(wait=True)
        executor, self._executor = self._executor, None
        if executor is not None:
            for worker in list((executor._processes or {}).values()):
                worker.kill()
            executor.shutdown(wait=True, cancel_futures=True)

    def _submit(self, job: SamplingJob | None) -> Future[dict[str, tuple[float, float]]] | None:
        if self._executor is None:
            self._executor = ProcessPoolExecutor(
                self.workers + 1, mp_context=_context(), initializer=_start_worker, initargs=(os.getpid(),)
            )
            if job is None:  # a worker starts with a job: this one does nothing
                self._executor.submit(int)
        return None if job is None else self._executor.submit(run_job, job, self.cpu_seconds)

    def _may_start(self, terms: int) -> bool:
        return self._running <= self.workers and (terms <= LIGHT_TERMS or self._heavy < self.workers)

    async def _turn(self, terms: int) -> None:
        """Wait for a free worker; waiting jobs start fewest cost terms first, then in the order they came."""
        turn = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (terms, next(self._order), turn))
        self._dispatch()
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():  # handed a worker just as it was cancelled: pass it on
                self._release(terms)
            raise

    def _release(self, terms: int) -> None:
        """Free the finished job's worker for the jobs waiting."""
        self._running -= 1
        self._heavy -= terms > LIGHT_TERMS
        self._dispatch()

    def _dispatch(self) -> None:
        """Start every waiting job that may start now, lightest first."""
        while self._waiting:
            terms, _, turn = self._waiting[0]
            if turn.done():  # cancelled while waiting
                heapq.heappop(self._waiting)
            elif self._may_start(terms):
                heapq.heappop(self._waiting)
                self._running += 1
                self._heavy += terms > LIGHT_TERMS
                turn.set_result(None)
            else:
                return
