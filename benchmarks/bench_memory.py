"""Peak memory of `edsb run` does not grow with the size of the sweep: results are streamed to disk, not held.

Runs the Table 1 sweep (1,800 runs) and a tenth of it (the same four variants, one repeat, the first cases up to 180
runs) as child processes against an instant loopback server, and prints the ratio of their peak resident set sizes
(the `edsb` process; its sandbox workers are separate processes of fixed size). Usage:
`EDSB_DATA=... python benchmarks/bench_memory.py` (`--smoke`: 20 runs against 2).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _loopback import LoopbackServer, first_cases  # noqa: E402


def _peak_rss_mb(base_url: str, out: Path, selection: list[str]) -> tuple[float, int, float]:
    """(peak RSS in MiB, runs, wall s) of one `edsb run` in a child process."""
    command = [sys.executable, "-m", "edsb", "run", "--model", "openai:scripted", "--base-url", base_url]
    command += [*selection, "--no-cache", "--quiet", "--concurrency", "64", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        stderr = process.stderr.read().decode() if process.stderr else ""
        raise SystemExit(f"edsb run failed: {stderr[-2000:]}")
    runs = sum(1 for _ in (out / "results.jsonl").open("rb"))
    return usage.ru_maxrss / 1024, runs, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="20 runs against 2, a few seconds")
    args = parser.parse_args()
    if not os.environ.get("EDSB_DATA"):
        raise SystemExit("bench_memory: set EDSB_DATA to the benchmark data directory")
    load = os.getloadavg()
    if args.smoke:
        small = ["--preset", "table1", "--repeats", "1", "--cases", first_cases(2, 1)]
        large = ["--preset", "table1", "--repeats", "1", "--cases", first_cases(20, 1)]
    else:
        small = ["--preset", "table1", "--repeats", "1", "--cases", first_cases(180, 1)]
        large = ["--preset", "table1"]
    with LoopbackServer(0.0) as server, tempfile.TemporaryDirectory() as work:
        small_mb, small_runs, _ = _peak_rss_mb(server.base_url, Path(work) / "small", small)
        large_mb, large_runs, _ = _peak_rss_mb(server.base_url, Path(work) / "large", large)
    print(
        f"peak_rss_ratio: {large_mb / small_mb:.3f} (ratio peak RSS {large_runs} runs / {small_runs} runs = "
        f"{large_mb:.1f} MiB / {small_mb:.1f} MiB, target <= 1.2)"
    )
    print(f"machine: {os.cpu_count()} cores, load average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
