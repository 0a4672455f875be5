"""The sandbox benchmark runs in smoke mode and prints every figure under its name as a number, with its ratio.

Speed is never asserted here, only that the script runs both sandboxes on the real data and reports what it promises;
the number of sandbox processes alive during a burst is a fact of the pool's design, not a speed, and is checked."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from edsb.sandbox.pool import default_workers
from tests.support.data import REPO, require_data

FIGURE = re.compile(r"^(?P<name>[a-z0-9_]+): (?P<value>[0-9]+\.[0-9]+) \(ratio (?P<ratio>[0-9.]+)x?[ ,].*\)$")
NAMES = {
    f"{figure}_{arm}"
    for figure in ("run_cpu_ms", "run_wall_ms", "burst_c8_wall_ms_per_call", "burst_c8_processes")
    for arm in ("exact", "restricted")
}


def test_sandbox_benchmark_prints_its_figures() -> None:
    environment = {**os.environ, "EDSB_DATA": str(require_data()), "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_sandbox.py"), "--smoke"],
        capture_output=True, text=True, env=environment, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    *figures, machine = done.stdout.splitlines()
    assert re.fullmatch(
        r"machine: \d+ cores, load average at start [0-9.]+ [0-9.]+ [0-9.]+, 1 rounds per arm \(ABBA\)", machine
    )
    found = {}
    for line in figures:
        match = FIGURE.match(line)
        assert match, line
        found[match["name"]] = (float(match["value"]), float(match["ratio"]))
    assert set(found) == NAMES
    assert all(value > 0 and ratio > 0 for value, ratio in found.values())
    # A burst of 8 concurrent calls never has more sandbox processes than the pool's runs at once, the children
    # forked ahead for them and the ones killed but not yet reaped, whatever the concurrency.
    for arm in ("exact", "restricted"):
        assert 1 <= found[f"burst_c8_processes_{arm}"][0] <= 3 * default_workers()
