"""The kernel-layer benchmark runs in smoke mode and prints every figure under its name as a number, with its ratio
(never a speed assert)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from tests.support.data import REPO
from tests.support.kernel_sandbox import require_kernel_sandbox

FIGURE = re.compile(r"^(?P<name>[a-z0-9_]+): (?P<value>[0-9]+\.[0-9]+) \(ratio (?P<ratio>[0-9.]+)[ )]")
NAMES = {
    *(
        f"contain_{kind}_{figure}"
        for kind in ("prepared", "unprepared")
        for figure in ("wall_ms", "wall_ms_p95", "cpu_ms")
    ),
    "fork_only_wall_ms",
    "fork_only_cpu_ms",
    "prepare_once_cpu_ms",
}


def test_kernel_benchmark_prints_its_figures() -> None:
    require_kernel_sandbox()
    environment = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_kernel.py"), "--smoke"],
        capture_output=True, text=True, env=environment, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    *figures, machine = done.stdout.splitlines()
    assert machine.startswith("machine: ") and "20 runs of each kind" in machine
    found = {}
    for line in figures:
        match = FIGURE.match(line)
        assert match, line
        found[match["name"]] = (float(match["value"]), float(match["ratio"]))
    assert set(found) == NAMES
    assert all(value > 0 and ratio > 0 for value, ratio in found.values())
