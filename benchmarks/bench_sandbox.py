"""The sandbox's cost per run, for each sandbox side by side in one sitting: CPU of every process (the parent, the
template, the children) and wall per call, one call at a time and in a burst of concurrent calls.

Arms: `exact` and `restricted` (this checkout: one fresh child per run, forked ahead from the template) and, with
`--baseline-src DIR` (another checkout's `src`, e.g. `git archive main src | tar -x -C /tmp/main`), `persistent`:
that checkout's pool as it is (before this process model, workers that served up to 500 runs each), with its default
sandbox or `--baseline-sandbox`'s. Each arm runs in
a process of its own, with its own checkout on the path, in ABBA order (`--rounds` times each arm); the figures are
means over the rounds.

The programs are the oracle's Event Parser answers (right and wrong) for every case and distraction level, run on
the real scenes with each run's history, as the pipeline hands them to the sandbox. CPU per run is the difference
between a pool that ran N calls and one that only started and stopped, each counted in full (`RUSAGE_SELF` +
`RUSAGE_CHILDREN` once the closed pool's template, and through it every child, has been reaped), over N.

Figures (`name: value (ratio ..., target ...)`):
- `run_cpu_ms_<arm>`: CPU per call, all processes, calls one at a time; the ratio is to the baseline arm
  (`persistent` if given, else `restricted`), and the target is the exact sandbox's budget (at most 4 ms above the
  persistent worker);
- `run_wall_ms_<arm>`: wall per call, one at a time;
- `burst_c<N>_wall_ms_per_call_<arm>`: N coroutines calling through the pool's threads (as the pipeline does);
- `burst_c<N>_processes_<arm>`: the most sandbox processes (children of the template) alive during the burst.

Usage: EDSB_DATA=/path/to/edsb-data python benchmarks/bench_sandbox.py [--smoke] [--baseline-src DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SWEEP_CALLS = 1792  # calls per burst in the full run: about a Table 1 sweep (1,800 runs)


# --- one arm, in its own process ---------------------------------------------------------------------------------


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


def measure_arm(sandbox: str | None, calls_per_run: int, concurrency: int, burst_calls: int, levels: int) -> None:
    """Print one JSON line: CPU and wall per call of this checkout's pool (`sandbox` None: a pool without the
    choice, the baseline)."""
    from edsb.data.benchmark import Benchmark
    from edsb.llm.oracle.answers import ANSWERS
    from edsb.planning.plans import plan_from_raw
    from edsb.planning.scenario import build_scenario
    from edsb.sandbox import CodeContext, SandboxLimits, SandboxPool, SceneSource

    benchmark = Benchmark.open(os.environ["EDSB_DATA"])
    calls: list[tuple[str, Any]] = []
    for case_id, case in benchmark.cases.items():
        answer = ANSWERS[case_id]
        for level in range(min(levels, case.max_distraction + 1)):
            scenario = build_scenario(benchmark, case, level, 0, "ours")
            context = CodeContext.for_benchmark(benchmark.root, scenario.scene_name, scenario.latest_plans)
            for code in (answer.code, answer.misplaced().code if answer.decoy else None):
                if code is not None:
                    calls.append((f"```python\ndef parse_event():\n{code}```\n", context))
    scenes = [SceneSource.of(benchmark.root, name) for name in sorted({c.scene_name for c in benchmark.cases.values()})]
    limits = SandboxLimits(**({"sandbox": sandbox} if sandbox else {}))

    def pool_cpu(n: int) -> tuple[float, float]:
        cpu = own_and_reaped_cpu()
        pool = SandboxPool(limits)
        pool.warm_up(scenes)
        started = time.perf_counter()
        for i in range(n):
            plan_from_raw(pool.execute(*calls[i % len(calls)]), "event")
        wall = time.perf_counter() - started
        pool.close()
        return own_and_reaped_cpu() - cpu, wall

    pool_cpu(len(calls))  # warm this process (imports, scenes, the page cache)
    idle, _ = pool_cpu(0)
    busy, wall = pool_cpu(calls_per_run)

    peak = 0
    done = threading.Event()

    async def burst(pool: Any) -> None:
        loop = asyncio.get_running_loop()

        async def slot(i: int) -> None:
            for k in range(burst_calls // concurrency):
                call = calls[(i * 7919 + k) % len(calls)]
                await loop.run_in_executor(pool.threads, lambda c=call: plan_from_raw(pool.execute(*c), "event"))

        await asyncio.gather(*(slot(i) for i in range(concurrency)))

    with SandboxPool(limits) as pool:
        pool.warm_up(scenes)

        def watch() -> None:
            nonlocal peak
            while not done.is_set():
                peak = max(peak, len(children(pool.template_pid)))
                done.wait(0.01)

        watcher = threading.Thread(target=watch)
        watcher.start()
        started = time.perf_counter()
        asyncio.run(burst(pool))
        burst_wall = time.perf_counter() - started
        done.set()
        watcher.join()
    n_burst = concurrency * (burst_calls // concurrency)
    print(
        json.dumps(
            {
                "cpu": (busy - idle) / calls_per_run,
                "wall": wall / calls_per_run,
                "burst_wall": burst_wall / n_burst,
                "processes": peak,
            }
        ),
        flush=True,
    )


# --- the arms side by side ---------------------------------------------------------------------------------------


def run_arm(src: Path, sandbox: str | None, args: argparse.Namespace) -> dict[str, float]:
    command = [sys.executable, __file__, "--arm", sandbox or "baseline", "--calls", str(args.calls)]
    command += ["--concurrency", str(args.concurrency), "--burst-calls", str(args.burst_calls)]
    command += ["--levels", str(args.levels)]
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"bench_sandbox: the {sandbox or 'baseline'} arm failed: {done.stderr[-2000:]}")
    result: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="a tiny version that runs in seconds")
    parser.add_argument("--baseline-src", type=Path, help="another checkout's src: its pool as the `persistent` arm")
    parser.add_argument(
        "--baseline-sandbox", choices=("exact", "restricted"), help="the baseline's sandbox (default: its default)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="ABBA rounds (each arm runs this many times)")
    parser.add_argument("--arm", help=argparse.SUPPRESS)
    parser.add_argument("--calls", type=int, default=1200, help=argparse.SUPPRESS)
    parser.add_argument("--concurrency", type=int, default=64, help=argparse.SUPPRESS)
    parser.add_argument("--burst-calls", type=int, default=SWEEP_CALLS, help=argparse.SUPPRESS)
    parser.add_argument("--levels", type=int, default=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.arm:
        measure_arm(
            None if args.arm == "baseline" else args.arm, args.calls, args.concurrency, args.burst_calls, args.levels
        )
        return
    if not os.environ.get("EDSB_DATA"):
        raise SystemExit("bench_sandbox: set EDSB_DATA to the benchmark data directory")
    if args.smoke:
        args.calls, args.concurrency, args.burst_calls, args.levels, args.rounds = 40, 8, 16, 1, 1
    load = os.getloadavg()
    arms: list[tuple[str, Path, str | None]] = [
        ("exact", ROOT / "src", "exact"),
        ("restricted", ROOT / "src", "restricted"),
    ]
    if args.baseline_src:
        compileall.compile_dir(str(args.baseline_src), quiet=1)
        arms.insert(0, ("persistent", args.baseline_src.resolve(), args.baseline_sandbox))
    compileall.compile_dir(str(ROOT / "src"), quiet=1)
    found: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in arms}
    for round_ in range(args.rounds):
        for name, src, sandbox in arms if round_ % 2 == 0 else list(reversed(arms)):
            found[name].append(run_arm(src, sandbox, args))
    mean = {name: {key: sum(r[key] for r in runs) / len(runs) for key in runs[0]} for name, runs in found.items()}
    base_name = "persistent" if args.baseline_src else "restricted"
    base = mean[base_name]
    for name, _, _ in arms:
        figures = mean[name]
        spread = ", ".join(f"{r['cpu'] * 1e3:.2f}" for r in found[name])
        target = "<= +4 ms" if name == "exact" else "none"
        print(
            f"run_cpu_ms_{name}: {figures['cpu'] * 1e3:.3f} (ratio {figures['cpu'] / base['cpu']:.2f}x of "
            f"{base_name}, {(figures['cpu'] - base['cpu']) * 1e3:+.2f} ms; rounds {spread}; target {target})",
            flush=True,
        )
    for name, _, _ in arms:
        figures = mean[name]
        print(
            f"run_wall_ms_{name}: {figures['wall'] * 1e3:.3f} (ratio {figures['wall'] / figures['cpu']:.2f} of its "
            f"CPU, one call at a time, target none)",
            flush=True,
        )
    for name, _, _ in arms:
        figures = mean[name]
        print(
            f"burst_c{args.concurrency}_wall_ms_per_call_{name}: {figures['burst_wall'] * 1e3:.3f} (ratio "
            f"{figures['burst_wall'] / base['burst_wall']:.2f}x of {base_name}, {args.burst_calls} calls, "
            "target none)",
            flush=True,
        )
    for name, _, _ in arms:
        print(
            f"burst_c{args.concurrency}_processes_{name}: {mean[name]['processes']:.1f} (ratio "
            f"{mean[name]['processes'] / max(base['processes'], 1):.2f}x of {base_name}, sandbox processes alive "
            "at once, target bounded by the cores)",
            flush=True,
        )
    loads = " ".join(f"{x:.2f}" for x in load)
    print(f"machine: {os.cpu_count()} cores, load average at start {loads}, {args.rounds} rounds per arm (ABBA)")


if __name__ == "__main__":
    main()
