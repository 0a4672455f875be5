"""What an endpoint's refusals do to a run: a prompt the provider blames (too long, content blocked) is the model's
execution error; any other refusal (a setting, a field, a bad key, an unknown model) stops the sweep at once with
the server's words and the fix, scores nothing, and loses nothing already recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edsb.llm import read_transcripts
from edsb.llm.refusals import SHAPE_FIX
from tests.support.edsb_cli import edsb_in_process, run_edsb
from tests.support.openai_server import OpenAIServer, Reply, Validator
from tests.support.provider_fakes import (
    AZURE_CONTENT_FILTER,
    CONTEXT_TOO_LONG,
    OPENROUTER_FLAGGED,
    azure_classic,
    malformed_error,
    ollama_rules,
    openrouter_rules,
    provider_rules,
    xai_rules,
)
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


# Refusals of the request's shape, each in its provider's error body: (--model, base URL path, options, validator,
# the server's words the error must show whole, the fix it must name).
SHAPES: dict[str, tuple[str, str, tuple[str, ...], Validator, str, str]] = {
    "azure classic without api-version": (
        "openai:eval-mini",
        "/openai/deployments/eval-mini",
        (),
        azure_classic,
        "Missing required query parameter: api-version",
        SHAPE_FIX,
    ),
    "xai camelCase parameter": (
        "openai:grok-4.20",
        "/v1",
        ("--reasoning-effort", "low"),
        xai_rules,
        "Model grok-4.20 does not support parameter reasoningEffort.",
        "--reasoning-effort",
    ),
    "ollama reasoning value": (
        "openai:qwen3",
        "/v1",
        ("--reasoning-effort", "minimal"),
        ollama_rules,
        "invalid reasoning value: 'minimal'",
        "--reasoning-effort",
    ),
    "openrouter relayed error": (
        "openai:openai/o3",
        "/v1",
        (),
        openrouter_rules,
        "Provider returned error (OpenAI): Unsupported value: 'temperature' does not support 0.1",
        "--temperature default",
    ),
    "gemini thinking level": (
        "google:gemini-3-pro-preview",
        "",
        ("--thinking-level", "minimal"),
        provider_rules,
        "Thinking level MINIMAL is not supported for this model.",
        "--thinking-level",
    ),
    "malformed error body": (
        "openai:m",
        "/v1",
        (),
        malformed_error,
        "Request Header Or Cookie Too Large",
        SHAPE_FIX,
    ),
}


@pytest.mark.parametrize(("model", "path", "options", "validator", "words", "fix"), SHAPES.values(), ids=SHAPES.keys())
def test_a_refusal_of_the_requests_shape_stops_the_sweep_and_scores_nothing(
    model: str,
    path: str,
    options: tuple[str, ...],
    validator: Validator,
    words: str,
    fix: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whatever the provider and the shape of its error body, a refusal that does not blame the prompt is
    configuration: check-model and run both stop at their first request, show the server's words and the option
    to change, exit non-zero, and no run is scored as the model's."""
    monkeypatch.setenv("GEMINI_API_KEY", "not-a-secret")
    with OpenAIServer(validator=validator) as server:
        args = ("--model", model, "--base-url", server.root_url + path, *options)
        check = edsb_in_process(["check-model", *args], capsys)
        run = edsb_in_process(["run", *args, "--cases", "13", "--out", tmp_path / "run", *COMMON], capsys)
        sent = len(server.requests)
    check.assert_one_clear_error(1, contains=words)
    assert fix in check.stderr and json.loads(check.stdout)["ok"] is False
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert "the model endpoint refused" in run.stderr and words in run.stderr
    assert "fix: " in run.stderr and fix in run.stderr.partition("fix: ")[2]
    if fix != SHAPE_FIX:
        assert "--thinking-budget" not in run.stderr  # only the option the user passed is named
    assert sent == 2  # one each: the first refusal stopped the sweep
    assert not read_results(tmp_path / "run")  # nothing scored as the model's


PROMPT_FAULTS = {
    "context too long": CONTEXT_TOO_LONG,
    "azure content filter": AZURE_CONTENT_FILTER,
    "openrouter moderation flag": OPENROUTER_FLAGGED,
}


@pytest.mark.parametrize("reply", PROMPT_FAULTS.values(), ids=PROMPT_FAULTS.keys())
def test_a_refusal_that_blames_the_prompt_stays_the_models(
    reply: Reply, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.handler = lambda request: reply
    out = tmp_path / "run"
    code = run_edsb(
        "run", "--model", "openai:m", "--base-url", openai_server.base_url, "--cases", "13", "--out", str(out), *COMMON
    )
    assert code == 0
    assert {r["error_kind"] for r in read_results(out)} == {"request_rejected"}
    assert len(read_results(out)) == 3
