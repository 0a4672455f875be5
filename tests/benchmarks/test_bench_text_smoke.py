"""The hostile-text benchmark runs in smoke mode and prints its figures under their names as numbers (never a speed
assert: `bench_text.py` itself checks that the scan and the reference regex answer the same)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from tests.support.data import REPO, require_data

# A figure may be negative: a difference of two timings can fall below zero in the noise of a smoke run.
FIGURE = re.compile(r"^(?P<name>[a-z0-9_]+): (?P<value>-?[0-9]+\.[0-9]+) \(ratio [0-9.]+x?[ :].*\)$")


def test_text_benchmark_prints_its_figures() -> None:
    environment = {**os.environ, "EDSB_DATA": str(require_data()), "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_text.py"), "--smoke"],
        capture_output=True, text=True, env=environment, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    *figures, machine = done.stdout.splitlines()
    assert machine.startswith("machine: ") and "cores, load average at start" in machine
    names = []
    for line in figures:
        match = FIGURE.match(line)
        assert match, line
        names.append(match["name"])
    assert names == ["trailing_group_2k_ms", "trailing_group_4k_ms", "hygiene_per_run_us"]
