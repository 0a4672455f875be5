"""OpenAI's Responses API through the official SDK, against the loopback fake: the request as documented, the
reasoning summary kept as reasoning, the tokens as billed, and its refusals read like any other."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from edsb.llm import ChatRequest, RetryPolicy, TransportError
from tests.support.openai_server import OpenAIServer, Reply, responses_payload
from tests.support.provider_fakes import provider_rules

pytest.importorskip("openai")
FAST = RetryPolicy(max_retries=0, initial_delay_s=0.01, jitter=0.0)
MESSAGES = [{"role": "system", "content": "You narrate."}, {"role": "user", "content": "Where does Ryan go?"}]


def ask(server: OpenAIServer, monkeypatch: pytest.MonkeyPatch, **settings: Any) -> Any:
    from edsb.llm.responses_client import OpenAIResponsesModel

    monkeypatch.setenv("OPENAI_API_KEY", "not-a-secret")
    request = ChatRequest(messages=MESSAGES, **{"temperature": None, **settings})

    async def run() -> Any:
        model = OpenAIResponsesModel("o3-pro", base_url=server.base_url, retry=FAST)
        try:
            return await model.complete(request)
        except TransportError as exc:
            return exc
        finally:
            await model.aclose()

    return asyncio.run(run())


def test_the_request_and_the_reply(monkeypatch: pytest.MonkeyPatch) -> None:
    with OpenAIServer(validator=provider_rules) as server:
        usage = {"prompt_tokens": 120, "completion_tokens": 900}
        payload = responses_payload('{"event": {}}', usage, "o3-pro-2025-06-10", "I weigh the options.", 850)
        payload["usage"]["input_tokens_details"] = {"cached_tokens": 100}
        server.enqueue(Reply.json(payload))
        response = ask(server, monkeypatch, json_mode=True, reasoning_effort="high", max_tokens=4000)
        body = server.requests[0].json()
    assert server.requests[0].path == "/v1/responses"
    assert body["input"] == MESSAGES  # the system prompt keeps its role: the paper's prompt, byte for byte
    assert body["text"] == {"format": {"type": "json_object"}} and body["max_output_tokens"] == 4000
    assert body["reasoning"] == {"summary": "auto", "effort": "high"} and body["store"] is False
    assert "temperature" not in body and "seed" not in body
    assert (response.text, response.reasoning, response.reasoning_source) == (
        '{"event": {}}',
        "I weigh the options.",
        "reasoning_summary",
    )
    assert (response.prompt_tokens, response.cached_tokens) == (120, 100)
    assert (response.completion_tokens, response.reasoning_tokens) == (900, 850)
    assert response.finish_reason == "stop" and response.sent["reasoning"]["effort"] == "high"


def test_a_refused_setting_is_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    with OpenAIServer(validator=provider_rules) as server:
        error = ask(server, monkeypatch, temperature=0.1)
    assert isinstance(error, TransportError) and error.status == 400 and error.setting_refused
    assert error.fix is not None and "--temperature default" in error.fix
