"""The sweep and memory benchmarks run end to end in their smoke mode and print the figures they promise.

Only the names and that each value parses as a number are checked: speed is measured by the benchmarks, never
asserted by a test.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

from tests.support.data import DATA, REPO

FIGURE = re.compile(r"^([a-z0-9_]+): (-?[0-9.]+) \((.+)\)$")


def _figures(script: str) -> dict[str, float]:
    env = {**os.environ, "EDSB_DATA": str(DATA)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), env.get("PYTHONPATH")]))
    completed = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / script), "--smoke"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    assert lines[-1].startswith("machine: "), lines[-1]
    figures = {}
    for line in lines[:-1]:
        match = FIGURE.match(line)
        assert match, line
        figures[match.group(1)] = float(match.group(2))
    return figures


def test_bench_sweep_smoke_prints_every_figure() -> None:
    figures = _figures("bench_sweep.py")
    stages = [f"stage_{name}_ms" for name in ("prompt", "request", "parse", "sandbox", "sampler", "judge", "write")]
    sweeps = ["sweep_c1", "sweep_c4", "sweep_c4_fresh_cache", "results_unchanged"]
    arms = ["sweep_c4_exact", "sweep_c4_restricted", "cpu_per_run_ms_exact", "cpu_per_run_ms_restricted"]
    expected = [*sweeps, "cpu_per_run_ms", *arms, *stages, "stage_pool_start_ms", "stage_other_ms", "stage_total_ms"]
    assert list(figures) == expected
    assert figures["results_unchanged"] == 1.0  # the smoke sweep at concurrency 1 and 4 produced the same records


def test_bench_memory_smoke_prints_the_rss_ratio() -> None:
    figures = _figures("bench_memory.py")
    assert list(figures) == ["peak_rss_ratio"]
    assert figures["peak_rss_ratio"] > 0
