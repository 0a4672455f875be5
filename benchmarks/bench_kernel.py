"""The kernel layers' cost per run: fork a child from a warm template-like process, `contain()` it, let it answer one
byte on its channel and exit, with the layers built once in the parent (`prepare()`, what the pool does) against
built in every child (no `prepare()`), and against a bare fork with no containment at all.

The three kinds of run are interleaved (one of each in turn), so that a change of load on the host moves them alike.
Wall time runs from just before the fork until the parent has reaped the child; CPU is the child's (user + system,
from wait4) plus the parent's own for that run.

Figures (each a ratio of two things measured in this run):
- `contain_prepared_wall_ms` / `_p95` and `contain_prepared_cpu_ms`: fork + contain() + exit, layers prepared;
- `contain_unprepared_wall_ms` / `_p95` and `contain_unprepared_cpu_ms`: the same, each child building the layers;
- `fork_only_wall_ms` and `fork_only_cpu_ms`: fork + exit, nothing contained.

Usage: EDSB_DATA=/path/to/edsb-data python benchmarks/bench_kernel.py [--runs N] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as in the template: no BLAS threads to fork

import numpy  # noqa: F401 - warm, as the template is

import edsb.sandbox.code_api  # noqa: F401
from edsb.sandbox import kernel
from edsb.sandbox.kernel import Containment, contain

MEMORY = 4 << 30
Sample = tuple[float, float]  # (wall seconds, CPU seconds)


def one_run(contained: bool, prepared: bool) -> Sample:
    """Fork, optionally contain, answer one byte, exit; the parent reaps."""
    read_end, write_end = os.pipe()
    parent_cpu = time.process_time()
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            if contained:
                if not prepared:
                    kernel._prepared = None  # this child builds the layers itself
                contain(Containment(memory_bytes=MEMORY, cpu_seconds=10, keep_fds=(write_end,)))
            os.write(write_end, b"k")
        except BaseException:
            code = 1
        os._exit(code)
    os.close(write_end)
    answer = os.read(read_end, 1)
    os.close(read_end)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    if status != 0 or answer != b"k":
        sys.exit(f"a {'contained' if contained else 'bare'} child failed (status {status})")
    return wall, usage.ru_utime + usage.ru_stime + time.process_time() - parent_cpu


def measure(runs: int) -> dict[str, list[Sample]]:
    kinds: dict[str, Callable[[], Sample]] = {
        "contain_prepared": lambda: one_run(True, True),
        "contain_unprepared": lambda: one_run(True, False),
        "fork_only": lambda: one_run(False, False),
    }
    samples: dict[str, list[Sample]] = {name: [] for name in kinds}
    for _ in range(runs):
        for name, run in kinds.items():
            samples[name].append(run())
    return samples


def line(name: str, value: float, ratio: str) -> None:
    print(f"{name}: {value:.3f} ({ratio})", flush=True)


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1] if len(values) > 1 else values[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="runs of each kind (default 1000)")
    parser.add_argument("--smoke", action="store_true", help="20 runs of each kind")
    args = parser.parse_args()
    runs = 20 if args.smoke else args.runs
    support = kernel.host_support()
    if not support.exact:
        sys.exit(f"no kernel sandbox on this host: {support.reason}")
    loads = " ".join(f"{load:.2f}" for load in os.getloadavg())
    build_start = time.process_time()
    kernel.prepare()
    prepare_ms = (time.process_time() - build_start) * 1e3
    samples = measure(runs)
    wall = {name: [w * 1e3 for w, _ in values] for name, values in samples.items()}
    cpu = {name: [c * 1e3 for _, c in values] for name, values in samples.items()}
    median = {name: statistics.median(values) for name, values in wall.items()}
    cpu_median = {name: statistics.median(values) for name, values in cpu.items()}
    prepared, unprepared, bare = "contain_prepared", "contain_unprepared", "fork_only"
    line(f"{prepared}_wall_ms", median[prepared], f"ratio {median[prepared] / median[unprepared]:.2f} of unprepared")
    line(f"{prepared}_wall_ms_p95", p95(wall[prepared]), f"ratio {p95(wall[prepared]) / p95(wall[unprepared]):.2f}")
    line(f"{prepared}_cpu_ms", cpu_median[prepared], f"ratio {cpu_median[prepared] / cpu_median[unprepared]:.2f}")
    line(f"{unprepared}_wall_ms", median[unprepared], f"ratio {median[unprepared] / median[bare]:.2f} of a bare fork")
    line(f"{unprepared}_wall_ms_p95", p95(wall[unprepared]), f"ratio {p95(wall[unprepared]) / p95(wall[bare]):.2f}")
    line(f"{unprepared}_cpu_ms", cpu_median[unprepared], f"ratio {cpu_median[unprepared] / cpu_median[bare]:.2f}")
    line(f"{bare}_wall_ms", median[bare], f"ratio {median[bare] / median[prepared]:.2f} of prepared")
    line(f"{bare}_cpu_ms", cpu_median[bare], f"ratio {cpu_median[bare] / cpu_median[prepared]:.2f} of prepared")
    line("prepare_once_cpu_ms", prepare_ms, f"ratio {prepare_ms / cpu_median[prepared]:.2f} of one prepared run")
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"machine: {os.cpu_count()} cores, load average at start {loads}, {runs} runs of each kind, "
          f"Landlock ABI {support.landlock_abi}, parent peak RSS {peak_mb:.0f} MB")  # fmt: skip


if __name__ == "__main__":
    main()
