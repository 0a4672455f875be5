"""Claude's adaptive thinking: an effort turns it on for Claude 4.6 and later and only sets the effort before; a
budget reaching a model that refuses it (Opus 4.7 and later) is refused by the fake as by the API, naming the
option to change."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from edsb.llm import ChatRequest, RetryPolicy, TransportError
from edsb.llm.providers import claude_adaptive, claude_refuses_budget
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
    ("model", "adaptive", "refuses"),
    [
        ("claude-opus-4-7", True, True),
        ("claude-sonnet-4-6", True, False),
        ("claude-sonnet-4-5-20250929", False, False),
        ("claude-opus-4-20250514", False, False),
        ("claude-opus-4-1-20250805", False, False),
    ],
)
def test_the_dated_table(model: str, adaptive: bool, refuses: bool) -> None:
    assert (claude_adaptive(model), claude_refuses_budget(model)) == (adaptive, refuses)


def test_an_effort_turns_on_adaptive_thinking_from_claude_4_6(monkeypatch: pytest.MonkeyPatch) -> None:
    response, body = ask("claude-sonnet-4-6", monkeypatch, reasoning_effort="medium")
    assert body["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert body["output_config"] == {"effort": "medium"} and response.reasoning == "let me see"
    _, before = ask("claude-sonnet-4-5", monkeypatch, reasoning_effort="medium")
    assert "thinking" not in before and before["output_config"] == {"effort": "medium"}


def test_a_budget_that_reaches_opus_4_7_is_refused_as_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    error, _ = ask("claude-opus-4-7", monkeypatch, thinking_budget=2048)
    assert isinstance(error, TransportError) and error.status == 400
    assert error.setting_refused and not error.request_rejected
    assert error.fix is not None and "--thinking-budget" in error.fix
