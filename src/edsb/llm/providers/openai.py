"""OpenAI's chat completions API, and the hosts that speak it as OpenAI does (a row each): the request body, the
reasoning models' token-cap field, the usage as billed, and what OpenAI's own names refuse.

What is sent: the messages, the temperature when one is given, `response_format` `json_object` in JSON mode, the
token cap when one is given (as `max_completion_tokens` to OpenAI's reasoning models, which refuse `max_tokens`),
`reasoning_effort`, `top_p` and `seed` when given. The reply is split into reasoning and answer
(`reasoning.split_message`); the aiohttp client (`openai_client`) carries the bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from edsb.llm.errors import TransportError
from edsb.llm.protocol import ChatRequest
from edsb.llm.providers.base import GenerationSettings, Provider
from edsb.llm.remote import token_count

OPENAI_URL = "https://api.openai.com/v1"
# The models OpenAI serves only through the Responses API, by name, as its model pages give them on 2026-12-01
# (https://platform.openai.com/docs/models): the `-pro` reasoning models, the codex models, deep research.
RESPONSES_ONLY_PRO = ("o1-pro", "o3-pro", "gpt-5-pro", "gpt-5.")
RESPONSES_ONLY_FIX = (
    "the model is served only by OpenAI's Responses API (v1/responses), not by chat completions: "
    "use --model openai-responses:<model>; nothing was scored"
)


def responses_only(model: str) -> bool:
    """Whether OpenAI serves `model` through the Responses API alone (chat completions answers 404)."""
    name = model.rsplit("/", 1)[-1].lower()
    pro = name.startswith(RESPONSES_ONLY_PRO) and ("-pro" in name)
    return pro or "codex" in name or "deep-research" in name


def reasoning_model(model: str) -> bool:
    """OpenAI's reasoning models (the gpt-5 family, o1, o3, o4-mini, under any `org/` prefix): they take the token cap
    as `max_completion_tokens` and a `reasoning_effort`."""
    name = model.rsplit("/", 1)[-1].lower()
    return name.startswith("gpt-5") or (len(name) > 1 and name[0] == "o" and name[1].isdigit())


@dataclass(frozen=True)
class OpenAI(Provider):
    """OpenAI's own host: a model it serves only through the Responses API is refused before any request."""

    def refuses(self, model: str, settings: GenerationSettings) -> str | None:
        refused = super().refuses(model, settings)
        if refused is None and "/" not in model and responses_only(model):
            # OpenAI's own name (a router's has an `org/` prefix, and may serve it through chat completions)
            return f"{model} is served only by OpenAI's Responses API: use --model openai-responses:{model}"
        return refused

    def refusal_fixes(self) -> tuple[tuple[str, str], ...]:
        return (("v1/responses", RESPONSES_ONLY_FIX),)


def chat_body(provider: Provider, model: str, request: ChatRequest) -> dict[str, Any]:
    """The body of a chat completion. Settings left unset are not sent: no temperature means the provider's default.
    A reasoning model gets its cap as `max_completion_tokens`; a thinking budget or level is not of this API."""
    for name, option in (("thinking_budget", "--thinking-budget"), ("thinking_level", "--thinking-level")):
        if getattr(request, name) is not None:
            raise TransportError(
                "rejected",
                f"the chat completions API has no {name}",
                attempts=0,
                fix=f"this API takes --reasoning-effort instead: drop {option}",
            )
    params: dict[str, Any] = {"model": model, "messages": request.messages}  # messages: as they are
    if request.temperature is not None:
        params["temperature"] = request.temperature
    if request.json_mode:
        params["response_format"] = {"type": "json_object"}
    if request.max_tokens is not None:
        cap = provider.cap_field or ("max_completion_tokens" if reasoning_model(model) else "max_tokens")
        params[cap] = request.max_tokens
    for name in ("top_p", "seed", "reasoning_effort"):
        value = getattr(request, name)
        if value is not None:
            params[name] = value
    if provider.effort_object and request.reasoning_effort is not None:
        params["reasoning"] = {"effort": params.pop("reasoning_effort")}
    params.update(provider.body)
    return params


def billed_usage(usage: dict[str, Any]) -> dict[str, Any]:
    """The `ChatResponse` token fields of a chat completion's usage, as billed: the cached input tokens
    (`prompt_tokens_details.cached_tokens`), OpenRouter's `cost`, and, where `total_tokens` exceeds prompt plus
    completion (xAI leaves its reasoning tokens out of `completion_tokens` and bills them as output), the difference
    as output reasoning."""
    prompt = token_count(usage.get("prompt_tokens"), "usage.prompt_tokens")
    completion = token_count(usage.get("completion_tokens"), "usage.completion_tokens")
    reasoning = _reasoning_tokens(usage)
    total = usage.get("total_tokens")
    hidden = token_count(total, "usage.total_tokens") - prompt - completion if total is not None else 0
    if hidden > 0:
        completion += hidden
        reasoning = max(reasoning or 0, hidden)
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    cost = usage.get("cost")
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "reasoning_tokens": reasoning,
        "cached_tokens": None if cached is None else token_count(cached, "usage.prompt_tokens_details.cached_tokens"),
        "billed_usd": float(cost)
        if isinstance(cost, int | float) and not isinstance(cost, bool) and cost >= 0
        else None,
    }


def _reasoning_tokens(usage: dict[str, Any]) -> int | None:
    """The reasoning tokens inside `completion_tokens`: OpenAI's `completion_tokens_details.reasoning_tokens`, else
    SGLang's and vLLM's `reasoning_tokens`; None when the server does not say."""
    details = usage.get("completion_tokens_details")
    if isinstance(details, dict) and details.get("reasoning_tokens") is not None:
        return token_count(details["reasoning_tokens"], "usage.completion_tokens_details.reasoning_tokens")
    if usage.get("reasoning_tokens") is not None:
        return token_count(usage["reasoning_tokens"], "usage.reasoning_tokens")
    return None


# OpenAI, and the hosts of the official implementation's client that speak its API as it does.
ROWS = (
    OpenAI("openai", "openai", "OPENAI_API_KEY", OPENAI_URL, batch="openai"),
    Provider("deepinfra", "openai", "DEEPINFRA_API_TOKEN", "https://api.deepinfra.com/v1/openai"),
    Provider("groq", "openai", "GROQ_API_KEY", "https://api.groq.com/openai/v1"),
    Provider("cerebras", "openai", "CEREBRAS_API_KEY", "https://api.cerebras.ai/v1"),
    Provider("lepton", "openai", "LEPTON_API_TOKEN", "https://{model}.lepton.run/api/v1"),
)
# Today's hosts that differ from OpenAI only in their name, key variable and host.
TODAY = (
    Provider("xai", "openai", "XAI_API_KEY", "https://api.x.ai/v1"),
    Provider("mistral", "openai", "MISTRAL_API_KEY", "https://api.mistral.ai/v1"),
    Provider("together", "openai", "TOGETHER_API_KEY", "https://api.together.xyz/v1"),
    Provider("fireworks", "openai", "FIREWORKS_API_KEY", "https://api.fireworks.ai/inference/v1"),
)
