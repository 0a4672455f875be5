"""Claude's adaptive thinking: an effort turns it on for Claude 4.6 and later and only sets the effort before; Claude 5
and later think unasked, so edsb asks for it as such, with room beside the answer's; a budget reaching a model that
refuses it (Claude 4.7 and later), or thinking turned off on a model that always thinks, is refused by the fake as by
the API, naming the option to change."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from edsb.llm import ChatRequest, RetryPolicy, TransportError
from edsb.llm.providers.anthropic import (
    ADAPTIVE_ROOM,
    SDK_MAX_TOKENS,
    claude_adaptive,
    claude_always_thinks,
    claude_refuses_budget,
    claude_thinks_by_default,
)
from edsb.llm.sdk_client import AnthropicChatModel
from tests.support.openai_server import OpenAIServer
from tests.support.provider_fakes import anthropic_reply, provider_rules

pytest.importorskip("anthropic")
FAST = RetryPolicy(max_retries=0, initial_delay_s=0.01, jitter=0.0)


def ask(model: str, monkeypatch: pytest.MonkeyPatch, **settings: Any) -> tuple[Any, dict[str, Any]]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "not-a-secret")
    request = ChatRequest(messages=[{"role": "user", "content": "hi"}], temperature=None, **settings)

    async def run() -> Any:
        client = AnthropicChatModel(model, base_url=server.root_url, retry=FAST)
        try:
            return await client.complete(request)
        except TransportError as exc:
            return exc
        finally:
            await client.aclose()

    with OpenAIServer(validator=provider_rules) as server:
        server.enqueue(anthropic_reply("{}", thinking="let me see"))
        outcome = asyncio.run(run())
        body = server.native_requests[-1].json() if server.native_requests else {}
    return outcome, body


@pytest.mark.parametrize(
    ("model", "adaptive", "refuses", "unasked", "always"),
    [
        ("claude-fable-5-1", True, True, True, True),
        ("us.anthropic.claude-fable-5-v1:0", True, True, True, True),  # Bedrock's name
        ("claude-mythos-5-1", True, True, True, True),
        ("claude-opus-5-5", True, True, True, True),
        ("claude-opus-5", True, True, True, False),
        ("claude-sonnet-5-5", True, True, True, False),
        ("claude-sonnet-5", True, True, True, False),
        ("claude-haiku-5-5", True, True, True, False),
        ("claude-opus-4-8", True, True, False, False),
        ("claude-opus-4-7", True, True, False, False),
        ("claude-sonnet-4-6", True, False, False, False),
        ("claude-sonnet-4-5-20250929", False, False, False, False),
        ("claude-haiku-4-5", False, False, False, False),
        ("claude-opus-4-20250514", False, False, False, False),
        ("claude-opus-4-1-20250805", False, False, False, False),
    ],
)
def test_the_dated_table(model: str, adaptive: bool, refuses: bool, unasked: bool, always: bool) -> None:
    found = (claude_adaptive(model), claude_refuses_budget(model), claude_thinks_by_default(model))
    assert (*found, claude_always_thinks(model)) == (adaptive, refuses, unasked, always)


@pytest.mark.parametrize("model", ["claude-opus-5-5", "claude-fable-5-1", "claude-sonnet-5", "claude-haiku-5-5"])
def test_claude_5_thinks_unasked_so_its_thinking_is_asked_for_with_room(
    model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request that says nothing of thinking thinks anyway on Claude 5 and later, within `max_tokens`: edsb asks
    for the same adaptive thinking, summarized, so it is kept as reasoning and the answer keeps its 2,048 tokens."""
    response, body = ask(model, monkeypatch)
    assert body["thinking"] == {"type": "adaptive", "display": "summarized"} and "output_config" not in body
    assert body["max_tokens"] == SDK_MAX_TOKENS + ADAPTIVE_ROOM and response.reasoning == "let me see"


def test_before_claude_5_a_request_without_settings_has_no_thinking(monkeypatch: pytest.MonkeyPatch) -> None:
    _, body = ask("claude-opus-4-8", monkeypatch)
    assert "thinking" not in body and body["max_tokens"] == SDK_MAX_TOKENS


def test_an_effort_turns_on_adaptive_thinking_from_claude_4_6(monkeypatch: pytest.MonkeyPatch) -> None:
    response, body = ask("claude-sonnet-4-6", monkeypatch, reasoning_effort="medium")
    assert body["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert body["output_config"] == {"effort": "medium"} and response.reasoning == "let me see"
    _, before = ask("claude-sonnet-4-5", monkeypatch, reasoning_effort="medium")
    assert "thinking" not in before and before["output_config"] == {"effort": "medium"}


@pytest.mark.parametrize(
    ("model", "settings"),
    [
        ("claude-opus-4-7", {"thinking_budget": 2048}),
        ("claude-sonnet-5", {"thinking_budget": 2048}),  # Claude 4.7 and later, every family
        ("claude-haiku-5-5", {"thinking_budget": 4096}),
        ("claude-fable-5-1", {"thinking_budget": 0}),  # thinking turned off where it is always on
        ("claude-opus-5-5", {"thinking_budget": 0}),
        ("claude-opus-5", {"thinking_budget": 0, "reasoning_effort": "max"}),  # off only at effort high or below
    ],
)
def test_thinking_the_model_refuses_is_refused_as_configuration(
    model: str, settings: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    error, _ = ask(model, monkeypatch, **settings)
    assert isinstance(error, TransportError) and error.status == 400
    assert error.setting_refused and not error.request_rejected
    assert error.fix is not None and "--thinking-budget" in error.fix


def test_opus_5_turns_thinking_off_at_effort_high(monkeypatch: pytest.MonkeyPatch) -> None:
    response, body = ask("claude-opus-5", monkeypatch, thinking_budget=0, reasoning_effort="high")
    assert not isinstance(response, TransportError) and body["thinking"] == {"type": "disabled"}
