"""Replies that attack the harness itself rather than the sandbox: whatever a model or server sends, the run that
received it is recorded and the benchmark carries on with the next one."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.support.data import require_data
from tests.support.edsb_cli import child_env, edsb_child
from tests.support.openai_server import OpenAIServer, RecordedRequest, Reply
from tests.support.run_dir import read_results
from tests.support.scripted_programs import BENIGN_BODY, ProgramScript, is_narrator_request, program, run_args

NESTED = "[" * 100_000 + "]" * 100_000  # valid JSON, deeper than any recursive decoder goes


class FirstReplyHostile:
    """The first request of the chosen module gets `hostile`; everything else is the scripted model."""

    def __init__(self, narrator: bool, hostile: Callable[[], Reply]) -> None:
        self.narrator = narrator
        self.hostile = hostile
        self.scripted = ProgramScript([program("benign", BENIGN_BODY)] * 4)
        self.used = False

    def __call__(self, request: RecordedRequest) -> Reply:
        if is_narrator_request(request) == self.narrator and not self.used:
            self.used = True
            return self.hostile()
        return self.scripted(request)


def run_two(tmp_path: Path, model: FirstReplyHostile, *options: str) -> tuple[dict, dict, str]:
    require_data()
    out = tmp_path / "run"
    env = child_env(tmp_path / "cache")
    with OpenAIServer(model) as server:
        process = edsb_child(run_args(server.base_url, out, 2, "--concurrency", "1", *options), env=env, cwd=tmp_path)
    assert "Traceback" not in process.stderr, process.stderr[-3000:]
    first, second = sorted(read_results(out), key=lambda r: r["repeat"])
    incomplete = first["status"] == "incomplete" or second["status"] == "incomplete"
    assert process.returncode == (1 if incomplete else 0), process.stderr  # incomplete runs exit non-zero
    return first, second, process.stderr


def test_a_deeply_nested_narrator_reply_is_a_format_error(tmp_path: Path) -> None:
    first, second, _ = run_two(tmp_path, FirstReplyHostile(True, lambda: Reply.completion(NESTED)))
    assert (first["status"], first["error_kind"]) == ("error", "narrator_format")
    assert second["status"] == "passed"


def test_a_deeply_nested_response_body_is_an_invalid_response(tmp_path: Path) -> None:
    body = Reply(200, NESTED.encode(), {"Content-Type": "application/json"})
    # Without retries the unreadable body is the run's outcome (with them, the next answer would be used).
    first, second, _ = run_two(tmp_path, FirstReplyHostile(True, lambda: body), "--max-retries", "0")
    assert (first["status"], first["error_kind"]) == ("incomplete", "transport_invalid_response")
    assert second["status"] == "passed"


def test_a_huge_event_parser_reply_is_contained(tmp_path: Path) -> None:
    """Three MB of code: compiled and run in the sandbox under its limits, never in the harness."""
    huge = program("huge", "x = 1\n" * 500_000 + BENIGN_BODY)
    hostile = FirstReplyHostile(False, lambda: Reply.completion(huge))
    first, second, _ = run_two(tmp_path, hostile, "--code-timeout", "2", "--code-memory", "256")
    assert first["status"] in ("passed", "error")
    assert first["error_kind"] in (None, "code_memory", "code_timeout")
    if first["error_kind"] == "code_timeout":  # the run's own limit stopped it, nothing that would hold up others
        assert first["error"].endswith("TimeoutError: the code ran longer than 2 s"), first["error"]
    assert second["status"] == "passed"


def test_a_narrator_reply_that_is_not_an_event_is_a_format_error(tmp_path: Path) -> None:
    hostile = '{"event": {"characters": "David", "activity": {"__class__": 1}}}'
    first, second, _ = run_two(tmp_path, FirstReplyHostile(True, lambda: Reply.completion(hostile)))
    assert (first["status"], first["error_kind"]) == ("error", "narrator_format")
    assert second["status"] == "passed"
