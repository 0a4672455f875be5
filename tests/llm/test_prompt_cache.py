"""Anthropic's prompt cache: the shared prefix (system prompt, example turns) goes out marked, byte for byte the same
text; the cache's reads and writes come back as billed input; `--no-prompt-cache` marks nothing; the response
cache's keys do not depend on the markers."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from edsb.llm import ChatRequest, ChatResponse, RetryPolicy
from edsb.llm.protocol import Message, request_key
from edsb.llm.sdk_client import AnthropicChatModel
from edsb.report.cost import estimate_cost, price_for
from edsb.report.summary_types import ModuleTokens, Tokens
from tests.support.openai_server import OpenAIServer
from tests.support.provider_fakes import AnthropicPromptCache

FAST = RetryPolicy(max_retries=0, initial_delay_s=0.01, jitter=0.0)
SYSTEM = "You narrate events in a scene. " * 200  # about 1,550 tokens: over the cacheable minimum on its own
SHOTS = ("[Scene] a kitchen\n" * 60, '{"event": "cook"}\n' * 30, "[Scene] a hall\n" * 60, '{"event": "wait"}')


def request(query: str) -> ChatRequest:
    turns = [("system", SYSTEM), *zip(("user", "assistant") * 2, SHOTS, strict=True), ("user", query)]
    return ChatRequest(messages=tuple(Message(role=r, content=c) for r, c in turns), temperature=None)


def ask(model: AnthropicChatModel, *requests: ChatRequest) -> list[ChatResponse]:
    async def run() -> list[ChatResponse]:
        try:
            return [await model.complete(one) for one in requests]
        finally:
            await model.aclose()

    return asyncio.run(run())


@pytest.fixture
def claude(monkeypatch: pytest.MonkeyPatch) -> Any:
    pytest.importorskip("anthropic")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "not-a-secret")
    return lambda server, **options: AnthropicChatModel(
        "claude-sonnet-4-5", base_url=server.root_url, retry=FAST, **options
    )


def test_the_shared_prefix_goes_out_marked_with_the_same_text(claude: Any) -> None:
    with OpenAIServer(validator=AnthropicPromptCache()) as server:
        first, second = ask(claude(server), request("[Scene] a study"), request("[Scene] a porch"))
        body = server.native_requests[0].json()
    # 1. Two breakpoints: the system prompt and the last example turn; the text is the very string, in one block.
    assert body["system"] == [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
    *shots, last_shot, query = body["messages"]
    assert last_shot["content"] == [{"type": "text", "text": SHOTS[-1], "cache_control": {"type": "ephemeral"}}]
    assert [turn["content"] for turn in shots] == list(SHOTS[:-1]) and query["content"] == "[Scene] a study"
    # 2. The first request writes the prefix, the second reads it: both billed as input, at their own rates.
    prefix = sum(len(text) // 4 for text in (SYSTEM, *SHOTS))  # the fake's tokens, block by block
    assert (first.cached_tokens, first.cache_write_tokens) == (0, prefix)
    assert (second.cached_tokens, second.cache_write_tokens) == (prefix, 0)
    assert first.prompt_tokens == second.prompt_tokens > prefix  # the whole prompt, whatever the cache did
    assert first.sent["cache_control"] == "ephemeral"


def test_no_prompt_cache_sends_plain_strings(claude: Any) -> None:
    with OpenAIServer(validator=AnthropicPromptCache()) as server:
        (response,) = ask(claude(server, prompt_cache=False), request("[Scene] a study"))
        body = server.native_requests[0].json()
    assert body["system"] == SYSTEM and all(isinstance(turn["content"], str) for turn in body["messages"])
    assert (response.cached_tokens, response.cache_write_tokens) == (0, 0) and "cache_control" not in response.sent


def test_a_lone_query_is_not_marked(claude: Any) -> None:
    lone = ChatRequest(messages=(Message(role="user", content="hi"),), temperature=None)
    with OpenAIServer(validator=AnthropicPromptCache()) as server:
        (response,) = ask(claude(server), lone)
        body = server.native_requests[0].json()
    assert body["messages"] == [{"role": "user", "content": "hi"}] and "system" not in body
    assert "cache_control" not in response.sent


def test_the_fake_refuses_a_fifth_breakpoint() -> None:
    """The fake holds the API's limit, so the markers above are within it."""
    marked = {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}
    body = {"model": "claude-sonnet-4-5", "max_tokens": 8, "messages": [{"role": "user", "content": [marked] * 5}]}
    with OpenAIServer(validator=AnthropicPromptCache()) as server:
        post = urllib.request.Request(
            f"{server.root_url}/v1/messages",
            data=json.dumps(body).encode(),
            headers={"content-type": "application/json", "anthropic-version": _api_version()},
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(post, timeout=10)
    assert "A maximum of 4 blocks" in refused.value.read().decode()


def _api_version() -> str:
    import anthropic

    return anthropic._constants.ANTHROPIC_API_VERSION  # type: ignore[attr-defined]


def test_markers_leave_the_request_key_alone() -> None:
    """The markers are the client's business, never the request's: a cached answer is a hit with or without them,
    for every provider, so OpenAI's keys (the paper's engines) are what they were."""
    assert "prompt_cache" not in ChatRequest.model_fields
    key = request_key("openai:gpt-4o@https://api.openai.com/v1", request("q"))
    assert key == request_key("openai:gpt-4o@https://api.openai.com/v1", request("q"))


def test_cache_reads_and_writes_are_priced_at_their_rates() -> None:
    price = price_for("anthropic:claude-sonnet-4-5")
    assert price is not None
    counts = ModuleTokens(prompt=2_000_000, completion=0, cached=1_000_000, cache_write=500_000)
    tokens = Tokens(
        total_prompt=counts.prompt,
        total_completion=0,
        by_module={"narrator": counts},
        mean_prompt_every_run=0.0,
        mean_completion_every_run=0.0,
    )
    cost = estimate_cost(tokens, price)
    assert cost["total"] == pytest.approx(0.5 * 3.00 + 1.0 * 0.30 + 0.5 * 3.75)
