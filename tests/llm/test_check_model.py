"""`check_model`: one tiny request, a dict for `edsb check-model`, against loopback and offline."""

from __future__ import annotations

import socket

import pytest

from edsb.llm import RetryPolicy, check_model
from tests.support.openai_server import OpenAIServer, Reply

FAST = RetryPolicy(max_retries=1, initial_delay_s=0.01)


@pytest.fixture(autouse=True)
def _no_ambient_openai_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def test_check_against_a_server(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply.completion('{"ok": true}', prompt_tokens=24, completion_tokens=6, model="served-name"))
    result = check_model("openai:gpt-test", base_url=openai_server.base_url, retry=FAST)
    assert result["ok"] is True
    assert result["model"] == "served-name"
    assert (result["prompt_tokens"], result["completion_tokens"]) == (24, 6)
    assert result["latency_s"] >= 0
    [sent] = openai_server.chat_requests
    assert sent.json()["response_format"] == {"type": "json_object"}
    assert sent.json()["temperature"] == 0.1


def test_check_reports_a_failing_server(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply.error(401, "invalid api key"))
    result = check_model("openai:gpt-test", base_url=openai_server.base_url, retry=FAST)
    assert result == {"ok": False, "model": "openai:gpt-test", "error": "http 401 after 1 attempt: invalid api key"}


def test_check_reports_a_hanging_server(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply.hang(), Reply.hang())
    result = check_model("openai:gpt-test", base_url=openai_server.base_url, timeout=0.3, retry=FAST)
    assert result["ok"] is False
    assert result["error"].startswith("timeout after 2 attempts")


def test_check_reports_user_errors() -> None:
    assert check_model("openai:gpt-4o")["error"].startswith("OPENAI_API_KEY is not set")
    assert "unknown model spec" in check_model("claude")["error"]


def test_check_the_embedded_model_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise OSError("network access during an offline check")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    result = check_model("local")
    assert result["ok"] is True, result
    assert result["model"] == "SmolLM2-135M-Instruct.Q4_1"
    assert result["prompt_tokens"] > 0
    assert 0 < result["completion_tokens"] <= 32
