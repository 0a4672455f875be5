"""The remote providers `--model PROVIDER:MODEL` names, one module each (or a row of one), assembled into one table.

The names, hosts, key variables and token caps are those of the official implementation's LLM client (Lim et al.,
ICCV 2025), so a command written for it names the same models here; today's hosts (OpenRouter, DeepSeek, xAI,
Mistral, Together, Fireworks, Ollama) follow, each with the key variable and host its users know. The hosts that
speak OpenAI's chat completions API share edsb's aiohttp client; Anthropic and Google are reached through their
official SDKs (optional extras). What each provider answers is `base.Provider`'s hooks; adding one is a module (or a
row) here, its line in `PROVIDERS` below and a fake in the tests.
"""

from __future__ import annotations

from edsb.llm.providers import anthropic, azure, deepseek, google, ollama, openai, openai_responses, openrouter
from edsb.llm.providers.anthropic import SDK_MAX_TOKENS, anthropic_api, claude_adaptive, claude_refuses_budget
from edsb.llm.providers.base import Api, Cloud, GenerationSettings, Provider
from edsb.llm.providers.openai import OPENAI_URL

__all__ = [
    "ALIASES",
    "OPENAI_URL",
    "PROVIDERS",
    "SDK_MAX_TOKENS",
    "Api",
    "Cloud",
    "GenerationSettings",
    "Provider",
    "anthropic_api",
    "claude_adaptive",
    "claude_refuses_budget",
    "get_provider",
]

# In the order `--help` lists them: the official implementation's providers, the clouds' routes, today's hosts.
PROVIDERS: dict[str, Provider] = {
    p.name: p
    for p in (
        *openai.ROWS,
        *anthropic.ROWS[:1],
        *google.ROWS[:1],
        *anthropic.ROWS[1:],
        *google.ROWS[1:],
        openai_responses.ROW,
        azure.ROW,
        openrouter.ROW,
        deepseek.ROW,
        *openai.TODAY,
        ollama.ROW,
    )
}
# The reference's `groq-native` calls Groq's own SDK, which posts the very same chat completion to the same host.
ALIASES = {"groq-native": "groq"}


def get_provider(name: str) -> Provider:
    return PROVIDERS[ALIASES.get(name, name)]


def refusal_fixes() -> tuple[tuple[str, str], ...]:
    """Every provider's (phrase, fix) pairs, in the table's order (`refusals.refusal_fix`)."""
    return tuple(pair for provider in PROVIDERS.values() for pair in provider.refusal_fixes())
