"""Today's models through the real clients against fakes that refuse what each API refuses
(tests/support/provider_fakes.py): what is sent by default and with each option, what `ChatResponse.sent` records,
and how each documented reply shape is read (reasoning apart from the answer, reasoning tokens inside the completion,
refusals)."""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Iterator
from typing import Any

import pytest

from edsb.llm import ChatRequest, ChatResponse, OpenAIChatModel, RetryPolicy, TransportError
from edsb.llm.remote import RemoteChatModel
from edsb.llm.sdk_client import AnthropicChatModel, GoogleChatModel
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.provider_fakes import anthropic_reply, gemini_reply, no_json_mode, openai_reply, provider_rules

pytest.importorskip("anthropic")
pytest.importorskip("google.genai")

FAST = RetryPolicy(max_retries=1, initial_delay_s=0.01, jitter=0.0)
SYSTEM = {"role": "system", "content": "Answer in JSON."}
USER = {"role": "user", "content": "Where does Ryan go next?"}
ANSWER = '{"event": {"characters": ["Ryan"], "activity": "sits"}}'
API_VERSION = importlib.import_module("anthropic._constants").ANTHROPIC_API_VERSION


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIServer]:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(name, "sk-test-not-real")
    with OpenAIServer(validator=provider_rules) as server:
        yield server


def ask(model: RemoteChatModel, **settings: Any) -> ChatResponse:
    settings = {"temperature": None, "json_mode": True, **settings}

    async def run() -> ChatResponse:
        try:
            return await model.complete(ChatRequest(messages=(SYSTEM, USER), **settings))
        finally:
            await model.aclose()

    return asyncio.run(run())


def refused(model: RemoteChatModel, **settings: Any) -> TransportError:
    with pytest.raises(TransportError) as caught:
        ask(model, **settings)
    return caught.value


def openai(server: OpenAIServer, name: str) -> OpenAIChatModel:
    return OpenAIChatModel(name, base_url=server.base_url, retry=FAST)


def claude(server: OpenAIServer, name: str = "claude-sonnet-4-5") -> AnthropicChatModel:
    return AnthropicChatModel(name, base_url=server.root_url, retry=FAST)


def gemini(server: OpenAIServer, name: str) -> GoogleChatModel:
    return GoogleChatModel(name, base_url=server.root_url, retry=FAST)


def body(server: OpenAIServer) -> dict[str, Any]:
    return server.requests[-1].json()


# OpenAI: reasoning models and the paper's engines


def test_gpt5_by_default_gets_no_temperature_and_no_cap(fake: OpenAIServer) -> None:
    response = ask(openai(fake, "gpt-5"))
    assert set(body(fake)) == {"model", "messages", "response_format"}
    assert response.sent == {"response_format": {"type": "json_object"}}


def test_gpt5_refuses_the_papers_temperature_and_the_fix_is_named(fake: OpenAIServer) -> None:
    error = refused(openai(fake, "gpt-5"), temperature=0.1)
    assert (error.status, error.attempts) == (400, 1)
    assert error.setting_refused and "--temperature default" in (error.fix or "")


def test_reasoning_models_take_the_cap_as_max_completion_tokens_and_an_effort(fake: OpenAIServer) -> None:
    for name in ("gpt-5", "o3", "o4-mini", "openai/gpt-5-mini"):
        response = ask(openai(fake, name), max_tokens=4000, reasoning_effort="low")
        sent = {"response_format": {"type": "json_object"}, "max_completion_tokens": 4000, "reasoning_effort": "low"}
        assert response.sent == sent and "max_tokens" not in body(fake)


def test_the_papers_engines_get_the_papers_settings(fake: OpenAIServer) -> None:
    response = ask(openai(fake, "gpt-4o-2024-08-06"), temperature=0.1, max_tokens=700)
    assert body(fake) == {**body(fake), "temperature": 0.1, "max_tokens": 700}
    assert response.sent == {"temperature": 0.1, "response_format": {"type": "json_object"}, "max_tokens": 700}


@pytest.mark.parametrize(("name", "effort"), [("gpt-4o", "low"), ("o3", "minimal"), ("gpt-5", "extreme")])
def test_an_effort_the_model_lacks_is_refused_with_its_option(fake: OpenAIServer, name: str, effort: str) -> None:
    error = refused(openai(fake, name), reasoning_effort=effort)
    assert error.setting_refused and "--reasoning-effort" in (error.fix or "")


def test_no_json_mode_sends_no_response_format(fake: OpenAIServer) -> None:
    assert ask(openai(fake, "gpt-5"), json_mode=False).sent == {}
    assert "response_format" not in body(fake)


def test_a_thinking_budget_is_not_of_the_chat_completions_api(fake: OpenAIServer) -> None:
    for setting in ({"thinking_budget": 1024}, {"thinking_level": "low"}):
        error = refused(openai(fake, "gpt-5"), **setting)
        assert error.attempts == 0 and error.setting_refused
        assert str(error).startswith("rejected before sending")
    assert fake.requests == []


@pytest.mark.parametrize("status", [400, 405])
def test_a_server_without_json_mode_names_the_option(status: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    with OpenAIServer(validator=no_json_mode(status)) as server:
        error = refused(openai(server, "qwen3-8b"), temperature=0.1)
        assert error.setting_refused and "--no-json-mode" in (error.fix or "")
        assert ask(openai(server, "qwen3-8b"), temperature=0.1, json_mode=False).text == "ok"


def test_reasoning_tokens_are_read_inside_the_completion(fake: OpenAIServer) -> None:
    fake.enqueue(openai_reply(ANSWER, completion_tokens=900, reasoning_tokens=850))
    response = ask(openai(fake, "gpt-5"))
    assert (response.completion_tokens, response.reasoning_tokens) == (900, 850)
    fake.enqueue(openai_reply(ANSWER, completion_tokens=90, reasoning_tokens=60, reasoning_tokens_at_top=True))
    assert ask(openai(fake, "qwen3")).reasoning_tokens == 60  # SGLang's usage
    fake.enqueue(openai_reply(ANSWER))
    assert ask(openai(fake, "gpt-4o")).reasoning_tokens is None  # not reported: not invented


def test_null_content_at_the_length_limit_is_an_empty_answer_cut_by_thinking(fake: OpenAIServer) -> None:
    fake.enqueue(openai_reply(None, completion_tokens=4000, reasoning_tokens=4000, finish_reason="length"))
    response = ask(openai(fake, "gpt-5"), max_tokens=4000)
    assert (response.text, response.finish_reason) == ("", "length")
    assert response.cap_note() == "thinking used 4,000 tokens of the 4,000-token cap"


def test_a_refusal_is_recorded_as_a_refusal(fake: OpenAIServer) -> None:
    fake.enqueue(openai_reply(None, refusal="I can't help with that."))
    response = ask(openai(fake, "gpt-5"))
    assert (response.text, response.refusal) == ("", "I can't help with that.")


# Anthropic


def test_claude_by_default_conforms_to_the_sdks_api_version(fake: OpenAIServer) -> None:
    response = ask(claude(fake))
    marked = [{"type": "text", "text": SYSTEM["content"], "cache_control": {"type": "ephemeral"}}]
    assert body(fake) == {
        "model": "claude-sonnet-4-5",
        "system": marked,  # the system prompt marked for the prompt cache, the same text
        "messages": [USER],
        "max_tokens": 2048,
    }
    assert fake.requests[-1].headers["anthropic-version"] == API_VERSION
    # no JSON mode claimed
    assert response.sent == {"anthropic-version": API_VERSION, "max_tokens": 2048, "cache_control": "ephemeral"}


def test_claude_gets_no_temperature_its_api_version_lacks(fake: OpenAIServer) -> None:
    response = ask(claude(fake), temperature=0.1)
    assert "temperature" not in body(fake) and "temperature" not in response.sent


def test_claude_thinking_adds_its_budget_to_the_answers_room(fake: OpenAIServer) -> None:
    response = ask(claude(fake), thinking_budget=4096, max_tokens=2048)
    assert body(fake)["thinking"] == {"type": "enabled", "budget_tokens": 4096}
    assert body(fake)["max_tokens"] == 6144
    assert response.sent["thinking"] == {"type": "enabled", "budget_tokens": 4096}
    ask(claude(fake), thinking_budget=0)
    assert body(fake)["thinking"] == {"type": "disabled"}


@pytest.mark.parametrize(
    ("settings", "option"),
    [({"thinking_budget": 500}, "--thinking-budget"), ({"reasoning_effort": "extreme"}, "--reasoning-effort")],
)
def test_claude_refuses_what_its_api_refuses(fake: OpenAIServer, settings: dict[str, Any], option: str) -> None:
    error = refused(claude(fake), **settings)
    assert error.status == 400 and error.setting_refused and option in (error.fix or "")


def test_claude_effort_goes_in_output_config(fake: OpenAIServer) -> None:
    assert ask(claude(fake), reasoning_effort="high").sent["output_config"] == {"effort": "high"}


def test_claude_has_no_thinking_level(fake: OpenAIServer) -> None:
    error = refused(claude(fake), thinking_level="low")
    assert error.attempts == 0 and "--thinking-level" in (error.fix or "") and fake.requests == []


def test_claude_thinking_blocks_are_reasoning_never_the_answer(fake: OpenAIServer) -> None:
    thinking = "Draft:\n```python\nget_closest_object('x')\n```"
    fake.enqueue(anthropic_reply(ANSWER, thinking=thinking, redacted=True, output_tokens=700, thinking_tokens=650))
    response = ask(claude(fake), thinking_budget=2048)
    assert response.text == ANSWER
    assert response.reasoning == thinking + "\n\n[redacted thinking]"
    assert response.reasoning_source == "thinking_blocks"
    assert (response.completion_tokens, response.reasoning_tokens) == (700, 650)


def test_claude_refusal_is_recorded(fake: OpenAIServer) -> None:
    fake.enqueue(anthropic_reply("I won't plan that.", stop_reason="refusal"))
    response = ask(claude(fake))
    assert (response.refusal, response.finish_reason) == ("I won't plan that.", "refusal")


# Gemini


def test_gemini_without_thinking_keeps_the_papers_request(fake: OpenAIServer) -> None:
    response = ask(gemini(fake, "gemini-2.0-flash"), temperature=0.1)
    assert body(fake)["generationConfig"] == {
        "temperature": 0.1,
        "maxOutputTokens": 2048,
        "responseMimeType": "application/json",
    }
    assert response.sent == body(fake)["generationConfig"]


@pytest.mark.parametrize("name", ["gemini-2.5-flash", "gemini-2.5-pro", "gemini-3-pro-preview"])
def test_a_thinking_gemini_gets_room_for_thinking_on_top_of_the_answers(fake: OpenAIServer, name: str) -> None:
    response = ask(gemini(fake, name))
    config = body(fake)["generationConfig"]
    assert config["maxOutputTokens"] == 2048 + 32_768
    assert config["thinkingConfig"] == {"include_thoughts": True}  # the model's own thinking, read as reasoning
    assert response.sent["maxOutputTokens"] == 2048 + 32_768
    assert response.sent["thinkingConfig"] == {"includeThoughts": True}


def test_a_gemini_thinking_budget_is_sent_and_added_to_the_cap(fake: OpenAIServer) -> None:
    response = ask(gemini(fake, "gemini-2.5-flash"), thinking_budget=1024)
    assert response.sent["thinkingConfig"] == {"includeThoughts": True, "thinkingBudget": 1024}
    assert response.sent["maxOutputTokens"] == 3072
    assert body(fake)["generationConfig"]["thinkingConfig"] == {"include_thoughts": True, "thinking_budget": 1024}
    response = ask(gemini(fake, "gemini-2.5-flash"), thinking_budget=0)
    assert response.sent["thinkingConfig"] == {"includeThoughts": False, "thinkingBudget": 0}
    assert response.sent["maxOutputTokens"] == 2048


def test_a_gemini_3_thinking_level_is_sent(fake: OpenAIServer) -> None:
    response = ask(gemini(fake, "gemini-3-pro-preview"), thinking_level="low")
    assert response.sent["thinkingConfig"] == {"includeThoughts": True, "thinkingLevel": "LOW"}


@pytest.mark.parametrize(
    ("name", "settings", "option"),
    [
        ("gemini-2.5-pro", {"thinking_budget": 0}, "--thinking-budget"),
        ("gemini-2.5-flash", {"thinking_level": "low"}, "--thinking-level"),
        ("gemini-2.0-flash", {"thinking_budget": 1024}, "--thinking-budget"),
        ("gemini-3-pro-preview", {"thinking_level": "extreme"}, "--thinking-level"),
    ],
)
@pytest.mark.filterwarnings("ignore:extreme is not a valid ThinkingLevel")  # the SDK's own warning, sent anyway
def test_gemini_refuses_what_its_api_refuses(
    fake: OpenAIServer, name: str, settings: dict[str, Any], option: str
) -> None:
    error = refused(gemini(fake, name), **settings)
    assert error.status == 400 and error.setting_refused and option in (error.fix or "")


def test_gemini_has_no_reasoning_effort(fake: OpenAIServer) -> None:
    error = refused(gemini(fake, "gemini-3-pro-preview"), reasoning_effort="low")
    assert error.attempts == 0 and error.setting_refused and "--reasoning-effort" in (error.fix or "")
    assert fake.requests == []


def test_gemini_thought_parts_are_reasoning_and_thinking_is_billed_as_output(fake: OpenAIServer) -> None:
    fake.enqueue(gemini_reply(ANSWER, thoughts="Ryan is tired, so", answer_tokens=40, thoughts_tokens=1200))
    response = ask(gemini(fake, "gemini-2.5-flash"))
    assert (response.text, response.reasoning, response.reasoning_source) == (
        ANSWER,
        "Ryan is tired, so",
        "thought_parts",
    )
    assert (response.completion_tokens, response.reasoning_tokens) == (1240, 1200)


def test_a_gemini_answer_cut_at_the_cap_says_what_thinking_used(fake: OpenAIServer) -> None:
    fake.enqueue(gemini_reply('{"event"', thoughts="...", answer_tokens=2, thoughts_tokens=3070, finish="MAX_TOKENS"))
    response = ask(gemini(fake, "gemini-2.5-flash"), thinking_budget=1024)
    assert response.finish_reason == "MAX_TOKENS"
    assert response.cap_note() == "thinking used 3,070 tokens of the 3,072-token cap"


def test_gemini_safety_stops_are_refusals(fake: OpenAIServer) -> None:
    fake.enqueue(gemini_reply(None, block_reason="SAFETY"))
    response = ask(gemini(fake, "gemini-2.5-flash"))
    assert (response.text, response.refusal) == ("", "prompt blocked: SAFETY: The prompt was blocked.")
    fake.enqueue(gemini_reply("", finish="SAFETY"))
    assert ask(gemini(fake, "gemini-2.5-flash")).refusal == "stopped for SAFETY"


def test_an_unknown_or_malformed_block_is_noted_never_a_crash(fake: OpenAIServer) -> None:
    fake.enqueue(anthropic_reply(ANSWER, thinking=7, extra_blocks=[{"type": "mystery"}]))  # type: ignore[arg-type]
    response = ask(claude(fake))
    assert (response.text, response.reasoning) == (ANSWER, "")
    assert response.reasoning_source == "unreadable: a thinking block, unreadable: a content block of type 'mystery'"


def test_a_gemini_reply_the_sdk_cannot_read_is_no_response_not_a_crash(fake: OpenAIServer) -> None:
    parts = [{"text": 5, "thought": "yes"}]  # the SDK's own response type refuses it
    candidate = {"content": {"parts": parts, "role": "model"}, "finishReason": "STOP"}
    fake.enqueue(Reply.json({"candidates": [candidate]}), Reply.json({"candidates": [candidate]}))
    error = refused(gemini(fake, "gemini-2.5-flash"))
    assert (error.kind, error.attempts) == ("invalid_response", 2)


@pytest.mark.parametrize("field", ["max_completion_tokens", "max_tokens", "max_output_tokens", "maxOutputTokens"])
def test_the_cap_note_finds_the_cap_under_each_apis_name(field: str) -> None:
    """Chat completions, Anthropic, the Responses API and Gemini each name the cap their way: each cut reply says how
    much of the cap thinking used."""
    response = ChatResponse(
        text="", prompt_tokens=9, completion_tokens=512, latency_s=0.1, model="m", finish_reason="length",
        reasoning_tokens=500, sent={field: 512},
    )  # fmt: skip
    assert response.cap_note() == "thinking used 500 tokens of the 512-token cap"
