"""The README's quick start as a newcomer runs it: `edsb run --model local --cases 13,60 --repeats 1 --out DIR`, in
a child process with an empty response cache, its progress log read line by line as it comes.

Prints the wall time of the whole command, when its first progress line came and what it said, and when the first
run finished, each as a share of the wall; the child's CPU seconds over the wall are the cores the run got on average
(up to 2 on an idle two-core host, far less on a busy one); then the machine (cores, load average at start and end,
date). `--smoke` runs the same command on `--model oracle` (seconds), for CI.
Usage: `EDSB_DATA=... python benchmarks/bench_quickstart.py [--smoke]` (minutes on two cores).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

QUICK_START = ["run", "--cases", "13,60", "--repeats", "1"]  # README: `edsb run --model local ... --out runs/smoke`


def child_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_quick_start(model: str) -> tuple[float, float, list[tuple[float, str]]]:
    """(wall s, CPU s of the child and its sandbox processes, timestamped lines of its log)."""
    with tempfile.TemporaryDirectory() as scratch:
        env = {**os.environ, "EDSB_CACHE_DIR": str(Path(scratch) / "cache")}  # nothing answered from an earlier run
        command = [sys.executable, "-m", "edsb", *QUICK_START, "--model", model, "--out", str(Path(scratch) / "smoke")]
        cpu, started = child_cpu_s(), time.monotonic()
        child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        assert child.stderr is not None
        lines = []
        for line in child.stderr:
            lines.append((time.monotonic() - started, line.rstrip()))
            print(f"{lines[-1][0]:7.1f} s  {lines[-1][1]}", file=sys.stderr, flush=True)
        if child.wait():
            raise SystemExit(f"the quick start failed (exit {child.returncode})")
        return time.monotonic() - started, child_cpu_s() - cpu, lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true", help="the oracle instead of the embedded model")
    options = parser.parse_args()
    load_at_start, date = os.getloadavg()[0], datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    wall, cpu, lines = run_quick_start("oracle" if options.smoke else "local")
    first_at, first = lines[0]
    done_at = next(at for at, line in lines if line.startswith("runs ") and not line.startswith("runs 0/"))
    print(f"quickstart_wall_s: {wall:.1f} (ratio {cpu / wall:.2f}x: CPU seconds {cpu:.1f} over the wall: cores got)")
    print(f"first_line_s: {first_at:.1f} (ratio {first_at / wall:.3f} of the wall, target a few seconds: {first!r})")
    print(f"first_run_done_s: {done_at:.1f} (ratio {done_at / wall:.2f} of the wall)")
    print(
        f"machine: {os.cpu_count()} cores, load average at start {load_at_start:.2f}, at end {os.getloadavg()[0]:.2f}"
        f", {date}"
    )


if __name__ == "__main__":
    main()
