"""What each provider's API is known to refuse or leave out of edsb's generation settings, before any request.

A setting a provider refuses for every request is configuration, not the model's failure: where it is knowable
from the model and the settings alone it is a one-line error here (the client's refusal handling covers the rest,
at the first request). Where the paper's default cannot be sent, the reason is written once here, for the note at
the start of a run and for the run card.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from edsb.llm import providers
from edsb.llm.providers import get_provider
from edsb.llm.responses_client import responses_only
from edsb.llm.spec import parse_model_spec


class GenerationSettings(Protocol):
    """The run's generation settings as these rules read them (the planning layer's `GenerationSettings`)."""

    @property
    def temperature(self) -> float | None: ...
    @property
    def json_mode(self) -> bool: ...
    @property
    def reasoning_effort(self) -> str | None: ...
    @property
    def thinking_budget(self) -> int | None: ...
    @property
    def thinking_level(self) -> str | None: ...
    @property
    def reasoning_sent(self) -> bool: ...
    def model_dump(self) -> dict[str, Any]: ...


ANTHROPIC_MIN_THINKING = 1024  # the smallest `budget_tokens` Anthropic's extended thinking accepts
DEFAULT_EFFORT = "not sent: the provider's default effort applies"


def anthropic_api() -> tuple[str | None, bool]:
    """(the Messages API version the installed `anthropic` SDK speaks, whether its requests carry `temperature`);
    (None, True) when the SDK is not installed (building the model then says which extra to install)."""
    api = providers.anthropic_api()
    return (None, True) if api is None else (api[0], "temperature" in api[1])


def _api(model: str) -> str | None:
    spec = parse_model_spec(model)
    return get_provider(spec.kind).api if spec.remote else None


def temperature_not_sent(model: str, settings: Mapping[str, Any]) -> str | None:
    """Why `model` gets no temperature when none is given (None: it gets the paper's)."""
    spec = parse_model_spec(model)
    if spec.remote and spec.target is not None and (why := get_provider(spec.kind).temperature_ignored(spec.target)):
        return why
    if _api(model) != "anthropic":
        return None
    version, takes_temperature = anthropic_api()
    if not takes_temperature:
        return f"Anthropic's Messages API version {version} (the installed anthropic SDK's) has no temperature"
    if settings.get("thinking_budget") is not None:
        return "Anthropic's extended thinking takes only temperature 1, the API's default"
    return None


def provider_refuses(model: str, settings: GenerationSettings) -> str | None:
    """The one-line reason `model`'s API refuses these settings for every request, with the fix; None if none."""
    api = _api(model)
    if api is None:  # a replay asks as its recording did; the embedded model and the oracle have no reasoning
        if settings.reasoning_sent and parse_model_spec(model).kind != "replay":
            return "reasoning settings apply to a provider's models (PROVIDER:<model>), not to this one"
        return None
    if settings.thinking_budget is not None and settings.thinking_level is not None:
        return "pass --thinking-budget or --thinking-level, not both (Gemini takes one of them)"
    if settings.thinking_level is not None and api != "google":
        return "--thinking-level is Gemini 3's setting (google:<model>); use --reasoning-effort here"
    if api in ("openai", "responses") and settings.thinking_budget is not None:
        return "--thinking-budget is Anthropic's and Gemini's setting; use --reasoning-effort here"
    spec = parse_model_spec(model)
    if spec.kind == "openai" and "/" not in (spec.target or "/") and responses_only(spec.target or ""):
        # OpenAI's own name (a router's has an `org/` prefix, and may serve it through chat completions)
        return f"{spec.target} is served only by OpenAI's Responses API: use --model openai-responses:{spec.target}"
    if api == "google" and settings.reasoning_effort is not None:
        return "Gemini takes --thinking-budget (2.5) or --thinking-level (3), not --reasoning-effort"
    ignored = get_provider(spec.kind).temperature_ignored(spec.target or "")
    if ignored is not None and settings.temperature is not None:
        return f"{ignored}: leave out --temperature or pass --temperature default"
    return _anthropic_refuses(parse_model_spec(model).target or "", settings) if api == "anthropic" else None


def _anthropic_refuses(model: str, settings: GenerationSettings) -> str | None:
    version, takes_temperature = anthropic_api()
    thinking = settings.thinking_budget is not None
    if thinking and settings.thinking_budget and providers.claude_refuses_budget(model):
        return (
            f"{model} takes no thinking budget, only adaptive thinking: "
            "pass --reasoning-effort LEVEL instead of --thinking-budget"
        )
    if settings.temperature is not None and not takes_temperature:
        return (
            f"Anthropic's Messages API version {version} (the installed anthropic SDK's) has no temperature: "
            "leave out --temperature or pass --temperature default"
        )
    if thinking and settings.temperature not in (None, 1.0):
        return "Anthropic's extended thinking requires temperature 1: pass --temperature default"
    if thinking and settings.thinking_budget is not None and settings.thinking_budget < ANTHROPIC_MIN_THINKING:
        return f"Anthropic's thinking budget is at least {ANTHROPIC_MIN_THINKING} tokens: raise --thinking-budget"
    return None


def unsent_reasons(model: str, settings: GenerationSettings) -> dict[str, str]:
    """Why each setting the paper's protocol has, or a reasoning control, is not sent to `model`: for the run card."""
    reasons: dict[str, str] = {}
    api = _api(model)
    if settings.temperature is None:
        why = temperature_not_sent(model, settings.model_dump())
        reasons["temperature"] = why or "--temperature default: the provider's default temperature applies"
    if not settings.json_mode:
        reasons["json_mode"] = "--no-json-mode: JSON is asked for in the prompt only"
    elif api == "anthropic":
        reasons["json_mode"] = "Anthropic's Messages API has no JSON mode; JSON is asked for in the prompt only"
    if not settings.reasoning_sent:
        reasons["reasoning"] = DEFAULT_EFFORT
    return reasons
