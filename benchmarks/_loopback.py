"""The loopback model server of the sweep benchmarks, in a process of its own so that its CPU is not the harness's.

`python benchmarks/_loopback.py LATENCY` starts `tests.support.openai_server.OpenAIServer` answering every chat
request after LATENCY seconds with `ScriptedPlanner` (two requests per run, passes, failures and model errors in
realistic proportions, answers a function of the request alone). It prints its base URL, then answers each `count`
line on stdin with the number of chat requests received so far, and stops at end of input.

Its sockets are set TCP_NODELAY (tests/support/openai_server.py), as production servers (uvicorn, vLLM, llama.cpp)
set theirs, so the 40 ms of Nagle's algorithm against a delayed ACK is never measured as the harness's time.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class LoopbackServer:
    """`with LoopbackServer(0.2) as server:` — `server.base_url`, `server.requests()`."""

    def __init__(self, latency_s: float) -> None:
        self.latency_s = latency_s
        self._process: subprocess.Popen[str] | None = None
        self.base_url = ""

    def __enter__(self) -> LoopbackServer:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        self._process = subprocess.Popen(
            [sys.executable, __file__, str(self.latency_s)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self._process.stdout is not None
        self.base_url = self._process.stdout.readline().strip()
        if not self.base_url.startswith("http"):
            raise RuntimeError("the loopback server did not start")
        return self

    def requests(self) -> int:
        """Chat requests the server has received so far."""
        assert self._process is not None and self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write("count\n")
        self._process.stdin.flush()
        return int(self._process.stdout.readline())

    def __exit__(self, *exc: object) -> None:
        if self._process is not None:
            assert self._process.stdin is not None
            self._process.stdin.close()
            self._process.wait(timeout=30)


def first_cases(runs: int, repeats: int) -> str:
    """The smallest prefix of the Table 1 cases whose sweep holds at least `runs` runs at `repeats` repeats."""
    from edsb.data.benchmark import Benchmark
    from edsb.runner.config import resolve_run_config
    from edsb.runner.keys import expand_keys

    benchmark = Benchmark.open(None)
    config = resolve_run_config({"model": "openai:x", "base_url": "http://127.0.0.1/v1", "preset": "table1"}, None)
    chosen: list[int] = []
    for case in config.cases:
        chosen.append(case)
        if len(expand_keys(config.variants, chosen, config.distraction, repeats, benchmark.cases)) >= runs:
            break
    return ",".join(map(str, chosen))


def _serve(latency_s: float) -> None:
    sys.path.insert(0, str(ROOT))
    from tests.support.openai_server import OpenAIServer
    from tests.support.scripted_planner import ScriptedPlanner

    from edsb.data.benchmark import Benchmark

    planner = ScriptedPlanner(Benchmark.open(os.environ.get("EDSB_DATA")), delay_s=latency_s)
    with OpenAIServer(planner) as server:
        print(server.base_url, flush=True)
        for line in sys.stdin:
            if line.strip() == "count":
                print(len(server.chat_requests), flush=True)


if __name__ == "__main__":
    _serve(float(sys.argv[1]))
