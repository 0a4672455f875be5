"""`anthropic:` and `google:` through their real SDKs against the loopback server speaking each wire protocol.

The request-parity tests hold each request to what the official implementation's client sends, field by field.
The expectations were written from reading that client (8a6f726, `src/action_planning/llm_client.py`):
- Anthropic: `messages.create(model=, system=<first message when it is the system's>, messages=<the rest>,
  temperature=, max_tokens=2048)`, and nothing else: no JSON mode, no seed. The temperature goes only where the
  installed SDK's API version has one: version 2026-10-21 (anthropic 2.17) has none.
- Google: `chats.create(model=, history=<every turn but the last, assistant turns as role "model">,
  config=GenerateContentConfig(system_instruction=, temperature=, max_output_tokens=2048,
  response_mime_type="application/json" only when JSON mode is asked for))`, then `send_message(<last turn>)`.
"""

from __future__ import annotations

import asyncio
import importlib
import re
import socket
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from edsb.llm import ChatRequest, RetryPolicy, TransportError, build_model
from edsb.llm.errors import ApiKeyError
from edsb.llm.sdk_client import AnthropicChatModel, GoogleChatModel, SdkChatModel
from tests.support.openai_server import OpenAIServer, RecordedRequest, Reply

pytest.importorskip("anthropic")
pytest.importorskip("google.genai")

FAST = RetryPolicy(max_retries=2, initial_delay_s=0.01, max_delay_s=5.0, jitter=0.0)
KEY = "sk-test-provider-key-not-real"
SYSTEM = "You narrate. Answer in JSON."
TURNS = [
    {"role": "user", "content": "Example query"},
    {"role": "assistant", "content": '{"event": "example"}'},
    {"role": "user", "content": "Where does Ryan go next?"},
]
PROVIDERS = ["anthropic", "google"]


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


def make(provider: str, server: OpenAIServer, **overrides: Any) -> SdkChatModel:
    options: dict[str, Any] = {"base_url": server.root_url, "timeout_s": 5.0, "retry": FAST, **overrides}
    if provider == "anthropic":
        return AnthropicChatModel("claude-test", **options)
    return GoogleChatModel("gemini-test", **options)


def request(json_mode: bool = True, **settings: Any) -> ChatRequest:
    messages = [{"role": "system", "content": SYSTEM}, *TURNS]
    return ChatRequest(messages=messages, temperature=0.1, json_mode=json_mode, **settings)


def complete(model: SdkChatModel, chat_request: ChatRequest | None = None):
    async def run():
        try:
            return await model.complete(chat_request or request())
        finally:
            await model.aclose()

    return asyncio.run(run())


def sent(server: OpenAIServer) -> list[RecordedRequest]:
    return server.native_requests


def test_anthropic_request_matches_the_reference_field_by_field(openai_server: OpenAIServer) -> None:
    # The reference marks nothing for the prompt cache: without markers the body is its own (the markers' own test is
    # tests/llm/test_prompt_cache.py).
    for json_mode in (True, False):  # the reference has no JSON mode for Anthropic: the body is the same
        complete(make("anthropic", openai_server, prompt_cache=False), request(json_mode=json_mode))
    first, second = sent(openai_server)
    assert first.path == "/v1/messages"
    assert first.json() == {"model": "claude-test", "system": SYSTEM, "messages": TURNS, "max_tokens": 2048}
    assert first.headers["anthropic-version"] == importlib.import_module("anthropic._constants").ANTHROPIC_API_VERSION
    assert second.json() == first.json()
    # The SDK's own way to send the key (`x-api-key`, or a bearer token in newer versions), as the reference does.
    assert KEY in (first.headers.get("x-api-key"), first.headers.get("authorization", "").removeprefix("Bearer "))


def test_google_request_matches_the_reference_field_by_field(openai_server: OpenAIServer) -> None:
    complete(make("google", openai_server), request(json_mode=True))
    complete(make("google", openai_server), request(json_mode=False))
    json_body, text_body = (r.json() for r in sent(openai_server))
    # The API version in the path is the SDK's choice (v1beta in older releases, v1 now), as for the reference.
    assert re.fullmatch(r"/v1(beta)?/models/gemini-test:generateContent", sent(openai_server)[0].path)
    assert json_body["contents"] == [
        {"role": "user", "parts": [{"text": "Example query"}]},
        {"role": "model", "parts": [{"text": '{"event": "example"}'}]},
        {"role": "user", "parts": [{"text": "Where does Ryan go next?"}]},
    ]
    assert json_body["systemInstruction"]["parts"] == [{"text": SYSTEM}]
    assert json_body["generationConfig"] == {
        "temperature": 0.1,
        "maxOutputTokens": 2048,
        "responseMimeType": "application/json",
    }
    assert set(json_body) == {"contents", "systemInstruction", "generationConfig"}
    assert text_body["generationConfig"] == {"temperature": 0.1, "maxOutputTokens": 2048}
    assert sent(openai_server)[0].headers["x-goog-api-key"] == KEY


@pytest.mark.parametrize("provider", PROVIDERS)
def test_success_and_usage_from_the_apis_own_fields(openai_server: OpenAIServer, provider: str) -> None:
    openai_server.enqueue(Reply.completion('{"plan": {}}', prompt_tokens=321, completion_tokens=17, model="v-2025"))
    response = complete(make(provider, openai_server))
    assert (response.text, response.prompt_tokens, response.completion_tokens) == ('{"plan": {}}', 321, 17)
    assert response.model == "v-2025"
    assert response.finish_reason == {"anthropic": "end_turn", "google": "STOP"}[provider]
    assert (response.attempts, response.source) == (1, "model")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_max_tokens_and_seed_are_sent_as_asked(openai_server: OpenAIServer, provider: str) -> None:
    complete(make(provider, openai_server), request(max_tokens=700, seed=5))
    body = sent(openai_server)[0].json()
    if provider == "anthropic":
        assert body["max_tokens"] == 700 and "seed" not in body  # the Messages API takes no seed
    else:
        assert body["generationConfig"]["maxOutputTokens"] == 700
        assert body["generationConfig"]["seed"] == 5


@pytest.mark.parametrize("provider", PROVIDERS)
def test_429_waits_as_the_provider_says(openai_server: OpenAIServer, provider: str) -> None:
    # Anthropic sends Retry-After; Gemini says it in the body (RetryInfo), which the loopback server writes.
    openai_server.enqueue(Reply.rate_limited(retry_after="1"), Reply.completion("late"))
    response = complete(make(provider, openai_server))
    first, second = sent(openai_server)
    assert (response.text, response.attempts) == ("late", 2)
    assert second.received_at - first.received_at >= 0.9  # backoff alone would have waited 0.01 s


def test_anthropic_rate_limit_reset_headers_set_the_wait(openai_server: OpenAIServer) -> None:
    reset = (datetime.now(UTC) + timedelta(seconds=1.2)).isoformat()
    headers = {"anthropic-ratelimit-requests-remaining": "0", "anthropic-ratelimit-requests-reset": reset}
    openai_server.enqueue(Reply.error(429, "slow down", headers=headers), Reply.completion("after reset"))
    response = complete(make("anthropic", openai_server))
    first, second = sent(openai_server)
    assert response.text == "after reset"
    assert second.received_at - first.received_at >= 0.9


@pytest.mark.parametrize("provider", PROVIDERS)
def test_5xx_is_retried_then_final(openai_server: OpenAIServer, provider: str) -> None:
    openai_server.enqueue(Reply.error(500), Reply.error(503), Reply.completion("third time"))
    assert complete(make(provider, openai_server)).attempts == 3
    openai_server.enqueue(*[Reply.error(502, "bad gateway")] * 3)
    with pytest.raises(TransportError) as caught:
        complete(make(provider, openai_server))
    assert (caught.value.kind, caught.value.status, caught.value.attempts) == ("http", 502, 3)
    assert "bad gateway" in str(caught.value)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_client_errors_are_not_retried_and_the_key_is_redacted(openai_server: OpenAIServer, provider: str) -> None:
    openai_server.enqueue(Reply.error(401, f"invalid x-api-key {KEY}"))
    with pytest.raises(TransportError) as caught:
        complete(make(provider, openai_server))
    assert (caught.value.kind, caught.value.status, caught.value.attempts) == ("http", 401, 1)
    assert KEY not in str(caught.value) and "***" in str(caught.value)
    assert caught.value.client_refused


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (Reply.text("<html>502 Bad Gateway</html>", content_type="application/json"), "invalid_response"),
        (Reply.text("<html>oops</html>"), "invalid_response"),
        (Reply.reset(), "connection"),
        (Reply.truncated(), "connection"),
    ],
    ids=["non-json-200", "html-200", "connection-reset", "truncated-body"],
)
def test_broken_responses_are_transport_errors(
    openai_server: OpenAIServer, provider: str, reply: Reply, kind: str
) -> None:
    openai_server.enqueue(reply, reply)
    with pytest.raises(TransportError) as caught:
        complete(make(provider, openai_server, retry=RetryPolicy(max_retries=1, initial_delay_s=0.01)))
    assert (caught.value.kind, caught.value.attempts) == (kind, 2)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_oversized_body_is_refused_and_not_asked_for_again(openai_server: OpenAIServer, provider: str) -> None:
    openai_server.enqueue(Reply.completion("x" * 5000))
    with pytest.raises(TransportError) as caught:
        complete(make(provider, openai_server, max_response_bytes=2000))
    assert (caught.value.kind, caught.value.attempts) == ("oversized", 1)
    assert len(sent(openai_server)) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_oversized_head_is_refused(openai_server: OpenAIServer, provider: str) -> None:
    completion = Reply.completion("fine")
    openai_server.enqueue(Reply(200, completion.body, {**completion.headers, "X-Filler": "a" * 150_000}))
    with pytest.raises(TransportError) as caught:
        complete(make(provider, openai_server))
    assert (caught.value.kind, caught.value.attempts) == ("oversized", 1)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_hang_times_out_and_a_dead_port_is_unreachable(openai_server: OpenAIServer, provider: str) -> None:
    openai_server.enqueue(Reply.hang())
    with pytest.raises(TransportError) as caught:
        complete(make(provider, openai_server, timeout_s=0.3, retry=RetryPolicy(max_retries=0)))
    assert caught.value.kind == "timeout"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dead = make(provider, openai_server, base_url=f"http://127.0.0.1:{port}")
    with pytest.raises(TransportError) as caught:
        complete(dead)
    assert caught.value.kind == "unreachable"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_missing_key_is_a_user_error_naming_the_variable(monkeypatch: pytest.MonkeyPatch, provider: str) -> None:
    variable = {"anthropic": "ANTHROPIC_API_KEY", "google": "GEMINI_API_KEY"}[provider]
    monkeypatch.delenv(variable)
    with pytest.raises(ApiKeyError, match=variable):
        build_model(f"{provider}:m", cache=False)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_identity_names_the_provider_and_host_and_never_the_key(openai_server: OpenAIServer, provider: str) -> None:
    model = make(provider, openai_server)
    assert model.identity.startswith(f"{provider}:")
    assert model.identity.endswith(f"@{openai_server.root_url}")
    assert KEY not in repr(model) and KEY not in model.identity
    default = build_model(f"{provider}:m", cache=False)
    host = {"anthropic": "https://api.anthropic.com", "google": "https://generativelanguage.googleapis.com"}
    assert default.identity == f"{provider}:m@{host[provider]}"
