"""What an endpoint's refusals do to a run: a refused request is the model's execution error, a refused client
(bad key, unknown model) stops the sweep at once with one line, and nothing already recorded is lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from edsb.llm import read_transcripts
from tests.support.edsb_cli import run_edsb
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.run_dir import read_results, read_summary

COMMON = ("--no-cache", "--max-retries", "0", "--quiet", "--concurrency", "1")


def test_a_prompt_the_endpoint_rejects_is_an_execution_error(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.handler = lambda request: Reply.error(400, "This model's maximum context length is 8192 tokens")
    out = tmp_path / "run"
    code = run_edsb(
        "run", "--model", "openai:m", "--base-url", openai_server.base_url, "--cases", "13", "--out", str(out), *COMMON
    )
    assert code == 0
    records = read_results(out)
    assert [r["status"] for r in records] == ["error"] * 3
    assert {r["error_kind"] for r in records} == {"request_rejected"}
    ours = read_summary(out)["variants"]["ours"]
    assert (ours["runs"], ours["incomplete"], ours["execution_rate"]) == (3, 0, 0.0)


def test_a_refused_client_stops_the_sweep_and_keeps_what_was_done(
    openai_server: OpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The first run's Narrator is answered (with an empty event: a skip), then the key is revoked.
    answers = iter([Reply.completion('{"reasoning": "wait", "event": {}}')])
    openai_server.handler = lambda request: next(answers, Reply.error(401, "Incorrect API key provided"))
    out = tmp_path / "run"
    code = run_edsb(
        "run", "--model", "openai:m", "--base-url", openai_server.base_url, "--cases", "13", "--out", str(out), *COMMON
    )
    err = capsys.readouterr().err
    assert code == 1
    assert "edsb: error: the model endpoint refused the request: http 401" in err
    assert "Traceback" not in err
    assert [r["key"] for r in read_results(out)] == ["ours/tc13-d0-r0"]
    assert len(openai_server.chat_requests) == 2  # no further run was attempted after the refusal
    # Both requests are in the transcripts: the refused one too, although its run has no result line.
    records = read_transcripts(out)
    assert [(r.run, r.error.status if r.error else None) for r in records] == [
        ("ours__tc13-d0-r0", None),
        ("ours__tc13-d1-r0", 401),
    ]
