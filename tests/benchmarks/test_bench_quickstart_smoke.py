"""The quick-start benchmark runs in smoke mode (the oracle) and prints its figures under their names as numbers,
and the first progress line it saw (never a speed assert)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.support.data import REPO, require_data

FIGURE = re.compile(r"^[0-9]+\.[0-9]+ \(ratio [0-9.]+x?[ :].*\)$")  # a figure's value and its ratio


def test_quickstart_benchmark_prints_its_figures(tmp_path: Path) -> None:
    environment = {**os.environ, "EDSB_DATA": str(require_data()), "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_quickstart.py"), "--smoke"],
        capture_output=True, text=True, env=environment, timeout=300, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    printed = dict(line.split(": ", 1) for line in done.stdout.splitlines())
    assert list(printed) == ["quickstart_wall_s", "first_line_s", "first_run_done_s", "machine"]
    assert "cores, load average at start" in printed.pop("machine")
    assert all(FIGURE.match(value) for value in printed.values()), printed
    assert "waiting for the first answers" in printed["first_line_s"]  # what the run waits for, in its first line
    assert not list(tmp_path.iterdir())  # its run directory and cache went with it
