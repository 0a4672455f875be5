"""A refused request is configuration unless the provider says this prompt is at fault: a refusal of a setting (a
parameter, or a value of one), a field or the address names the option that fixes it and stops the sweep at once,
scoring nothing; a prompt refused for its length or its content stays the model's `request_rejected`. The messages
below are the providers' own wording for each refusal."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from edsb.llm import ChatRequest, OpenAIChatModel, RetryPolicy, TransportError
from edsb.llm.refusals import SHAPE_FIX, ServerError, judge, read_error, refusal_fix
from edsb.llm.transcripts import TranscriptFailure
from tests.support.edsb_cli import edsb_in_process
from tests.support.openai_server import OpenAIServer, Reply


def setting_fix(status: int, message: str) -> str | None:
    return judge(status, ServerError(message)).fix


FAST = RetryPolicy(max_retries=2, initial_delay_s=0.01, jitter=0.0)
OPENAI_TEMPERATURE = (
    "Unsupported value: 'temperature' does not support 0.1 with this model. Only the default (1) value is supported."
)


@pytest.mark.parametrize(
    ("status", "message", "option"),
    [
        (400, OPENAI_TEMPERATURE, "--temperature default"),
        (400, "temperature: Extra inputs are not permitted", "--temperature default"),
        (
            400,
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' "
            "instead.",
            "--max-tokens",
        ),
        (400, "Unrecognized request argument supplied: reasoning_effort", "--reasoning-effort"),
        (400, "output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' or 'max'", "--reasoning-effort"),
        (400, "thinking.budget_tokens: Input should be greater than or equal to 1024", "--thinking-budget"),
        (400, 'Invalid JSON payload received. Unknown name "thinkingLevel" at generation_config', "--thinking-level"),
        (400, "response_format type json_object is not supported by this server", "--no-json-mode"),
        (
            422,
            '{"detail":[{"type":"extra_forbidden","loc":["body","response_format"],"msg":"Extra inputs are not '
            'permitted"}]}',
            "--no-json-mode",
        ),
        (405, "Method Not Allowed", "--no-json-mode"),
    ],
)
def test_a_refused_setting_names_its_option(status: int, message: str, option: str) -> None:
    fix = setting_fix(status, message)
    assert fix is not None and option in fix
    error = TransportError("http", message, attempts=1, status=status)
    assert error.setting_refused and not error.request_rejected and error.fix == fix


@pytest.mark.parametrize(
    ("status", "message"),
    [
        # One prompt too long: the model's request_rejected, even when the message names max_tokens.
        (400, "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens."),
        (400, "'max_tokens' is too large: 3000. This model's maximum context length is 32768 tokens."),
        (400, "prompt is too long: 210000 tokens > 200000 maximum"),
        (413, "Request Entity Too Large"),
        # This prompt's content blocked.
        (400, "The response was filtered due to the prompt triggering Azure OpenAI's content management policy."),
        # Not a refusal of the request at all.
        (500, "temperature sensor overheated"),
        (429, "temperature requests are rate limited"),
    ],
)
def test_a_prompt_at_fault_or_a_server_failure_names_no_setting(status: int, message: str) -> None:
    assert setting_fix(status, message) is None
    error = TransportError("http", message, attempts=1, status=status)
    assert not error.setting_refused
    assert error.request_rejected == (status in (400, 413))


def test_a_refusal_naming_no_setting_is_still_configuration() -> None:
    """Something else about the request, naming no option: the sweep stops all the same, saying nothing was
    scored."""
    error = TransportError("http", "messages: roles must alternate between user and assistant", attempts=1, status=400)
    assert error.setting_refused and not error.request_rejected and error.fix == SHAPE_FIX


def test_a_setting_is_a_word_of_the_message_not_part_of_another() -> None:
    assert setting_fix(400, "the field reasoning_effortless is unknown") == SHAPE_FIX  # no option named
    assert "--reasoning-effort" in (setting_fix(400, "Unknown parameter: 'reasoning_effort'.") or "")
    # The first setting the message names decides: here the token cap, then its replacement.
    assert "--max-tokens" in (setting_fix(400, "max_tokens is not supported; use max_completion_tokens") or "")


def test_the_fix_survives_the_transcript() -> None:
    error = TransportError("http", OPENAI_TEMPERATURE, attempts=1, status=400)
    again = TranscriptFailure.model_validate_json(TranscriptFailure.of(error).model_dump_json()).to_error()
    assert again.fix == error.fix and again.setting_refused


def test_the_servers_whole_message_is_kept_and_not_retried(openai_server: OpenAIServer) -> None:
    long = "Unsupported value: 'temperature' does not support 0.1 with this model. " + "Details follow. " * 20
    message = long + "Only the default (1) value is supported, so pass no temperature."
    openai_server.enqueue(Reply.error(400, message))

    async def run() -> None:
        model = OpenAIChatModel("gpt-5", base_url=openai_server.base_url, retry=FAST)
        try:
            await model.complete(ChatRequest(messages=[{"role": "user", "content": "hi"}], temperature=0.1))
        finally:
            await model.aclose()

    with pytest.raises(TransportError) as caught:
        asyncio.run(run())
    assert caught.value.attempts == 1 and len(openai_server.chat_requests) == 1
    assert caught.value.message == message  # 480 characters, whole: the sentence that says what to do included
    assert caught.value.setting_refused


def test_a_refused_setting_stops_the_sweep_and_scores_nothing(
    openai_server: OpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    openai_server.handler = lambda request: Reply.error(400, OPENAI_TEMPERATURE)
    out = tmp_path / "run"
    args = ["run", "--model", "openai:gpt-5", "--base-url", openai_server.base_url, "--cases", "13", "--out", out]
    outcome = edsb_in_process([*args, "--no-cache", "--quiet", "--concurrency", "1"], capsys)
    outcome.assert_one_clear_error(1, contains="the model endpoint refused a setting: http 400 after 1 attempt")
    assert OPENAI_TEMPERATURE in outcome.stderr
    assert "fix: the model takes no temperature but its default: pass --temperature default" in outcome.stderr
    assert len(openai_server.chat_requests) == 1  # the first refusal stopped the sweep
    results = out / "results.jsonl"
    assert not results.exists() or results.read_text() == ""  # nothing recorded as the model's failure


def test_check_model_names_the_fix_of_a_refused_setting(openai_server: OpenAIServer) -> None:
    from edsb.llm import check_model

    openai_server.enqueue(Reply.error(400, OPENAI_TEMPERATURE))
    result = check_model("openai:gpt-5", base_url=openai_server.base_url, retry=FAST)
    assert result["ok"] is False and OPENAI_TEMPERATURE in result["error"]
    assert result["fix"] == "the model takes no temperature but its default: pass --temperature default"


@pytest.mark.parametrize(
    ("field", "option"),
    [
        ("reasoningEffort", "--reasoning-effort"),
        ("reasoning_effort", "--reasoning-effort"),
        ("output_config.effort", "--reasoning-effort"),
        ("generationConfig.thinkingConfig.thinkingLevel", "--thinking-level"),
        ("generation_config.thinking_config.thinking_level", "--thinking-level"),
        ("thinking.enabled.budget_tokens", "--thinking-budget"),
        ("maxOutputTokens", "--max-tokens"),
    ],
)
def test_a_parameter_is_one_whatever_its_spelling(field: str, option: str) -> None:
    assert option in (refusal_fix(400, ServerError("invalid argument", fields=(field,))) or "")


def test_the_fix_names_the_option_the_request_carried() -> None:
    """`Thinking level MINIMAL` and a bare `thinking` map to two options: the one the request carried is named."""
    level = ServerError("Thinking level MINIMAL is not supported for this model.")
    assert "--thinking-level" in (refusal_fix(400, level, {"thinking_level", "temperature"}) or "")
    bare = ServerError("thinking is not supported by this model")
    assert "--thinking-level" in (refusal_fix(400, bare, {"thinking_level"}) or "")
    assert "--thinking-budget" in (refusal_fix(400, bare, {"thinking_budget"}) or "")


def test_structured_bodies_are_read() -> None:
    relayed = json.dumps({"error": {"message": "bad", "param": "temperature", "code": "unsupported_value"}})
    body = {"error": {"code": 400, "message": "Provider returned error", "metadata": {"raw": relayed}}}
    error = read_error(json.dumps(body).encode(), 400)
    assert error.message == "Provider returned error: bad" and error.fields == ("temperature",)
    gemini = {
        "error": {
            "code": 400,
            "message": "Invalid value",
            "status": "INVALID_ARGUMENT",
            "details": [{"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [{"field": "x.y"}]}],
        }
    }
    assert read_error(json.dumps(gemini).encode(), 400).fields == ("x.y",)
    xai = read_error(b'{"code": "Client specified an invalid argument", "error": "no"}', 400)
    assert (xai.message, xai.codes) == ("no", ("Client specified an invalid argument",))
    assert read_error(b"<html>oops</html>", 400).message == "<html>oops</html>"
    assert read_error(b"", 400).message == "HTTP 400 with an empty body"
    unknown = refusal_fix(400, ServerError("bad", fields=("logit_bias",)))
    assert unknown is not None and "'logit_bias'" in unknown and "nothing was scored" in unknown


def test_a_404_from_the_responses_only_endpoint_gets_no_base_url_hint(openai_server: OpenAIServer) -> None:
    """The server's words show the request reached a /v1 API: the hint that --base-url may lack /v1 would be wrong."""
    message = "This model is only supported in v1/responses and not in v1/chat/completions."
    openai_server.enqueue(Reply.error(404, message))

    async def run() -> None:
        model = OpenAIChatModel("o3-pro", base_url=openai_server.base_url, retry=FAST)
        try:
            await model.complete(ChatRequest(messages=[{"role": "user", "content": "hi"}], temperature=None))
        finally:
            await model.aclose()

    with pytest.raises(TransportError) as caught:
        asyncio.run(run())
    assert "--base-url" not in str(caught.value) and caught.value.client_refused
    assert caught.value.fix is not None and "Responses API" in caught.value.fix


def test_a_refusal_of_the_client_that_names_no_option_says_nothing_was_scored() -> None:
    """OpenRouter's 402 (no credits left): configuration too, but not blamed on the request's shape."""
    fix = setting_fix(402, "Insufficient credits. Add more using https://openrouter.ai/credits")
    assert fix is not None and "HTTP 402" in fix and "nothing was scored" in fix and fix != SHAPE_FIX
