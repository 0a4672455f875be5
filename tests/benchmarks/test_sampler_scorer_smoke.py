"""The sampler and scorer benchmarks run in smoke mode and print every figure under its name as a number.

Speed is never asserted here: only that the scripts run on the real data and report what they promise. The hit
rate and the verdict digest are checked where they are facts rather than speeds."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from edsb.planning.sampler import MAX_SAMPLING_TERMS
from tests.support.data import REPO, require_data

FIGURE = re.compile(r"^(?P<name>[a-z_]+): (?P<value>-?[0-9.]+)(?: \((?P<detail>.*)\))?$")


def run_smoke(script: str) -> dict[str, tuple[float, str]]:
    """name -> (value, parenthesised detail) of each figure line the script prints with `--smoke`."""
    environment = {**os.environ, "EDSB_DATA": str(require_data()), "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / script), "--smoke"],
        capture_output=True, text=True, env=environment, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1].startswith("machine: ") and "cores, load average at start" in lines[-1]
    figures = {}
    for line in lines:
        if line.startswith("verdict_digest: "):
            assert re.fullmatch(r"verdict_digest: [0-9a-f]{16}", line)
            figures["verdict_digest"] = (0.0, line.split(": ")[1])
        match = FIGURE.match(line)
        if match:
            figures[match["name"]] = (float(match["value"]), match["detail"] or "")
    return figures


def test_sampler_benchmark_prints_its_figures() -> None:
    figures = run_smoke("bench_sampler.py")
    assert {
        "reference_hit_rate",
        "optimal_hit_rate",
        "reference_ms_per_sample",
        "reference_proposals_per_sample",
        "optimal_ms_per_sample",
        "optimal_ms_per_sample_cold",
        "cold_same_point",
        "lattice_setup_ms_per_scene",
    } <= set(figures)
    assert all(value > 0 for value, _ in figures.values())
    for name in ("reference_hit_rate", "optimal_hit_rate"):
        hits, samples = map(int, re.match(r"ratio (\d+)/(\d+)", figures[name][1]).groups())  # type: ignore[union-attr]
        assert samples == 20 and figures[name][0] == round(hits / samples, 3)
    assert figures["optimal_hit_rate"][0] == 1.0  # the optimiser always lands in a consistent set's area
    assert figures["cold_same_point"][0] == 1.0  # the kept search result gives the very point a fresh search gives


def test_scorer_benchmark_prints_its_figures() -> None:
    figures = run_smoke("bench_scorer.py")
    assert {"verdicts_per_s", "us_per_verdict", "verdict_digest"} <= set(figures)
    assert figures["verdicts_per_s"][0] > 0 and figures["us_per_verdict"][0] > 0
    assert "target" in figures["verdicts_per_s"][1]


def test_sampler_bound_benchmark_prints_its_figures() -> None:
    figures = run_smoke("bench_sampler_bound.py")
    assert {"hostile_refused_cpu_s", "worst_within_bound_cpu_s", "honest_cpu_s", "oracle_pi_max_cpu_s"} <= set(figures)
    assert f"715 terms, limit {MAX_SAMPLING_TERMS}" in figures["hostile_refused_cpu_s"][1]  # 11 characters x (64 + 1)
