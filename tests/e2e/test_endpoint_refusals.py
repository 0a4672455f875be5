"""What an endpoint's refusals do to a run: a refused request is the model's execution error, a refused client
(bad key, unknown model) stops the sweep at once with one line, and nothing already recorded is lost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edsb.llm import read_transcripts
from tests.support.edsb_cli import edsb_in_process, run_edsb
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


JSON_MODE_REFUSED = "response_format type json_object is not supported by this server"


def test_a_refused_setting_stops_run_and_check_model_with_its_fix(
    openai_server: OpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A server without JSON mode: `check-model` and `edsb run` both stop at the first request with the server's
    whole message and the option that fixes it, score nothing; with that option both go through."""
    openai_server.handler = lambda request: (
        Reply.error(400, JSON_MODE_REFUSED) if "response_format" in request.json() else Reply.completion("{}")
    )
    model = ("--model", "openai:m", "--base-url", openai_server.base_url)
    check = edsb_in_process(["check-model", *model], capsys)
    check.assert_one_clear_error(1, contains=JSON_MODE_REFUSED)
    assert "--no-json-mode" in check.stderr and json.loads(check.stdout)["ok"] is False
    out = tmp_path / "run"
    outcome = edsb_in_process(["run", *model, "--cases", "13", "--out", out, *COMMON], capsys)
    outcome.assert_one_clear_error(1, contains="the model endpoint refused a setting")
    assert JSON_MODE_REFUSED in outcome.stderr and "--no-json-mode" in outcome.stderr
    assert len(openai_server.chat_requests) == 2  # one from each command: the first refusal stopped the sweep
    assert not read_results(out)  # nothing recorded as the model's failure
    assert edsb_in_process(["check-model", *model, "--no-json-mode"], capsys).returncode == 0
    rerun = edsb_in_process(
        ["run", *model, "--cases", "13", "--out", tmp_path / "fixed", "--no-json-mode", *COMMON], capsys
    )
    assert rerun.returncode == 0, rerun.stderr
    assert len(read_results(tmp_path / "fixed")) == 3  # every run judged: the model's answers, whatever they are
