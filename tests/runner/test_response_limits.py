"""What a model server sends back is bounded, through the real pipeline: a reply over the size limits or with usage
counts that are no numbers leaves its run `incomplete` with a transport kind (never `internal_error`), the sweep
finishes and every other run is what a healthy server gives; a 1 GiB body costs the harness no more memory than
the body limit."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from edsb.data.benchmark import Benchmark
from edsb.llm import RetryPolicy
from tests.support.edsb_cli import child_env, isolate_environment, run_edsb, scripted_config, scripted_run_args
from tests.support.network import LoopbackListener
from tests.support.openai_server import OpenAIServer, RecordedRequest, Reply, completion_payload
from tests.support.run_dir import content, records_by_key
from tests.support.scripted_planner import ScriptedPlanner
from tests.support.sweep import run_and_summarise


def _bad_usage() -> Reply:
    payload = completion_payload('{"reasoning": "r", "event": {}}', 3, 1, "stop", "m")
    payload["usage"]["prompt_tokens"] = "lots"
    return Reply.json(payload)


def _seventeen_mib() -> Reply:
    return Reply(200, b"{" + b" " * (17 << 20) + b"}", {"Content-Type": "application/json"})


def _many_headers() -> Reply:
    return Reply.json(completion_payload("{}", 3, 1, "stop", "m"), headers={f"X-F{i}": "a" for i in range(200_000)})


# The Narrator request of these cases gets a hostile reply every time it is asked; (reply, recorded kind).
HOSTILE: dict[int, tuple[Callable[[], Reply], str]] = {
    0: (_seventeen_mib, "transport_oversized"),
    13: (_many_headers, "transport_oversized"),
    60: (_bad_usage, "transport_invalid_response"),
}
CASES = [0, 1, 13, 14, 60, 61]


def test_oversized_and_malformed_replies_are_transport_errors_and_the_sweep_goes_on(
    benchmark: Benchmark, tmp_path: Path
) -> None:
    planner = ScriptedPlanner(benchmark)
    retry = RetryPolicy(max_retries=1, initial_delay_s=0.01, jitter=0.0)
    instructions = {case: benchmark.case(case).user_instruction.strip() for case in HOSTILE}

    def hostile(request: RecordedRequest) -> Reply:
        query = request.json()["messages"][-1]["content"]
        for case, instruction in instructions.items():
            if instruction in query:
                return HOSTILE[case][0]()
        return planner(request)

    def config(server: OpenAIServer):  # type: ignore[no-untyped-def]
        return scripted_config(server.base_url, cases=CASES, distraction=[0], concurrency=4, timeout=30.0)

    with OpenAIServer(planner) as healthy:
        run_and_summarise(config(healthy), tmp_path / "healthy", quiet=True, retry=retry)
    with OpenAIServer(hostile) as server:
        outcome = run_and_summarise(config(server), tmp_path / "hostile", quiet=True, retry=retry)
        asked = [r for r in server.chat_requests if instructions[60] in r.json()["messages"][-1]["content"]]
    reference, records = records_by_key(tmp_path / "healthy"), records_by_key(tmp_path / "hostile")
    assert sorted(records) == sorted(reference) and outcome.stats.done == len(records)
    for key, record in records.items():
        if record["case"] in HOSTILE:
            assert (record["status"], record["error_kind"]) == ("incomplete", HOSTILE[record["case"]][1]), record
        else:
            assert content(record) == content(reference[key]), key
    assert len(asked) == 2  # an invalid response is asked for again (retries: 1); an oversized one is not


# --- memory: a 1 GiB body ----------------------------------------------------------------------------------------

CHILD = """
import resource, sys
from edsb.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print("maxrss_kib", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
"""


def _run_measured(base_url: str, out: Path, cache: Path, *options: str) -> int:
    """Peak RSS (KiB) of `edsb run` in a child process, for one run of case 0 at level 0."""
    args = scripted_run_args(base_url, out, "--cases", "0", "--distraction", "0", "--no-cache", "--quiet", *options)
    completed = subprocess.run(
        [sys.executable, "-c", CHILD, *args], env=child_env(cache), capture_output=True, text=True, timeout=300
    )
    lines = [line for line in completed.stderr.splitlines() if line.startswith("maxrss_kib ")]
    assert lines, completed.stderr
    return int(lines[-1].split()[1])


class GigabyteServer(LoopbackListener):
    """Answers every request with a 1 GiB chunked body, 1 MiB a chunk, sent only as fast as the client reads."""

    def __init__(self) -> None:
        self.sent = 0
        super().__init__()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    def handle(self, connection: socket.socket) -> None:
        self._serve(connection)

    def _serve(self, connection: socket.socket) -> None:
        piece = b"x" * (1 << 20)
        chunk = f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
        with connection:
            try:
                request = b""
                while b"\r\n\r\n" not in request:
                    request += connection.recv(65536)
                connection.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                )
                for _ in range(1024):
                    connection.sendall(chunk)
                    self.sent += len(piece)
                connection.sendall(b"0\r\n\r\n")
            except OSError:
                pass


def test_a_gigabyte_body_costs_no_more_memory_than_the_limit(benchmark: Benchmark, tmp_path: Path) -> None:
    """Peak RSS of the harness against a healthy server, then against one that sends a 1 GiB body: under 64 MiB
    more (the body limit is 16 MiB), and the run is recorded as `transport_oversized`."""
    with OpenAIServer(ScriptedPlanner(benchmark)) as healthy:
        baseline = _run_measured(healthy.base_url, tmp_path / "healthy", tmp_path / "cache")
    server = GigabyteServer()
    try:
        peak = _run_measured(server.base_url, tmp_path / "gigabyte", tmp_path / "cache")
    finally:
        server.close()
    [record] = records_by_key(tmp_path / "gigabyte").values()
    assert (record["status"], record["error_kind"]) == ("incomplete", "transport_oversized")
    assert server.sent < 1 << 30  # the client stopped reading
    assert peak < baseline + 64 * 1024, (peak, baseline)
    assert json.loads((tmp_path / "healthy" / "results.jsonl").read_text())["status"] != "incomplete"


def test_the_body_limit_is_an_option_of_edsb_run_and_not_part_of_the_identity(
    benchmark: Benchmark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 1.5 MiB Narrator reply is over `--max-response-mb 1` and within the default: the rerun with the default
    resumes the same directory and completes the run."""
    isolate_environment(monkeypatch, tmp_path / "cache")
    planner = ScriptedPlanner(benchmark, flaws=False)

    def padded(request: RecordedRequest) -> Reply:
        reply = planner(request)
        return Reply(reply.status, reply.body[:-1] + b" " * (3 << 19) + b"}", reply.headers)

    out = tmp_path / "run"
    selection = ("--cases", "0", "--distraction", "0", "--no-cache", "--quiet")
    with OpenAIServer(padded) as server:
        assert run_edsb(*scripted_run_args(server.base_url, out, *selection, "--max-response-mb", "1")) != 0
        [record] = records_by_key(out).values()
        assert (record["status"], record["error_kind"]) == ("incomplete", "transport_oversized")
        assert json.loads((out / "config.json").read_text())["max_response_mb"] == 1
        assert run_edsb(*scripted_run_args(server.base_url, out, *selection)) == 0
    [record] = records_by_key(out).values()
    assert record["status"] == "passed"
