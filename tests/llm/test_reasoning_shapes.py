"""Every documented way a server hands back reasoning is split off the answer; a reply without reasoning markup is the
answer byte for byte; a shape edsb cannot read is noted, never a crash; reasoning of any size is bounded. Through
the OpenAI-compatible client against the loopback server (vLLM, SGLang, DeepSeek, OpenRouter, Mistral shapes), and
through `edsb run`: a reasoning model whose reasoning drafts a wrong code block is judged on its answer."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from edsb.data.benchmark import Benchmark
from edsb.llm import ChatRequest, ChatResponse, OpenAIChatModel, RetryPolicy, read_transcripts
from edsb.llm.reasoning import REASONING_CHARS, split_think
from tests.support.edsb_cli import run_edsb
from tests.support.openai_server import OpenAIServer, RecordedRequest, Reply
from tests.support.provider_fakes import openai_reply
from tests.support.run_dir import records_by_key
from tests.support.scripted_planner import ScriptedPlanner

ANSWER = '{"event": {"characters": ["Ryan"], "activity": "sits"}}'
DRAFT = "Let me draft:\n```python\ndef parse_event():\n    get_closest_object('no_such_object')\n```\nNo, better:"


def ask(server: OpenAIServer, reply: Reply) -> ChatResponse:
    server.enqueue(reply)

    async def run() -> ChatResponse:
        model = OpenAIChatModel("deepseek-r1", base_url=server.base_url, retry=RetryPolicy(max_retries=0))
        try:
            return await model.complete(ChatRequest(messages=[{"role": "user", "content": "q"}], temperature=0.6))
        finally:
            await model.aclose()

    return asyncio.run(run())


@pytest.mark.parametrize(
    ("reply", "reasoning", "source"),
    [
        (openai_reply(f"<think>\n{DRAFT}\n</think>\n\n{ANSWER}"), DRAFT, "think_tags"),
        (openai_reply(f"{DRAFT}\n</think>\n\n{ANSWER}"), DRAFT, "think_tags"),  # opened in the prompt
        (openai_reply(ANSWER, reasoning_content=DRAFT), DRAFT, "reasoning_content"),
        (openai_reply(ANSWER, reasoning=DRAFT), DRAFT, "reasoning"),
        (
            openai_reply(ANSWER, reasoning=DRAFT, reasoning_details=[{"type": "reasoning.text", "text": DRAFT}]),
            DRAFT,
            "reasoning",
        ),
        (
            openai_reply(ANSWER, reasoning_details=[{"type": "reasoning.text", "text": DRAFT}]),
            DRAFT,
            "reasoning_details",
        ),
        (
            openai_reply(
                [{"type": "thinking", "thinking": [{"type": "text", "text": DRAFT}]}, {"type": "text", "text": ANSWER}]
            ),
            DRAFT,
            "content_parts",
        ),
    ],
    ids=["think-block", "closing-tag-only", "reasoning_content", "reasoning", "openrouter-both", "details", "mistral"],
)
def test_reasoning_is_split_off_the_answer(
    openai_server: OpenAIServer, reply: Reply, reasoning: str, source: str
) -> None:
    response = ask(openai_server, reply)
    assert (response.text, response.reasoning, response.reasoning_source) == (ANSWER, reasoning, source)


@pytest.mark.parametrize(
    "text",
    [ANSWER, "  leading space kept\n", "a <think> in the middle is prose", "", "```python\nx = '</thin'\n```"],
)
def test_a_reply_without_reasoning_markup_is_unchanged(openai_server: OpenAIServer, text: str) -> None:
    response = ask(openai_server, Reply.completion(text))
    assert (response.text, response.reasoning, response.reasoning_source) == (text, "", None)


def test_a_reply_cut_while_thinking_has_no_answer() -> None:
    split = split_think("<think>\nRyan should first")
    assert (split.answer, split.reasoning, split.source) == ("", ["Ryan should first"], "think_tags")


@pytest.mark.parametrize(
    ("message", "text", "source"),
    [
        ({"content": ANSWER, "reasoning": 42}, ANSWER, "unreadable: reasoning is a number"),
        ({"content": ANSWER, "reasoning_details": "x"}, ANSWER, "unreadable: reasoning_details is a string"),
        ({"content": {"text": ANSWER}}, "", "unreadable: content is an object"),
        (
            {"content": [{"type": "image_url"}, {"type": "text", "text": ANSWER}]},
            ANSWER,
            "unreadable: a content part of type 'image_url'",
        ),
        ({"content": [7]}, "", "unreadable: a content part"),
    ],
)
def test_an_unknown_or_malformed_shape_is_noted_never_a_crash(
    openai_server: OpenAIServer, message: dict[str, Any], text: str, source: str
) -> None:
    payload = json.loads(Reply.completion("unused").body)
    payload["choices"][0]["message"] = {"role": "assistant", **message}
    response = ask(openai_server, Reply.json(payload))
    assert (response.text, response.reasoning_source) == (text, source)


def test_reasoning_of_any_size_is_bounded(openai_server: OpenAIServer) -> None:
    huge = "thinking " * 1_000_000  # 9 MB
    response = ask(openai_server, openai_reply(ANSWER, reasoning_content=huge))
    assert response.text == ANSWER
    assert response.reasoning.startswith("thinking thinking")
    assert REASONING_CHARS < len(response.reasoning) < REASONING_CHARS + 40
    assert response.reasoning.endswith(f"[{len(huge) - REASONING_CHARS:,} more characters]")


class ThinkingPlanner(ScriptedPlanner):
    """The scripted model as a reasoning model without a reasoning parser on the server: every reply opens with a
    `<think>` block that drafts a failing code block (a KeyError if it were run)."""

    def __call__(self, request: RecordedRequest) -> Reply:
        reply = super().__call__(request)
        payload = json.loads(reply.body)
        if "choices" in payload:
            message = payload["choices"][0]["message"]
            message["content"] = f"<think>\n{DRAFT}\n</think>\n\n{message['content']}"
        return Reply.json(payload, status=reply.status)


def _verdicts(out: Path) -> dict[str, tuple[Any, ...]]:
    return {key: (r["status"], r.get("error_kind"), r.get("reason")) for key, r in records_by_key(out).items()}


def test_a_reasoning_model_is_judged_on_its_answer(
    benchmark: Benchmark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EDSB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    selection = ("--cases", "13,60", "--distraction", "0-2", "--repeats", "1", "--quiet", "--no-cache")
    outs = {}
    for name, planner in (("plain", ScriptedPlanner(benchmark)), ("thinking", ThinkingPlanner(benchmark))):
        outs[name] = tmp_path / name
        with OpenAIServer(planner) as server:
            args = ("run", "--model", "openai:deepseek-r1", "--base-url", server.base_url, "--out", outs[name])
            assert run_edsb(*args, *selection) == 0
    assert _verdicts(outs["thinking"]) == _verdicts(outs["plain"])
    assert {status for status, *_ in _verdicts(outs["plain"]).values()} >= {"passed", "error"}
    records = read_transcripts(outs["thinking"])
    assert records and all(r.response and r.response.reasoning == DRAFT for r in records)
    assert {r.response.reasoning_source for r in records if r.response} == {"think_tags"}  # says it was removed
