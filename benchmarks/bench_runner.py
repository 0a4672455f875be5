"""Throughput of `edsb run` against a loopback OpenAI-compatible server with a fixed latency per request.

The harness is I/O-bound: with the model answering in `LATENCY` seconds, runs per second should grow with
`--concurrency` until the CPU-bound parts (sandbox, sampler, judge) saturate the cores. Prints runs/s for each
concurrency and the speed-up over concurrency 1. Usage: `EDSB_DATA=... python benchmarks/bench_runner.py`.
"""

from __future__ import annotations

import dataclasses
import io
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.openai_server import OpenAIServer  # noqa: E402
from tests.support.scripted_stories import StoryModel  # noqa: E402

from edsb.cli import main  # noqa: E402
from edsb.data.benchmark import Benchmark  # noqa: E402

LATENCY = 0.2  # seconds per request, a fast hosted model
CASES = "0,13,44,60,63"
REPEATS = 4


def timed_run(server: OpenAIServer, concurrency: int, out: Path) -> tuple[int, float]:
    started = time.perf_counter()
    stdout, sys.stdout = sys.stdout, io.StringIO()  # the run's own tables are not the point here
    try:
        main(
            [
                "run",
                "--model",
                "openai:bench",
                "--base-url",
                server.base_url,
                "--cases",
                CASES,
                "--variant",
                "ours",
                "--repeats",
                str(REPEATS),
                "--no-cache",
                "--quiet",
                "--concurrency",
                str(concurrency),
                "--out",
                str(out),
            ]
        )
    except SystemExit as exit_:
        assert not exit_.code, exit_.code
    finally:
        sys.stdout = stdout
    elapsed = time.perf_counter() - started
    runs = sum(1 for _ in (out / "results.jsonl").open())
    return runs, elapsed


def main_bench() -> None:
    benchmark = Benchmark.open(os.environ.get("EDSB_DATA"))
    scripted = StoryModel(benchmark.cases)

    def slow(request):
        reply = scripted(request)
        return dataclasses.replace(reply, delay_s=LATENCY)

    with OpenAIServer(slow) as server, tempfile.TemporaryDirectory() as work:
        baseline = None
        for concurrency in (1, 4, 16, 64):
            runs, elapsed = timed_run(server, concurrency, Path(work) / f"c{concurrency}")
            rate = runs / elapsed
            baseline = baseline or rate
            print(
                f"concurrency {concurrency:3d}: {runs} runs in {elapsed:6.2f} s = {rate:6.2f} runs/s "
                f"(x{rate / baseline:.1f})"
            )


if __name__ == "__main__":
    main_bench()
