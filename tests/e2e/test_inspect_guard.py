"""The Inspect tasks send edsb's generation settings through Inspect's own options; their guard notices a provider
that drops or changes one in the raw request of every API Inspect routes to (chat completions, the Responses API,
Anthropic's Messages, Gemini), not only in OpenAI-style bodies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from inspect_ai import eval as inspect_eval
from inspect_ai.log import read_eval_log

from edsb.errors import UsageError
from edsb.inspect_tasks.model import altered
from edsb.inspect_tasks.tasks import edsb_table1
from edsb.llm.protocol import ChatRequest, Message
from tests.support.edsb_cli import isolate_environment
from tests.support.openai_server import OpenAIServer

SYSTEM, QUERY = "You plan the characters' next actions.", "The doorbell rings."
MESSAGES = (Message(role="system", content=SYSTEM), Message(role="user", content=QUERY))
PAPER = ChatRequest(messages=MESSAGES, temperature=0.1)
THINKING = ChatRequest(messages=MESSAGES, temperature=None, max_tokens=2048, thinking_budget=4096)
EFFORT = ChatRequest(messages=MESSAGES, temperature=None, max_tokens=900, reasoning_effort="low")
USER = {"role": "user", "content": [{"type": "text", "text": QUERY}]}

CASES: dict[str, tuple[ChatRequest, dict[str, Any], str | None]] = {
    "chat, whole": (
        PAPER,
        {"messages": [{"role": "system", "content": SYSTEM}, USER], "temperature": 0.1},
        None,
    ),
    "chat, system as developer, no temperature": (
        PAPER,
        {"messages": [{"role": "developer", "content": SYSTEM}, USER]},
        "the system message went out as role developer and temperature 0.1 was dropped",
    ),
    "anthropic, temperature dropped": (
        PAPER,
        {"system": [{"type": "text", "text": SYSTEM}], "messages": [USER], "max_tokens": 2048},
        "temperature 0.1 was dropped",
    ),
    "anthropic, thinking kept": (
        THINKING,
        {
            "system": SYSTEM,
            "messages": [USER],
            "max_tokens": 6144,
            "thinking": {"type": "enabled", "budget_tokens": 4096},
        },
        None,
    ),
    "anthropic, thinking dropped": (
        THINKING,
        {"system": SYSTEM, "messages": [USER], "max_tokens": 2048},
        "the thinking budget was dropped",
    ),
    "responses api, effort kept": (
        EFFORT,
        {
            "input": [{"role": "system", "content": [{"type": "input_text", "text": SYSTEM}]}, USER],
            "max_output_tokens": 900,
            "reasoning": {"effort": "low"},
        },
        None,
    ),
    "responses api, developer role and no effort": (
        EFFORT,
        {"instructions": None, "input": [{"role": "developer", "content": SYSTEM}, USER], "max_output_tokens": 900},
        "the system message went out as role developer and the reasoning effort was dropped",
    ),
    "gemini, whole": (
        PAPER,
        {"contents": [USER], "config": {"system_instruction": SYSTEM, "temperature": 0.1}},
        None,
    ),
    "gemini, system left out and temperature changed": (
        PAPER,
        {"contents": [USER], "config": {"temperature": 1.0}},
        "the system message was left out and temperature 0.1 became 1.0",
    ),
}


@pytest.mark.parametrize(("request_", "sent", "problem"), CASES.values(), ids=CASES.keys())
def test_a_setting_lost_on_the_way_is_named(request_: ChatRequest, sent: dict[str, Any], problem: str | None) -> None:
    assert altered(request_, sent) == problem


def test_role_developer_carries_the_system_prompt_only_where_openai_documents_it() -> None:
    """OpenAI's reasoning models take the system prompt as role `developer`; elsewhere it is a lost system prompt."""
    sent = {"input": [{"role": "developer", "content": SYSTEM}, USER], "max_output_tokens": 900, "effort": "low"}
    assert altered(EFFORT, sent, developer=True) is None
    assert altered(EFFORT, sent) == "the system message went out as role developer"
    assert (
        altered(PAPER, {"input": [USER]}, developer=True)
        == "the system message was left out and temperature 0.1 was dropped"
    )


def test_the_tasks_send_edsbs_settings_through_inspects_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`-T temperature=default -T max_tokens=700 -T json_mode=false -T model_seed=5`: no temperature, the cap and the
    seed as Inspect's own options, no JSON mode; recorded in the eval's metadata."""
    isolate_environment(monkeypatch, tmp_path / "cache")
    monkeypatch.setenv("LOOPBACK_API_KEY", "not-a-secret")
    settings = {"temperature": "default", "max_tokens": 700, "json_mode": False, "model_seed": 5}
    with OpenAIServer() as server:  # short replies: execution errors, scored
        (log,) = inspect_eval(
            edsb_table1(cases=13, levels=0, epochs=1, **settings),
            model="openai-api/loopback/scripted",
            model_base_url=server.base_url,
            log_dir=str(tmp_path / "logs"),
            display="none",
            max_retries=0,
        )
        bodies = [request.json() for request in server.chat_requests]
    assert log.status == "success", log.error
    assert bodies and all("temperature" not in b and "response_format" not in b for b in bodies)
    assert all(b.get("max_tokens", b.get("max_completion_tokens")) == 700 and b["seed"] == 5 for b in bodies)
    metadata = read_eval_log(log.location).eval.metadata or {}
    assert (metadata["temperature"], metadata["max_tokens"], metadata["json_mode"]) == (None, 700, False)


def test_an_unknown_task_parameter_is_one_line() -> None:
    with pytest.raises(UsageError, match="unknown task parameter 'temprature' \\(did you mean 'temperature'"):
        edsb_table1(temprature=0.2)
    with pytest.raises(UsageError, match="invalid task parameter reasoning_effort"):
        edsb_table1(reasoning_effort="extreme")
