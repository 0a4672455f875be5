"""The loopback model server of the sweep benchmarks, in a process of its own so that its CPU is not the harness's.

`python benchmarks/_loopback.py LATENCY` serves `POST /v1/chat/completions` on 127.0.0.1, answering every request
LATENCY seconds after it arrived with `tests.support.scripted_planner.ScriptedPlanner` (two requests per run, passes,
failures and model errors in realistic proportions, answers a function of the request alone). It prints its base URL,
then answers each `count` line on stdin with the number of chat requests received so far, and stops at end of input.
`--threaded` serves with the test suite's `OpenAIServer` instead (http.server, a thread per connection).

The default server is built as production servers are (uvicorn: one asyncio event loop, requests parsed by
httptools; TCP_NODELAY, which asyncio sets on every TCP connection). It shares the benchmark machine's two cores with
the harness, and the ideal a sweep is measured against counts the server as pure latency: the thread-per-connection
test server spent about 0.5 ms of CPU per request (header parsing by the email package, a thread woken per reply),
which the harness then lacked. The test suite keeps `OpenAIServer` for its faults on demand.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable
from http import HTTPStatus
from pathlib import Path

import httptools

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.support.openai_server import CHAT_PATH, RecordedRequest, Reply  # noqa: E402


class LoopbackServer:
    """`with LoopbackServer(0.2) as server:` — `server.base_url`, `server.requests()`; `threaded=True` serves with
    the test suite's thread-per-connection server."""

    def __init__(self, latency_s: float, *, threaded: bool = False) -> None:
        self.latency_s = latency_s
        self.threaded = threaded
        self._process: subprocess.Popen[str] | None = None
        self.base_url = ""

    def __enter__(self) -> LoopbackServer:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        self._process = subprocess.Popen(
            [sys.executable, __file__, str(self.latency_s), *(["--threaded"] if self.threaded else [])],
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


def _serve(latency_s: float, threaded: bool) -> None:
    from tests.support.scripted_planner import ScriptedPlanner

    from edsb.data.benchmark import Benchmark

    planner = ScriptedPlanner(Benchmark.open(os.environ.get("EDSB_DATA")), delay_s=latency_s)
    if threaded:
        from tests.support.openai_server import OpenAIServer

        with OpenAIServer(planner) as server:
            print(server.base_url, flush=True)
            for line in sys.stdin:
                if line.strip() == "count":
                    print(len(server.chat_requests), flush=True)
        return
    asyncio.run(_serve_on_loop(planner))


async def _serve_on_loop(planner: Callable[[RecordedRequest], Reply]) -> None:
    loop = asyncio.get_running_loop()
    received = [0]
    server = await loop.create_server(
        lambda: _Connection(planner, received), "127.0.0.1", 0, backlog=2048, reuse_address=True
    )
    port = server.sockets[0].getsockname()[1]
    print(f"http://127.0.0.1:{port}/v1", flush=True)
    commands = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(commands), sys.stdin)
    while line := await commands.readline():
        if line.strip() == b"count":
            print(received[0], flush=True)
    server.close()


class _Connection(asyncio.Protocol):
    """One keep-alive connection: each request is answered `reply.delay_s` after its last byte arrived."""

    def __init__(self, planner: Callable[[RecordedRequest], Reply], received: list[int]) -> None:
        self.planner = planner
        self.received = received
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpRequestParser(self)
        self._start()

    def _start(self) -> None:
        self.url = b""
        self.headers: dict[str, str] = {}
        self.body: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            assert self.transport is not None
            self.transport.close()

    # httptools callbacks
    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        path = self.url.decode("latin-1").split("?")[0]
        request = RecordedRequest(
            self.parser.get_method().decode(), path, self.headers, b"".join(self.body), time.monotonic()
        )
        self._start()
        if request.method == "POST" and path == CHAT_PATH:
            self.received[0] += 1
            try:
                reply = self.planner(request)
            except Exception as exc:
                reply = Reply.error(500, f"planner raised {type(exc).__name__}: {exc}")
        else:
            reply = Reply.error(404, f"no route {request.method} {path}")
        asyncio.get_running_loop().call_later(reply.delay_s, self._send, reply)

    def _send(self, reply: Reply) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        head = [f"HTTP/1.1 {reply.status} {HTTPStatus(reply.status).phrase}"]
        head += [f"{name}: {value}" for name, value in reply.headers.items()]
        head.append(f"Content-Length: {len(reply.body)}")
        self.transport.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + reply.body)


if __name__ == "__main__":
    _serve(float(sys.argv[1]), threaded="--threaded" in sys.argv[2:])
