"""The provider fakes refuse what the real APIs refuse, so a test that passes against them says something: the
Anthropic fake holds a body to the installed SDK's request type, the Gemini fake to the SDK's `GenerationConfig`,
and the OpenAI fake to the reasoning models' rules. Each refusal is the provider's own error shape."""

from __future__ import annotations

import importlib
import json
from typing import Any

import pytest

from tests.support.openai_server import RecordedRequest
from tests.support.provider_fakes import provider_rules

pytest.importorskip("anthropic")
pytest.importorskip("google.genai")

API_VERSION = importlib.import_module("anthropic._constants").ANTHROPIC_API_VERSION
MESSAGES = [{"role": "user", "content": "q"}]


def check(dialect: str, body: dict[str, Any], path: str = "/v1/chat/completions") -> tuple[int, str] | None:
    headers = {"anthropic-version": API_VERSION}
    reply = provider_rules(RecordedRequest("POST", path, headers, json.dumps(body).encode(), 0.0), dialect)  # type: ignore[arg-type]
    if reply is None:
        return None
    error = json.loads(reply.body)["error"]
    return reply.status, error["message"]


CLAUDE = {"model": "claude-sonnet-4-5", "messages": MESSAGES, "max_tokens": 2048}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"temperature": 0.1}, "temperature: Extra inputs are not permitted"),
        ({"response_format": {"type": "json_object"}}, "response_format: Extra inputs are not permitted"),
        ({"thinking": {"type": "enabled", "budget_tokens": 512}}, "greater than or equal to 1024"),
        ({"thinking": {"type": "enabled", "budget_tokens": 4096}}, "`max_tokens` must be greater"),
        ({"output_config": {"effort": "extreme"}}, "output_config.effort"),
        ({"max_tokens": "many"}, "max_tokens"),
    ],
)
def test_the_anthropic_fake_refuses_what_the_api_version_lacks(extra: dict[str, Any], message: str) -> None:
    refusal = check("anthropic", {**CLAUDE, **extra}, "/v1/messages")
    assert refusal is not None and refusal[0] == 400 and message in refusal[1]


ADAPTIVE = {"type": "adaptive"}
OFF = {"type": "disabled"}


@pytest.mark.parametrize(
    ("model", "extra", "message"),
    [
        ("claude-haiku-5-5", {"thinking": {"type": "enabled", "budget_tokens": 1024}}, '"thinking.type.enabled"'),
        ("claude-fable-5-1", {"thinking": OFF}, '"thinking.type.disabled" is not supported'),
        ("claude-opus-5-5", {"thinking": OFF}, '"thinking.type.disabled" is not supported'),
        ("claude-opus-5", {"thinking": OFF, "output_config": {"effort": "xhigh"}}, 'effort "high" or lower'),
        ("claude-sonnet-4-5", {"thinking": ADAPTIVE}, "thinking.type.adaptive is not supported"),
    ],
)
def test_the_anthropic_fake_refuses_the_thinking_each_claude_refuses(
    model: str, extra: dict[str, Any], message: str
) -> None:
    refusal = check("anthropic", {**CLAUDE, "model": model, **extra}, "/v1/messages")
    assert refusal is not None and refusal[0] == 400 and message in refusal[1]


@pytest.mark.parametrize(
    ("model", "thinking", "effort"),
    [
        ("claude-fable-5-1", ADAPTIVE, "max"),
        ("claude-opus-5", OFF, "high"),  # off at effort high or below
        ("claude-sonnet-5", OFF, None),
        ("claude-opus-4-8", OFF, None),
    ],
)
def test_the_anthropic_fake_accepts_the_thinking_each_claude_takes(
    model: str, thinking: dict[str, Any], effort: str | None
) -> None:
    extra = {"output_config": {"effort": effort}} if effort else {}
    body = {**CLAUDE, "model": model, "max_tokens": 18_432, "thinking": thinking, **extra}
    assert check("anthropic", body, "/v1/messages") is None


def test_the_anthropic_fake_accepts_a_conforming_request() -> None:
    thinking = {"type": "enabled", "budget_tokens": 2048}
    assert check("anthropic", {**CLAUDE, "max_tokens": 4096, "thinking": thinking}, "/v1/messages") is None
    assert check("anthropic", {**CLAUDE, "output_config": {"effort": "high"}}, "/v1/messages") is None


@pytest.mark.parametrize(
    ("model", "config", "message"),
    [
        ("gemini-2.5-flash", {"temprature": 0.1}, 'Unknown name "temprature"'),
        ("gemini-2.0-flash", {"thinkingConfig": {"thinkingBudget": 1024}}, "not supported by this model"),
        ("gemini-2.5-pro", {"thinkingConfig": {"thinking_budget": 0}}, "only works in thinking mode"),
        ("gemini-2.5-flash", {"thinkingConfig": {"thinkingLevel": "LOW"}}, "thinkingLevel is not supported"),
        ("gemini-3-pro-preview", {"thinkingConfig": {"thinkingLevel": "LOW", "thinkingBudget": 9}}, "not both"),
        ("gemini-2.5-flash", {"maxOutputTokens": 100_000}, "out of range"),
    ],
)
def test_the_gemini_fake_refuses_what_the_api_refuses(model: str, config: dict[str, Any], message: str) -> None:
    refusal = check("google", {"contents": [], "generationConfig": config}, f"/v1beta/models/{model}:generateContent")
    assert refusal is not None and refusal[0] == 400 and message in refusal[1]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"model": "gpt-5", "temperature": 0.1}, "Only the default (1) value is supported"),
        ({"model": "o3", "max_tokens": 100}, "Use 'max_completion_tokens' instead"),
        ({"model": "o4-mini", "reasoning_effort": "minimal"}, "Supported values are: 'low', 'medium', 'high'"),
        ({"model": "gpt-4o", "reasoning_effort": "low"}, "'reasoning_effort' is not supported with this model"),
        ({"model": "gpt-5.1", "reasoning_effort": "xhigh"}, "Supported values are: 'none', 'low', 'medium', 'high'."),
    ],
)
def test_the_openai_fake_refuses_what_the_api_refuses(body: dict[str, Any], message: str) -> None:
    refusal = check("openai", {"messages": MESSAGES, **body})
    assert refusal is not None and refusal[0] == 400 and message in refusal[1]


def test_the_openai_fake_accepts_what_the_api_accepts() -> None:
    assert (
        check("openai", {"model": "gpt-5", "messages": MESSAGES, "temperature": 1, "max_completion_tokens": 9}) is None
    )
    assert check("openai", {"model": "gpt-4o", "messages": MESSAGES, "temperature": 0.1, "max_tokens": 9}) is None
    assert check("openai", {"model": "gpt-5.5", "messages": MESSAGES, "reasoning_effort": "xhigh"}) is None
