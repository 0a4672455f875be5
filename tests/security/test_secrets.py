"""API keys never reach config.json, results, transcripts, the summary, the response cache, stdout or stderr, even
when the server echoes the key back in its error messages (some do, in 401 answers)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from tests.support.edsb_cli import Outcome, edsb_child
from tests.support.openai_server import OpenAIServer, RecordedRequest, Reply
from tests.support.run_dir import every_output, read_results
from tests.support.scripted_programs import BENIGN_BODY, ProgramScript, is_narrator_request, program, run_args


def canary(label: str) -> str:
    return f"sk-{label}-{uuid.uuid4().hex}"


def presented_key(request: RecordedRequest) -> str:
    return request.headers.get("authorization", "").removeprefix("Bearer ")


class EchoingServer:
    """Answers the Narrator, then refuses the Event Parser with an error that quotes the key it was given: a 401
    (which stops the sweep: no run can succeed) or a 500 (which makes the run incomplete)."""

    def __init__(self, status: int = 401, prefix: str = "Incorrect API key provided: ") -> None:
        self.status = status
        self.prefix = prefix
        self.scripted = ProgramScript([program("benign", BENIGN_BODY)] * 10)

    def __call__(self, request: RecordedRequest) -> Reply:
        if is_narrator_request(request):
            return self.scripted(request)
        return Reply.error(self.status, f"{self.prefix}{presented_key(request)}. You can find your key at ...")


def run_against_echo(
    tmp_path: Path, env: dict[str, str], server: EchoingServer, *options: str
) -> tuple[Outcome, Path, list[str]]:
    out = tmp_path / "run"
    with OpenAIServer(server) as loopback:
        args = [a for a in run_args(loopback.base_url, out, 2, "--max-retries", "0", *options) if a != "--no-cache"]
        process = edsb_child(args, env=env, cwd=tmp_path)  # the response cache is on: it must not keep keys either
        keys = [presented_key(request) for request in loopback.chat_requests]
    assert "Traceback" not in process.stderr, process.stderr
    return process, out, keys


def assert_nowhere(secret: str, out: Path, process: Outcome, cache: Path) -> None:
    everything = every_output(out, process.stdout, process.stderr) + every_output(cache)
    assert secret not in everything


def test_a_401_quoting_the_key_stops_the_sweep_without_showing_it(tmp_path: Path, env: dict[str, str]) -> None:
    key = canary("default")
    process, out, presented = run_against_echo(tmp_path, {**env, "OPENAI_API_KEY": key}, EchoingServer(401))
    assert set(presented) == {key}  # the key was really in play
    assert process.returncode == 1
    assert "Incorrect API key provided: ***" in process.stderr  # the echo was there, redacted
    transcripts = every_output(out / "transcripts")
    assert "Incorrect API key provided: ***" in transcripts
    assert_nowhere(key, out, process, tmp_path / "cache")
    assert json.loads((out / "config.json").read_text())["api_key_env"] is None


def test_a_500_quoting_the_key_is_recorded_without_it(tmp_path: Path, env: dict[str, str]) -> None:
    key = canary("default")
    process, out, presented = run_against_echo(tmp_path, {**env, "OPENAI_API_KEY": key}, EchoingServer(500))
    assert set(presented) == {key}
    assert process.returncode == 1, process.stderr  # both runs stay incomplete
    records = read_results(out)
    assert [r["error_kind"] for r in records] == ["transport_http", "transport_http"]
    assert all("Incorrect API key provided: ***" in r["error"] for r in records)
    assert_nowhere(key, out, process, tmp_path / "cache")


def test_a_custom_key_variable(tmp_path: Path, env: dict[str, str]) -> None:
    custom, default = canary("custom"), canary("default")
    process, out, presented = run_against_echo(
        tmp_path,
        {**env, "EDSB_TEST_KEY": custom, "OPENAI_API_KEY": default},
        EchoingServer(500),
        "--api-key-env",
        "EDSB_TEST_KEY",
    )
    assert set(presented) == {custom}  # the named variable wins; the default key is not even sent
    assert process.returncode == 1, process.stderr  # the runs stay incomplete (the server answers 500)
    assert_nowhere(custom, out, process, tmp_path / "cache")
    assert_nowhere(default, out, process, tmp_path / "cache")
    assert json.loads((out / "config.json").read_text())["api_key_env"] == "EDSB_TEST_KEY"


def test_check_model_does_not_print_an_echoed_key(tmp_path: Path, env: dict[str, str]) -> None:
    key = canary("check")
    with OpenAIServer(lambda request: Reply.error(401, f"Incorrect API key provided: {presented_key(request)}")) as s:
        process = edsb_child(
            ["check-model", "--model", "openai:x", "--base-url", s.base_url],
            env={**env, "OPENAI_API_KEY": key},
            cwd=tmp_path,
        )
    assert process.returncode == 1
    answer = json.loads(process.stdout)
    assert answer["ok"] is False and "401" in answer["error"] and "***" in answer["error"]
    assert key not in process.stdout + process.stderr


def test_a_key_quoted_at_the_edge_of_a_long_message_does_not_leak_in_part(tmp_path: Path, env: dict[str, str]) -> None:
    key = canary("edge")
    process, out, _ = run_against_echo(tmp_path, {**env, "OPENAI_API_KEY": key}, EchoingServer(500, "x" * 120 + " "))
    everything = every_output(out, process.stdout, process.stderr)
    assert not any(key[i : i + 12] in everything for i in range(len(key) - 11))
