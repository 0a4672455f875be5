"""Today's hosts by name: each with the key variable and host its users know."""

from __future__ import annotations

import pytest

from edsb.llm import build_model
from edsb.llm.errors import ApiKeyError
from edsb.llm.providers import PROVIDERS

HOSTS = {
    "openrouter": ("OPENROUTER_API_KEY", "https://openrouter.ai/api/v1"),
    "deepseek": ("DEEPSEEK_API_KEY", "https://api.deepseek.com/v1"),
    "xai": ("XAI_API_KEY", "https://api.x.ai/v1"),
    "mistral": ("MISTRAL_API_KEY", "https://api.mistral.ai/v1"),
    "together": ("TOGETHER_API_KEY", "https://api.together.xyz/v1"),
    "fireworks": ("FIREWORKS_API_KEY", "https://api.fireworks.ai/inference/v1"),
}


@pytest.mark.parametrize(("name", "where"), HOSTS.items(), ids=HOSTS.keys())
def test_a_host_asks_for_its_own_key(name: str, where: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    key_env, host = where
    monkeypatch.delenv(key_env, raising=False)
    with pytest.raises(ApiKeyError, match=key_env):
        build_model(f"{name}:some-model", cache=False)
    monkeypatch.setenv(key_env, "not-a-secret")
    assert build_model(f"{name}:some-model", cache=False).identity == f"{name}:some-model@{host}"
    assert PROVIDERS[name].api == "openai"


def test_ollama_on_this_machine_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)
    assert build_model("ollama:qwen3:8b", cache=False).identity == "ollama:qwen3:8b@http://localhost:11434/v1"
