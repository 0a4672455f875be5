"""The sandbox's cost per run: CPU (parent and workers) and wall time per call, cold start against a fork from the
warm template, and a burst of concurrent calls against a pool of one cold worker per concurrency slot.

The programs are the oracle's Event Parser answers (right and wrong) for every case and distraction level, run on
the real scenes with each run's history, as the pipeline hands them to the sandbox. CPU is counted in every process:
the parent's own (`RUSAGE_SELF`), the workers' and the template's (`/proc/<pid>/stat` while they live, and
`RUSAGE_CHILDREN` once a closed pool has reaped them).

Figures (each a ratio of two things measured in this run):
- `cold_worker_cpu_ms`: CPU until a new worker has answered one call on each scene: forked from the template (what
  edsb does) against a cold interpreter that imports everything and loads the scenes itself (what it did).
- `call_cpu_ms` / `call_wall_ms`: one warm call, parent + worker, programs repeated (as repeats and cached models
  send them), against `uncached_call_cpu_ms`, every program text new (compiled again).
- `burst_c<N>_cpu_ms_per_call` / `burst_c<N>_wall_ms_per_call`: N coroutines calling at once, about a Table 1
  sweep's worth of calls; a pool sized to the cores called through its own threads (as the pipeline does) against
  a pool of N cold workers called through asyncio's default thread pool, pool start and shutdown included;
  `burst_c<N>_workers` counts the worker processes alive during the burst.

Usage: EDSB_DATA=/path/to/edsb-data python benchmarks/bench_sandbox.py [--smoke]
(the full run starts 64 + 256 cold interpreters for the comparison: about two minutes of both cores).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from edsb.data.benchmark import Benchmark
from edsb.llm.oracle.answers import ANSWERS
from edsb.planning.plans import plan_from_raw
from edsb.planning.scenario import build_scenario
from edsb.sandbox import CodeContext, SandboxLimits, SandboxPool
from edsb.sandbox.pool import default_workers

Call = tuple[str, CodeContext]
SWEEP_CALLS = 1792  # calls per burst in the full run: about a Table 1 sweep (1,800 runs)


def programs(benchmark: Benchmark, levels: int) -> list[Call]:
    """Each case's oracle answer and its misplaced twin, at the first `levels` distraction levels."""
    calls: list[Call] = []
    for case_id, case in benchmark.cases.items():
        answer = ANSWERS[case_id]
        for level in range(min(levels, case.max_distraction + 1)):
            scenario = build_scenario(benchmark, case, level, 0, "ours")
            context = CodeContext.for_benchmark(benchmark.root, scenario.scene_name, scenario.latest_plans)
            for code in (answer.code, answer.misplaced().code if answer.decoy else None):
                if code is not None:
                    calls.append((f"```python\ndef parse_event():\n{code}```\n", context))
    return calls


def proc_cpu(pid: int) -> float:
    """CPU seconds of a live process (the scheduler's nanosecond count; clock ticks are too coarse); 0 once gone."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9
    except OSError:
        return 0.0


def children(pid: int | None) -> list[int]:
    if pid is None:
        return []
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def own_and_reaped_cpu() -> float:
    """This process's CPU plus that of every descendant reaped so far."""
    return sum(
        resource.getrusage(who).ru_utime + resource.getrusage(who).ru_stime
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )


def run_call(pool: SandboxPool, call: Call) -> None:
    plan_from_raw(pool.execute(*call), "event")


@contextmanager
def measured() -> Iterator[dict[str, float]]:
    """CPU (all processes, closed pools included) and wall of the block."""
    out: dict[str, float] = {}
    cpu, wall = own_and_reaped_cpu(), time.perf_counter()
    yield out
    out["cpu"], out["wall"] = own_and_reaped_cpu() - cpu, time.perf_counter() - wall


def cold_vs_forked(limits: SandboxLimits, per_scene: list[Call], repeats: int) -> tuple[float, float]:
    """Mean CPU until a new worker has answered one call per scene: cold interpreter, forked worker."""
    with measured() as cold:
        for _ in range(repeats):
            with SandboxPool(limits) as pool:
                for call in per_scene:
                    run_call(pool, call)
    with SandboxPool(limits) as pool:
        for _ in range(2):  # the first worker loads the scenes; the next spawn has the template load them too
            for call in per_scene:
                run_call(pool, call)
            pool.close_idle()
        template = pool.template_pid
        assert template is not None
        spent = 0.0
        for _ in range(repeats):
            before, started = proc_cpu(template), time.thread_time()
            for call in per_scene:
                run_call(pool, call)
            [worker] = pool.worker_pids()
            spent += proc_cpu(worker)
            pool.close_idle()  # stopping it is part of its cost, as in the cold pool's close
            spent += proc_cpu(template) - before + time.thread_time() - started
    return cold["cpu"] / repeats, spent / repeats


def warm_calls(limits: SandboxLimits, calls: list[Call], rounds: int, fresh_text: bool) -> tuple[float, float]:
    """Mean CPU (parent + worker) and wall per warm call on one worker, kept for the whole measurement;
    `fresh_text` makes every program new."""
    with SandboxPool(replace(limits, runs_per_worker=len(calls) * (rounds + 1) + 1)) as pool:
        for call in calls:
            run_call(pool, call)
        [worker] = pool.worker_pids()
        before_worker, before_parent, started = proc_cpu(worker), time.thread_time(), time.perf_counter()
        n = 0
        for r in range(rounds):
            for i, (reply, context) in enumerate(calls):
                run_call(pool, (f"{reply}# {r}.{i}\n" if fresh_text else reply, context))
                n += 1
        wall = time.perf_counter() - started
        cpu = proc_cpu(worker) - before_worker + time.thread_time() - before_parent
    return cpu / n, wall / n


def burst(
    pools: list[SandboxPool], calls: list[Call], concurrency: int, per_slot: int, own_threads: bool
) -> tuple[int, int, float]:
    """`concurrency` coroutines, `per_slot` calls each, coroutine i on pools[i % len(pools)] through the pool's own
    threads (as the pipeline calls it now) or asyncio's default pool (as it did); returns the calls made, the most
    worker processes seen alive at once, and the CPU spent counting them (not the sandbox's)."""
    peak = 0
    watching = 0.0
    done = threading.Event()

    def watch() -> None:
        nonlocal peak, watching
        while not done.is_set():
            peak = max(peak, sum(len(children(pool.template_pid)) for pool in pools))
            watching = time.thread_time()
            done.wait(0.05)

    async def slot(i: int) -> None:
        pool = pools[i % len(pools)]
        loop = asyncio.get_running_loop()
        for k in range(per_slot):
            call = calls[(i * per_slot + k) % len(calls)]
            await loop.run_in_executor(pool.threads if own_threads else None, run_call, pool, call)

    async def all_slots() -> None:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(min(32, (os.cpu_count() or 1) + 4)))
        await asyncio.gather(*(slot(i) for i in range(concurrency)))

    watcher = threading.Thread(target=watch)
    watcher.start()
    asyncio.run(all_slots())
    done.set()
    watcher.join()
    return concurrency * per_slot, peak, watching


def start_all(pools: list[SandboxPool]) -> None:
    """Start pools in parallel, as slots of a runner would start their workers."""
    threads = [threading.Thread(target=pool.warm_up) for pool in pools]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def compare_burst(limits: SandboxLimits, calls: list[Call], concurrency: int, per_slot: int) -> dict[str, float]:
    results: dict[str, float] = {}
    for name, make, own_threads in (
        ("cold", lambda: [SandboxPool(replace(limits, workers=1)) for _ in range(concurrency)], False),
        ("cores", lambda: [SandboxPool(limits)], True),
    ):
        with measured() as spent:
            pools = make()
            try:
                start_all(pools)
                n, peak, watching = burst(pools, calls, concurrency, per_slot, own_threads)
            finally:
                for pool in pools:
                    pool.close()
        results[f"{name}_cpu"] = (spent["cpu"] - watching) / n
        results[f"{name}_wall"] = spent["wall"] / n
        results[f"{name}_workers"] = peak
    return results


def line(name: str, value: float, ratio: str, target: str) -> None:
    print(f"{name}: {value:.3f} ({ratio}, target {target})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="a tiny version that runs in a few seconds")
    args = parser.parse_args()
    benchmark = Benchmark.open(os.environ["EDSB_DATA"])
    load = os.getloadavg()
    calls = programs(benchmark, levels=1 if args.smoke else 3)
    by_scene = {context.scene: (reply, context) for reply, context in calls}
    per_scene = list(by_scene.values())
    limits = SandboxLimits(workers=1)
    cores = SandboxLimits()

    cold, forked = cold_vs_forked(limits, per_scene, 1 if args.smoke else 5)
    line(
        "cold_worker_cpu_ms",
        forked * 1e3,
        f"ratio {cold / forked:.1f}x less than a cold start, {cold * 1e3:.0f} ms",
        ">= 10x",
    )
    rounds = 1 if args.smoke else 5
    cached_cpu, cached_wall = warm_calls(limits, calls, rounds, fresh_text=False)
    fresh_cpu, _ = warm_calls(limits, calls, rounds, fresh_text=True)
    line("call_cpu_ms", cached_cpu * 1e3, f"ratio {cached_cpu / fresh_cpu:.2f} of a new program", "< 1 ms")
    line("uncached_call_cpu_ms", fresh_cpu * 1e3, f"ratio {fresh_cpu / cached_cpu:.2f} of a repeated one", "< 2 ms")
    line("call_wall_ms", cached_wall * 1e3, f"ratio {cached_wall / cached_cpu:.2f} of its CPU", "< 1 ms")
    for concurrency in (4, 8) if args.smoke else (64, 256):
        per_slot = 2 if args.smoke else SWEEP_CALLS // concurrency
        found = compare_burst(cores, calls, concurrency, per_slot)
        name = f"burst_c{concurrency}"
        cpu_ratio = found["cold_cpu"] / found["cores_cpu"]
        wall_ratio = found["cold_wall"] / found["cores_wall"]
        line(
            f"{name}_cpu_ms_per_call",
            found["cores_cpu"] * 1e3,
            f"ratio {cpu_ratio:.1f}x less than one cold worker per slot",
            "< 1 ms",
        )
        line(
            f"{name}_wall_ms_per_call",
            found["cores_wall"] * 1e3,
            f"ratio {wall_ratio:.1f}x less than one cold worker per slot",
            "< 1 ms",
        )
        line(
            f"{name}_workers",
            found["cores_workers"],
            f"ratio {found['cold_workers'] / max(found['cores_workers'], 1):.0f}x fewer than one per slot",
            f"<= {cores.workers or default_workers()}",
        )
    loads = " ".join(f"{x:.2f}" for x in load)
    print(f"machine: {os.cpu_count()} cores, load average at start {loads}, {default_workers()} sandbox workers")


if __name__ == "__main__":
    main()
