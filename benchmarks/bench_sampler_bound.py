"""The position sampler's worst case per plan, before and after edsb's bound on its work (`MAX_SAMPLING_TERMS`).

A hostile PI plan within every plan limit: 11 characters with 64 `close to` relationships each (about 15 KiB of
JSON, under the 16 KiB plan limit). Without the bound the reference's annealer searches every character with every
term at each of its 5,000 proposals; with it the runner refuses the plan after counting its terms. The worst plan
the bound lets through (one character, `MAX_SAMPLING_TERMS - 1` relationships that never converge) is timed too,
and an honest one (the expected relationship of case 60). CPU seconds of this process, several generators each.

`oracle_pi_max_cpu_s`: every sampling that `edsb run --model oracle` and `oracle-wrong` ask for on the PI cases
(three variants, five repeats; the failed runs' `sampler_miss` samplings with the optimiser included), captured as
the runner builds them and timed here one by one: the plans the reference would sample, against the sampler's bound
of `MAX_SAMPLING_CPU_S` per plan.

Usage: EDSB_DATA=/path/to/edsb-data python benchmarks/bench_sampler_bound.py [--draws 3] [--smoke]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import Any

from edsb.data.benchmark import Benchmark
from edsb.geometry.scene import Scene, load_scene
from edsb.planning.sampler import MAX_SAMPLING_TERMS, sample_positions, sampling_terms
from edsb.planning.sampler_pool import MAX_SAMPLING_CPU_S, SamplingJob, run_job
from edsb.planning.sampler_rng import generator_for

ORACLE_VARIANTS = ("ours", "object-list", "scene-graph")


def _close_to_chairs(count: int) -> list[str]:
    return [f"close to chair_{i % 6 + 1}" for i in range(count)]


def _cpu(scene: Scene, plan: Mapping[str, Sequence[str]], draw: int) -> float:
    start = time.process_time()
    sample_positions(scene, plan, characters=[], rng=generator_for(f"bound/{draw}"))
    return time.process_time() - start


def _figure(name: str, value: float, detail: str) -> None:
    print(f"{name}: {value:.4f} ({detail})", flush=True)


def _oracle_jobs(smoke: bool) -> list[SamplingJob]:
    """The samplings the runner asks for when the oracle and its negative control plan the PI cases."""
    from edsb.cli import main as edsb
    from edsb.planning import pipeline

    jobs: list[SamplingJob] = []
    build = pipeline._sampling_job

    def capture(*args: Any) -> SamplingJob:
        jobs.append(build(*args))
        return jobs[-1]

    pipeline._sampling_job = capture
    names = ("scene-graph",) if smoke else ORACLE_VARIANTS
    variants = [option for name in names for option in ("--variant", name)]
    grid = ["--cases", "60" if smoke else "PI", *variants, "--repeats", "1" if smoke else "5"]
    stdout, sys.stdout = sys.stdout, io.StringIO()  # the runs' own tables
    try:
        for model in ("oracle", "oracle-wrong"):
            with tempfile.TemporaryDirectory(prefix="edsb-bound-") as out:
                try:
                    edsb(["run", "--model", model, *grid, "--no-cache", "--out", out, "--quiet"])
                except SystemExit as exit_:
                    if exit_.code:
                        raise
    finally:
        sys.stdout, pipeline._sampling_job = stdout, build
    return jobs


def _oracle_figure(smoke: bool) -> None:
    jobs = _oracle_jobs(smoke)
    cpu = []
    for job in jobs:
        start = time.process_time()
        run_job(job, 3600.0)  # the scene's loading included: an upper bound
        cpu.append(time.process_time() - start)
    detail = f"{len(jobs)} samplings, median {statistics.median(cpu):.4f}, bound {MAX_SAMPLING_CPU_S:g}"
    _figure("oracle_pi_max_cpu_s", max(cpu), f"{detail}, ratio {MAX_SAMPLING_CPU_S / max(cpu):.0f} below it")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="one draw each, and the unbounded case left out")
    options = parser.parse_args()
    draws = 1 if options.smoke else options.draws
    loads = " ".join(f"{load:.2f}" for load in os.getloadavg())
    scene = load_scene(Benchmark.open(None), "House")
    hostile = {f"C{i}": _close_to_chairs(64) for i in range(11)}
    size = len(json.dumps([{"character": n, "position": r, "target_action": "idle", "orientation": None}
                           for n, r in hostile.items()]))  # fmt: skip
    start = time.process_time()
    terms = sampling_terms(scene, hostile, characters=[])
    refused = time.process_time() - start
    worst = max(_cpu(scene, {"C": _close_to_chairs(MAX_SAMPLING_TERMS - 1)}, d) for d in range(draws))
    honest = max(_cpu(scene, {"Theodore": ["in front of fridge_1"]}, d) for d in range(draws))
    unbounded = None if options.smoke else _cpu(scene, hostile, 0)
    _figure("hostile_refused_cpu_s", refused, f"{size} bytes, {terms} terms, limit {MAX_SAMPLING_TERMS}")
    if unbounded is not None:
        _figure("hostile_unbounded_cpu_s", unbounded, f"ratio {unbounded / refused:.0f} to the refusal")
    _figure("worst_within_bound_cpu_s", worst, f"max of {draws} draws, target a few seconds")
    _figure("honest_cpu_s", honest, f"max of {draws} draws, ratio {worst / honest:.0f} below the worst")
    _oracle_figure(options.smoke)
    print(f"machine: {os.cpu_count()} cores, load average at start {loads}", flush=True)


if __name__ == "__main__":
    main()
