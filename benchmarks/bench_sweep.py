"""A Table 1-sized `edsb run` against a loopback model server: how close to the server's own limit the harness gets.

Figures (one line each, `name: value (ratio ..., target ...)`):
- `sweep_c{N}`: wall of `edsb run --preset table1 --concurrency N` (a child process, start-up included) over the
  ideal `requests × latency / N`, with requests counted by the server. Concurrency 1 runs a subset of the cases
  (the full sweep would take ~7 minutes); its ratio is per request, so it does not depend on the size.
- `sweep_c{N}_fresh_cache`: the same at the highest concurrency with the response cache on (`edsb run`'s default,
  the other sweeps pass `--no-cache`), starting empty: every request is looked up and its answer stored.
- `results_unchanged`: the records of the concurrency-1 pass equal those of the same keys at the highest
  concurrency (timing fields aside).
- `cpu_per_run_ms`: CPU of the `edsb` process and its children (the sandbox workers), not the server's, per run
  against an instant server, at concurrency 64.
- `stage_*_ms`: the same CPU split by stage, measured in this process at concurrency 1 with the stages wrapped.
- `sweep_c64_<arm>` / `cpu_per_run_ms_<arm>`: the sweep ratio and the CPU per run for each sandbox (`exact`,
  `restricted`; with `--baseline-src DIR`, another checkout's `src` as `persistent`, e.g. the pool of persistent
  workers before one fresh process per run), side by side in ABBA order (`--rounds`).

The server runs in its own process (`_loopback.py`: one asyncio loop with httptools, as uvicorn serves;
`--threaded-server` uses the test suite's thread-per-connection server instead). Usage:
`EDSB_DATA=... python benchmarks/bench_sweep.py` (`--smoke`: a few runs in seconds).
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import functools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _loopback import LoopbackServer, first_cases  # noqa: E402

LATENCY_S = 0.2
TIMING_FIELDS = ("latency_s", "wall_s")
STAGES = ("prompt", "request", "parse", "sandbox", "sampler", "judge", "write")


def _selection(smoke: bool, subset: bool = False) -> list[str]:
    if smoke:
        return ["--preset", "table1", "--cases", first_cases(8, 1), "--repeats", "1"]
    if subset:  # about a ninth of the sweep: the first cases of the preset, every variant and repeat
        return ["--preset", "table1", "--cases", first_cases(200, 5)]
    return ["--preset", "table1"]


def _run_child(
    base_url: str,
    out: Path,
    concurrency: int,
    selection: list[str],
    cache: Path | None = None,
    src: Path = ROOT / "src",
    extra: tuple[str, ...] = (),
) -> tuple[float, float]:
    """(wall s, CPU s of the child and the children it reaped) of one `edsb run` in a child process; with `cache`,
    responses are cached in that (new) directory, as `edsb run` does by default. `src`: the checkout that runs."""
    command = [sys.executable, "-m", "edsb", "run", "--model", "openai:scripted", "--base-url", base_url]
    command += [*selection, *([] if cache else ["--no-cache"]), *extra]
    command += ["--quiet", "--concurrency", str(concurrency), "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(src), os.environ.get("PYTHONPATH")]))}
    if cache:
        env["EDSB_CACHE_DIR"] = str(cache)
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    stderr = process.stderr.read().decode() if process.stderr else ""
    if process.returncode not in (0,):
        raise SystemExit(f"edsb run failed ({process.returncode}): {stderr[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def _records(out: Path) -> dict[str, dict[str, Any]]:
    records = {}
    for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        records[record["key"]] = {k: v for k, v in record.items() if k not in TIMING_FIELDS}
    return records


def sweep(work: Path, smoke: bool, levels: tuple[int, ...], threaded: bool) -> None:
    latency = 0.02 if smoke else LATENCY_S
    levels = (1, 4) if smoke else levels
    outs: dict[int, Path] = {}
    with LoopbackServer(latency, threaded=threaded) as server:
        for concurrency in levels:
            out = work / f"sweep-c{concurrency}"
            before = server.requests()
            wall, _ = _run_child(server.base_url, out, concurrency, _selection(smoke, subset=concurrency == 1))
            requests = server.requests() - before
            ideal = requests * latency / concurrency
            runs = len(_records(out))
            outs[concurrency] = out
            target = {64: ", target <= 1.2", 256: ", target <= 1.6"}.get(concurrency, "")
            note = f", subset of {runs} runs" if concurrency == 1 and not smoke else f", {runs} runs"
            print(
                f"sweep_c{concurrency}: {wall / ideal:.3f} (ratio wall/ideal = {wall:.2f} s / {ideal:.2f} s, "
                f"{requests} requests x {latency:g} s / {concurrency}{note}{target})",
                flush=True,
            )
        top = levels[-1]
        before = server.requests()
        wall, _ = _run_child(server.base_url, work / "sweep-cached", top, _selection(smoke), cache=work / "cache")
        ideal = (server.requests() - before) * latency / top
        print(
            f"sweep_c{top}_fresh_cache: {wall / ideal:.3f} (ratio wall/ideal = {wall:.2f} s / {ideal:.2f} s, the "
            f"same sweep with edsb's default response cache on, new and empty)",
            flush=True,
        )
    low, high = _records(outs[levels[0]]), _records(outs[levels[-1]])
    if not low.keys() <= high.keys():
        raise SystemExit(f"bench_sweep: the concurrency-{levels[0]} keys are not all in the larger sweep")
    same = sum(record == high[key] for key, record in low.items())
    print(
        f"results_unchanged: {same / len(low):.3f} (ratio identical/compared = {same}/{len(low)} records of "
        f"concurrency {levels[0]} vs {levels[-1]}, target 1)",
        flush=True,
    )


def cpu_per_run(work: Path, smoke: bool, concurrency: int, threaded: bool) -> None:
    concurrency = min(concurrency, 4) if smoke else concurrency
    with LoopbackServer(0.0, threaded=threaded) as server:
        out = work / "cpu"
        wall, cpu = _run_child(server.base_url, out, concurrency, _selection(smoke))
    runs = len(_records(out))
    print(
        f"cpu_per_run_ms: {cpu / runs * 1000:.2f} (ratio CPU/runs = {cpu:.2f} s / {runs} runs, edsb and its "
        f"sandbox workers, instant server, concurrency {concurrency}, wall {wall:.2f} s, target <= 2.5)",
        flush=True,
    )


def sandbox_arms(
    work: Path,
    smoke: bool,
    concurrency: int,
    threaded: bool,
    rounds: int,
    baseline: Path | None,
    sandboxes: tuple[str, ...] = ("exact", "restricted"),
) -> None:
    """Both sandboxes (and another checkout's harness, `--baseline-src`) side by side, in ABBA order: the sweep's
    wall over the ideal at `concurrency` against a 0.2 s server, and CPU per run against an instant one."""
    arms = [(name, ROOT / "src", ("--sandbox", name)) for name in sandboxes]
    if baseline is not None:
        compileall.compile_dir(str(baseline), quiet=1)
        arms.insert(0, ("persistent", baseline.resolve(), ()))
    concurrency = min(concurrency, 4) if smoke else concurrency
    latency = 0.02 if smoke else LATENCY_S
    ratios: dict[str, list[float]] = {name: [] for name, _, _ in arms}
    cpus: dict[str, list[float]] = {name: [] for name, _, _ in arms}
    with LoopbackServer(latency, threaded=threaded) as slow, LoopbackServer(0.0, threaded=threaded) as instant:
        for round_ in range(rounds):
            for name, src, extra in arms if round_ % 2 == 0 else list(reversed(arms)):
                before = slow.requests()
                out = work / f"arm-{name}-{round_}"
                wall, _ = _run_child(slow.base_url, out, concurrency, _selection(smoke), src=src, extra=extra)
                ratios[name].append(wall / ((slow.requests() - before) * latency / concurrency))
                out = work / f"arm-cpu-{name}-{round_}"
                _, cpu = _run_child(instant.base_url, out, concurrency, _selection(smoke), src=src, extra=extra)
                cpus[name].append(cpu / len(_records(out)) * 1000)
    base = arms[0][0]
    for name, _, _ in arms:
        mean = sum(ratios[name]) / len(ratios[name])
        spread = ", ".join(f"{r:.3f}" for r in ratios[name])
        print(
            f"sweep_c{concurrency}_{name}: {mean:.3f} (ratio wall/ideal, rounds {spread}, "
            f"{latency:g} s server, target <= 1.25)",
            flush=True,
        )
    base_cpu = sum(cpus[base]) / len(cpus[base])
    for name, _, _ in arms:
        mean = sum(cpus[name]) / len(cpus[name])
        spread = ", ".join(f"{c:.2f}" for c in cpus[name])
        print(
            f"cpu_per_run_ms_{name}: {mean:.2f} (ratio {mean / base_cpu:.2f}x of {base}, {mean - base_cpu:+.2f} ms; "
            f"rounds {spread}; edsb and its sandbox, instant server, concurrency {concurrency}, "
            f"target {'<= +4 ms' if name == 'exact' else 'none'})",
            flush=True,
        )


# --- per-stage CPU, in this process -------------------------------------------------------------------------------


def _descendants_cpu_s() -> float:
    """User+system CPU of this process's live descendants (the sandbox workers; the server is not one)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    pending = [os.getpid()]
    while pending:
        pid = pending.pop()
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                children = Path(f"/proc/{pid}/task/{tid}/children").read_text().split()
            except OSError:
                continue
            for child in children:
                pending.append(int(child))
                try:
                    fields = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                total += int(fields[11]) + int(fields[12])
    return total / tick


class _Stages:
    """Exclusive CPU per stage: a stage nested in another (parsing inside a request) is not counted twice.
    Valid at concurrency 1, where one run's stages never overlap."""

    def __init__(self) -> None:
        self.cpu = dict.fromkeys(STAGES, 0.0)
        self._local = threading.local()

    def _stack(self) -> list[float]:
        if not hasattr(self._local, "stack"):
            self._local.stack = []
        return self._local.stack

    def _enter(self) -> float:
        self._stack().append(0.0)
        return time.thread_time()

    def _leave(self, stage: str, started: float, extra: float = 0.0) -> None:
        spent = time.thread_time() - started + extra
        inner = self._stack().pop()
        self.cpu[stage] += spent - inner
        if self._stack():
            self._stack()[-1] += spent

    def wrap(self, stage: str, function: Callable[..., Any], children: bool = False) -> Callable[..., Any]:
        if asyncio.iscoroutinefunction(function):

            @functools.wraps(function)
            async def timed_async(*args: Any, **kwargs: Any) -> Any:
                started = self._enter()
                try:
                    return await function(*args, **kwargs)
                finally:
                    self._leave(stage, started)

            return timed_async

        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            before = _descendants_cpu_s() if children else 0.0
            started = self._enter()
            try:
                return function(*args, **kwargs)
            finally:
                self._leave(stage, started, (_descendants_cpu_s() - before) if children else 0.0)

        return timed


def stage_breakdown(work: Path, smoke: bool, threaded: bool) -> None:
    from edsb.data.benchmark import Benchmark
    from edsb.data.models import SCENES
    from edsb.llm import openai_client, transcripts
    from edsb.planning import pipeline
    from edsb.results import rundir
    from edsb.runner.config import resolve_run_config
    from edsb.runner.run import run_benchmark
    from edsb.sandbox import SandboxLimits, SceneSource, check_sandbox, shutdown_sandboxes

    stages = _Stages()
    patches = [
        (pipeline, "build_scenario", "prompt", False),
        (pipeline, "narrator_request", "prompt", False),
        (pipeline, "parser_request", "prompt", False),
        (openai_client.OpenAIChatModel, "complete", "request", False),
        (openai_client, "parse_completion", "parse", False),
        (pipeline, "parse_narrator_reply", "parse", False),
        (pipeline, "run_plan_code_noting_repairs", "sandbox", True),
        (pipeline, "_sample_positions", "sampler", False),
        (pipeline, "_judge", "judge", False),
        (transcripts.TranscriptWriter, "record", "write", False),
        (transcripts.TranscriptWriter, "write_run", "write", False),
        (rundir.ResultStore, "_write_batch", "write", False),
    ]
    saved = [(owner, name, getattr(owner, name)) for owner, name, _, _ in patches]
    for owner, name, stage, children in patches:
        setattr(owner, name, stages.wrap(stage, getattr(owner, name), children))
    options = {"model": "openai:scripted", "cache": False, "concurrency": 1, "preset": "table1"}
    options.update({"cases": first_cases(8, 1), "repeats": 1} if smoke else {"cases": first_cases(200, 5)})
    try:
        with LoopbackServer(0.0, threaded=threaded) as server:
            config = resolve_run_config({**options, "base_url": server.base_url}, None)
            # The pool is started first and counted apart: run_benchmark starts it in the background, where its
            # template's CPU would land in whichever stage runs meanwhile.
            cpu_before = time.process_time() + _descendants_cpu_s()
            limits = SandboxLimits(timeout=config.code_timeout, memory_bytes=config.code_memory_mb << 20)
            root = Benchmark.open(config.data).root
            check_sandbox(limits, [SceneSource.of(root, name) for name in SCENES])
            pool_start = time.process_time() + _descendants_cpu_s() - cpu_before
            outcome = run_benchmark(config, work / "stages", quiet=True)
            total = time.process_time() + _descendants_cpu_s() - cpu_before
            shutdown_sandboxes()
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)
    runs = outcome.stats.done
    for stage in STAGES:
        ms = stages.cpu[stage] / runs * 1000
        print(f"stage_{stage}_ms: {ms:.3f} (ratio stage CPU/runs = {stages.cpu[stage]:.3f} s / {runs} runs)")
    ms = pool_start / runs * 1000
    print(f"stage_pool_start_ms: {ms:.3f} (ratio pool start CPU/runs = {pool_start:.3f} s / {runs})")
    other = total - pool_start - sum(stages.cpu.values())
    print(f"stage_other_ms: {other / runs * 1000:.3f} (ratio CPU outside the stages/runs = {other:.3f} s / {runs})")
    print(f"stage_total_ms: {total / runs * 1000:.3f} (ratio CPU/runs = {total:.3f} s / {runs} runs, concurrency 1)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a few runs, a few seconds")
    parser.add_argument("--only", choices=("sweep", "cpu", "arms", "stages"), help="one part only")
    parser.add_argument("--rounds", type=int, default=2, help="ABBA rounds of the sandbox arms")
    parser.add_argument("--arms-concurrency", type=int, default=64, help="concurrency of the sandbox arms")
    parser.add_argument("--baseline-src", type=Path, help="another checkout's src, run as the `persistent` arm")
    parser.add_argument("--sandboxes", default="exact,restricted", help="the sandboxes of the arms")
    parser.add_argument("--levels", default="1,16,64,256", help="concurrencies of the sweep (1 runs a subset)")
    parser.add_argument("--cpu-concurrency", type=int, default=64, help="concurrency of the CPU figure")
    parser.add_argument(
        "--threaded-server", action="store_true", help="serve with the test suite's thread-per-connection server"
    )
    args = parser.parse_args()
    if not os.environ.get("EDSB_DATA"):
        raise SystemExit("bench_sweep: set EDSB_DATA to the benchmark data directory")
    load = os.getloadavg()
    # edsb's modules byte-compiled, as pip leaves an installed edsb: with PYTHONDONTWRITEBYTECODE set (as on the
    # project's machine) every child and sandbox template would otherwise compile ~70 modules from source at start.
    compileall.compile_dir(str(ROOT / "src"), quiet=1)
    with tempfile.TemporaryDirectory() as work:
        if args.only in (None, "sweep"):
            levels = tuple(int(level) for level in args.levels.split(","))
            sweep(Path(work), args.smoke, levels, args.threaded_server)
        if args.only in (None, "cpu"):
            cpu_per_run(Path(work), args.smoke, args.cpu_concurrency, args.threaded_server)
        if args.only in (None, "arms"):
            rounds = 1 if args.smoke else args.rounds
            sandboxes = tuple(args.sandboxes.split(","))
            sandbox_arms(
                Path(work),
                args.smoke,
                args.arms_concurrency,
                args.threaded_server,
                rounds,
                args.baseline_src,
                sandboxes,
            )
        if args.only in (None, "stages"):
            stage_breakdown(Path(work), args.smoke, args.threaded_server)
    print(f"machine: {os.cpu_count()} cores, load average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
