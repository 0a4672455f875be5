"""Tokens and cost as the providers bill them: cached input tokens recorded and priced at their own rate, xAI's
reasoning tokens counted as output, OpenRouter's billed cost summed beside the estimate; older records still read."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from edsb.llm import ChatRequest, ChatResponse, OpenAIChatModel, RetryPolicy
from edsb.llm.sdk_client import AnthropicChatModel, GoogleChatModel
from edsb.report.cost import Price, estimate_cost, price_for
from edsb.report.summary import variant_summary
from edsb.report.summary_types import ModuleTokens, Tokens
from edsb.results import RunResult
from edsb.results.migrate import current_result
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.provider_fakes import anthropic_reply, gemini_reply, openai_reply

FAST = RetryPolicy(max_retries=0, initial_delay_s=0.01, jitter=0.0)
REQUEST = ChatRequest(messages=[{"role": "user", "content": "hi"}], temperature=None)


def ask(model: Any) -> ChatResponse:
    async def run() -> ChatResponse:
        try:
            return await model.complete(REQUEST)
        finally:
            await model.aclose()

    return asyncio.run(run())


def ask_openai(server: OpenAIServer, reply: Reply) -> ChatResponse:
    server.enqueue(reply)
    return ask(OpenAIChatModel("m", base_url=server.base_url, retry=FAST))


def test_openai_cached_input_is_recorded(openai_server: OpenAIServer) -> None:
    response = ask_openai(openai_server, openai_reply("{}", usage={"prompt_tokens_details": {"cached_tokens": 20}}))
    assert (response.prompt_tokens, response.cached_tokens) == (30, 20)


def test_xai_reasoning_left_out_of_completion_is_billed_output(openai_server: OpenAIServer) -> None:
    """xAI bills 6,000 reasoning tokens that its `completion_tokens` (179) leaves out: `total_tokens` shows them."""
    usage = {"completion_tokens": 179, "total_tokens": 30 + 179 + 6000}
    response = ask_openai(openai_server, openai_reply("{}", reasoning_tokens=6000, usage=usage))
    assert (response.completion_tokens, response.reasoning_tokens) == (6179, 6000)
    # OpenAI's own total is prompt plus completion: nothing is added.
    plain = ask_openai(openai_server, openai_reply("{}", completion_tokens=40, usage={"total_tokens": 70}))
    assert (plain.completion_tokens, plain.reasoning_tokens) == (40, None)


def test_openrouter_cost_is_kept(openai_server: OpenAIServer) -> None:
    response = ask_openai(openai_server, openai_reply("{}", usage={"cost": 0.00042}))
    assert response.billed_usd == pytest.approx(0.00042)
    assert ask_openai(openai_server, openai_reply("{}")).billed_usd is None


def test_anthropic_cache_reads_and_writes_are_input(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("anthropic")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "not-a-secret")
    with OpenAIServer() as server:
        server.enqueue(anthropic_reply("{}", cache_read=1000, cache_write=200))
        response = ask(AnthropicChatModel("claude-test", base_url=server.root_url, retry=FAST))
    assert (response.prompt_tokens, response.cached_tokens, response.cache_write_tokens) == (1230, 1000, 200)


def test_gemini_cached_content_is_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("google.genai")
    monkeypatch.setenv("GEMINI_API_KEY", "not-a-secret")
    with OpenAIServer() as server:
        server.enqueue(gemini_reply("{}", cached_tokens=25))
        response = ask(GoogleChatModel("gemini-test", base_url=server.root_url, retry=FAST))
    assert (response.prompt_tokens, response.cached_tokens) == (30, 25)


def tokens(**counts: int) -> Tokens:
    module = ModuleTokens(**counts)  # type: ignore[arg-type]
    return Tokens(
        total_prompt=module.prompt,
        total_completion=module.completion,
        by_module={"narrator": module},
        mean_prompt_every_run=0.0,
        mean_completion_every_run=0.0,
    )


def test_cached_input_is_priced_at_its_own_rate() -> None:
    price = price_for("anthropic:claude-sonnet-4-5")
    assert price is not None and price.cached_per_million == 0.30 and price.cache_write_per_million == 3.75
    cost = estimate_cost(tokens(prompt=1_000_000, completion=0, cached=600_000, cache_write=100_000), price)
    assert cost["total"] == pytest.approx(0.3 * 3.00 + 0.6 * 0.30 + 0.1 * 3.75)
    # No cached rate known: cached tokens cost the input price, as before.
    flat = Price(1.0, 2.0, "command line")
    assert estimate_cost(tokens(prompt=1_000_000, completion=1_000_000, cached=500_000), flat)["total"] == 3.0


def test_older_records_and_summaries_still_read() -> None:
    assert ModuleTokens.model_validate({"prompt": 5, "completion": 2}).cached == 0
    line = (
        '{"key": "ours/tc13-d0-r0", "variant": "ours", "case": 13, "distraction": 0, "status": "error", '
        '"error_kind": "request_rejected", "tokens": {"narrator": {"prompt": 3, "completion": 1}}}'
    )
    record = RunResult.model_validate(current_result(json.loads(line)))  # a line of edsb 0.1.0, as read
    assert record.billed_usd is None


def test_billed_cost_is_summed_per_variant() -> None:
    def run(repeat: int, billed: float | None) -> RunResult:
        return RunResult(
            key=f"ours/tc13-d0-r{repeat}",
            variant="ours",
            case=13,
            distraction=0,
            repeat=repeat,
            status="error",
            error_kind="request_rejected",
            sandbox="restricted",
            billed_usd=billed,
        )

    summary = variant_summary([run(0, 0.25), run(1, None), run(2, 0.5)])
    assert summary.tokens is not None and summary.tokens.billed_usd == 0.75
    none = variant_summary([run(0, None)])
    assert none.tokens is not None and none.tokens.billed_usd is None
