"""`check_model`: one tiny request, a dict for `edsb check-model`, against loopback and offline."""

from __future__ import annotations

import json
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
    assert (result["model"], result["served_model"]) == ("openai:gpt-test", "served-name")  # as a failure names it
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
    assert (result["model"], result["served_model"]) == ("local", "SmolLM2-135M-Instruct.Q4_1")
    assert result["prompt_tokens"] > 0
    assert 0 < result["completion_tokens"] <= 32


PROVIDER_KEYS = {
    "deepinfra": "DEEPINFRA_API_TOKEN",
    "groq": "GROQ_API_KEY",
    "cerebras": "CEREBRAS_API_KEY",
    "lepton": "LEPTON_API_TOKEN",
    "anthropic": "ANTHROPIC_API_KEY",
    "google": "GEMINI_API_KEY",
}


@pytest.mark.parametrize("provider", sorted(PROVIDER_KEYS))
def test_check_every_provider_through_the_cli_without_showing_its_key(
    openai_server: OpenAIServer, provider: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.support.edsb_cli import run_edsb

    secret = f"sk-{provider}-0123456789abcdef"
    monkeypatch.setenv(PROVIDER_KEYS[provider], secret)
    url = openai_server.root_url if provider in ("anthropic", "google") else openai_server.base_url
    openai_server.enqueue(Reply.completion('{"ok": true}', prompt_tokens=24, completion_tokens=6))
    assert run_edsb("check-model", "--model", f"{provider}:m", "--base-url", url) == 0
    printed = capsys.readouterr()
    assert '"ok": true' in printed.out and '"prompt_tokens": 24' in printed.out
    assert json.loads(printed.out)["model"] == f"{provider}:m"  # named as the failure below names it
    openai_server.enqueue(Reply.error(401, f"bad key {secret}"))
    assert run_edsb("check-model", "--model", f"{provider}:m", "--base-url", url) == 1
    printed = capsys.readouterr()
    assert "http 401" in printed.err and json.loads(printed.out)["model"] == f"{provider}:m"
    assert secret not in printed.out + printed.err
    [first, _] = openai_server.requests
    assert secret in first.headers.get("authorization", "") + first.headers.get("x-api-key", "") + first.headers.get(
        "x-goog-api-key", ""
    )


def test_check_names_the_providers_key_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEEPINFRA_API_TOKEN", raising=False)
    assert check_model("deepinfra:meta-llama/Meta-Llama-3.1-70B-Instruct")["error"].startswith(
        "DEEPINFRA_API_TOKEN is not set"
    )
